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
/// argument bound. Magic relations get fresh symbols numbered from `first_symbol`. Returns, for
/// every relation (magic ones included, which `rels` gains), the relation whose calls it holds
/// if it is a magic relation.
pub(crate) fn transform(
    conjs: &mut Vec<Conj>,
    rels: &mut RelTable,
    candidates: &[bool],
    small: &[bool],
    first_symbol: u32,
) -> Vec<Option<RelId>> {
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

    // The magic relation of each guarded relation.
    let mut magic_of: Vec<Option<(RelId, Symbol)>> = vec![None; n];
    let mut next_symbol = first_symbol;
    for r in 0..n {
        if !candidates[r] || dropped[r] {
            continue;
        }
        let Some(a) = &adorn[r] else { continue };
        let arity = a.iter().filter(|&&b| b).count();
        let sym = Symbol(next_symbol);
        next_symbol += 1;
        magic_of[r] = Some((rels.id(sym, arity), sym));
    }
    let call = |a: &AtomPat| -> Option<AtomPat> {
        let (rel, sym) = (*magic_of.get(a.rel as usize)?)?;
        let positions = adorn[a.rel as usize].as_ref()?;
        let args: Vec<Pat> = a
            .args
            .iter()
            .zip(positions)
            .filter(|(_, &b)| b)
            .map(|(p, _)| p.clone())
            .collect();
        Some(AtomPat {
            rel,
            sym,
            args: args.into(),
        })
    };

    // Guard the rules of guarded relations.
    for conj in conjs.iter_mut() {
        if let Some(g) = call(&conj.head) {
            conj.body.insert(0, Item::Pos(g));
        }
    }
    // The magic rules: one per call of a guarded relation.
    let mut magic_rules = Vec::new();
    for conj in conjs.iter() {
        let order = sips(conj, small);
        let mut prefix: Vec<Item> = Vec::new();
        let mut bound = vec![false; conj.nvars];
        for i in order {
            let item = &conj.body[i];
            if let Item::Pos(a) | Item::Neg(a) = item {
                if let Some(head) = call(a) {
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
    for (r, m) in magic_of.iter().enumerate() {
        if let Some((rel, _)) = m {
            magic_for[*rel as usize] = Some(r as RelId);
        }
    }
    magic_for
}
