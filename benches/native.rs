//! Native code against the interpreter, with criterion: `cargo bench --bench native`.
//!
//! On random programs of 1k, 10k and 100k gates (the generator of the tests): the lowering time
//! (reported per gate) of the host's default code generator and of Cranelift with either
//! register allocator, and the next-state entry on full lane batches, interpreted (64 lanes)
//! and native (64 and 128 lanes), in gate-lane evaluations per second.
//!
//! On the corpus games connectFour, breakthrough and speedChess (from `../shared/games`, when
//! present and when they compile): parse→native time, and in state evaluations per second the
//! next-state entry and a playout step (legal, terminal, goals and next run on the same states,
//! `propjet::measure::STEP`): the interpreter and native code on full lane batches, and both
//! engines' single-state `Machine::next_state_unchecked`.
//!
//! Before timing, each program's native outputs are checked against the interpreter's, so a
//! fast wrong engine cannot look good.

#[path = "../tests/common/random_program.rs"]
mod random_program;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use propjet::lower::{self, Backend, Options, Regalloc};
use propjet::measure::STEP;
use propjet_runtime::{Entry, Interpreter, Machine, Rng, Width};
use random_program::{random_program, Shape};
use std::hint::black_box;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// The values of `entry`'s outputs in `values`: what the engines must agree on (native code
/// keeps in registers the gates that only their own chunk reads, so other slots may differ).
fn outputs(program: &propjet_runtime::Program, entry: Entry, values: &[u64]) -> Vec<u64> {
    program
        .outputs(entry)
        .iter()
        .map(|&lit| Interpreter::read(values, lit).expect("in range"))
        .collect()
}

fn release_options() -> Options {
    Options {
        verifier: false,
        ..Options::default()
    }
}

fn lowering(c: &mut Criterion) {
    let mut group = c.benchmark_group("lower");
    group.sample_size(10);
    for gates in SIZES {
        let program = std::sync::Arc::new(random_program(&Shape::sized(500, gates), 1));
        // Every entry at both widths is lowered; count the gates actually compiled.
        let lowered_gates = lower::lower(program.clone(), &release_options())
            .expect("lowers")
            .stats
            .gates;
        group.throughput(Throughput::Elements(lowered_gates as u64));
        for (name, regalloc, backend) in [
            ("default", Regalloc::Backtracking, Backend::Auto),
            (
                "cranelift_backtracking",
                Regalloc::Backtracking,
                Backend::Cranelift,
            ),
            ("cranelift_single_pass", Regalloc::SinglePass, Backend::Cranelift),
        ] {
            let options = Options {
                regalloc,
                backend,
                ..release_options()
            };
            group.bench_function(format!("{gates}/{name}"), |b| {
                b.iter(|| lower::lower(black_box(program.clone()), &options).expect("lowers"))
            });
        }
    }
    group.finish();
}

fn evaluation(c: &mut Criterion) {
    let mut group = c.benchmark_group("next");
    for gates in SIZES {
        let program = std::sync::Arc::new(random_program(&Shape::sized(500, gates), 1));
        let interp = Interpreter::new(program.clone()).expect("valid");
        let native = lower::lower(program.clone(), &release_options())
            .expect("lowers")
            .native;
        let entry_gates = program.gates_of(Entry::Next).len() as u64;
        let mut rng = Rng::new(7);
        let start: Vec<u64> = (0..program.num_slots()).map(|_| rng.next_u64()).collect();

        // Check before timing: the same outputs from both engines.
        let (mut want, mut got) = (start.clone(), start.clone());
        interp.eval(Entry::Next, &mut want).expect("evaluates");
        native.eval(Entry::Next, &mut got).expect("evaluates");
        assert_eq!(
            outputs(&program, Entry::Next, &want),
            outputs(&program, Entry::Next, &got),
            "native and interpreted next disagree on {gates} gates"
        );

        group.throughput(Throughput::Elements(entry_gates * 64));
        let mut values = start.clone();
        group.bench_function(format!("{gates}/interp64"), |b| {
            b.iter(|| {
                interp
                    .eval(Entry::Next, black_box(&mut values))
                    .expect("evaluates")
            })
        });
        group.bench_function(format!("{gates}/native64"), |b| {
            b.iter(|| {
                native
                    .eval(Entry::Next, black_box(&mut values))
                    .expect("evaluates")
            })
        });
        group.throughput(Throughput::Elements(entry_gates * 128));
        let mut lanes = native.lanes(Width::X128).expect("128 lanes on this host");
        for (slot, &word) in start.iter().enumerate() {
            if let Some(words) = lanes.slot_mut(slot as u32) {
                words.fill(word);
            }
        }
        group.bench_function(format!("{gates}/native128"), |b| {
            b.iter(|| {
                native
                    .eval_lanes(Entry::Next, black_box(&mut lanes))
                    .expect("evaluates")
            })
        });
    }
    group.finish();
}

const GAMES: [&str; 3] = ["connectFour", "breakthrough", "speedChess"];

/// The game's description and compiled program, or a note saying why not.
fn corpus_game(name: &str) -> Option<(String, std::sync::Arc<propjet_runtime::Program>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../shared/games/{name}.kif"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("note: {} not read ({e}); skipped", path.display());
            return None;
        }
    };
    let desc = propjet::gdl::parse(&text).expect("a corpus game parses");
    match propjet::compile::compile(&desc, &propjet::compile::Options::default()) {
        Ok(compiled) => Some((text, std::sync::Arc::new(compiled.program))),
        Err(e) => {
            eprintln!("note: {name} does not compile ({e}); skipped");
            None
        }
    }
}

fn games(c: &mut Criterion) {
    for name in GAMES {
        let Some((text, program)) = corpus_game(name) else {
            continue;
        };
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        group.bench_function("parse_to_native", |b| {
            b.iter(|| {
                let desc = propjet::gdl::parse(black_box(&text)).expect("parses");
                let compiled = propjet::compile::compile(&desc, &propjet::compile::Options::default())
                    .expect("compiles");
                lower::lower(compiled.program, &release_options()).expect("lowers")
            })
        });
        group.sample_size(30);
        let interp = Interpreter::new(program.clone()).expect("valid");
        let native = lower::lower(program.clone(), &release_options())
            .expect("lowers")
            .native;
        let mut rng = Rng::new(3);
        let start: Vec<u64> = (0..program.num_slots()).map(|_| rng.next_u64()).collect();
        for entry in STEP {
            let (mut want, mut got) = (start.clone(), start.clone());
            interp.eval(entry, &mut want).expect("evaluates");
            native.eval(entry, &mut got).expect("evaluates");
            assert_eq!(
                outputs(&program, entry, &want),
                outputs(&program, entry, &got),
                "{name}: the engines disagree on {entry:?}"
            );
        }

        // Full lane batches: throughput in states.
        group.throughput(Throughput::Elements(64));
        let mut values = start.clone();
        group.bench_function("next/interp64", |b| {
            b.iter(|| {
                interp
                    .eval(Entry::Next, black_box(&mut values))
                    .expect("evaluates")
            })
        });
        group.bench_function("next/native64", |b| {
            b.iter(|| {
                native
                    .eval(Entry::Next, black_box(&mut values))
                    .expect("evaluates")
            })
        });
        group.throughput(Throughput::Elements(128));
        let mut lanes = native.lanes(Width::X128).expect("128 lanes on this host");
        group.bench_function("next/native128", |b| {
            b.iter(|| {
                native
                    .eval_lanes(Entry::Next, black_box(&mut lanes))
                    .expect("evaluates")
            })
        });
        // A playout step on full lane batches, each state counted once.
        group.throughput(Throughput::Elements(64));
        group.bench_function("step/interp64", |b| {
            b.iter(|| {
                for entry in STEP {
                    interp.eval(entry, black_box(&mut values)).expect("evaluates");
                }
            })
        });
        group.bench_function("step/native64", |b| {
            b.iter(|| {
                for entry in STEP {
                    native.eval(entry, black_box(&mut values)).expect("evaluates");
                }
            })
        });
        group.throughput(Throughput::Elements(128));
        group.bench_function("step/native128", |b| {
            b.iter(|| {
                for entry in STEP {
                    native
                        .eval_lanes(entry, black_box(&mut lanes))
                        .expect("evaluates");
                }
            })
        });
        // One state per call through the Machine API.
        group.throughput(Throughput::Elements(1));
        let state = interp.initial_state();
        let joint: Vec<propjet_runtime::MoveIdx> = (0..interp.roles().len())
            .map(|r| interp.legal_moves(&state, propjet_runtime::RoleIdx(r as u32))[0])
            .collect();
        assert_eq!(
            interp.next_state_unchecked(&state, &joint),
            native.next_state_unchecked(&state, &joint)
        );
        group.bench_function("next/interp_single", |b| {
            b.iter(|| interp.next_state_unchecked(black_box(&state), &joint))
        });
        group.bench_function("next/native_single", |b| {
            b.iter(|| native.next_state_unchecked(black_box(&state), &joint))
        });
        group.finish();
    }
}

criterion_group!(benches, lowering, evaluation, games);
criterion_main!(benches);
