//! Which call patterns reach each rule when the game is evaluated top-down from the questions a
//! game master asks.
//!
//! A few real games contain rules that are unsafe on their own but safe in every way they are
//! actually used: `(<= (goal ?r 50) …)` with `?r` bound only because the game master always asks
//! for one role's goal, or list-processing helpers such as `(append nil ?l ?l)` that are only
//! ever called with their first two arguments known. This module finds, for every rule, the
//! patterns it is called with: the questions `(role ?)`, `(init ?)`, `(base ?)`, `(input ? ?)`,
//! `(next ?)`, `terminal`, and `(legal R ?)` and `(goal R ?)` for a known role `R`, followed
//! through rule bodies from left to right. A variable counts as bound in a body atom when the
//! head's call pattern or an earlier positive atom binds it; a negated atom is called with what
//! is bound at that point but binds nothing.
//!
//! The analysis over-approximates the calls (a head is assumed to match whenever its shape does
//! not contradict the pattern) and under-approximates what is bound, so a rule found safe in all
//! its patterns really is safe when evaluated that way.

use super::ast::{Atom, Description, Literal, Symbol, Term};
use std::collections::{HashMap, HashSet};

/// The most distinct (relation, pattern) calls the analysis follows before giving up.
pub(crate) const MAX_CALL_PATTERNS: usize = 20_000;

/// The most body literals the analysis visits in all before giving up, so that a description
/// made to be slow (many patterns times many large bodies) cannot stall the front end.
const MAX_STEPS: usize = 5_000_000;

/// One argument of a call, abstracted: what is known about it when the call is made.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Pat {
    /// A value fully known at the time of the call, but not known to the analysis.
    Bound,
    /// A variable not bound at the time of the call.
    Free,
    /// A constant written in the call.
    Const(Symbol),
    /// A function term written in the call, with its arguments abstracted.
    Func(Symbol, Vec<Pat>),
}

impl Pat {
    fn of(t: &Term, bound: &HashSet<Symbol>) -> Pat {
        match t {
            Term::Var(v) if bound.contains(v) => Pat::Bound,
            Term::Var(_) => Pat::Free,
            Term::Const(c) => Pat::Const(*c),
            Term::Func(f, args) => Pat::Func(*f, args.iter().map(|a| Pat::of(a, bound)).collect()),
        }
    }

    /// Whether the value is fully known when the call is made.
    pub fn is_bound(&self) -> bool {
        match self {
            Pat::Bound | Pat::Const(_) => true,
            Pat::Free => false,
            Pat::Func(_, args) => args.iter().all(Pat::is_bound),
        }
    }
}

/// Matches a head argument against a call argument: `false` if they can never unify; otherwise
/// adds to `bound` the head's variables the call certainly binds.
fn match_arg(t: &Term, p: &Pat, bound: &mut HashSet<Symbol>) -> bool {
    if p.is_bound() {
        // A known value binds every variable of the head term it unifies with. Its shape may
        // still contradict the head's, which the structural cases below catch.
        t.for_each_var(&mut |v| {
            bound.insert(v);
        });
    }
    match (t, p) {
        (_, Pat::Free) | (_, Pat::Bound) | (Term::Var(_), _) => true,
        (Term::Const(c), Pat::Const(d)) => c == d,
        (Term::Const(_), Pat::Func(..)) | (Term::Func(..), Pat::Const(_)) => false,
        (Term::Func(f, ts), Pat::Func(g, ps)) => {
            f == g && ts.len() == ps.len() && ts.iter().zip(ps).all(|(t, p)| match_arg(t, p, bound))
        }
    }
}

/// The variables of `head` that a call with pattern `pats` binds, or `None` if the head cannot
/// match the call.
pub(crate) fn head_bindings(head: &Atom, pats: &[Pat]) -> Option<HashSet<Symbol>> {
    if head.args.len() != pats.len() {
        return None;
    }
    let mut bound = HashSet::new();
    for (t, p) in head.args.iter().zip(pats) {
        if !match_arg(t, p, &mut bound) {
            return None;
        }
    }
    Some(bound)
}

/// The analysis gave up after [`MAX_CALL_PATTERNS`] calls or [`MAX_STEPS`] literals.
pub(crate) struct TooManyPatterns;

/// For every rule, the call patterns that reach it (empty for a rule nothing reaches).
/// `expansions[i]` is the body of rule `i` distributed into plain conjunctions.
pub(crate) fn call_patterns(
    desc: &Description,
    expansions: &[Vec<Vec<&Literal>>],
) -> Result<Vec<Vec<Vec<Pat>>>, TooManyPatterns> {
    let k = &desc.keywords;
    let mut by_head: HashMap<Symbol, Vec<usize>> = HashMap::new();
    for (i, rule) in desc.rules.iter().enumerate() {
        // A ground fact binds nothing and calls nothing, so it can be left out of the search.
        let ground_fact = rule.body.is_empty() && rule.head.args.iter().all(Term::is_ground);
        if !ground_fact {
            by_head.entry(rule.head.rel).or_default().push(i);
        }
    }
    let questions = [
        (k.role, vec![Pat::Free]),
        (k.init, vec![Pat::Free]),
        (k.base, vec![Pat::Free]),
        (k.input, vec![Pat::Free, Pat::Free]),
        (k.next, vec![Pat::Free]),
        (k.terminal, vec![]),
        (k.legal, vec![Pat::Bound, Pat::Free]),
        (k.goal, vec![Pat::Bound, Pat::Free]),
    ];
    let mut seen: HashSet<(Symbol, Vec<Pat>)> = HashSet::new();
    let mut work: Vec<(Symbol, Vec<Pat>)> = Vec::new();
    for q in questions {
        if seen.insert(q.clone()) {
            work.push(q);
        }
    }
    let mut reached: Vec<Vec<Vec<Pat>>> = vec![Vec::new(); desc.rules.len()];
    let mut steps = 0usize;
    while let Some((rel, pats)) = work.pop() {
        let Some(rules) = by_head.get(&rel) else { continue };
        for &i in rules {
            let Some(inputs) = head_bindings(&desc.rules[i].head, &pats) else {
                continue;
            };
            reached[i].push(pats.clone());
            for conj in &expansions[i] {
                steps += conj.len() + 1;
                if steps > MAX_STEPS {
                    return Err(TooManyPatterns);
                }
                let mut bound = inputs.clone();
                for lit in conj {
                    let mut calls = Vec::new();
                    atoms_of(lit, &mut calls);
                    for a in &calls {
                        let call = (a.rel, a.args.iter().map(|t| Pat::of(t, &bound)).collect());
                        if !seen.contains(&call) {
                            if seen.len() >= MAX_CALL_PATTERNS {
                                return Err(TooManyPatterns);
                            }
                            seen.insert(call.clone());
                            work.push(call);
                        }
                    }
                    if let Literal::Atom(a) = lit {
                        a.for_each_var(&mut |v| {
                            bound.insert(v);
                        });
                    }
                }
            }
        }
    }
    Ok(reached)
}

/// The atoms a literal calls: itself, or those under its `not`.
fn atoms_of<'a>(lit: &'a Literal, out: &mut Vec<&'a Atom>) {
    match lit {
        Literal::Atom(a) => out.push(a),
        Literal::Not(l, _) => atoms_of(l, out),
        Literal::Distinct(..) => {}
        Literal::Or(ls, _) | Literal::And(ls, _) => ls.iter().for_each(|l| atoms_of(l, out)),
    }
}
