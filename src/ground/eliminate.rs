//! Variable elimination into auxiliary relations (bucket elimination), after the fixpoint.
//!
//! A rule whose body is a product of literals linked by a chain of variables is instantiated
//! once per binding of all its variables, although a variable that only a few literals read
//! could be summed out first: in `h(Q, A) ⇐ m(Q, E) ∧ s(E, T) ∧ w(Q, S) ∧ add(S, T, A)`, `E`
//! links only the first two literals, so `e(Q, T) ⇐ m(Q, E) ∧ s(E, T)` and
//! `h(Q, A) ⇐ e(Q, T) ∧ w(Q, S) ∧ add(S, T, A)` say the same with far fewer instances when
//! `E` has many values. Eliminating a variable `x` takes its *bucket* (the literals that
//! contain it) into a rule of a new relation over the bucket's other variables (the
//! separator), and puts one literal of that relation in its place; repeated, this splits a
//! rule along a tree decomposition of its variable graph.
//!
//! Whether to split is decided per rule and per variable from the over-approximation the
//! fixpoint computed: the number of atoms each positive literal matches and the number of
//! distinct values each of its variables takes give the textbook estimate of a join's size
//! (the product of the sizes, divided, for each variable, by all but the smallest of its
//! numbers of values). A variable is eliminated when the bucket's rule and the rest together
//! are estimated at less than half of the rule before; the variable with the smallest
//! estimate goes first, and the rule is split again until no variable pays.
//!
//! Correctness: a bucket's relation holds for a binding of the separator exactly when some
//! value of `x` satisfies the bucket, and `x` occurs nowhere else, so the split rule has the
//! same instances once `x` is projected out, and each ground rule of the original is the
//! conjunction of a ground rule of the split rule and one of the bucket's. A bucket is only
//! split off when its positive literals bind every variable it holds, so a negated literal or a
//! `distinct` always stays with the literals that make it safe; the rest of the rule stays safe
//! because a variable the bucket bound is in the separator, which the new literal binds.
//! Buckets with the same literals (up to the names of variables) share their relation, also
//! across rules. The new relations' atoms are views `(;elim N args…)`.

use super::normalize::{AtomPat, Conj, Item, Pat, RelId, RelTable};
use super::terms::{TermId, TermStore};
use crate::gdl::Symbol;
use rustc_hash::{FxHashMap, FxHashSet};

/// Rules estimated below this many instances are left as they are (in unit tests, where the
/// games are small, nearly every rule is looked at).
const MIN_INSTANCES: f64 = if cfg!(test) { 1_000.0 } else { 500_000.0 };

/// A split must bring the estimate below this fraction of the rule's.
const GAIN: f64 = 0.3;

/// At most this many atoms of a relation are read to estimate a literal's numbers (every
/// k-th atom of a larger relation, scaled).
const SAMPLE: usize = 50_000;

/// A static literal that holds for at least this fraction of the combinations of its
/// variables' values only filters (see `Node::weak`).
const DENSE: f64 = 0.9;

/// The estimate of one positive literal: atoms it matches, and distinct values of each of its
/// variables (in order of first occurrence).
#[derive(Clone)]
struct LitStats {
    n: f64,
    d: Vec<f64>,
}

/// One literal of a rule being split: an item of the original body or a split-off bucket.
#[derive(Clone)]
struct Node {
    src: Src,
    /// Distinct variables.
    vars: Vec<u32>,
    /// For a positive literal, the distinct values of each of `vars`.
    d: Vec<f64>,
    n: f64,
    pos: bool,
    /// Whether it only filters: a negated literal, a test, a guard, or a static literal that
    /// holds for nearly every combination of its variables' values (`distinct` written as a
    /// table).
    weak: bool,
}

impl Node {
    /// The distinct values of variable `v` in this literal, if it holds `v`.
    fn values(&self, v: u32) -> Option<f64> {
        self.vars.iter().position(|&w| w == v).map(|i| self.d[i])
    }
}

#[derive(Clone, Copy)]
enum Src {
    Item(usize),
    Aux(usize),
}

/// A bucket split off a rule: its literals and its separator, in the rule's variables.
struct Bucket {
    items: Vec<Src>,
    /// Variables that only a negated literal or a test of the bucket reads, each with a
    /// positive literal outside the bucket that binds it: the bucket's rule reads the values
    /// it has there through a guard (see `Split::relations`).
    guards: Vec<(u32, Src)>,
    /// Variables of the separator that a positive literal outside the bucket takes far fewer
    /// values of than the bucket's literals do, each with that literal: the bucket's rule reads
    /// those values through a guard too, so that its relation holds no atom that the rest of
    /// the rule could not join (see `filters`).
    filters: Vec<(u32, Src)>,
    sep: Vec<u32>,
    /// The estimated number of instances of the bucket's rule.
    estimate: f64,
}

/// The new relations, each with the rule that defines it (an index into the rules), in an
/// order where each rule reads only relations before it or relations that existed.
pub(crate) struct Split {
    pub relations: Vec<NewRel>,
    /// Each rule split (an index into the rules) and what it was before.
    pub originals: Vec<(usize, Conj)>,
}

/// A relation made by the elimination.
pub(crate) struct NewRel {
    pub rel: RelId,
    /// Its rule, an index into the rules.
    pub rule: usize,
    /// Whether it is a guard: the projection of one literal on one variable, which a bucket's
    /// rule joins to bind a variable that only a negated literal or a test of the bucket reads.
    /// Like the relations of the demand-driven transformation, a guard is joined but never
    /// appears in a ground rule.
    pub guard: bool,
    /// The estimated number of instances of its rule.
    pub estimate: f64,
}

/// Splits the rules of `conjs` that `selected` accepts where elimination pays (see the module's
/// text), adding the new relations to `rels` with fresh symbols from `first_symbol`. `rows`
/// gives the atoms of each relation in the over-approximation.
pub(crate) fn split_rules<'a>(
    conjs: &mut Vec<Conj>,
    rels: &mut RelTable,
    selected: impl Fn(&Conj) -> bool,
    dynamic: impl Fn(RelId) -> bool,
    rows: impl Fn(RelId) -> &'a [TermId],
    store: &TermStore,
    first_symbol: u32,
) -> Split {
    let mut cache: FxHashMap<Vec<u32>, LitStats> = FxHashMap::default();
    let mut made = Made {
        rels,
        known: FxHashMap::default(),
        next_symbol: first_symbol,
        relations: Vec::new(),
    };
    let mut originals = Vec::new();
    let original = conjs.len();
    for ci in 0..original {
        if !selected(&conjs[ci]) {
            continue;
        }
        let Some((nodes, buckets)) = plan_rule(&conjs[ci], &mut cache, &dynamic, &rows, store) else {
            continue;
        };
        originals.push((ci, conjs[ci].clone()));
        // The relation of each bucket, made (or found) in order: a bucket may read earlier ones.
        let mut aux_lits: Vec<AtomPat> = Vec::with_capacity(buckets.len());
        for b in &buckets {
            let resolve = |s: Src, aux_lits: &[AtomPat], conjs: &[Conj]| match s {
                Src::Item(i) => conjs[ci].body[i].clone(),
                Src::Aux(k) => Item::Pos(aux_lits[k].clone()),
            };
            let mut items: Vec<Item> = Vec::new();
            for &(u, src) in b.guards.iter().chain(&b.filters) {
                let body = vec![resolve(src, &aux_lits, conjs)];
                items.push(Item::Pos(made.literal(conjs, ci, &[u], body, true, 0.0)));
            }
            items.extend(b.items.iter().map(|&s| resolve(s, &aux_lits, conjs)));
            aux_lits.push(made.literal(conjs, ci, &b.sep, items, false, b.estimate));
        }
        let conj = &mut conjs[ci];
        conj.body = nodes
            .iter()
            .map(|node| match node.src {
                Src::Item(i) => conj.body[i].clone(),
                Src::Aux(k) => Item::Pos(aux_lits[k].clone()),
            })
            .collect();
        conj.renumber(true);
    }
    Split {
        relations: made.relations,
        originals,
    }
}

/// The relations the elimination has made, each found again by the key of its rule.
struct Made<'r> {
    rels: &'r mut RelTable,
    known: FxHashMap<Vec<u32>, (RelId, Symbol)>,
    next_symbol: u32,
    relations: Vec<NewRel>,
}

impl Made<'_> {
    /// The literal over `args` (variables of rule `ci`) of the relation that `body` defines on
    /// them: one made before whose rule is the same up to variable names (and of the same kind,
    /// guard or bucket), or a new one, whose rule is appended to `conjs`.
    fn literal(
        &mut self,
        conjs: &mut Vec<Conj>,
        ci: usize,
        args: &[u32],
        body: Vec<Item>,
        guard: bool,
        estimate: f64,
    ) -> AtomPat {
        let args: Box<[Pat]> = args.iter().map(|&v| Pat::Var(v)).collect();
        let conj = &conjs[ci];
        let mut rule = Conj {
            head: AtomPat {
                rel: 0,
                sym: Symbol(0),
                args: args.clone(),
            },
            body,
            nvars: conj.nvars,
            rule: conj.rule,
            var_names: conj.var_names.clone(),
            magic: false,
        };
        rule.renumber(false);
        let mut key = key_of(&rule);
        if guard {
            key.push(15);
        }
        let (rel, sym) = match self.known.get(&key) {
            Some(&found) => found,
            None => {
                let sym = Symbol(self.next_symbol);
                self.next_symbol += 1;
                let rel = self.rels.id(sym, args.len());
                rule.head.rel = rel;
                rule.head.sym = sym;
                self.relations.push(NewRel {
                    rel,
                    rule: conjs.len(),
                    guard,
                    estimate,
                });
                conjs.push(rule);
                self.known.insert(key, (rel, sym));
                (rel, sym)
            }
        };
        AtomPat { rel, sym, args }
    }
}

/// The literals of `conj` after elimination and the buckets split off, or `None` when no
/// split pays.
fn plan_rule<'a>(
    conj: &Conj,
    cache: &mut FxHashMap<Vec<u32>, LitStats>,
    dynamic: &impl Fn(RelId) -> bool,
    rows: &impl Fn(RelId) -> &'a [TermId],
    store: &TermStore,
) -> Option<(Vec<Node>, Vec<Bucket>)> {
    let mut head = vec![false; conj.nvars];
    conj.head.for_each_var(&mut |v| head[v as usize] = true);
    // Worth a look only with two variables or more outside the head.
    let mut inner = vec![false; conj.nvars];
    for item in &conj.body {
        item.for_each_var(&mut |v| inner[v as usize] |= !head[v as usize]);
    }
    if inner.iter().filter(|&&b| b).count() < 2 || conj.body.len() < 3 {
        return None;
    }
    let mut nodes: Vec<Node> = Vec::with_capacity(conj.body.len());
    for (i, item) in conj.body.iter().enumerate() {
        let mut vars = Vec::new();
        item.for_each_var(&mut |v| {
            if !vars.contains(&v) {
                vars.push(v);
            }
        });
        let (pos, n, d, weak) = match item {
            Item::Pos(a) => {
                let s = lit_stats(a, cache, rows, store);
                let full: f64 = s.d.iter().product();
                let weak = !dynamic(a.rel) && s.d.len() >= 2 && s.n >= DENSE * full;
                (true, s.n, s.d, weak)
            }
            _ => (false, 1.0, vec![1.0; vars.len()], true),
        };
        nodes.push(Node {
            src: Src::Item(i),
            vars,
            d,
            n,
            pos,
            weak,
        });
    }
    let start = estimate(&nodes);
    if start < MIN_INSTANCES {
        return None;
    }
    // Eliminate greedily, each time the variable that leaves the smallest estimate, as long as
    // any can go, and keep the prefix of eliminations with the smallest total.
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut best_prefix = (start, 0usize, nodes.clone());
    let mut spent = 0.0;
    loop {
        let mut best: Option<(f64, u32)> = None;
        for x in 0..conj.nvars as u32 {
            if head[x as usize] {
                continue;
            }
            let Some((cost, _, _, _)) = try_eliminate(&nodes, x, buckets.len(), &head) else {
                continue;
            };
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, x));
            }
        }
        let Some((_, x)) = best else { break };
        let (_, inst, rest, bucket) = try_eliminate(&nodes, x, buckets.len(), &head).expect("tried before");
        buckets.push(bucket);
        nodes = rest;
        spent += inst;
        let total = spent + estimate(&nodes);
        if total < best_prefix.0 {
            best_prefix = (total, buckets.len(), nodes.clone());
        }
    }
    let (total, keep, nodes) = best_prefix;
    if total >= GAIN * start {
        return None;
    }
    buckets.truncate(keep);
    (!buckets.is_empty()).then_some((nodes, buckets))
}

/// Eliminates `x` from `nodes`: the estimated cost after it (the bucket's instances and the
/// rest's), the nodes after it (the bucket's literal, number `aux`, where its first literal
/// was) and the bucket. `None` when `x` cannot go: it is in no positive literal, its bucket is
/// everything, or the bucket's positive literals do not bind all of its variables.
fn try_eliminate(nodes: &[Node], x: u32, aux: usize, head: &[bool]) -> Option<(f64, f64, Vec<Node>, Bucket)> {
    let inside: Vec<bool> = nodes.iter().map(|n| n.vars.contains(&x)).collect();
    let count = inside.iter().filter(|&&b| b).count();
    if count == 0 || count == nodes.len() {
        return None;
    }
    let bucket: Vec<&Node> = nodes
        .iter()
        .zip(&inside)
        .filter(|(_, &b)| b)
        .map(|(n, _)| n)
        .collect();
    if !bucket.iter().any(|n| n.pos) {
        return None;
    }
    // Safety: every variable of the bucket is bound by one of its positive literals, or by a
    // guard: the projection of a positive literal outside the bucket that binds it (the one
    // with the fewest values of it), through which the rest of the rule reads it anyway.
    let mut bound: Vec<u32> = Vec::new();
    for n in bucket.iter().filter(|n| n.pos) {
        bound.extend(&n.vars);
    }
    let mut sep: Vec<u32> = Vec::new();
    let mut guards: Vec<(u32, Src)> = Vec::new();
    let mut owned: Vec<Node> = bucket.iter().map(|&n| n.clone()).collect();
    for n in &bucket {
        for &v in &n.vars {
            if !bound.contains(&v) {
                let (d, src) = fewest_outside(nodes, &inside, v, |m| m.pos)?;
                guards.push((v, src));
                owned.push(Node {
                    src,
                    vars: vec![v],
                    d: vec![d],
                    n: d,
                    pos: true,
                    weak: true,
                });
                bound.push(v);
            }
            if v != x && !sep.contains(&v) {
                sep.push(v);
            }
        }
    }
    // A variable of the head that only filters the bucket would make the bucket's relation a
    // copy of its solutions for each of its values, differing by a few: the grounder's
    // sub-join families (`join.rs`) write such sets more compactly than separate atoms.
    if sep
        .iter()
        .any(|&v| head[v as usize] && !bucket.iter().any(|n| !n.weak && n.vars.contains(&v)))
    {
        return None;
    }
    let inst = estimate(&owned);
    // The bucket's relation: at most its instances, and at most the product of its
    // separator's numbers of values.
    let dmin: Vec<f64> = sep
        .iter()
        .map(|&v| {
            owned
                .iter()
                .filter(|n| n.pos)
                .filter_map(|n| n.values(v))
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let size = dmin.iter().product::<f64>().min(inst).max(1.0);
    let node = Node {
        src: Src::Aux(aux),
        vars: sep.clone(),
        d: dmin.iter().map(|&d| d.min(size)).collect(),
        n: size,
        pos: true,
        weak: false,
    };
    let first = inside.iter().position(|&b| b).expect("the bucket is not empty");
    let mut rest = Vec::with_capacity(nodes.len() - count + 1);
    let mut items = Vec::with_capacity(count);
    for (i, n) in nodes.iter().enumerate() {
        if i == first {
            rest.push(node.clone());
        }
        if inside[i] {
            items.push(n.src);
        } else {
            rest.push(n.clone());
        }
    }
    let cost = inst + estimate(&rest);
    let filters = filters(nodes, &inside, &sep, &dmin, &guards);
    Some((
        cost,
        inst,
        rest,
        Bucket {
            items,
            guards,
            filters,
            sep,
            estimate: inst,
        },
    ))
}

/// A guard of a separator variable reads at most this fraction of the values the bucket's
/// literals give it.
const FILTER: f64 = 0.5;

/// A filter's literal matches at most this many atoms (estimated): its guard is derived within
/// the budget of a new relation of no estimate (100,000 solutions, `Grounder::eliminate`), and
/// a guard that overran it would take the whole split of the rule with it.
const FILTER_MAX_ATOMS: f64 = 50_000.0;

/// The filters of a bucket (the nodes of `nodes` that `inside` marks, and its guards) with
/// separator `sep`, whose positive literals give each variable of `sep` at fewest `within`
/// values: for each variable not bound through a guard already, the positive literal outside
/// the bucket with the fewest values of it, when those are at most [`FILTER`] of `within` (and
/// the literal matches at most [`FILTER_MAX_ATOMS`] atoms). The bucket's relation then holds
/// only atoms whose values of that variable the literal has in the over-approximation; the
/// rest of the rule reads the literal, so its instances lose nothing (chess: the king's square
/// next to a threatened one was worked out for every piece the square could hold, and the rule
/// kept the kings', an eighth of the atoms).
fn filters(
    nodes: &[Node],
    inside: &[bool],
    sep: &[u32],
    within: &[f64],
    guards: &[(u32, Src)],
) -> Vec<(u32, Src)> {
    let mut filters = Vec::new();
    for (&v, &within) in sep.iter().zip(within) {
        if guards.iter().any(|&(u, _)| u == v) {
            continue;
        }
        let outside = fewest_outside(nodes, inside, v, |m| m.pos && !m.weak && m.n <= FILTER_MAX_ATOMS);
        if let Some((d, src)) = outside {
            if d <= FILTER * within {
                filters.push((v, src));
            }
        }
    }
    filters
}

/// Of the nodes outside the bucket (those `inside` does not mark) that `accept` takes and that
/// hold variable `v`, the one with the fewest values of `v`, and that number.
fn fewest_outside(
    nodes: &[Node],
    inside: &[bool],
    v: u32,
    accept: impl Fn(&Node) -> bool,
) -> Option<(f64, Src)> {
    nodes
        .iter()
        .zip(inside)
        .filter(|&(m, &b)| !b && accept(m))
        .filter_map(|(m, _)| m.values(v).map(|d| (d, m.src)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// The estimated number of instances of the join of the positive literals of `nodes`.
fn estimate(nodes: &[Node]) -> f64 {
    let mut log = 0.0f64;
    let mut per_var: FxHashMap<u32, Vec<f64>> = FxHashMap::default();
    for n in nodes.iter().filter(|n| n.pos) {
        if n.n <= 0.0 {
            return 0.0;
        }
        log += n.n.ln();
        for (&v, &d) in n.vars.iter().zip(&n.d) {
            per_var.entry(v).or_default().push(d.max(1.0));
        }
    }
    for ds in per_var.values_mut() {
        ds.sort_by(f64::total_cmp);
        log -= ds[1..].iter().map(|d| d.ln()).sum::<f64>();
    }
    log.exp()
}

/// The numbers of `a` over the over-approximation, cached by the literal's shape.
fn lit_stats<'a>(
    a: &AtomPat,
    cache: &mut FxHashMap<Vec<u32>, LitStats>,
    rows: &impl Fn(RelId) -> &'a [TermId],
    store: &TermStore,
) -> LitStats {
    // The shape: the relation and the arguments with variables numbered by first occurrence.
    let mut order: Vec<u32> = Vec::new();
    let mut key = vec![a.rel];
    for p in a.args.iter() {
        encode(p, &mut order, &mut key);
    }
    if let Some(s) = cache.get(&key) {
        return s.clone();
    }
    let all = rows(a.rel);
    let step = all.len().div_ceil(SAMPLE).max(1);
    let mut bind: Vec<TermId> = vec![TermId::MAX; order.len()];
    let mut seen: Vec<FxHashSet<TermId>> = vec![FxHashSet::default(); order.len()];
    let mut matched = 0usize;
    for &t in all.iter().step_by(step) {
        bind.iter_mut().for_each(|b| *b = TermId::MAX);
        let args = store.args(t);
        let ok = args.len() == a.args.len()
            && a.args
                .iter()
                .zip(args)
                .all(|(p, &u)| matches(p, u, &order, &mut bind, store));
        if ok {
            matched += 1;
            for (s, &b) in seen.iter_mut().zip(&bind) {
                s.insert(b);
            }
        }
    }
    let n = (matched * step) as f64;
    let stats = LitStats {
        n,
        d: seen.iter().map(|s| s.len() as f64).collect(),
    };
    cache.insert(key, stats.clone());
    stats
}

/// Appends pattern `p` to `key`, numbering its variables by first occurrence in `order`.
fn encode(p: &Pat, order: &mut Vec<u32>, key: &mut Vec<u32>) {
    match p {
        Pat::Var(v) => {
            let i = match order.iter().position(|w| w == v) {
                Some(i) => i,
                None => {
                    order.push(*v);
                    order.len() - 1
                }
            };
            key.extend([0, i as u32]);
        }
        Pat::Ground(t) => key.extend([1, *t]),
        Pat::Func(f, args) => {
            key.extend([2, f.0, args.len() as u32]);
            for q in args.iter() {
                encode(q, order, key);
            }
        }
    }
}

/// Whether term `t` matches `p`, binding the variables (numbered through `order`) in `bind`.
fn matches(p: &Pat, t: TermId, order: &[u32], bind: &mut [TermId], store: &TermStore) -> bool {
    match p {
        Pat::Var(v) => {
            let i = order.iter().position(|w| w == v).expect("encoded before");
            if bind[i] == TermId::MAX {
                bind[i] = t;
                true
            } else {
                bind[i] == t
            }
        }
        Pat::Ground(g) => *g == t,
        Pat::Func(f, args) => {
            store.functor(t) == *f && {
                let targs = store.args(t);
                targs.len() == args.len()
                    && args
                        .iter()
                        .zip(targs)
                        .all(|(q, &u)| matches(q, u, order, bind, store))
            }
        }
    }
}

/// A key of a bucket's rule (renumbered from its first literal): equal keys define the same
/// relation.
fn key_of(rule: &Conj) -> Vec<u32> {
    let mut key = Vec::new();
    let mut order: Vec<u32> = (0..rule.nvars as u32).collect();
    let atom = |a: &AtomPat, key: &mut Vec<u32>, order: &mut Vec<u32>| {
        key.extend([a.rel, a.args.len() as u32]);
        for p in a.args.iter() {
            encode(p, order, key);
        }
    };
    for item in &rule.body {
        match item {
            Item::Pos(a) => {
                key.push(10);
                atom(a, &mut key, &mut order);
            }
            Item::Neg(a) => {
                key.push(11);
                atom(a, &mut key, &mut order);
            }
            Item::Distinct(p, q) | Item::Equal(p, q) => {
                key.push(if matches!(item, Item::Distinct(..)) {
                    12
                } else {
                    13
                });
                encode(p, &mut order, &mut key);
                encode(q, &mut order, &mut key);
            }
        }
    }
    key.push(14);
    // The bucket's own relation is not known yet: only the arguments.
    for p in rule.head.args.iter() {
        encode(p, &mut order, &mut key);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::super::tests::{agrees, ground_src, texts};
    use super::super::AtomKind;

    /// Three players buy items whose prices are in the state and add them to their amounts
    /// (numbers up to 60 added by a table); the goals compare each player's amount with the
    /// others' (once under `not`, which needs a guard), the players told apart by `distinct`.
    fn shop() -> String {
        let mut src = String::from(
            "(role a) (role b) (role c)
             (init (has a 0)) (init (has b 0)) (init (has c 0)) (init (step 0))
             (<= (legal ?r (buy ?e)) (role ?r) (true (price ?e ?t)))
             (<= (next (price ?e ?t)) (true (price ?e ?t)))
             (<= (next (has ?r ?n)) (does ?r (buy ?e)) (true (price ?e ?t)) (true (has ?r ?s))
                 (plus ?s ?t ?n))
             (<= (next (step ?m)) (true (step ?n)) (plus ?n 1 ?m))
             (<= terminal (true (step 6)))
             (<= (goal ?r 100) (true (has ?r ?x)) (true (has ?o ?y)) (true (has ?p ?z))
                 (distinct ?r ?o) (distinct ?r ?p) (distinct ?o ?p) (geq ?x ?y) (geq ?x ?z))
             (<= (goal ?r 0) (true (has ?r ?x)) (true (has ?o ?y)) (true (has ?p ?z))
                 (distinct ?r ?o) (distinct ?r ?p) (distinct ?o ?p)
                 (or (not (geq ?x ?y)) (not (geq ?x ?z))))\n",
        );
        for e in 1..=10 {
            src += &format!("(init (price e{e} {e}))\n");
        }
        for s in 0..=60 {
            for t in 0..=10 {
                if s + t <= 60 {
                    src += &format!("(plus {s} {t} {})\n", s + t);
                }
            }
            for y in 0..=s {
                src += &format!("(geq {s} {y})\n");
            }
        }
        src
    }

    /// A board of 24 squares in a ring, each holding one of eight pieces (all of them
    /// possible anywhere: a move swaps the contents of two neighbouring squares); a piece
    /// pinned on a square is what chess's legal rules look for, a king next to a square that
    /// an opponent's piece attacks: the rule reads the king's square through any square next
    /// to it (a bucket of that square's variable over the piece and the attacked square),
    /// and only two of the eight pieces are kings.
    fn ring() -> String {
        let n = 24;
        let pieces = ["wk", "bk", "wq", "bq", "wr", "br", "wp", "bp"];
        let mut src = String::from(
            "(role white) (role black)
             (init (control white))
             (<= (next (control black)) (true (control white)))
             (<= (next (control white)) (true (control black)))
             (<= (legal ?r (swap ?x ?y)) (true (control ?r)) (near ?x ?y))
             (<= (legal ?r noop) (role ?r) (not (true (control ?r))))
             (<= (next (cell ?x ?p)) (does ?r (swap ?x ?y)) (true (cell ?y ?p)))
             (<= (next (cell ?y ?p)) (does ?r (swap ?x ?y)) (true (cell ?x ?p)))
             (<= (next (cell ?z ?p)) (does ?r (swap ?x ?y)) (true (cell ?z ?p))
                 (distinct ?z ?x) (distinct ?z ?y))
             (<= (next (cell ?z ?p)) (does ?r noop) (true (control ?r)) (true (cell ?z ?p)))
             (<= (attacked ?o ?t) (true (cell ?s ?q)) (owner ?q ?o) (reach ?s ?t))
             (<= (next (pinned ?r ?s)) (true (cell ?u ?k)) (near ?u ?t) (attacked ?o ?t)
                 (king ?k ?r) (opponent ?r ?o) (true (cell ?s ?k)) (true (control ?r)))
             (<= terminal (true (pinned white ?s)) (true (pinned black ?t)))
             (init (step 0))
             (<= (next (step ?m)) (true (step ?n)) (succ ?n ?m))
             (<= terminal (true (step 12)))
             (<= (goal ?r 50) (role ?r))
             (opponent white black) (opponent black white)
             (king wk white) (king bk black)\n",
        );
        for p in pieces {
            let side = if p.starts_with('w') { "white" } else { "black" };
            src += &format!("(owner {p} {side})\n");
        }
        for i in 0..n {
            let j = (i + 1) % n;
            src += &format!("(near s{i} s{j}) (near s{j} s{i})\n");
            for d in 1..=3 {
                src += &format!("(reach s{i} s{})\n", (i + d) % n);
            }
            src += &format!("(init (cell s{i} {}))\n", pieces[i % pieces.len()]);
        }
        for i in 0..12 {
            src += &format!("(succ {i} {})\n", i + 1);
        }
        src
    }

    #[test]
    fn a_bucket_holds_only_the_values_the_rest_of_its_rule_can_join() {
        let src = ring();
        let g = ground_src(&src);
        let views = texts(&g, |k| *k == AtomKind::View);
        let elim: Vec<&String> = views.iter().filter(|v| v.starts_with("(;elim ")).collect();
        assert!(!elim.is_empty(), "the pinned rule was not split: {views:?}");
        // The bucket of the square next to the king joins `(true (cell ?u ?k))` with the
        // squares near it: eight pieces in the over-approximation, of which the rule joins the
        // two kings (`king ?k ?r`), so no atom of a bucket names another piece.
        let pieces = ["wq", "bq", "wr", "br", "wp", "bp"];
        for v in &elim {
            assert!(
                !v.split([' ', ')']).any(|w| pieces.contains(&w)),
                "{v} holds a piece the rule does not join: {elim:?}"
            );
        }
        assert!(
            elim.iter().any(|v| v.contains(" wk ") || v.contains(" bk ")),
            "{elim:?}"
        );
        assert!(agrees(&src, 20) > 0);
    }

    #[test]
    fn products_are_split_into_auxiliary_relations_that_agree_with_the_reference() {
        let src = shop();
        let g = ground_src(&src);
        let views = texts(&g, |k| *k == AtomKind::View);
        assert!(views.iter().any(|v| v.starts_with("(;elim ")), "{views:?}");
        // The goal rules are products of the three players' amounts: as written they ground
        // to about 57,000 rules.
        assert!(g.rules.len() < 20_000, "{} rules", g.rules.len());
        assert!(agrees(&src, 30) > 0);
    }
}
