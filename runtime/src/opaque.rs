//! [`Opaque`]: the evaluator of the opaque atoms of a program (`doc/opaque.md`), values that
//! the net does not compute because their relation could not be grounded.

use std::fmt::Debug;

/// Why an opaque evaluator could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("opaque atom {atom}: {reason}")]
pub struct OpaqueError {
    /// The atom asked about, in canonical KIF.
    pub atom: String,
    /// What went wrong (a budget ran out, the atom is not a term of the game, ...).
    pub reason: String,
}

/// Computes the values of opaque atoms in one state.
///
/// An engine built for a program with opaque slots is given one, and calls it once per state
/// with the atoms the state demands (`Program::opaque`), before it runs an entry that reads
/// them. Implementations must be deterministic: the same state and atom always give the same
/// value, or engines running the same game disagree.
pub trait Opaque: Send + Sync + Debug {
    /// `bases` is the state, bit `i` for base `i` in layout order; for each opaque atom index in
    /// `wanted` (ascending), writes its value to the same position of `out`.
    fn eval(&self, bases: &[u64], wanted: &[u32], out: &mut [bool]) -> Result<(), OpaqueError>;
}
