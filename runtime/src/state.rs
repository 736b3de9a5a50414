//! [`PackedState`]: a game state as a packed bitmask of base propositions.

use crate::program::Layout;

/// A game state: bit `i` (word `i / 64`, position `i % 64`) says whether base `i` holds.
///
/// Every propnet engine stores states this way, so a state is small, cheap to hash and compare,
/// and the same value whichever engine produced it. Bits past the last base are always clear in
/// states an engine hands out; a state built with [`PackedState::from_words`] should keep them
/// clear too, or it will not compare equal to the same state computed by an engine.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct PackedState {
    words: Box<[u64]>,
}

impl PackedState {
    /// The state of `bases` bases in which none holds.
    pub fn empty(bases: usize) -> PackedState {
        PackedState {
            words: vec![0; Layout::words(bases)].into_boxed_slice(),
        }
    }

    /// The state with the given packed words.
    pub fn from_words(words: impl Into<Box<[u64]>>) -> PackedState {
        PackedState { words: words.into() }
    }

    /// The packed words.
    #[inline]
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Whether base `base` holds; false for a base beyond the state's words.
    #[inline]
    pub fn get(&self, base: usize) -> bool {
        self.words
            .get(base / 64)
            .is_some_and(|w| w >> (base % 64) & 1 == 1)
    }

    /// Sets whether base `base` holds. Returns false, changing nothing, if the base is beyond
    /// the state's words.
    pub fn set(&mut self, base: usize, value: bool) -> bool {
        let Some(word) = self.words.get_mut(base / 64) else {
            return false;
        };
        let mask = 1u64 << (base % 64);
        if value {
            *word |= mask;
        } else {
            *word &= !mask;
        }
        true
    }

    /// The bases that hold, ascending.
    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(w * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_and_ones_agree() {
        let mut s = PackedState::empty(130);
        assert_eq!(s.words().len(), 3);
        for b in [0, 63, 64, 129] {
            assert!(s.set(b, true));
        }
        assert!(!s.set(192, true), "a base beyond the words is refused");
        assert!(s.get(63) && s.get(64) && !s.get(65) && !s.get(500));
        assert_eq!(s.iter_ones().collect::<Vec<_>>(), vec![0, 63, 64, 129]);
        assert!(s.set(63, false));
        assert_eq!(s.iter_ones().collect::<Vec<_>>(), vec![0, 64, 129]);
    }
}
