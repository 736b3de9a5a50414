//! Native code against the interpreter, undisturbed by other processes:
//! `cargo bench --bench native_ratio [-- GAME[:ENTRY]...]`.
//!
//! On a machine shared with other work, a throughput measured over a second says as much about
//! the other processes as about the code. This bench times many short batches of calls (about
//! 20 µs each, well under a scheduler time slice) and keeps each engine's fastest batch: a batch
//! that nobody interrupted, which is reproducible to a few percent under load. The engines and
//! the lowering variants alternate in rounds in one process, so they see the same machine.
//!
//! For each game and entry (`next` unless `:legal`, `:terminal`, `:goals` or `:view` follows the
//! name, or `:step`, a playout step: legal, terminal, goals and next run on the same states one
//! after the other, each state counted once; by default connectFour, breakthrough, speedChess next
//! and legal, speedChess's step, reversi and hex from `../shared/games`), it prints the
//! interpreter's states per second at 64 lanes, and for each lowering variant the ratio of native
//! code at 64 and 128 lanes to it, with the lowering time. The variants: `default` (the default
//! options), `shared` (every entry running the chunks of the gates it needs, the view's included,
//! as before entries got chunks of their own), `separate` (every entry with chunks of its own),
//! `noroot` (no `fold_shared`: wide folds read twice keep their loads out of the operations),
//! `nowindow` (also every slot addressed from the array's start, no base register following the
//! stores), `nosink` (no gate folded into the wide gate reading it as it is computed: see `sink` in
//! `lower::Options`), `cluster64` (x86-64's 64-lane code with clusters and partial values too, as
//! the 128-lane code: see `cluster_x64`), `every` (also every gate stored into its slot, as before
//! gates read only within their chunk stayed in registers) and `plain` (also computing one gate at
//! a time, no gate in part: the code before clusters and partial values).
//!
//! Before timing, each variant's outputs are compared with the interpreter's on random arrays,
//! so a fast wrong engine cannot look good.

#[allow(dead_code)]
#[path = "../tests/common/differential.rs"]
mod differential;

use differential::first_difference;
use propjet::lower::{self, Options, Sharing};
use propjet::{compile, gdl};
use propjet_runtime::{Entry, Interpreter, Lanes, Native, Program, Rng, Width};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The length of one timed batch.
const BATCH: Duration = Duration::from_micros(20);
/// Batches per engine per round.
const BATCHES: usize = 500;
/// Rounds over all engines.
const ROUNDS: usize = 8;

/// Runs `call` in batches of about [`BATCH`] and lowers `best` to the fastest time per call.
fn fastest(mut call: impl FnMut(), best: &mut f64) {
    call();
    let start = Instant::now();
    call();
    let one = start.elapsed().as_secs_f64().max(1e-8);
    let per_batch = ((BATCH.as_secs_f64() / one) as usize).max(1);
    for _ in 0..BATCHES {
        let start = Instant::now();
        for _ in 0..per_batch {
            call();
        }
        *best = best.min(start.elapsed().as_secs_f64() / per_batch as f64);
    }
}

fn variants() -> Vec<(&'static str, Options)> {
    let default = Options {
        verifier: false,
        threads: 1,
        ..Options::default()
    };
    let unrooted = Options {
        fold_shared: false,
        ..default.clone()
    };
    let unwindowed = Options {
        window: false,
        ..unrooted.clone()
    };
    let every = Options {
        store_every_gate: true,
        ..unwindowed.clone()
    };
    let plain = Options {
        cluster: 1,
        partial: false,
        ..every.clone()
    };
    let shared = Options {
        sharing: Sharing::Shared,
        ..default.clone()
    };
    let separate = Options {
        sharing: Sharing::Separate,
        ..default.clone()
    };
    let unsunk = Options {
        sink: false,
        ..default.clone()
    };
    let clustered = Options {
        cluster_x64: true,
        ..default.clone()
    };
    let all = vec![
        ("default", default),
        ("nosink", unsunk),
        ("cluster64", clustered),
        ("shared", shared),
        ("separate", separate),
        ("noroot", unrooted),
        ("nowindow", unwindowed),
        ("every", every),
        ("plain", plain),
    ];
    // `PROPJET_VARIANTS=default,nosink` keeps only the variants named.
    match std::env::var("PROPJET_VARIANTS") {
        Ok(names) => all
            .into_iter()
            .filter(|(name, _)| names.split(',').any(|n| n == *name))
            .collect(),
        Err(_) => all,
    }
}

/// Random words in every base and input slot of `lanes`.
fn randomize(program: &Program, lanes: &mut Lanes, seed: u64) {
    let mut rng = Rng::new(seed);
    for slot in 2..program.first_gate_slot() as u32 {
        if let Some(words) = lanes.slot_mut(slot) {
            for w in words {
                *w = rng.next_u64();
            }
        }
    }
}

/// Whether `native` computes what the interpreter computes for `entry` on random words in every
/// slot, at 64 lanes and at 128 (each half compared), on every slot the entry must leave as the
/// interpreter does (its outputs and the slots outside it).
fn agrees(interp: &Interpreter, native: &Native, entry: Entry) -> bool {
    let program = interp.program();
    let mut rng = Rng::new(99);
    let mut expected: Vec<u64> = (0..program.num_slots()).map(|_| rng.next_u64()).collect();
    expected[0] = 0;
    expected[1] = u64::MAX;
    let mut got = expected.clone();
    if interp.eval(entry, &mut expected).is_err() || native.eval(entry, &mut got).is_err() {
        return false;
    }
    if first_difference(program, entry, "64 lanes", &expected, &got).is_err() {
        return false;
    }
    let Ok(mut lanes) = native.lanes(Width::X128) else {
        return true;
    };
    for w in lanes.words_mut() {
        *w = rng.next_u64();
    }
    let before = lanes.words().to_vec();
    if native.eval_lanes(entry, &mut lanes).is_err() {
        return false;
    }
    (0..2).all(|half| {
        let mut values: Vec<u64> = (0..program.num_slots()).map(|s| before[s * 2 + half]).collect();
        values[0] = 0;
        values[1] = u64::MAX;
        let got: Vec<u64> = (0..program.num_slots())
            .map(|s| lanes.words()[s * 2 + half])
            .collect();
        interp.eval(entry, &mut values).is_ok()
            && first_difference(program, entry, "128 lanes", &values, &got).is_ok()
    })
}

/// The entries an entry name stands for: one, or the four of a playout step for `step`.
fn entries_named(name: &str) -> Option<Vec<Entry>> {
    if name.eq_ignore_ascii_case("step") {
        return Some(propjet::measure::STEP.to_vec());
    }
    Entry::ALL
        .into_iter()
        .find(|e| format!("{e:?}").eq_ignore_ascii_case(name))
        .map(|e| vec![e])
}

fn measure(game: &str, label: &str, entries: &[Entry]) -> Result<(), String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../shared/games/{game}.kif"));
    let desc = gdl::load(&path).map_err(|e| e.to_string())?;
    let compiled =
        compile::compile(&desc, &compile::Options::default()).map_err(|e| format!("{game}: {e}"))?;
    let program = Arc::new(compiled.program);
    let interp = Interpreter::new(Arc::clone(&program)).map_err(|e| e.to_string())?;
    let mut values = vec![0u64; program.num_slots()];
    let mut rng = Rng::new(7);
    for v in &mut values[2..program.first_gate_slot()] {
        *v = rng.next_u64();
    }
    values[1] = u64::MAX;
    let mut engines = Vec::new();
    for (name, options) in variants() {
        let start = Instant::now();
        let lowered = lower::lower(Arc::clone(&program), &options).map_err(|e| e.to_string())?;
        let time = start.elapsed();
        if !entries
            .iter()
            .all(|&entry| agrees(&interp, &lowered.native, entry))
        {
            return Err(format!("{game}: the {name} code disagrees with the interpreter"));
        }
        let native = lowered.native;
        let mut narrow = native.lanes(Width::X64).map_err(|e| e.to_string())?;
        randomize(&program, &mut narrow, 11);
        let wide = native.lanes(Width::X128).ok().map(|mut lanes| {
            randomize(&program, &mut lanes, 12);
            lanes
        });
        engines.push((name, native, narrow, wide, time, [f64::MAX; 2]));
    }
    let mut interp_best = f64::MAX;
    for _ in 0..ROUNDS {
        fastest(
            || {
                for &entry in entries {
                    let _ = interp.eval(entry, black_box(&mut values));
                }
            },
            &mut interp_best,
        );
        for (_, native, narrow, wide, _, best) in &mut engines {
            fastest(
                || {
                    for &entry in entries {
                        let _ = native.eval_lanes(entry, black_box(&mut *narrow));
                    }
                },
                &mut best[0],
            );
            if let Some(wide) = wide {
                fastest(
                    || {
                        for &entry in entries {
                            let _ = native.eval_lanes(entry, black_box(&mut *wide));
                        }
                    },
                    &mut best[1],
                );
            }
        }
    }
    let interp_rate = 64.0 / interp_best;
    print!("{game} {label}: interp {:.2} M states/s", interp_rate / 1e6);
    for (name, _, _, wide, time, best) in &engines {
        print!(" | {name}: {:.2}x", 64.0 / best[0] / interp_rate);
        if wide.is_some() {
            print!(" {:.2}x", 128.0 / best[1] / interp_rate);
        }
        print!(" (lowered in {} ms)", time.as_millis());
    }
    println!();
    Ok(())
}

fn main() {
    // Cargo passes `--bench` to a bench without a harness; every other argument names a game.
    let mut games: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if games.is_empty() {
        games = [
            "connectFour",
            "breakthrough",
            "speedChess",
            "speedChess:legal",
            "speedChess:step",
            "reversi",
            "hex",
        ]
        .map(String::from)
        .to_vec();
    }
    for spec in &games {
        let (game, entry) = spec.split_once(':').unwrap_or((spec, "next"));
        let Some(entries) = entries_named(entry) else {
            eprintln!("{spec}: no entry named {entry}");
            continue;
        };
        if let Err(e) = measure(game, entry, &entries) {
            eprintln!("{e}");
        }
    }
}
