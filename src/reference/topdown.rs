//! Top-down evaluation with tabling, for the relations that depend on the state (layers 1 and 2).
//!
//! Bottom-up evaluation computes every tuple of every relation; some games define relations with
//! millions of tuples per state of which a handful are ever asked for (chess asks "is this square
//! attacked if that piece moves" only for the moves at hand). Here a relation is evaluated only
//! for the calls made: a call is a relation with some arguments bound, and its answers are kept in
//! a table, so each call pattern is solved once per state.
//!
//! Recursion: a call that reaches a call still being solved reads that call's answers so far.
//! Calls that depend on one another that way form a component, and the oldest call of the
//! component (its leader) evaluates all of them again until no table grows; only then are they
//! complete. Negation only reaches lower strata, whose calls never depend on a call in progress,
//! so they are complete when they return, and the fixpoint is the stratified model.

use super::eval::{Db, Relation};
use super::program::{CompiledRule, Filter, Lit, Pat, Program, RelId};
use super::terms::{Interner, TermId};
use hashbrown::HashTable;
use rustc_hash::{FxHashMap, FxHasher};
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

const UNBOUND: TermId = TermId::MAX;
/// The estimate of a call that should wait for more bindings (see `estimate`): above any real one.
const NEEDS_BINDING: usize = usize::MAX / 2;

/// The answers to one call.
struct Table {
    /// The call: its relation, then its arguments (UNBOUND where free).
    key: Box<[TermId]>,
    answers: Relation,
    complete: bool,
    /// Position on the completion stack while incomplete.
    frame: usize,
}

/// A call's key on the stack: its relation, then its arguments (UNBOUND where free).
type Probe = SmallVec<[TermId; 12]>;

/// Where the tuples of a stored relation's literal come from, as its estimate found them.
#[derive(Clone, Copy)]
enum Candidates<'a> {
    /// The one tuple a literal with every argument bound names.
    Exact(u32),
    /// The smallest index bucket of the bound arguments.
    Bucket(&'a [u32]),
    /// Every tuple (or, for a tabled relation, its call's answers).
    Scan,
}

/// The tables of one layer: for a state (layer 1) or a joint move (layer 2).
#[derive(Default)]
pub(crate) struct Tables {
    /// The hash of every call's key (which its table holds) and the table's id, so a call that
    /// was made before is found by a slice and allocates nothing, and neither growing the map
    /// nor a probe that misses reads the keys themselves.
    map: HashTable<(u64, u32)>,
    list: Vec<Table>,
}

impl Tables {
    /// The table of the call `probe` (relation, then arguments), if it was made.
    fn find(&self, probe: &[TermId]) -> Option<u32> {
        self.find_hashed(probe, hash_key(probe))
    }

    /// As [`Tables::find`], given the probe's hash.
    fn find_hashed(&self, probe: &[TermId], hash: u64) -> Option<u32> {
        self.map
            .find(hash, |&(h, id)| {
                h == hash && &*self.list[id as usize].key == probe
            })
            .map(|&(_, id)| id)
    }

    /// How many calls have a table.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Forgets every table but keeps the memory, for the next state.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.list.clear();
    }
}

/// How many answers the completed calls of each relation and binding pattern (bit `i` set when
/// argument `i` was bound; arguments past the 64th are not told apart) had, summed over every
/// state so far: the estimate of a call not yet made (see `estimate_call`).
#[derive(Default)]
pub(crate) struct CallSizes(FxHashMap<(RelId, u64), (u64, u64)>);

impl CallSizes {
    fn record(&mut self, rel: RelId, mask: u64, answers: usize) {
        let e = self.0.entry((rel, mask)).or_default();
        e.0 += 1;
        e.1 += answers as u64;
    }

    /// The mean answers of the calls of `rel` with this binding pattern, rounded up and at
    /// least 1 (an estimate, not a proof that the call has answers), if any was made.
    fn mean(&self, rel: RelId, mask: u64) -> Option<usize> {
        self.0
            .get(&(rel, mask))
            .map(|&(calls, answers)| answers.div_ceil(calls).max(1) as usize)
    }
}

fn bound_mask(args: &[TermId]) -> u64 {
    args.iter()
        .take(64)
        .enumerate()
        .filter(|&(_, &a)| a != UNBOUND)
        .fold(0, |m, (i, _)| m | 1 << i)
}

fn hash_key(key: &[TermId]) -> u64 {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct TableRef {
    layer: u8,
    id: u32,
}

struct Frame {
    table: TableRef,
    /// The oldest frame this call has read while it was incomplete (Tarjan's lowlink).
    low: usize,
    /// Whether some call read this table while it was incomplete.
    looped: bool,
}

/// Everything a query needs: the state's `true` facts, the joint move's
/// `does` facts (if any), and the tables of layers 1 and 2.
pub(crate) struct TopDown<'a> {
    pub program: &'a Program,
    pub interner: &'a mut Interner,
    /// The stored relations (see `Program::stored`), once computed.
    pub static_db: &'a Db,
    pub static_ready: bool,
    /// Holds the `true` relation of the state.
    pub state_db: &'a Db,
    /// Holds the `does` relation of the joint move (an empty database outside `next`).
    pub move_db: &'a Db,
    pub static_tables: &'a mut Tables,
    pub state_tables: &'a mut Tables,
    pub move_tables: &'a mut Tables,
    pub sizes: &'a mut CallSizes,
    comp: Vec<Frame>,
    added: u64,
    /// Bindings of finished rule evaluations, kept to be reused (one evaluation is a handful of
    /// vectors, and a state makes hundreds of thousands of them).
    spare: Vec<Bindings>,
}

/// The bindings of one rule evaluation.
#[derive(Default)]
struct Bindings {
    binds: Vec<TermId>,
    trail: Vec<u32>,
    done: Vec<bool>,
    filter_done: Vec<bool>,
    /// The filters applied so far, in order, so that a step back unapplies its own.
    applied: Vec<usize>,
}

impl<'a> TopDown<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        program: &'a Program,
        interner: &'a mut Interner,
        static_db: &'a Db,
        static_ready: bool,
        state_db: &'a Db,
        move_db: &'a Db,
        [static_tables, state_tables, move_tables]: [&'a mut Tables; 3],
        sizes: &'a mut CallSizes,
    ) -> TopDown<'a> {
        TopDown {
            program,
            interner,
            static_db,
            static_ready,
            state_db,
            move_db,
            static_tables,
            state_tables,
            move_tables,
            sizes,
            comp: Vec::new(),
            added: 0,
            spare: Vec::new(),
        }
    }

    /// The tuples of `rel` whose arguments at the positions where `key` is bound equal it.
    pub(crate) fn answers(&mut self, rel: RelId, key: &[TermId]) -> Vec<Vec<TermId>> {
        if let Some(r) = self.materialized(rel) {
            return (0..r.len())
                .map(|i| r.tuple(i))
                .filter(|t| t.iter().zip(key).all(|(&a, &k)| k == UNBOUND || a == k))
                .map(|t| t.to_vec())
                .collect();
        }
        let t = self.call(rel, key, None);
        let answers = &self.table(t).answers;
        (0..answers.len()).map(|i| answers.tuple(i).to_vec()).collect()
    }

    /// The relation's tuples if it is stored rather than tabled: `true`, `does`, and the stored
    /// static relations once they are computed.
    fn materialized(&self, rel: RelId) -> Option<&'a Relation> {
        if self.static_ready && self.program.stored[rel as usize] {
            Some(self.static_db.rel(rel))
        } else if rel == self.program.rel_true {
            Some(self.state_db.rel(rel))
        } else if rel == self.program.rel_does {
            Some(self.move_db.rel(rel))
        } else {
            None
        }
    }

    fn tables(&mut self, layer: u8) -> &mut Tables {
        match layer {
            0 => self.static_tables,
            1 => self.state_tables,
            _ => self.move_tables,
        }
    }

    fn tables_ref(&self, layer: u8) -> &Tables {
        match layer {
            0 => self.static_tables,
            1 => self.state_tables,
            _ => self.move_tables,
        }
    }

    fn table(&self, t: TableRef) -> &Table {
        &self.tables_ref(t.layer).list[t.id as usize]
    }

    fn table_mut(&mut self, t: TableRef) -> &mut Table {
        &mut self.tables(t.layer).list[t.id as usize]
    }

    /// Solves the call `rel(key)` (UNBOUND marks a free argument) and returns its table. When the
    /// call is made from inside the evaluation of the frame `caller`, dependencies on incomplete
    /// calls are recorded there.
    fn call(&mut self, rel: RelId, key: &[TermId], caller: Option<usize>) -> TableRef {
        let layer = self.program.layer[rel as usize];
        let mut probe = Probe::new();
        probe.push(rel);
        probe.extend_from_slice(key);
        let hash = hash_key(&probe);
        if let Some(id) = self.tables(layer).find_hashed(&probe, hash) {
            let t = TableRef { layer, id };
            let table = self.table(t);
            if !table.complete {
                let frame = table.frame;
                self.comp[frame].looped = true;
                if let Some(c) = caller {
                    self.comp[c].low = self.comp[c].low.min(frame);
                }
            }
            return t;
        }
        let pos = self.comp.len();
        let arity = self.program.rel_key[rel as usize].1;
        let tables = self.tables(layer);
        let id = tables.list.len() as u32;
        tables.list.push(Table {
            key: probe[..].into(),
            answers: Relation::with_arity(arity),
            complete: false,
            frame: pos,
        });
        tables.map.insert_unique(hash, (hash, id), |&(h, _)| h);
        let t = TableRef { layer, id };
        self.comp.push(Frame {
            table: t,
            low: pos,
            looped: false,
        });
        self.evaluate(pos);
        if self.comp[pos].low == pos {
            // The leader: iterate its component until no table grows, then complete it.
            if self.comp[pos..].iter().any(|f| f.looped) {
                loop {
                    let before = self.added;
                    let mut p = pos;
                    while p < self.comp.len() {
                        self.evaluate(p);
                        p += 1;
                    }
                    if self.added == before {
                        break;
                    }
                }
            }
            while self.comp.len() > pos {
                let f = self.comp.pop().expect("the component is not empty");
                let table = self.table_mut(f.table);
                table.complete = true;
                let (rel, mask) = (table.key[0], bound_mask(&table.key[1..]));
                let answers = table.answers.len();
                self.sizes.record(rel, mask, answers);
            }
        } else if let Some(c) = caller {
            self.comp[c].low = self.comp[c].low.min(self.comp[pos].low);
        }
        t
    }

    /// Runs every rule of the frame's relation once for its call, adding the answers.
    fn evaluate(&mut self, pos: usize) {
        let program: &'a Program = self.program;
        let table = self.comp[pos].table;
        let probe: Probe = self.table(table).key[..].into();
        let (rel, key) = (probe[0], &probe[1..]);
        let mut solutions = Vec::new();
        for rule in &program.rules_of[rel as usize] {
            let mut b = self.spare.pop().unwrap_or_default();
            b.binds.clear();
            b.binds.resize(rule.nvars, UNBOUND);
            b.trail.clear();
            b.done.clear();
            b.done.resize(rule.positives.len(), false);
            b.filter_done.clear();
            b.filter_done.resize(rule.filters.len(), false);
            b.applied.clear();
            // The call's bound arguments bind the head.
            let unified = rule
                .head
                .args
                .iter()
                .zip(key.iter())
                .all(|(p, &k)| k == UNBOUND || self.unify(p, k, &mut b));
            solutions.clear();
            if unified && self.apply_filters(rule, &mut b, pos) {
                self.search(rule, &mut b, rule.positives.len(), pos, &mut solutions);
            }
            self.spare.push(b);
            let width = rule.nvars.max(1);
            let mut tuple = Vec::with_capacity(rule.head.args.len());
            for binds in solutions.chunks(width) {
                tuple.clear();
                for a in rule.head.args.iter() {
                    tuple.push(self.build(a, binds));
                }
                let interner: &Interner = self.interner;
                let tables: &mut Tables = match table.layer {
                    0 => self.static_tables,
                    1 => self.state_tables,
                    _ => self.move_tables,
                };
                let added = tables.list[table.id as usize].answers.insert(&tuple, interner);
                if added {
                    self.added += 1;
                }
            }
        }
    }

    fn build(&mut self, p: &Pat, binds: &[TermId]) -> TermId {
        match p {
            Pat::Var(v) => binds[*v as usize],
            Pat::Ground(t) => *t,
            Pat::Func(f, args) => {
                let ids: Vec<TermId> = args.iter().map(|a| self.build(a, binds)).collect();
                self.interner.intern(*f, &ids)
            }
        }
    }

    /// Backtracking over the rule's positive literals, each time taking the one expected to
    /// have the fewest candidates.
    fn search(
        &mut self,
        rule: &'a CompiledRule,
        b: &mut Bindings,
        remaining: usize,
        pos: usize,
        out: &mut Vec<TermId>,
    ) {
        if remaining == 0 {
            // A rule that is unsafe on its own (GDL allows it when every call binds what it
            // needs) may end with a filter or head variable unbound; such a solution has no
            // meaning and is dropped. The front end's checks say which rules can do that.
            if b.filter_done.iter().any(|d| !d) || !rule.head.args.iter().all(|a| self.is_bound(a, b)) {
                return;
            }
            if b.binds.is_empty() {
                out.push(0);
            } else {
                out.extend_from_slice(&b.binds);
            }
            return;
        }
        let mut choice: Option<(usize, usize, Candidates<'a>)> = None;
        for i in 0..rule.positives.len() {
            if b.done[i] {
                continue;
            }
            let (n, candidates) = self.estimate(rule, i, b);
            if n == 0 {
                return;
            }
            if choice.is_none_or(|(_, m, _)| n < m) {
                choice = Some((i, n, candidates));
            }
        }
        let Some((i, _, candidates)) = choice else { return };
        let lit = &rule.positives[i].lit;
        b.done[i] = true;
        if let Some(rel) = self.materialized(lit.rel) {
            match candidates {
                Candidates::Exact(t) => {
                    self.try_tuple(rule, i, rel.tuple(t as usize), b, remaining, pos, out)
                }
                Candidates::Bucket(bucket) => {
                    for &t in bucket {
                        self.try_tuple(rule, i, rel.tuple(t as usize), b, remaining, pos, out);
                    }
                }
                Candidates::Scan => {
                    for t in 0..rel.len() {
                        self.try_tuple(rule, i, rel.tuple(t), b, remaining, pos, out);
                    }
                }
            }
        } else {
            let key: Probe = lit.args.iter().map(|a| self.ground_or_free(a, b)).collect();
            let t = self.call(lit.rel, &key, Some(pos));
            // The table may grow while its answers are read (a recursive call); the leader's
            // iteration covers whatever this pass misses.
            let mut k = 0;
            let mut tuple = Vec::new();
            while k < self.table(t).answers.len() {
                tuple.clear();
                tuple.extend_from_slice(self.table(t).answers.tuple(k));
                self.try_tuple(rule, i, &tuple, b, remaining, pos, out);
                k += 1;
            }
        }
        b.done[i] = false;
    }

    /// An estimate of how many tuples positive `i` will offer under the current bindings: exact
    /// for stored relations (the smallest index bucket, returned too, so that the search need
    /// not look it up again) and for calls already solved, a guess that falls with every bound
    /// argument otherwise.
    fn estimate(&mut self, rule: &CompiledRule, i: usize, b: &Bindings) -> (usize, Candidates<'a>) {
        let lit = &rule.positives[i].lit;
        if let Some(rel) = self.materialized(lit.rel) {
            // A literal whose arguments are all bound is a membership test: one lookup instead
            // of a scan of the smallest index bucket (comp2006_nothello's line walks checked a
            // 5-ary direction relation that way, 64 tuples a check).
            if lit.args.iter().all(|a| self.is_bound(a, b)) {
                let mut tuple = Probe::new();
                for a in lit.args.iter() {
                    match self.ground(a, b) {
                        Some(t) => tuple.push(t),
                        None => return (0, Candidates::Scan),
                    }
                }
                return match rel.position(&tuple) {
                    Some(t) => (1, Candidates::Exact(t)),
                    None => (0, Candidates::Scan),
                };
            }
            return match self.bucket(rule, i, b, rel) {
                Some(bucket) => (bucket.len(), Candidates::Bucket(bucket)),
                None => (rel.len(), Candidates::Scan),
            };
        }
        (self.estimate_call(lit, i, b), Candidates::Scan)
    }

    /// The estimate of a positive literal over a tabled relation.
    fn estimate_call(&mut self, lit: &Lit, i: usize, b: &Bindings) -> usize {
        let mut key = Probe::new();
        key.push(lit.rel);
        let mut bound = 0;
        let mut exists = true;
        for a in lit.args.iter() {
            if self.is_bound(a, b) {
                bound += 1;
                match self.ground(a, b) {
                    Some(t) => key.push(t),
                    None => exists = false,
                }
            } else {
                key.push(UNBOUND);
            }
        }
        if bound == lit.args.len() {
            return 1;
        }
        if self.program.needs_binding[lit.rel as usize] {
            // Called with free arguments, a relation with an unsafe rule can miss answers that
            // the same call with more arguments bound has (its bodiless base case, say, holds
            // only for a bound list), so every other literal goes first; among such calls the
            // earliest in the body goes first, the order their rules were written for.
            return NEEDS_BINDING + i;
        }
        if exists {
            let tables = self.tables_ref(self.program.layer[lit.rel as usize]);
            if let Some(id) = tables.find(&key) {
                let table = &tables.list[id as usize];
                if table.complete {
                    return table.answers.len();
                }
            }
        }
        // A call not made yet is expected to have as many answers as the calls of the same
        // relation and binding pattern had before; only a pattern never seen gets a guess that
        // falls with every bound argument. (The guess alone made comp2006_nothello's piece
        // count scan a successor relation of 64 pairs before its recursive call, binding the
        // call's count argument, so that the call was made once per count instead of once.)
        if let Some(mean) = self.sizes.mean(lit.rel, bound_mask(&key[1..])) {
            return mean;
        }
        10_000usize >> (2 * bound.min(6))
    }

    /// The smallest index bucket of a stored relation for positive `i`, or None for a full scan.
    fn bucket(
        &mut self,
        rule: &CompiledRule,
        i: usize,
        b: &Bindings,
        rel: &'a Relation,
    ) -> Option<&'a [u32]> {
        let mut best: Option<&'a [u32]> = None;
        for (path, pat) in rule.positives[i].keys.iter() {
            if !self.is_bound(pat, b) {
                continue;
            }
            let bucket = match self.ground(pat, b) {
                Some(key) => rel
                    .index(*path)
                    .and_then(|m| m.get(&key))
                    .map_or(&[][..], |v| v.as_slice()),
                None => &[][..],
            };
            if best.is_none_or(|x| bucket.len() < x.len()) {
                best = Some(bucket);
            }
        }
        best
    }

    #[allow(clippy::too_many_arguments)]
    fn try_tuple(
        &mut self,
        rule: &'a CompiledRule,
        i: usize,
        tuple: &[TermId],
        b: &mut Bindings,
        remaining: usize,
        pos: usize,
        out: &mut Vec<TermId>,
    ) {
        let mark = b.trail.len();
        let applied = b.applied.len();
        let ok = rule.positives[i]
            .lit
            .args
            .iter()
            .zip(tuple)
            .all(|(p, &t)| self.unify(p, t, b))
            && self.apply_filters(rule, b, pos);
        if ok {
            self.search(rule, b, remaining - 1, pos, out);
        }
        while b.applied.len() > applied {
            let f = b.applied.pop().expect("applied is longer than its mark");
            b.filter_done[f] = false;
        }
        while b.trail.len() > mark {
            let v = b.trail.pop().expect("trail is longer than mark");
            b.binds[v as usize] = UNBOUND;
        }
    }

    /// Applies every filter whose variables are all bound and that is not applied yet, recording
    /// each on `b.applied`; false as soon as one fails.
    fn apply_filters(&mut self, rule: &CompiledRule, b: &mut Bindings, pos: usize) -> bool {
        for (f, (filter, vars)) in rule.filters.iter().enumerate() {
            if b.filter_done[f] || !vars.iter().all(|&v| b.binds[v as usize] != UNBOUND) {
                continue;
            }
            b.filter_done[f] = true;
            b.applied.push(f);
            let holds = match filter {
                Filter::Neg(lit) => !self.holds(lit, b, pos),
                Filter::Distinct(x, y) => !self.equal(x, y, b),
                Filter::Equal(x, y) => self.equal(x, y, b),
            };
            if !holds {
                return false;
            }
        }
        true
    }

    /// Whether a literal whose variables are all bound holds.
    fn holds(&mut self, lit: &Lit, b: &Bindings, pos: usize) -> bool {
        if let Some(rel) = self.materialized(lit.rel) {
            let mut tuple = Probe::new();
            for a in lit.args.iter() {
                match self.ground(a, b) {
                    Some(t) => tuple.push(t),
                    None => return false,
                }
            }
            return rel.position(&tuple).is_some();
        }
        let key: Probe = lit.args.iter().map(|a| self.ground_or_free(a, b)).collect();
        let t = self.call(lit.rel, &key, Some(pos));
        self.table(t).answers.len() > 0
    }

    /// The term of a bound pattern (built if new), or UNBOUND if the pattern has a free variable.
    fn ground_or_free(&mut self, p: &Pat, b: &Bindings) -> TermId {
        if !self.is_bound(p, b) {
            return UNBOUND;
        }
        self.build(p, &b.binds)
    }

    fn is_bound(&self, p: &Pat, b: &Bindings) -> bool {
        match p {
            Pat::Var(v) => b.binds[*v as usize] != UNBOUND,
            Pat::Ground(_) => true,
            Pat::Func(_, args) => args.iter().all(|a| self.is_bound(a, b)),
        }
    }

    fn unify(&mut self, p: &Pat, t: TermId, b: &mut Bindings) -> bool {
        match p {
            Pat::Var(v) => {
                let slot = &mut b.binds[*v as usize];
                if *slot == UNBOUND {
                    *slot = t;
                    b.trail.push(*v);
                    true
                } else {
                    *slot == t
                }
            }
            Pat::Ground(g) => *g == t,
            Pat::Func(f, args) => {
                if self.interner.functor(t) != *f || self.interner.args(t).len() != args.len() {
                    return false;
                }
                for (j, p) in args.iter().enumerate() {
                    let s = self.interner.args(t)[j];
                    if !self.unify(p, s, b) {
                        return false;
                    }
                }
                true
            }
        }
    }

    /// The id of a bound pattern's term, or None if that term was never built.
    fn ground(&mut self, p: &Pat, b: &Bindings) -> Option<TermId> {
        match p {
            Pat::Var(v) => Some(b.binds[*v as usize]),
            Pat::Ground(t) => Some(*t),
            Pat::Func(f, args) => {
                let mut ids = Vec::with_capacity(args.len());
                for a in args.iter() {
                    ids.push(self.ground(a, b)?);
                }
                self.interner.lookup(*f, &ids)
            }
        }
    }

    /// Structural equality of two bound patterns.
    fn equal(&mut self, x: &Pat, y: &Pat, b: &Bindings) -> bool {
        match (self.ground(x, b), self.ground(y, b)) {
            (Some(s), Some(t)) => s == t,
            (Some(_), None) | (None, Some(_)) => false,
            (None, None) => match (x, y) {
                (Pat::Func(f, xs), Pat::Func(g, ys)) => {
                    f == g
                        && xs.len() == ys.len()
                        && xs.iter().zip(ys.iter()).all(|(s, t)| self.equal(s, t, b))
                }
                _ => false,
            },
        }
    }
}
