//! Relations, their indexes, join plans and the join itself.
//!
//! A relation is the list of its atoms (term ids) in the order they were derived, so that the
//! atoms derived in one round of a semi-naive iteration form a contiguous range of positions.
//! An index hashes each atom on the values found at some positions of it ("probes"): the
//! functor at a function-term position, or the whole term at a position the join knows.
//! Buckets hold atom positions in increasing order, so restricting a lookup to a range of
//! rounds is a matter of where to start and stop in the bucket. Hash collisions only cost time:
//! every candidate is unified with the literal in full.

use super::normalize::{AtomPat, Conj, Item, Pat, RelId};
use super::terms::{same_ids, TermId, TermStore, TOUCH, UNBOUND};
use hashbrown::HashTable;
use rustc_hash::FxHashMap;
use std::hash::Hasher;
use std::rc::Rc;
use std::time::Instant;

/// A place inside an atom: the argument, then the argument of that, and so on.
type Path = Box<[u8]>;

/// What an index reads at a path.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Probe {
    path: Path,
    /// The functor and arity (true) or the whole term (false).
    functor: bool,
}

/// Where a lookup key's value comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KeySrc {
    /// A functor and arity, encoded.
    Const(u64),
    /// A ground term.
    Term(TermId),
    /// The value of a bound variable.
    Var(u32),
}

fn functor_code(sym: crate::gdl::Symbol, arity: usize) -> u64 {
    (u64::from(sym.0) << 32) | arity as u64
}

fn finish(h: rustc_hash::FxHasher) -> u64 {
    let x = h.finish();
    x ^ (x >> 31)
}

/// The most atoms a relation may have for planning to build an index just to estimate a cost.
const SMALL_RELATION: usize = 4096;

/// How many lookups of `Step::HeadKnown` an adaptive join (`Exec::head_lookup_adaptive`)
/// makes before it decides whether to go on looking heads up: it stops when fewer than an
/// eighth of them held.
const LOOKUP_SAMPLE: u32 = 256;

/// Marks the end of a bucket chain.
const NIL: u32 = u32::MAX;

/// An index of one relation. Each bucket is a chain through the atom positions, newest first:
/// a scan of the last round's atoms stops as soon as it reaches an older one.
pub(crate) struct Index {
    probes: Box<[Probe]>,
    /// How many of the relation's atoms are indexed.
    upto: usize,
    /// How many of those have every probed path (the others can never match).
    included: usize,
    /// The newest atom position of each bucket.
    heads: FxHashMap<u64, u32>,
    /// For each atom position, the next older position in its bucket.
    older: Vec<u32>,
    /// Whether a plan has used it (rather than planning only having estimated with it).
    used: bool,
    /// Whether the probes read every argument of the relation's atoms, each whole (decided at
    /// the first atom, `None` before): a lookup then names one atom, which the term store
    /// can find, with its position in the relation ([`TermStore::position`]).
    shape_whole: Option<bool>,
    /// Whether lookups go to the term store, the index keeping no buckets: for an index of
    /// that shape once the relation has `WHOLE_ROWS` atoms. In chess the guards of the ray
    /// relations are existence tests of 6-ary atoms, and indexing their 262,144 atoms each in
    /// a hash map as large as the relation was half of the time the fixpoint spent bringing
    /// indexes up to date.
    whole: bool,
}

/// The fewest atoms of a relation for an index of every argument to look its atoms up in the
/// term store rather than in buckets of its own. A small index stays in the cache, where its
/// lookups are cheaper than the term table's (racer4's fixpoint, whose existence tests read
/// relations of at most 21,000 atoms, took 8 % more time without buckets); a large one is a
/// cache miss either way, and building it costs a hash map insertion per atom.
const WHOLE_ROWS: usize = 1 << 16;

impl Index {
    fn new(probes: &[Probe]) -> Index {
        Index {
            probes: probes.into(),
            upto: 0,
            included: 0,
            heads: FxHashMap::default(),
            older: Vec::new(),
            used: false,
            shape_whole: None,
            whole: false,
        }
    }

    /// Indexes the atoms of `rows` not indexed yet. `rows` is a prefix of the relation: the
    /// fixpoint indexes only the atoms of the round's bounds (see [`Relation::index`]).
    fn catch_up(&mut self, rows: &[TermId], store: &TermStore) {
        if self.upto >= rows.len() {
            return;
        }
        let whole = *self.shape_whole.get_or_insert_with(|| {
            // Every atom of a relation has its arity.
            let arity = store.args(rows[0]).len();
            self.probes.len() == arity
                && self
                    .probes
                    .iter()
                    .enumerate()
                    .all(|(i, p)| !p.functor && *p.path == [i as u8])
        });
        if whole && rows.len() >= WHOLE_ROWS {
            // Every atom has every probed path, and each lookup finds at most one.
            self.whole = true;
            self.heads = FxHashMap::default();
            self.older = Vec::new();
            self.included = rows.len();
            self.upto = rows.len();
            return;
        }
        'rows: for (pos, &row) in rows.iter().enumerate().skip(self.upto) {
            let mut h = rustc_hash::FxHasher::default();
            for p in self.probes.iter() {
                let mut t = row;
                for &i in p.path.iter() {
                    match store.args(t).get(i as usize) {
                        Some(&a) => t = a,
                        None => {
                            self.older.push(NIL);
                            continue 'rows;
                        }
                    }
                }
                if p.functor {
                    h.write_u64(functor_code(store.functor(t), store.args(t).len()));
                } else {
                    h.write_u64(u64::from(t));
                }
            }
            self.included += 1;
            let prev = self.heads.insert(finish(h), pos as u32).unwrap_or(NIL);
            self.older.push(prev);
        }
        self.upto = rows.len();
    }

    /// The average number of atoms a lookup finds.
    fn average_bucket(&self) -> f64 {
        if self.whole {
            // What the buckets said: as many buckets as atoms, different atoms having
            // different keys.
            return if self.included == 0 { 0.0 } else { 1.0 };
        }
        if self.heads.is_empty() {
            0.0
        } else {
            self.included as f64 / self.heads.len() as f64
        }
    }
}

/// A relation: its atoms in the order they were added, and its indexes.
#[derive(Default)]
pub(crate) struct Relation {
    pub rows: Vec<TermId>,
    indexes: Vec<Index>,
}

impl Relation {
    /// The index with these probes, made and brought up to date with the first `n` atoms as
    /// needed. A join reads no atom past the bounds of its round (`Bounds::all`), and indexing
    /// only up to them keeps what planning sees (the average bucket) a function of the round's
    /// bounds, not of what the round's earlier rules have added since.
    fn index(&mut self, probes: &[Probe], store: &TermStore, n: usize) -> usize {
        let i = match self.indexes.iter().position(|ix| *ix.probes == *probes) {
            Some(i) => i,
            None => {
                self.indexes.push(Index::new(probes));
                self.indexes.len() - 1
            }
        };
        self.indexes[i].catch_up(&self.rows[..n], store);
        i
    }

    /// The expected number of atoms a lookup with these probes finds among the first `n`
    /// atoms (the round's bounds). An existing index (or a new one, for a small relation) says
    /// exactly; for a large relation without one, each known value is assumed to keep a tenth
    /// of the atoms, so that planning does not build indexes it may never use.
    fn estimate(&mut self, probes: &[Probe], store: &TermStore, n: usize) -> f64 {
        if probes.is_empty() {
            return n as f64;
        }
        // Indexes made while the relation was small only to estimate costs would otherwise be
        // kept up to date for ever. (The fixpoint drops them at the start of each round, see
        // `Relation::drop_unused`, so that no index moves while the round's plans hold its
        // number; this is then a no-op there.)
        self.drop_unused(n);
        if let Some(ix) = self.indexes.iter_mut().find(|ix| *ix.probes == *probes) {
            ix.catch_up(&self.rows[..n], store);
            return ix.average_bucket();
        }
        if n <= SMALL_RELATION {
            let ix = self.index(probes, store, n);
            return self.indexes[ix].average_bucket();
        }
        let values = probes.iter().filter(|p| !p.functor).count();
        (n as f64 * 0.1f64.powi(values as i32)).max(1.0)
    }

    /// Drops the indexes that only planning made, to estimate, when the relation has more
    /// than `SMALL_RELATION` of its first `n` atoms: planning no longer makes an index to
    /// estimate for such a relation, and keeping them up to date would cost for ever.
    pub fn drop_unused(&mut self, n: usize) {
        if n > SMALL_RELATION {
            self.indexes.retain(|ix| ix.used);
        }
    }

    /// Each of the relation's indexes that is behind its first `n` atoms, with those atoms: the
    /// work [`catch_up_all`] can share out before a round's plans are made.
    pub fn behind(&mut self, n: usize) -> impl Iterator<Item = Behind<'_>> {
        let rows = &self.rows[..n];
        self.indexes
            .iter_mut()
            .filter(move |ix| ix.upto < n)
            .map(move |ix| (ix, rows))
    }

    /// Bytes held by the indexes, roughly.
    pub fn bytes(&self) -> usize {
        self.rows.capacity() * 4
            + self
                .indexes
                .iter()
                .map(|ix| ix.heads.capacity() * 16 + ix.older.capacity() * 4)
                .sum::<usize>()
    }
}

/// An index that is behind, and the atoms it is to take in (see [`Relation::behind`]).
pub(crate) type Behind<'r> = (&'r mut Index, &'r [TermId]);

/// Brings the indexes of `behind` (see [`Relation::behind`]) up to date, on up to `threads`
/// threads when there are at least `min_rows` atoms to index in all. An index holds the same
/// after this as after being brought up to date with the same atoms later, when a plan
/// first reads it, so this changes no plan; it only does the work for a round's plans at
/// once, several indexes side by side, rather than one after another while each plan is made.
pub(crate) fn catch_up_all(mut behind: Vec<Behind>, store: &TermStore, threads: usize, min_rows: usize) {
    let rows = |(ix, r): &Behind| r.len() - ix.upto;
    let total: usize = behind.iter().map(rows).sum();
    if threads <= 1 || behind.len() <= 1 || total < min_rows {
        for (ix, r) in behind {
            ix.catch_up(r, store);
        }
        return;
    }
    // The largest first, each to the thread with the least work so far.
    behind.sort_by_key(|b| std::cmp::Reverse(rows(b)));
    let mut parts: Vec<(usize, Vec<Behind>)> = (0..threads).map(|_| (0, Vec::new())).collect();
    for b in behind {
        let part = parts
            .iter_mut()
            .min_by_key(|(work, _)| *work)
            .expect("at least one thread");
        part.0 += rows(&b);
        part.1.push(b);
    }
    std::thread::scope(|s| {
        let mut parts = parts.into_iter().map(|(_, p)| p);
        let mine = parts.next().expect("at least one thread");
        for part in parts {
            s.spawn(move || {
                for (ix, r) in part {
                    ix.catch_up(r, store);
                }
            });
        }
        for (ix, r) in mine {
            ix.catch_up(r, store);
        }
    });
}

/// The probes a literal can use when the variables in `bound` are known, with where each
/// lookup value comes from. Function terms are probed by functor on the way down, so an index
/// of `(true (cell ?x ?y ?z))` splits the state by the functor of the fact.
fn probes_of(args: &[Pat], bound: &[bool]) -> (Vec<Probe>, Vec<KeySrc>) {
    fn walk(p: &Pat, path: &mut Vec<u8>, bound: &[bool], probes: &mut Vec<Probe>, keys: &mut Vec<KeySrc>) {
        match p {
            Pat::Ground(t) => {
                probes.push(Probe {
                    path: path.as_slice().into(),
                    functor: false,
                });
                keys.push(KeySrc::Term(*t));
            }
            Pat::Var(v) => {
                if bound[*v as usize] {
                    probes.push(Probe {
                        path: path.as_slice().into(),
                        functor: false,
                    });
                    keys.push(KeySrc::Var(*v));
                }
            }
            Pat::Func(f, sub) => {
                probes.push(Probe {
                    path: path.as_slice().into(),
                    functor: true,
                });
                keys.push(KeySrc::Const(functor_code(*f, sub.len())));
                // Paths are bytes; arguments past the 256th are left to unification.
                for (j, s) in sub.iter().enumerate().take(256) {
                    path.push(j as u8);
                    walk(s, path, bound, probes, keys);
                    path.pop();
                }
            }
        }
    }
    let mut probes = Vec::new();
    let mut keys = Vec::new();
    let mut path = Vec::new();
    for (i, a) in args.iter().enumerate().take(256) {
        path.push(i as u8);
        walk(a, &mut path, bound, &mut probes, &mut keys);
        path.pop();
    }
    (probes, keys)
}

/// Which atoms of a relation a scan reads, in terms of the round bounds of [`Bounds`].
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Range {
    /// Atoms from before the last round: `[0, old)`.
    Old,
    /// Every atom known at the start of this round: `[0, all)`.
    All,
    /// The atoms of the last round: `[old, all)`.
    Delta,
}

/// One step of a plan.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Match the positive literal `item` of the body against its relation.
    Scan {
        item: usize,
        rel: RelId,
        /// The index used, or `None` to read every atom in the range.
        index: Option<usize>,
        /// What the index reads; with `key`, where the lookup values come from.
        probes: Box<[Probe]>,
        key: Box<[KeySrc]>,
        range: Range,
        /// Stop after the first match: nothing after this step uses what it binds.
        exists_only: bool,
        /// Keep the matched atom as a literal of the ground rule.
        record: bool,
    },
    /// The negated literal `item` over a complete relation: its atom must not hold.
    Absent { item: usize },
    /// The negated literal `item` over a dynamic relation, when instantiating: kept as a literal
    /// of the ground rule if its atom can hold, dropped (it is true) otherwise.
    NegOut { item: usize },
    /// The `distinct` (or equality) `item`.
    Test { item: usize },
    /// While deriving, once the head's variables are bound: stop if the head atom is already
    /// known, since the rest of the join could only derive it again.
    HeadKnown,
    /// While deriving: stop if the rest of the join has run before with the same values of
    /// `vars`, the variables bound so far that the rest of the join or the head reads. The
    /// rest can then only derive the same atoms again. `slot` numbers the step's set of
    /// bindings seen in `Exec`.
    Seen { slot: usize, vars: Box<[u32]> },
    /// While deriving, in sub-join `sub` once its out variables are all bound: stop if the rest
    /// of the sub-join had a solution for this binding of them before (in this solve), and
    /// otherwise run the rest as an existence test. A derivation's sub-join answers with the
    /// set of its out bindings, so later solutions of the same binding could only find it
    /// again. A binding is remembered only once found: one whose rest failed may still
    /// succeed with other values of the variables bound before.
    OutKnown { sub: usize },
    /// The sub-join `Plan::subs[sub]`: a group of literals that shares only head variables with
    /// the rest of the body. It is solved once per binding of the shared variables bound before
    /// it (`given`); for each binding of the shared variables it binds itself (`out`), its
    /// solutions stand in the rule as one literal.
    Sub { sub: usize },
}

impl Step {
    fn item(&self) -> Option<usize> {
        match self {
            Step::Scan { item, .. } | Step::Absent { item } | Step::NegOut { item } | Step::Test { item } => {
                Some(*item)
            }
            Step::Sub { .. } | Step::HeadKnown | Step::Seen { .. } | Step::OutKnown { .. } => None,
        }
    }
}

/// What a plan is for.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// Deriving head atoms; negated literals over dynamic relations are assumed true.
    Derive,
    /// Instantiating a rule: literals over dynamic relations are kept in the ground rule.
    Instantiate,
}

/// A group of body literals solved on its own.
#[derive(Clone, Debug)]
pub(crate) struct SubPlan {
    pub steps: Vec<Step>,
    /// The head variables the group shares with the rest of the body that are bound before it
    /// runs.
    pub given: Box<[u32]>,
    /// The head variables the group binds.
    pub out: Box<[u32]>,
    /// The positions in `given` of the variables that some literal of the group could carry
    /// into a ground rule (a dynamic one). The others only feed static literals and tests, so
    /// bindings that agree on these positions have solutions drawn from one set of bodies:
    /// they form a family, and `Exec::solve_sub` writes each one's auxiliary atom in terms of
    /// the family's. Empty unless some given variable is of the static kind.
    pub family: Box<[usize]>,
    /// For a sub-join with a family, the group split into what the family shares and what
    /// tells its members apart, when that split can be planned (see [`Split`]).
    pub split: Option<Split>,
}

/// A family's sub-join taken apart: the literals that read no static given variable (every
/// dynamic one among them) have the same solutions for every member of a family, so they are
/// solved once per family; the static literals and tests that read a member's own variables
/// then only filter those solutions. In chess, the attackers of a king square are found once
/// per family (owner, king square, ignored square), and each captured square only tests
/// `different_cells` on them, instead of finding them again for each of the 64.
#[derive(Clone, Debug)]
pub(crate) struct Split {
    /// The plan of the shared literals, binding the sub-join's out variables and `link`.
    pub shared: Vec<Step>,
    /// The variables the shared literals bind that the filter reads.
    pub link: Box<[u32]>,
    /// The plan of the static literals and tests, run as an existence test once the given
    /// variables and `link` are bound.
    pub filter: Vec<Step>,
    /// The variables bound before the filter runs that it reads: its answer depends on their
    /// values alone.
    pub reads: Box<[u32]>,
}

/// A join plan for one conjunction.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    pub subs: Vec<SubPlan>,
}

impl Plan {
    /// Whether the join reads the identities the output has settled (`Exec::canon`): only
    /// sub-joins with a family do (`Exec::family_aux`), so the other joins find the same
    /// instances whichever components are settled when they run.
    pub fn reads_settled(&self) -> bool {
        self.subs.iter().any(|s| !s.family.is_empty())
    }
}

/// Per relation, the bounds of the current round: atoms `[0, old)` are old, `[old, all)` are
/// the last round's.
pub(crate) struct Bounds {
    pub old: Vec<usize>,
    pub all: Vec<usize>,
}

impl Bounds {
    /// The positions of relation `r`'s atoms that a scan of `range` reads.
    pub fn positions(&self, r: usize, range: Range) -> (usize, usize) {
        match range {
            Range::Old => (0, self.old[r]),
            Range::All => (0, self.all[r]),
            Range::Delta => (self.old[r], self.all[r]),
        }
    }
}

/// How many times more a generator sub-join is taken to cost than its estimate while
/// instantiating a rule guarded by its head's calls (see `Planner::level`).
const GUARDED_SUB_COST: f64 = 8.0;

/// Union-find over body items.
fn find_root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// The planner's view of one conjunction.
struct Planner<'a> {
    conj: &'a Conj,
    delta: Option<usize>,
    recursive: &'a [bool],
    dynamic: &'a [bool],
    mode: Mode,
    /// The relation `does` while instantiating (see `Exec::complement_entries`).
    exclusive: Option<RelId>,
    bounds: &'a Bounds,
    /// The variables of each body item, in order of first occurrence (see `Planner::vars`).
    item_vars: Vec<Vec<u32>>,
    /// The expected matches of each scan the plan has weighed, by item and by which of the
    /// item's variables were bound (see `Planner::scan_cost`).
    costs: std::cell::RefCell<FxHashMap<(usize, u64), f64>>,
}

/// A group of remaining items linked by variables local to the level being planned.
struct Group {
    items: Vec<usize>,
    /// Whether it has a variable that is neither bound nor needed outside it.
    local: bool,
    /// The needed variables it has that are not bound yet.
    open: Vec<u32>,
    /// The bound variables it reads.
    given: Vec<u32>,
    /// Whether its positive literals bind every open variable.
    can_generate: bool,
}

impl Planner<'_> {
    fn range_of(&self, i: usize, rel: RelId) -> Range {
        match self.delta {
            Some(d) if d == i => Range::Delta,
            Some(d) if i < d && self.recursive[rel as usize] => Range::Old,
            _ => Range::All,
        }
    }

    /// The variables of body item `i`, in order of first occurrence: computed once per plan,
    /// since planning asks for them at every step (in alexChess's fixpoint, which plans each
    /// rule anew in every round, planning was a third of the time).
    fn vars(&self, i: usize) -> &[u32] {
        &self.item_vars[i]
    }

    /// The step for non-positive item `i`, whose variables are bound.
    fn test_step(&self, i: usize) -> Step {
        match &self.conj.body[i] {
            Item::Neg(a) if self.dynamic[a.rel as usize] => Step::NegOut { item: i },
            Item::Neg(_) => Step::Absent { item: i },
            _ => Step::Test { item: i },
        }
    }

    fn scan(&self, i: usize, bound: &[bool], relations: &mut [Relation], store: &TermStore) -> (Step, f64) {
        let Item::Pos(a) = &self.conj.body[i] else {
            // Only positive items are scanned; anything else costs nothing and finds nothing.
            return (self.test_step(i), 0.0);
        };
        let range = self.range_of(i, a.rel);
        let record = self.mode == Mode::Instantiate && self.dynamic[a.rel as usize];
        let (step, cost) = scan_step(i, a, bound, range, record, self.bounds, relations, store);
        // A scan limited to some rounds finds that share of the atoms.
        let r = a.rel as usize;
        let total = self.bounds.all[r].max(1) as f64;
        let share = match range {
            Range::All => 1.0,
            Range::Old => self.bounds.old[r] as f64 / total,
            Range::Delta => (self.bounds.all[r] - self.bounds.old[r]) as f64 / total,
        };
        (step, cost * share.min(1.0))
    }

    /// The expected matches of the scan of positive literal `i` given the bound variables, as
    /// `scan` gives them. Planning weighs the same scans again and again (each candidate at
    /// every step, and every scan of a sub-join to estimate it), and the answer depends only on
    /// which of the literal's variables are bound: relations do not change while a plan is
    /// made, so it is computed once per plan and binding pattern.
    fn scan_cost(&self, i: usize, bound: &[bool], relations: &mut [Relation], store: &TermStore) -> f64 {
        let vars = self.vars(i);
        if vars.len() > 64 {
            return self.scan(i, bound, relations, store).1;
        }
        let mask = vars
            .iter()
            .enumerate()
            .fold(0u64, |m, (j, &v)| m | (u64::from(bound[v as usize]) << j));
        if let Some(&c) = self.costs.borrow().get(&(i, mask)) {
            return c;
        }
        let c = self.scan(i, bound, relations, store).1;
        self.costs.borrow_mut().insert((i, mask), c);
        c
    }

    /// The groups of `items`: linked by variables neither bound nor in `needed`.
    fn groups(&self, items: &[usize], bound: &[bool], needed: &[bool]) -> Vec<Group> {
        let n = items.len();
        let mut parent: Vec<usize> = (0..n).collect();
        // The first item of each variable; planning runs for every rule in every round of the
        // fixpoint, so these are arrays rather than hash maps.
        let mut owner: Vec<usize> = vec![usize::MAX; self.conj.nvars];
        let vars: Vec<&[u32]> = items.iter().map(|&i| self.vars(i)).collect();
        for (j, vs) in vars.iter().enumerate() {
            for &v in vs.iter() {
                if bound[v as usize] || needed[v as usize] {
                    continue;
                }
                match owner[v as usize] {
                    usize::MAX => owner[v as usize] = j,
                    o => {
                        let (a, b) = (find_root(&mut parent, j), find_root(&mut parent, o));
                        parent[a] = b;
                    }
                }
            }
        }
        // The group of each root item, in order of first appearance.
        let mut index: Vec<usize> = vec![usize::MAX; n];
        let mut groups: Vec<Group> = Vec::new();
        for j in 0..n {
            let r = find_root(&mut parent, j);
            if index[r] == usize::MAX {
                groups.push(Group {
                    items: Vec::new(),
                    local: false,
                    open: Vec::new(),
                    given: Vec::new(),
                    can_generate: false,
                });
                index[r] = groups.len() - 1;
            }
            let g = index[r];
            groups[g].items.push(items[j]);
            for &v in vars[j] {
                let grp = &mut groups[g];
                if bound[v as usize] {
                    if !grp.given.contains(&v) {
                        grp.given.push(v);
                    }
                } else if needed[v as usize] {
                    if !grp.open.contains(&v) {
                        grp.open.push(v);
                    }
                } else {
                    grp.local = true;
                }
            }
        }
        for grp in &mut groups {
            grp.given.sort_unstable();
            grp.open.sort_unstable();
            let mut binds = Vec::new();
            for &i in &grp.items {
                if matches!(self.conj.body[i], Item::Pos(_)) {
                    binds.extend(self.vars(i));
                }
            }
            grp.can_generate = grp.open.iter().all(|v| binds.contains(v));
        }
        groups
    }

    /// Plans `items` with the variables in `bound` known on entry, binding the ones in `needed`
    /// (the head's, or a sub-join's out variables). At every point the remaining items are
    /// split into groups linked by variables that are neither bound nor needed: a group with
    /// such a local variable whose needed variables are all bound runs as a filter sub-join
    /// (planned the same way, recursively); otherwise the cheapest move is taken among the
    /// scans of items without local variables and the groups that can generate their needed
    /// variables, run as generator sub-joins. When there is no such move, the cheapest scan of
    /// any item is taken, which binds some local variables here and may split what remains.
    /// Tests run as soon as their variables are bound.
    #[allow(clippy::too_many_arguments)]
    fn level(
        &self,
        mut remaining: Vec<usize>,
        bound: &mut [bool],
        needed: &[bool],
        subs: &mut Vec<SubPlan>,
        relations: &mut [Relation],
        store: &TermStore,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        // The variables bound by this level's own steps.
        let mut level_bound: Vec<u32> = Vec::new();
        loop {
            let before = remaining.len();
            remaining.retain(|&i| {
                let ready = !matches!(self.conj.body[i], Item::Pos(_))
                    && self.vars(i).iter().all(|&v| bound[v as usize]);
                if ready {
                    steps.push(self.test_step(i));
                }
                !ready
            });
            if remaining.is_empty() {
                break;
            }
            let groups = self.groups(&remaining, bound, needed);
            // Filters first: they bind nothing and can only cut the search.
            let mut filtered = false;
            // A group holding every remaining item saves nothing as a sub-join unless this
            // level has bound a variable the group does not read, whose values then share its
            // solutions; otherwise it would only add atoms (or, at the start of a sub-join,
            // be that sub-join again).
            let total = remaining.len();
            let whole =
                |grp: &Group| grp.items.len() == total && level_bound.iter().all(|v| grp.given.contains(v));
            for grp in &groups {
                if grp.local && grp.open.is_empty() && !whole(grp) {
                    steps.push(self.sub(grp, bound, subs, relations, store));
                    remaining.retain(|i| !grp.items.contains(i));
                    filtered = true;
                }
            }
            if filtered || remaining.len() < before {
                continue;
            }
            // The cheapest move: the scan of an item (`Ok`) or a group's sub-join (`Err`).
            let mut best: Option<(f64, Result<usize, usize>)> = None;
            // While instantiating a rule guarded by the calls of its head, the guard first lets
            // families be solved once and their members share atoms (`SubPlan::family`); a
            // sub-join that generates the heads instead writes out every instance.
            let guarded = self.mode == Mode::Instantiate
                && remaining.iter().any(|&i| match &self.conj.body[i] {
                    Item::Pos(a) => a.rel != self.conj.head.rel && a.args == self.conj.head.args,
                    _ => false,
                });
            for (g, grp) in groups.iter().enumerate() {
                if grp.local && (!grp.can_generate || whole(grp)) {
                    continue;
                }
                if grp.local {
                    let mut cost = self.estimate(&grp.items, bound, relations, store);
                    if guarded {
                        cost *= GUARDED_SUB_COST;
                    }
                    if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                        best = Some((cost, Err(g)));
                    }
                    continue;
                }
                for &i in &grp.items {
                    if !matches!(self.conj.body[i], Item::Pos(_)) {
                        continue;
                    }
                    let cost = self.scan_cost(i, bound, relations, store);
                    if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                        best = Some((cost, Ok(i)));
                    }
                }
            }
            if best.is_none() {
                for &i in &remaining {
                    if !matches!(self.conj.body[i], Item::Pos(_)) {
                        continue;
                    }
                    let cost = self.scan_cost(i, bound, relations, store);
                    if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                        best = Some((cost, Ok(i)));
                    }
                }
            }
            match best {
                None => {
                    // Only tests whose variables no positive literal binds are left. The grounder
                    // rejects such rules before planning; adding them keeps a mistake visible.
                    for &i in &remaining {
                        steps.push(self.test_step(i));
                    }
                    break;
                }
                Some((_, Ok(i))) => {
                    steps.push(self.scan(i, bound, relations, store).0);
                    remaining.retain(|&j| j != i);
                    self.conj.body[i].for_each_var(&mut |v| {
                        if !bound[v as usize] {
                            bound[v as usize] = true;
                            level_bound.push(v);
                        }
                    });
                }
                Some((_, Err(g))) => {
                    let grp = &groups[g];
                    steps.push(self.sub(grp, bound, subs, relations, store));
                    remaining.retain(|i| !grp.items.contains(i));
                    for &v in &grp.open {
                        bound[v as usize] = true;
                        level_bound.push(v);
                    }
                }
            }
        }
        steps
    }

    /// The number of solutions of `items` given `bound`, estimated as the product of the
    /// expected matches of its scans in greedy order.
    fn estimate(
        &self,
        items: &[usize],
        bound: &[bool],
        relations: &mut [Relation],
        store: &TermStore,
    ) -> f64 {
        let mut bound = bound.to_vec();
        let mut left: Vec<usize> = items
            .iter()
            .copied()
            .filter(|&i| matches!(self.conj.body[i], Item::Pos(_)))
            .collect();
        let mut total = 1.0;
        while !left.is_empty() {
            let mut best: Option<(f64, usize)> = None;
            for (j, &i) in left.iter().enumerate() {
                let cost = self.scan_cost(i, &bound, relations, store);
                if best.is_none_or(|(c, _)| cost < c) {
                    best = Some((cost, j));
                }
            }
            let Some((cost, j)) = best else { break };
            total *= cost;
            let i = left.swap_remove(j);
            self.conj.body[i].for_each_var(&mut |v| bound[v as usize] = true);
        }
        total
    }

    /// The sub-join step of `grp`, planned recursively; binds nothing in `bound` itself.
    fn sub(
        &self,
        grp: &Group,
        bound: &[bool],
        subs: &mut Vec<SubPlan>,
        relations: &mut [Relation],
        store: &TermStore,
    ) -> Step {
        let mut inner = bound.to_vec();
        let mut needed = vec![false; self.conj.nvars];
        for &v in &grp.open {
            needed[v as usize] = true;
        }
        let first = subs.len();
        let mut steps = self.level(grp.items.clone(), &mut inner, &needed, subs, relations, store);
        mark_exists_only(self.conj, &mut steps, subs, &mut needed);
        // A sub-join nested in this one makes auxiliary atoms of its own, which a split plan
        // would not make the same way: only flat groups are split.
        let flat = subs.len() == first;
        // A given variable read only by static literals and tests changes which solutions
        // pass, never what a solution's ground literals are.
        let carried = |v: u32| {
            grp.items.iter().any(|&i| match &self.conj.body[i] {
                Item::Pos(a) | Item::Neg(a) => self.dynamic[a.rel as usize] && self.vars(i).contains(&v),
                _ => false,
            })
        };
        let family: Vec<usize> = (0..grp.given.len()).filter(|&j| carried(grp.given[j])).collect();
        let none_carried = family.is_empty();
        let family = if self.mode == Mode::Instantiate && family.len() < grp.given.len() {
            family
        } else {
            Vec::new()
        };
        // A group whose given variables are all of the static kind is one family. It is split
        // when it reads a `does` atom, so that its members, which usually keep most of the
        // moves (chess's frame rule: "a move that leaves the cell alone"), can be written as
        // the complement of those they drop (`Exec::complement_entries`).
        let one_family = self.mode == Mode::Instantiate
            && !grp.given.is_empty()
            && none_carried
            && grp.items.iter().any(|&i| match &self.conj.body[i] {
                Item::Pos(a) => Some(a.rel) == self.exclusive,
                _ => false,
            });
        let split = if (family.is_empty() && !one_family) || !flat {
            None
        } else {
            self.split(grp, &family, bound, subs, relations, store)
        };
        subs.push(SubPlan {
            steps,
            given: grp.given.clone().into(),
            out: grp.open.clone().into(),
            family: family.into(),
            split,
        });
        Step::Sub { sub: subs.len() - 1 }
    }

    /// The split of family sub-join `grp` (see [`Split`]), or `None` when the literals that
    /// read a static given variable bind something the others need, or either part would
    /// hold a sub-join of its own (whose auxiliary atoms would differ from those of the group
    /// planned whole).
    fn split(
        &self,
        grp: &Group,
        family: &[usize],
        bound: &[bool],
        subs: &mut Vec<SubPlan>,
        relations: &mut [Relation],
        store: &TermStore,
    ) -> Option<Split> {
        let n = self.conj.nvars;
        let mut fixed = vec![false; n];
        for (j, &v) in grp.given.iter().enumerate() {
            fixed[v as usize] = !family.contains(&j);
        }
        let (filter_items, shared_items): (Vec<usize>, Vec<usize>) = grp
            .items
            .iter()
            .partition(|&&i| self.vars(i).iter().any(|&v| fixed[v as usize]));
        // What the shared literals can read: the family's given variables and what their own
        // positive literals bind.
        let mut avail: Vec<bool> = (0..n).map(|v| bound[v] && !fixed[v]).collect();
        for &i in &shared_items {
            if matches!(self.conj.body[i], Item::Pos(_)) {
                self.conj.body[i].for_each_var(&mut |v| avail[v as usize] = true);
            }
        }
        let readable = shared_items
            .iter()
            .all(|&i| self.vars(i).iter().all(|&v| avail[v as usize]));
        if !readable || grp.open.iter().any(|&v| !avail[v as usize]) {
            return None;
        }
        // The variables of the filter literals that `keep` accepts, each once, ascending.
        let filter_vars = |keep: &dyn Fn(usize) -> bool| {
            let mut vars: Vec<u32> = Vec::new();
            for &i in &filter_items {
                for &v in self.vars(i) {
                    if keep(v as usize) && !vars.contains(&v) {
                        vars.push(v);
                    }
                }
            }
            vars.sort_unstable();
            vars
        };
        let link = filter_vars(&|v| avail[v] && !bound[v]);
        let mut needed = vec![false; n];
        for &v in grp.open.iter().chain(&link) {
            needed[v as usize] = true;
        }
        let mut inner: Vec<bool> = (0..n).map(|v| bound[v] && !fixed[v]).collect();
        let before = subs.len();
        let mut shared = self.level(shared_items, &mut inner, &needed, subs, relations, store);
        mark_exists_only(self.conj, &mut shared, subs, &mut needed);
        let mut inner = bound.to_vec();
        for &v in &link {
            inner[v as usize] = true;
        }
        let reads = filter_vars(&|v| inner[v]);
        let mut needed = vec![false; n];
        let mut filter = self.level(filter_items, &mut inner, &needed, subs, relations, store);
        mark_exists_only(self.conj, &mut filter, subs, &mut needed);
        if subs.len() > before {
            subs.truncate(before);
            return None;
        }
        Some(Split {
            shared,
            link: link.into(),
            filter,
            reads: reads.into(),
        })
    }
}

/// Whether some atom of the last round (by `bounds`) can match `a`, judged by its functors and
/// constants alone: a cheap test that spares planning rule variants that cannot fire.
pub(crate) fn delta_can_match(
    a: &AtomPat,
    bounds: &Bounds,
    relations: &mut [Relation],
    store: &TermStore,
) -> bool {
    let r = a.rel as usize;
    let (lo, hi) = (bounds.old[r], bounds.all[r]);
    if lo >= hi {
        return false;
    }
    let (probes, key) = probes_of(&a.args, &vec![false; 1 + max_var(a)]);
    if probes.is_empty() {
        return true;
    }
    let relation = &mut relations[r];
    let ix = relation.index(&probes, store, hi);
    relation.indexes[ix].used = true;
    if relation.indexes[ix].whole {
        // A ground atom: its position says whether the last round added it.
        let args: Vec<TermId> = key
            .iter()
            .map(|src| match *src {
                KeySrc::Term(t) => t,
                KeySrc::Const(_) | KeySrc::Var(_) => unreachable!("a whole key of ground arguments"),
            })
            .collect();
        return store
            .find(a.sym, &args)
            .and_then(|t| store.position(t))
            .is_some_and(|p| (lo..hi).contains(&p));
    }
    let mut h = rustc_hash::FxHasher::default();
    for src in &key {
        h.write_u64(match *src {
            KeySrc::Const(c) => c,
            KeySrc::Term(t) => u64::from(t),
            // Nothing is bound, so no key reads a variable.
            KeySrc::Var(_) => return true,
        });
    }
    let index = &relation.indexes[ix];
    let Some(&head) = index.heads.get(&finish(h)) else {
        return false;
    };
    let mut pos = head;
    while pos != NIL {
        let p = pos as usize;
        if p < lo {
            return false;
        }
        if p < hi {
            return true;
        }
        pos = index.older[p];
    }
    false
}

fn max_var(a: &AtomPat) -> usize {
    let mut m = 0;
    a.for_each_var(&mut |v| m = m.max(v as usize));
    m
}

/// Makes the plan of `conj`, with its literal `delta` (an index into the body) reading only the
/// last round's atoms, the positive literals over relations in `recursive` before it the old
/// atoms, and every other literal all atoms (the rounds as `bounds` says). The literals are
/// ordered by [`Planner::level`], the delta literal like any other at the cost of its share.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(
    conj: &Conj,
    delta: Option<usize>,
    recursive: &[bool],
    dynamic: &[bool],
    mode: Mode,
    exclusive: Option<RelId>,
    bounds: &Bounds,
    relations: &mut [Relation],
    store: &TermStore,
) -> Plan {
    let item_vars = conj
        .body
        .iter()
        .map(|item| {
            let mut vars = Vec::new();
            item.for_each_var(&mut |v| {
                if !vars.contains(&v) {
                    vars.push(v);
                }
            });
            vars
        })
        .collect();
    let p = Planner {
        conj,
        delta,
        recursive,
        dynamic,
        mode,
        exclusive,
        bounds,
        item_vars,
        costs: Default::default(),
    };
    // Negated literals over dynamic relations are assumed true while deriving.
    let items: Vec<usize> = (0..conj.body.len())
        .filter(|&i| match &conj.body[i] {
            Item::Neg(a) => mode == Mode::Instantiate || !dynamic[a.rel as usize],
            _ => true,
        })
        .collect();
    let mut needed = vec![false; conj.nvars];
    conj.head.for_each_var(&mut |v| needed[v as usize] = true);
    let mut bound = vec![false; conj.nvars];
    let mut subs = Vec::new();
    let mut steps = p.level(items, &mut bound, &needed, &mut subs, relations, store);
    mark_exists_only(conj, &mut steps, &subs, &mut needed);
    if mode == Mode::Derive {
        // Where the head's variables are all bound, later steps can only find it again.
        let mut open = 0;
        conj.head.for_each_var(&mut |_| open += 1);
        let mut bound = vec![false; conj.nvars];
        let mut at = None;
        for (k, s) in steps.iter().enumerate() {
            match s {
                Step::Scan { item, .. } => conj.body[*item].for_each_var(&mut |v| bound[v as usize] = true),
                Step::Sub { sub } => subs[*sub].out.iter().for_each(|&v| bound[v as usize] = true),
                _ => {}
            }
            let mut all = true;
            conj.head.for_each_var(&mut |v| all &= bound[v as usize]);
            if all {
                at = Some(k + 1);
                break;
            }
        }
        let at = if open == 0 { Some(0) } else { at };
        if let Some(k) = at.filter(|&k| k < steps.len()) {
            steps.insert(k, Step::HeadKnown);
        }
        mark_seen(conj, &mut steps, &subs);
        for (i, sp) in subs.iter_mut().enumerate() {
            mark_out_known(conj, i, sp);
        }
    }
    finish_indexes(&mut steps, bounds, relations, store);
    for sub in &mut subs {
        finish_indexes(&mut sub.steps, bounds, relations, store);
        if let Some(split) = &mut sub.split {
            finish_indexes(&mut split.shared, bounds, relations, store);
            finish_indexes(&mut split.filter, bounds, relations, store);
        }
    }
    Plan { steps, subs }
}

/// Puts a [`Step::Seen`] after each scan that leaves a variable the rest of the join does not
/// read (one it binds and nobody reads, like the unused coordinate of a move, or one it reads
/// for the last time), when a scan or sub-join still follows. Bindings that differ only in
/// such variables run the rest of the join the same way: racer4's `next` rules read
/// `(does ?player (speed ?dx ?dy))` for one of the two velocities, and without this step
/// joined every position with every move of the other velocity, a million and a half
/// solutions per rule for 400 atoms.
fn mark_seen(conj: &Conj, steps: &mut Vec<Step>, subs: &[SubPlan]) {
    let n = steps.len();
    // needed_after[k]: the variables the head or the steps after step k read.
    let mut needed_after = vec![vec![false; conj.nvars]; n];
    let mut needed = vec![false; conj.nvars];
    conj.head.for_each_var(&mut |v| needed[v as usize] = true);
    // Whether a step after k does any work (a scan or a sub-join).
    let mut work_after = vec![false; n];
    let mut work = false;
    for k in (0..n).rev() {
        needed_after[k].clone_from(&needed);
        work_after[k] = work;
        match &steps[k] {
            Step::Sub { sub } => {
                for &v in subs[*sub].given.iter() {
                    needed[v as usize] = true;
                }
                work = true;
            }
            Step::Scan { exists_only, .. } => work |= !*exists_only,
            _ => {}
        }
        if let Some(item) = steps[k].item() {
            conj.body[item].for_each_var(&mut |v| needed[v as usize] = true);
        }
    }
    let mut bound = vec![false; conj.nvars];
    let mut dead = vec![false; conj.nvars];
    let mut at = Vec::new();
    for k in 0..n {
        match &steps[k] {
            Step::Scan { item, .. } => conj.body[*item].for_each_var(&mut |v| bound[v as usize] = true),
            Step::Sub { sub } => subs[*sub].out.iter().for_each(|&v| bound[v as usize] = true),
            _ => {}
        }
        let mut newly_dead = false;
        for v in 0..conj.nvars {
            if bound[v] && !needed_after[k][v] && !dead[v] {
                dead[v] = true;
                newly_dead = true;
            }
        }
        if newly_dead
            && work_after[k]
            && matches!(
                steps[k],
                Step::Scan {
                    exists_only: false,
                    ..
                }
            )
        {
            let vars: Box<[u32]> = (0..conj.nvars as u32)
                .filter(|&v| bound[v as usize] && needed_after[k][v as usize])
                .collect();
            at.push((k + 1, vars));
        }
    }
    for (slot, (k, vars)) in at.into_iter().enumerate().rev() {
        steps.insert(k, Step::Seen { slot, vars });
    }
}

/// Puts a [`Step::OutKnown`] into sub-join `sub` of a derivation after the step that binds the
/// last of its out variables, when a scan or a sub-join still follows. In alexChess a magic
/// rule's sub-join found a square from a line of squares and then looked for a move to it
/// that is not the king's: every such move of the square was found, each only to give the
/// square again.
fn mark_out_known(conj: &Conj, sub: usize, sp: &mut SubPlan) {
    // A sub-join without out variables is an existence test already.
    if sp.out.is_empty() {
        return;
    }
    let mut bound = vec![false; conj.nvars];
    for (k, s) in sp.steps.iter().enumerate() {
        match s {
            Step::Scan { item, .. } => conj.body[*item].for_each_var(&mut |v| bound[v as usize] = true),
            Step::Sub { .. } => return,
            _ => {}
        }
        if sp.out.iter().all(|&v| bound[v as usize]) {
            let work = sp.steps[k + 1..]
                .iter()
                .any(|s| matches!(s, Step::Scan { .. } | Step::Sub { .. }));
            if work {
                sp.steps.insert(k + 1, Step::OutKnown { sub });
            }
            return;
        }
    }
}

/// The scan of positive literal `i` given the bound variables, and its expected matches among
/// the atoms of the round (`bounds`).
#[allow(clippy::too_many_arguments)]
fn scan_step(
    i: usize,
    a: &AtomPat,
    bound: &[bool],
    range: Range,
    record: bool,
    bounds: &Bounds,
    relations: &mut [Relation],
    store: &TermStore,
) -> (Step, f64) {
    let (probes, key) = probes_of(&a.args, bound);
    let rel = &mut relations[a.rel as usize];
    let cost = rel.estimate(&probes, store, bounds.all[a.rel as usize]);
    // A literal whose variables are all bound is a lookup: prefer it to a scan of equal cost.
    let mut all_bound = true;
    a.for_each_var(&mut |v| all_bound &= bound[v as usize]);
    let cost = if all_bound { cost.min(1.0) * 0.5 } else { cost };
    (
        Step::Scan {
            item: i,
            rel: a.rel,
            index: None,
            probes: probes.into(),
            key: key.into(),
            range,
            exists_only: false,
            record,
        },
        cost,
    )
}

/// Makes the index every scan of `steps` needs and brings it up to date with the round's atoms.
fn finish_indexes(steps: &mut [Step], bounds: &Bounds, relations: &mut [Relation], store: &TermStore) {
    for s in steps {
        if let Step::Scan {
            rel, index, probes, ..
        } = s
        {
            if !probes.is_empty() {
                let relation = &mut relations[*rel as usize];
                let ix = relation.index(probes, store, bounds.all[*rel as usize]);
                relation.indexes[ix].used = true;
                *index = Some(ix);
            }
        }
    }
}

/// Marks the scans whose new bindings nothing later reads (`needed` holds the variables read
/// after the last step): the join only needs to know that they match once. A scan whose atom is
/// kept in the ground rule is never marked.
fn mark_exists_only(conj: &Conj, steps: &mut [Step], subs: &[SubPlan], needed: &mut [bool]) {
    let mut bound_before = Vec::with_capacity(steps.len());
    let mut bound = vec![false; conj.nvars];
    for s in steps.iter() {
        bound_before.push(bound.clone());
        match s {
            Step::Scan { item, .. } => conj.body[*item].for_each_var(&mut |v| bound[v as usize] = true),
            Step::Sub { sub } => subs[*sub].out.iter().for_each(|&v| bound[v as usize] = true),
            _ => {}
        }
    }
    for (k, s) in steps.iter_mut().enumerate().rev() {
        match s {
            Step::Scan {
                item,
                exists_only,
                record,
                ..
            } => {
                let mut binds_needed = false;
                conj.body[*item].for_each_var(&mut |v| {
                    binds_needed |= !bound_before[k][v as usize] && needed[v as usize];
                });
                *exists_only = !*record && !binds_needed;
            }
            Step::Sub { sub } => {
                for &v in subs[*sub].given.iter() {
                    needed[v as usize] = true;
                }
            }
            _ => {}
        }
        if let Some(item) = s.item() {
            conj.body[item].for_each_var(&mut |v| needed[v as usize] = true);
        }
    }
}

/// A literal of a ground rule under construction: an atom (by term and relation) or an
/// auxiliary atom standing for a sub-join (`rel == AUX`, `atom` its number in the run).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(crate) struct OutLit {
    pub rel: RelId,
    pub atom: u32,
    pub negated: bool,
}

/// The relation number of auxiliary atoms.
pub(crate) const AUX: RelId = RelId::MAX;

/// What a sub-join gave for one binding of its shared variables (a binding without solutions
/// has no entry).
#[derive(Clone, Debug)]
enum SubResult {
    /// One solution (or, while deriving, at least one): these literals stand for it.
    Inline(Box<[OutLit]>),
    /// Several solutions: an auxiliary atom defined by one rule per solution.
    Aux(u32),
}

/// Values by binding of some variables: a sub-join's answers by binding of its given
/// variables ([`Memo<SubEntries>`]), or the bindings a [`Step::Seen`] has let through
/// ([`Memo<()>`]). The bindings are kept one after another in one array rather than boxed
/// each: chess's check test remembers about 940,000.
pub(crate) struct Memo<V> {
    /// The number of variables in a binding.
    width: usize,
    keys: Vec<TermId>,
    /// The position of each binding in `keys` (in units of `width`), its hash (see
    /// [`key_hash`]) and its value. With the hash at hand, growing the table moves the
    /// entries without reading their bindings: in chess's fixpoint, rehashing the sets of
    /// heads found from `keys` (a cache miss per binding, in an order unrelated to `keys`)
    /// was about a quarter of the samples of [`Exec::new_head`] in perf.
    table: HashTable<(u32, u32, V)>,
}

/// The hash of a binding. It is made of 32 bits, repeated in both halves of the value the
/// table is given, so that [`Memo`] can keep it in each entry (to grow the table without
/// reading the bindings) and give the table the same value again.
fn key_hash(key: &[TermId]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for &t in key {
        h.write_u32(t);
    }
    let x = h.finish();
    widen((x ^ (x >> 32)) as u32)
}

/// The table hash of a binding whose [`key_hash`] keeps `s`.
#[inline]
fn widen(s: u32) -> u64 {
    (u64::from(s) << 32) | u64::from(s)
}

impl<V> Memo<V> {
    pub fn new(width: usize) -> Memo<V> {
        Memo {
            width,
            keys: Vec::new(),
            table: HashTable::new(),
        }
    }

    fn key(&self, i: u32) -> &[TermId] {
        let s = i as usize * self.width;
        &self.keys[s..s + self.width]
    }

    fn get(&self, key: &[TermId]) -> Option<&V> {
        // A split sub-join's memo stays empty (its entries are kept by set instead), and
        // chess's check test asks it 940,000 times with seven values to hash.
        if self.table.is_empty() {
            return None;
        }
        self.find(key_hash(key), key)
    }

    fn find(&self, h: u64, key: &[TermId]) -> Option<&V> {
        self.table
            .find(h, |&(i, _, _)| same_ids(self.key(i), key))
            .map(|(_, _, r)| r)
    }

    /// Remembers the value for a binding not remembered yet.
    fn insert(&mut self, key: &[TermId], r: V) {
        self.insert_hashed(key_hash(key), key, r);
    }

    fn insert_hashed(&mut self, h: u64, key: &[TermId], r: V) {
        // With no variables there is one binding, the empty one, at 0.
        let i = self.keys.len().checked_div(self.width).unwrap_or(0) as u32;
        self.keys.extend_from_slice(key);
        debug_assert_eq!(h, widen(h as u32));
        self.table
            .insert_unique(h, (i, h as u32, r), |&(_, s, _)| widen(s));
    }
}

impl Memo<()> {
    /// Adds `key`; returns whether it is new.
    pub fn add(&mut self, key: &[TermId]) -> bool {
        let h = key_hash(key);
        let new = self.find(h, key).is_none();
        if new {
            self.insert_hashed(h, key, ());
        }
        new
    }
}

/// The reference solutions of a sub-join family (see `Exec::family_aux`).
struct Family {
    /// The solution bodies, sorted.
    bodies: Vec<Vec<OutLit>>,
    /// The auxiliary atom that is their `or`.
    aux: u32,
    /// The atom made for the reference without solution `i`.
    without: FxHashMap<usize, u32>,
}

/// The solutions of the shared part of a split sub-join (see [`Split`]), found once per
/// family, and the entries of the sets of them its members keep.
struct FamilySolutions {
    /// The family number of each binding of the family's given variables.
    memo: Memo<u32>,
    /// Where each family's solutions start (family `f` has `first[f]..first[f + 1]`).
    first: Vec<u32>,
    /// Per solution: its out values, its link values and where its body ends in `lits` (it
    /// starts where the previous one ends), as `Exec::solve_sub` keeps them.
    vals: Vec<TermId>,
    links: Vec<TermId>,
    lits: Vec<OutLit>,
    ends: Vec<u32>,
    /// The entries of a family's members by the set of its solutions they keep (a bit per
    /// solution, for families of at most 64), where those entries depend on the set alone.
    sets: FxHashMap<(u32, u64), SubEntries>,
    /// The filter's answer by the values of the variables it reads (`Split::reads`): those
    /// of them that are given pick a row (`rows`, by their values), the solution's links a
    /// column (`link_of`), and the cell is 0 while not known, 1 where the filter fails and 2
    /// where it passes. In chess the given part is the captured square and the link the
    /// attacker's: 4,096 answers for 14 million filterings. A member finds its row once and
    /// then reads a byte per solution, rather than hashing the values of every solution.
    rows: Memo<u32>,
    answers: Vec<Vec<u8>>,
    /// How many cells `answers` holds (bounded by `MAX_PASSES`).
    cells: usize,
    /// Per solution: the number of its link values (`links`), in `link_ids`.
    link_of: Vec<u32>,
    link_ids: Memo<u32>,
    /// The variables of `Split::reads` that are given rather than links, in order.
    read_given: Box<[u32]>,
    /// Per solution: the rank of its body read through the settled identities (as
    /// `Exec::content` reads it) among the distinct such bodies of its family, or
    /// `NOT_SETTLED` when one of its atoms is not settled. A member whose set of solutions is
    /// new then writes its content from the ranks of the solutions it keeps, without looking
    /// each atom up in `Exec::canon` and sorting the bodies again: chess's check test does
    /// that for 350,000 members of 25,000 families.
    canon_rank: Vec<u32>,
    /// Per family, where its distinct bodies start in `rank_ends` (family `f` has
    /// `rank_first[f]..rank_first[f + 1]`); each rank's body, its length first as `content`
    /// writes it, ends at `rank_ends[..]` in `rank_content` (and starts where the one before
    /// it ends).
    rank_first: Vec<u32>,
    rank_ends: Vec<u32>,
    rank_content: Vec<u32>,
    /// Per solution, for members written as complements (`Exec::complement_entries`): the
    /// `does` atom its body reads (the first positive one; `NO_DOES` for none) and its role,
    /// found for the solutions up to this length.
    does_of: Vec<TermId>,
    role_of: Vec<TermId>,
    /// The auxiliary atom of all of a family's solutions of one role, by family and role.
    by_role: FxHashMap<(u32, TermId), u32>,
    /// The auxiliary atoms of the segments of a family's ranked bodies that members written
    /// as a cover have used (`Exec::cover_entries`), by family and segment `a..b`.
    segments: FxHashMap<(u32, u32, u32), u32>,
}

/// Whether a member that keeps `kept` of its family's `hi - lo` solutions is worth writing as
/// the complement of the others (`Exec::complement_entries`): it keeps enough of them, and
/// drops fewer than a third of those it keeps.
fn complement_pays(lo: usize, hi: usize, kept: usize) -> bool {
    let dropped = hi - lo - kept;
    kept >= MIN_COMPLEMENT && dropped > 0 && 3 * dropped < kept
}

/// In `FamilySolutions::does_of`, a solution whose body reads no `does` atom.
const NO_DOES: TermId = TermId::MAX;

/// The fewest solutions a member must keep to be written as the complement of those it drops.
/// Below it the rules saved are few, and the complement's own gates (per member and role an
/// `or` of the dropped moves and an `and`) are more than the passes make of the written-out
/// `or`: with 16, breakthrough's frame rule took its program from 745 to 873 gates, and 14
/// other small games grew alike.
const MIN_COMPLEMENT: usize = 1024;

/// The fewest distinct bodies a member must keep to be written as a cover of segments
/// (`Exec::cover_entries`).
const MIN_COVER: usize = 12;

/// In `FamilySolutions::canon_rank`, a solution with an atom not settled.
const NOT_SETTLED: u32 = u32::MAX;

/// The most answers of a filter `FamilySolutions::answers` keeps.
const MAX_PASSES: usize = 1 << 20;

/// In `FamilySolutions::answers`: not known yet, the filter fails, the filter passes.
const UNKNOWN: u8 = 0;
const FAILS: u8 = 1;
const PASSES: u8 = 2;

impl Default for FamilySolutions {
    /// An empty placeholder, without allocating (see `Exec::solve_split`).
    fn default() -> Self {
        FamilySolutions {
            memo: Memo::new(0),
            first: Vec::new(),
            vals: Vec::new(),
            links: Vec::new(),
            lits: Vec::new(),
            ends: Vec::new(),
            sets: FxHashMap::default(),
            rows: Memo::new(0),
            answers: Vec::new(),
            cells: 0,
            link_of: Vec::new(),
            link_ids: Memo::new(0),
            read_given: Box::new([]),
            canon_rank: Vec::new(),
            rank_first: Vec::new(),
            rank_ends: Vec::new(),
            rank_content: Vec::new(),
            does_of: Vec::new(),
            role_of: Vec::new(),
            by_role: FxHashMap::default(),
            segments: FxHashMap::default(),
        }
    }
}

impl FamilySolutions {
    fn new(width: usize, split: Option<&Split>) -> Self {
        let (read_given, nlink): (Box<[u32]>, usize) = match split {
            Some(s) => (
                s.reads.iter().copied().filter(|v| !s.link.contains(v)).collect(),
                s.link.len(),
            ),
            None => (Box::new([]), 0),
        };
        FamilySolutions {
            rows: Memo::new(read_given.len()),
            answers: Vec::new(),
            cells: 0,
            link_of: Vec::new(),
            link_ids: Memo::new(nlink),
            read_given,
            memo: Memo::new(width),
            first: vec![0],
            vals: Vec::new(),
            links: Vec::new(),
            lits: Vec::new(),
            ends: Vec::new(),
            sets: FxHashMap::default(),
            canon_rank: Vec::new(),
            rank_first: vec![0],
            rank_ends: Vec::new(),
            rank_content: Vec::new(),
            does_of: Vec::new(),
            role_of: Vec::new(),
            by_role: FxHashMap::default(),
            segments: FxHashMap::default(),
        }
    }

    /// The body of solution `i`: it ends at `ends[i]` and starts where the one before ends.
    fn body(&self, i: usize) -> &[OutLit] {
        let s = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.lits[s..self.ends[i] as usize]
    }

    /// Numbers the link values of the solutions from `from` on (see `link_of`).
    fn number_links(&mut self, from: usize, nlink: usize) {
        for i in from..self.ends.len() {
            let key = &self.links[i * nlink..(i + 1) * nlink];
            let id = match self.link_ids.get(key) {
                Some(&id) => id,
                None => {
                    let id = self.link_ids.table.len() as u32;
                    self.link_ids.insert(key, id);
                    id
                }
            };
            self.link_of.push(id);
        }
    }

    /// Ranks the bodies of the solutions from `from` on, those of the family just collected,
    /// read through `canon` as `Exec::content` reads them (`canon_rank`), and keeps the
    /// family's distinct bodies in that order. `ids`, `ranges` and `order` are scratch space.
    fn rank_bodies(
        &mut self,
        from: usize,
        canon: &[u32],
        ids: &mut Vec<u32>,
        ranges: &mut Vec<(u32, u32)>,
        order: &mut Vec<usize>,
    ) {
        ids.clear();
        ranges.clear();
        order.clear();
        for i in from..self.ends.len() {
            let start = ids.len();
            let mut settled = true;
            for l in self.body(i) {
                match canon.get(l.atom as usize) {
                    Some(&id) if l.rel != AUX && id != u32::MAX => ids.push(id << 1 | l.negated as u32),
                    _ => {
                        settled = false;
                        break;
                    }
                }
            }
            if settled {
                sort_dedup_from(ids, start);
                order.push(ranges.len());
            } else {
                ids.truncate(start);
            }
            ranges.push((start as u32, ids.len() as u32));
        }
        let ids = &*ids;
        let slice = |j: usize| &ids[ranges[j].0 as usize..ranges[j].1 as usize];
        order.sort_unstable_by(|&a, &b| slice(a).cmp(slice(b)));
        let base = self.canon_rank.len();
        self.canon_rank.resize(base + ranges.len(), NOT_SETTLED);
        let mut rank = 0;
        for (k, &j) in order.iter().enumerate() {
            if k == 0 || slice(order[k - 1]) != slice(j) {
                if k > 0 {
                    rank += 1;
                }
                self.rank_content.push(slice(j).len() as u32);
                self.rank_content.extend_from_slice(slice(j));
                self.rank_ends.push(self.rank_content.len() as u32);
            }
            self.canon_rank[base + j] = rank;
        }
        self.rank_first.push(self.rank_ends.len() as u32);
    }

    /// Writes to `out` the content (as `Exec::content` writes it) of the solutions `kept` of
    /// family `f`; false when one of them has an atom not settled. `ranks` is scratch space.
    fn kept_content(&self, f: usize, kept: &[u32], ranks: &mut Vec<u32>, out: &mut Vec<u32>) -> bool {
        ranks.clear();
        out.clear();
        for &i in kept {
            let r = self.canon_rank[i as usize];
            if r == NOT_SETTLED {
                return false;
            }
            ranks.push(r);
        }
        sort_dedup_from(ranks, 0);
        let first = self.rank_first[f] as usize;
        for &r in ranks.iter() {
            let k = first + r as usize;
            let s = if k == 0 { 0 } else { self.rank_ends[k - 1] as usize };
            out.extend_from_slice(&self.rank_content[s..self.rank_ends[k] as usize]);
        }
        true
    }
}

/// The atoms a negated literal kept in the ground rule found by the values of its variables
/// (see `Exec::negated_atom`).
struct NegMemo {
    /// The literal's variables, sorted without repeats.
    vars: Box<[u32]>,
    /// The atom by their values, `TermId::MAX` where it does not hold.
    memo: Memo<TermId>,
    /// How many times the literal was asked, and how many of them the memo answered.
    asked: u32,
    found: u32,
}

/// A negated literal of a sub-join's solution that waits to be looked up with the others of
/// the solve (`Exec::resolve_waiting`). Looking a 7-ary atom up in the term table is mostly
/// two cache misses (its slot, its record): in chess, `legal`'s sub-joins ask the check test
/// for every blocking square, about a tenth of the join threads' time, each lookup waiting
/// alone. Waiting literals are looked up after their table slots have all been touched, so
/// that the misses overlap. In the solution's body the literal stands as
/// `OutLit { rel: WAITING, atom: its place in Exec::neg_wait, negated: true }` until then.
/// These literals skip the memo of `negated_atom`: a memo probe is itself a miss or two (its
/// table and its keys), about what a lookup that waits with others costs, and chess's
/// grounding took a little less time without it.
struct NegWait {
    /// The literal's relation and functor, and where its arguments are in `Exec::neg_args`.
    rel: RelId,
    sym: crate::gdl::Symbol,
    args: u32,
    arity: u32,
}

/// In a negated literal's memo, a binding whose atom does not hold.
const NOT_HOLDING: TermId = TermId::MAX;

/// The relation number of a negated literal waiting to be looked up (see [`NegWait`]).
const WAITING: RelId = RelId::MAX - 1;

/// After how many questions a negated literal whose memo answered fewer than a quarter of
/// them stops keeping one.
const NEG_MEMO_TRIAL: u32 = 1 << 14;
/// The most bindings a negated literal's memo keeps.
const MAX_NEG_MEMO: usize = 1 << 20;

/// The heads derivations have found, when the term store is shared with other joins and
/// cannot mark them (see [`Exec::heads_found`]).
pub(crate) struct HeadsFound {
    /// What a head is known by: the head's arguments when they are variables and constants
    /// (then joins of several rules of one relation can share the set), or else its variables.
    key_of: Box<[Pat]>,
    /// The key of each head found.
    found: Memo<()>,
    /// Scratch space for the key of the current binding.
    key: Vec<TermId>,
    /// The hash of the key [`Step::HeadKnown`] last looked up and did not find: the solution
    /// that follows it in the join has that head, which [`Exec::new_head`] then adds without
    /// looking it up again.
    checked: Option<u64>,
}

impl HeadsFound {
    /// An empty set of heads known by `key_of`, whose patterns are variables and constants.
    pub fn new(key_of: Box<[Pat]>) -> HeadsFound {
        debug_assert!(key_of.iter().all(|p| !matches!(p, Pat::Func(..))));
        HeadsFound {
            found: Memo::new(key_of.len()),
            key_of,
            key: Vec::new(),
            checked: None,
        }
    }

    /// The same set, for a rule whose head (of the same relation) has arguments `key_of`.
    pub fn for_head(self, key_of: Box<[Pat]>) -> HeadsFound {
        debug_assert_eq!(key_of.len(), self.key_of.len());
        HeadsFound {
            key_of,
            checked: None,
            ..self
        }
    }

    fn make_key(&mut self, binds: &[TermId]) {
        self.key.clear();
        self.key.extend(self.key_of.iter().map(|p| match p {
            Pat::Var(v) => binds[*v as usize],
            Pat::Ground(g) => *g,
            Pat::Func(..) => unreachable!("heads are known by variables and constants"),
        }));
    }
}

/// A sub-join's results for one binding of its given variables.
type SubEntries = Rc<[(Box<[TermId]>, SubResult)]>;

/// Why a join stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The deadline passed.
    Time,
    /// A sub-join found the solution it was looking for.
    Found,
    /// The solution callback refused to go on.
    Error(super::GroundError),
}

/// The term store a join reads: deriving interns the heads it finds, instantiating only reads
/// (every atom it names was derived), so the joins of instantiation share the store with each
/// other and with the thread that writes their output (`Grounder::instantiate`).
pub(crate) enum StoreRef<'a> {
    Mut(&'a mut TermStore),
    Shared(&'a TermStore),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = TermStore;

    fn deref(&self) -> &TermStore {
        match self {
            StoreRef::Mut(s) => s,
            StoreRef::Shared(s) => s,
        }
    }
}

impl std::ops::DerefMut for StoreRef<'_> {
    fn deref_mut(&mut self) -> &mut TermStore {
        match self {
            StoreRef::Mut(s) => s,
            // Only a derivation adds terms, and it always has the store to itself.
            StoreRef::Shared(_) => panic!("a join that only reads the term store tried to add a term"),
        }
    }
}

/// The state of one join.
pub(crate) struct Exec<'a> {
    pub store: StoreRef<'a>,
    pub relations: &'a [Relation],
    pub bounds: &'a Bounds,
    pub binds: Vec<TermId>,
    trail: Vec<u32>,
    /// Scratch space for building and finding terms.
    stack: Vec<TermId>,
    /// Scratch space for memo keys.
    key: Vec<TermId>,
    /// The literals of the ground rule so far, when instantiating.
    pub lits: Vec<OutLit>,
    /// The rules of the auxiliary atoms made in this run and not yet taken: atom number and
    /// where the body ends in `aux_lits` (it starts where the previous one ends). One array
    /// for all bodies rather than a vector each: chess makes millions of these rules.
    pub aux_rules: Vec<(u32, usize)>,
    /// The bodies of `aux_rules`, one after another.
    pub aux_lits: Vec<OutLit>,
    /// How many auxiliary atoms this run made.
    pub aux_count: u32,
    /// A literal of the body whose scan in the plan's own steps (not a sub-join's) is to
    /// report its position in `head_pos`, `usize::MAX` for none. Instantiation sets it to a
    /// guard that has the head's arguments, to find the head atom by that position.
    pub head_item: usize,
    /// The position, in its relation, of the atom the scan of `head_item` matched last.
    pub head_pos: usize,
    /// While deriving, when `head_item` is a literal with exactly the head's arguments scanned
    /// before [`Step::HeadKnown`]: the head atom of each position of that literal's relation
    /// known to hold (`UNBOUND` where not known yet). `HeadKnown` reads it before looking the
    /// head up and fills it in when it owns it; a join that shares it with others (a round's
    /// derivations on several threads) notes what it found in `head_at_found` instead. Empty
    /// otherwise. See `Grounder::derive`.
    pub head_at: std::borrow::Cow<'a, [TermId]>,
    /// The heads `HeadKnown` found to hold, by position, when `head_at` is shared.
    pub head_at_found: Vec<(usize, TermId)>,
    memo: Vec<Memo<SubEntries>>,
    /// For each sub-join with a family (see `SubPlan::family`), the reference solutions of
    /// each family and out binding.
    families: Vec<FxHashMap<Box<[TermId]>, Family>>,
    /// The identity of each ground atom the output has settled, by term (`u32::MAX` for one
    /// not settled): atoms of relations instantiated before, read through the identification
    /// of atoms with equal definitions. Empty while deriving.
    pub canon: &'a [u32],
    /// The relations whose atoms the fixpoint took from their calls (see
    /// `Grounder::calls_as_atoms`): one of their atoms that `canon` does not have got no ground
    /// rule, and is false. Empty while deriving; a join that reads it runs after those
    /// relations are settled.
    pub by_calls: &'a [bool],
    /// For each sub-join with a family, the auxiliary atom made for each set of solutions read
    /// through `canon`: a family whose solutions are the same atoms as another's (in chess,
    /// the check tests of ignored squares off the king's lines) takes that family's atoms
    /// rather than making its members again.
    shared: Vec<FxHashMap<Box<[u32]>, u32>>,
    /// For each sub-join with a split plan, the solutions of its families.
    split_sols: Vec<FamilySolutions>,
    /// The relation `does` while instantiating, where a member of a split family that keeps
    /// most of the family's solutions may be written as the complement of the few it drops
    /// (`Exec::complement_entries`); `None` otherwise.
    pub exclusive: Option<RelId>,
    /// Whether the entries `solve_sub` gave last are kept by their family's set of solutions
    /// (see `Exec::solve_split`), so that the same binding finds them again there. Cleared
    /// by `family_aux` when the atom it gives does not follow from the set of solutions alone
    /// (it was compared with the family's reference, which changes).
    by_set: bool,
    /// For each [`Step::Seen`], the bindings that have run the rest of the join.
    seen: Vec<Memo<()>>,
    /// For each literal of the body, while it is worth it, the atom each binding of its
    /// variables gives its [`Step::NegOut`] (see `Exec::negated_atom`).
    neg_memo: Vec<Option<NegMemo>>,
    /// While a sub-join's solutions are collected for instantiation (`Exec::collect`), its
    /// negated literals of variables and constants wait here instead of being looked up one
    /// by one (see [`NegWait`]); `waiting` says whether they do.
    waiting: bool,
    neg_wait: Vec<NegWait>,
    neg_args: Vec<TermId>,
    neg_hashes: Vec<u64>,
    neg_run: Vec<u64>,
    neg_found: Vec<TermId>,
    /// While deriving with the term store shared: the heads found (by this run, and by the
    /// runs of earlier rules of the same relation that handed the set on), which
    /// [`Step::HeadKnown`] treats as known and the solution callback adds to
    /// ([`Exec::new_head`]). A derivation that shares the term store with other joins cannot
    /// mark the heads it finds there (`PENDING`, `HOLDS`), and would otherwise find each one
    /// again and again.
    pub heads_found: Option<HeadsFound>,
    /// Whether `HeadKnown` notes the heads it finds to hold in `head_at_found` even when it
    /// owns `head_at`.
    pub note_head_at: bool,
    /// Whether `HeadKnown` looks the head up in the term store (always, but on the
    /// fixpoint's join threads: see `collect_heads`).
    head_lookup: bool,
    /// Whether `HeadKnown` stops looking heads up when the first `LOOKUP_SAMPLE` lookups
    /// found few that hold (`head_lookup` is then turned off), and its counts of lookups
    /// and of heads found to hold.
    pub head_lookup_adaptive: bool,
    lookups: u32,
    lookups_held: u32,
    /// For each sub-join with a [`Step::OutKnown`], the out bindings its current solve found.
    out_seen: Vec<Memo<()>>,
    /// While deriving, which atoms of the last round a scan of `Range::Delta` reads, by
    /// position from the round's start (empty: all of them). See `Grounder::eval_scc`.
    pub delta_keep: &'a [bool],
    /// While deriving, the positions the plan's first step reads when it is a scan without
    /// an index (all of its range when `None`): one part of a join cut into parts by that
    /// scan, whose parts together find what the whole join finds, in the same order.
    pub first_part: Option<(usize, usize)>,
    /// For each sub-join, the binding it was last asked with and its answer.
    last: Vec<Option<(Vec<TermId>, SubEntries)>>,
    /// Scratch space for the solutions of a sub-join (`Exec::solve_sub`): their out values,
    /// their bodies one after another, and where each body ends.
    sol_vals: Vec<TermId>,
    sol_lits: Vec<OutLit>,
    sol_ends: Vec<u32>,
    /// Scratch space for a family's key, for a filter's key, and for the content of a set of
    /// solutions.
    fkey: Vec<TermId>,
    filter_key: Vec<TermId>,
    /// Scratch space for the solutions of a family a member keeps (`Exec::solve_split`).
    kept: Vec<u32>,
    content_ids: Vec<u32>,
    content_ranges: Vec<(u32, u32)>,
    content_out: Vec<u32>,
    /// Scratch space for the content of a member's solutions (`FamilySolutions::kept_content`).
    kept_content: Vec<u32>,
    /// Scratch space for the entries of a sub-join, and for the order of its solutions.
    entries_buf: Vec<(Box<[TermId]>, SubResult)>,
    order_buf: Vec<usize>,
    mode: Mode,
    ticks: u64,
    deadline: Instant,
}

type Emit<'e> = dyn FnMut(&mut Exec) -> Result<(), Stop> + 'e;

impl<'a> Exec<'a> {
    pub fn new(
        store: StoreRef<'a>,
        relations: &'a [Relation],
        bounds: &'a Bounds,
        mode: Mode,
        deadline: Instant,
    ) -> Self {
        Exec {
            store,
            relations,
            bounds,
            binds: Vec::new(),
            trail: Vec::new(),
            stack: Vec::new(),
            key: Vec::new(),
            lits: Vec::new(),
            aux_rules: Vec::new(),
            aux_lits: Vec::new(),
            aux_count: 0,
            head_item: usize::MAX,
            head_pos: 0,
            head_at: std::borrow::Cow::Borrowed(&[]),
            head_at_found: Vec::new(),
            memo: Vec::new(),
            families: Vec::new(),
            canon: &[],
            by_calls: &[],
            shared: Vec::new(),
            split_sols: Vec::new(),
            exclusive: None,
            by_set: true,
            seen: Vec::new(),
            neg_memo: Vec::new(),
            waiting: false,
            neg_wait: Vec::new(),
            neg_args: Vec::new(),
            neg_hashes: Vec::new(),
            neg_run: Vec::new(),
            neg_found: Vec::new(),
            heads_found: None,
            note_head_at: false,
            head_lookup: true,
            head_lookup_adaptive: false,
            lookups: 0,
            lookups_held: 0,
            out_seen: Vec::new(),
            delta_keep: &[],
            first_part: None,
            last: Vec::new(),
            sol_vals: Vec::new(),
            sol_lits: Vec::new(),
            sol_ends: Vec::new(),
            fkey: Vec::new(),
            filter_key: Vec::new(),
            kept: Vec::new(),
            content_ids: Vec::new(),
            content_ranges: Vec::new(),
            content_out: Vec::new(),
            kept_content: Vec::new(),
            entries_buf: Vec::new(),
            order_buf: Vec::new(),
            mode,
            ticks: 0,
            deadline,
        }
    }

    /// Whether the head of the current solution is not in [`Exec::heads_found`], adding it
    /// (always true without the set).
    pub fn new_head(&mut self) -> bool {
        let Some(heads) = &mut self.heads_found else {
            return true;
        };
        heads.make_key(&self.binds);
        match heads.checked.take() {
            Some(h) => {
                debug_assert!(h == key_hash(&heads.key) && heads.found.get(&heads.key).is_none());
                heads.found.insert_hashed(h, &heads.key, ());
                true
            }
            None => heads.found.add(&heads.key),
        }
    }

    /// Runs `plan` over `conj`, calling `emit` with every solution.
    pub fn run(&mut self, conj: &Conj, plan: &Plan, emit: &mut Emit) -> Result<(), Stop> {
        self.binds.clear();
        self.binds.resize(conj.nvars, UNBOUND);
        self.trail.clear();
        self.lits.clear();
        self.memo.clear();
        self.memo
            .extend(plan.subs.iter().map(|sp| Memo::new(sp.given.len())));
        self.families.clear();
        self.families.resize_with(plan.subs.len(), FxHashMap::default);
        self.shared.clear();
        self.shared.resize_with(plan.subs.len(), FxHashMap::default);
        self.split_sols.clear();
        self.split_sols.extend(
            plan.subs
                .iter()
                .map(|sp| FamilySolutions::new(sp.family.len(), sp.split.as_ref())),
        );
        self.last.clear();
        self.last.resize(plan.subs.len(), None);
        self.out_seen.clear();
        self.out_seen
            .extend(plan.subs.iter().map(|sp| Memo::new(sp.out.len())));
        self.neg_memo.clear();
        self.neg_memo.resize_with(conj.body.len(), || None);
        let negated = plan.steps.iter().chain(plan.subs.iter().flat_map(|sp| {
            let split = sp.split.iter().flat_map(|s| s.shared.iter().chain(&s.filter));
            sp.steps.iter().chain(split)
        }));
        for s in negated {
            if let Step::NegOut { item } = s {
                if let Item::Neg(a) | Item::Pos(a) = &conj.body[*item] {
                    let mut vars = Vec::new();
                    a.for_each_var(&mut |v| vars.push(v));
                    vars.sort_unstable();
                    vars.dedup();
                    self.neg_memo[*item] = Some(NegMemo {
                        memo: Memo::new(vars.len()),
                        vars: vars.into(),
                        asked: 0,
                        found: 0,
                    });
                }
            }
        }
        self.seen.clear();
        for s in &plan.steps {
            if let Step::Seen { vars, .. } = s {
                self.seen.push(Memo::new(vars.len()));
            }
        }
        self.step(conj, plan, &plan.steps, 0, emit)
    }

    /// Whether the head atom of position `p` of `head_item`'s relation is known to hold
    /// (`head_at`). Every binding through that atom would stop at [`Step::HeadKnown`], and
    /// nothing before it emits, so the scan passes over the atom without reading it: chess's
    /// check test has six rules over the same 313,096 calls, and the later ones found every
    /// head known, after reading each 7-ary call atom (a cache miss) to unify it.
    #[inline]
    fn head_known_at(&self, p: usize) -> bool {
        self.head_at.get(p).is_some_and(|&t| t != UNBOUND)
    }

    fn tick(&mut self) -> Result<(), Stop> {
        self.ticks += 1;
        if self.ticks & 0x3fff == 0 && Instant::now() > self.deadline {
            return Err(Stop::Time);
        }
        Ok(())
    }

    fn undo(&mut self, mark: usize) {
        for v in self.trail.drain(mark..) {
            self.binds[v as usize] = UNBOUND;
        }
    }

    fn step(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        steps: &[Step],
        k: usize,
        emit: &mut Emit,
    ) -> Result<(), Stop> {
        let Some(step) = steps.get(k) else {
            return emit(self);
        };
        match step {
            Step::Scan {
                item,
                rel,
                index,
                key,
                range,
                exists_only,
                record,
                ..
            } => {
                let Item::Pos(a) = &conj.body[*item] else {
                    return Ok(());
                };
                let relations = self.relations;
                let relation = &relations[*rel as usize];
                let (lo, hi) = self.bounds.positions(*rel as usize, *range);
                let hi = hi.min(relation.rows.len());
                if lo >= hi {
                    return Ok(());
                }
                let at = Scanning {
                    k,
                    a,
                    rel: *rel,
                    exists_only: *exists_only,
                    record: *record,
                };
                let keep = if *range == Range::Delta {
                    self.delta_keep
                } else {
                    &[]
                };
                let skip = |p: usize| !keep.is_empty() && !keep[p - lo];
                // Only the plan's own steps report, so that the position is that of the
                // binding the solution callback sees.
                let report = *item == self.head_item && std::ptr::eq(steps, plan.steps.as_slice());
                match index {
                    None => {
                        let (lo, hi) = match self.first_part {
                            Some((from, to)) if k == 0 && std::ptr::eq(steps, plan.steps.as_slice()) => {
                                (lo.max(from), hi.min(to))
                            }
                            _ => (lo, hi),
                        };
                        self.try_positions(
                            conj,
                            plan,
                            steps,
                            &at,
                            report,
                            &relation.rows,
                            lo..hi,
                            skip,
                            emit,
                        )?;
                    }
                    Some(ix) if relation.indexes[*ix].whole => {
                        // Every argument is bound: the atom itself is looked up, and its
                        // position in the relation tells whether it is in the range.
                        // The row at that position is the atom found, whose record the
                        // lookup has just read: the relation's array is not read again.
                        let Some((t, p)) = self.find_atom(a).and_then(|t| Some((t, self.store.position(t)?)))
                        else {
                            return Ok(());
                        };
                        if p < lo || p >= hi || skip(p) || report && self.head_known_at(p) {
                            return Ok(());
                        }
                        debug_assert_eq!(relation.rows[p], t);
                        if report {
                            self.head_pos = p;
                        }
                        self.try_row(conj, plan, steps, &at, t, emit)?;
                    }
                    Some(ix) => {
                        let mut h = rustc_hash::FxHasher::default();
                        for src in key.iter() {
                            h.write_u64(match *src {
                                KeySrc::Const(c) => c,
                                KeySrc::Term(t) => u64::from(t),
                                KeySrc::Var(v) => u64::from(self.binds[v as usize]),
                            });
                        }
                        let index = &relation.indexes[*ix];
                        let Some(&head) = index.heads.get(&finish(h)) else {
                            return Ok(());
                        };
                        // The bucket's chain runs from the newest position to the oldest: those
                        // past the range are passed over, and the first before it ends the scan.
                        let chain = std::iter::successors((head != NIL).then_some(head), |&p| {
                            let older = index.older[p as usize];
                            (older != NIL).then_some(older)
                        })
                        .map(|p| p as usize)
                        .filter(|&p| p < hi)
                        .take_while(|&p| p >= lo);
                        self.try_positions(
                            conj,
                            plan,
                            steps,
                            &at,
                            report,
                            &relation.rows,
                            chain,
                            skip,
                            emit,
                        )?;
                    }
                }
                Ok(())
            }
            Step::Absent { item } => {
                let (Item::Neg(a) | Item::Pos(a)) = &conj.body[*item] else {
                    return Ok(());
                };
                let holds = self.find_atom(a).is_some_and(|t| self.store.holds(t));
                if !holds {
                    self.step(conj, plan, steps, k + 1, emit)?;
                }
                Ok(())
            }
            Step::NegOut { item } => {
                let (Item::Neg(a) | Item::Pos(a)) = &conj.body[*item] else {
                    return Ok(());
                };
                // While a sub-join's solutions are collected, a literal of variables and
                // constants waits to be looked up with the others (see `NegWait`).
                let answer = if self.waiting && a.args.iter().all(|p| !matches!(p, Pat::Func(..))) {
                    Some((WAITING, self.wait_negated(a)))
                } else {
                    self.negated_atom(*item, a).map(|t| (a.rel, t))
                };
                // A negated atom outside the over-approximation never holds: the literal is
                // true and is left out.
                match answer {
                    Some((rel, t)) => {
                        self.lits.push(OutLit {
                            rel,
                            atom: t,
                            negated: true,
                        });
                        let r = self.step(conj, plan, steps, k + 1, emit);
                        self.lits.pop();
                        r
                    }
                    None => self.step(conj, plan, steps, k + 1, emit),
                }
            }
            Step::Test { item } => {
                let pass = match &conj.body[*item] {
                    Item::Distinct(x, y) => !self.same(x, y),
                    Item::Equal(x, y) => self.same(x, y),
                    _ => false,
                };
                if pass {
                    self.step(conj, plan, steps, k + 1, emit)?;
                }
                Ok(())
            }
            Step::HeadKnown => {
                // The head is a function of the position `head_item` matched: a head found
                // to hold there before is known without looking it up (a 7-ary atom in
                // chess's check test, whose later rules find every head of the first again).
                if let Some(heads) = &mut self.heads_found {
                    heads.checked = None;
                }
                let cached = self.head_at.get(self.head_pos).copied();
                if cached.is_some_and(|t| t != UNBOUND) {
                    return Ok(());
                }
                let found = if self.head_lookup {
                    let found = self.find_atom(&conj.head).filter(|&t| self.store.flags(t) != 0);
                    if self.head_lookup_adaptive {
                        self.lookups += 1;
                        self.lookups_held += u32::from(found.is_some());
                        if self.lookups == LOOKUP_SAMPLE && self.lookups_held * 8 < LOOKUP_SAMPLE {
                            self.head_lookup = false;
                        }
                    }
                    found
                } else {
                    None
                };
                if let Some(t) = found {
                    if cached.is_some() && self.store.holds(t) {
                        match &mut self.head_at {
                            std::borrow::Cow::Owned(v) => {
                                v[self.head_pos] = t;
                                if self.note_head_at {
                                    self.head_at_found.push((self.head_pos, t));
                                }
                            }
                            std::borrow::Cow::Borrowed(_) => self.head_at_found.push((self.head_pos, t)),
                        }
                    }
                    return Ok(());
                }
                if let Some(heads) = &mut self.heads_found {
                    heads.make_key(&self.binds);
                    let h = key_hash(&heads.key);
                    if heads.found.find(h, &heads.key).is_some() {
                        return Ok(());
                    }
                    // The head's variables are bound: a solution of the rest of the join has
                    // this head (and the set does not change before it is emitted).
                    heads.checked = Some(h);
                }
                // Every later solution of this binding would derive the same atom again: the
                // rest of the join is an existence test, which stops at its first solution.
                match self.step(conj, plan, steps, k + 1, &mut |ex: &mut Exec| {
                    emit(ex)?;
                    Err(Stop::Found)
                }) {
                    Err(Stop::Found) => Ok(()),
                    r => r,
                }
            }
            Step::Seen { slot, vars } => {
                let mut key = std::mem::take(&mut self.key);
                key.clear();
                key.extend(vars.iter().map(|&v| self.binds[v as usize]));
                let new = self.seen[*slot].add(&key);
                self.key = key;
                if new {
                    self.step(conj, plan, steps, k + 1, emit)
                } else {
                    Ok(())
                }
            }
            Step::OutKnown { sub } => {
                let sp = &plan.subs[*sub];
                let mut key = std::mem::take(&mut self.key);
                key.clear();
                key.extend(sp.out.iter().map(|&v| self.binds[v as usize]));
                let known = self.out_seen[*sub].get(&key).is_some();
                self.key = key;
                if known {
                    return Ok(());
                }
                match self.step(conj, plan, steps, k + 1, &mut |ex: &mut Exec| {
                    emit(ex)?;
                    Err(Stop::Found)
                }) {
                    Err(Stop::Found) => {
                        let mut key = std::mem::take(&mut self.key);
                        key.clear();
                        key.extend(sp.out.iter().map(|&v| self.binds[v as usize]));
                        self.out_seen[*sub].add(&key);
                        self.key = key;
                        Ok(())
                    }
                    r => r,
                }
            }
            Step::Sub { sub } => {
                let sp = &plan.subs[*sub];
                let mut key = std::mem::take(&mut self.key);
                key.clear();
                key.extend(sp.given.iter().map(|&v| self.binds[v as usize]));
                // Nested loops often ask a sub-join again with the binding it saw last.
                let last = self.last[*sub]
                    .as_ref()
                    .filter(|(k, _)| same_ids(k, &key))
                    .map(|(_, r)| r.clone());
                let known = last.or_else(|| self.memo[*sub].get(&key).cloned());
                let entries = match known {
                    Some(r) => r,
                    None => {
                        // Nested sub-joins use the scratch key while this one is solved, so
                        // this binding stays in `key` until it is remembered below.
                        let r = self.solve_sub(conj, plan, *sub)?;
                        // Entries kept by their family's set of solutions are found again
                        // there at less cost than a memo of every binding would take (chess's
                        // check test asks each of its 940,000 bindings once).
                        if sp.split.is_none() || !self.by_set {
                            self.memo[*sub].insert(&key, r.clone());
                        }
                        r
                    }
                };
                match &mut self.last[*sub] {
                    Some((k, _)) if same_ids(k, &key) => {}
                    Some((k, r)) => {
                        k.clear();
                        k.extend_from_slice(&key);
                        *r = entries.clone();
                    }
                    slot @ None => *slot = Some((key.clone(), entries.clone())),
                }
                self.key = key;
                for (values, result) in entries.iter() {
                    let mark = self.lits.len();
                    let trail = self.trail.len();
                    for (&v, &t) in sp.out.iter().zip(values.iter()) {
                        self.binds[v as usize] = t;
                        self.trail.push(v);
                    }
                    match result {
                        SubResult::Inline(lits) => self.lits.extend_from_slice(lits),
                        SubResult::Aux(n) => self.lits.push(OutLit {
                            rel: AUX,
                            atom: *n,
                            negated: false,
                        }),
                    }
                    let r = self.step(conj, plan, steps, k + 1, emit);
                    self.lits.truncate(mark);
                    self.undo(trail);
                    r?;
                }
                Ok(())
            }
        }
    }

    /// Solves sub-join `sub` for the current binding of its given variables: for each binding
    /// of its out variables, what its solutions amount to.
    fn solve_sub(&mut self, conj: &Conj, plan: &Plan, sub: usize) -> Result<SubEntries, Stop> {
        // Only the collection of a plain sub-join's solutions lets negated literals wait
        // (below): a nested one starts without, whatever its caller does.
        let was = std::mem::replace(&mut self.waiting, false);
        let r = self.solve_sub_in(conj, plan, sub);
        self.waiting = was;
        r
    }

    fn solve_sub_in(&mut self, conj: &Conj, plan: &Plan, sub: usize) -> Result<SubEntries, Stop> {
        let sp = &plan.subs[sub];
        let steps = &sp.steps;
        if self.mode == Mode::Derive {
            if sp.out.is_empty() {
                return match self.step(conj, plan, steps, 0, &mut |_| Err(Stop::Found)) {
                    Ok(()) => Ok(Rc::new([])),
                    Err(Stop::Found) => Ok(Rc::new([(
                        Box::new([]) as Box<[TermId]>,
                        SubResult::Inline(Box::new([])),
                    )])),
                    Err(e) => Err(e),
                };
            }
            if sp.steps.iter().any(|s| matches!(s, Step::OutKnown { .. })) {
                self.out_seen[sub] = Memo::new(sp.out.len());
            }
            // The out values found, in the order first found, one after another in a memo's
            // array: a solution found again costs no allocation (chess's fixpoint solves its
            // sub-joins for hundreds of thousands of bindings).
            let mut found: Memo<()> = Memo::new(sp.out.len());
            let mut key = std::mem::take(&mut self.key);
            let solved = self.step(conj, plan, steps, 0, &mut |ex: &mut Exec| {
                key.clear();
                key.extend(sp.out.iter().map(|&v| ex.binds[v as usize]));
                found.add(&key);
                Ok(())
            });
            self.key = key;
            solved?;
            return Ok(found
                .keys
                .chunks_exact(sp.out.len())
                .map(|v| (Box::from(v), SubResult::Inline(Box::new([]))))
                .collect());
        }
        if let Some(split) = &sp.split {
            return self.solve_split(conj, plan, sub, split);
        }
        // The solutions go one after another into two arrays (their out values, and their
        // bodies), rather than a vector each: chess's check test solves sub-joins about a
        // million times, and allocating every solution was a tenth of its grounding.
        let (mut vals, mut lits, mut ends) = self.take_solutions();
        let from = self.neg_wait.len();
        self.waiting = true;
        let solved = self.collect(
            conj,
            plan,
            steps,
            &sp.out,
            &[],
            &mut vals,
            &mut Vec::new(),
            &mut lits,
            &mut ends,
        );
        self.waiting = false;
        if solved.is_ok() && self.neg_wait.len() > from {
            self.resolve_waiting(from, sp.out.len(), &mut vals, &mut lits, &mut ends);
        }
        self.forget_waiting(from);
        let result = solved.map(|()| self.entries(sub, sp, &vals, &lits, &ends, None));
        (self.sol_vals, self.sol_lits, self.sol_ends) = (vals, lits, ends);
        result
    }

    /// The scratch arrays of a sub-join's solutions (out values, bodies, body ends), empty,
    /// taken out of `self` while the join that fills them runs; put back when it is done.
    fn take_solutions(&mut self) -> (Vec<TermId>, Vec<OutLit>, Vec<u32>) {
        let mut vals = std::mem::take(&mut self.sol_vals);
        let mut lits = std::mem::take(&mut self.sol_lits);
        let mut ends = std::mem::take(&mut self.sol_ends);
        vals.clear();
        lits.clear();
        ends.clear();
        (vals, lits, ends)
    }

    /// Runs `steps` (a sub-join's) and appends each solution: its `out` values to `vals`, its
    /// `link` values to `links`, its body (sorted, without repeats) to `lits` and the body's
    /// end to `ends`. A body with both `x` and `(not x)` never holds and is left out.
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        steps: &[Step],
        out: &[u32],
        link: &[u32],
        vals: &mut Vec<TermId>,
        links: &mut Vec<TermId>,
        lits: &mut Vec<OutLit>,
        ends: &mut Vec<u32>,
    ) -> Result<(), Stop> {
        let mark = self.lits.len();
        self.step(conj, plan, steps, 0, &mut |ex: &mut Exec| {
            let start = lits.len();
            lits.extend_from_slice(&ex.lits[mark..]);
            // A body of one literal (each attacker of chess's check test) is sorted already.
            if lits.len() - start > 1 {
                sort_dedup_from(lits, start);
                if contradictory(&lits[start..]) {
                    lits.truncate(start);
                    return Ok(());
                }
            }
            vals.extend(out.iter().map(|&v| ex.binds[v as usize]));
            links.extend(link.iter().map(|&v| ex.binds[v as usize]));
            ends.push(lits.len() as u32);
            Ok(())
        })
    }

    /// `solve_sub` for a sub-join with a split plan: the shared part's solutions are those
    /// of the binding's family, found the first time the family is asked for, and the
    /// binding keeps those that pass the filter. They are the solutions the whole group
    /// would have (the filter reads only what the given variables and the links bind, and
    /// adds no literal), so the entries are the same; members that keep the same set of a
    /// family's solutions get the same entries, made once, where they follow from the set.
    fn solve_split(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        sub: usize,
        split: &Split,
    ) -> Result<SubEntries, Stop> {
        let mut fam = std::mem::take(&mut self.split_sols[sub]);
        let result = self.solve_split_in(conj, plan, sub, split, &mut fam);
        self.split_sols[sub] = fam;
        result
    }

    fn solve_split_in(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        sub: usize,
        split: &Split,
        fam: &mut FamilySolutions,
    ) -> Result<SubEntries, Stop> {
        let sp = &plan.subs[sub];
        let mut fkey = std::mem::take(&mut self.fkey);
        fkey.clear();
        fkey.extend(sp.family.iter().map(|&j| self.binds[sp.given[j] as usize]));
        let known = fam.memo.get(&fkey).copied();
        let f = match known {
            Some(f) => f,
            None => {
                let f = (fam.first.len() - 1) as u32;
                self.collect(
                    conj,
                    plan,
                    &split.shared,
                    &sp.out,
                    &split.link,
                    &mut fam.vals,
                    &mut fam.links,
                    &mut fam.lits,
                    &mut fam.ends,
                )
                .inspect_err(|_| {
                    // Leave the arrays as they were, so that the family can be asked again.
                    let at = fam.first[f as usize] as usize;
                    let lit_at = if at == 0 { 0 } else { fam.ends[at - 1] as usize };
                    fam.vals.truncate(at * sp.out.len());
                    fam.links.truncate(at * split.link.len());
                    fam.ends.truncate(at);
                    fam.lits.truncate(lit_at);
                })?;
                fam.number_links(fam.first[f as usize] as usize, split.link.len());
                fam.rank_bodies(
                    fam.first[f as usize] as usize,
                    self.canon,
                    &mut self.content_ids,
                    &mut self.content_ranges,
                    &mut self.order_buf,
                );
                fam.first.push(fam.ends.len() as u32);
                fam.memo.insert(&fkey, f);
                f
            }
        };
        self.fkey = fkey;
        let (lo, hi) = (fam.first[f as usize] as usize, fam.first[f as usize + 1] as usize);
        let (nout, nlink) = (sp.out.len(), split.link.len());
        // The row of the filter's answers for the given values it reads, made on first use
        // while the answers take less than `MAX_PASSES` cells; without one, each answer is
        // found by running the filter.
        let mut key = std::mem::take(&mut self.filter_key);
        key.clear();
        key.extend(fam.read_given.iter().map(|&v| self.binds[v as usize]));
        let row = match fam.rows.get(&key) {
            Some(&r) => Some(r as usize),
            None if fam.cells < MAX_PASSES && hi > lo => {
                let r = fam.answers.len();
                fam.rows.insert(&key, r as u32);
                fam.answers.push(Vec::new());
                Some(r)
            }
            None => None,
        };
        self.filter_key = key;
        // Which solutions the member keeps: a bit each (for families of at most 64), and
        // their places in `kept`.
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        let mut bits = 0u64;
        let mut failed = None;
        for i in lo..hi {
            let link = fam.link_of[i] as usize;
            let known = row.map_or(UNKNOWN, |r| fam.answers[r].get(link).copied().unwrap_or(UNKNOWN));
            let pass = if known != UNKNOWN {
                known == PASSES
            } else {
                let trail = self.trail.len();
                for (&v, &t) in split.link.iter().zip(&fam.links[i * nlink..(i + 1) * nlink]) {
                    self.binds[v as usize] = t;
                    self.trail.push(v);
                }
                let pass = match self.step(conj, plan, &split.filter, 0, &mut |_| Err(Stop::Found)) {
                    Ok(()) => false,
                    Err(Stop::Found) => true,
                    Err(e) => {
                        self.undo(trail);
                        failed = Some(e);
                        break;
                    }
                };
                self.undo(trail);
                if let Some(r) = row {
                    let answers = &mut fam.answers[r];
                    if answers.len() <= link {
                        fam.cells += link + 1 - answers.len();
                        answers.resize(link + 1, UNKNOWN);
                    }
                    answers[link] = if pass { PASSES } else { FAILS };
                }
                pass
            };
            if pass {
                if i - lo < 64 {
                    bits |= 1 << (i - lo);
                }
                kept.push(i as u32);
            }
        }
        let small = hi - lo <= 64;
        let result = match failed {
            Some(e) => Err(e),
            None => match fam.sets.get(&(f, bits)).filter(|_| small) {
                Some(e) => {
                    self.by_set = true;
                    Ok(e.clone())
                }
                None => {
                    let complement = if nout == 0 && complement_pays(lo, hi, kept.len()) {
                        self.complement_entries(fam, f, lo, hi, &kept)
                    } else {
                        None
                    };
                    let complement = match complement {
                        None if nout == 0 && kept.len() >= MIN_COVER => {
                            self.cover_entries(sub, fam, f, lo, hi, &kept)
                        }
                        c => c,
                    };
                    if let Some(e) = complement {
                        self.by_set = small;
                        if small {
                            fam.sets.insert((f, bits), e.clone());
                        }
                        Ok(e)
                    } else {
                        // The solutions kept, one after another as `entries` reads them.
                        let (mut vals, mut lits, mut ends) = self.take_solutions();
                        for &i in &kept {
                            let i = i as usize;
                            lits.extend_from_slice(fam.body(i));
                            ends.push(lits.len() as u32);
                            vals.extend_from_slice(&fam.vals[i * nout..(i + 1) * nout]);
                        }
                        self.by_set = true;
                        // Without out values the member's solutions are one group, whose content
                        // follows from the ranks of the solutions it keeps.
                        let mut content = std::mem::take(&mut self.kept_content);
                        let given = (nout == 0).then(|| {
                            fam.kept_content(f as usize, &kept, &mut self.content_ids, &mut content)
                                .then_some(content.as_slice())
                        });
                        let e = self.entries(sub, sp, &vals, &lits, &ends, given);
                        self.kept_content = content;
                        self.by_set &= small;
                        if self.by_set {
                            fam.sets.insert((f, bits), e.clone());
                        }
                        (self.sol_vals, self.sol_lits, self.sol_ends) = (vals, lits, ends);
                        Ok(e)
                    }
                }
            },
        };
        self.kept = kept;
        result
    }

    /// The entries of a member of family `f` (its solutions `lo..hi`) that keeps the
    /// solutions `kept` (in order) and drops the others, written as a complement: an
    /// auxiliary atom with one rule per role, "some solution of the role holds, and none of
    /// those dropped of the role does", `Ref ∧ ¬Drop`, where `Ref` (one atom per family and
    /// role) has every solution of the role and `Drop` the member's dropped ones. A role does
    /// one action in a joint move, so two `does` atoms of one role never hold together: when
    /// each solution reads a `does` atom, and no dropped solution reads the atom of a kept one
    /// of its role, a kept solution that holds leaves `Drop` false, and a solution of `Ref`
    /// that holds while `Drop` is false is a kept one. So the atom holds exactly when a kept
    /// solution does, with `|dropped| + |roles|` rules instead of `|kept|` (chess's frame
    /// rule, "the cell keeps its piece if the move made leaves it alone": 7,390 rules per cell
    /// become about 240). `None` when a solution reads no `does` atom or a dropped one shares
    /// its atom with a kept one; the entries are then made from the solutions kept.
    fn complement_entries(
        &mut self,
        fam: &mut FamilySolutions,
        f: u32,
        lo: usize,
        hi: usize,
        kept: &[u32],
    ) -> Option<SubEntries> {
        let does = self.exclusive?;
        // The `does` atom and role of every solution up to `hi`, found once.
        for i in fam.does_of.len()..hi {
            let d = fam
                .body(i)
                .iter()
                .find(|l| l.rel == does && !l.negated)
                .map_or(NO_DOES, |l| l.atom);
            fam.does_of.push(d);
            let role = if d == NO_DOES {
                NO_DOES
            } else {
                self.store.args(d)[0]
            };
            fam.role_of.push(role);
        }
        if fam.does_of[lo..hi].contains(&NO_DOES) {
            return None;
        }
        // The dropped solutions, and their `does` atoms sorted.
        let mut dropped: Vec<usize> = Vec::with_capacity(hi - lo - kept.len());
        let mut k = kept.iter().peekable();
        for i in lo..hi {
            if k.peek().is_some_and(|&&j| j as usize == i) {
                k.next();
            } else {
                dropped.push(i);
            }
        }
        let mut dropped_does: Vec<TermId> = dropped.iter().map(|&i| fam.does_of[i]).collect();
        dropped_does.sort_unstable();
        dropped_does.dedup();
        if kept
            .iter()
            .any(|&i| dropped_does.binary_search(&fam.does_of[i as usize]).is_ok())
        {
            return None;
        }
        let mut roles: Vec<TermId> = fam.role_of[lo..hi].to_vec();
        roles.sort_unstable();
        roles.dedup();
        let mut rules: Vec<[OutLit; 2]> = Vec::with_capacity(roles.len());
        let mut lone: Vec<OutLit> = Vec::new();
        for &role in &roles {
            let all = match fam.by_role.get(&(f, role)) {
                Some(&n) => n,
                None => {
                    let n = self.new_aux((lo..hi).filter(|&i| fam.role_of[i] == role).map(|i| fam.body(i)));
                    fam.by_role.insert((f, role), n);
                    n
                }
            };
            let all = OutLit {
                rel: AUX,
                atom: all,
                negated: false,
            };
            if dropped.iter().any(|&i| fam.role_of[i] == role) {
                let gone = self.new_aux(
                    dropped
                        .iter()
                        .filter(|&&i| fam.role_of[i] == role)
                        .map(|&i| fam.body(i)),
                );
                let gone = OutLit {
                    rel: AUX,
                    atom: gone,
                    negated: true,
                };
                rules.push([all, gone]);
            } else {
                lone.push(all);
            }
        }
        let n = self.new_aux(
            rules
                .iter()
                .map(|r| r.as_slice())
                .chain(lone.iter().map(std::slice::from_ref)),
        );
        Some(std::iter::once((Box::<[TermId]>::from([]), SubResult::Aux(n))).collect())
    }

    /// The entries of a member of family `f` (its solutions `lo..hi`) that keeps the
    /// solutions `kept` (in order), written as the `or` of a few segments of the family's
    /// distinct bodies rather than of every body it keeps. The bodies are ranked as the
    /// settled identities read them (`FamilySolutions::canon_rank`), and the ranks `0..m`
    /// split in halves recursively, each segment of two or more an auxiliary atom, the `or`
    /// of its halves, made once per family. A member that drops a few bodies keeps whole
    /// segments but for the ones on the way to each dropped body: chess's check test, "some
    /// piece other than the captured one attacks the king", has a family per target and
    /// ignored square of about 24 attackers, and each captured square drops one of them, so a
    /// member is an `or` of about five segments instead of 23 bodies. Because the segments
    /// follow the ranks, families with the same bodies make segments with the same
    /// definitions, which the output identifies. `None` when a body is empty or reads a move,
    /// or when the cover would have more than a third as many parts as the bodies kept; the
    /// entries are then made from the solutions kept.
    fn cover_entries(
        &mut self,
        sub: usize,
        fam: &mut FamilySolutions,
        f: u32,
        lo: usize,
        hi: usize,
        kept: &[u32],
    ) -> Option<SubEntries> {
        // The ranks of the bodies as the settled identities read them; where an atom is not
        // settled, the solutions' own order (equal bodies then stand apart, which the output's
        // removal of repeated rules absorbs).
        let ranked = !fam.canon_rank[lo..hi].contains(&NOT_SETTLED);
        let m = if ranked {
            (fam.rank_first[f as usize + 1] - fam.rank_first[f as usize]) as usize
        } else {
            hi - lo
        };
        let rank = |i: usize| {
            if ranked {
                fam.canon_rank[i] as usize
            } else {
                i - lo
            }
        };
        if m < MIN_COVER {
            return None;
        }
        // A solution of each rank, and which ranks the member keeps.
        let mut rep = vec![u32::MAX; m];
        for i in lo..hi {
            let r = rank(i);
            if rep[r] == u32::MAX {
                rep[r] = i as u32;
            }
        }
        // Bodies that read a move are left to the passes, which make less of a written-out
        // `or` of moves than of its segments (breakthrough's program would grow from 745 to
        // 859 gates, and eleven other small games' alike).
        let reads_move = |b: &[OutLit]| b.iter().any(|l| Some(l.rel) == self.exclusive);
        if rep
            .iter()
            .any(|&i| fam.body(i as usize).is_empty() || reads_move(fam.body(i as usize)))
        {
            return None;
        }
        let mut keeps = vec![false; m];
        for &i in kept {
            keeps[rank(i as usize)] = true;
        }
        let nkept = keeps.iter().filter(|&&k| k).count();
        if nkept < MIN_COVER {
            return None;
        }
        // `before[r]`: how many of the ranks below `r` are kept.
        let mut before = Vec::with_capacity(m + 1);
        before.push(0u32);
        for &k in &keeps {
            before.push(before.last().copied().unwrap_or(0) + u32::from(k));
        }
        let mut cover: Vec<(u32, u32)> = Vec::new();
        fn walk(a: u32, b: u32, before: &[u32], cover: &mut Vec<(u32, u32)>) {
            let n = before[b as usize] - before[a as usize];
            if n == 0 {
                return;
            }
            if n == b - a {
                cover.push((a, b));
                return;
            }
            let mid = a + (b - a) / 2;
            walk(a, mid, before, cover);
            walk(mid, b, before, cover);
        }
        walk(0, m as u32, &before, &mut cover);
        if 3 * cover.len() > nkept {
            return None;
        }
        // A member with the same bodies as one written before takes its atom.
        let mut content = std::mem::take(&mut self.kept_content);
        let known = ranked && fam.kept_content(f as usize, kept, &mut self.content_ids, &mut content);
        let found = if known {
            self.shared[sub].get(content.as_slice()).copied()
        } else {
            None
        };
        let n = match found {
            Some(n) => n,
            None => {
                let n = match cover[..] {
                    [(a, b)] => self.segment(fam, f, a, b, &rep),
                    _ => {
                        let parts: Vec<Vec<OutLit>> = cover
                            .iter()
                            .map(|&(a, b)| self.half(fam, f, a, b, &rep))
                            .collect();
                        self.new_aux(parts.iter().map(Vec::as_slice))
                    }
                };
                if known {
                    self.shared[sub].insert(content.as_slice().into(), n);
                }
                n
            }
        };
        self.kept_content = content;
        Some(std::iter::once((Box::<[TermId]>::from([]), SubResult::Aux(n))).collect())
    }

    /// The auxiliary atom of the segment `a..b` (of at least two ranks) of family `f`'s
    /// ranked bodies (`rep` holds a solution of each rank): the `or` of its halves.
    fn segment(&mut self, fam: &mut FamilySolutions, f: u32, a: u32, b: u32, rep: &[u32]) -> u32 {
        if let Some(&n) = fam.segments.get(&(f, a, b)) {
            return n;
        }
        let mid = a + (b - a) / 2;
        let left = self.half(fam, f, a, mid, rep);
        let right = self.half(fam, f, mid, b, rep);
        let n = self.new_aux([left.as_slice(), right.as_slice()]);
        fam.segments.insert((f, a, b), n);
        n
    }

    /// The body that stands for segment `a..b` in an `or`: the rank's body for a segment of
    /// one, the segment's auxiliary atom otherwise.
    fn half(&mut self, fam: &mut FamilySolutions, f: u32, a: u32, b: u32, rep: &[u32]) -> Vec<OutLit> {
        if b - a == 1 {
            fam.body(rep[a as usize] as usize).to_vec()
        } else {
            vec![OutLit {
                rel: AUX,
                atom: self.segment(fam, f, a, b, rep),
                negated: false,
            }]
        }
    }

    /// The entries of sub-join `sub` from its solutions: solution `i` has the out values
    /// `vals[i * nout..]` and the body `lits[ends[i - 1]..ends[i]]` (sorted, without repeats).
    /// `content`, for a sub-join without out values whose caller knows it, is what
    /// `Exec::content` would write for all the solutions (`None` inside where that is false).
    fn entries(
        &mut self,
        sub: usize,
        sp: &SubPlan,
        vals: &[TermId],
        lits: &[OutLit],
        ends: &[u32],
        content: Option<Option<&[u32]>>,
    ) -> SubEntries {
        let nout = sp.out.len();
        let value = |i: usize| &vals[i * nout..(i + 1) * nout];
        let body = |i: usize| {
            let s = if i == 0 { 0 } else { ends[i - 1] as usize };
            &lits[s..ends[i] as usize]
        };
        // Sorted by values, then body, without repeats: a group of equal values is one entry,
        // and its bodies come sorted (the families rely on that). Without out values (chess's
        // check test: 940,000 solves of about 15 solutions each) only the bodies are compared.
        let mut order = std::mem::take(&mut self.order_buf);
        order.clear();
        order.extend(0..ends.len());
        if nout == 0 {
            sort_dedup_by(&mut order, |&a, &b| body(a).cmp(body(b)));
        } else {
            sort_dedup_by(&mut order, |&a, &b| {
                value(a).cmp(value(b)).then_with(|| body(a).cmp(body(b)))
            });
        }
        let mut entries = std::mem::take(&mut self.entries_buf);
        entries.clear();
        let mut these: Vec<&[OutLit]> = Vec::new();
        let mut rest = order.as_slice();
        while let Some(&first) = rest.first() {
            let values = value(first);
            let same = if nout == 0 {
                rest.len()
            } else {
                rest.iter().take_while(|&&i| same_ids(value(i), values)).count()
            };
            let group = &rest[..same];
            rest = &rest[same..];
            let result = if group.iter().any(|&i| body(i).is_empty()) {
                // A solution with nothing dynamic in it makes the whole group true.
                SubResult::Inline(Box::new([]))
            } else if same == 1 {
                SubResult::Inline(body(group[0]).into())
            } else if sp.family.is_empty() {
                SubResult::Aux(self.new_aux(group.iter().map(|&i| body(i))))
            } else {
                these.clear();
                these.extend(group.iter().map(|&i| body(i)));
                let mut fkey = std::mem::take(&mut self.fkey);
                fkey.clear();
                fkey.extend(sp.family.iter().map(|&j| self.binds[sp.given[j] as usize]));
                fkey.extend_from_slice(values);
                let n = self.family_aux(sub, &fkey, &these, content);
                self.fkey = fkey;
                SubResult::Aux(n)
            };
            entries.push((values.into(), result));
        }
        // Collected straight into the shared slice, without a vector of its own to copy from.
        let shared: SubEntries = entries.drain(..).collect();
        self.entries_buf = entries;
        self.order_buf = order;
        shared
    }

    /// A new auxiliary atom with one rule per body.
    fn new_aux<'b>(&mut self, bodies: impl IntoIterator<Item = &'b [OutLit]>) -> u32 {
        let n = self.aux_count;
        self.aux_count += 1;
        for body in bodies {
            self.aux_lits.extend_from_slice(body);
            self.aux_rules.push((n, self.aux_lits.len()));
        }
        n
    }

    /// The auxiliary atom for the solutions `these` (sorted, several, none with an empty body)
    /// of a binding in family `fkey` of sub-join `sub`. Members of a family usually share most
    /// of their solutions: in a chess check test, "some piece other than the captured one
    /// attacks the king" has one solution per attacker, and the captured square only removes
    /// one of them. So the family keeps its largest solution set as a reference; a member with
    /// the same set reuses the reference's atom, and one that lacks a single solution reuses
    /// the one atom made for the reference without it. (Writing those as the `or` of a prefix
    /// and a suffix chain of the reference takes fewer rules, but the chains are gates the
    /// merge pass cannot share: chess's optimized net grew from 658,000 to 886,000
    /// components.) `given` is the content of `these` when the caller knows it (see
    /// `Exec::entries`).
    fn family_aux(
        &mut self,
        sub: usize,
        fkey: &[TermId],
        these: &[&[OutLit]],
        given: Option<Option<&[u32]>>,
    ) -> u32 {
        let mut content = std::mem::take(&mut self.content_out);
        let known = match given {
            None => self.content(these, &mut content),
            Some(None) => false,
            Some(Some(c)) => {
                content.clear();
                content.extend_from_slice(c);
                true
            }
        };
        if known {
            if let Some(&n) = self.shared[sub].get(content.as_slice()) {
                self.content_out = content;
                return n;
            }
        }
        self.by_set &= known;
        let n = self.family_aux_made(sub, fkey, these);
        if known {
            self.shared[sub].insert(content.as_slice().into(), n);
        }
        self.content_out = content;
        n
    }

    /// Writes to `out` the solutions `these` read through `canon`, each body sorted and the
    /// bodies sorted, one after another with each body's length before it; false when a
    /// literal's atom is not settled.
    fn content(&mut self, these: &[&[OutLit]], out: &mut Vec<u32>) -> bool {
        let ids = &mut self.content_ids;
        let ranges = &mut self.content_ranges;
        ids.clear();
        ranges.clear();
        out.clear();
        for body in these {
            let start = ids.len();
            for l in body.iter() {
                if l.rel == AUX {
                    return false;
                }
                match self.canon.get(l.atom as usize) {
                    Some(&id) if id != u32::MAX => ids.push(id << 1 | l.negated as u32),
                    _ => return false,
                }
            }
            sort_dedup_from(ids, start);
            ranges.push((start as u32, ids.len() as u32));
        }
        let ids = &*ids;
        let slice = |r: &(u32, u32)| &ids[r.0 as usize..r.1 as usize];
        sort_dedup_by(ranges, |a, b| slice(a).cmp(slice(b)));
        for r in ranges.iter() {
            out.push(r.1 - r.0);
            out.extend_from_slice(slice(r));
        }
        true
    }

    /// `family_aux` for solutions whose set no atom made before has.
    fn family_aux_made(&mut self, sub: usize, fkey: &[TermId], these: &[&[OutLit]]) -> u32 {
        let bodies = || these.iter().copied();
        let reference = self.families[sub].get(fkey);
        let replace = reference.is_none_or(|f| f.bodies.len() < these.len());
        let missing = reference.and_then(|f| {
            if f.bodies.len() == these.len() && f.bodies.iter().map(Vec::as_slice).eq(bodies()) {
                return Some(None);
            }
            if f.bodies.len() != these.len() + 1 {
                return None;
            }
            // Both are sorted: the first place they differ is the one missing solution.
            let i = f
                .bodies
                .iter()
                .zip(bodies())
                .take_while(|(a, b)| a.as_slice() == *b)
                .count();
            f.bodies[i + 1..]
                .iter()
                .map(Vec::as_slice)
                .eq(bodies().skip(i))
                .then_some(Some(i))
        });
        match missing {
            Some(None) => self.families[sub][fkey].aux,
            Some(Some(i)) => self.family_without(sub, fkey, i),
            None => {
                let n = self.new_aux(bodies());
                if replace {
                    let family = Family {
                        bodies: bodies().map(<[OutLit]>::to_vec).collect(),
                        aux: n,
                        without: FxHashMap::default(),
                    };
                    self.families[sub].insert(fkey.into(), family);
                }
                n
            }
        }
    }

    /// The auxiliary atom for family `fkey`'s reference solutions without solution `i`, made
    /// once per family and `i`.
    fn family_without(&mut self, sub: usize, fkey: &[TermId], i: usize) -> u32 {
        let family = &self.families[sub][fkey];
        if let Some(&n) = family.without.get(&i) {
            return n;
        }
        // As `new_aux` does, with the bodies read in place from the family.
        let n = self.aux_count;
        self.aux_count += 1;
        for (_, body) in family.bodies.iter().enumerate().filter(|&(j, _)| j != i) {
            self.aux_lits.extend_from_slice(body);
            self.aux_rules.push((n, self.aux_lits.len()));
        }
        if let Some(family) = self.families[sub].get_mut(fkey) {
            family.without.insert(i, n);
        }
        n
    }

    /// Tries the rows at `positions` of a relation whose rows are `rows`, other than those
    /// `skip` leaves out or whose head is known, in groups of `TOUCH` ([`Exec::try_group`]);
    /// stops when a try asks to.
    #[allow(clippy::too_many_arguments)]
    fn try_positions(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        steps: &[Step],
        at: &Scanning,
        report: bool,
        rows: &[TermId],
        mut positions: impl Iterator<Item = usize>,
        skip: impl Fn(usize) -> bool,
        emit: &mut Emit,
    ) -> Result<(), Stop> {
        let mut group = [0u32; TOUCH];
        let mut terms = [0 as TermId; TOUCH];
        loop {
            let mut n = 0;
            let mut more = true;
            while n < TOUCH {
                let Some(p) = positions.next() else {
                    more = false;
                    break;
                };
                if skip(p) || report && self.head_known_at(p) {
                    continue;
                }
                group[n] = p as u32;
                terms[n] = rows[p];
                n += 1;
            }
            if self.try_group(conj, plan, steps, at, report, &group[..n], &terms[..n], emit)? || !more {
                return Ok(());
            }
        }
    }

    /// Tries the rows `rows` at the positions `group` of a scan, those a filter before let
    /// through, after reading their records together (`TermStore::touch_terms`): trying each
    /// row in turn would wait for two misses a row. A row whose head an earlier row of the
    /// group made known is still passed over. Whether the scan stops (`try_row`).
    #[allow(clippy::too_many_arguments)]
    fn try_group(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        steps: &[Step],
        at: &Scanning,
        report: bool,
        group: &[u32],
        rows: &[TermId],
        emit: &mut Emit,
    ) -> Result<bool, Stop> {
        std::hint::black_box(self.store.touch_terms(rows));
        for (&p, &row) in group.iter().zip(rows) {
            let p = p as usize;
            if report && self.head_known_at(p) {
                continue;
            }
            if report {
                self.head_pos = p;
            }
            if self.try_row(conj, plan, steps, at, row, emit)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Unifies the literal with one atom and goes on with the next step; returns whether the
    /// scan can stop (it is existential and matched).
    #[inline]
    fn try_row(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        steps: &[Step],
        at: &Scanning,
        row: TermId,
        emit: &mut Emit,
    ) -> Result<bool, Stop> {
        self.tick()?;
        let mark = self.trail.len();
        let args = self.store.args(row);
        let mut ok = args.len() == at.a.args.len();
        if ok {
            for (p, &t) in at.a.args.iter().zip(args) {
                if !unify(&self.store, p, t, &mut self.binds, &mut self.trail) {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            if at.record {
                self.lits.push(OutLit {
                    rel: at.rel,
                    atom: row,
                    negated: false,
                });
            }
            let r = self.step(conj, plan, steps, at.k + 1, emit);
            if at.record {
                self.lits.pop();
            }
            if let Err(e) = r {
                self.undo(mark);
                return Err(e);
            }
        }
        self.undo(mark);
        Ok(ok && at.exists_only)
    }
}

/// Sorts `v[start..]` and removes its repeats.
pub(super) fn sort_dedup_from<T: Ord + Copy>(v: &mut Vec<T>, start: usize) {
    let n = sort_dedup_in(&mut v[start..]);
    v.truncate(start + n);
}

/// Sorts `s` and moves its distinct elements to its front, returning how many there are.
fn sort_dedup_in<T: Ord + Copy>(s: &mut [T]) -> usize {
    s.sort_unstable();
    let mut w = 0;
    for r in 0..s.len() {
        if w == 0 || s[r] != s[w - 1] {
            s[w] = s[r];
            w += 1;
        }
    }
    w
}

/// Whether a sorted body holds both `x` and `(not x)` for some atom `x`: it never holds.
fn contradictory(body: &[OutLit]) -> bool {
    body.windows(2)
        .any(|w| w[0].rel == w[1].rel && w[0].atom == w[1].atom)
}

/// Sorts `v` by `cmp` and removes its repeats (elements equal by `cmp`), as `sort_unstable_by`
/// and `dedup_by` would. A slice already strictly increasing is left as it is, and one strictly
/// decreasing is reversed: the solutions of a sub-join often come one way or the other (a scan
/// through an index runs from the newest atom back), and the library sorts a short slice by
/// insertion, which takes a comparison of two bodies per pair on a decreasing one. Chess's
/// check test sorts about a million sets of some fifteen solutions.
pub(super) fn sort_dedup_by<T>(v: &mut Vec<T>, mut cmp: impl FnMut(&T, &T) -> std::cmp::Ordering) {
    use std::cmp::Ordering::{Equal, Greater, Less};
    if v.len() < 2 {
        return;
    }
    let first = cmp(&v[0], &v[1]);
    if first != Equal && v.windows(2).skip(1).all(|w| cmp(&w[0], &w[1]) == first) {
        if first == Greater {
            v.reverse();
        }
        return;
    }
    v.sort_unstable_by(&mut cmp);
    v.dedup_by(|a, b| cmp(b, a) == Equal);
    debug_assert!(v.windows(2).all(|w| cmp(&w[0], &w[1]) == Less));
}

/// The scan in progress.
struct Scanning<'p> {
    k: usize,
    a: &'p AtomPat,
    rel: RelId,
    exists_only: bool,
    record: bool,
}

/// Matches `p` against the ground term `t`, binding variables (recorded on `trail`).
pub(crate) fn unify(
    store: &TermStore,
    p: &Pat,
    t: TermId,
    binds: &mut [TermId],
    trail: &mut Vec<u32>,
) -> bool {
    match p {
        Pat::Ground(g) => *g == t,
        Pat::Var(v) => {
            let b = binds[*v as usize];
            if b == UNBOUND {
                binds[*v as usize] = t;
                trail.push(*v);
                true
            } else {
                b == t
            }
        }
        Pat::Func(f, ps) => {
            if store.functor(t) != *f {
                return false;
            }
            let args = store.args(t);
            args.len() == ps.len()
                && ps
                    .iter()
                    .zip(args)
                    .all(|(p, &a)| unify(store, p, a, binds, trail))
        }
    }
}

/// The ground term `p` stands for under `binds`, added to the store if new. Every variable of
/// `p` must be bound. `stack` is scratch space, left as it was found.
fn build(store: &mut TermStore, p: &Pat, binds: &[TermId], stack: &mut Vec<TermId>) -> TermId {
    match p {
        Pat::Ground(g) => *g,
        Pat::Var(v) => binds[*v as usize],
        Pat::Func(f, ps) => {
            let base = stack.len();
            for p in ps.iter() {
                let t = build(store, p, binds, stack);
                stack.push(t);
            }
            let t = store.intern(*f, &stack[base..]);
            stack.truncate(base);
            t
        }
    }
}

/// The ground term `p` stands for under `binds`, if it exists. `stack` is scratch space.
fn find(store: &TermStore, p: &Pat, binds: &[TermId], stack: &mut Vec<TermId>) -> Option<TermId> {
    match p {
        Pat::Ground(g) => Some(*g),
        Pat::Var(v) => Some(binds[*v as usize]),
        Pat::Func(f, ps) => {
            let base = stack.len();
            for p in ps.iter() {
                match find(store, p, binds, stack) {
                    Some(t) => stack.push(t),
                    None => {
                        stack.truncate(base);
                        return None;
                    }
                }
            }
            let t = store.find(*f, &stack[base..]);
            stack.truncate(base);
            t
        }
    }
}

/// The atom `a` stands for under `binds` (which bind each of its variables), added to the
/// store if new. `stack` is scratch space.
pub(crate) fn build_atom(
    store: &mut TermStore,
    a: &AtomPat,
    binds: &[TermId],
    stack: &mut Vec<TermId>,
) -> TermId {
    let base = stack.len();
    for p in a.args.iter() {
        let t = build(store, p, binds, stack);
        stack.push(t);
    }
    let t = store.intern(a.sym, &stack[base..]);
    stack.truncate(base);
    t
}

/// The depth ([`TermStore::depth`]) the atom `a` has under `binds`, without making it.
pub(crate) fn atom_depth(store: &TermStore, a: &AtomPat, binds: &[TermId]) -> u16 {
    fn depth(store: &TermStore, p: &Pat, binds: &[TermId]) -> u16 {
        match p {
            Pat::Ground(g) => store.depth(*g),
            Pat::Var(v) => store.depth(binds[*v as usize]),
            Pat::Func(_, ps) => ps
                .iter()
                .map(|p| depth(store, p, binds))
                .max()
                .unwrap_or(0)
                .saturating_add(1),
        }
    }
    a.args
        .iter()
        .map(|p| depth(store, p, binds))
        .max()
        .unwrap_or(0)
        .saturating_add(1)
}

impl Exec<'_> {
    /// The atom `a` stands for under the current bindings, added to the store if new.
    pub fn build_atom(&mut self, a: &AtomPat) -> TermId {
        let mut stack = std::mem::take(&mut self.stack);
        let t = build_atom(&mut self.store, a, &self.binds, &mut stack);
        self.stack = stack;
        t
    }

    /// The atom `a` stands for under the current bindings, if it exists.
    pub fn find_atom(&mut self, a: &AtomPat) -> Option<TermId> {
        let stack = &mut self.stack;
        let base = stack.len();
        for p in a.args.iter() {
            match find(&self.store, p, &self.binds, stack) {
                Some(t) => stack.push(t),
                None => {
                    stack.truncate(base);
                    return None;
                }
            }
        }
        let t = self.store.find(a.sym, &stack[base..]);
        stack.truncate(base);
        t
    }

    /// The atom of negated literal `item` (`a`) under the current bindings if it holds,
    /// for [`Step::NegOut`]. The term store does not change while instantiating, so the
    /// answer depends only on the values of the literal's variables, and is remembered by
    /// them: chess's `next` rule of an unmoved cell asks `is_castle_move` and
    /// `pawn_capture_en_passant` of every move once for each of the 64 cells, and its
    /// `legal` rules ask the check test of one move and king square for every blocking
    /// square; each lookup in the term table is two cache misses. A literal whose bindings
    /// rarely come again (fewer than a quarter answered from the memo once it has been asked
    /// `NEG_MEMO_TRIAL` times) stops being remembered.
    fn negated_atom(&mut self, item: usize, a: &AtomPat) -> Option<TermId> {
        let Some(nm) = self.neg_memo.get_mut(item).and_then(Option::as_mut) else {
            return self.find_atom(a).filter(|&t| self.may_hold(a.rel, t));
        };
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.extend(nm.vars.iter().map(|&v| self.binds[v as usize]));
        nm.asked += 1;
        let h = key_hash(&key);
        if let Some(&t) = nm.memo.find(h, &key) {
            nm.found += 1;
            self.key = key;
            return (t != NOT_HOLDING).then_some(t);
        }
        let keep = if nm.asked >= NEG_MEMO_TRIAL && nm.found * 4 < nm.asked {
            self.neg_memo[item] = None;
            false
        } else {
            nm.memo.keys.len() < MAX_NEG_MEMO * nm.vars.len().max(1)
        };
        let t = self.find_atom(a).filter(|&t| self.may_hold(a.rel, t));
        if keep {
            if let Some(nm) = self.neg_memo[item].as_mut() {
                nm.memo.insert_hashed(h, &key, t.unwrap_or(NOT_HOLDING));
            }
        }
        self.key = key;
        t
    }

    /// Whether atom `t` of `rel` can hold while instantiating: it is in the over-approximation,
    /// and if that took it from its calls (`by_calls`), it has a settled identity, which only
    /// an atom with a ground rule has once its relation is settled.
    fn may_hold(&self, rel: RelId, t: TermId) -> bool {
        self.store.holds(t)
            && (!self.by_calls.get(rel as usize).is_some_and(|&b| b)
                || self.canon.get(t as usize).is_some_and(|&c| c != u32::MAX))
    }

    /// Puts negated literal `a` (of variables and constants) among those waiting to be looked
    /// up (see [`NegWait`]) and returns its place there.
    fn wait_negated(&mut self, a: &AtomPat) -> u32 {
        let n = self.neg_wait.len() as u32;
        self.neg_wait.push(NegWait {
            rel: a.rel,
            sym: a.sym,
            args: self.neg_args.len() as u32,
            arity: a.args.len() as u32,
        });
        let binds = &self.binds;
        self.neg_args.extend(a.args.iter().map(|p| match p {
            Pat::Var(v) => binds[*v as usize],
            Pat::Ground(g) => *g,
            Pat::Func(..) => unreachable!("only literals of variables and constants wait"),
        }));
        n
    }

    /// Looks up the negated literals waiting from `from` on (see [`NegWait`]), their table
    /// slots all touched first, and writes them into the solutions `collect` gathered (bodies
    /// `lits`, ends `ends`, `nout` out values each in `vals`): a literal whose atom does not
    /// hold is true and left out, each body with a waiting literal is then sorted without
    /// repeats, and a solution with both `x` and `(not x)` is dropped, as `collect` does for
    /// the others; so the solutions are those that looking each literal up at once gives.
    /// The caller forgets the waiting literals (`forget_waiting`).
    fn resolve_waiting(
        &mut self,
        from: usize,
        nout: usize,
        vals: &mut Vec<TermId>,
        lits: &mut Vec<OutLit>,
        ends: &mut Vec<u32>,
    ) {
        let store: &TermStore = &self.store;
        let waits = &self.neg_wait[from..];
        // The slots of each run of literals of one functor are touched together (their
        // arguments are one after another in `neg_args`), so that their misses overlap.
        let mut hashes = std::mem::take(&mut self.neg_hashes);
        let mut run = std::mem::take(&mut self.neg_run);
        hashes.clear();
        let mut i = 0;
        while i < waits.len() {
            let (sym, arity) = (waits[i].sym, waits[i].arity);
            let j = i + waits[i..]
                .iter()
                .take_while(|w| w.sym == sym && w.arity == arity)
                .count();
            let lo = waits[i].args as usize;
            let hi = (waits[j - 1].args + arity) as usize;
            if arity == 0 {
                hashes.extend(std::iter::repeat_n(0, j - i));
            } else {
                store.touch(sym, arity as usize, &self.neg_args[lo..hi], &mut run);
                hashes.extend_from_slice(&run);
            }
            i = j;
        }
        self.neg_run = run;
        // The atom of each waiting literal where it holds, `NOT_HOLDING` elsewhere.
        let mut found = std::mem::take(&mut self.neg_found);
        found.clear();
        for (w, &h) in waits.iter().zip(&hashes) {
            let args = &self.neg_args[w.args as usize..(w.args + w.arity) as usize];
            let t = if args.is_empty() {
                store.find(w.sym, args)
            } else {
                store.find_hashed(h, w.sym, args)
            };
            found.push(t.filter(|&t| self.may_hold(w.rel, t)).unwrap_or(NOT_HOLDING));
        }
        self.neg_hashes = hashes;
        // The solutions, rewritten in place.
        let (mut w_sol, mut w_lit, mut start) = (0, 0, 0);
        for i in 0..ends.len() {
            let end = ends[i] as usize;
            let body = w_lit;
            let mut waited = false;
            for j in start..end {
                let l = lits[j];
                if l.rel == WAITING {
                    waited = true;
                    let wait = &self.neg_wait[l.atom as usize];
                    let t = found[l.atom as usize - from];
                    if t == NOT_HOLDING {
                        continue;
                    }
                    lits[w_lit] = OutLit {
                        rel: wait.rel,
                        atom: t,
                        negated: true,
                    };
                } else {
                    lits[w_lit] = l;
                }
                w_lit += 1;
            }
            start = end;
            if waited && w_lit - body > 1 {
                w_lit = body + sort_dedup_in(&mut lits[body..w_lit]);
                if contradictory(&lits[body..w_lit]) {
                    w_lit = body;
                    continue;
                }
            }
            ends[w_sol] = w_lit as u32;
            vals.copy_within(i * nout..(i + 1) * nout, w_sol * nout);
            w_sol += 1;
        }
        ends.truncate(w_sol);
        vals.truncate(w_sol * nout);
        lits.truncate(w_lit);
        self.neg_found = found;
    }

    /// Forgets the negated literals waiting from `from` on.
    fn forget_waiting(&mut self, from: usize) {
        if let Some(w) = self.neg_wait.get(from) {
            self.neg_args.truncate(w.args as usize);
        }
        self.neg_wait.truncate(from);
    }

    /// Whether `x` and `y` stand for the same term under the current bindings.
    fn same(&mut self, x: &Pat, y: &Pat) -> bool {
        same(&self.store, x, y, &self.binds, &mut self.stack)
    }
}

/// Whether `x` and `y` stand for the same term under `binds`. A term that does not exist in the
/// store is compared structurally.
fn same(store: &TermStore, x: &Pat, y: &Pat, binds: &[TermId], stack: &mut Vec<TermId>) -> bool {
    match (find(store, x, binds, stack), find(store, y, binds, stack)) {
        (Some(a), Some(b)) => a == b,
        // Only function terms can be missing (variables are bound to stored terms), and a
        // stored term never equals a missing one.
        (None, None) => match (x, y) {
            (Pat::Func(f, xs), Pat::Func(g, ys)) => {
                f == g
                    && xs.len() == ys.len()
                    && xs
                        .iter()
                        .zip(ys.iter())
                        .all(|(a, b)| same(store, a, b, binds, stack))
            }
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ground::normalize::{normalize, RelTable};

    fn conj(src: &str) -> Conj {
        let desc = crate::gdl::parse_syntax(src).expect("the test text parses");
        let mut store = TermStore::default();
        let mut rels = RelTable::default();
        let mut conjs = normalize(&desc, &mut store, &mut rels).expect("normalizes").0;
        conjs.remove(0)
    }

    /// The plan that scans the body in the order written.
    fn scans(c: &Conj) -> Vec<Step> {
        (0..c.body.len())
            .map(|i| Step::Scan {
                item: i,
                rel: 0,
                index: None,
                probes: Box::new([]),
                key: Box::new([]),
                range: Range::All,
                exists_only: false,
                record: false,
            })
            .collect()
    }

    fn seen(steps: &[Step]) -> Vec<(usize, Vec<u32>)> {
        steps
            .iter()
            .enumerate()
            .filter_map(|(k, s)| match s {
                Step::Seen { vars, .. } => Some((k, vars.to_vec())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_scan_that_leaves_an_unread_variable_is_followed_by_a_seen_step() {
        // `?dx` is read by nothing after the move: bindings that differ in it only run the
        // position and the addition again. Variables are numbered head first: ?p 0, ?n 1,
        // ?dx 2, ?dy 3, ?y 4.
        let c = conj("(<= (next (pos ?p ?n)) (does ?p (speed ?dx ?dy)) (true (pos ?p ?y)) (add ?y ?dy ?n))");
        let mut steps = scans(&c);
        mark_seen(&c, &mut steps, &[]);
        assert_eq!(seen(&steps), vec![(1, vec![0, 3])]);
        // After the position, ?y is still read by the addition, and nothing follows the
        // addition: no other step.
        assert_eq!(steps.len(), 4);
    }

    fn sub_plan(steps: Vec<Step>, out: &[u32]) -> SubPlan {
        SubPlan {
            steps,
            given: Box::new([]),
            out: out.into(),
            family: Box::new([]),
            split: None,
        }
    }

    #[test]
    fn a_sub_join_whose_out_variables_are_bound_is_then_an_existence_test() {
        // As a sub-join binding ?x (variable 0): once the first scan has bound it, the second
        // only has to find one ?z; ?y 1, ?z 2.
        let c = conj("(<= (r ?x) (p ?x ?y) (q ?y ?z))");
        let mut sp = sub_plan(scans(&c), &[0]);
        mark_out_known(&c, 3, &mut sp);
        assert_eq!(sp.steps.len(), 3);
        assert!(matches!(sp.steps[1], Step::OutKnown { sub: 3 }), "{:?}", sp.steps);
        // Bound only by the last scan, or not an out variable at all: nothing to cut.
        let mut sp = sub_plan(scans(&c), &[2]);
        mark_out_known(&c, 0, &mut sp);
        assert_eq!(sp.steps.len(), 2);
        let mut sp = sub_plan(scans(&c), &[]);
        mark_out_known(&c, 0, &mut sp);
        assert_eq!(sp.steps.len(), 2);
    }

    #[test]
    fn no_seen_step_where_every_variable_is_read_later_or_nothing_follows() {
        let c = conj("(<= (r ?x ?z) (p ?x ?y) (q ?y ?z))");
        let mut steps = scans(&c);
        mark_seen(&c, &mut steps, &[]);
        assert!(seen(&steps).is_empty(), "{steps:?}");
        // ?y dies at the second scan, but only the test, which is no work, follows it.
        let c = conj("(<= (r ?x ?z) (p ?x ?y) (q ?y ?z) (distinct ?x ?z))");
        let mut steps = scans(&c);
        steps[2] = Step::Test { item: 2 };
        mark_seen(&c, &mut steps, &[]);
        assert!(seen(&steps).is_empty(), "{steps:?}");
    }
}
