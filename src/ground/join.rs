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
use super::terms::{TermId, TermStore, UNBOUND};
use rustc_hash::FxHashMap;
use std::hash::Hasher;
use std::time::Instant;

/// A place inside an atom: the argument, then the argument of that, and so on.
type Path = Box<[u8]>;

/// What an index reads at a path.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Probe {
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

/// An index of one relation.
pub(crate) struct Index {
    probes: Box<[Probe]>,
    /// How many of the relation's atoms are indexed.
    upto: usize,
    /// How many of those have every probed path (the others can never match).
    included: usize,
    buckets: FxHashMap<u64, Vec<u32>>,
}

impl Index {
    fn catch_up(&mut self, rows: &[TermId], store: &TermStore) {
        'rows: for (pos, &row) in rows.iter().enumerate().skip(self.upto) {
            let mut h = rustc_hash::FxHasher::default();
            for p in self.probes.iter() {
                let mut t = row;
                for &i in p.path.iter() {
                    match store.args(t).get(i as usize) {
                        Some(&a) => t = a,
                        None => continue 'rows,
                    }
                }
                if p.functor {
                    h.write_u64(functor_code(store.functor(t), store.args(t).len()));
                } else {
                    h.write_u64(u64::from(t));
                }
            }
            self.included += 1;
            self.buckets.entry(finish(h)).or_default().push(pos as u32);
        }
        self.upto = rows.len();
    }

    /// The average number of atoms a lookup finds.
    fn average_bucket(&self) -> f64 {
        if self.buckets.is_empty() {
            0.0
        } else {
            self.included as f64 / self.buckets.len() as f64
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
    /// The index with these probes, made and brought up to date as needed.
    fn index(&mut self, probes: &[Probe], store: &TermStore) -> usize {
        let i = match self.indexes.iter().position(|ix| *ix.probes == *probes) {
            Some(i) => i,
            None => {
                self.indexes.push(Index {
                    probes: probes.into(),
                    upto: 0,
                    included: 0,
                    buckets: FxHashMap::default(),
                });
                self.indexes.len() - 1
            }
        };
        self.indexes[i].catch_up(&self.rows, store);
        i
    }

    /// Bytes held by the indexes, roughly.
    pub fn bytes(&self) -> usize {
        self.rows.capacity() * 4
            + self
                .indexes
                .iter()
                .map(|ix| ix.buckets.capacity() * 40 + ix.included * 4)
                .sum::<usize>()
    }
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
        key: Box<[KeySrc]>,
        range: Range,
        /// Stop after the first match: nothing after this step uses what it binds.
        exists_only: bool,
    },
    /// The negated literal `item` over a complete relation: its atom must not hold.
    Absent { item: usize },
    /// The `distinct` (or equality) `item`.
    Test { item: usize },
}

/// What a plan is for.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// Deriving head atoms; negated literals over relations in `dynamic` are assumed true.
    Derive,
    /// Instantiating a rule: positive literals over `dynamic` relations are kept in the ground
    /// rule, and negated ones are read after the join.
    Instantiate,
}

/// A join plan for one conjunction.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
}

/// Per relation, the bounds of the current round: atoms `[0, old)` are old, `[old, all)` are
/// the last round's.
pub(crate) struct Bounds {
    pub old: Vec<usize>,
    pub all: Vec<usize>,
}

/// Makes the plan of `conj` with its literal `delta` (an index into the body) read only the last
/// round's atoms, the positive literals over relations in `recursive` before it the old atoms,
/// and every other literal all atoms. The remaining positive literals are ordered greedily by
/// the expected number of matches, and every test runs as soon as its variables are bound.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(
    conj: &Conj,
    delta: Option<usize>,
    recursive: &[bool],
    dynamic: &[bool],
    mode: Mode,
    relations: &mut [Relation],
    store: &TermStore,
) -> Plan {
    let mut bound = vec![false; conj.nvars];
    let mut steps = Vec::new();
    let mut done = vec![false; conj.body.len()];
    // Negated literals over dynamic relations are not part of the join: assumed true while
    // deriving, read after the join when instantiating.
    for (i, item) in conj.body.iter().enumerate() {
        if let Item::Neg(a) = item {
            if dynamic[a.rel as usize] {
                done[i] = true;
            }
        }
    }
    let range_of = |i: usize, rel: RelId| -> Range {
        match delta {
            Some(d) if d == i => Range::Delta,
            Some(d) if i < d && recursive[rel as usize] => Range::Old,
            _ => Range::All,
        }
    };
    let push_tests = |bound: &[bool], done: &mut [bool], steps: &mut Vec<Step>| {
        for (i, item) in conj.body.iter().enumerate() {
            if done[i] || matches!(item, Item::Pos(_)) {
                continue;
            }
            let mut ready = true;
            item.for_each_var(&mut |v| ready &= bound[v as usize]);
            if ready {
                done[i] = true;
                steps.push(match item {
                    Item::Neg(_) => Step::Absent { item: i },
                    _ => Step::Test { item: i },
                });
            }
        }
    };
    push_tests(&bound, &mut done, &mut steps);
    if let Some(d) = delta {
        if let Some(Item::Pos(a)) = conj.body.get(d) {
            steps.push(scan_step(d, a, &bound, Range::Delta, relations, store).0);
            done[d] = true;
            a.for_each_var(&mut |v| bound[v as usize] = true);
            push_tests(&bound, &mut done, &mut steps);
        }
    }
    loop {
        let mut best: Option<(f64, usize, Step)> = None;
        for (i, item) in conj.body.iter().enumerate() {
            let Item::Pos(a) = item else { continue };
            if done[i] {
                continue;
            }
            let range = range_of(i, a.rel);
            let (step, cost) = scan_step(i, a, &bound, range, relations, store);
            if best.as_ref().is_none_or(|(c, _, _)| cost < *c) {
                best = Some((cost, i, step));
            }
        }
        let Some((_, i, step)) = best else { break };
        steps.push(step);
        done[i] = true;
        conj.body[i].for_each_var(&mut |v| bound[v as usize] = true);
        push_tests(&bound, &mut done, &mut steps);
    }
    mark_exists_only(conj, &mut steps, dynamic, mode);
    Plan { steps }
}

/// The scan of positive literal `i` given the bound variables, and its expected matches.
fn scan_step(
    i: usize,
    a: &AtomPat,
    bound: &[bool],
    range: Range,
    relations: &mut [Relation],
    store: &TermStore,
) -> (Step, f64) {
    let (probes, key) = probes_of(&a.args, bound);
    let rel = &mut relations[a.rel as usize];
    let (index, cost) = if probes.is_empty() {
        (None, rel.rows.len() as f64)
    } else {
        let ix = rel.index(&probes, store);
        (Some(ix), rel.indexes[ix].average_bucket())
    };
    // A literal whose variables are all bound is a lookup: prefer it to a scan of equal cost.
    let mut all_bound = true;
    a.for_each_var(&mut |v| all_bound &= bound[v as usize]);
    let cost = if all_bound { cost.min(1.0) * 0.5 } else { cost };
    (
        Step::Scan {
            item: i,
            rel: a.rel,
            index,
            key: key.into(),
            range,
            exists_only: false,
        },
        cost,
    )
}

/// Marks the scans whose new bindings nothing later reads: the join only needs to know that
/// they match once. When instantiating, a scan of a dynamic relation is part of the ground rule
/// and never marked.
fn mark_exists_only(conj: &Conj, steps: &mut [Step], dynamic: &[bool], mode: Mode) {
    let mut needed = vec![false; conj.nvars];
    conj.head.for_each_var(&mut |v| needed[v as usize] = true);
    for item in &conj.body {
        if let Item::Neg(a) = item {
            if dynamic[a.rel as usize] && mode == Mode::Instantiate {
                a.for_each_var(&mut |v| needed[v as usize] = true);
            }
        }
    }
    // Variables bound before each step.
    let mut bound_before = Vec::with_capacity(steps.len());
    let mut bound = vec![false; conj.nvars];
    for s in steps.iter() {
        bound_before.push(bound.clone());
        if let Step::Scan { item, .. } = s {
            conj.body[*item].for_each_var(&mut |v| bound[v as usize] = true);
        }
    }
    for (k, s) in steps.iter_mut().enumerate().rev() {
        let item = match s {
            Step::Scan { item, .. } | Step::Absent { item } | Step::Test { item } => *item,
        };
        if let Step::Scan { rel, exists_only, .. } = s {
            let keeps = mode == Mode::Instantiate && dynamic[*rel as usize];
            let mut binds_needed = false;
            conj.body[item].for_each_var(&mut |v| {
                binds_needed |= !bound_before[k][v as usize] && needed[v as usize];
            });
            *exists_only = !keeps && !binds_needed;
        }
        conj.body[item].for_each_var(&mut |v| needed[v as usize] = true);
    }
}

/// Why a join stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The deadline passed.
    Time,
    /// The solution callback refused to go on.
    Callback(super::GroundError),
}

/// The state of one join.
pub(crate) struct Exec<'a> {
    pub store: &'a mut TermStore,
    pub relations: &'a [Relation],
    pub bounds: &'a Bounds,
    pub binds: Vec<TermId>,
    trail: Vec<u32>,
    /// The atom each scan step matched, by step.
    pub matched: Vec<TermId>,
    ticks: u64,
    deadline: Instant,
}

impl<'a> Exec<'a> {
    pub fn new(
        store: &'a mut TermStore,
        relations: &'a [Relation],
        bounds: &'a Bounds,
        deadline: Instant,
    ) -> Self {
        Exec {
            store,
            relations,
            bounds,
            binds: Vec::new(),
            trail: Vec::new(),
            matched: Vec::new(),
            ticks: 0,
            deadline,
        }
    }

    /// Runs `plan` over `conj`, calling `emit` with every solution.
    pub fn run(
        &mut self,
        conj: &Conj,
        plan: &Plan,
        emit: &mut dyn FnMut(&mut Exec) -> Result<(), super::GroundError>,
    ) -> Result<(), Stop> {
        self.binds.clear();
        self.binds.resize(conj.nvars, UNBOUND);
        self.trail.clear();
        self.matched.clear();
        self.matched.resize(plan.steps.len(), UNBOUND);
        self.step(conj, &plan.steps, 0, emit)
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
        steps: &[Step],
        k: usize,
        emit: &mut dyn FnMut(&mut Exec) -> Result<(), super::GroundError>,
    ) -> Result<(), Stop> {
        let Some(step) = steps.get(k) else {
            return emit(self).map_err(Stop::Callback);
        };
        match step {
            Step::Scan {
                item,
                rel,
                index,
                key,
                range,
                exists_only,
            } => {
                let Item::Pos(a) = &conj.body[*item] else {
                    return Ok(());
                };
                let relations = self.relations;
                let relation = &relations[*rel as usize];
                let (lo, hi) = match range {
                    Range::Old => (0, self.bounds.old[*rel as usize]),
                    Range::All => (0, self.bounds.all[*rel as usize]),
                    Range::Delta => (self.bounds.old[*rel as usize], self.bounds.all[*rel as usize]),
                };
                let hi = hi.min(relation.rows.len());
                if lo >= hi {
                    return Ok(());
                }
                match index {
                    None => {
                        for pos in lo..hi {
                            if self.try_row(conj, steps, k, a, relation.rows[pos], *exists_only, emit)? {
                                break;
                            }
                        }
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
                        let Some(bucket) = relation.indexes[*ix].buckets.get(&finish(h)) else {
                            return Ok(());
                        };
                        let start = if lo == 0 {
                            0
                        } else {
                            bucket.partition_point(|&p| (p as usize) < lo)
                        };
                        for &pos in &bucket[start..] {
                            if pos as usize >= hi {
                                break;
                            }
                            let row = relation.rows[pos as usize];
                            if self.try_row(conj, steps, k, a, row, *exists_only, emit)? {
                                break;
                            }
                        }
                    }
                }
                Ok(())
            }
            Step::Absent { item } => {
                let (Item::Neg(a) | Item::Pos(a)) = &conj.body[*item] else {
                    return Ok(());
                };
                let holds = find_atom(self.store, a, &self.binds).is_some_and(|t| self.store.holds(t));
                if !holds {
                    self.step(conj, steps, k + 1, emit)?;
                }
                Ok(())
            }
            Step::Test { item } => {
                let pass = match &conj.body[*item] {
                    Item::Distinct(x, y) => !same(self.store, x, y, &self.binds),
                    Item::Equal(x, y) => same(self.store, x, y, &self.binds),
                    _ => false,
                };
                if pass {
                    self.step(conj, steps, k + 1, emit)?;
                }
                Ok(())
            }
        }
    }

    /// Unifies the literal with one atom and goes on with the next step; returns whether the
    /// scan can stop (it is existential and matched).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn try_row(
        &mut self,
        conj: &Conj,
        steps: &[Step],
        k: usize,
        a: &AtomPat,
        row: TermId,
        exists_only: bool,
        emit: &mut dyn FnMut(&mut Exec) -> Result<(), super::GroundError>,
    ) -> Result<bool, Stop> {
        self.tick()?;
        let mark = self.trail.len();
        let args = self.store.args(row);
        let mut ok = args.len() == a.args.len();
        if ok {
            for (p, &t) in a.args.iter().zip(args) {
                if !unify(self.store, p, t, &mut self.binds, &mut self.trail) {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            self.matched[k] = row;
            self.step(conj, steps, k + 1, emit)?;
        }
        self.undo(mark);
        Ok(ok && exists_only)
    }
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
/// `p` must be bound.
pub(crate) fn build(store: &mut TermStore, p: &Pat, binds: &[TermId]) -> TermId {
    match p {
        Pat::Ground(g) => *g,
        Pat::Var(v) => binds[*v as usize],
        Pat::Func(f, ps) => {
            let args: Vec<TermId> = ps.iter().map(|p| build(store, p, binds)).collect();
            store.intern(*f, &args)
        }
    }
}

/// The atom `a` stands for under `binds`, added to the store if new.
pub(crate) fn build_atom(store: &mut TermStore, a: &AtomPat, binds: &[TermId]) -> TermId {
    let args: Vec<TermId> = a.args.iter().map(|p| build(store, p, binds)).collect();
    store.intern(a.sym, &args)
}

/// The ground term `p` stands for under `binds`, if it exists.
pub(crate) fn find(store: &TermStore, p: &Pat, binds: &[TermId]) -> Option<TermId> {
    match p {
        Pat::Ground(g) => Some(*g),
        Pat::Var(v) => Some(binds[*v as usize]),
        Pat::Func(f, ps) => {
            let args: Option<Vec<TermId>> = ps.iter().map(|p| find(store, p, binds)).collect();
            store.find(*f, &args?)
        }
    }
}

/// The atom `a` stands for under `binds`, if it exists.
pub(crate) fn find_atom(store: &TermStore, a: &AtomPat, binds: &[TermId]) -> Option<TermId> {
    let args: Option<Vec<TermId>> = a.args.iter().map(|p| find(store, p, binds)).collect();
    store.find(a.sym, &args?)
}

/// Whether `x` and `y` stand for the same term under `binds`. A term that does not exist in the
/// store is compared structurally.
fn same(store: &TermStore, x: &Pat, y: &Pat, binds: &[TermId]) -> bool {
    match (find(store, x, binds), find(store, y, binds)) {
        (Some(a), Some(b)) => a == b,
        (None, None) => same_shape(store, x, y, binds),
        _ => false,
    }
}

/// Whether two terms missing from the store are the same. Only function terms can be missing
/// (variables are bound to stored terms), and a stored term never equals a missing one.
fn same_shape(store: &TermStore, x: &Pat, y: &Pat, binds: &[TermId]) -> bool {
    match (x, y) {
        (Pat::Func(f, xs), Pat::Func(g, ys)) => {
            f == g && xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(a, b)| same(store, a, b, binds))
        }
        _ => false,
    }
}
