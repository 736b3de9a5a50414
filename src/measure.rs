//! Throughput of the engines on entries of a program: how many game states per second the
//! interpreter (64 lanes) and native code (64 and 128 lanes) evaluate, on random lane values.
//! A measurement runs one entry, or several one after the other on the same states (a playout
//! step: legal, terminal, goals and next, [`STEP`]), each state counted once.
//!
//! `propjet compile --stats` prints these figures. They are measurements for people to read; no
//! test asserts a speed.

use propjet_runtime::{Entry, Interpreter, Lanes, Native, NativeError, Program, Rng, Width};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The entries of one playout step, in the order a driver runs them on a state: its legal moves,
/// whether it is terminal, its goals, and the state after the joint move.
pub const STEP: [Entry; 4] = [Entry::Legal, Entry::Terminal, Entry::Goals, Entry::Next];

/// One engine's measured throughput on one entry, or on several run on the same states.
#[derive(Clone, Debug)]
pub struct Throughput {
    /// The engine: `interp` or `native`.
    pub engine: &'static str,
    /// Game states per call.
    pub lanes: u32,
    /// Rounds of calls made: each round calls every entry measured once, on the same states.
    pub calls: u64,
    /// Wall time of the calls.
    pub time: Duration,
}

impl Throughput {
    /// Game states evaluated per second.
    pub fn states_per_second(&self) -> f64 {
        self.calls as f64 * f64::from(self.lanes) / self.time.as_secs_f64().max(1e-9)
    }
}

/// Calls `call` repeatedly for about `budget` of wall time and returns how many calls were made
/// and the time they took. Calls run in batches sized so the clock is read about every
/// millisecond, which keeps the clock's own cost out of the figure.
fn time_calls(budget: Duration, mut call: impl FnMut()) -> (u64, Duration) {
    // One call first, so that page faults and cold caches do not count.
    call();
    let start = Instant::now();
    let (mut calls, mut batch) = (0u64, 1u64);
    loop {
        let before = Instant::now();
        for _ in 0..batch {
            call();
        }
        calls += batch;
        let elapsed = start.elapsed();
        if elapsed >= budget {
            return (calls, elapsed);
        }
        if before.elapsed() < Duration::from_millis(1) {
            batch = batch.saturating_mul(2);
        }
    }
}

/// A 64-lane value array with random words in the base and input slots: every lane an
/// independent random state and joint move (random inputs, so not necessarily one legal move per
/// role, and not necessarily a reachable state).
fn random_values(program: &Program, rng: &mut Rng) -> Vec<u64> {
    let mut values = vec![0; program.num_slots()];
    for v in &mut values[Program::TRUE_SLOT as usize + 1..program.first_gate_slot()] {
        *v = rng.next_u64();
    }
    values
}

/// Fills the base and input slots of `lanes` with random words, as [`random_values`] does.
fn randomize(program: &Program, lanes: &mut Lanes, rng: &mut Rng) {
    for slot in 2..program.first_gate_slot() as u32 {
        if let Some(words) = lanes.slot_mut(slot) {
            for w in words {
                *w = rng.next_u64();
            }
        }
    }
}

/// The interpreter's throughput on `entries` (run one after the other on the same values) over
/// about `budget`, on 64 random states per call.
pub fn interpreter(interp: &Interpreter, entries: &[Entry], budget: Duration, seed: u64) -> Throughput {
    let mut values = random_values(interp.program(), &mut Rng::new(seed));
    let (calls, time) = time_calls(budget, || {
        for &entry in entries {
            // The array has the program's slots, so evaluation cannot fail.
            let _ = interp.eval(entry, black_box(&mut values));
        }
    });
    Throughput {
        engine: "interp",
        lanes: 64,
        calls,
        time,
    }
}

/// Native code's throughput on `entries` (run one after the other on the same lanes) at
/// `width` over about `budget`, on random states.
pub fn native(
    native: &Native,
    entries: &[Entry],
    width: Width,
    budget: Duration,
    seed: u64,
) -> Result<Throughput, NativeError> {
    let mut lanes = native.lanes(width)?;
    randomize(native.program(), &mut lanes, &mut Rng::new(seed));
    for &entry in entries {
        native.eval_lanes(entry, &mut lanes)?;
    }
    let (calls, time) = time_calls(budget, || {
        for &entry in entries {
            // The batch was made by this game at a width it has, and every entry ran on it
            // above, so evaluation cannot fail.
            let _ = native.eval_lanes(entry, black_box(&mut lanes));
        }
    });
    Ok(Throughput {
        engine: "native",
        lanes: width.lanes(),
        calls,
        time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_calls_counts_every_call_but_the_warm_up() {
        let mut made = 0u64;
        let (calls, _) = time_calls(Duration::from_millis(5), || made += 1);
        assert!(calls >= 1);
        assert_eq!(calls + 1, made);
    }
}
