//! Hash-consed ground terms.
//!
//! Every ground term (constants, function terms and whole atoms alike) is stored once and named
//! by a dense [`TermId`], so that equality of terms is equality of ids and a relation's tuples
//! can be kept as the ids of its atoms. The table is an open-addressing hash table over the
//! term ids themselves, so looking a term up allocates nothing.

use crate::gdl::{Symbol, Symbols};
use std::hash::Hasher;

/// A ground term, numbered densely from 0.
pub(crate) type TermId = u32;

/// Marks an unbound variable in a binding array.
pub(crate) const UNBOUND: TermId = TermId::MAX;

/// The term is an atom of its relation that holds (in the exact model of a static relation, or
/// in the over-approximation of a dynamic one).
pub(crate) const HOLDS: u8 = 1;
/// The atom was derived in the current evaluation and waits to be added to its relation.
pub(crate) const PENDING: u8 = 2;

#[derive(Copy, Clone, Debug)]
struct Node {
    functor: Symbol,
    start: u32,
    len: u32,
}

/// The store of ground terms, with one flag byte per term for the evaluator's use.
#[derive(Default)]
pub(crate) struct TermStore {
    nodes: Vec<Node>,
    args: Vec<TermId>,
    /// The nesting depth of each term: 1 for a constant.
    depths: Vec<u16>,
    /// Open-addressing table of terms, each entry the high 32 bits of the term's hash above its
    /// id; `EMPTY` marks an empty slot. Its length is a power of two, at least twice the number
    /// of terms. Keeping part of the hash in the slot lets a probe pass over other terms without
    /// reading anything else: in chess the lookups of 7-ary atoms were a third of grounding,
    /// most of it cache misses.
    table: Vec<u64>,
    flags: Vec<u8>,
}

/// Whether two lists of term ids are equal. Empty lists are told apart before the elements are
/// compared: an empty slice of a vector that never held anything points at an address no page
/// backs, and the library's `memcmp`, which the slice comparison calls even for no bytes, reads
/// it with a masked load that the processor then handles slowly (a microcode assist). In chess
/// the comparisons of the empty out values of the check test's solutions were a fifth of
/// grounding's samples in `perf`, all of them in that load.
#[inline]
pub(crate) fn same_ids(a: &[TermId], b: &[TermId]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// An empty slot of `TermStore::table`: its id is `UNBOUND`, which no term has.
const EMPTY: u64 = u64::MAX;

/// The table entry of term `id` with hash `h`.
#[inline]
fn entry(h: u64, id: TermId) -> u64 {
    (h & 0xffff_ffff_0000_0000) | id as u64
}

fn hash_of(functor: Symbol, args: &[TermId]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write_u32(functor.0);
    h.write_usize(args.len());
    for &a in args {
        h.write_u32(a);
    }
    // FxHasher leaves the low bits weak; mixing the high bits in spreads them over the slots.
    let x = h.finish();
    x ^ (x >> 29) ^ (x >> 47)
}

impl TermStore {
    /// How many terms there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The id of `functor(args…)`, adding the term if it is new.
    pub fn intern(&mut self, functor: Symbol, args: &[TermId]) -> TermId {
        if self.table.len() < 2 * (self.nodes.len() + 1) {
            self.grow();
        }
        let h = hash_of(functor, args);
        let mask = self.table.len() - 1;
        let mut slot = h as usize & mask;
        loop {
            let e = self.table[slot];
            if e == EMPTY {
                break;
            }
            if e >> 32 == h >> 32 && self.is(e as TermId, functor, args) {
                return e as TermId;
            }
            slot = (slot + 1) & mask;
        }
        let id = self.nodes.len() as TermId;
        let depth = args
            .iter()
            .map(|&a| self.depths[a as usize])
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        self.depths.push(depth);
        self.nodes.push(Node {
            functor,
            start: self.args.len() as u32,
            len: args.len() as u32,
        });
        self.args.extend_from_slice(args);
        self.flags.push(0);
        self.table[slot] = entry(h, id);
        id
    }

    /// The id of `functor(args…)` if the term exists.
    pub fn find(&self, functor: Symbol, args: &[TermId]) -> Option<TermId> {
        if self.table.is_empty() {
            return None;
        }
        let h = hash_of(functor, args);
        let mask = self.table.len() - 1;
        let mut slot = h as usize & mask;
        loop {
            let e = self.table[slot];
            if e == EMPTY {
                return None;
            }
            if e >> 32 == h >> 32 && self.is(e as TermId, functor, args) {
                return Some(e as TermId);
            }
            slot = (slot + 1) & mask;
        }
    }

    fn is(&self, t: TermId, functor: Symbol, args: &[TermId]) -> bool {
        let n = self.nodes[t as usize];
        n.functor == functor && same_ids(&self.args[n.start as usize..(n.start + n.len) as usize], args)
    }

    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(64);
        self.table = vec![EMPTY; size];
        let mask = size - 1;
        // The hashes are computed again rather than kept per term: growing is rare, and a
        // vector of them would be as large as the terms' ids.
        for id in 0..self.nodes.len() as TermId {
            let h = hash_of(self.functor(id), self.args(id));
            let mut slot = h as usize & mask;
            while self.table[slot] != EMPTY {
                slot = (slot + 1) & mask;
            }
            self.table[slot] = entry(h, id);
        }
    }

    /// The functor (or constant) of a term.
    #[inline]
    pub fn functor(&self, t: TermId) -> Symbol {
        self.nodes[t as usize].functor
    }

    /// The arguments of a term (empty for a constant).
    #[inline]
    pub fn args(&self, t: TermId) -> &[TermId] {
        let n = self.nodes[t as usize];
        &self.args[n.start as usize..(n.start + n.len) as usize]
    }

    /// The nesting depth of a term: 1 for a constant, one more than its deepest argument
    /// otherwise.
    #[inline]
    pub fn depth(&self, t: TermId) -> u16 {
        self.depths[t as usize]
    }

    /// The flag byte of a term.
    #[inline]
    pub fn flags(&self, t: TermId) -> u8 {
        self.flags[t as usize]
    }

    /// Sets bits of a term's flag byte.
    #[inline]
    pub fn set_flags(&mut self, t: TermId, bits: u8) {
        self.flags[t as usize] |= bits;
    }

    /// Clears bits of a term's flag byte.
    #[inline]
    pub fn clear_flags(&mut self, t: TermId, bits: u8) {
        self.flags[t as usize] &= !bits;
    }

    /// Whether the atom `t` holds.
    #[inline]
    pub fn holds(&self, t: TermId) -> bool {
        self.flags[t as usize] & HOLDS != 0
    }

    /// Canonical KIF of a term, as `Description::term_text` prints it.
    pub fn text(&self, t: TermId, symbols: &Symbols) -> String {
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

    /// Bytes held by the store, roughly.
    pub fn bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.args.capacity() * 4
            + self.depths.capacity() * 2
            + self.table.capacity() * 8
            + self.flags.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_terms_get_equal_ids_and_different_terms_different_ones() {
        let mut s = TermStore::default();
        let a = s.intern(Symbol(1), &[]);
        let b = s.intern(Symbol(2), &[]);
        let fab = s.intern(Symbol(3), &[a, b]);
        let fba = s.intern(Symbol(3), &[b, a]);
        assert_ne!(fab, fba);
        assert_eq!(s.intern(Symbol(3), &[a, b]), fab);
        assert_eq!(s.find(Symbol(3), &[b, a]), Some(fba));
        assert_eq!(s.find(Symbol(3), &[a, a]), None);
        // A constant and a function of the same symbol are different terms.
        assert_ne!(s.intern(Symbol(3), &[]), fab);
        assert_eq!(s.args(fab), &[a, b]);
        assert_eq!((s.depth(a), s.depth(fab)), (1, 2));
        assert_eq!(s.functor(fab), Symbol(3));
    }

    #[test]
    fn the_table_keeps_every_term_through_growth() {
        let mut s = TermStore::default();
        let ids: Vec<TermId> = (0..10_000).map(|i| s.intern(Symbol(i), &[])).collect();
        let pairs: Vec<TermId> = ids.windows(2).map(|w| s.intern(Symbol(0), w)).collect();
        for (i, w) in ids.windows(2).enumerate() {
            assert_eq!(s.find(Symbol(0), w), Some(pairs[i]));
        }
        assert_eq!(s.len(), 10_000 + 9_999);
    }
}
