//! Playout speed on the shipped games, `cargo bench --bench playouts`:
//! - interpreter playouts through `Machine`, and one `eval` of each entry on 64 lanes; before
//!   they are timed, the interpreter plays seeded games in lockstep with the reference evaluator
//!   and must agree with it at every state;
//! - batches of seeded rollouts on every engine (the reference through `InputOrder`, the
//!   interpreter and native code through `Machine`, the interpreter's 64 lanes, native code on
//!   one lane and on 64 and 128 lanes), in rollouts per second; before any is timed, each
//!   engine's totals of the batch (goal sums, state changes, fingerprint) must equal the
//!   interpreter's, so a fast wrong engine cannot look good.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use propjet::compare;
use propjet::compile::{self, Options};
use propjet::gdl;
use propjet::lower;
use propjet::reference::Reference;
use propjet::reference::Reference as Ref;
use propjet_runtime::{
    lane_rollouts, machine_rollouts, random_playout, Entry, GoalRule, InputOrder, Interpreter, LaneEngine,
    Machine, Plan, Rng, RolloutSource, Stall, Totals, Width,
};
use std::hint::black_box;
use std::path::Path;

const GAMES: &[&str] = &[
    "tictactoe",
    "connectfour",
    "breakthrough",
    "doubletictactoe",
    "race",
];

fn playouts(c: &mut Criterion) {
    for game in GAMES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("games")
            .join(format!("{game}.kif"));
        let text = std::fs::read_to_string(&path).expect("a shipped game is readable");
        let desc = gdl::parse(&text).expect("valid GDL");
        let compiled = compile::compile(&desc, &Options::default()).expect("a shipped game compiles");
        let interp = Interpreter::new(compiled.program).expect("the compiler's program is valid");
        let reference = Reference::new(&desc).expect("the reference accepts a shipped game");
        let mut engines = vec![compare::cursor(&reference), compare::cursor(&interp)];
        let report = compare::lockstep(&mut engines, 10, 1, 1000).expect("lockstep runs");
        assert!(report.is_clean(), "{game}: {report}");

        let program = interp.program().clone();
        let mut group = c.benchmark_group(*game);
        group.sample_size(20);
        group.throughput(Throughput::Elements(1));
        let start = interp.initial_state();
        group.bench_function("interp playout", |b| {
            let mut rng = Rng::new(7);
            b.iter(|| random_playout(&interp, &start, &mut rng, 1000).expect("a playout ends"))
        });
        let mut values = interp.new_values();
        let mut rng = Rng::new(8);
        for v in &mut values[2..program.first_gate_slot()] {
            *v = rng.next_u64();
        }
        for entry in [Entry::Legal, Entry::Next] {
            let gates = program.gates_of(entry).len();
            group.throughput(Throughput::Elements(gates as u64));
            group.bench_function(format!("eval {entry:?} ({gates} gates)"), |b| {
                b.iter(|| {
                    interp
                        .eval(entry, black_box(&mut values))
                        .expect("the array fits")
                })
            });
        }
        group.finish();
    }
}

/// Rollouts per timed batch, and per check.
const BATCH: u64 = 256;

fn rollouts(c: &mut Criterion) {
    for game in GAMES {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("games")
            .join(format!("{game}.kif"));
        let text = std::fs::read_to_string(&path).expect("a shipped game is readable");
        let desc = gdl::parse(&text).expect("valid GDL");
        let compiled = compile::compile(&desc, &Options::default()).expect("a shipped game compiles");
        let program = std::sync::Arc::new(compiled.program);
        let interp = Interpreter::new(program.clone()).expect("the compiler's program is valid");
        let native = lower::lower(program.clone(), &lower::Options::default())
            .expect("a shipped game lowers")
            .native;
        let reference = Ref::new(&desc).expect("the reference accepts a shipped game");
        let ordered = InputOrder::new(&reference, &program.layout);
        let start = [interp.initial_state()];
        let reference_start = [reference.initial_state()];
        let plan = Plan {
            starts: &start,
            seed: 11,
            max_depth: 10_000,
            goals: GoalRule::Exact,
            stall: Stall::Error,
        };
        let reference_plan = Plan {
            starts: &reference_start,
            seed: plan.seed,
            max_depth: plan.max_depth,
            goals: plan.goals,
            stall: plan.stall,
        };
        let mut lanes = vec![
            ("interp lanes 64", LaneEngine::Interp(&interp), 64),
            ("native single", LaneEngine::Native(&native, Width::X64), 1),
            ("native lanes 64", LaneEngine::Native(&native, Width::X64), 64),
        ];
        if native.has_width(Width::X128) {
            lanes.push(("native lanes 128", LaneEngine::Native(&native, Width::X128), 128));
        }

        // Check first: every engine's totals of the batch equal the interpreter's.
        let batch = || RolloutSource::count(BATCH);
        let want = machine_rollouts(&interp, &plan, &batch()).expect("the interpreter plays the batch");
        let check =
            |name: &str, got: Totals| assert_eq!(got, want, "{game}: {name} disagrees with the interpreter");
        // The reference takes minutes for a batch of the larger games; it is checked and timed
        // on the small ones.
        let small = program.num_gates() <= 2_000;
        if small {
            check(
                "reference",
                machine_rollouts(&ordered, &reference_plan, &batch()).expect("plays"),
            );
        }
        check(
            "native machine",
            machine_rollouts(&native, &plan, &batch()).expect("plays"),
        );
        for &(name, engine, count) in &lanes {
            check(
                name,
                lane_rollouts(engine, &plan, &batch(), count, false)
                    .expect("plays")
                    .0,
            );
        }

        let mut group = c.benchmark_group(format!("{game} rollouts"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(BATCH));
        if small {
            group.bench_function("reference", |b| {
                b.iter(|| machine_rollouts(&ordered, &reference_plan, &batch()).expect("plays"))
            });
        }
        group.bench_function("interp", |b| {
            b.iter(|| machine_rollouts(&interp, &plan, &batch()).expect("plays"))
        });
        for &(name, engine, count) in &lanes {
            group.bench_function(name, |b| {
                b.iter(|| lane_rollouts(engine, &plan, &batch(), count, false).expect("plays"))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, playouts, rollouts);
criterion_main!(benches);
