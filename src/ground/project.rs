//! Arguments a relation's truth does not depend on, dropped before grounding.
//!
//! A relation can carry an argument that only ranges over a fixed domain and is passed on
//! unchanged: `(<= (p ?x) (bit ?x) (q ?x 0) (q ?x 1))` where every rule of `q` likewise only
//! checks its first argument against `bit` and passes it on. Then `(p 0)` and `(p 1)` are the
//! same proposition, and a grounder that instantiates them separately does the same work once
//! per domain value and argument: for a chain of such relations, exponentially often. This pass
//! finds those argument positions and removes them, so each such relation is grounded once.
//!
//! A position `i` of relation `p` is *irrelevant*, with domain `D` (a unary relation given by
//! facts only), when in every rule for `p` the head's argument `i` is a variable `X` that
//! occurs nowhere else in the head, and in the body occurs only
//! - as the argument of a positive literal `(D X)` (at least one), and
//! - as a plain argument at irrelevant positions of other literals, with the same domain `D`.
//!
//! The positions are found as a greatest fixpoint: every position that could qualify is
//! assumed irrelevant, and those whose rules break the conditions under the current assumption
//! are removed until none is. By induction over the derivation (and over the strata for
//! negated literals), `p`'s truth is then the same for every value of `D` at an irrelevant
//! position and false for any value outside `D`: changing `X` within `D` keeps every `(D X)`
//! true and, by the induction, every literal that passes `X` on unchanged.
//!
//! The rewrite: each such relation loses those positions (it keeps its symbol, at the smaller
//! arity); in every rule, a variable that occurs only in `(D X)` literals and at removed
//! positions disappears together with its `(D X)` literals (true, as `D` has a fact); any other
//! argument at a removed position of a positive literal becomes a positive literal `(D t)`. A
//! negated literal with such an argument would need a disjunction, so a position called that
//! way is not irrelevant.

use super::normalize::{AtomPat, Conj, Item, Pat, RelId, RelTable};
use crate::gdl::Symbol;

/// Drops the irrelevant argument positions (see the module's text) of every relation for which
/// `keep` is false from `conjs`, which are the normalized rules of a description and nothing
/// else. Returns the number of positions removed.
pub(crate) fn drop_irrelevant_arguments(
    conjs: &mut [Conj],
    rels: &mut RelTable,
    keep: impl Fn(RelId) -> bool,
) -> usize {
    let n = rels.len();
    let (rules_of, domain) = rules_and_domains(conjs, rels);

    // The assumption: each position of each relation not kept, with the domain its first
    // rule's variable is checked against.
    let mut cand: Vec<Vec<Option<RelId>>> = (0..n)
        .map(|r| {
            let arity = rels.key(r as RelId).1;
            let Some(&first) = rules_of[r].first() else {
                return vec![None; arity];
            };
            if keep(r as RelId) {
                return vec![None; arity];
            }
            let conj = &conjs[first];
            (0..arity)
                .map(|i| {
                    let Pat::Var(x) = conj.head.args[i] else {
                        return None;
                    };
                    conj.body.iter().find_map(|item| match item {
                        Item::Pos(a) if domain[a.rel as usize] && a.args[0] == Pat::Var(x) => Some(a.rel),
                        _ => None,
                    })
                })
                .collect()
        })
        .collect();

    loop {
        let mut changed = false;
        for conj in conjs.iter() {
            let free = eliminable(conj, &cand, &domain);
            // The head, and every negated literal (whose argument could not be checked against
            // the domain), must have a droppable variable at each assumed position.
            let negated = conj.body.iter().filter_map(|item| match item {
                Item::Neg(a) => Some(a),
                _ => None,
            });
            for a in std::iter::once(&conj.head).chain(negated) {
                for (i, arg) in a.args.iter().enumerate() {
                    let position = &mut cand[a.rel as usize][i];
                    if position.is_some() && !matches!(arg, Pat::Var(x) if free[*x as usize].is_some()) {
                        *position = None;
                        changed = true;
                    }
                }
            }
        }
        // The relation keeps its symbol at the smaller arity, which must be free.
        for (r, positions) in cand.iter_mut().enumerate() {
            let dropped = positions.iter().filter(|d| d.is_some()).count();
            if dropped > 0 {
                let (sym, arity) = rels.key(r as RelId);
                if rels.get(sym, arity - dropped).is_some() {
                    positions.iter_mut().for_each(|d| *d = None);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }

    let mut renamed: Vec<Option<RelId>> = vec![None; n];
    let mut removed = 0;
    for r in 0..n {
        let dropped = cand[r].iter().filter(|d| d.is_some()).count();
        if dropped > 0 {
            let (sym, arity) = rels.key(r as RelId);
            renamed[r] = Some(rels.id(sym, arity - dropped));
            removed += dropped;
        }
    }
    if removed == 0 {
        return 0;
    }
    let syms: Vec<Symbol> = (0..n).map(|r| rels.key(r as RelId).0).collect();
    for conj in conjs.iter_mut() {
        rewrite(conj, &cand, &domain, &renamed, &syms);
    }
    removed
}

/// The rules of each relation of `rels` (indices into `conjs`), and which relations are
/// possible domains: unary relations given by facts only, with at least one.
pub(super) fn rules_and_domains(conjs: &[Conj], rels: &RelTable) -> (Vec<Vec<usize>>, Vec<bool>) {
    let n = rels.len();
    let mut rules_of: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (c, conj) in conjs.iter().enumerate() {
        rules_of[conj.head.rel as usize].push(c);
    }
    let domain = (0..n)
        .map(|r| {
            rels.key(r as RelId).1 == 1
                && !rules_of[r].is_empty()
                && rules_of[r].iter().all(|&c| {
                    let conj = &conjs[c];
                    conj.body.is_empty() && matches!(conj.head.args[0], Pat::Ground(_))
                })
        })
        .collect();
    (rules_of, domain)
}

/// For each variable of `conj`, the domain it can be dropped with, if it can: it occurs
/// nowhere but in positive `(D X)` literals (at least one), at assumed-irrelevant positions of
/// domain `D`, and at most once in the head, at such a position.
fn eliminable(conj: &Conj, cand: &[Vec<Option<RelId>>], domain: &[bool]) -> Vec<Option<RelId>> {
    // `None`: not seen yet; `Some(None)`: cannot be dropped; `Some(Some(d))`: domain `d`.
    let mut seen: Vec<Option<Option<RelId>>> = vec![None; conj.nvars];
    let mut checked = vec![false; conj.nvars];
    let mut meet = |x: u32, d: Option<RelId>| {
        let s = &mut seen[x as usize];
        *s = match *s {
            None => Some(d),
            Some(prev) if prev == d => Some(d),
            Some(_) => Some(None),
        };
    };
    let atom = |a: &AtomPat, meet: &mut dyn FnMut(u32, Option<RelId>)| {
        for (i, arg) in a.args.iter().enumerate() {
            match arg {
                Pat::Var(x) => meet(*x, cand[a.rel as usize][i]),
                Pat::Func(..) => arg.for_each_var(&mut |x| meet(x, None)),
                Pat::Ground(_) => {}
            }
        }
    };
    let mut head_count = vec![0u32; conj.nvars];
    conj.head.for_each_var(&mut |x| head_count[x as usize] += 1);
    atom(&conj.head, &mut meet);
    for item in &conj.body {
        match item {
            Item::Pos(a) if domain[a.rel as usize] => {
                if let Pat::Var(x) = a.args[0] {
                    meet(x, Some(a.rel));
                    checked[x as usize] = true;
                }
            }
            Item::Pos(a) | Item::Neg(a) => atom(a, &mut meet),
            Item::Distinct(p, q) | Item::Equal(p, q) => {
                p.for_each_var(&mut |x| meet(x, None));
                q.for_each_var(&mut |x| meet(x, None));
            }
        }
    }
    (0..conj.nvars)
        .map(|x| match seen[x] {
            Some(Some(d)) if checked[x] && head_count[x] <= 1 => Some(d),
            _ => None,
        })
        .collect()
}

/// Rewrites one rule: dropped positions go, dropped variables go with their domain
/// literals, and other arguments at dropped positions become domain literals.
fn rewrite(
    conj: &mut Conj,
    cand: &[Vec<Option<RelId>>],
    domain: &[bool],
    renamed: &[Option<RelId>],
    syms: &[Symbol],
) {
    let free = eliminable(conj, cand, domain);
    let is_free = |p: &Pat| matches!(p, Pat::Var(x) if free[*x as usize].is_some());
    let mut checks = Vec::new();
    let project = |a: &AtomPat, checks: &mut Vec<Item>| -> AtomPat {
        let Some(rel) = renamed[a.rel as usize] else {
            return a.clone();
        };
        let mut args = Vec::new();
        for (i, arg) in a.args.iter().enumerate() {
            match cand[a.rel as usize][i] {
                None => args.push(arg.clone()),
                Some(_) if is_free(arg) => {}
                Some(d) => checks.push(Item::Pos(AtomPat {
                    rel: d,
                    sym: syms[d as usize],
                    args: vec![arg.clone()].into(),
                })),
            }
        }
        AtomPat {
            rel,
            sym: a.sym,
            args: args.into(),
        }
    };
    let head = project(&conj.head, &mut checks);
    let mut body = Vec::with_capacity(conj.body.len());
    for item in &conj.body {
        match item {
            Item::Pos(a) if domain[a.rel as usize] && is_free(&a.args[0]) => {}
            Item::Pos(a) => body.push(Item::Pos(project(a, &mut checks))),
            Item::Neg(a) => body.push(Item::Neg(project(a, &mut checks))),
            other => body.push(other.clone()),
        }
    }
    body.append(&mut checks);
    conj.head = head;
    conj.body = body;
    conj.renumber(true);
}

/// Free positions of a rule's head, each with the sorted domains of its variable.
pub(super) type Free = Vec<(usize, Vec<RelId>)>;

/// The most rules of one relation that [`split_partly_irrelevant`] compares pairwise.
const MAX_SPLIT_RULES: usize = 64;

/// Splits off, for each relation for which `keep` is false, the rules in which some argument
/// positions are irrelevant (in the sense of the module's text, for those rules alone) into a
/// relation of their own without those positions. Returns the number of relations made;
/// their symbols are `first_symbol`, `first_symbol + 1`, ….
///
/// A position `i` is free in a rule when the head's argument `i` is a variable that occurs
/// nowhere else in the head and in the body only as the argument of positive `(D X)`
/// literals, `D` a unary relation given by facts only (at least one literal). When two or
/// more rules of `p` have the positions `S` free with the same domain literals at each, those
/// rules are rewritten as rules of a new relation `p'` over the other positions, without the
/// domain literals of `S`, and replaced by one rule `p(X…) ⇐ p'(X… outside S) ∧ (D Xi)…` over
/// the positions `S`. Every rule of the group holds for an instance exactly when its
/// arguments at `S` are in their domains and its projection holds, so the group's rules hold
/// together exactly when the new rule does.
///
/// Chess's check test is such a relation: "threatened with capture" has seven arguments
/// (owner, captured square, king square, ignored square), and three of its four rules (pawns,
/// knights and the king) never read the ignored square. Instantiated as written, each of the
/// 313,096 calls gets one rule from each of the three, each with a join of its own; split, each
/// call gets one rule, and the three rules are grounded once per call without the ignored
/// square, about 8,000 of them.
pub(crate) fn split_partly_irrelevant(
    conjs: &mut Vec<Conj>,
    rels: &mut RelTable,
    keep: impl Fn(RelId) -> bool,
    first_symbol: u32,
) -> u32 {
    let (rules_of, domain) = rules_and_domains(conjs, rels);
    let mut made = 0u32;
    let mut added = Vec::new();
    for (r, rules) in rules_of.iter().enumerate() {
        if keep(r as RelId) || domain[r] || rules.len() < 2 || rules.len() > MAX_SPLIT_RULES {
            continue;
        }
        let free: Vec<Free> = rules
            .iter()
            .map(|&c| {
                if conjs[c].magic {
                    Vec::new()
                } else {
                    free_positions(&conjs[c], &domain)
                }
            })
            .collect();
        // The candidate position sets: those free with the same domains in two rules.
        let mut best: Option<(usize, Free)> = None;
        for a in 0..rules.len() {
            for b in a + 1..rules.len() {
                let common: Free = free[a].iter().filter(|p| free[b].contains(p)).cloned().collect();
                if common.is_empty() {
                    continue;
                }
                let count = free
                    .iter()
                    .filter(|f| common.iter().all(|p| f.contains(p)))
                    .count();
                let better = match &best {
                    None => true,
                    Some((c, s)) => count > *c || (count == *c && common.len() > s.len()),
                };
                if better {
                    best = Some((count, common));
                }
            }
        }
        let Some((_, positions)) = best else {
            continue;
        };
        let (sym, arity) = rels.key(r as RelId);
        let new_sym = Symbol(first_symbol + made);
        made += 1;
        let new_rel = rels.id(new_sym, arity - positions.len());
        let dropped = |i: usize| positions.iter().any(|(j, _)| *j == i);
        let mut first_rule = None;
        for (k, &c) in rules.iter().enumerate() {
            if !positions.iter().all(|p| free[k].contains(p)) {
                continue;
            }
            let conj = &mut conjs[c];
            first_rule.get_or_insert_with(|| (conj.rule, conj.var_names.clone(), conj.head.args.clone()));
            let gone: Vec<u32> = positions
                .iter()
                .map(|&(i, _)| match conj.head.args[i] {
                    Pat::Var(x) => x,
                    _ => unreachable!("a free position holds a variable"),
                })
                .collect();
            let args: Vec<Pat> = (0..arity)
                .filter(|&i| !dropped(i))
                .map(|i| conj.head.args[i].clone())
                .collect();
            conj.head = AtomPat {
                rel: new_rel,
                sym: new_sym,
                args: args.into(),
            };
            conj.body.retain(|item| {
                !matches!(item, Item::Pos(a) if domain[a.rel as usize]
                && matches!(a.args[0], Pat::Var(x) if gone.contains(&x)))
            });
            conj.renumber(true);
        }
        let Some((rule, names, head_args)) = first_rule else {
            continue;
        };
        // The rule that joins the split rules back: fresh variables `0..arity`, named after
        // the first split rule's head where it had a variable.
        let var_names = (0..arity)
            .map(|i| match head_args[i] {
                Pat::Var(x) => names[x as usize],
                _ => names.first().copied().unwrap_or(sym),
            })
            .collect();
        let mut body = vec![Item::Pos(AtomPat {
            rel: new_rel,
            sym: new_sym,
            args: (0..arity)
                .filter(|&i| !dropped(i))
                .map(|i| Pat::Var(i as u32))
                .collect(),
        })];
        for (i, domains) in &positions {
            for &d in domains {
                body.push(Item::Pos(AtomPat {
                    rel: d,
                    sym: rels.key(d).0,
                    args: vec![Pat::Var(*i as u32)].into(),
                }));
            }
        }
        added.push(Conj {
            head: AtomPat {
                rel: r as RelId,
                sym,
                args: (0..arity).map(|i| Pat::Var(i as u32)).collect(),
            },
            body,
            nvars: arity,
            rule,
            var_names,
            magic: false,
        });
    }
    conjs.extend(added);
    made
}

/// The free positions of `conj`'s head (see [`split_partly_irrelevant`]), each with the sorted
/// domains of its variable's literals, in order of position.
pub(super) fn free_positions(conj: &Conj, domain: &[bool]) -> Free {
    let mut uses = vec![0u32; conj.nvars];
    conj.head.for_each_var(&mut |x| uses[x as usize] += 1);
    let mut domains: Vec<Vec<RelId>> = vec![Vec::new(); conj.nvars];
    for item in &conj.body {
        match item {
            Item::Pos(a) if domain[a.rel as usize] => {
                if let Pat::Var(x) = a.args[0] {
                    domains[x as usize].push(a.rel);
                }
            }
            other => other.for_each_var(&mut |x| uses[x as usize] += 1),
        }
    }
    let mut out = Vec::new();
    for (i, arg) in conj.head.args.iter().enumerate() {
        if let Pat::Var(x) = *arg {
            let x = x as usize;
            if uses[x] == 1 && !domains[x].is_empty() {
                let mut d = domains[x].clone();
                d.sort_unstable();
                d.dedup();
                out.push((i, d));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{agrees, ground_src, texts};
    use super::super::AtomKind;

    /// A game whose `legal` asks a chain of relations `p1 … pK` where `pk` has `k` arguments
    /// that each range over `bit` and are passed on unchanged, `pk` holding when the step
    /// counter is `k` or both `p(k+1)` below it hold: grounded as written, `pK` alone has
    /// `2^K` instances. `extra` is added to the rules.
    fn chain(depth: usize, extra: &str) -> String {
        let mut src = String::from(
            "(role robot) (init (step 1)) (bit 0) (bit 1)
             (<= (next (step ?m)) (true (step ?n)) (succ ?n ?m))
             (<= (next done) (does robot go))
             (legal robot wait)
             (<= (legal robot go) (p1 0))
             (<= (legal robot stop) (p1 7))
             (<= terminal (true done))
             (<= terminal (true (step 20)))
             (<= (goal robot 100) (true done))
             (<= (goal robot 0) (not (true done)))\n",
        );
        for n in 1..20 {
            src += &format!("(succ {n} {})\n", n + 1);
        }
        for k in 1..=depth {
            let vars: Vec<String> = (0..k).map(|i| format!("?a{i}")).collect();
            let head = format!("(p{k} {})", vars.join(" "));
            let bits: String = vars.iter().map(|v| format!("(bit {v}) ")).collect();
            src += &format!("(<= {head} {bits}(true (step {k})))\n");
            if k < depth {
                let args = vars.join(" ");
                src += &format!("(<= {head} {bits}(p{} {args} 0) (p{} {args} 1))\n", k + 1, k + 1);
            }
        }
        src + extra
    }

    /// Views of `g` whose text starts with `(p`.
    fn chain_views(src: &str) -> Vec<String> {
        let g = ground_src(src);
        texts(&g, |k| *k == AtomKind::View)
            .into_iter()
            .filter(|t| t.starts_with("(p") || t.starts_with('p'))
            .collect()
    }

    #[test]
    fn arguments_that_only_range_over_a_domain_are_dropped() {
        let src = chain(14, "");
        // One view per relation of the chain, where instantiating the arguments would give
        // 2^15 - 2 of them.
        let views = chain_views(&src);
        assert_eq!(views.len(), 14, "{views:?}");
        assert!(views.iter().all(|v| !v.contains(' ')), "{views:?}");
        // `go` is legal while the step is at most 14 (every branch of the chain reaches it),
        // `stop` never, as 7 is no bit.
        assert!(agrees(&src, 20) > 0);
    }

    #[test]
    fn an_argument_read_by_the_state_or_negated_with_a_constant_stays() {
        // `q`'s argument is matched against the state, so it matters.
        let read = chain(3, "(init (on 1)) (<= (next (on ?x)) (true (on ?x))) (<= (q ?x) (bit ?x) (true (on ?x))) (<= (legal robot left) (q 1))");
        let g = ground_src(&read);
        let q = texts(&g, |k| *k == AtomKind::View);
        assert!(q.iter().any(|t| t == "(q 1)"), "{q:?}");
        assert!(agrees(&read, 10) > 0);
        // A negated call with a constant would need `(or (not p1) (not (bit 1)))`, so `p1`
        // keeps its argument, and with it the chain below it.
        let negated = chain(3, "(<= (legal robot right) (not (p1 1)))");
        let views = chain_views(&negated);
        assert!(views.iter().any(|t| t == "(p1 1)"), "{views:?}");
        assert!(agrees(&negated, 10) > 0);
    }
}
