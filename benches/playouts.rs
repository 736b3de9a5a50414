//! Interpreter speed on the shipped games: random playouts through `Machine`, and one `eval` of
//! each entry on 64 lanes. `cargo bench --bench playouts`.
//!
//! Before anything is timed, the interpreter plays seeded games in lockstep with the reference
//! evaluator and must agree with it at every state, so a fast wrong interpreter cannot look good.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use propjet::compare;
use propjet::compile::{self, Options};
use propjet::gdl;
use propjet::reference::Reference;
use propjet_runtime::{random_playout, Entry, Interpreter, Machine, Rng};
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

criterion_group!(benches, playouts);
criterion_main!(benches);
