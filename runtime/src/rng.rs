//! A small seeded random number generator (xoshiro256++ seeded through SplitMix64).
//!
//! propjet owns its generator instead of borrowing one so that the same seed gives the same
//! playouts on every engine and in every release: reproducibility is part of the API.

/// A seeded, reproducible random number generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix64(*x)
}

/// The SplitMix64 finalizer: a bijection of `u64` in which every input bit affects every
/// output bit.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// The generator of rollout `index` of a seeded batch: [`Rng::new`] of a hash of `seed` and
    /// `index`. Every playout driver gives rollout `i` this generator and draws from it exactly
    /// as [`random_playout`](crate::random_playout) does, so the same seed gives the same set of
    /// rollouts on every engine, however they are spread over lanes and threads.
    ///
    /// The index is hashed rather than added to the seed: `Rng::new` seeds its four words from
    /// consecutive SplitMix64 steps, so seeds a fixed step apart would share most of their state.
    pub fn for_rollout(seed: u64, index: u64) -> Rng {
        Rng::new(mix64(seed ^ mix64(index.wrapping_add(0x632B_E59B_D9B4_E019))))
    }

    /// The next 64 uniformly random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniformly random integer in `0..n`, exactly uniform (no modulo bias), by Lemire's
    /// multiply-and-reject method. `n` must not be zero.
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        assert!(n > 0, "Rng::below(0) has no value to return");
        let n64 = u64::from(n);
        let mut m = u64::from(self.next_u64() as u32) * n64;
        let mut low = m as u32;
        if low < n {
            // Reject the few products that would over-represent some values.
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = u64::from(self.next_u64() as u32) * n64;
                low = m as u32;
            }
        }
        (m >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_different_seeds_differ() {
        let a: Vec<u64> = (0..8).scan(Rng::new(42), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..8).scan(Rng::new(42), |r, _| Some(r.next_u64())).collect();
        let c: Vec<u64> = (0..8).scan(Rng::new(43), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_covers_it_evenly() {
        let mut rng = Rng::new(1);
        let n = 7u32;
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            let v = rng.below(n);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        // Each bucket expects 10,000; six standard deviations is about 570.
        for c in counts {
            assert!((9_400..10_600).contains(&c), "uneven bucket {c} in {counts:?}");
        }
        assert_eq!(rng.below(1), 0);
    }

    #[test]
    fn below_is_unbiased_for_a_range_near_two_to_the_32() {
        // With n = 3·2^30 a modulo reduction would give the lower third of the range twice the
        // weight of the rest; the rejection step must remove that skew.
        let mut rng = Rng::new(9);
        let n = 3u32 << 30;
        let trials = 60_000;
        let low = (0..trials).filter(|_| rng.below(n) < (1 << 30)).count();
        // Unbiased: a third of the draws; biased: a half.
        assert!(
            (19_000..21_000).contains(&low),
            "low third drawn {low} times of {trials}"
        );
    }

    #[test]
    fn below_one_makes_exactly_one_draw() {
        // The lane drivers play a lane's only legal move without calling `below(1)` and advance
        // its generator by one `next_u64` instead; that must be the same thing.
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        for _ in 0..1000 {
            assert_eq!(a.below(1), 0);
            b.next_u64();
        }
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn rollout_generators_differ_by_seed_and_index() {
        let first = |seed, index| Rng::for_rollout(seed, index).next_u64();
        assert_eq!(first(1, 2), first(1, 2));
        assert_ne!(first(1, 2), first(1, 3));
        assert_ne!(first(1, 2), first(2, 2));
        // Seed and index are not interchangeable.
        assert_ne!(first(1, 2), first(2, 1));
    }
}
