//! A set of node numbers hashed by the content they point to, for hash-consing gates (the
//! merge pass and polarity).
//!
//! Open addressing with linear probing; each slot is one `u64` holding the high half of the
//! entry's hash and its number, so that a probe reads one slot, usually one cache line, and an
//! insertion writes the slot it has just read. On the largest nets (a million gates) almost
//! every lookup misses and is followed by an insertion, and the probes are scattered over a
//! table larger than the cache: with a table of bare numbers (`hashbrown::HashTable<u32>`),
//! each and cost a load of the control bytes, a store into a second, distant line, and a
//! comparison of content for each false match of the control byte's seven bits.

/// A set of `u32` node numbers; the caller hashes and compares what they stand for.
pub(super) struct Interner {
    /// `0` for an empty slot, else the high 32 bits of the hash above `number + 1`.
    slots: Vec<u64>,
    mask: usize,
    len: usize,
}

impl Interner {
    /// A set that holds `n` numbers without growing, at most three quarters full.
    pub fn with_capacity(n: usize) -> Interner {
        let cap = (n.max(6) * 4 / 3 + 1).next_power_of_two();
        Interner {
            slots: vec![0; cap],
            mask: cap - 1,
            len: 0,
        }
    }

    /// The number in the set for which `eq` holds, among those whose content hashed to
    /// `hash`; if there is none, inserts `id` (whose content hashes to `hash`) and returns
    /// `None`. `rehash` gives the hash of a number already in the set, for growing.
    pub fn find_or_insert(
        &mut self,
        hash: u64,
        id: u32,
        eq: impl Fn(u32) -> bool,
        rehash: impl Fn(u32) -> u64,
    ) -> Option<u32> {
        assert!(id != u32::MAX, "node number out of range");
        let tag = hash & !0xffff_ffff;
        let mut pos = hash as usize & self.mask;
        loop {
            let slot = self.slots[pos];
            if slot == 0 {
                break;
            }
            if slot & !0xffff_ffff == tag {
                let found = (slot as u32).wrapping_sub(1);
                if eq(found) {
                    return Some(found);
                }
            }
            pos = (pos + 1) & self.mask;
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow(&rehash);
            // The slot found is in the old table; probe the new one.
            return self.find_or_insert(hash, id, eq, rehash);
        }
        self.slots[pos] = tag | (u64::from(id) + 1);
        self.len += 1;
        None
    }

    /// The number in the set for which `eq` holds, among those whose content hashed to
    /// `hash`; `None` if there is none.
    pub fn find(&self, hash: u64, eq: impl Fn(u32) -> bool) -> Option<u32> {
        let tag = hash & !0xffff_ffff;
        let mut pos = hash as usize & self.mask;
        loop {
            let slot = self.slots[pos];
            if slot == 0 {
                return None;
            }
            if slot & !0xffff_ffff == tag {
                let found = (slot as u32).wrapping_sub(1);
                if eq(found) {
                    return Some(found);
                }
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Empties the set, keeping its slots.
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// Loads the slots where lookups of `hashes` start, one after the other, so that the
    /// lookups made soon after find them in the cache. On the largest nets the table is larger
    /// than the cache and nearly every lookup waits for memory; made one gate at a time, those
    /// waits follow one another, while these loads, with nothing between them, are waited for
    /// together. (Loads and not prefetch instructions, which would need `unsafe`.)
    pub fn touch(&self, hashes: &[u64]) {
        for &h in hashes {
            std::hint::black_box(self.slots[h as usize & self.mask]);
        }
    }

    fn grow(&mut self, rehash: &impl Fn(u32) -> u64) {
        let bigger = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        self.mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|&s| s != 0) {
            let id = (slot as u32).wrapping_sub(1);
            let mut pos = rehash(id) as usize & self.mask;
            while self.slots[pos] != 0 {
                pos = (pos + 1) & self.mask;
            }
            self.slots[pos] = slot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Interner;

    /// Interns `values` (the content of number `i` is `values[i]`) into a table sized for
    /// `capacity`, with `hash` as the hash of a value; returns what each number became.
    fn intern(values: &[u64], capacity: usize, hash: impl Fn(u64) -> u64) -> Vec<u32> {
        let mut table = Interner::with_capacity(capacity);
        let mut kept: Vec<u64> = Vec::new();
        let mut ids = Vec::new();
        for &v in values {
            let id = kept.len() as u32;
            let found =
                table.find_or_insert(hash(v), id, |x| kept[x as usize] == v, |x| hash(kept[x as usize]));
            ids.push(found.unwrap_or_else(|| {
                kept.push(v);
                id
            }));
        }
        ids
    }

    #[test]
    fn equal_contents_get_one_number_through_growth_and_collisions() {
        let values: Vec<u64> = (0..5000u64).map(|i| (i * 7919) % 1237).collect();
        // The first number each value got, computed without a table.
        let mut first = std::collections::HashMap::new();
        let expected: Vec<u32> = values
            .iter()
            .map(|&v| {
                let next = first.len() as u32;
                *first.entry(v).or_insert(next)
            })
            .collect();
        let mix = |v: u64| v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // Sized for all of them, grown from a small table, and with every hash alike (so
        // that only the comparison tells values apart), and alike in its low half only.
        assert_eq!(intern(&values, 5000, mix), expected);
        assert_eq!(intern(&values, 1, mix), expected);
        assert_eq!(intern(&values, 1, |_| 42), expected);
        assert_eq!(intern(&values, 1, |v| mix(v) << 32), expected);
        assert_eq!(first.len(), 1237);
    }

    #[test]
    fn a_cleared_set_holds_nothing_it_held() {
        let mut table = Interner::with_capacity(100);
        let hash = |v: u64| v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for v in 0..100u64 {
            assert_eq!(
                table.find_or_insert(hash(v), v as u32, |x| u64::from(x) == v, |x| hash(u64::from(x))),
                None
            );
        }
        assert_eq!(
            table.find_or_insert(hash(7), 500, |x| x == 7, |x| hash(u64::from(x))),
            Some(7)
        );
        table.clear();
        // The same contents again, under other numbers: none is found, each is inserted.
        for v in 0..100u64 {
            let id = v as u32 + 1000;
            assert_eq!(
                table.find_or_insert(hash(v), id, |x| x == id, |x| hash(u64::from(x - 1000))),
                None
            );
        }
        assert_eq!(
            table.find_or_insert(hash(7), 500, |x| x == 1007, |x| hash(u64::from(x - 1000))),
            Some(1007)
        );
    }
}
