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
    /// A call of an opaque relation ([`GroundOptions::opaque`]): its value is a function of the
    /// state computed outside the ground program, by top-down evaluation of the relation's
    /// rules over the state's `true` facts. It is the head of no rule. `text` is the whole atom
    /// in canonical KIF, `(dfs (n e 5) (wall a b 1 2) a)`.
    Opaque,
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
/// - atoms that are heads of no rule and are not `True`, `Does` or `Opaque` are false;
/// - `Opaque` atoms are heads of no rule (their values come from outside, per state);
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

impl Grounded {
    /// Checks the invariants listed at [`Grounded`], and that every id names an atom and every
    /// role index a role. Returns the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        use std::collections::HashSet;
        let n = self.atoms.len();
        let roles = self.roles.len() as u32;
        let mut seen = HashSet::new();
        let mut state = HashSet::new();
        let mut moves = HashSet::new();
        for a in &self.atoms {
            let role = match a.kind {
                AtomKind::Does { role } | AtomKind::Legal { role } | AtomKind::Goal { role, .. } => {
                    Some(role)
                }
                _ => None,
            };
            if role.is_some_and(|r| r >= roles) {
                return Err(format!("atom {} names role {role:?} of {roles}", a.text));
            }
            if !seen.insert((a.kind, a.text.as_str())) {
                return Err(format!("atom {} ({:?}) appears twice", a.text, a.kind));
            }
            match a.kind {
                AtomKind::True => {
                    state.insert(a.text.as_str());
                }
                AtomKind::Does { role } => {
                    moves.insert((role, a.text.as_str()));
                }
                _ => {}
            }
        }
        for a in &self.atoms {
            match a.kind {
                AtomKind::Next if !state.contains(a.text.as_str()) => {
                    return Err(format!("next atom {} has no true atom", a.text));
                }
                AtomKind::Legal { role } if !moves.contains(&(role, a.text.as_str())) => {
                    return Err(format!("legal atom {} has no does atom", a.text));
                }
                _ => {}
            }
        }
        for &i in &self.init {
            match self.atoms.get(i.index()) {
                Some(a) if a.kind == AtomKind::True => {}
                _ => return Err(format!("initial atom {i} is not a true atom")),
            }
        }
        for (k, r) in self.rules.iter().enumerate() {
            let Some(head) = self.atoms.get(r.head.index()) else {
                return Err(format!("rule {k} has head {} out of range", r.head));
            };
            if matches!(
                head.kind,
                AtomKind::True | AtomKind::Does { .. } | AtomKind::Opaque
            ) {
                return Err(format!("rule {k} defines {} ({:?})", head.text, head.kind));
            }
            if let Some(l) = r.body.iter().find(|l| l.atom.index() >= n) {
                return Err(format!("rule {k} reads atom {} out of range", l.atom));
            }
            let mut body: Vec<GroundLit> = r.body.clone();
            body.sort_unstable_by_key(|l| (l.atom, l.negated));
            body.dedup();
            if body.len() != r.body.len() {
                return Err(format!("rule {k} repeats a literal"));
            }
        }
        Ok(())
    }
}

/// Budgets for grounding. Hitting one is a [`GroundError::Limit`], never an out-of-memory crash.
#[derive(Clone, Debug)]
pub struct GroundLimits {
    /// Ground atoms of all relations together, static ones included.
    pub max_atoms: usize,
    /// Ground rules produced by instantiation. The default leaves room for chess, the largest
    /// corpus game, at about 11 million.
    pub max_rules: usize,
    /// Total body literals over all ground rules.
    pub max_literals: usize,
    /// Wall-clock time for the whole grounding. The default, five minutes, lets chess ground
    /// on a busy machine (about a minute alone, four with three other builds running).
    pub max_time: Duration,
}

impl Default for GroundLimits {
    fn default() -> Self {
        GroundLimits {
            max_atoms: 4_000_000,
            max_rules: 16_000_000,
            max_literals: 40_000_000,
            max_time: Duration::from_secs(300),
        }
    }
}

/// Choices of how to ground, beside the budgets (see `doc/opaque.md`).
#[derive(Clone, Debug, Default)]
pub struct GroundOptions {
    /// Relations, written `name/arity`, that are left opaque: their rules are not grounded, and
    /// each call of them the game can make becomes an atom of kind [`AtomKind::Opaque`], whose
    /// value per state must come from a top-down evaluation of the relation outside the net.
    /// Each must depend on the state and not on the moves, and every call of it must have all
    /// its arguments bound; otherwise grounding fails with `Unsupported`.
    pub opaque: Vec<String>,
}
