//! Seeded random playouts on any [`Machine`].

use crate::{Machine, MachineError, MoveIdx, Rng, RoleIdx};

/// The result of one playout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Playout {
    /// The goal of each role at the state the playout ended in, in role order.
    pub goals: Vec<u32>,
    /// The number of joint moves played.
    pub depth: u32,
    /// Whether the playout ended in a non-terminal state where a role had no legal move (a
    /// dead end of the game's rules, see [`Stall`]) rather than in a terminal state.
    pub stalled: bool,
}

/// What a playout does on reaching a non-terminal state in which some role has no legal move.
///
/// The game's rules then give no joint move, so the game cannot go on. Some real games have
/// such dead ends (in the corpus, 4pffa leaves a role without a move in some reachable
/// positions). [`Stall::End`] ends the playout there, which is what a Monte Carlo search or a
/// throughput benchmark wants: the rollout counts, with the goals of that state, and is
/// reported as stalled. [`Stall::Error`] treats it as a flaw of the game and fails, for users
/// who want to be told.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Stall {
    /// The playout ends in that state: its joint moves so far count as state changes, and the
    /// goals are read in that state, a role without a goal value there scoring 0 (non-terminal
    /// states need not define goals). A role with several values is treated as the
    /// [`GoalRule`](crate::GoalRule) says, as in a terminal state. `propjet bench` and
    /// `propjet perf-test` use this.
    #[default]
    End,
    /// The playout fails with [`PlayoutError::NoLegalMove`].
    Error,
}

/// Why a playout did not reach a terminal state with well-defined goals.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlayoutError {
    /// A role had no legal move in a non-terminal state (with [`Stall::Error`]).
    #[error("role {role} has no legal move at depth {depth} in a non-terminal state")]
    NoLegalMove {
        /// The role without a move.
        role: String,
        /// The number of joint moves played before that state.
        depth: u32,
    },
    /// The playout reached `max_depth` joint moves without a terminal state.
    #[error("no terminal state within {0} steps")]
    DepthLimit(u32),
    /// The machine refused a step, or the terminal state's goals were not well defined.
    #[error(transparent)]
    Machine(#[from] MachineError),
}

/// Plays from `start` to a terminal state, each role choosing uniformly among its legal moves
/// (one `Rng::below` draw per role per step, in role order), and returns the goals and depth.
/// A state where a role has no legal move is an error ([`Stall::Error`]); see
/// [`random_playout_with`] to end the playout there instead.
pub fn random_playout<M: Machine + ?Sized>(
    machine: &M,
    start: &M::State,
    rng: &mut Rng,
    max_depth: u32,
) -> Result<Playout, PlayoutError> {
    random_playout_with(machine, start, rng, max_depth, Stall::Error)
}

/// [`random_playout`] with a choice of what a dead end (a non-terminal state where a role has
/// no legal move) does: with [`Stall::End`] the playout ends there, its goals read in that
/// state (0 for a role without a goal value) and [`Playout::stalled`] set. A role with several
/// goal values in the final state is an error, as [`Machine::goals`] says.
pub fn random_playout_with<M: Machine + ?Sized>(
    machine: &M,
    start: &M::State,
    rng: &mut Rng,
    max_depth: u32,
    stall: Stall,
) -> Result<Playout, PlayoutError> {
    let walk = random_walk(machine, start, rng, max_depth, stall)?;
    let goals = if walk.stalled {
        (0..machine.roles().len())
            .map(|r| {
                let values = machine.goal_values(&walk.state, RoleIdx::from_index(r));
                match values.as_slice() {
                    [] => Ok(0),
                    [v] => Ok(*v),
                    _ => Err(MachineError::GoalNotUnique {
                        role: machine.roles()[r].clone(),
                        values,
                    }),
                }
            })
            .collect::<Result<_, _>>()?
    } else {
        machine.goals(&walk.state)?
    };
    Ok(Playout {
        goals,
        depth: walk.depth,
        stalled: walk.stalled,
    })
}

/// Where the moves of a random playout led.
pub(crate) struct Walk<S> {
    /// The terminal state reached, or the dead end when `stalled`.
    pub state: S,
    /// The number of joint moves played.
    pub depth: u32,
    /// Whether the walk stopped at a dead end.
    pub stalled: bool,
}

/// The moves of [`random_playout_with`]: the state reached and the number of joint moves.
pub(crate) fn random_walk<M: Machine + ?Sized>(
    machine: &M,
    start: &M::State,
    rng: &mut Rng,
    max_depth: u32,
    stall: Stall,
) -> Result<Walk<M::State>, PlayoutError> {
    let mut state = start.clone();
    let mut joint: Vec<MoveIdx> = Vec::with_capacity(machine.roles().len());
    let mut depth = 0;
    while !machine.is_terminal(&state) {
        if depth == max_depth {
            return Err(PlayoutError::DepthLimit(max_depth));
        }
        joint.clear();
        for r in 0..machine.roles().len() {
            let legal = machine.legal_moves(&state, RoleIdx::from_index(r));
            if legal.is_empty() {
                // Draws already made for earlier roles do not matter: the rollout ends here,
                // and every engine stops it at the same state.
                return match stall {
                    Stall::End => Ok(Walk {
                        state,
                        depth,
                        stalled: true,
                    }),
                    Stall::Error => Err(PlayoutError::NoLegalMove {
                        role: machine.roles()[r].clone(),
                        depth,
                    }),
                };
            }
            joint.push(legal[rng.below(legal.len() as u32) as usize]);
        }
        state = machine.next_state_unchecked(&state, &joint)?;
        depth += 1;
    }
    Ok(Walk {
        state,
        depth,
        stalled: false,
    })
}
