//! Interpreter speed: gates per second of `eval` on a large synthetic net, and the cost of the
//! Machine calls on hand-built tic-tac-toe and on the synthetic net. Each benchmark checks its
//! results before it is timed, so a fast wrong interpreter cannot look good.
//!
//! Run with `cargo bench -p propjet-runtime --bench interp`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use propjet_runtime::{
    random_playout, Entry, Gate, Interpreter, Layout, Lit, Machine, MoveIdx, Op, PackedState, Program, Rng,
    RoleIdx,
};

/// A net shaped roughly like a compiled game: the first half of the gates reads only bases
/// (it feeds legal, terminal and goals), the second half reads anything below it (it feeds
/// next). Fan-in is mostly two, sometimes up to sixteen; half the operands are local.
fn synthetic(bases: usize, inputs_per_role: usize, gates: usize, seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let roles = 2;
    let mut layout = Layout {
        roles: vec!["a".to_string(), "b".to_string()],
        bases: (0..bases).map(|i| format!("(b {i})")).collect(),
        constant_facts: vec![],
        inputs: vec![],
        role_inputs: vec![],
        goals: (0..10).map(|g| (RoleIdx(g % 2), g * 10)).collect(),
        views: vec![],
    };
    for r in 0..roles {
        let start = layout.inputs.len() as u32;
        for i in 0..inputs_per_role {
            layout.inputs.push((RoleIdx(r), format!("(m {i})")));
        }
        layout.role_inputs.push(start..layout.inputs.len() as u32);
    }
    let first_input = 2 + bases;
    let first_gate = first_input + layout.inputs.len();
    // Slots the state half may read: constants, bases and its own gates.
    let mut state_slots: Vec<u32> = (0..first_input as u32).collect();
    let mut all_gates = Vec::with_capacity(gates);
    let mut operands = Vec::new();
    for g in 0..gates {
        let state_half = g < gates / 2;
        let fan_in = match rng.below(10) {
            0..=5 => 2,
            6..=8 => 3 + rng.below(2),
            _ => 5 + rng.below(12),
        };
        let start = operands.len() as u32;
        for _ in 0..fan_in {
            let slot = if state_half {
                let n = state_slots.len() as u32;
                let local = n.min(64);
                state_slots[(if rng.below(2) == 0 {
                    n - 1 - rng.below(local)
                } else {
                    rng.below(n)
                }) as usize]
            } else {
                let n = (first_gate + g) as u32;
                if rng.below(2) == 0 {
                    n - 1 - rng.below(n.min(64))
                } else {
                    rng.below(n)
                }
            };
            operands.push(if rng.below(3) == 0 {
                Lit::neg(slot)
            } else {
                Lit::pos(slot)
            });
        }
        all_gates.push(Gate {
            op: if rng.below(2) == 0 { Op::And } else { Op::Or },
            start,
            len: fan_in,
        });
        if state_half {
            state_slots.push((first_gate + g) as u32);
        }
    }
    let state_gate = |rng: &mut Rng| Lit::pos((first_gate + rng.below((gates / 2) as u32) as usize) as u32);
    let any_gate =
        |rng: &mut Rng| Lit::pos((first_gate + gates / 2 + rng.below((gates / 2) as u32) as usize) as u32);
    let legal = (0..layout.inputs.len()).map(|_| state_gate(&mut rng)).collect();
    let terminal = state_gate(&mut rng);
    let goals = (0..10).map(|_| state_gate(&mut rng)).collect();
    let next = (0..bases).map(|_| any_gate(&mut rng)).collect();
    let mut init = vec![0u64; Layout::words(bases)];
    for b in 0..bases {
        if rng.below(2) == 0 {
            init[b / 64] |= 1 << (b % 64);
        }
    }
    let mut program = Program {
        layout,
        gates: all_gates,
        operands,
        init,
        legal,
        goals,
        terminal,
        next,
        views: vec![],
        entry_gates: Default::default(),
        opaque: Default::default(),
        loops: Default::default(),
    };
    program.compute_entry_gates();
    program
}

fn bench_eval(c: &mut Criterion) {
    let interp = Interpreter::new(synthetic(1000, 200, 100_000, 1)).unwrap();
    let program = interp.program().clone();
    let mut values = interp.new_values();
    let mut rng = Rng::new(2);
    for v in &mut values[2..program.first_gate_slot()] {
        *v = rng.next_u64();
    }
    // Check: lane 5 of a 64-lane run equals a single-state run of lane 5's state and moves.
    interp.eval(Entry::Next, &mut values).unwrap();
    let state = PackedState::from_words(lane(&values[2..program.first_input_slot()], 5));
    let moves = lane(&values[program.first_input_slot()..program.first_gate_slot()], 5);
    let mut single = interp.new_values();
    interp.spread_state(&state, 0, &mut single).unwrap();
    interp.spread_inputs(&moves, 0, &mut single).unwrap();
    interp.eval(Entry::Next, &mut single).unwrap();
    assert_eq!(
        interp.pack_state(&values, 5).unwrap(),
        interp.pack_state(&single, 0).unwrap()
    );

    let mut group = c.benchmark_group("eval");
    for entry in [Entry::Legal, Entry::Next] {
        let gates = program.gates_of(entry).len();
        let operands: usize = program
            .gates_of(entry)
            .iter()
            .map(|&g| program.gates[g as usize].len as usize)
            .sum();
        eprintln!("synthetic {entry:?}: {gates} gates, {operands} operands");
        group.throughput(Throughput::Elements(gates as u64));
        group.bench_function(format!("synthetic-100k/{entry:?}"), |b| {
            b.iter(|| interp.eval(entry, black_box(&mut values)).unwrap())
        });
    }
    group.finish();
}

/// Lane `k` of `words` as a packed bitmask.
fn lane(words: &[u64], k: u32) -> Vec<u64> {
    let mut mask = vec![0; Layout::words(words.len())];
    for (i, w) in words.iter().enumerate() {
        mask[i / 64] |= (w >> k & 1) << (i % 64);
    }
    mask
}

fn bench_machine(c: &mut Criterion) {
    let ttt = Interpreter::new(common::tictactoe()).unwrap();
    let start = ttt.initial_state();
    // Check: every game ends after 5 to 9 moves and hands out 100 points in total.
    let mut rng = Rng::new(3);
    for _ in 0..1000 {
        let p = random_playout(&ttt, &start, &mut rng, 20).unwrap();
        assert!((5..=9).contains(&p.depth));
        assert_eq!(p.goals.iter().sum::<u32>(), 100);
    }
    let mut group = c.benchmark_group("machine");
    group.bench_function("tictactoe/playout", |b| {
        let mut rng = Rng::new(4);
        b.iter(|| random_playout(&ttt, &start, &mut rng, 20).unwrap())
    });

    let big = Interpreter::new(synthetic(1000, 200, 100_000, 1)).unwrap();
    let state = big.initial_state();
    let joint = [MoveIdx(3), MoveIdx(207)];
    let next = big.next_state_unchecked(&state, &joint).unwrap();
    assert_ne!(next, state, "the synthetic net changes its state");
    group.bench_function("synthetic-100k/next_state_unchecked", |b| {
        b.iter(|| big.next_state_unchecked(black_box(&state), &joint).unwrap())
    });
    // Both roles' moves in one state, alternating between two states as a playout does, so
    // that the legal bitmask cannot be reused from the previous iteration.
    let states = [state.clone(), next.clone()];
    group.bench_function("synthetic-100k/legal_moves_both_roles", |b| {
        let mut i = 0;
        b.iter(|| {
            i ^= 1;
            let s = black_box(&states[i]);
            (big.legal_moves(s, RoleIdx(0)), big.legal_moves(s, RoleIdx(1)))
        })
    });
    group.bench_function("synthetic-100k/is_terminal", |b| {
        b.iter(|| big.is_terminal(black_box(&state)))
    });
    group.finish();
}

criterion_group!(benches, bench_eval, bench_machine);
criterion_main!(benches);
