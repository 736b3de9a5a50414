//! Seeded random playouts on any [`Machine`].

use crate::{Machine, MachineError, MoveIdx, Rng, RoleIdx};

/// The result of one playout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Playout {
    /// The goal of each role at the terminal state, in role order.
    pub goals: Vec<u32>,
    /// The number of joint moves played.
    pub depth: u32,
}

/// Why a playout did not reach a terminal state with well-defined goals.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlayoutError {
    /// A role had no legal move in a non-terminal state.
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
pub fn random_playout<M: Machine + ?Sized>(
    machine: &M,
    start: &M::State,
    rng: &mut Rng,
    max_depth: u32,
) -> Result<Playout, PlayoutError> {
    let (state, depth) = random_walk(machine, start, rng, max_depth)?;
    Ok(Playout {
        goals: machine.goals(&state)?,
        depth,
    })
}

/// The moves of [`random_playout`]: the terminal state reached and the number of joint moves.
pub(crate) fn random_walk<M: Machine + ?Sized>(
    machine: &M,
    start: &M::State,
    rng: &mut Rng,
    max_depth: u32,
) -> Result<(M::State, u32), PlayoutError> {
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
                return Err(PlayoutError::NoLegalMove {
                    role: machine.roles()[r].clone(),
                    depth,
                });
            }
            joint.push(legal[rng.below(legal.len() as u32) as usize]);
        }
        state = machine.next_state_unchecked(&state, &joint)?;
        depth += 1;
    }
    Ok((state, depth))
}
