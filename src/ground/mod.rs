//! Grounding: from a checked [`Description`] to a ground program over the atoms that can ever
//! hold (see `doc/grounding.md`).

mod eliminate;
mod eval;
mod grounder;
mod join;
mod magic;
mod normalize;
mod passed;
mod project;
mod terms;
#[cfg(test)]
mod tests;
mod types;

pub use eval::{GroundMachine, GroundState, OpaqueOracle};
pub use grounder::{DeriveCost, GroundStats, RuleCost, MAX_TERM_DEPTH};
pub use types::{
    AtomId, AtomKind, GroundAtom, GroundLimits, GroundLit, GroundOptions, GroundRule, GroundRules,
    GroundRulesIter, Grounded,
};

use crate::gdl::Description;

/// Why grounding stopped.
#[derive(Debug, thiserror::Error)]
pub enum GroundError {
    /// A budget of [`GroundLimits`] was reached while `relation` grew, or an atom nested deeper
    /// than [`MAX_TERM_DEPTH`] was derived (`term_depth`): a recursion that builds ever larger
    /// terms.
    #[error("grounding limit reached: {limit} = {value} while grounding `{relation}`")]
    Limit {
        /// Which limit (`max_atoms`, `max_rules`, `max_literals`, `max_time`, `term_depth`).
        limit: &'static str,
        /// The limit's value (for `max_time`, milliseconds).
        value: u64,
        /// The relation (`name/arity`) being grounded when the limit was hit.
        relation: String,
    },
    /// The game uses something the grounder does not support, said in `message`.
    #[error("line {line}, column {col}: {message}")]
    Unsupported {
        /// Line of the construct, from 1.
        line: u32,
        /// Column of the construct, from 1.
        col: u32,
        /// What is not supported.
        message: String,
    },
    /// A bug: an invariant of the grounder failed.
    #[error("internal grounder error (a bug): {0}")]
    Internal(String),
}

/// Grounds `desc` within `limits`.
pub fn ground(desc: &Description, limits: &GroundLimits) -> Result<Grounded, GroundError> {
    ground_with_stats(desc, limits).map(|(g, _)| g)
}

/// [`ground`], also returning how the work went (sizes and the time of each phase).
pub fn ground_with_stats(
    desc: &Description,
    limits: &GroundLimits,
) -> Result<(Grounded, GroundStats), GroundError> {
    ground_with_options(desc, limits, &GroundOptions::default())
}

/// [`ground_with_stats`] with the choices of `options` (opaque relations).
pub fn ground_with_options(
    desc: &Description,
    limits: &GroundLimits,
    options: &GroundOptions,
) -> Result<(Grounded, GroundStats), GroundError> {
    let mut g = grounder::Grounder::new(desc, limits, options)?;
    g.fixpoint()?;
    g.eliminate()?;
    g.instantiate()
}

/// [`ground`] with the joins of instantiation on `threads` threads, those that read no
/// settled identity handed out at once (`run_ahead`) or with their component.
#[cfg(test)]
fn ground_with_join_threads(
    desc: &Description,
    limits: &GroundLimits,
    threads: usize,
    run_ahead: bool,
) -> Result<Grounded, GroundError> {
    let mut g = grounder::Grounder::new(desc, limits, &GroundOptions::default())?;
    g.join_threads = threads;
    g.run_ahead = run_ahead;
    g.fixpoint()?;
    g.eliminate()?;
    g.instantiate().map(|(g, _)| g)
}

/// [`ground_with_stats`] with the joins of every round of the fixpoint that has variants of
/// several relations on `threads` threads, and every variant of a round of one relation cut
/// into parts on them, however little it has to do.
#[cfg(test)]
fn ground_with_derive_threads(
    desc: &Description,
    limits: &GroundLimits,
    threads: usize,
) -> Result<(Grounded, GroundStats), GroundError> {
    let mut g = grounder::Grounder::new(desc, limits, &GroundOptions::default())?;
    g.derive_threads = threads;
    g.parallel_round = 0;
    g.split_variant = 0;
    g.fixpoint()?;
    g.eliminate()?;
    g.instantiate()
}
