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

/// Marks a node whose id is free (`Node::start`): the term it held was dropped by
/// [`Interner::retain`] and the id waits in the free list to name a new term.
const FREE: u32 = u32::MAX;

/// The table of ground terms. An id names the same term for as long as the term is kept:
/// [`Interner::retain`] drops the terms no one needs any more, and their ids name new terms
/// later.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    nodes: Vec<Node>,
    args: Vec<TermId>,
    /// Every term's id, hashed by its functor and argument ids as `nodes` and `args` hold them,
    /// so a term is stored once and found without building a key.
    map: HashTable<TermId>,
    /// Ids of dropped terms, to be given to new ones.
    free: Vec<TermId>,
}

impl Interner {
    /// The id of `functor(args…)`, creating it if new.
    pub(crate) fn intern(&mut self, functor: Symbol, args: &[TermId]) -> TermId {
        let id = self.free.last().copied().unwrap_or(self.nodes.len() as TermId);
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
        let node = Node {
            functor,
            start: self.args.len() as u32,
            len: args.len() as u32,
        };
        if self.free.pop().is_some() {
            self.nodes[id as usize] = node;
        } else {
            self.nodes.push(node);
        }
        self.args.extend_from_slice(args);
        id
    }

    /// Keeps the terms below `permanent`, the terms `roots` yields and every sub-term of
    /// those, and drops the rest: their ids become free for new terms, their arguments and
    /// their places in the hash table go. The ids of kept terms do not change.
    pub(crate) fn retain(&mut self, permanent: TermId, roots: impl IntoIterator<Item = TermId>) {
        let mut keep = vec![false; self.nodes.len()];
        let permanent = (permanent as usize).min(self.nodes.len());
        keep[..permanent].fill(true);
        let mut stack: Vec<TermId> = roots.into_iter().filter(|&t| self.contains(t)).collect();
        while let Some(t) = stack.pop() {
            if !std::mem::replace(&mut keep[t as usize], true) {
                stack.extend_from_slice(self.args(t));
            }
        }
        // Sub-terms of permanent terms are permanent too: a term's arguments exist before it,
        // and no id below `permanent` was ever free.
        while keep.last() == Some(&false) {
            keep.pop();
        }
        let old_args = std::mem::take(&mut self.args);
        self.nodes.truncate(keep.len());
        self.free.clear();
        self.map.clear();
        for (t, node) in self.nodes.iter_mut().enumerate() {
            if !keep[t] {
                node.start = FREE;
                node.len = 0;
                self.free.push(t as TermId);
                continue;
            }
            let args = &old_args[node.start as usize..(node.start + node.len) as usize];
            node.start = self.args.len() as u32;
            self.args.extend_from_slice(args);
        }
        // Lowest ids first, so the table stays dense at its start.
        self.free.reverse();
        let (nodes, all_args) = (&self.nodes, &self.args);
        let hash_of = |t: TermId| {
            let n = nodes[t as usize];
            hash_term(n.functor, &all_args[n.start as usize..(n.start + n.len) as usize])
        };
        for t in (0..nodes.len() as TermId).filter(|&t| keep[t as usize]) {
            self.map.insert_unique(hash_of(t), t, |&u| hash_of(u));
        }
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
        self.nodes.len() - self.free.len()
    }

    /// One more than the largest id given so far: every id of the table is below it.
    pub(crate) fn end(&self) -> TermId {
        self.nodes.len() as TermId
    }

    /// Whether `t` names a term of this table.
    pub(crate) fn contains(&self, t: TermId) -> bool {
        self.nodes.get(t as usize).is_some_and(|n| n.start != FREE)
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
