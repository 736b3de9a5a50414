//! The [`Machine`] trait that every engine implements.

use crate::{FactIdx, MoveIdx, RoleIdx};
use std::fmt::Debug;
use std::hash::Hash;

/// What a machine refuses to do, or a state it cannot answer for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// A joint move must hold exactly one move per role.
    #[error("a joint move needs {expected} moves (one per role), got {got}")]
    WrongMoveCount {
        /// The number of roles.
        expected: usize,
        /// The number of moves given.
        got: usize,
    },
    /// The move is not one of this machine's moves, or belongs to another role.
    #[error("move index {mv} is not a move of role {role}")]
    UnknownMove {
        /// The role the move was given for.
        role: String,
        /// The offending index.
        mv: MoveIdx,
    },
    /// The move is a move of the role, but not legal in this state.
    #[error("move {mv} is not legal for role {role} in this state")]
    IllegalMove {
        /// The role the move was given for.
        role: String,
        /// The move in canonical KIF.
        mv: String,
    },
    /// A role has no goal value, or several, in a state where one was asked for.
    #[error("role {role} has {} goal values in this state ({values:?}), not exactly one", values.len())]
    GoalNotUnique {
        /// The role.
        role: String,
        /// Every value `(goal role v)` holds for, sorted.
        values: Vec<u32>,
    },
    /// The evaluator of the game's opaque atoms failed (in this call or an earlier one).
    #[error("the opaque evaluator failed: {0}")]
    Opaque(String),
    /// A role index out of range.
    #[error("role index {0} is out of range")]
    UnknownRole(RoleIdx),
}

/// A game engine: it knows the game's roles, its initial state, and for any state the legal
/// moves, the next state under a joint move, whether the state is terminal and the goals.
///
/// Indices are the machine's own: a [`MoveIdx`] or [`FactIdx`] from one machine means nothing to
/// another, so compare engines by name ([`Machine::move_name`], [`Machine::fact_name`]).
pub trait Machine {
    /// A game state. Cheap to clone and comparable, so a search tree can store and dedupe it.
    type State: Clone + Eq + Hash + Debug;

    /// A short name of the engine, such as `reference`.
    fn engine_name(&self) -> &'static str;

    /// The roles in the order of the game's `role` facts, in canonical KIF.
    fn roles(&self) -> &[String];

    /// The index of a role given by name (canonical KIF, case-insensitive).
    fn role_index(&self, name: &str) -> Option<RoleIdx> {
        let name = name.to_ascii_lowercase();
        self.roles()
            .iter()
            .position(|r| *r == name)
            .map(RoleIdx::from_index)
    }

    /// The state fixed by the game's `init` facts.
    fn initial_state(&self) -> Self::State;

    /// The base facts that hold in `state`, sorted by index.
    fn state_facts(&self, state: &Self::State) -> Vec<FactIdx>;

    /// A base fact in canonical KIF, without the outer `true`: `(cell 1 1 x)`.
    fn fact_name(&self, fact: FactIdx) -> String;

    /// The legal moves of `role` in `state`, sorted by index. Empty for an unknown role.
    fn legal_moves(&self, state: &Self::State, role: RoleIdx) -> Vec<MoveIdx>;

    /// A move's action in canonical KIF, without role: `(mark 1 1)`, `noop`.
    fn move_name(&self, mv: MoveIdx) -> String;

    /// The move of `role` whose action is `name` (canonical KIF; case and spacing are
    /// normalized), if the machine knows it.
    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx>;

    /// The state after `joint` (one move per role, in role order) is played in `state`.
    /// Checks the number of moves, that each belongs to its role, and that each is legal.
    fn next_state(&self, state: &Self::State, joint: &[MoveIdx]) -> Result<Self::State, MachineError> {
        for (r, &mv) in joint.iter().enumerate() {
            let role = RoleIdx::from_index(r);
            if r < self.roles().len() && !self.legal_moves(state, role).contains(&mv) {
                return Err(MachineError::IllegalMove {
                    role: self.roles()[r].clone(),
                    mv: self.move_name(mv),
                });
            }
        }
        self.next_state_unchecked(state, joint)
    }

    /// The state after `joint`, without checking legality. An illegal move gives a state that may
    /// be meaningless, never undefined behaviour; a wrong number of moves or a move of another
    /// role is still an error.
    fn next_state_unchecked(
        &self,
        state: &Self::State,
        joint: &[MoveIdx],
    ) -> Result<Self::State, MachineError>;

    /// Whether `state` is terminal.
    fn is_terminal(&self, state: &Self::State) -> bool;

    /// Every value `v` for which `(goal role v)` holds in `state`, sorted ascending.
    fn goal_values(&self, state: &Self::State, role: RoleIdx) -> Vec<u32>;

    /// The goal of every role in `state`, in role order. A role with no goal value or with
    /// several is an error, not a guess.
    fn goals(&self, state: &Self::State) -> Result<Vec<u32>, MachineError> {
        (0..self.roles().len())
            .map(|r| {
                let values = self.goal_values(state, RoleIdx::from_index(r));
                match values.as_slice() {
                    [v] => Ok(*v),
                    _ => Err(MachineError::GoalNotUnique {
                        role: self.roles()[r].clone(),
                        values,
                    }),
                }
            })
            .collect()
    }
}
