//! What the grounder hands to the propnet builder: ground atoms and ground rules.
//!
//! A ground program is the game's rules instantiated over the atoms that can ever hold. Static
//! relations (those that depend neither on `true` nor on `does`) are evaluated exactly and folded
//! away: no body literal names one. `distinct` is folded away too. What remains are rules whose
//! heads are dynamic atoms and whose bodies are conjunctions of `true`, `does` and dynamic view
//! atoms, some negated.

use std::fmt;
use std::time::Duration;

/// A ground atom, numbered densely from 0.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct AtomId(pub u32);

impl AtomId {
    /// The id as a `usize`, for indexing `Grounded::atoms`.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Builds the id from a position in `Grounded::atoms`.
    #[inline]
    pub fn from_index(i: usize) -> Self {
        AtomId(u32::try_from(i).expect("more than 2^32 ground atoms"))
    }
}

impl fmt::Display for AtomId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a{}", self.0)
    }
}

/// What a ground atom is in the game.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum AtomKind {
    /// `(true F)`: a base fact. `GroundAtom::text` is `F`.
    True,
    /// `(does R M)`: an input. `text` is `M`; `role` indexes `Grounded::roles`.
    Does {
        /// The role that makes the move.
        role: u32,
    },
    /// `(next F)`. `text` is `F`.
    Next,
    /// `(legal R M)`. `text` is `M`.
    Legal {
        /// The role whose move it is.
        role: u32,
    },
    /// `(goal R V)` with `V` a natural number. `text` is the whole atom, `(goal R V)`.
    Goal {
        /// The role.
        role: u32,
        /// The goal value.
        value: u32,
    },
    /// `terminal`. `text` is `terminal`.
    Terminal,
    /// Any other dynamic relation. `text` is the whole atom in canonical KIF, `(line x)`.
    View,
}

/// One ground atom.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct GroundAtom {
    /// Its kind.
    pub kind: AtomKind,
    /// Its canonical KIF text, as described at each [`AtomKind`].
    pub text: String,
}

/// A body literal of a ground rule.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct GroundLit {
    /// The atom.
    pub atom: AtomId,
    /// Whether the literal is `(not atom)`.
    pub negated: bool,
}

/// `head ⇐ body₁ ∧ … ∧ bodyₙ`. An empty body means the head always holds.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct GroundRule {
    /// The head: never of kind `True` or `Does`.
    pub head: AtomId,
    /// The body, with no repeated literal.
    pub body: Vec<GroundLit>,
}

/// A ground program.
///
/// Invariants the builder relies on:
/// - every atom of kind `True` that can ever hold is here: each `init` fact and each fact of a
///   `Next` atom has a `True` atom with the same text, even if no rule reads it;
/// - every `Legal` atom has a `Does` atom with the same role and text, and the other way round
///   only where the move can be legal (a `Does` atom without a `Legal` one is never played);
/// - atoms that are heads of no rule and are not `True` or `Does` are false;
/// - there is at most one atom per (kind, role, text).
#[derive(Clone, Debug, Default)]
pub struct Grounded {
    /// Role names in the order of the `role` facts, canonical KIF.
    pub roles: Vec<String>,
    /// All ground atoms.
    pub atoms: Vec<GroundAtom>,
    /// All ground rules, heads in any order.
    pub rules: Vec<GroundRule>,
    /// The `True` atoms that hold in the initial state.
    pub init: Vec<AtomId>,
}

/// Budgets for grounding. Hitting one is a [`GroundError::Limit`], never an out-of-memory crash.
#[derive(Clone, Debug)]
pub struct GroundLimits {
    /// Ground atoms of all relations together, static ones included.
    pub max_atoms: usize,
    /// Ground rules produced by instantiation.
    pub max_rules: usize,
    /// Total body literals over all ground rules.
    pub max_literals: usize,
    /// Wall-clock time for the whole grounding.
    pub max_time: Duration,
}

impl Default for GroundLimits {
    fn default() -> Self {
        GroundLimits {
            max_atoms: 4_000_000,
            max_rules: 4_000_000,
            max_literals: 40_000_000,
            max_time: Duration::from_secs(120),
        }
    }
}
