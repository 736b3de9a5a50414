//! The static checks of the GDL specification.
//!
//! [`check`] runs them in a fixed order so that the error reported for a description is
//! predictable, each phase over the rules in source order:
//!
//! 1. arities (one per relation; the keywords' fixed ones);
//! 2. what one rule shows by itself: `true` and `does` are never defined, `role` only by ground
//!    facts, `init` and `next` never appear in bodies; and the size of its distributed body;
//! 3. safety;
//! 4. what the keyword relations depend on, through the dependency graph;
//! 5. stratified negation;
//! 6. the recursion restriction.
//!
//! Bodies with `or` and `and` are checked the way the evaluator runs them: distributed into a
//! disjunction of plain conjunctions, each of which must be safe and recursion-restricted on its
//! own.
//!
//! Safety has one deliberate exception, because real games need it. A rule that is unsafe on its
//! own is accepted, with a warning, when no question of the game master ever reaches it, or when
//! every call that reaches it binds enough of its head to make it safe (see `modes`): `(<= (goal
//! ?r 50) …)` is asked for one role at a time, and a list helper such as `(append nil ?l ?l)` is
//! only called with its inputs known. The relations of such rules must be evaluated top-down; the
//! recursion restriction, which promises a finite bottom-up evaluation, is only a warning inside
//! them. [`warnings`](super::warnings) lists every such case.

use super::ast::{Atom, Description, Literal, Rule, Span, Symbol, Term};
use super::deps::DepGraph;
use super::error::{ErrorKind, ParseError};
use super::modes::{self, Pat, TooManyPatterns, MAX_CALL_PATTERNS};
use std::collections::{HashMap, HashSet};

/// The most conjunctions one rule body may expand to when its `or`s are distributed. The largest
/// in the shared corpus of real games is 12; the limit keeps a body of many `or`s from taking
/// exponential time and memory.
pub const MAX_EXPANSIONS: usize = 4096;

/// Checks `desc` (parsed from `src`) against the restrictions of GDL.
pub fn check(desc: &Description, src: &str) -> Result<(), ParseError> {
    match run(desc, src, Mode::FirstError).errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The warnings about `desc` (parsed from `src`), at most [`MAX_WARNINGS`] of them.
pub fn warnings(desc: &Description, src: &str) -> Vec<ParseError> {
    run(desc, src, Mode::Warnings).warnings
}

/// The most warnings [`warnings`] returns. Each one copies its source line, so an unbounded
/// number could take memory quadratic in the size of a text written on one line.
pub const MAX_WARNINGS: usize = 200;

/// What a run of the checks is for.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Mode {
    /// Stop at the first error, in the order the phases define; make no warnings.
    FirstError,
    /// Go through all checks and keep the warnings; make no errors.
    Warnings,
}

/// What a run of the checks found.
struct Findings<'s> {
    src: &'s str,
    mode: Mode,
    errors: Vec<ParseError>,
    warnings: Vec<ParseError>,
}

impl Findings<'_> {
    /// Records an error; `true` when the run should stop here.
    fn error(&mut self, p: Problem) -> bool {
        if self.mode == Mode::FirstError {
            self.errors
                .push(ParseError::new(p.kind, p.message, p.span, self.src));
            return true;
        }
        false
    }

    fn warning(&mut self, p: Problem) {
        if self.mode == Mode::Warnings && self.warnings.len() < MAX_WARNINGS {
            self.warnings
                .push(ParseError::new(p.kind, p.message, p.span, self.src));
        }
    }
}

/// Records the error of `$result`, if any, and returns from `run` when that ends the run.
macro_rules! report {
    ($f:expr, $result:expr) => {
        if let Err(p) = $result {
            if $f.error(p) {
                return $f;
            }
        }
    };
}

/// Runs the checks in phase order, each phase over the rules in source order.
fn run<'s>(desc: &Description, src: &'s str, mode: Mode) -> Findings<'s> {
    let cx = Checker { desc };
    let mut f = Findings {
        src,
        mode,
        errors: Vec::new(),
        warnings: Vec::new(),
    };

    // Arities. Function symbols are only warned about: terms of different shapes simply never
    // unify, and real games reuse a function name with another arity for a different purpose.
    let mut relations = HashMap::new();
    for rule in &desc.rules {
        report!(f, cx.arities(rule, &mut relations));
    }
    if mode == Mode::Warnings {
        let mut functions = HashMap::new();
        let mut warned = HashSet::new();
        for rule in &desc.rules {
            for w in cx.function_arities(rule, &mut functions, &mut warned) {
                f.warning(w);
            }
        }
    }

    // What one rule shows by itself, and the distributed bodies the later checks work on.
    let mut expansions = Vec::with_capacity(desc.rules.len());
    for rule in &desc.rules {
        report!(f, cx.local_restrictions(rule));
        match cx.expand_body(rule) {
            Ok(conjs) => expansions.push(conjs),
            Err(p) => {
                expansions.push(Vec::new());
                report!(f, Err::<(), _>(p));
            }
        }
    }

    // Safety, and which relations can only be evaluated top-down.
    let no_inputs = HashSet::new();
    let unsafe_rules: Vec<Option<Problem>> = desc
        .rules
        .iter()
        .zip(&expansions)
        .map(|(rule, conjs)| cx.safety(rule, conjs, &no_inputs, None).err())
        .collect();
    let mut top_down: HashSet<Symbol> = HashSet::new();
    if unsafe_rules.iter().any(Option::is_some) {
        for v in cx.safety_under_calls(&expansions, unsafe_rules) {
            match v.accepted_for {
                Some(rel) => {
                    top_down.insert(rel);
                    f.warning(v.problem);
                }
                None => report!(f, Err::<(), _>(v.problem)),
            }
        }
    }

    // The checks over the dependency graph.
    let graph = DepGraph::build(desc);
    let k = &desc.keywords;
    let paths: Vec<(Symbol, Vec<Option<Symbol>>)> = [k.true_, k.does, k.next, k.legal, k.goal, k.terminal]
        .iter()
        .map(|&t| (t, graph.paths_to(t)))
        .collect();
    for i in 0..desc.rules.len() {
        report!(f, cx.dependency_restrictions(&graph, &paths, i));
    }
    for i in 0..desc.rules.len() {
        report!(f, cx.stratification(&graph, i));
    }
    for (rule, conjs) in desc.rules.iter().zip(&expansions) {
        let Err(mut p) = cx.recursion(&graph, rule, conjs) else {
            continue;
        };
        if top_down.contains(&rule.head.rel) {
            // The recursion restriction promises a finite bottom-up evaluation, which a
            // relation with top-down-only rules never gets anyway; whether its recursion
            // ends depends on the calls, so the evaluator has to bound it.
            p.message.push_str(&format!(
                "; accepted because '{}' can only be evaluated top-down, where termination \
                 depends on the calls",
                cx.name(rule.head.rel)
            ));
            f.warning(p);
        } else {
            report!(f, Err::<(), _>(p));
        }
    }
    f
}

/// One plain conjunction from a distributed body: atoms, `not`s and `distinct`s only.
type Conj<'a> = Vec<&'a Literal>;

struct Checker<'a> {
    desc: &'a Description,
}

/// What became of a rule that is unsafe on its own.
struct Verdict {
    /// The error, or the warning when the rule is accepted.
    problem: Problem,
    /// The rule's relation when the rule is accepted: it must be evaluated top-down.
    accepted_for: Option<Symbol>,
}

/// A problem found by a check, before it becomes a [`ParseError`] (which copies its source
/// line, and so is only made for the problems that are reported).
struct Problem {
    kind: ErrorKind,
    message: String,
    span: Span,
}

impl<'a> Checker<'a> {
    fn error(&self, kind: ErrorKind, message: String, span: Span) -> Problem {
        Problem { kind, message, span }
    }

    fn name(&self, s: Symbol) -> &str {
        self.desc.symbols.name(s)
    }

    /// The fixed arities of the keyword relations.
    fn keyword_arity(&self, rel: Symbol) -> Option<usize> {
        let k = &self.desc.keywords;
        let fixed = [
            (k.role, 1),
            (k.init, 1),
            (k.true_, 1),
            (k.does, 2),
            (k.next, 1),
            (k.legal, 2),
            (k.goal, 2),
            (k.terminal, 0),
            (k.base, 1),
            (k.input, 2),
        ];
        fixed.iter().find(|(s, _)| *s == rel).map(|&(_, n)| n)
    }

    /// Every relation has one arity, and the keywords have theirs. The first use of a relation
    /// in source order fixes its arity; a later use with another number of arguments is the
    /// error, pointing back at the first.
    fn arities(&self, rule: &Rule, seen: &mut HashMap<Symbol, (usize, Span)>) -> Result<(), Problem> {
        self.atom_arity(&rule.head, seen)?;
        rule.body.iter().try_for_each(|lit| self.literal_arity(lit, seen))
    }

    fn literal_arity(&self, lit: &Literal, seen: &mut HashMap<Symbol, (usize, Span)>) -> Result<(), Problem> {
        match lit {
            Literal::Atom(a) => self.atom_arity(a, seen),
            Literal::Not(l, _) => self.literal_arity(l, seen),
            Literal::Distinct(..) => Ok(()),
            Literal::Or(ls, _) | Literal::And(ls, _) => {
                ls.iter().try_for_each(|l| self.literal_arity(l, seen))
            }
        }
    }

    fn atom_arity(&self, atom: &Atom, seen: &mut HashMap<Symbol, (usize, Span)>) -> Result<(), Problem> {
        let n = atom.args.len();
        let name = self.name(atom.rel);
        if let Some(fixed) = self.keyword_arity(atom.rel) {
            if n != fixed {
                return Err(self.error(
                    ErrorKind::Arity,
                    format!("'{name}' takes {} but has {} here", arguments(fixed), n),
                    atom.span,
                ));
            }
            return Ok(());
        }
        match seen.get(&atom.rel) {
            Some(&(first, at)) if first != n => Err(self.error(
                ErrorKind::Arity,
                format!(
                    "relation '{name}' has {} here but {} at line {}, column {}",
                    arguments(n),
                    first,
                    at.line,
                    at.col
                ),
                atom.span,
            )),
            Some(_) => Ok(()),
            None => {
                seen.insert(atom.rel, (n, atom.span));
                Ok(())
            }
        }
    }

    /// The restrictions that one rule shows by itself: `true` and `does` are never defined,
    /// `role` only by ground facts, and `init` and `next` never appear in a body (they are
    /// outputs of the game description, read only by the game master).
    fn local_restrictions(&self, rule: &Rule) -> Result<(), Problem> {
        let k = &self.desc.keywords;
        let head = &rule.head;
        if head.rel == k.true_ || head.rel == k.does {
            let name = self.name(head.rel);
            let what = if rule.body.is_empty() {
                "a fact"
            } else {
                "the head of a rule"
            };
            return Err(self.error(
                ErrorKind::Restriction,
                format!(
                    "'{name}' cannot be {what}: it is given by the game state and only appears in bodies"
                ),
                head.span,
            ));
        }
        if head.rel == k.role {
            if !rule.body.is_empty() {
                return Err(self.error(
                    ErrorKind::Restriction,
                    "'role' can only be given by facts, not by a rule with a body".to_string(),
                    rule.span,
                ));
            }
            if let Some(v) = first_var(head) {
                return Err(self.error(
                    ErrorKind::Restriction,
                    format!(
                        "a 'role' fact must be ground, but it has the variable {}",
                        self.name(v)
                    ),
                    head.span,
                ));
            }
        }
        for lit in &rule.body {
            self.no_init_or_next(lit)?;
        }
        Ok(())
    }

    fn no_init_or_next(&self, lit: &Literal) -> Result<(), Problem> {
        let k = &self.desc.keywords;
        match lit {
            Literal::Atom(a) if a.rel == k.init || a.rel == k.next => Err(self.error(
                ErrorKind::Restriction,
                format!(
                    "'{}' may only be the head of a rule, not part of a body",
                    self.name(a.rel)
                ),
                a.span,
            )),
            Literal::Atom(_) | Literal::Distinct(..) => Ok(()),
            Literal::Not(l, _) => self.no_init_or_next(l),
            Literal::Or(ls, _) | Literal::And(ls, _) => ls.iter().try_for_each(|l| self.no_init_or_next(l)),
        }
    }

    /// Distributes the body's `or`s into plain conjunctions.
    fn expand_body(&self, rule: &'a Rule) -> Result<Vec<Conj<'a>>, Problem> {
        expand_all(&rule.body).map_err(|()| {
            self.error(
                ErrorKind::Limit,
                format!(
                    "the 'or's of this rule expand to more than {MAX_EXPANSIONS} alternative bodies \
                     (the head is {})",
                    self.desc.atom_text(&rule.head)
                ),
                rule.span,
            )
        })
    }

    /// Every variable of the head, of a negated literal and of a `distinct` occurs in a positive
    /// atom of the same conjunction; otherwise the rule would stand for infinitely many facts or
    /// its negation could not be decided by looking at finitely many facts.
    fn safety(
        &self,
        rule: &Rule,
        conjs: &[Conj],
        inputs: &HashSet<Symbol>,
        call: Option<&str>,
    ) -> Result<(), Problem> {
        let several = conjs.len() > 1;
        for conj in conjs {
            let mut bound: HashSet<Symbol> = inputs.clone();
            for lit in conj {
                if let Literal::Atom(a) = lit {
                    a.for_each_var(&mut |v| {
                        bound.insert(v);
                    });
                }
            }
            let branch = if several {
                " (in one alternative of its 'or')"
            } else {
                ""
            };
            let call = call
                .map(|c| format!(", and the call {c} does not bind it"))
                .unwrap_or_default();
            if let Some(v) = first_unbound(&bound, |f| rule.head.for_each_var(&mut |v| f(v))) {
                let message = if rule.body.is_empty() {
                    format!(
                        "the fact {} has the variable {}{call}; a fact must be ground",
                        self.desc.atom_text(&rule.head),
                        self.name(v)
                    )
                } else {
                    format!(
                        "variable {} of the head {} does not occur in a positive literal of the \
                         body{branch}{call}",
                        self.name(v),
                        self.desc.atom_text(&rule.head)
                    )
                };
                return Err(self.error(ErrorKind::Unsafe, message, rule.head.span));
            }
            for lit in conj {
                let what = match lit {
                    Literal::Atom(_) => continue,
                    Literal::Distinct(..) => "'distinct'",
                    _ => "negated literal",
                };
                if let Some(v) = first_unbound(&bound, |f| lit.for_each_var(&mut |v| f(v))) {
                    return Err(self.error(
                        ErrorKind::Unsafe,
                        format!(
                            "variable {} of the {what} {} does not occur in a positive literal of the \
                             body{branch}{call}",
                            self.name(v),
                            self.desc.literal_text(lit)
                        ),
                        lit.span(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Decides about the rules that are unsafe on their own (`unsafe_rules[i]` holds the
    /// problem of rule `i`, if any), in rule order. Such a rule is accepted, with a warning, when
    /// nothing the game master asks ever reaches it, or when every call that reaches it binds
    /// enough of its head to make it safe. Otherwise its problem is an error.
    fn safety_under_calls(
        &self,
        expansions: &[Vec<Conj>],
        unsafe_rules: Vec<Option<Problem>>,
    ) -> Vec<Verdict> {
        let reached = match modes::call_patterns(self.desc, expansions) {
            Ok(reached) => reached,
            Err(TooManyPatterns) => {
                // Without the analysis the rules are judged on their own, which is stricter.
                return unsafe_rules
                    .into_iter()
                    .flatten()
                    .map(|mut problem| {
                        problem.message.push_str(&format!(
                            " (the game's rules are called in more than {MAX_CALL_PATTERNS} ways or \
                             too deeply to check whether the calls bind it)"
                        ));
                        Verdict {
                            problem,
                            accepted_for: None,
                        }
                    })
                    .collect();
            }
        };
        let mut verdicts = Vec::new();
        for (i, plain) in unsafe_rules.into_iter().enumerate() {
            let Some(mut plain) = plain else { continue };
            let rule = &self.desc.rules[i];
            let rel = self.name(rule.head.rel);
            if reached[i].is_empty() {
                plain.message.push_str(&format!(
                    "; accepted because nothing the game master asks ever uses this rule for '{rel}'"
                ));
                verdicts.push(Verdict {
                    problem: plain,
                    accepted_for: Some(rule.head.rel),
                });
                continue;
            }
            let failure = reached[i].iter().find_map(|pats| {
                let inputs = modes::head_bindings(&rule.head, pats).unwrap_or_default();
                let call = self.call_text(rule.head.rel, pats);
                self.safety(rule, &expansions[i], &inputs, Some(&call)).err()
            });
            verdicts.push(match failure {
                Some(problem) => Verdict {
                    problem,
                    accepted_for: None,
                },
                None => {
                    plain.message.push_str(&format!(
                        "; accepted because every call of '{rel}' reachable from the game master's \
                         questions binds it, so this rule must be evaluated top-down"
                    ));
                    Verdict {
                        problem: plain,
                        accepted_for: Some(rule.head.rel),
                    }
                }
            });
        }
        verdicts
    }

    /// A call pattern as text: bound arguments as `#`, free ones as `_`.
    fn call_text(&self, rel: Symbol, pats: &[Pat]) -> String {
        fn pat(cx: &Checker, p: &Pat, out: &mut String) {
            match p {
                Pat::Bound => out.push('#'),
                Pat::Free => out.push('_'),
                Pat::Const(c) => out.push_str(cx.name(*c)),
                Pat::Func(g, args) => {
                    out.push('(');
                    out.push_str(cx.name(*g));
                    for a in args {
                        out.push(' ');
                        pat(cx, a, out);
                    }
                    out.push(')');
                }
            }
        }
        if pats.is_empty() {
            return self.name(rel).to_string();
        }
        let mut s = format!("({}", self.name(rel));
        for p in pats {
            s.push(' ');
            pat(self, p, &mut s);
        }
        s.push(')');
        s
    }

    /// Warns, once per function symbol, when a function is applied to a different number of
    /// arguments than at its first use.
    fn function_arities(
        &self,
        rule: &Rule,
        seen: &mut HashMap<Symbol, (usize, Span)>,
        warned: &mut HashSet<Symbol>,
    ) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut terms: Vec<(&Term, Span)> = Vec::new();
        rule.head
            .args
            .iter()
            .for_each(|t| terms.push((t, rule.head.span)));
        for lit in &rule.body {
            literal_terms(lit, &mut terms);
        }
        for (t, span) in terms {
            self.term_arities(t, span, seen, warned, &mut out);
        }
        out
    }

    fn term_arities(
        &self,
        t: &Term,
        span: Span,
        seen: &mut HashMap<Symbol, (usize, Span)>,
        warned: &mut HashSet<Symbol>,
        out: &mut Vec<Problem>,
    ) {
        let Term::Func(g, args) = t else { return };
        match seen.get(g) {
            Some(&(n, at)) if n != args.len() && warned.insert(*g) => out.push(self.error(
                ErrorKind::Arity,
                format!(
                    "function '{}' has {} in this literal but {} at line {}, column {}; the two \
                     never match each other",
                    self.name(*g),
                    arguments(args.len()),
                    n,
                    at.line,
                    at.col
                ),
                span,
            )),
            Some(_) => {}
            None => {
                seen.insert(*g, (args.len(), span));
            }
        }
        for a in args {
            self.term_arities(a, span, seen, warned, out);
        }
    }

    /// What the keyword relations may depend on, through any chain of rules: `init`, `base`,
    /// `input` and `role` describe the game before it starts, so they may not depend on the
    /// state, the moves or the other keywords that do; `legal`, `goal` and `terminal` are
    /// functions of the current state alone, so they may not depend on `does`.
    fn dependency_restrictions(
        &self,
        graph: &DepGraph,
        paths: &[(Symbol, Vec<Option<Symbol>>)],
        i: usize,
    ) -> Result<(), Problem> {
        let k = &self.desc.keywords;
        let head = self.desc.rules[i].head.rel;
        let state_dependent = [k.true_, k.does, k.next, k.legal, k.goal, k.terminal];
        let forbidden: &[Symbol] = if [k.init, k.base, k.input, k.role].contains(&head) {
            &state_dependent
        } else if [k.legal, k.goal, k.terminal].contains(&head) {
            std::slice::from_ref(&k.does)
        } else {
            return Ok(());
        };
        for edge in graph.rule_edges(self.desc, i) {
            // Of the forbidden relations this literal leads to, name the nearest: a chain that
            // stops at the first forbidden relation on the way says the most.
            let mut best: Option<(Symbol, Vec<Symbol>)> = None;
            for &target in forbidden {
                let Some((_, next)) = paths.iter().find(|(t, _)| *t == target) else {
                    continue;
                };
                if edge.to != target && next[edge.to.0 as usize].is_none() {
                    continue;
                }
                let mut chain = vec![head, edge.to];
                let mut cur = edge.to;
                while cur != target {
                    let Some(n) = next[cur.0 as usize] else { break };
                    chain.push(n);
                    cur = n;
                }
                if best.as_ref().is_none_or(|(_, b)| chain.len() < b.len()) {
                    best = Some((target, chain));
                }
            }
            if let Some((target, chain)) = best {
                let chain: Vec<&str> = chain.iter().map(|&s| self.name(s)).collect();
                return Err(self.error(
                    ErrorKind::Restriction,
                    format!(
                        "'{}' must not depend on '{}', but it does: {}",
                        self.name(head),
                        self.name(target),
                        chain.join(" -> ")
                    ),
                    edge.span,
                ));
            }
        }
        Ok(())
    }

    /// No relation depends on its own negation: a negative edge never stays inside a strongly
    /// connected component of the dependency graph.
    fn stratification(&self, graph: &DepGraph, i: usize) -> Result<(), Problem> {
        let head = self.desc.rules[i].head.rel;
        for edge in graph.rule_edges(self.desc, i) {
            if !edge.negative {
                continue;
            }
            if !graph.same_component(head, edge.to) {
                continue;
            }
            let back = graph.path_within_component(edge.to, head).unwrap_or_default();
            let mut cycle = vec![self.name(head).to_string(), format!("not {}", self.name(edge.to))];
            cycle.extend(back.iter().skip(1).map(|&s| self.name(s).to_string()));
            return Err(self.error(
                ErrorKind::Unstratified,
                format!(
                    "'{}' depends on its own negation through the cycle {}",
                    self.name(head),
                    cycle.join(" -> ")
                ),
                edge.span,
            ));
        }
        Ok(())
    }

    /// The recursion restriction: in a rule whose head relation is in a cycle with a positive
    /// body atom, every argument of that atom is ground, or one of the head's arguments, or a
    /// variable that occurs in a positive atom of the body outside the cycle. Together with
    /// safety this keeps the set of derivable facts finite. A variable buried in a head argument
    /// does not count: `(<= (nat (s ?x)) (nat ?x))` breaks the restriction, and it is exactly
    /// the kind of rule that derives facts without end.
    fn recursion(&self, graph: &DepGraph, rule: &Rule, conjs: &[Conj]) -> Result<(), Problem> {
        let head = &rule.head;
        for conj in conjs {
            let mut outside: HashSet<Symbol> = HashSet::new();
            for lit in conj {
                if let Literal::Atom(a) = lit {
                    if !graph.same_component(a.rel, head.rel) {
                        a.for_each_var(&mut |v| {
                            outside.insert(v);
                        });
                    }
                }
            }
            for lit in conj {
                let Literal::Atom(a) = lit else { continue };
                if !graph.same_component(a.rel, head.rel) {
                    continue;
                }
                for arg in &a.args {
                    if arg.is_ground() || head.args.contains(arg) {
                        continue;
                    }
                    if matches!(arg, Term::Var(v) if outside.contains(v)) {
                        continue;
                    }
                    return Err(self.error(
                        ErrorKind::Recursion,
                        format!(
                            "{} is recursive with the head {}, and its argument {} is neither ground, \
                                 nor an argument of the head, nor bound by a positive literal outside \
                                 the recursion",
                            self.desc.atom_text(a),
                            self.desc.atom_text(head),
                            self.desc.term_text(arg)
                        ),
                        a.span,
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The terms of a literal, each with the span of the atom or `distinct` it sits in.
fn literal_terms<'t>(lit: &'t Literal, out: &mut Vec<(&'t Term, Span)>) {
    match lit {
        Literal::Atom(a) => a.args.iter().for_each(|t| out.push((t, a.span))),
        Literal::Not(l, _) => literal_terms(l, out),
        Literal::Distinct(a, b, span) => {
            out.push((a, *span));
            out.push((b, *span));
        }
        Literal::Or(ls, _) | Literal::And(ls, _) => ls.iter().for_each(|l| literal_terms(l, out)),
    }
}

fn arguments(n: usize) -> String {
    if n == 1 {
        "1 argument".to_string()
    } else {
        format!("{n} arguments")
    }
}

fn first_var(atom: &Atom) -> Option<Symbol> {
    let mut found = None;
    atom.for_each_var(&mut |v| {
        found.get_or_insert(v);
    });
    found
}

/// The first variable, in the order `walk` visits them, that is not in `bound`.
fn first_unbound(bound: &HashSet<Symbol>, walk: impl FnOnce(&mut dyn FnMut(Symbol))) -> Option<Symbol> {
    let mut found = None;
    walk(&mut |v| {
        if found.is_none() && !bound.contains(&v) {
            found = Some(v);
        }
    });
    found
}

/// The conjunctions a sequence of literals stands for, or `Err` past [`MAX_EXPANSIONS`].
fn expand_all(lits: &[Literal]) -> Result<Vec<Conj<'_>>, ()> {
    let mut acc: Vec<Conj> = vec![Vec::new()];
    for lit in lits {
        let alts = expand_one(lit)?;
        if alts.len() == 1 {
            for conj in &mut acc {
                conj.extend_from_slice(&alts[0]);
            }
            continue;
        }
        if acc.len().saturating_mul(alts.len()) > MAX_EXPANSIONS {
            return Err(());
        }
        let mut product = Vec::with_capacity(acc.len() * alts.len());
        for conj in &acc {
            for alt in &alts {
                let mut c = conj.clone();
                c.extend_from_slice(alt);
                product.push(c);
            }
        }
        acc = product;
    }
    Ok(acc)
}

fn expand_one(lit: &Literal) -> Result<Vec<Conj<'_>>, ()> {
    match lit {
        Literal::Atom(_) | Literal::Not(..) | Literal::Distinct(..) => Ok(vec![vec![lit]]),
        Literal::And(ls, _) => expand_all(ls),
        Literal::Or(ls, _) => {
            let mut alts = Vec::new();
            for l in ls {
                alts.extend(expand_one(l)?);
                if alts.len() > MAX_EXPANSIONS {
                    return Err(());
                }
            }
            Ok(alts)
        }
    }
}
