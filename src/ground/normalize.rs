//! Rules in normal form: every body distributed into plain conjunctions of positive atoms,
//! negated atoms, `distinct` and its negation (equality), with variables numbered per rule and
//! ground sub-terms interned.

use super::terms::{TermId, TermStore};
use super::GroundError;
use crate::gdl::{Atom, Description, Literal, Rule, Span, Symbol, Term, MAX_EXPANSIONS};
use rustc_hash::{FxHashMap, FxHashSet};

/// A relation: a symbol at one arity. A symbol used at two arities would be two relations (the
/// front end rejects that, but nothing here depends on it).
pub(crate) type RelId = u32;

/// A term pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pat {
    /// A variable, numbered within its rule.
    Var(u32),
    /// A ground term.
    Ground(TermId),
    /// A function term with at least one variable inside.
    Func(Symbol, Box<[Pat]>),
}

impl Pat {
    /// Calls `f` on every variable, with repeats.
    pub fn for_each_var(&self, f: &mut impl FnMut(u32)) {
        match self {
            Pat::Var(v) => f(*v),
            Pat::Ground(_) => {}
            Pat::Func(_, args) => args.iter().for_each(|a| a.for_each_var(f)),
        }
    }
}

/// An atom pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AtomPat {
    pub rel: RelId,
    pub sym: Symbol,
    pub args: Box<[Pat]>,
}

impl AtomPat {
    pub fn for_each_var(&self, f: &mut impl FnMut(u32)) {
        self.args.iter().for_each(|a| a.for_each_var(f));
    }
}

/// A literal of a conjunction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    Pos(AtomPat),
    Neg(AtomPat),
    Distinct(Pat, Pat),
    /// `(not (distinct a b))`.
    Equal(Pat, Pat),
}

impl Item {
    pub fn for_each_var(&self, f: &mut impl FnMut(u32)) {
        match self {
            Item::Pos(a) | Item::Neg(a) => a.for_each_var(f),
            Item::Distinct(a, b) | Item::Equal(a, b) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
        }
    }
}

/// One conjunction of one rule: `head ⇐ body`.
#[derive(Clone, Debug)]
pub(crate) struct Conj {
    pub head: AtomPat,
    pub body: Vec<Item>,
    /// Variables are numbered `0 .. nvars`.
    pub nvars: usize,
    /// The rule of the description it comes from; `None` for the grounder's own rules (`true`
    /// from `init` and `next`, `does` from `legal`).
    pub rule: Option<usize>,
    /// The name of each variable, for messages.
    pub var_names: Vec<Symbol>,
    /// Whether it is a rule of the demand-driven transformation (`magic`), which defines the
    /// calls of a relation rather than the relation.
    pub magic: bool,
}

impl Conj {
    /// Numbers the variables densely in order of first occurrence: the head's first when
    /// `head_first`, else the body's first. Variables that no longer occur lose their numbers.
    pub fn renumber(&mut self, head_first: bool) {
        let mut map: Vec<u32> = vec![u32::MAX; self.nvars];
        let mut names = Vec::new();
        let mut visit = |x: u32| {
            if map[x as usize] == u32::MAX {
                map[x as usize] = names.len() as u32;
                names.push(self.var_names[x as usize]);
            }
        };
        if head_first {
            self.head.for_each_var(&mut visit);
        }
        self.body.iter().for_each(|item| item.for_each_var(&mut visit));
        self.head.for_each_var(&mut visit);
        rename_atom(&mut self.head, &map);
        for item in &mut self.body {
            match item {
                Item::Pos(a) | Item::Neg(a) => rename_atom(a, &map),
                Item::Distinct(p, q) | Item::Equal(p, q) => {
                    rename_pat(p, &map);
                    rename_pat(q, &map);
                }
            }
        }
        self.nvars = names.len();
        self.var_names = names;
    }
}

fn rename_atom(a: &mut AtomPat, map: &[u32]) {
    let mut args = a.args.to_vec();
    args.iter_mut().for_each(|p| rename_pat(p, map));
    a.args = args.into();
}

fn rename_pat(p: &mut Pat, map: &[u32]) {
    match p {
        Pat::Var(x) => *x = map[*x as usize],
        Pat::Ground(_) => {}
        Pat::Func(_, args) => args.iter_mut().for_each(|q| rename_pat(q, map)),
    }
}

/// The relations of a description, numbered densely.
#[derive(Default)]
pub(crate) struct RelTable {
    map: FxHashMap<(Symbol, usize), RelId>,
    keys: Vec<(Symbol, usize)>,
}

impl RelTable {
    pub fn id(&mut self, sym: Symbol, arity: usize) -> RelId {
        let next = self.keys.len() as RelId;
        *self.map.entry((sym, arity)).or_insert_with(|| {
            self.keys.push((sym, arity));
            next
        })
    }

    /// The relation of `sym` at `arity`, if there is one.
    pub fn get(&self, sym: Symbol, arity: usize) -> Option<RelId> {
        self.map.get(&(sym, arity)).copied()
    }

    pub fn key(&self, r: RelId) -> (Symbol, usize) {
        self.keys[r as usize]
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Normalizes every rule of `desc`. Conjunctions that a `distinct` between ground terms makes
/// false are left out, and `distinct`s between ground terms that hold are dropped.
///
/// A body literal `(or a b …)` whose disjuncts are atoms over the same variables becomes one
/// literal of a relation of its own over those variables, with a rule per disjunct, rather
/// than a copy of the rule per disjunct: the rest of the body is then joined and instantiated
/// once (chess's check test, "a bishop, rook or queen other than the captured piece attacks
/// the king", was three joins of 313,096 calls each). The new relations take the symbols from
/// `desc.symbols.len()` on; their number is returned beside the rules. An `or` of atoms that
/// depend on the state but differ in their variables becomes such a relation too when atoms of
/// the rest of the body can bind what each disjunct lacks (`or_with_binders`). Other `or`s
/// are distributed into conjunctions.
pub(crate) fn normalize(
    desc: &Description,
    store: &mut TermStore,
    rels: &mut RelTable,
) -> Result<(Vec<Conj>, u32), GroundError> {
    let mut out = Vec::new();
    let mut ors = 0u32;
    let state = state_symbols(desc);
    for (i, rule) in desc.rules.iter().enumerate() {
        let mut cx = RuleCx {
            store,
            rels,
            vars: Vec::new(),
        };
        let head = cx.atom(&rule.head);
        let mut bodies: Vec<Vec<Item>> = vec![Vec::new()];
        for (li, l) in rule.body.iter().enumerate() {
            let as_relation = or_of_atoms(l)
                .map(|(vars, atoms)| (vars, atoms.into_iter().map(|a| (a, Vec::new())).collect()))
                .or_else(|| or_with_binders(rule, li, &state));
            if let Some((vars, disjuncts)) = as_relation {
                let sym = Symbol(desc.symbols.len() as u32 + ors);
                ors += 1;
                let rel = cx.rels.id(sym, vars.len());
                for (a, binders) in disjuncts {
                    let mut dcx = RuleCx {
                        store: cx.store,
                        rels: cx.rels,
                        vars: Vec::new(),
                    };
                    let args = vars.iter().map(|&v| dcx.pat(&Term::Var(v))).collect();
                    let body = std::iter::once(a)
                        .chain(binders)
                        .map(|b| Item::Pos(dcx.atom(b)))
                        .collect();
                    out.push(Conj {
                        head: AtomPat { rel, sym, args },
                        body,
                        nvars: dcx.vars.len(),
                        rule: Some(i),
                        var_names: dcx.vars.clone(),
                        magic: false,
                    });
                }
                let args = vars.iter().map(|&v| cx.pat(&Term::Var(v))).collect();
                let item = Item::Pos(AtomPat { rel, sym, args });
                bodies = product(bodies, vec![vec![item]]).ok_or_else(|| too_large(desc, i, rule.span))?;
                continue;
            }
            let parts = cx.dnf(l, false).ok_or_else(|| too_large(desc, i, rule.span))?;
            bodies = product(bodies, parts).ok_or_else(|| too_large(desc, i, rule.span))?;
        }
        let nvars = cx.vars.len();
        for body in bodies {
            if let Some(body) = fold_ground_tests(body) {
                out.push(Conj {
                    head: head.clone(),
                    body,
                    nvars,
                    rule: Some(i),
                    var_names: cx.vars.clone(),
                    magic: false,
                });
            }
        }
    }
    Ok((out, ors))
}

/// When `l` is an `or` of at least two atoms that all have the same variables and no other:
/// those variables, in order of first occurrence, and the atoms.
fn or_of_atoms(l: &Literal) -> Option<(Vec<Symbol>, Vec<&Atom>)> {
    let Literal::Or(ls, _) = l else { return None };
    if ls.len() < 2 {
        return None;
    }
    let atoms: Vec<&Atom> = ls
        .iter()
        .map(|d| match d {
            Literal::Atom(a) => Some(a),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let vars_of = |a: &Atom| {
        let mut vars: Vec<Symbol> = Vec::new();
        a.for_each_var(&mut |v| {
            if !vars.contains(&v) {
                vars.push(v);
            }
        });
        vars
    };
    let first = vars_of(atoms[0]);
    let mut sorted = first.clone();
    sorted.sort_unstable();
    for a in &atoms[1..] {
        let mut v = vars_of(a);
        v.sort_unstable();
        if v != sorted {
            return None;
        }
    }
    (!first.is_empty()).then_some((first, atoms))
}

/// A disjunct of an `or` made a relation, with the atoms of the rule's body that bind the
/// variables of the relation that it lacks.
type Bound<'d> = (&'d Atom, Vec<&'d Atom>);

/// The relations that depend on the state or the moves: `true`, `does` and every relation
/// with a rule whose body reads one of them, under `not` or `or` too.
fn state_symbols(desc: &Description) -> FxHashSet<Symbol> {
    fn reads(l: &Literal, state: &FxHashSet<Symbol>) -> bool {
        match l {
            Literal::Atom(a) => state.contains(&a.rel),
            Literal::Not(l, _) => reads(l, state),
            Literal::Distinct(..) => false,
            Literal::Or(ls, _) | Literal::And(ls, _) => ls.iter().any(|l| reads(l, state)),
        }
    }
    let k = desc.keywords;
    let mut state: FxHashSet<Symbol> = [k.true_, k.does].into_iter().collect();
    loop {
        let before = state.len();
        for r in &desc.rules {
            if !state.contains(&r.head.rel) && r.body.iter().any(|l| reads(l, &state)) {
                state.insert(r.head.rel);
            }
        }
        if state.len() == before {
            return state;
        }
    }
}

/// The variables of `l`, in order of first occurrence, without repeats.
fn vars_of(l: &Literal) -> Vec<Symbol> {
    let mut vars: Vec<Symbol> = Vec::new();
    l.for_each_var(&mut |v| {
        if !vars.contains(&v) {
            vars.push(v);
        }
    });
    vars
}

/// When body literal `li` of `rule` is an `or` of at least two atoms whose variables differ
/// (`or_of_atoms` takes those over the same variables): the variables of the `or` that the
/// rest of the rule also has, in order of first occurrence in the `or`, and each disjunct with
/// positive atoms of the rest of the body that bind the variables it lacks. Every variable of
/// a binder must be one of those of the `or`'s relation, so the binders add no variable of
/// their own to a disjunct's rule. As the rule's body holds the binders anyway, the rule reads
/// the same with a disjunct alone or with its binders beside it; `None` when a disjunct cannot
/// be bound that way, and the `or` is distributed.
///
/// dresden_chess's moves that block a check take "an opponent's piece or an empty square" at
/// the target as `(or (occupied_by_opponent ?x ?y ?player) (true (cell ?x ?y b)))`, and the
/// second disjunct lacks `?player`, which `(true (control ?player))` binds: distributed, the
/// rule was joined and instantiated twice, 264,968 ground rules in 1.4 s of CPU.
///
/// Only an `or` whose every disjunct depends on the state is taken: a static disjunct becomes
/// a constant of its copy of the rule, while as a relation's rule it keeps its binders, which
/// then stand beside the relation in the net (merrills's `terminal` with its two counts below
/// 3 took 342 gates more).
fn or_with_binders<'d>(
    rule: &'d Rule,
    li: usize,
    state: &FxHashSet<Symbol>,
) -> Option<(Vec<Symbol>, Vec<Bound<'d>>)> {
    let Literal::Or(ls, _) = &rule.body[li] else {
        return None;
    };
    if ls.len() < 2 {
        return None;
    }
    let atoms: Vec<&Atom> = ls
        .iter()
        .map(|d| match d {
            Literal::Atom(a) if state.contains(&a.rel) => Some(a),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut outside: Vec<Symbol> = Vec::new();
    rule.head.for_each_var(&mut |v| outside.push(v));
    for (j, l) in rule.body.iter().enumerate() {
        if j != li {
            l.for_each_var(&mut |v| outside.push(v));
        }
    }
    let vars: Vec<Symbol> = vars_of(&rule.body[li])
        .into_iter()
        .filter(|v| outside.contains(v))
        .collect();
    if vars.is_empty() {
        return None;
    }
    // The positive atoms of the rest of the body whose variables are all the `or`'s.
    let binders: Vec<(&Atom, Vec<Symbol>)> = rule
        .body
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != li)
        .filter_map(|(_, l)| match l {
            Literal::Atom(a) => Some((a, vars_of(l))),
            _ => None,
        })
        .filter(|(_, vs)| !vs.is_empty() && vs.iter().all(|v| vars.contains(v)))
        .collect();
    let mut disjuncts = Vec::with_capacity(atoms.len());
    for (a, d) in atoms.iter().zip(ls) {
        let has = vars_of(d);
        let mut missing: Vec<Symbol> = vars.iter().copied().filter(|v| !has.contains(v)).collect();
        let mut chosen: Vec<&Atom> = Vec::new();
        while !missing.is_empty() {
            // The binder that binds the most missing variables, the first of equals.
            let (b, vs) = binders
                .iter()
                .map(|(b, vs)| (b, vs, vs.iter().filter(|v| missing.contains(v)).count()))
                .filter(|&(_, _, n)| n > 0)
                .fold(
                    None,
                    |best: Option<(&&Atom, &Vec<Symbol>, usize)>, c| match best {
                        Some(b) if b.2 >= c.2 => Some(b),
                        _ => Some(c),
                    },
                )
                .map(|(b, vs, _)| (b, vs))?;
            chosen.push(*b);
            missing.retain(|v| !vs.contains(v));
        }
        disjuncts.push((*a, chosen));
    }
    Some((vars, disjuncts))
}

fn too_large(desc: &Description, i: usize, span: Span) -> GroundError {
    GroundError::Unsupported {
        line: span.line,
        col: span.col,
        message: format!(
            "the body of {} expands into more than {MAX_EXPANSIONS} conjunctions",
            desc.rule_text(&desc.rules[i])
        ),
    }
}

/// Every conjunction of `acc` extended by every one of `parts`, or `None` past the limit.
fn product(acc: Vec<Vec<Item>>, parts: Vec<Vec<Item>>) -> Option<Vec<Vec<Item>>> {
    if acc.len().saturating_mul(parts.len()) > MAX_EXPANSIONS {
        return None;
    }
    if parts.len() == 1 {
        let part = parts.into_iter().next().expect("one part");
        return Some(
            acc.into_iter()
                .map(|mut a| {
                    a.extend(part.iter().cloned());
                    a
                })
                .collect(),
        );
    }
    let mut out = Vec::with_capacity(acc.len() * parts.len());
    for a in &acc {
        for p in &parts {
            let mut c = a.clone();
            c.extend(p.iter().cloned());
            out.push(c);
        }
    }
    Some(out)
}

/// Decides the `distinct`s and equalities between ground terms: `None` if one is false,
/// otherwise the body without them. Repeated literals are dropped too.
fn fold_ground_tests(body: Vec<Item>) -> Option<Vec<Item>> {
    let mut out: Vec<Item> = Vec::with_capacity(body.len());
    for item in body {
        match &item {
            Item::Distinct(Pat::Ground(a), Pat::Ground(b)) => {
                if a == b {
                    return None;
                }
            }
            Item::Equal(Pat::Ground(a), Pat::Ground(b)) => {
                if a != b {
                    return None;
                }
            }
            _ => {
                if !out.contains(&item) {
                    out.push(item);
                }
            }
        }
    }
    Some(out)
}

struct RuleCx<'a> {
    store: &'a mut TermStore,
    rels: &'a mut RelTable,
    vars: Vec<Symbol>,
}

impl RuleCx<'_> {
    fn pat(&mut self, t: &Term) -> Pat {
        match t {
            Term::Var(v) => {
                let i = match self.vars.iter().position(|x| x == v) {
                    Some(i) => i,
                    None => {
                        self.vars.push(*v);
                        self.vars.len() - 1
                    }
                };
                Pat::Var(i as u32)
            }
            Term::Const(c) => Pat::Ground(self.store.intern(*c, &[])),
            Term::Func(f, args) => {
                let pats: Vec<Pat> = args.iter().map(|a| self.pat(a)).collect();
                let ground: Option<Vec<TermId>> = pats
                    .iter()
                    .map(|p| match p {
                        Pat::Ground(t) => Some(*t),
                        _ => None,
                    })
                    .collect();
                match ground {
                    Some(ids) => Pat::Ground(self.store.intern(*f, &ids)),
                    None => Pat::Func(*f, pats.into()),
                }
            }
        }
    }

    fn atom(&mut self, a: &Atom) -> AtomPat {
        AtomPat {
            rel: self.rels.id(a.rel, a.args.len()),
            sym: a.rel,
            args: a.args.iter().map(|t| self.pat(t)).collect(),
        }
    }

    /// The disjunctive normal form of `l` (of its negation when `negate`), or `None` when it
    /// has more than [`MAX_EXPANSIONS`] conjunctions.
    fn dnf(&mut self, l: &Literal, negate: bool) -> Option<Vec<Vec<Item>>> {
        Some(match (l, negate) {
            (Literal::Atom(a), false) => vec![vec![Item::Pos(self.atom(a))]],
            (Literal::Atom(a), true) => vec![vec![Item::Neg(self.atom(a))]],
            (Literal::Distinct(a, b, _), n) => {
                let (a, b) = (self.pat(a), self.pat(b));
                vec![vec![if n {
                    Item::Equal(a, b)
                } else {
                    Item::Distinct(a, b)
                }]]
            }
            (Literal::Not(inner, _), n) => self.dnf(inner, !n)?,
            // De Morgan: under negation an `or` is a conjunction of negations and an `and` a
            // disjunction of them.
            (Literal::Or(ls, _), false) | (Literal::And(ls, _), true) => {
                let mut out = Vec::new();
                for l in ls {
                    out.extend(self.dnf(l, negate)?);
                    if out.len() > MAX_EXPANSIONS {
                        return None;
                    }
                }
                out
            }
            (Literal::And(ls, _), false) | (Literal::Or(ls, _), true) => {
                let mut acc = vec![Vec::new()];
                for l in ls {
                    let parts = self.dnf(l, negate)?;
                    acc = product(acc, parts)?;
                }
                acc
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gdl;

    fn normal(src: &str) -> (Vec<Conj>, TermStore, RelTable) {
        let desc = gdl::parse_syntax(src).expect("the test text parses");
        let mut store = TermStore::default();
        let mut rels = RelTable::default();
        let (conjs, _) = normalize(&desc, &mut store, &mut rels).expect("normalizes");
        (conjs, store, rels)
    }

    fn shape(c: &Conj) -> Vec<&'static str> {
        c.body
            .iter()
            .map(|i| match i {
                Item::Pos(_) => "pos",
                Item::Neg(_) => "neg",
                Item::Distinct(..) => "distinct",
                Item::Equal(..) => "equal",
            })
            .collect()
    }

    #[test]
    fn an_or_of_atoms_over_the_same_variables_becomes_a_relation() {
        let (conjs, _, rels) = normal("(<= (p ?x ?y) (q ?x) (or (r ?x ?y) (s ?y ?x) (t ?x (f ?y))))");
        // The rule reads one literal of the new relation, which has a rule per disjunct.
        assert_eq!(conjs.len(), 4);
        let or_rel = conjs[3].body[1].clone();
        let Item::Pos(a) = &or_rel else {
            panic!("a positive literal")
        };
        assert_eq!(rels.key(a.rel).1, 2);
        for c in &conjs[..3] {
            assert_eq!(c.head.rel, a.rel);
            assert_eq!(shape(c), ["pos"]);
        }
    }

    #[test]
    fn an_or_whose_disjuncts_lack_variables_takes_binders_from_the_body() {
        // `(r ?x)` lacks ?y and `(s ?y)` lacks ?x: both take `(q ?x ?y)` from the body, and
        // ?z, which only the `or` has, is not an argument of the new relation.
        let (conjs, _, rels) = normal(
            "(<= (p ?x ?y) (q ?x ?y) (u ?x) (or (true (r ?x)) (true (s ?y ?z)) (t ?x ?y)))
             (<= (t ?x ?y) (true (w ?x ?y)))",
        );
        assert_eq!(conjs.len(), 5);
        let Item::Pos(a) = &conjs[3].body[2] else {
            panic!("a positive literal")
        };
        assert_eq!(rels.key(a.rel).1, 2);
        for (c, shape_of) in conjs[..3]
            .iter()
            .zip([vec!["pos", "pos"], vec!["pos", "pos"], vec!["pos"]])
        {
            assert_eq!(c.head.rel, a.rel);
            assert_eq!(shape(c), shape_of);
        }
        // The binder of `(r ?x)` is `(q ?x ?y)`, not `(u ?x)`, which binds no missing variable.
        let Item::Pos(binder) = &conjs[0].body[1] else {
            panic!("a positive literal")
        };
        let Item::Pos(q) = &conjs[3].body[0] else {
            panic!("a positive literal")
        };
        assert_eq!(binder.rel, q.rel);
        // A missing variable bound only together with another variable is distributed.
        let (conjs, _, _) = normal("(<= (p ?x ?y) (q ?x ?z) (t ?z ?y) (or (true (r ?x)) (true (s ?y))))");
        assert_eq!(conjs.len(), 2);
        assert!(conjs.iter().all(|c| c.head.rel == conjs[0].head.rel));
        // So is an `or` of which a disjunct does not depend on the state.
        let (conjs, _, _) = normal("(<= (p ?x ?y) (q ?x ?y) (or (true (r ?x)) (s ?y)))");
        assert_eq!(conjs.len(), 2);
        assert!(conjs.iter().all(|c| c.head.rel == conjs[0].head.rel));
    }

    #[test]
    fn or_distributes_into_conjunctions() {
        let (conjs, _, _) = normal("(<= (p ?x) (q ?x) (or (r ?x) (and (s ?x) (t ?x))))");
        assert_eq!(conjs.len(), 2);
        assert_eq!(shape(&conjs[0]), ["pos", "pos"]);
        assert_eq!(shape(&conjs[1]), ["pos", "pos", "pos"]);
    }

    #[test]
    fn negation_is_pushed_inward() {
        // not (a or b) = (not a) and (not b); not (a and b) = (not a) or (not b).
        let (conjs, _, _) = normal("(<= (p ?x) (q ?x) (not (or (r ?x) (s ?x))))");
        assert_eq!(conjs.len(), 1);
        assert_eq!(shape(&conjs[0]), ["pos", "neg", "neg"]);
        let (conjs, _, _) = normal("(<= (p ?x) (q ?x) (not (and (r ?x) (not (s ?x)))))");
        assert_eq!(conjs.len(), 2);
        assert_eq!(shape(&conjs[0]), ["pos", "neg"]);
        assert_eq!(shape(&conjs[1]), ["pos", "pos"]);
    }

    #[test]
    fn not_distinct_is_equality() {
        let (conjs, _, _) = normal("(<= (p ?x ?y) (q ?x) (q ?y) (not (distinct ?x ?y)))");
        assert_eq!(shape(&conjs[0]), ["pos", "pos", "equal"]);
        let (conjs, _, _) = normal("(<= (p ?x ?y) (q ?x) (q ?y) (not (not (distinct ?x ?y))))");
        assert_eq!(shape(&conjs[0]), ["pos", "pos", "distinct"]);
    }

    #[test]
    fn ground_distincts_are_decided() {
        let (conjs, _, _) = normal("(<= (p ?x) (q ?x) (distinct a b)) (<= (p ?x) (q ?x) (distinct a a))");
        assert_eq!(conjs.len(), 1, "the rule with (distinct a a) can never fire");
        assert_eq!(shape(&conjs[0]), ["pos"]);
        let (conjs, _, _) = normal("(<= (p ?x) (q ?x) (or (distinct (f a) (f a)) (r ?x)))");
        assert_eq!(conjs.len(), 1);
    }

    #[test]
    fn ground_subterms_are_interned_once() {
        let (conjs, store, _) = normal("(<= (p (f a) ?x) (q (f a) ?x))");
        let Item::Pos(q) = &conjs[0].body[0] else {
            panic!("a positive literal")
        };
        assert_eq!(conjs[0].head.args[0], q.args[0]);
        assert!(matches!(q.args[0], Pat::Ground(_)));
        assert!(store.len() >= 2);
        assert_eq!(conjs[0].nvars, 1);
    }

    #[test]
    fn repeated_literals_are_dropped() {
        let (conjs, _, _) = normal("(<= (p ?x) (q ?x) (q ?x) (not (r ?x)) (not (r ?x)))");
        assert_eq!(shape(&conjs[0]), ["pos", "neg"]);
    }
}
