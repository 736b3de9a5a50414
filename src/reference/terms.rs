//! Ground terms, hash-consed: every distinct ground term gets one `TermId`, so equality of terms
//! is equality of ids and a fact is a short slice of ids.

use crate::gdl::{Symbol, Symbols};
use hashbrown::HashTable;
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

/// A hash-consed ground term.
pub(crate) type TermId = u32;

#[derive(Clone, Copy, Debug)]
struct Node {
    functor: Symbol,
    start: u32,
    len: u32,
}

/// The table of ground terms. It only grows: an id, once given, names the same term forever.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    nodes: Vec<Node>,
    args: Vec<TermId>,
    /// Every term's id, hashed by its functor and argument ids as `nodes` and `args` hold them,
    /// so a term is stored once and found without building a key.
    map: HashTable<TermId>,
}

impl Interner {
    /// The id of `functor(args…)`, creating it if new.
    pub(crate) fn intern(&mut self, functor: Symbol, args: &[TermId]) -> TermId {
        let id = self.nodes.len() as TermId;
        let (nodes, all_args) = (&self.nodes, &self.args);
        let parts = |t: TermId| {
            let n = nodes[t as usize];
            (n.functor, &all_args[n.start as usize..(n.start + n.len) as usize])
        };
        match self.map.entry(
            hash_term(functor, args),
            |&t| parts(t) == (functor, args),
            |&t| {
                let (f, a) = parts(t);
                hash_term(f, a)
            },
        ) {
            hashbrown::hash_table::Entry::Occupied(e) => return *e.get(),
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(id);
            }
        }
        self.nodes.push(Node {
            functor,
            start: self.args.len() as u32,
            len: args.len() as u32,
        });
        self.args.extend_from_slice(args);
        id
    }

    /// The id of `functor(args…)` if that term exists.
    pub(crate) fn lookup(&self, functor: Symbol, args: &[TermId]) -> Option<TermId> {
        self.map
            .find(hash_term(functor, args), |&t| {
                self.functor(t) == functor && self.args(t) == args
            })
            .copied()
    }

    pub(crate) fn functor(&self, t: TermId) -> Symbol {
        self.nodes[t as usize].functor
    }

    pub(crate) fn args(&self, t: TermId) -> &[TermId] {
        let n = self.nodes[t as usize];
        &self.args[n.start as usize..(n.start + n.len) as usize]
    }

    /// How many terms the table holds.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether `t` is an id of this table.
    pub(crate) fn contains(&self, t: TermId) -> bool {
        (t as usize) < self.nodes.len()
    }

    /// Canonical KIF of a term.
    pub(crate) fn text(&self, t: TermId, symbols: &Symbols) -> String {
        let mut out = String::new();
        self.write(t, symbols, &mut out);
        out
    }

    fn write(&self, t: TermId, symbols: &Symbols, out: &mut String) {
        let args = self.args(t);
        if args.is_empty() {
            out.push_str(symbols.name(self.functor(t)));
            return;
        }
        out.push('(');
        out.push_str(symbols.name(self.functor(t)));
        for &a in args {
            out.push(' ');
            self.write(a, symbols, out);
        }
        out.push(')');
    }

    /// The id of a term written in KIF (`(cell 1 1 x)`, `noop`), if the term exists. Case and
    /// spacing do not matter.
    pub(crate) fn parse(&self, text: &str, symbols: &Symbols) -> Option<TermId> {
        parse_text(text, symbols, &mut |f, args| self.lookup(f, args))
    }

    /// The id of a term written in KIF, interned if it is new; `None` if the text is not a term
    /// or names a symbol the game does not have.
    pub(crate) fn parse_intern(&mut self, text: &str, symbols: &Symbols) -> Option<TermId> {
        parse_text(text, symbols, &mut |f, args| Some(self.intern(f, args)))
    }
}

/// Reads a term written in KIF, making each sub-term with `make` (functor, argument ids).
fn parse_text(
    text: &str,
    symbols: &Symbols,
    make: &mut dyn FnMut(Symbol, &[TermId]) -> Option<TermId>,
) -> Option<TermId> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c == '(' || c == ')' || c.is_whitespace() {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
        } else {
            word.push(c.to_ascii_lowercase());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    let mut pos = 0;
    let t = parse_tokens(&tokens, &mut pos, symbols, 0, make)?;
    (pos == tokens.len()).then_some(t)
}

fn parse_tokens(
    tokens: &[String],
    pos: &mut usize,
    symbols: &Symbols,
    depth: usize,
    make: &mut dyn FnMut(Symbol, &[TermId]) -> Option<TermId>,
) -> Option<TermId> {
    if depth > crate::gdl::MAX_NESTING {
        return None;
    }
    let tok = tokens.get(*pos)?;
    *pos += 1;
    if tok == "(" {
        let name = tokens.get(*pos)?;
        *pos += 1;
        if tokens.get(*pos)? == ")" {
            // `(f)` is the constant named with its parentheses (see the parser).
            *pos += 1;
            return make(symbols.get(&format!("({name})"))?, &[]);
        }
        let functor = symbols.get(name)?;
        let mut args = Vec::new();
        while tokens.get(*pos)? != ")" {
            args.push(parse_tokens(tokens, pos, symbols, depth + 1, make)?);
        }
        *pos += 1;
        make(functor, &args)
    } else if tok == ")" {
        None
    } else {
        make(symbols.get(tok)?, &[])
    }
}

fn hash_term(functor: Symbol, args: &[TermId]) -> u64 {
    let mut h = FxHasher::default();
    functor.0.hash(&mut h);
    args.hash(&mut h);
    h.finish()
}
