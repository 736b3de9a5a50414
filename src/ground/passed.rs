//! Arguments passed down to the few rules that read them, split off before grounding.
//!
//! A relation can carry an argument that most of its rules only check against a domain or pass
//! on unchanged to another such relation, while a few rules read it: chess's check tests take
//! the square the moving piece leaves, and of the rules below them that trace the rays from
//! the king, only one reads that square (a ray may pass through it). Grounded as written,
//! every atom of every relation on the way is instantiated once for each of the 64 squares,
//! although for all squares off the ray the atoms are the same.
//!
//! Such a relation `r(X, I)` (`I` the passed positions) is the union of two relations: `r0(X)`,
//! what `r`'s derivations give that never read `I`, and `rs(X, I)`, those that do:
//!
//! ```text
//! r(X, I) ⇐ r0(X) ∧ D(I)        r(X, I) ⇐ rs(X, I)
//! ```
//!
//! `D` is the domain literals the rules check `I` against. A rule of `r` is
//! - *free* when each variable at a passed position of its head occurs nowhere else in the head
//!   and in the body only in positive `(D X)` literals, exactly those of the position's domain:
//!   it becomes a rule of `r0` without them;
//! - *passing* when those variables occur in the body, besides domain literals of the position's
//!   domain, only in one positive literal `t(Y, I)` of another such relation `t`, at `t`'s
//!   passed positions and in the same order, `t` having the same domains: it becomes two rules,
//!   one of `r0` calling `t0(Y)`, one of `rs` calling `ts(Y, I)`;
//! - *special* otherwise: it becomes a rule of `rs`.
//!
//! Every positive literal `t(Y, J)` of such a relation elsewhere (in special rules and in rules
//! of other relations) is written as the two cases, `t0(Y) ∧ D(J)` or `ts(Y, J)`: a rule with
//! `m` of them becomes `2^m` rules (at most [`MAX_EXPANDED`] literals a rule are written so;
//! the others, and negated literals, read `r` itself through the two rules above). A relation
//! that no positive literal reads keeps its special rules itself (`rs` is `r`): chess's check
//! tests, read only under `not`, stay relations whose calls are their atoms
//! (`Grounder::calls_as_atoms`), each call instantiated with the rules that read its square.
//! Such a relation goes without its rule `r(X, I) ⇐ r0(X) ∧ D(I)` too, when every rule that
//! negates it can say what that rule said (`Split::unlink`): `not r(Y, J)` becomes
//! `not r0(Y) ∧ not r(Y, J)` where `D(J)` holds (and `not r(Y, J)` alone where it does not),
//! so that a call that no special rule derives is no atom of the ground program (it was one
//! atom and one rule per call: 313,096 of each in chess).
//!
//! By induction over derivations, `t(Y, J)` holds exactly when `t0(Y) ∧ D(J)` or `ts(Y, J)`
//! does: a free rule's instance holds for every value of `D` at `I`; a passing rule's instance
//! reads `t(Y, I)`, which is `t0(Y) ∧ D(I)` (then the rule's own domain literals, a subset of
//! `D`, hold, and the instance is `r0`'s for every such `I`) or `ts(Y, I)` (an instance of
//! `rs`); every other rule's instance is one of `rs`'s, with its literals written as the two
//! cases. Negation is unchanged: each rule keeps its negated literals, and the new relations
//! sit in the strata of the ones they come from.
//!
//! Which positions: those free in every rule of a relation that has free ones (with the same
//! domains, standing for at least [`MIN_VALUES`] combinations of values), carried from there
//! down to the relations that passing rules call and up to the relations whose rules pass
//! them on from their heads. A relation is split only if some of its derivations never read
//! the positions (a free rule, or a passing one to such a relation), and only together with
//! the relations it passes them to or from, of which one has a special rule.
//!
//! Grounded, `r0` has one atom where `r` had one per value of `D`, and `rs` only the atoms of the
//! values that a special rule binds (in chess, the squares on each ray).

use super::normalize::{AtomPat, Conj, Item, Pat, RelId, RelTable};
use super::project::{free_positions, rules_and_domains};
use crate::gdl::Symbol;

/// The passed positions of a relation, in order, each with its sorted domains.
type Passed = Vec<(usize, Vec<RelId>)>;

/// The most positive literals of split relations a rule has written as two cases each.
const MAX_EXPANDED: usize = 3;

/// The fewest combinations of values of the passed positions for which a relation is split.
const MIN_VALUES: usize = 32;

/// How a rule of a relation with passed positions reads them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Free,
    /// The body item that carries the positions on.
    Passing(usize),
    Special,
}

/// The variables at `passed` positions of `conj`'s head, if each is a variable that occurs
/// once in the head.
fn passed_vars(conj: &Conj, passed: &Passed) -> Option<Vec<u32>> {
    let mut uses = vec![0u32; conj.nvars];
    conj.head.for_each_var(&mut |x| uses[x as usize] += 1);
    passed
        .iter()
        .map(|&(i, _)| match conj.head.args[i] {
            Pat::Var(x) if uses[x as usize] == 1 => Some(x),
            _ => None,
        })
        .collect()
}

/// The domain literals of `vars` in `conj`'s body (sorted, per variable), and the body items
/// other than those that hold any of `vars`.
fn uses_of(conj: &Conj, vars: &[u32], domain: &[bool]) -> (Vec<Vec<RelId>>, Vec<usize>) {
    let mut domains: Vec<Vec<RelId>> = vec![Vec::new(); vars.len()];
    let mut items = Vec::new();
    for (k, item) in conj.body.iter().enumerate() {
        if let Item::Pos(a) = item {
            if domain[a.rel as usize] {
                if let Pat::Var(x) = a.args[0] {
                    if let Some(j) = vars.iter().position(|&v| v == x) {
                        domains[j].push(a.rel);
                        continue;
                    }
                }
            }
        }
        let mut holds = false;
        item.for_each_var(&mut |x| holds |= vars.contains(&x));
        if holds {
            items.push(k);
        }
    }
    for d in &mut domains {
        d.sort_unstable();
        d.dedup();
    }
    (domains, items)
}

/// The positions of `vars` in `a`, in order, if each occurs there exactly once as a plain
/// argument.
fn carried_at(a: &AtomPat, vars: &[u32]) -> Option<Vec<usize>> {
    let mut count = vec![0u32; vars.len()];
    let mut at = vec![usize::MAX; vars.len()];
    for (i, arg) in a.args.iter().enumerate() {
        match arg {
            Pat::Var(x) => {
                if let Some(j) = vars.iter().position(|v| v == x) {
                    count[j] += 1;
                    at[j] = i;
                }
            }
            Pat::Func(..) => {
                let mut inside = false;
                arg.for_each_var(&mut |x| inside |= vars.contains(&x));
                if inside {
                    return None;
                }
            }
            Pat::Ground(_) => {}
        }
    }
    count.iter().all(|&c| c == 1).then_some(at)
}

/// How `conj`, a rule of a relation with passed positions, reads them.
fn kind(conj: &Conj, passed: &[Option<Passed>], domain: &[bool]) -> Kind {
    let Some(p) = &passed[conj.head.rel as usize] else {
        return Kind::Special;
    };
    let Some(vars) = passed_vars(conj, p) else {
        return Kind::Special;
    };
    let (domains, items) = uses_of(conj, &vars, domain);
    match items[..] {
        [] => {
            if domains.iter().zip(p).all(|(d, (_, want))| d == want) {
                Kind::Free
            } else {
                Kind::Special
            }
        }
        [k] => {
            let Item::Pos(t) = &conj.body[k] else {
                return Kind::Special;
            };
            let Some(q) = &passed[t.rel as usize] else {
                return Kind::Special;
            };
            let Some(at) = carried_at(t, &vars) else {
                return Kind::Special;
            };
            let same = q.len() == p.len()
                && q.iter()
                    .zip(p)
                    .zip(&at)
                    .all(|(((qi, qd), (_, pd)), &a)| *qi == a && qd == pd)
                && domains
                    .iter()
                    .zip(p)
                    .all(|(d, (_, want))| d.iter().all(|x| want.contains(x)));
            if same {
                Kind::Passing(k)
            } else {
                Kind::Special
            }
        }
        _ => Kind::Special,
    }
}

/// Splits the relations with passed positions (see the module's text) for which `keep` is
/// false into the two relations `r0` and `rs`, rewriting `conjs`. Returns the number of
/// relations made; their symbols are `first_symbol`, `first_symbol + 1`, ….
pub(crate) fn split_passed_arguments(
    conjs: &mut Vec<Conj>,
    rels: &mut RelTable,
    keep: impl Fn(RelId) -> bool,
    first_symbol: u32,
) -> u32 {
    let n = rels.len();
    let (rules_of, domain) = rules_and_domains(conjs, rels);
    // The relations some positive literal reads.
    let mut read = vec![false; n];
    for conj in conjs.iter() {
        for item in &conj.body {
            if let Item::Pos(a) = item {
                read[a.rel as usize] = true;
            }
        }
    }
    let eligible: Vec<bool> = (0..n)
        .map(|r| {
            !keep(r as RelId)
                && !domain[r]
                && !rules_of[r].is_empty()
                && rules_of[r].iter().all(|&c| !conjs[c].magic)
        })
        .collect();

    // The seeds: the positions free (with the same domains) in every rule of a relation that
    // has any free.
    let mut passed: Vec<Option<Passed>> = vec![None; n];
    for r in (0..n).filter(|&r| eligible[r]) {
        let mut common: Option<Passed> = None;
        for &c in &rules_of[r] {
            let free = free_positions(&conjs[c], &domain);
            if free.is_empty() {
                continue;
            }
            common = Some(match common {
                None => free,
                Some(s) => s.into_iter().filter(|p| free.contains(p)).collect(),
            });
        }
        // Splitting pays when the part that never reads the positions stands for many
        // values: each rule that reads it in two cases doubles.
        let values = |s: &Passed| {
            s.iter()
                .map(|(_, d)| d.iter().map(|&x| rules_of[x as usize].len()).min().unwrap_or(0))
                .fold(1usize, |a, b| a.saturating_mul(b))
        };
        passed[r] = common.filter(|s| !s.is_empty() && values(s) >= MIN_VALUES);
    }
    // The positions are passed down to the relations that rules carry them to, and up to the
    // relations whose rules carry them on from their heads.
    let mut readers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (c, conj) in conjs.iter().enumerate() {
        for (k, item) in conj.body.iter().enumerate() {
            if let Item::Pos(a) = item {
                readers[a.rel as usize].push((c, k));
            }
        }
    }
    let mut work: Vec<usize> = (0..n).filter(|&r| passed[r].is_some()).collect();
    // The first set of positions proposed for a relation is its own (a relation passes on
    // only one): a rule that would pass it another reads it, as a special rule.
    let propose = |t: usize, proposed: Passed, passed: &mut [Option<Passed>], work: &mut Vec<usize>| {
        if passed[t].is_none() {
            passed[t] = Some(proposed);
            work.push(t);
        }
    };
    while let Some(r) = work.pop() {
        let p = passed[r].clone().expect("on the list");
        for &c in &rules_of[r] {
            let conj = &conjs[c];
            let Some(vars) = passed_vars(conj, &p) else {
                continue;
            };
            let (_, items) = uses_of(conj, &vars, &domain);
            let [k] = items[..] else { continue };
            let Item::Pos(t) = &conj.body[k] else { continue };
            let t_rel = t.rel as usize;
            if !eligible[t_rel] {
                continue;
            }
            let Some(at) = carried_at(t, &vars) else {
                continue;
            };
            let proposed: Passed = at.into_iter().zip(&p).map(|(i, (_, d))| (i, d.clone())).collect();
            propose(t_rel, proposed, &mut passed, &mut work);
        }
        for &(c, k) in &readers[r] {
            let conj = &conjs[c];
            let h = conj.head.rel as usize;
            if !eligible[h] || conj.magic {
                continue;
            }
            let Item::Pos(a) = &conj.body[k] else { continue };
            let Some(vars) = p
                .iter()
                .map(|&(i, _)| match a.args[i] {
                    Pat::Var(x) => Some(x),
                    _ => None,
                })
                .collect::<Option<Vec<u32>>>()
            else {
                continue;
            };
            if carried_at(a, &vars).is_none_or(|at| at.iter().zip(&p).any(|(&i, (j, _))| i != *j)) {
                continue;
            }
            let (_, items) = uses_of(conj, &vars, &domain);
            if items != [k] {
                continue;
            }
            let Some(at) = carried_at(&conj.head, &vars) else {
                continue;
            };
            let proposed: Passed = at.into_iter().zip(&p).map(|(i, (_, d))| (i, d.clone())).collect();
            propose(h, proposed, &mut passed, &mut work);
        }
    }

    // Only relations with a part that never reads the positions are split: those with a free
    // rule or a passing one to such a relation.
    let mut kinds: Vec<Vec<Kind>>;
    loop {
        kinds = (0..n)
            .map(|r| match passed[r] {
                Some(_) => rules_of[r]
                    .iter()
                    .map(|&c| kind(&conjs[c], &passed, &domain))
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        let mut plain = vec![false; n];
        loop {
            let mut changed = false;
            for r in 0..n {
                if passed[r].is_none() || plain[r] {
                    continue;
                }
                let has = rules_of[r].iter().zip(&kinds[r]).any(|(&c, k)| match *k {
                    Kind::Free => true,
                    Kind::Passing(i) => match &conjs[c].body[i] {
                        Item::Pos(t) => plain[t.rel as usize],
                        _ => false,
                    },
                    Kind::Special => false,
                });
                if has {
                    plain[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut removed = false;
        for r in 0..n {
            if passed[r].is_some() && !plain[r] {
                passed[r] = None;
                removed = true;
            }
        }
        if !removed {
            break;
        }
    }
    // A group of relations that pass the positions to each other is split only if some rule
    // of it reads them: otherwise nothing is gained.
    let mut group: Vec<usize> = (0..n).collect();
    fn find(group: &mut [usize], mut r: usize) -> usize {
        while group[r] != r {
            group[r] = group[group[r]];
            r = group[r];
        }
        r
    }
    for r in (0..n).filter(|&r| passed[r].is_some()) {
        for (&c, k) in rules_of[r].iter().zip(&kinds[r]) {
            if let Kind::Passing(i) = *k {
                if let Item::Pos(t) = &conjs[c].body[i] {
                    let (a, b) = (find(&mut group, r), find(&mut group, t.rel as usize));
                    group[a] = b;
                }
            }
        }
    }
    let mut reads = vec![false; n];
    for r in (0..n).filter(|&r| passed[r].is_some()) {
        if kinds[r].contains(&Kind::Special) {
            let g = find(&mut group, r);
            reads[g] = true;
        }
    }
    for r in 0..n {
        if passed[r].is_some() && !reads[find(&mut group, r)] {
            passed[r] = None;
        }
    }
    let split: Vec<usize> = (0..n).filter(|&r| passed[r].is_some()).collect();
    if split.is_empty() {
        return 0;
    }

    // The new relations: `r0` and `rs` of each split relation.
    let mut parts: Vec<Option<(AtomRel, AtomRel)>> = vec![None; n];
    let mut made = 0u32;
    for &r in &split {
        let (sym, arity) = rels.key(r as RelId);
        let k = passed[r].as_ref().map_or(0, Vec::len);
        let s0 = Symbol(first_symbol + made);
        made += 1;
        let r0 = AtomRel {
            rel: rels.id(s0, arity - k),
            sym: s0,
        };
        // A relation that no positive literal reads keeps the rules that read the positions
        // itself: nothing needs them apart, and it stays a relation read only under `not`,
        // grounded per call (`Grounder::calls_as_atoms`).
        let rs = if read[r] {
            let ss = Symbol(first_symbol + made);
            made += 1;
            AtomRel {
                rel: rels.id(ss, arity),
                sym: ss,
            }
        } else {
            AtomRel { rel: r as RelId, sym }
        };
        parts[r] = Some((r0, rs));
    }
    // A split relation that keeps its special rules itself (read only under `not`) is read
    // without its rule `r(X, I) ⇐ r0(X) ∧ D(I)` when every rule that negates it can be
    // rewritten (`Split::unlink`): each would otherwise be instantiated once per call.
    let mut unlinked = vec![false; n];
    for &r in &split {
        let (_, rs) = parts[r].as_ref().expect("split");
        unlinked[r] = rs.rel == r as RelId;
    }
    for conj in conjs.iter() {
        let negated = conj
            .body
            .iter()
            .filter(|item| matches!(item, Item::Neg(a) if unlinked[a.rel as usize]))
            .count();
        if negated == 0 {
            continue;
        }
        if conj.magic || negated > MAX_UNLINKED {
            for item in &conj.body {
                if let Item::Neg(a) = item {
                    unlinked[a.rel as usize] = false;
                }
            }
        }
    }
    let cx = Split {
        passed: &passed,
        parts: &parts,
        domain: &domain,
        syms: (0..rels.len()).map(|r| rels.key(r as RelId).0).collect(),
    };

    let mut out = Vec::with_capacity(conjs.len() + 2 * split.len());
    let mut first_rule: Vec<Option<usize>> = vec![None; n];
    for conj in conjs.drain(..) {
        let r = conj.head.rel as usize;
        if conj.magic {
            out.push(conj);
            continue;
        }
        let rewritten = parts[r].is_some();
        let mut variants: Vec<(Conj, Option<usize>)> = Vec::new();
        match (&parts[r], kind(&conj, &passed, &domain)) {
            (None, _) => variants.push((conj, None)),
            (Some((r0, rs)), k) => {
                first_rule[r].get_or_insert(conj.rule.unwrap_or(usize::MAX));
                let p = passed[r].as_ref().expect("split");
                match k {
                    Kind::Free => {
                        let mut c = conj;
                        c.head = cx.project(&c.head, r0, p);
                        variants.push((c, None));
                    }
                    Kind::Passing(i) => {
                        let Item::Pos(t) = conj.body[i].clone() else {
                            unreachable!("a passing rule carries the positions in a positive literal")
                        };
                        let t_rel = t.rel as usize;
                        let (t0, ts) = parts[t_rel].as_ref().expect("carried to a split relation");
                        let q = passed[t_rel].as_ref().expect("split");
                        let mut c0 = conj.clone();
                        c0.head = cx.project(&conj.head, r0, p);
                        c0.body[i] = Item::Pos(cx.project(&t, t0, q));
                        let mut cs = conj;
                        cs.head = cx.renamed(&cs.head, rs);
                        cs.body[i] = Item::Pos(cx.renamed(&t, ts));
                        variants.push((c0, Some(i)));
                        variants.push((cs, Some(i)));
                    }
                    Kind::Special => {
                        let mut c = conj;
                        c.head = cx.renamed(&c.head, rs);
                        variants.push((c, None));
                    }
                }
            }
        }
        for (conj, carrier) in variants {
            for c in cx.expand(conj, carrier, rewritten) {
                out.extend(cx.unlink(c, &unlinked));
            }
        }
    }
    // The two rules that give each split relation back, for the literals left reading it.
    for &r in &split {
        let (sym, arity) = rels.key(r as RelId);
        let (r0, rs) = parts[r].as_ref().expect("split");
        let p = passed[r].as_ref().expect("split");
        let head = AtomPat {
            rel: r as RelId,
            sym,
            args: (0..arity).map(|i| Pat::Var(i as u32)).collect(),
        };
        let rule = first_rule[r].filter(|&i| i != usize::MAX);
        let mut body0 = vec![Item::Pos(cx.project(&head, r0, p))];
        for (i, domains) in p {
            for &d in domains {
                body0.push(Item::Pos(cx.domain(d, Pat::Var(*i as u32))));
            }
        }
        let mut bodies = if unlinked[r] { Vec::new() } else { vec![body0] };
        if rs.rel != r as RelId {
            bodies.push(vec![Item::Pos(cx.renamed(&head, rs))]);
        }
        for body in bodies {
            out.push(Conj {
                head: head.clone(),
                body,
                nvars: arity,
                rule,
                var_names: vec![sym; arity],
                magic: false,
            });
        }
    }
    *conjs = out;
    made
}

/// The most negated literals of relations read without their `r0` rule (`Split::unlink`) a
/// rule may have; a relation negated more often in one rule keeps that rule.
const MAX_UNLINKED: usize = 2;

/// A relation and its symbol.
#[derive(Clone, Copy)]
struct AtomRel {
    rel: RelId,
    sym: Symbol,
}

/// What rewriting the rules needs to know.
struct Split<'a> {
    passed: &'a [Option<Passed>],
    parts: &'a [Option<(AtomRel, AtomRel)>],
    domain: &'a [bool],
    syms: Vec<Symbol>,
}

impl Split<'_> {
    /// Whether `r` is a split relation (the new relations come after those of `parts`).
    fn split(&self, r: RelId) -> bool {
        self.parts.get(r as usize).is_some_and(Option::is_some)
    }

    /// `a` as an atom of `to`, without the passed positions `p`.
    fn project(&self, a: &AtomPat, to: &AtomRel, p: &Passed) -> AtomPat {
        AtomPat {
            rel: to.rel,
            sym: to.sym,
            args: a
                .args
                .iter()
                .enumerate()
                .filter(|(i, _)| !p.iter().any(|(j, _)| j == i))
                .map(|(_, arg)| arg.clone())
                .collect(),
        }
    }

    /// `conj` with each negated literal `not r(Y, J)` of a relation `r` that is `unlinked`
    /// (its rule `r(X, I) ⇐ r0(X) ∧ D(I)` left out, `r` keeping only its own rules) written as
    /// what it stood for: `not r(Y, J)` is `(not r0(Y) or not D(J)) and not r(Y, J)` with `r`
    /// without that rule, so the rule becomes one reading `not r0(Y) ∧ not r(Y, J)` and one
    /// reading `not d(J_i) ∧ not r(Y, J)` for each domain literal `d` of `D`. The domains are
    /// static, so the latter have instances only for values outside them, none in games where
    /// the values always lie in the domains (chess's squares). (The first rule needs no `D(J)`:
    /// where it fails, the others hold.)
    fn unlink(&self, conj: Conj, unlinked: &[bool]) -> Vec<Conj> {
        let at: Vec<usize> = conj
            .body
            .iter()
            .enumerate()
            .filter(|(_, item)| matches!(item, Item::Neg(a) if unlinked[a.rel as usize]))
            .map(|(k, _)| k)
            .collect();
        let mut out = vec![conj];
        // Each literal in turn, at its place in the original body; what is added goes after
        // it, so the places stay.
        for &k in &at {
            let mut next = Vec::with_capacity(out.len() * 3);
            for c in out {
                let Item::Neg(t) = c.body[k].clone() else {
                    unreachable!("chosen among negated literals")
                };
                let r = t.rel as usize;
                let (r0, _) = self.parts[r].as_ref().expect("split");
                let p = self.passed[r].as_ref().expect("split");
                let mut inside = c.clone();
                inside.body[k] = Item::Neg(self.project(&t, r0, p));
                inside.body.push(Item::Neg(t.clone()));
                next.push(inside);
                for (i, domains) in p {
                    for &d in domains {
                        let mut outside = c.clone();
                        outside.body[k] = Item::Neg(self.domain(d, t.args[*i].clone()));
                        outside.body.push(Item::Neg(t.clone()));
                        next.push(outside);
                    }
                }
            }
            out = next;
        }
        out
    }

    /// The atom of domain relation `d` at `arg`.
    fn domain(&self, d: RelId, arg: Pat) -> AtomPat {
        AtomPat {
            rel: d,
            sym: self.syms[d as usize],
            args: vec![arg].into(),
        }
    }

    /// `a` as an atom of `to`, with the same arguments.
    fn renamed(&self, a: &AtomPat, to: &AtomRel) -> AtomPat {
        AtomPat {
            rel: to.rel,
            sym: to.sym,
            args: a.args.clone(),
        }
    }

    /// `conj` with its first [`MAX_EXPANDED`] positive literals of split relations (other than
    /// the `carrier` item) written as their two cases; if any was, or the rule was `rewritten`
    /// already, each rule goes without the domain literals of variables that occur nowhere
    /// else.
    fn expand(&self, conj: Conj, carrier: Option<usize>, rewritten: bool) -> Vec<Conj> {
        let at: Vec<usize> = conj
            .body
            .iter()
            .enumerate()
            .filter(|&(k, item)| Some(k) != carrier && matches!(item, Item::Pos(a) if self.split(a.rel)))
            .map(|(k, _)| k)
            .take(MAX_EXPANDED)
            .collect();
        let changed = rewritten || !at.is_empty();
        let mut out = Vec::with_capacity(1 << at.len());
        for choice in 0..1usize << at.len() {
            let mut c = Conj {
                body: Vec::with_capacity(conj.body.len() + 2 * at.len()),
                ..conj.clone()
            };
            for (k, item) in conj.body.iter().enumerate() {
                let Some(bit) = at.iter().position(|&j| j == k) else {
                    c.body.push(item.clone());
                    continue;
                };
                let Item::Pos(t) = item else {
                    unreachable!("chosen among positive literals")
                };
                let (t0, ts) = self.parts[t.rel as usize].as_ref().expect("split");
                if choice >> bit & 1 == 0 {
                    // The case that never reads the positions, and their domains right after
                    // it, where the literal bound them.
                    let q = self.passed[t.rel as usize].as_ref().expect("split");
                    c.body.push(Item::Pos(self.project(t, t0, q)));
                    for (i, domains) in q {
                        for &d in domains {
                            c.body.push(Item::Pos(self.domain(d, t.args[*i].clone())));
                        }
                    }
                } else {
                    c.body.push(Item::Pos(self.renamed(t, ts)));
                }
            }
            if changed {
                self.drop_idle_checks(&mut c);
                c.renumber(true);
            }
            out.push(c);
        }
        out
    }

    /// Drops the domain literals `(D X)` of variables `X` that occur in no other literal nor
    /// in the head (each such literal holds for some value, `D` having a fact), and repeats of
    /// the same domain literal.
    fn drop_idle_checks(&self, c: &mut Conj) {
        let is_check =
            |item: &Item| matches!(item, Item::Pos(a) if self.domain.get(a.rel as usize) == Some(&true));
        let mut used = vec![false; c.nvars];
        c.head.for_each_var(&mut |x| used[x as usize] = true);
        for item in c.body.iter().filter(|item| !is_check(item)) {
            item.for_each_var(&mut |x| used[x as usize] = true);
        }
        let mut kept: Vec<Item> = Vec::with_capacity(c.body.len());
        for item in c.body.drain(..) {
            if is_check(&item) {
                let idle =
                    matches!(&item, Item::Pos(a) if matches!(a.args[0], Pat::Var(x) if !used[x as usize]));
                if idle || kept.contains(&item) {
                    continue;
                }
            }
            kept.push(item);
        }
        c.body = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{agrees, ground_src, rules, texts};
    use super::super::AtomKind;

    /// A line of 32 cells with pieces that step right, a rook at cell 1 and a king at cell 30.
    /// A piece may move only if the rook does not see the king through the cell it leaves:
    /// `clear(a, b, i)` holds when every cell strictly between `a` and `b` is empty or `i`.
    fn line() -> String {
        let mut src = String::from(
            "(role p)
             (init (piece 5)) (init (piece 12)) (init (piece 20)) (init (step 1))
             (rook 1) (king 30)
             (<= (clear ?a ?b ?i) (succ ?a ?b) (cell ?i))
             (<= (clear ?a ?b ?i) (succ ?a ?i) (clear ?i ?b ?i))
             (<= (clear ?a ?b ?i) (succ ?a ?c) (not (true (piece ?c))) (clear ?c ?b ?i))
             (<= (attacked ?i) (rook ?a) (king ?k) (clear ?a ?k ?i))
             (<= (legal p (move ?i ?j)) (true (piece ?i)) (succ ?i ?j) (not (true (piece ?j)))
                 (not (attacked ?i)))
             (legal p wait)
             (<= (moved ?i) (does p (move ?i ?j)))
             (<= (next (piece ?j)) (does p (move ?i ?j)))
             (<= (next (piece ?x)) (true (piece ?x)) (not (moved ?x)))
             (<= (next (step ?n)) (true (step ?m)) (succ ?m ?n))
             (<= terminal (true (step 12)))
             (<= (goal p 100) (true (piece 30)))
             (<= (goal p 0) (not (true (piece 30))))\n",
        );
        for i in 1..=32 {
            src += &format!("(cell {i}) ");
            if i < 32 {
                src += &format!("(succ {i} {}) ", i + 1);
            }
        }
        src
    }

    #[test]
    fn an_argument_read_by_one_rule_is_grounded_only_where_that_rule_binds_it() {
        let src = line();
        let g = ground_src(&src);
        let views = texts(&g, |k| *k == AtomKind::View);
        // `clear` is grounded as its two parts: without the ignored cell, and with it only
        // where it lies strictly between the two ends. As written, every pair would have an
        // atom for each of the 32 cells.
        assert!(!views.iter().any(|t| t.starts_with("(clear ")), "{views:?}");
        let numbers = |t: &str| -> Vec<u32> {
            t.trim_end_matches(')')
                .split(' ')
                .filter_map(|w| w.parse().ok())
                .collect()
        };
        let with_cell: Vec<Vec<u32>> = views
            .iter()
            .filter(|t| t.starts_with("(;or "))
            .map(|t| numbers(t))
            .filter(|n| n.len() == 4)
            .collect();
        assert!(!with_cell.is_empty(), "{views:?}");
        assert!(
            with_cell.iter().all(|n| n[1] < n[3] && n[3] < n[2]),
            "{with_cell:?}"
        );
        assert!(with_cell.len() < 32 * 30, "{}", with_cell.len());
        assert!(agrees(&src, 20) > 0);
    }

    #[test]
    fn a_relation_read_under_not_is_read_as_its_two_parts() {
        let src = line();
        let g = ground_src(&src);
        let all = rules(&g);
        // `attacked`, read only under `not`, keeps only the rules that read the ignored cell:
        // none reads the part without it (the rule `attacked(i) ⇐ attacked0 ∧ cell(i)`,
        // instantiated once per call).
        let attacked: Vec<&String> = all.iter().filter(|r| r.starts_with("(attacked ")).collect();
        assert!(!attacked.is_empty(), "{}", all.join("\n"));
        for r in &attacked {
            let (head, body) = r.split_once(" <=").expect("a rule");
            let cell = head.trim_start_matches("(attacked ").trim_end_matches(')');
            assert!(body.contains(&format!(" {cell})")), "{r}");
        }
        // The moves negate that part themselves, beside the rules that read the cell.
        let moves: Vec<&String> = all.iter().filter(|r| r.contains("(not (attacked ")).collect();
        assert!(!moves.is_empty(), "{}", all.join("\n"));
        for r in &moves {
            assert!(r.contains("(not (;or "), "{r}");
        }
        assert!(agrees(&src, 20) > 0);
    }
}
