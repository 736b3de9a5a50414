//! The abstract syntax of a GDL description.
//!
//! Symbols are case-insensitive in GDL; the parser lowercases them, so the canonical form of a
//! symbol is its lowercase text. `true` and `does` are ordinary relations here: their meaning
//! belongs to the stages that evaluate them.

use std::collections::HashMap;
use std::fmt;

/// An interned symbol: a constant, function or relation name, or a variable name (with its `?`).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Symbol(pub u32);

/// The table of interned symbols of one description.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    names: Vec<String>,
    map: HashMap<String, Symbol>,
}

impl Symbols {
    /// The symbol for `name`, which must already be in canonical (lowercase) form.
    pub fn intern(&mut self, name: &str) -> Symbol {
        if let Some(&s) = self.map.get(name) {
            return s;
        }
        let s = Symbol(self.names.len() as u32);
        self.names.push(name.to_string());
        self.map.insert(name.to_string(), s);
        s
    }

    /// The symbol for `name` if the description uses it.
    pub fn get(&self, name: &str) -> Option<Symbol> {
        self.map.get(name).copied()
    }

    /// The canonical text of a symbol.
    pub fn name(&self, s: Symbol) -> &str {
        &self.names[s.0 as usize]
    }

    /// How many symbols there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are no symbols.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A position in the source text, both 1-based; the column counts characters.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Span {
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1, in characters.
    pub col: u32,
}

/// A term: a variable, a constant, or a function applied to terms.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Term {
    /// A variable such as `?x`; the symbol's text includes the `?`.
    Var(Symbol),
    /// A constant (numbers are constants too).
    Const(Symbol),
    /// A function term `(f t1 … tn)` with n ≥ 1.
    Func(Symbol, Vec<Term>),
}

impl Term {
    /// Calls `f` on every variable of the term, left to right, with repeats.
    pub fn for_each_var(&self, f: &mut impl FnMut(Symbol)) {
        match self {
            Term::Var(v) => f(*v),
            Term::Const(_) => {}
            Term::Func(_, args) => args.iter().for_each(|a| a.for_each_var(f)),
        }
    }

    /// Whether the term has no variables.
    pub fn is_ground(&self) -> bool {
        let mut ground = true;
        self.for_each_var(&mut |_| ground = false);
        ground
    }
}

/// An atomic sentence: a relation applied to terms (no arguments for propositions such as
/// `terminal`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Atom {
    /// The relation.
    pub rel: Symbol,
    /// The arguments.
    pub args: Vec<Term>,
    /// Where the atom starts in the source.
    pub span: Span,
}

impl Atom {
    /// Calls `f` on every variable of the atom, left to right, with repeats.
    pub fn for_each_var(&self, f: &mut impl FnMut(Symbol)) {
        self.args.iter().for_each(|a| a.for_each_var(f));
    }
}

/// A literal of a rule body.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Literal {
    /// A positive atom, `true` and `does` included.
    Atom(Atom),
    /// `(not L)`.
    Not(Box<Literal>, Span),
    /// `(distinct t1 t2)`.
    Distinct(Term, Term, Span),
    /// `(or L1 … Ln)`.
    Or(Vec<Literal>, Span),
    /// `(and L1 … Ln)`, as found inside `or` in some games.
    And(Vec<Literal>, Span),
}

impl Literal {
    /// Where the literal starts in the source.
    pub fn span(&self) -> Span {
        match self {
            Literal::Atom(a) => a.span,
            Literal::Not(_, s) | Literal::Distinct(_, _, s) | Literal::Or(_, s) | Literal::And(_, s) => *s,
        }
    }

    /// Calls `f` on every variable of the literal, left to right, with repeats.
    pub fn for_each_var(&self, f: &mut impl FnMut(Symbol)) {
        match self {
            Literal::Atom(a) => a.for_each_var(f),
            Literal::Not(l, _) => l.for_each_var(f),
            Literal::Distinct(a, b, _) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
            Literal::Or(ls, _) | Literal::And(ls, _) => ls.iter().for_each(|l| l.for_each_var(f)),
        }
    }
}

/// A rule `(<= head body…)`; a fact is a rule with an empty body.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Rule {
    /// The head.
    pub head: Atom,
    /// The body literals, in source order.
    pub body: Vec<Literal>,
    /// Where the rule starts in the source.
    pub span: Span,
}

/// The relation names GDL gives a meaning to, interned in every description.
#[derive(Copy, Clone, Debug)]
pub struct Keywords {
    /// `role`
    pub role: Symbol,
    /// `init`
    pub init: Symbol,
    /// `true`
    pub true_: Symbol,
    /// `does`
    pub does: Symbol,
    /// `next`
    pub next: Symbol,
    /// `legal`
    pub legal: Symbol,
    /// `goal`
    pub goal: Symbol,
    /// `terminal`
    pub terminal: Symbol,
    /// `base`
    pub base: Symbol,
    /// `input`
    pub input: Symbol,
}

impl Keywords {
    /// Interns the keywords into `symbols`.
    pub fn intern(symbols: &mut Symbols) -> Keywords {
        Keywords {
            role: symbols.intern("role"),
            init: symbols.intern("init"),
            true_: symbols.intern("true"),
            does: symbols.intern("does"),
            next: symbols.intern("next"),
            legal: symbols.intern("legal"),
            goal: symbols.intern("goal"),
            terminal: symbols.intern("terminal"),
            base: symbols.intern("base"),
            input: symbols.intern("input"),
        }
    }
}

/// A parsed GDL game description.
#[derive(Clone, Debug)]
pub struct Description {
    /// The interned symbols.
    pub symbols: Symbols,
    /// The GDL keywords, interned in `symbols`.
    pub keywords: Keywords,
    /// The rules and facts in source order.
    pub rules: Vec<Rule>,
}

impl Description {
    /// Canonical KIF of a term.
    pub fn term_text(&self, t: &Term) -> String {
        let mut s = String::new();
        write_term(&self.symbols, t, &mut s);
        s
    }

    /// Canonical KIF of an atom.
    pub fn atom_text(&self, a: &Atom) -> String {
        if a.args.is_empty() {
            return self.symbols.name(a.rel).to_string();
        }
        let mut s = format!("({}", self.symbols.name(a.rel));
        for t in &a.args {
            s.push(' ');
            write_term(&self.symbols, t, &mut s);
        }
        s.push(')');
        s
    }

    /// Canonical KIF of a literal.
    pub fn literal_text(&self, l: &Literal) -> String {
        match l {
            Literal::Atom(a) => self.atom_text(a),
            Literal::Not(l, _) => format!("(not {})", self.literal_text(l)),
            Literal::Distinct(a, b, _) => format!("(distinct {} {})", self.term_text(a), self.term_text(b)),
            Literal::Or(ls, _) => {
                let inner: Vec<String> = ls.iter().map(|l| self.literal_text(l)).collect();
                format!("(or {})", inner.join(" "))
            }
            Literal::And(ls, _) => {
                let inner: Vec<String> = ls.iter().map(|l| self.literal_text(l)).collect();
                format!("(and {})", inner.join(" "))
            }
        }
    }

    /// Canonical KIF of a rule.
    pub fn rule_text(&self, r: &Rule) -> String {
        if r.body.is_empty() {
            return self.atom_text(&r.head);
        }
        let mut s = format!("(<= {}", self.atom_text(&r.head));
        for l in &r.body {
            s.push(' ');
            s.push_str(&self.literal_text(l));
        }
        s.push(')');
        s
    }
}

fn write_term(symbols: &Symbols, t: &Term, out: &mut String) {
    match t {
        Term::Var(s) | Term::Const(s) => out.push_str(symbols.name(*s)),
        Term::Func(f, args) => {
            out.push('(');
            out.push_str(symbols.name(*f));
            for a in args {
                out.push(' ');
                write_term(symbols, a, out);
            }
            out.push(')');
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}
