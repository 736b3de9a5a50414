//! Demand-driven grounding by a magic-set transformation.
//!
//! Some relations are only ever called with some arguments known: `(count h1 h2 i1 red ?v)`, or
//! a list helper called with its input list. Grounding them for every argument the
//! over-approximation allows can be enormous (or infinite), while the calls need only a few.
//! For such a relation `p`, called at every call site with the argument positions `α` bound,
//! the transformation adds a relation `m_p` of the values those calls pass (its "magic" set):
//!
//! - every rule of `p` gets the guard `m_p(head arguments at α)` as its first literal, so `p`
//!   holds only for called arguments;
//! - every call `p(t)` in the body of a rule `h ⇐ body` gives a rule
//!   `m_p(t at α) ⇐ [m_h(…) if h is guarded] ∧ the positive literals before the call`,
//!   taking the positive literals in body order and the negated ones after them (of the
//!   literals before the call, only those linked to it by shared variables are kept).
//!
//! When the calls pass the values of some positions independently of the others (a square
//! from the state beside a target from the caller's own calls), `m_p` is split into one
//! relation per group of positions (`partition`), and the guard is one literal per group.
//!
//! Every rule instance the grounder keeps has its positive literals in the over-approximation,
//! so the magic rule of each of its calls fires for it and the atoms it reads (positive or
//! negated) are computed in full. Guards are joined like any other literal but never appear in
//! ground rules.
//!
//! Only relations evaluated as over-approximations are transformed (a guarded relation
//! depends on its callers, so it becomes dynamic): the exact evaluation of static relations with
//! negation would not stay stratified. Static relations whose rules are unsafe on their own are
//! transformed too: the bound arguments of their calls are what makes them safe.

use super::normalize::{AtomPat, Conj, Item, Pat, RelId, RelTable};
use crate::gdl::Symbol;

/// The literals of `prefix` linked to the variables of `call` through shared variables. The
/// others only say that some unrelated join is not empty; leaving them out lets more calls
/// through (which is sound) and spares re-running the magic rule whenever they change.
fn relevant(prefix: &[Item], call: &AtomPat, nvars: usize) -> Vec<Item> {
    let mut linked = vec![false; nvars];
    call.for_each_var(&mut |v| linked[v as usize] = true);
    let mut keep = vec![false; prefix.len()];
    loop {
        let mut changed = false;
        for (i, l) in prefix.iter().enumerate() {
            if keep[i] {
                continue;
            }
            let mut touches = false;
            l.for_each_var(&mut |v| touches |= linked[v as usize]);
            if touches {
                keep[i] = true;
                changed = true;
                l.for_each_var(&mut |v| linked[v as usize] = true);
            }
        }
        if !changed {
            break;
        }
    }
    prefix
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(l, _)| l.clone())
        .collect()
}

/// The bound argument positions of the calls of a relation, as far as known.
type Adornment = Option<Vec<bool>>;

fn binds(p: &Pat, bound: &[bool]) -> bool {
    let mut all = true;
    p.for_each_var(&mut |v| all &= bound[v as usize]);
    all
}

/// The most atoms a static relation may have for its literals to be taken first when bindings
/// are passed on.
pub(crate) const SMALL: usize = 256;

/// The order in which a body passes bindings on: its positive literals over small static
/// relations (`small`) first, then its other positive literals in body order (the order the
/// front end checks calls in, and the one authors write for top-down provers), then the rest,
/// whose variables those bind. Small tables such as `(owner ?player ?piece)` bind the arguments
/// of a call cheaply wherever they stand; a large one (an addition table) would make the magic
/// rule a long product.
fn sips(conj: &Conj, small: &[bool]) -> Vec<usize> {
    let rank = |i: &usize| match &conj.body[*i] {
        Item::Pos(a) if small.get(a.rel as usize).copied().unwrap_or(false) => 0,
        Item::Pos(_) => 1,
        _ => 2,
    };
    let mut order: Vec<usize> = (0..conj.body.len()).collect();
    order.sort_by_key(rank);
    order
}

/// The variables of `conj` bound by the guard of its head when the head's relation is called
/// with the positions `adorn` bound.
fn head_bound(conj: &Conj, adorn: Option<&[bool]>) -> Vec<bool> {
    let mut bound = vec![false; conj.nvars];
    if let Some(adorn) = adorn {
        for (p, &b) in conj.head.args.iter().zip(adorn) {
            if b {
                p.for_each_var(&mut |v| bound[v as usize] = true);
            }
        }
    }
    bound
}

/// Transforms `conjs` for the relations in `candidates` that every call site calls with some
/// argument bound. Magic relations get fresh symbols numbered from `first_symbol`. The calls of
/// a relation in `whole` are kept in one magic relation; `state` is the relation `true`.
/// Returns, for every relation (magic ones included, which `rels` gains), the relation whose
/// calls it holds and the positions it holds them at if it is a magic relation.
pub(crate) fn transform(
    conjs: &mut Vec<Conj>,
    rels: &mut RelTable,
    candidates: &[bool],
    small: &[bool],
    whole: &[bool],
    state: RelId,
    first_symbol: u32,
) -> Vec<Option<Magic>> {
    let n = rels.len();
    let mut adorn: Vec<Adornment> = vec![None; n];
    let mut dropped = vec![false; n];
    // Greatest fixpoint: start from "every position bound" and weaken at each call site.
    loop {
        let mut changed = false;
        let guarded = |r: RelId| -> bool {
            let r = r as usize;
            candidates[r] && !dropped[r] && adorn[r].as_ref().is_none_or(|a| a.iter().any(|&b| b))
        };
        let mut updates: Vec<(RelId, Vec<bool>)> = Vec::new();
        for conj in conjs.iter() {
            let h = conj.head.rel as usize;
            let full = vec![true; conj.head.args.len()];
            let ha = if guarded(conj.head.rel) {
                Some(adorn[h].as_deref().unwrap_or(&full))
            } else {
                None
            };
            let mut bound = head_bound(conj, ha);
            for i in sips(conj, small) {
                let (Item::Pos(a) | Item::Neg(a)) = &conj.body[i] else {
                    continue;
                };
                if candidates[a.rel as usize] {
                    let pattern: Vec<bool> = a.args.iter().map(|p| binds(p, &bound)).collect();
                    updates.push((a.rel, pattern));
                }
                if let Item::Pos(a) = &conj.body[i] {
                    a.for_each_var(&mut |v| bound[v as usize] = true);
                }
            }
        }
        for (r, pattern) in updates {
            let r = r as usize;
            let next: Vec<bool> = match &adorn[r] {
                None => pattern,
                Some(old) => old.iter().zip(&pattern).map(|(&a, &b)| a && b).collect(),
            };
            if adorn[r].as_ref() != Some(&next) {
                adorn[r] = Some(next);
                changed = true;
            }
        }
        // A relation called with nothing bound somewhere is computed in full; its rules then
        // bind nothing from their heads, so the adornments are recomputed.
        for r in 0..n {
            if candidates[r] && !dropped[r] && adorn[r].as_ref().is_some_and(|a| !a.iter().any(|&b| b)) {
                dropped[r] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    // The guarded relations and the groups of their bound positions.
    let guarded: Vec<bool> = (0..n)
        .map(|r| candidates[r] && !dropped[r] && adorn[r].is_some())
        .collect();
    let groups = partition(conjs, &adorn, &guarded, small, whole, state);

    // The magic relations of each guarded relation, one per group.
    let mut magic_of: Vec<Vec<(RelId, Symbol)>> = vec![Vec::new(); n];
    let mut next_symbol = first_symbol;
    for r in 0..n {
        for g in &groups[r] {
            let sym = Symbol(next_symbol);
            next_symbol += 1;
            magic_of[r].push((rels.id(sym, g.len()), sym));
        }
    }
    let calls = |a: &AtomPat| -> Vec<AtomPat> {
        let r = a.rel as usize;
        if r >= n {
            return Vec::new();
        }
        groups[r]
            .iter()
            .zip(&magic_of[r])
            .map(|(g, &(rel, sym))| AtomPat {
                rel,
                sym,
                args: g.iter().map(|&i| a.args[i].clone()).collect(),
            })
            .collect()
    };

    // Guard the rules of guarded relations.
    for conj in conjs.iter_mut() {
        for (k, g) in calls(&conj.head).into_iter().enumerate() {
            conj.body.insert(k, Item::Pos(g));
        }
    }
    // The magic rules: one per call of a guarded relation and group of its positions.
    let mut magic_rules = Vec::new();
    for conj in conjs.iter() {
        let order = sips(conj, small);
        let mut prefix: Vec<Item> = Vec::new();
        let mut bound = vec![false; conj.nvars];
        for i in order {
            let item = &conj.body[i];
            if let Item::Pos(a) | Item::Neg(a) = item {
                for head in calls(a) {
                    let mut body = relevant(&prefix, &head, conj.nvars);
                    // Tests whose variables the prefix binds only narrow the calls.
                    let mut kept = vec![false; conj.nvars];
                    for l in &body {
                        l.for_each_var(&mut |v| kept[v as usize] = true);
                    }
                    for t in &conj.body {
                        if let Item::Distinct(x, y) | Item::Equal(x, y) = t {
                            if binds(x, &kept) && binds(y, &kept) && !body.contains(t) {
                                body.push(t.clone());
                            }
                        }
                    }
                    magic_rules.push(Conj {
                        head,
                        body,
                        nvars: conj.nvars,
                        rule: conj.rule,
                        var_names: conj.var_names.clone(),
                        magic: true,
                    });
                }
            }
            if let Item::Pos(a) = item {
                prefix.push(item.clone());
                a.for_each_var(&mut |v| bound[v as usize] = true);
            }
        }
    }
    conjs.extend(magic_rules);
    let mut magic_for = vec![None; rels.len()];
    for (r, ms) in magic_of.iter().enumerate() {
        for (g, &(rel, _)) in groups[r].iter().zip(ms) {
            magic_for[rel as usize] = Some(Magic {
                of: r as RelId,
                positions: (ms.len() > 1).then(|| g.clone()),
            });
        }
    }
    magic_for
}

/// A magic relation: the relation whose calls it holds, and the argument positions it holds
/// when the calls are split into groups (`partition`), `None` when it holds all bound ones.
#[derive(Clone, Debug)]
pub(crate) struct Magic {
    pub of: RelId,
    pub positions: Option<Vec<usize>>,
}

/// A simple union-find over the variables of one rule.
fn find(parent: &mut [u32], v: u32) -> u32 {
    let mut r = v;
    while parent[r as usize] != r {
        r = parent[r as usize];
    }
    let mut v = v;
    while parent[v as usize] != r {
        let next = parent[v as usize];
        parent[v as usize] = r;
        v = next;
    }
    r
}

/// Splits the bound positions of each guarded relation into groups whose values its calls
/// pass independently, one magic relation per group.
///
/// The calls of chess's rays (`(clear_row_ig ?u ?v ?x ?y ?ignorex ?ignorey)`) come from rules
/// that take the attacker's square from the state, `(true (cell ?u ?v ?piece))`, and the
/// target and the ignored square from their own calls: the square depends on the rest only
/// through the piece and its owner, a handful of values. A single magic relation holds the
/// product, 262,144 atoms per ray relation, although the squares alone are 64 and the rest
/// 4,096.
///
/// At a call site, the bound positions are grouped by the variables their values share in the
/// literals before the call (the caller's guard literals included). A *separator*, a variable
/// the call does not pass that a small static relation binds (a piece, a role), links nothing.
/// Cutting there loses which separator value went with which values of each group, which is
/// harmless only if one side does not depend on the separator: a group stands alone only when
/// every literal that ties it to a separator is over the state, whose over-approximation
/// usually holds every square for every piece (chess's `(true (cell ?u ?v ?piece))`, measured
/// on the corpus: `doc/grounding.md` §19); all the other groups of
/// the site stay together. The relation's groups are then those every call site keeps
/// together (the common refinement), with any two positions put back together that a literal
/// of some caller's body links where it restricts (neither a guard nor a small static
/// relation, which only shape a call: a move relation, a test of the state), since such a
/// literal is what makes calls rare. The guard of the relation's rules is one literal per
/// group; each group's relation holds the values of every call at its positions, so the guard
/// holds for every call and grouping is sound. What it costs is precision: a combination of
/// groups no single call made is let through too. The groups are recomputed until no
/// relation's groups change (they only split, from one group each). Relations in `whole`
/// keep one group (opaque relations, whose calls must be whole).
fn partition(
    conjs: &[Conj],
    adorn: &[Adornment],
    guarded: &[bool],
    small: &[bool],
    whole: &[bool],
    state: RelId,
) -> Vec<Vec<Vec<usize>>> {
    let n = adorn.len();
    // The group label of each position (usize::MAX for unbound positions): at first one group.
    let initial: Vec<Vec<usize>> = (0..n)
        .map(|r| match (&adorn[r], guarded[r]) {
            (Some(a), true) => a.iter().map(|&b| if b { 0 } else { usize::MAX }).collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut label = initial.clone();
    loop {
        let mut meet = initial.clone();
        let mut local: Vec<Vec<u32>> = initial.iter().map(|l| (0..l.len() as u32).collect()).collect();
        for conj in conjs {
            let h = conj.head.rel as usize;
            // The literals before each call: the head's guard groups, then the body in order;
            // for each, its variables, whether it is a guard and whether it is small and static.
            let mut prefix: Vec<Lit> = Vec::new();
            if guarded[h] {
                for g in groups_of(&label[h]) {
                    let mut vars = Vec::new();
                    for i in g {
                        conj.head.args[i].for_each_var(&mut |v| vars.push(v));
                    }
                    prefix.push(Lit {
                        vars,
                        guard: true,
                        small: false,
                        state: false,
                    });
                }
            }
            for i in sips(conj, small) {
                let (Item::Pos(a) | Item::Neg(a)) = &conj.body[i] else {
                    continue;
                };
                let q = a.rel as usize;
                let bound = initial
                    .get(q)
                    .map_or(0, |l| l.iter().filter(|&&l| l != usize::MAX).count());
                if guarded[q] && !whole.get(q).copied().unwrap_or(false) && bound > 1 {
                    let site = site_groups(a, &initial[q], &prefix, conj.nvars);
                    refine(&mut meet[q], &site.all);
                    for (i, &x) in site.local.iter().enumerate() {
                        for (j, &y) in site.local.iter().enumerate().skip(i + 1) {
                            if x != usize::MAX && x == y {
                                union(&mut local[q], i as u32, j as u32);
                            }
                        }
                    }
                }
                if let Item::Pos(a) = &conj.body[i] {
                    let mut vars = Vec::new();
                    a.for_each_var(&mut |v| vars.push(v));
                    prefix.push(Lit {
                        vars,
                        guard: false,
                        small: small.get(a.rel as usize).copied().unwrap_or(false),
                        state: a.rel == state,
                    });
                }
            }
        }
        // The common refinement, with the positions linked by a caller's body put together.
        let mut changed = false;
        for r in 0..n {
            if initial[r].is_empty() {
                continue;
            }
            let len = initial[r].len();
            for i in 0..len {
                for j in i + 1..len {
                    if meet[r][i] != usize::MAX && meet[r][i] == meet[r][j] {
                        union(&mut local[r], i as u32, j as u32);
                    }
                }
            }
            let mut next = initial[r].clone();
            for (i, l) in next.iter_mut().enumerate() {
                if *l != usize::MAX {
                    *l = find(&mut local[r], i as u32) as usize;
                }
            }
            if groups_of(&next) != groups_of(&label[r]) {
                changed = true;
            }
            label[r] = next;
        }
        if !changed {
            break;
        }
    }
    (0..n)
        .map(|r| {
            if guarded[r] {
                groups_of(&label[r])
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// The positions with each label, in order of their first position.
fn groups_of(label: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, &l) in label.iter().enumerate() {
        if l == usize::MAX {
            continue;
        }
        match out.iter_mut().find(|(k, _)| *k == l) {
            Some((_, g)) => g.push(i),
            None => out.push((l, vec![i])),
        }
    }
    out.into_iter().map(|(_, g)| g).collect()
}

/// Splits each class of `label` by `site`: two positions keep one label only if they had one
/// and have one in `site`.
fn refine(label: &mut [usize], site: &[usize]) {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (l, &s) in label.iter_mut().zip(site) {
        if *l == usize::MAX {
            continue;
        }
        let key = (*l, s);
        *l = match pairs.iter().position(|&k| k == key) {
            Some(j) => j,
            None => {
                pairs.push(key);
                pairs.len() - 1
            }
        };
    }
}

/// How a call site groups the bound positions of a call: `all` by every literal before it,
/// `local` by the literals of the body that restrict (neither the head's guard nor a small
/// static relation, which only give the shape of a call). Labels are variable roots;
/// `usize::MAX` for unbound positions and, in `local`, for positions whose variable no such
/// literal reads.
struct Site {
    all: Vec<usize>,
    local: Vec<usize>,
}

/// A literal before a call, as `partition` sees it: its variables, and whether it is a guard
/// of the head, over a small static relation, or over the state (`true`).
struct Lit {
    vars: Vec<u32>,
    guard: bool,
    small: bool,
    state: bool,
}

fn site_groups(a: &AtomPat, bound: &[usize], prefix: &[Lit], nvars: usize) -> Site {
    let mut passed = vec![false; nvars];
    for (p, &l) in a.args.iter().zip(bound) {
        if l != usize::MAX {
            p.for_each_var(&mut |v| passed[v as usize] = true);
        }
    }
    let mut separator = vec![false; nvars];
    for l in prefix {
        if l.small {
            for &v in &l.vars {
                separator[v as usize] |= !passed[v as usize];
            }
        }
    }
    let mut all: Vec<u32> = (0..nvars as u32).collect();
    let mut local = all.clone();
    let mut in_local = vec![false; nvars];
    for l in prefix {
        let mut keep = l.vars.iter().copied().filter(|&v| !separator[v as usize]);
        let restricts = !l.guard && !l.small;
        if let Some(f) = keep.next() {
            in_local[f as usize] |= restricts;
            for v in keep {
                union(&mut all, f, v);
                if restricts {
                    union(&mut local, f, v);
                    in_local[v as usize] = true;
                }
            }
        }
    }
    let mut first: Vec<Option<u32>> = vec![None; a.args.len()];
    for (i, p) in a.args.iter().enumerate() {
        if bound[i] == usize::MAX {
            continue;
        }
        p.for_each_var(&mut |v| match first[i] {
            None => first[i] = Some(v),
            Some(f) => {
                union(&mut all, f, v);
                union(&mut local, f, v);
            }
        });
    }
    // A group may stand apart only if it reaches the separators through the state alone. The
    // state's over-approximation usually holds every square for every piece, so which piece
    // went with which square carries nothing; where it does not, the split only lets more
    // calls through. Groups that reach a separator through any other literal stay together
    // (`joined`).
    let mut tied = vec![false; nvars];
    for l in prefix.iter().filter(|l| !l.state) {
        if l.vars.iter().any(|&v| separator[v as usize]) {
            for &v in l.vars.iter().filter(|&&v| !separator[v as usize]) {
                let root = find(&mut all, v);
                tied[root as usize] = true;
            }
        }
    }
    let joined = usize::MAX - 1;
    let anchor = first.iter().flatten().next().copied();
    let mut site = Site {
        all: vec![usize::MAX; a.args.len()],
        local: vec![usize::MAX; a.args.len()],
    };
    for i in 0..a.args.len() {
        if bound[i] == usize::MAX {
            continue;
        }
        site.all[i] = match (first[i], anchor) {
            (Some(v), _) | (None, Some(v)) => {
                let root = find(&mut all, v);
                if tied[root as usize] {
                    joined
                } else {
                    root as usize
                }
            }
            (None, None) => 0,
        };
        if let Some(v) = first[i].filter(|&v| in_local[v as usize]) {
            site.local[i] = find(&mut local, v) as usize;
        }
    }
    site
}

fn union(parent: &mut [u32], x: u32, y: u32) {
    let (a, b) = (find(parent, x), find(parent, y));
    if a != b {
        parent[a as usize] = b;
    }
}
