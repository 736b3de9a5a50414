//! The rules of a description, compiled for bottom-up evaluation: bodies in disjunctive normal
//! form, relations numbered and sorted into layers and strata, and a join plan for every rule.

use super::terms::{Interner, TermId};
use super::ReferenceError;
use crate::gdl::{Atom, Description, Literal, Symbol, Term};
use rustc_hash::FxHashMap;

/// A relation: a symbol at one arity (a symbol used at two arities is two relations).
pub(crate) type RelId = u32;

/// How many conjunctions one rule body may expand into when `or` is distributed.
pub(crate) const MAX_DISJUNCTS: usize = 4096;

/// A term pattern of a compiled rule.
#[derive(Clone, Debug)]
pub(crate) enum Pat {
    Var(u32),
    /// A ground term, interned when the rule was compiled.
    Ground(TermId),
    Func(Symbol, Box<[Pat]>),
}

impl Pat {
    fn vars(&self, out: &mut Vec<u32>) {
        match self {
            Pat::Var(v) => out.push(*v),
            Pat::Ground(_) => {}
            Pat::Func(_, args) => args.iter().for_each(|a| a.vars(out)),
        }
    }
}

/// An atom of a compiled rule.
#[derive(Clone, Debug)]
pub(crate) struct Lit {
    pub rel: RelId,
    pub args: Box<[Pat]>,
}

impl Lit {
    fn vars(&self) -> Vec<u32> {
        let mut out = Vec::new();
        self.args.iter().for_each(|a| a.vars(&mut out));
        out
    }
}

/// A literal of a body in normal form.
#[derive(Clone, Debug)]
enum Item {
    Pos(Lit),
    Neg(Lit),
    Distinct(Pat, Pat),
    Equal(Pat, Pat),
}

impl Item {
    fn vars(&self) -> Vec<u32> {
        match self {
            Item::Pos(l) | Item::Neg(l) => l.vars(),
            Item::Distinct(a, b) | Item::Equal(a, b) => {
                let mut out = Vec::new();
                a.vars(&mut out);
                b.vars(&mut out);
                out
            }
        }
    }
}

/// An index over one relation: tuples keyed by the term at `arg` (or at its argument `sub`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Path {
    pub arg: u8,
    pub sub: Option<u8>,
}

/// A positive body literal with every index key it could use.
#[derive(Clone, Debug)]
pub(crate) struct Positive {
    pub lit: Lit,
    /// Each argument, and each argument of a function-term argument, as a possible index key.
    pub keys: Box<[(Path, Pat)]>,
}

/// A literal that only tests bindings: it runs as soon as its variables are bound.
#[derive(Clone, Debug)]
pub(crate) enum Filter {
    Neg(Lit),
    Distinct(Pat, Pat),
    Equal(Pat, Pat),
}

/// A rule body in normal form, ready for joins.
#[derive(Clone, Debug)]
pub(crate) struct CompiledRule {
    pub head: Lit,
    pub nvars: usize,
    pub positives: Vec<Positive>,
    pub filters: Vec<(Filter, Box<[u32]>)>,
    /// Whether the positive literals bind every variable of the head and filters.
    pub safe: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub rel_key: Vec<(Symbol, usize)>,
    pub layer: Vec<u8>,
    /// Which indexes each relation needs.
    pub paths: Vec<Vec<Path>>,
    /// Relations computed in full once and stored: those of layer 0 whose rules, and the rules
    /// of everything they depend on, are safe.
    pub stored: Vec<bool>,
    /// The rules of each relation.
    pub rules_of: Vec<Vec<CompiledRule>>,
    /// Relations with a rule that is unsafe on its own (see [`CompiledRule::safe`]): such a
    /// rule gives answers only for calls that bind what its body does not, so a call to one is
    /// made only once nothing else in the body can bind more of its arguments.
    pub needs_binding: Vec<bool>,
    pub rel_true: RelId,
    pub rel_does: RelId,
    pub rel_init: RelId,
    pub rel_next: RelId,
    pub rel_legal: RelId,
    pub rel_goal: RelId,
    pub rel_terminal: RelId,
}

struct Compiler<'a> {
    desc: &'a Description,
    interner: &'a mut Interner,
    rels: FxHashMap<(Symbol, usize), RelId>,
    rel_key: Vec<(Symbol, usize)>,
}

/// A rule after normalization, before planning.
struct NormalRule {
    head: Lit,
    body: Vec<Item>,
    nvars: usize,
}

impl Compiler<'_> {
    fn rel(&mut self, sym: Symbol, arity: usize) -> RelId {
        let next = self.rel_key.len() as RelId;
        *self.rels.entry((sym, arity)).or_insert_with(|| {
            self.rel_key.push((sym, arity));
            next
        })
    }

    fn pat(&mut self, t: &Term, vars: &mut Vec<Symbol>) -> Pat {
        match t {
            Term::Var(v) => {
                let i = vars.iter().position(|x| x == v).unwrap_or_else(|| {
                    vars.push(*v);
                    vars.len() - 1
                });
                Pat::Var(i as u32)
            }
            Term::Const(c) => Pat::Ground(self.interner.intern(*c, &[])),
            Term::Func(f, args) => {
                let pats: Vec<Pat> = args.iter().map(|a| self.pat(a, vars)).collect();
                if pats.iter().all(|p| matches!(p, Pat::Ground(_))) {
                    let ids: Vec<TermId> = pats
                        .iter()
                        .map(|p| {
                            if let Pat::Ground(t) = p {
                                *t
                            } else {
                                unreachable!()
                            }
                        })
                        .collect();
                    Pat::Ground(self.interner.intern(*f, &ids))
                } else {
                    Pat::Func(*f, pats.into())
                }
            }
        }
    }

    fn lit(&mut self, a: &Atom, vars: &mut Vec<Symbol>) -> Lit {
        let rel = self.rel(a.rel, a.args.len());
        let args = a.args.iter().map(|t| self.pat(t, vars)).collect();
        Lit { rel, args }
    }

    /// The disjunctive normal form of a literal (negated when `negate`): a list of conjunctions.
    fn dnf(&mut self, l: &Literal, negate: bool, vars: &mut Vec<Symbol>) -> Result<Vec<Vec<Item>>, String> {
        Ok(match (l, negate) {
            (Literal::Atom(a), false) => vec![vec![Item::Pos(self.lit(a, vars))]],
            (Literal::Atom(a), true) => vec![vec![Item::Neg(self.lit(a, vars))]],
            (Literal::Distinct(a, b, _), n) => {
                let (a, b) = (self.pat(a, vars), self.pat(b, vars));
                vec![vec![if n {
                    Item::Equal(a, b)
                } else {
                    Item::Distinct(a, b)
                }]]
            }
            (Literal::Not(inner, _), n) => self.dnf(inner, !n, vars)?,
            // Under negation, `or` becomes a conjunction of negations, `and` a disjunction.
            (Literal::Or(ls, _), false) | (Literal::And(ls, _), true) => {
                let mut out = Vec::new();
                for l in ls {
                    out.extend(self.dnf(l, negate, vars)?);
                    if out.len() > MAX_DISJUNCTS {
                        return Err(format!(
                            "its body expands into more than {MAX_DISJUNCTS} disjuncts"
                        ));
                    }
                }
                out
            }
            (Literal::And(ls, _), false) | (Literal::Or(ls, _), true) => {
                let mut acc = vec![Vec::new()];
                for l in ls {
                    acc = self.product(acc, l, negate, vars)?;
                }
                acc
            }
        })
    }

    fn product(
        &mut self,
        acc: Vec<Vec<Item>>,
        l: &Literal,
        negate: bool,
        vars: &mut Vec<Symbol>,
    ) -> Result<Vec<Vec<Item>>, String> {
        let parts = self.dnf(l, negate, vars)?;
        if acc.len() * parts.len() > MAX_DISJUNCTS {
            return Err(format!(
                "its body expands into more than {MAX_DISJUNCTS} disjuncts"
            ));
        }
        let mut out = Vec::with_capacity(acc.len() * parts.len());
        for a in &acc {
            for p in &parts {
                let mut c = a.clone();
                c.extend(p.iter().cloned());
                out.push(c);
            }
        }
        Ok(out)
    }
}

pub(crate) fn compile(desc: &Description, interner: &mut Interner) -> Result<Program, ReferenceError> {
    let mut c = Compiler {
        desc,
        interner,
        rels: FxHashMap::default(),
        rel_key: Vec::new(),
    };
    let k = desc.keywords;
    let rel_true = c.rel(k.true_, 1);
    let rel_does = c.rel(k.does, 2);
    let rel_init = c.rel(k.init, 1);
    let rel_next = c.rel(k.next, 1);
    let rel_legal = c.rel(k.legal, 2);
    let rel_goal = c.rel(k.goal, 2);
    let rel_terminal = c.rel(k.terminal, 0);

    let mut normal = Vec::new();
    for rule in &c.desc.rules {
        let mut vars = Vec::new();
        let head = c.lit(&rule.head, &mut vars);
        if head.rel == rel_true || head.rel == rel_does {
            return Err(ReferenceError::Rule {
                rule: desc.rule_text(rule),
                reason: "'true' and 'does' cannot be defined by rules".into(),
            });
        }
        let mut bodies = vec![Vec::new()];
        for l in &rule.body {
            bodies = c
                .product(bodies, l, false, &mut vars)
                .map_err(|reason| ReferenceError::Rule {
                    rule: desc.rule_text(rule),
                    reason,
                })?;
        }
        for body in bodies {
            normal.push(NormalRule {
                head: head.clone(),
                body,
                nvars: vars.len(),
            });
        }
    }
    let nrels = c.rel_key.len();
    let rel_key = c.rel_key;

    // Layers: the least fixpoint of "a relation's layer is the highest layer it depends on".
    let mut layer = vec![0u8; nrels];
    layer[rel_true as usize] = 1;
    layer[rel_does as usize] = 2;
    loop {
        let mut changed = false;
        for r in &normal {
            let mut l = layer[r.head.rel as usize];
            for item in &r.body {
                if let Item::Pos(x) | Item::Neg(x) = item {
                    l = l.max(layer[x.rel as usize]);
                }
            }
            if l > layer[r.head.rel as usize] {
                layer[r.head.rel as usize] = l;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    // Strata: strongly connected components of "head depends on body", dependencies first.
    let mut deps: Vec<Vec<(RelId, bool)>> = vec![Vec::new(); nrels];
    for r in &normal {
        for item in &r.body {
            match item {
                Item::Pos(x) => deps[r.head.rel as usize].push((x.rel, false)),
                Item::Neg(x) => deps[r.head.rel as usize].push((x.rel, true)),
                _ => {}
            }
        }
    }
    let components = tarjan(&deps);
    let mut component_of = vec![0usize; nrels];
    for (i, comp) in components.iter().enumerate() {
        for &r in comp {
            component_of[r as usize] = i;
        }
    }
    for (head, ds) in deps.iter().enumerate() {
        for &(d, negative) in ds {
            if negative && component_of[d as usize] == component_of[head] {
                let names: Vec<&str> = components[component_of[head]]
                    .iter()
                    .map(|&r| desc.symbols.name(rel_key[r as usize].0))
                    .collect();
                return Err(ReferenceError::Unstratified(names.join(", ")));
            }
        }
    }
    let mut paths: Vec<Vec<Path>> = vec![Vec::new(); nrels];
    let mut by_head: Vec<Vec<CompiledRule>> = vec![Vec::new(); nrels];
    for r in normal {
        let rule = prepare(r, &mut paths);
        by_head[rule.head.rel as usize].push(rule);
    }

    // Stored relations: the greatest set of layer-0 relations with only safe rules that depend
    // only on stored relations.
    let mut stored: Vec<bool> = (0..nrels)
        .map(|r| layer[r] == 0 && by_head[r].iter().all(|x| x.safe))
        .collect();
    loop {
        let mut changed = false;
        for r in 0..nrels {
            if stored[r] && deps[r].iter().any(|&(d, _)| !stored[d as usize]) {
                stored[r] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    let needs_binding = by_head
        .iter()
        .map(|rules| rules.iter().any(|r| !r.safe))
        .collect();
    Ok(Program {
        stored,
        rel_key,
        layer,
        paths,
        needs_binding,
        rules_of: by_head,
        rel_true,
        rel_does,
        rel_init,
        rel_next,
        rel_legal,
        rel_goal,
        rel_terminal,
    })
}

/// Splits a normalized rule into positives and filters, lists the index keys of each positive
/// (registering them in `paths`), and checks that every variable of the head and of every filter
/// is bound by some positive literal.
fn prepare(r: NormalRule, paths: &mut [Vec<Path>]) -> CompiledRule {
    let mut bound = vec![false; r.nvars];
    let mut positives = Vec::new();
    let mut filters = Vec::new();
    for item in r.body {
        let vars: Box<[u32]> = {
            let mut v = item.vars();
            v.sort_unstable();
            v.dedup();
            v.into()
        };
        match item {
            Item::Pos(lit) => {
                vars.iter().for_each(|&v| bound[v as usize] = true);
                let keys = keys_of(&lit);
                for (p, _) in &keys {
                    if !paths[lit.rel as usize].contains(p) {
                        paths[lit.rel as usize].push(*p);
                    }
                }
                positives.push(Positive {
                    lit,
                    keys: keys.into(),
                });
            }
            Item::Neg(l) => filters.push((Filter::Neg(l), vars)),
            Item::Distinct(a, b) => filters.push((Filter::Distinct(a, b), vars)),
            Item::Equal(a, b) => filters.push((Filter::Equal(a, b), vars)),
        }
    }
    // A rule whose head or filter variables are not all bound by its positive literals is
    // still evaluated: top-down, the call may bind them. Solutions that leave one unbound are
    // dropped at evaluation time.
    let safe = filters
        .iter()
        .all(|(_, vars)| vars.iter().all(|&v| bound[v as usize]))
        && r.head.args.iter().all(|a| {
            let mut vs = Vec::new();
            a.vars(&mut vs);
            vs.iter().all(|&v| bound[v as usize])
        });
    CompiledRule {
        head: r.head,
        nvars: r.nvars,
        positives,
        filters,
        safe,
    }
}

/// Every index key of `l`: each argument, and each argument of a function-term argument.
fn keys_of(l: &Lit) -> Vec<(Path, Pat)> {
    let mut keys = Vec::new();
    for (i, a) in l.args.iter().enumerate().take(u8::MAX as usize) {
        keys.push((
            Path {
                arg: i as u8,
                sub: None,
            },
            a.clone(),
        ));
        if let Pat::Func(_, subs) = a {
            for (j, s) in subs.iter().enumerate().take(u8::MAX as usize) {
                keys.push((
                    Path {
                        arg: i as u8,
                        sub: Some(j as u8),
                    },
                    s.clone(),
                ));
            }
        }
    }
    keys
}

/// Strongly connected components of the graph `deps` (node → its dependencies), each component
/// listed after every component it depends on. Iterative, so deep graphs cannot overflow.
fn tarjan(deps: &[Vec<(RelId, bool)>]) -> Vec<Vec<RelId>> {
    let n = deps.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut counter = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // Each frame: a node and the position of the next dependency to visit.
        let mut frames = vec![(root, 0usize)];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = frames.last_mut() {
            if let Some(&(w, _)) = deps[v].get(*pos) {
                *pos += 1;
                let w = w as usize;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                frames.pop();
                if let Some(&(parent, _)) = frames.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("the component's root is on the stack");
                        on_stack[w] = false;
                        comp.push(w as RelId);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
    }
    out
}
