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

/// Words before a term's arguments in `TermStore::data`: functor, number of arguments, id,
/// depth (low 16 bits) with the flag byte above it, and the atom's position in its relation.
const HEADER: usize = 5;
const FUNCTOR: usize = 0;
const LEN: usize = 1;
/// The most terms [`TermStore::touch_terms`] reads at once.
pub(crate) const TOUCH: usize = 16;
const ID: usize = 2;
const META: usize = 3;
const POS: usize = 4;
const FLAG_SHIFT: u32 = 16;

/// The position word of a term that is no atom of a relation (yet).
const NO_POS: u32 = u32::MAX;

/// The store of ground terms, with one flag byte per term for the evaluator's use.
#[derive(Default)]
pub(crate) struct TermStore {
    /// Every term's record, one after another: `HEADER` words (functor, number of arguments,
    /// id, depth and flags, position) then its arguments. A term's functor, arguments, depth and flags
    /// thus share a cache line or two, and a table probe that reaches the term reads only its
    /// record: in chess the lookups of 7-ary atoms were a third of grounding, most of it cache
    /// misses (the table slot, then the term's node, then its arguments elsewhere).
    data: Vec<u32>,
    /// Where each term's record starts in `data`, by id.
    offsets: Vec<u32>,
    /// Open-addressing table of terms, each entry the high 32 bits of the term's hash above the
    /// position of its record in `data`; `EMPTY` marks an empty slot. Its length is a power of
    /// two, at least twice the number of terms. Keeping part of the hash in the slot lets a
    /// probe pass over other terms without reading anything else.
    table: Slots,
    /// A table of twice as many slots, being made ready on another thread for the next growth
    /// (see [`TermStore::prepare_growth`]).
    spare: Option<std::thread::JoinHandle<Slots>>,
    /// The depth of the deepest term (0 with none).
    max_depth: u16,
}

/// The fewest slots of a table [`TermStore::prepare_growth`] makes ready on another thread:
/// a smaller one costs less to make than the thread.
const SPARE_MIN: usize = 1 << 20;

/// The slots of `TermStore::table`, in memory the kernel is asked to back with huge pages.
/// The table of chess's 3.75 million terms is 64 MB, and a lookup reads a slot at random:
/// with small pages nearly every lookup missed the TLB as well as the cache, and the load of
/// the first slot took about four fifths of the samples of `find` and `intern` in `perf`.
#[derive(Default)]
struct Slots {
    map: Option<memmap2::MmapMut>,
    len: usize,
}

impl Slots {
    /// `len` empty slots.
    fn new(len: usize) -> Slots {
        assert!(
            len.is_power_of_two() && len <= 1 << 32,
            "a term table of a power of two slots, at most 2^32"
        );
        let map = memmap2::MmapMut::map_anon(len * 8).expect("memory for the term table");
        // Only a hint: without huge pages the table works the same, more slowly.
        let _ = map.advise(memmap2::Advice::HugePage);
        Slots { map: Some(map), len }
    }

    /// Backs the slots with memory now, as writing each page would: the kernel's zeroing of
    /// fresh pages is most of the cost of a new table. Only a hint: where it is not
    /// supported, the pages are backed when first written, as without it.
    fn populate(&self) {
        #[cfg(target_os = "linux")]
        if let Some(map) = &self.map {
            let _ = map.advise(memmap2::Advice::PopulateWrite);
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base-2 logarithm of the number of slots (a power of two, at most `2^32`, so that
    /// the part of the hash an entry keeps holds its home slot).
    #[inline]
    fn bits(&self) -> u32 {
        self.len.trailing_zeros()
    }

    #[inline]
    fn get(&self, i: usize) -> u64 {
        let map = self.map.as_ref().expect("a table with slots");
        u64::from_ne_bytes(map[i * 8..i * 8 + 8].try_into().expect("eight bytes"))
    }

    #[inline]
    fn set(&mut self, i: usize, e: u64) {
        let map = self.map.as_mut().expect("a table with slots");
        map[i * 8..i * 8 + 8].copy_from_slice(&e.to_ne_bytes());
    }
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

/// An empty slot of `TermStore::table` (fresh memory is zero).
const EMPTY: u64 = 0;

/// The table entry of the term whose record starts at `at`, with hash `h`: the position plus
/// one, so that no entry is `EMPTY`.
#[inline]
fn entry(h: u64, at: u32) -> u64 {
    (h & 0xffff_ffff_0000_0000) | (u64::from(at) + 1)
}

/// Where the record of the term of table entry `e` starts.
#[inline]
fn record(e: u64) -> usize {
    (e as u32 as usize) - 1
}

fn hash_of(functor: Symbol, args: &[TermId]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write_u32(functor.0);
    h.write_usize(args.len());
    for &a in args {
        h.write_u32(a);
    }
    // The table takes a term's slot from the high bits of its hash (see `home`). FxHasher's
    // product has its best bits at the top, but its `finish` rotates them to the bottom for
    // tables that use the low bits: undo that, and mix once more so that every bit of the
    // product reaches the top.
    let x = h.finish().rotate_right(26);
    (x ^ (x >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The first slot to probe for a term with hash `h` in a table of `2^bits` slots: the high
/// `bits` bits of the hash. They are also the high bits of the part of the hash each entry
/// keeps (`entry`), so growing the table finds every entry's new slot from the entry alone,
/// without reading the term or hashing it again, and goes through the old table in order
/// while filling the new one in order (a term of old slot `i` goes near slot `2i`).
#[inline]
fn home(h: u64, bits: u32) -> usize {
    (h >> (64 - bits)) as usize
}

impl TermStore {
    /// How many terms there are.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// The table slot where `functor(args…)` is, or the empty slot where it would go.
    #[inline]
    fn slot(&self, h: u64, functor: Symbol, args: &[TermId]) -> usize {
        let mask = self.table.len() - 1;
        let mut slot = home(h, self.table.bits());
        loop {
            let e = self.table.get(slot);
            if e == EMPTY || (e >> 32 == h >> 32 && self.is_at(record(e), functor, args)) {
                return slot;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The id of `functor(args…)`, adding the term if it is new.
    pub fn intern(&mut self, functor: Symbol, args: &[TermId]) -> TermId {
        self.intern_hashed(hash_of(functor, args), functor, args)
    }

    /// [`TermStore::intern`] for a term whose hash [`TermStore::warm`] gave.
    pub fn intern_hashed(&mut self, h: u64, functor: Symbol, args: &[TermId]) -> TermId {
        debug_assert_eq!(h, hash_of(functor, args));
        if self.table.len() < 2 * (self.offsets.len() + 1) {
            self.grow();
        }
        let slot = self.slot(h, functor, args);
        let e = self.table.get(slot);
        if e != EMPTY {
            return self.data[record(e) + ID];
        }
        let id = self.offsets.len() as TermId;
        let depth = args
            .iter()
            .map(|&a| self.depth(a))
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        let at = u32::try_from(self.data.len())
            .ok()
            .filter(|&at| at < u32::MAX)
            .expect("the term store holds fewer than 2^32 words");
        self.data
            .extend_from_slice(&[functor.0, args.len() as u32, id, u32::from(depth), NO_POS]);
        self.data.extend_from_slice(args);
        self.offsets.push(at);
        self.max_depth = self.max_depth.max(depth);
        self.table.set(slot, entry(h, at));
        id
    }

    /// Brings into the cache the table slots of the terms `functor(args…)`, one for each
    /// `arity` arguments of `args`, and the records those slots name, so that interning the
    /// terms one after another does not wait for each cache miss in turn: the loads here do
    /// not depend on each other, and the processor overlaps them. The table grows first if
    /// interning them could make it grow. It changes nothing else. The terms' hashes are left
    /// in `hashes`, in order, for [`TermStore::intern_hashed`].
    pub fn warm(&mut self, functor: Symbol, arity: usize, args: &[TermId], hashes: &mut Vec<u64>) {
        let n = args.len() / arity.max(1);
        while self.table.len() < 2 * (self.offsets.len() + n + 1) {
            self.grow();
        }
        self.touch(functor, arity, args, hashes);
    }

    /// Brings into the cache the table slots of the terms `functor(args…)` and the records
    /// they name, as [`TermStore::warm`] does, for looking the terms up
    /// ([`TermStore::find_hashed`]) rather than adding them: a store shared by several
    /// threads only reads. The terms' hashes are left in `hashes`.
    pub fn touch(&self, functor: Symbol, arity: usize, args: &[TermId], hashes: &mut Vec<u64>) {
        hashes.clear();
        hashes.extend(args.chunks_exact(arity.max(1)).map(|one| hash_of(functor, one)));
        if self.table.is_empty() {
            return;
        }
        let bits = self.table.bits();
        let mut touched = 0u64;
        for &h in hashes.iter() {
            touched ^= self.table.get(home(h, bits));
        }
        for &h in hashes.iter() {
            let e = self.table.get(home(h, bits));
            if e != EMPTY && e >> 32 == h >> 32 {
                touched ^= u64::from(self.data[record(e) + ID]);
            }
        }
        std::hint::black_box(touched);
    }

    /// The id of `functor(args…)` if the term exists.
    pub fn find(&self, functor: Symbol, args: &[TermId]) -> Option<TermId> {
        self.find_hashed(hash_of(functor, args), functor, args)
    }

    /// Looks up the terms `functor(args…)` (`arity` arguments each, one after another) that
    /// hold, all their table slots brought in first ([`TermStore::touch`]), so that the waits
    /// for memory overlap: for each, its arguments and its id if it exists and holds.
    /// `hashes` is scratch space.
    pub fn find_held<'s>(
        &'s self,
        functor: Symbol,
        arity: usize,
        args: &'s [TermId],
        hashes: &'s mut Vec<u64>,
    ) -> impl Iterator<Item = (&'s [TermId], Option<TermId>)> + 's {
        self.touch(functor, arity, args, hashes);
        args.chunks_exact(arity.max(1))
            .zip(hashes.iter())
            .map(move |(one, &h)| {
                let t = self.find_hashed(h, functor, one).filter(|&t| self.holds(t));
                (one, t)
            })
    }

    /// [`TermStore::find`] for a term whose hash [`TermStore::touch`] gave.
    pub fn find_hashed(&self, h: u64, functor: Symbol, args: &[TermId]) -> Option<TermId> {
        debug_assert_eq!(h, hash_of(functor, args));
        if self.table.is_empty() {
            return None;
        }
        let e = self.table.get(self.slot(h, functor, args));
        (e != EMPTY).then(|| self.data[record(e) + ID])
    }

    /// Whether the record at `at` is `functor(args…)`. The arguments are compared in a plain
    /// loop: they are few, and the library's `memcmp` costs a call and its set-up each time.
    #[inline]
    fn is_at(&self, at: usize, functor: Symbol, args: &[TermId]) -> bool {
        if self.data[at + FUNCTOR] != functor.0 || self.data[at + LEN] as usize != args.len() {
            return false;
        }
        let mine = &self.data[at + HEADER..at + HEADER + args.len()];
        mine.iter().zip(args).all(|(a, b)| a == b)
    }

    /// Doubles the table. Each entry's new home slot is read off the hash bits the entry keeps
    /// (`home`), so no term is read or hashed again: in chess, rehashing the terms from their
    /// records at each doubling (a random write per term, and the terms' records read again)
    /// was a tenth of the fixpoint's thread.
    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(64);
        let spare = self
            .spare
            .take()
            .map(|h| h.join().expect("the thread making a term table does not panic"));
        let mut table = match spare {
            Some(t) if t.len() == size => t,
            _ => Slots::new(size),
        };
        let bits = table.bits();
        let mask = size - 1;
        for i in 0..self.table.len() {
            let e = self.table.get(i);
            if e == EMPTY {
                continue;
            }
            let mut slot = home(e, bits);
            while table.get(slot) != EMPTY {
                slot = (slot + 1) & mask;
            }
            table.set(slot, e);
        }
        self.table = table;
    }

    /// Says that up to `n` terms may be added soon. If that many would make the table grow,
    /// the table it would grow into is made on another thread meanwhile, its memory backed
    /// there (`Slots::populate`), so that the growth only moves the entries: in chess the
    /// kernel's zeroing of each new table's pages was most of the growths' time, and the
    /// fixpoint's merge, which interns a round's new atoms, runs alone on its thread. The table
    /// does not depend on where it was made: no term's id or slot changes.
    pub fn prepare_growth(&mut self, n: usize) {
        let size = self.table.len() * 2;
        if self.spare.is_some() || size < SPARE_MIN || self.table.len() >= 2 * (self.offsets.len() + n + 1) {
            return;
        }
        self.spare = std::thread::Builder::new()
            .spawn(move || {
                let table = Slots::new(size);
                table.populate();
                table
            })
            .ok();
    }

    /// Where term `t`'s record starts.
    #[inline]
    fn at(&self, t: TermId) -> usize {
        self.offsets[t as usize] as usize
    }

    /// The depth of the deepest term: no term made of terms of the store and `k` more levels
    /// is deeper than this and `k`, which lets the fixpoint skip checking the depth of each
    /// head it derives while the store is shallow.
    #[inline]
    pub fn max_depth(&self) -> u16 {
        self.max_depth
    }

    /// The functor (or constant) of a term.
    #[inline]
    pub fn functor(&self, t: TermId) -> Symbol {
        Symbol(self.data[self.at(t) + FUNCTOR])
    }

    /// Reads the records of the terms `ts` (at most [`TOUCH`]), so that the reads of their
    /// arguments that follow find them in the cache: the places of all of them first, then the
    /// records, each round of reads independent of one another, where reading each term's
    /// arguments in turn waits for two misses per term (a relation's rows in a join). The
    /// value is of no use; pass it to `std::hint::black_box` so the reads stay.
    #[inline]
    pub fn touch_terms(&self, ts: &[TermId]) -> u32 {
        let mut at = [0u32; TOUCH];
        for (a, &t) in at.iter_mut().zip(ts) {
            *a = self.offsets[t as usize];
        }
        at[..ts.len().min(TOUCH)]
            .iter()
            .fold(0, |acc, &a| acc ^ self.data[a as usize + LEN])
    }

    /// The arguments of a term (empty for a constant).
    #[inline]
    pub fn args(&self, t: TermId) -> &[TermId] {
        let at = self.at(t);
        let len = self.data[at + LEN] as usize;
        &self.data[at + HEADER..at + HEADER + len]
    }

    /// The nesting depth of a term: 1 for a constant, one more than its deepest argument
    /// otherwise.
    #[inline]
    pub fn depth(&self, t: TermId) -> u16 {
        self.data[self.at(t) + META] as u16
    }

    /// The flag byte of a term.
    #[inline]
    pub fn flags(&self, t: TermId) -> u8 {
        (self.data[self.at(t) + META] >> FLAG_SHIFT) as u8
    }

    /// Sets bits of a term's flag byte.
    #[inline]
    pub fn set_flags(&mut self, t: TermId, bits: u8) {
        let at = self.at(t);
        self.data[at + META] |= u32::from(bits) << FLAG_SHIFT;
    }

    /// Clears bits of a term's flag byte.
    #[inline]
    pub fn clear_flags(&mut self, t: TermId, bits: u8) {
        let at = self.at(t);
        self.data[at + META] &= !(u32::from(bits) << FLAG_SHIFT);
    }

    /// Notes that atom `t` is at position `pos` of its relation's atoms. An atom is added to
    /// one relation (the one of its functor and arity), once.
    #[inline]
    pub fn set_position(&mut self, t: TermId, pos: usize) {
        let at = self.at(t);
        debug_assert_eq!(self.data[at + POS], NO_POS, "an atom is added once");
        self.data[at + POS] = u32::try_from(pos)
            .ok()
            .filter(|&p| p != NO_POS)
            .expect("a relation holds fewer than 2^32 - 1 atoms");
    }

    /// The position of atom `t` among its relation's atoms, if it has been added
    /// ([`TermStore::set_position`]). Read from the term's record, which a lookup of the term
    /// has just brought in: an existence test of a whole atom in a range of its relation needs
    /// no index of the relation.
    #[inline]
    pub fn position(&self, t: TermId) -> Option<usize> {
        let p = self.data[self.at(t) + POS];
        (p != NO_POS).then_some(p as usize)
    }

    /// Whether the atom `t` holds.
    #[inline]
    pub fn holds(&self, t: TermId) -> bool {
        self.flags(t) & HOLDS != 0
    }

    /// Canonical KIF of a term, as `Description::term_text` prints it.
    pub fn text(&self, t: TermId, symbols: &Symbols) -> String {
        let mut out = String::new();
        self.write(t, symbols, &mut out);
        out
    }

    /// Appends the text of term `t` to `out`.
    pub fn write(&self, t: TermId, symbols: &Symbols, out: &mut String) {
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
        self.data.capacity() * 4 + self.offsets.capacity() * 4 + self.table.len() * 8
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

    #[test]
    fn warming_adds_no_term_and_changes_no_id() {
        // Two stores given the same terms, one warmed before each batch (the table grows
        // inside `warm` there): the fixpoint relies on the ids coming out the same.
        let mut plain = TermStore::default();
        let mut warmed = TermStore::default();
        let consts: Vec<TermId> = (0..64).map(|i| plain.intern(Symbol(i), &[])).collect();
        for i in 0..64 {
            warmed.intern(Symbol(i), &[]);
        }
        let mut batch = Vec::new();
        let mut hashes = Vec::new();
        for round in 0..200u32 {
            batch.clear();
            for k in 0..32u32 {
                let x = (round * 7 + k * 3) as usize % 64;
                batch.extend([consts[x], consts[(x * 5 + 1) % 64], consts[k as usize]]);
            }
            let before = warmed.len();
            warmed.warm(Symbol(99), 3, &batch, &mut hashes);
            assert_eq!(warmed.len(), before);
            assert_eq!(hashes.len(), 32);
            for (one, &h) in batch.chunks_exact(3).zip(&hashes) {
                let t = warmed.intern_hashed(h, Symbol(99), one);
                assert_eq!(t, plain.intern(Symbol(99), one));
                assert_eq!(warmed.find_hashed(h, Symbol(99), one), Some(t));
            }
        }
        assert_eq!(warmed.len(), plain.len());
        assert!(plain.len() > 64 + 1000);
    }

    #[test]
    fn a_table_made_ready_on_another_thread_changes_no_id() {
        // One store told before every 50,000 terms that 50,000 may come, the other not: the
        // first grows into tables made on another thread, with the same ids.
        let mut plain = TermStore::default();
        let mut ready = TermStore::default();
        let mut made = 0;
        for i in 0..600_000u32 {
            if i % 50_000 == 0 {
                ready.prepare_growth(50_000);
                made += usize::from(ready.spare.is_some());
            }
            assert_eq!(ready.intern(Symbol(i), &[]), plain.intern(Symbol(i), &[]));
        }
        assert_eq!(
            made, 2,
            "a table made ready before each growth past SPARE_MIN slots"
        );
        assert!(ready.spare.is_none(), "and taken by the growth");
        assert_eq!(ready.table.len(), plain.table.len());
        for i in (0..600_000u32).step_by(7) {
            assert_eq!(ready.find(Symbol(i), &[]), Some(i));
        }
        assert_eq!(ready.find(Symbol(600_000), &[]), None);
    }

    #[test]
    fn flags_and_depth_share_a_word_without_disturbing_each_other() {
        let mut s = TermStore::default();
        let a = s.intern(Symbol(1), &[]);
        let fa = s.intern(Symbol(2), &[a, a]);
        let ffa = s.intern(Symbol(2), &[fa, a]);
        s.set_flags(ffa, HOLDS | PENDING);
        assert_eq!((s.flags(ffa), s.depth(ffa), s.flags(fa)), (HOLDS | PENDING, 3, 0));
        s.clear_flags(ffa, PENDING);
        assert!(s.holds(ffa) && !s.holds(fa));
        assert_eq!(
            (s.flags(ffa), s.depth(ffa), s.args(ffa)),
            (HOLDS, 3, &[fa, a][..])
        );
        // The first term's record starts at position 0, whose table entry is still not empty.
        assert_eq!(s.find(Symbol(1), &[]), Some(a));
        assert_eq!(s.find(Symbol(1), &[a]), None);
        assert!(s.bytes() > 0);
    }
}
