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

impl crate::graph::Vertex for AtomId {
    #[inline]
    fn index(self) -> usize {
        AtomId::index(self)
    }
}

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

/// A body literal of a ground rule, packed in one `u32`: the atom's number shifted left by one,
/// and the low bit set when the literal is negated. Literals order by atom, then positive before
/// negated; chess's ground program holds tens of millions of them, so half the size of an
/// `(AtomId, bool)` pair matters.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroundLit(u32);

impl GroundLit {
    /// The largest atom number a literal can hold; the grounder stops with a limit before it.
    pub const MAX_ATOM: u32 = u32::MAX >> 1;

    /// The literal `atom`, or `(not atom)` when `negated`. `atom` must be at most
    /// [`GroundLit::MAX_ATOM`]; a larger one is truncated (checked in debug builds).
    #[inline]
    pub fn new(atom: AtomId, negated: bool) -> Self {
        debug_assert!(atom.0 <= Self::MAX_ATOM, "atom {atom} does not fit a literal");
        GroundLit(atom.0 << 1 | negated as u32)
    }

    /// The atom.
    #[inline]
    pub fn atom(self) -> AtomId {
        AtomId(self.0 >> 1)
    }

    /// Whether the literal is `(not atom)`.
    #[inline]
    pub fn negated(self) -> bool {
        self.0 & 1 == 1
    }
}

impl fmt::Debug for GroundLit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negated() {
            write!(f, "(not {})", self.atom())
        } else {
            write!(f, "{}", self.atom())
        }
    }
}

/// `head ⇐ body₁ ∧ … ∧ bodyₙ`, one rule of [`GroundRules`] as seen through it. An empty body
/// means the head always holds.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct GroundRule<'a> {
    /// The head: never of kind `True` or `Does`.
    pub head: AtomId,
    /// The body, with no repeated literal.
    pub body: &'a [GroundLit],
}

/// The rules of a ground program, stored compactly: every body's literals one after another
/// in one array, with the end of each rule's body and its head in two more. Chess's 10.9
/// million rules took about 700 MB as a vector each; here they take a tenth of that.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct GroundRules {
    heads: Vec<AtomId>,
    /// Where each rule's body ends in `lits`; it starts where the previous one ends.
    ends: Vec<u32>,
    lits: Vec<GroundLit>,
}

impl GroundRules {
    /// The most body literals all rules together can hold; the grounder stops with a limit
    /// before it.
    pub const MAX_LITERALS: usize = u32::MAX as usize;

    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of rules.
    #[inline]
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether there is no rule.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The number of body literals of all rules together.
    #[inline]
    pub fn literals(&self) -> usize {
        self.lits.len()
    }

    /// Adds `head ⇐ body` as it is (no sorting, no removal of repeats). Returns the rule's
    /// number, or `None` (adding nothing) when the literals would exceed
    /// [`GroundRules::MAX_LITERALS`].
    pub fn push(&mut self, head: AtomId, body: &[GroundLit]) -> Option<usize> {
        let end = u32::try_from(self.lits.len() + body.len()).ok()?;
        self.lits.extend_from_slice(body);
        self.ends.push(end);
        self.heads.push(head);
        Some(self.heads.len() - 1)
    }

    /// Rule `i`, which must be below [`GroundRules::len`].
    #[inline]
    pub fn get(&self, i: usize) -> GroundRule<'_> {
        GroundRule {
            head: self.heads[i],
            body: self.body(i),
        }
    }

    /// The head of rule `i`.
    #[inline]
    pub fn head(&self, i: usize) -> AtomId {
        self.heads[i]
    }

    /// The body of rule `i`.
    #[inline]
    pub fn body(&self, i: usize) -> &[GroundLit] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.lits[start..self.ends[i] as usize]
    }

    /// The rules in order.
    pub fn iter(&self) -> GroundRulesIter<'_> {
        GroundRulesIter { rules: self, next: 0 }
    }

    /// Sorts the rules by head and then body (so that the program does not depend on the order
    /// rules were made in) and removes repeated rules. The rules are rewritten into new arrays
    /// and the old ones freed, so for a moment both are held.
    pub fn sort_dedup(&mut self) {
        // A counting sort by head of the runs of consecutive rules with one head, which keeps
        // the order of each head's rules: the grounder settles an atom's rules all at once,
        // sorted by body and without repeats, so most heads have one run, in order already,
        // whose literals are copied in one piece. A comparison sort of chess's 4.5 million
        // rules took a quarter of a second on the one thread left at the end of grounding; a
        // counting sort of the rules one by one about 100 ms.
        let n = self.heads.len();
        let heads = self.heads.iter().map(|h| h.index() + 1).max().unwrap_or(0);
        // Where each run starts, and the end of the last.
        let mut runs: Vec<u32> = Vec::new();
        for i in 0..n {
            if i == 0 || self.heads[i] != self.heads[i - 1] {
                runs.push(i as u32);
            }
        }
        let nruns = runs.len();
        runs.push(n as u32);
        let mut start = vec![0u32; heads + 1];
        for &r in &runs[..nruns] {
            start[self.heads[r as usize].index() + 1] += 1;
        }
        for i in 0..heads {
            start[i + 1] += start[i];
        }
        let mut order = vec![0u32; nruns];
        let mut fill = start.clone();
        for (k, &r) in runs[..nruns].iter().enumerate() {
            let h = self.heads[r as usize].index();
            order[fill[h] as usize] = k as u32;
            fill[h] += 1;
        }
        drop(fill);
        let lit_start = |i: usize| if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let mut out = GroundRules {
            heads: Vec::with_capacity(n),
            ends: Vec::with_capacity(n),
            lits: Vec::with_capacity(self.lits.len()),
        };
        let mut group: Vec<u32> = Vec::new();
        for h in 0..heads {
            let head_runs = &order[start[h] as usize..start[h + 1] as usize];
            if let [k] = *head_runs {
                let (a, b) = (runs[k as usize] as usize, runs[k as usize + 1] as usize);
                if (a + 1..b).all(|i| self.body(i - 1) < self.body(i)) {
                    // In order and without repeats: the run as it is, its literals in one piece.
                    let (from, to) = (lit_start(a), self.ends[b - 1] as usize);
                    let base = out.lits.len() as i64 - from as i64;
                    out.lits.extend_from_slice(&self.lits[from..to]);
                    out.heads.extend_from_slice(&self.heads[a..b]);
                    // The total cannot grow by removing rules, so the ends always fit.
                    out.ends
                        .extend(self.ends[a..b].iter().map(|&e| (e as i64 + base) as u32));
                    continue;
                }
            }
            // The head's rules in the order they came, sorted by body, without repeats.
            group.clear();
            for &k in head_runs {
                group.extend(runs[k as usize]..runs[k as usize + 1]);
            }
            let sorted = group
                .windows(2)
                .all(|w| self.body(w[0] as usize) < self.body(w[1] as usize));
            if !sorted {
                group.sort_unstable_by(|&a, &b| self.body(a as usize).cmp(self.body(b as usize)));
                group.dedup_by(|a, b| self.body(*a as usize) == self.body(*b as usize));
            }
            for &r in &group {
                out.push(self.heads[r as usize], self.body(r as usize));
            }
        }
        *self = out;
    }
}

impl fmt::Debug for GroundRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a GroundRules {
    type Item = GroundRule<'a>;
    type IntoIter = GroundRulesIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The rules of a [`GroundRules`] in order.
#[derive(Clone, Debug)]
pub struct GroundRulesIter<'a> {
    rules: &'a GroundRules,
    next: usize,
}

impl<'a> Iterator for GroundRulesIter<'a> {
    type Item = GroundRule<'a>;

    fn next(&mut self) -> Option<GroundRule<'a>> {
        if self.next == self.rules.len() {
            return None;
        }
        self.next += 1;
        Some(self.rules.get(self.next - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rules.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for GroundRulesIter<'_> {}

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
    pub rules: GroundRules,
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
            if let Some(l) = r.body.iter().find(|l| l.atom().index() >= n) {
                return Err(format!("rule {k} reads atom {} out of range", l.atom()));
            }
            let mut body: Vec<GroundLit> = r.body.to_vec();
            body.sort_unstable();
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
    /// Ground rules produced by instantiation (an atom identified with another counts one
    /// rule). The default leaves room for chess, the largest corpus game, at about 5 million
    /// (11 million before atoms with equal definitions were identified).
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
