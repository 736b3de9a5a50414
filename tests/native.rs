//! Native code against the interpreter, its oracle, on random Programs of every shape: empty
//! nets, constant outputs, a single gate, fan-in of hundreds, deep chains and nets split into
//! many chunks.
//!
//! Every path is compared, on random (not only reachable) states:
//! - whole value arrays after each entry on 64 random lanes: every output (for the view entry,
//!   every view proposition) is checked, and slots outside the entry must be left as they were
//!   (the entry's other gate slots are left unspecified, `common::differential::compared_slots`);
//! - the 128-lane code, its two halves holding different random lanes;
//! - the lane API with a different state and joint move in every lane, at both widths;
//! - the single-state [`Machine`] methods.
//!
//! Programs with opaque atoms (filled by the wrapper before the entries that read them) are
//! compared the same way, and through seeded rollouts on every lane driver.

mod common;

use common::differential::{
    arrays_agree, lanes_agree, machines_agree, random_joint, random_mask, random_state,
};
use common::random_program::{random_program, with_loops, with_opaque, HashedOpaque, Shape};
use propjet::lower::{self, Backend, LowerError, Narrow, Options, Regalloc, Sharing};
use propjet_runtime::{
    lane_rollouts, machine_rollouts, Engine, Entry, Gate, GoalRule, Interpreter, LaneEngine, Lit, Machine,
    MachineError, Native, NativeError, Op, Opaque, PackedState, Plan, Program, Rng, RoleIdx, RolloutSource,
    Stall, Width,
};
use proptest::prelude::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Options for tests: the verifier on, and the given chunk budget.
fn options(chunk_cost: usize) -> Options {
    Options {
        chunk_cost,
        verifier: true,
        ..Options::default()
    }
}

fn lower_or_describe(program: &Program, options: &Options) -> Result<Native, String> {
    lower::lower(program.clone(), options)
        .map(|l| l.native)
        .map_err(|e| format!("lowering failed: {e}"))
}

/// Every comparison on one program.
fn differential(program: &Program, options: &Options, seed: u64) -> Result<(), String> {
    let interp = Interpreter::new(program.clone()).map_err(|e| format!("invalid program: {e}"))?;
    let native = lower_or_describe(program, options)?;
    if options.x128
        && !native.has_width(Width::X128)
        && cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
    {
        return Err("no 128-lane code on a host that has 128-bit vectors".to_string());
    }
    engines_agree(program, &interp, &native, seed).map(|_| ())
}

/// Native code against the interpreter on one program: whole arrays, 128 lanes of random states
/// and inputs, and `Machine` calls on eight of those states. Returns the random states, for a
/// caller that goes on to play from them.
fn engines_agree(
    program: &Program,
    interp: &Interpreter,
    native: &Native,
    seed: u64,
) -> Result<Vec<PackedState>, String> {
    let mut rng = Rng::new(seed);
    arrays_agree(program, interp, native, &mut rng)?;
    let states: Vec<PackedState> = (0..128)
        .map(|_| random_state(&mut rng, program.num_bases()))
        .collect();
    let inputs: Vec<Vec<u64>> = (0..128)
        .map(|_| random_mask(&mut rng, program.num_inputs()))
        .collect();
    lanes_agree(program, interp, native, &states, &inputs)?;
    machines_agree(program, interp, native, &states[..8], &mut rng)?;
    Ok(states)
}

fn check(program: &Program, options: &Options, seed: u64) {
    if let Err(e) = differential(program, options, seed) {
        panic!("{e}\nprogram: {program:?}");
    }
}

fn inputs_per_role() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..5, 0..4)
}

/// A shape without gates, of random roles, inputs, bases (across a word boundary), goals and
/// views.
fn no_gates() -> impl Strategy<Value = Shape> {
    (inputs_per_role(), 0usize..70, 0usize..6, 0usize..6).prop_map(|(ipr, bases, goals, views)| Shape {
        inputs_per_role: ipr,
        bases,
        gates: 0,
        max_fanin: 4,
        wide_gates: 0,
        goals,
        views,
        constant_outputs: false,
        pool: 0,
    })
}

/// Shapes of every kind the issue names.
fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        // No gate at all: outputs read constants, bases and inputs directly.
        no_gates(),
        // Every output constant, with and without gates.
        (no_gates(), 0usize..20).prop_map(|(s, gates)| Shape {
            gates,
            constant_outputs: true,
            ..s
        }),
        // A single gate.
        (no_gates(), 0usize..6).prop_map(|(s, fanin)| Shape {
            gates: 1,
            max_fanin: fanin,
            ..s
        }),
        // General small nets.
        (no_gates(), 1usize..150, 0usize..8).prop_map(|(s, gates, fanin)| Shape {
            gates,
            max_fanin: fanin,
            ..s
        }),
        // Fan-in of hundreds among ordinary gates.
        (no_gates(), 1usize..60, 1usize..4).prop_map(|(s, gates, wide)| Shape {
            gates,
            wide_gates: wide,
            ..s
        }),
        // Several wide gates and ordinary ones sharing operands from a small or a large pool,
        // so that Cranelift's code computes wide gates together and later gates in part.
        (no_gates(), 1usize..80, 2usize..10, 3usize..12, 3usize..200).prop_map(
            |(s, gates, wide, fanin, pool)| Shape {
                gates,
                wide_gates: wide,
                max_fanin: fanin,
                pool,
                ..s
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random programs of every shape, with chunk budgets from one gate per function to
    /// everything in one, from the host's default code generator (the direct one on x86-64)
    /// and from Cranelift, which keeps no value in registers across gates, one, the default
    /// number, or more than the registers (so that the register allocator spills), and
    /// computes wide gates alone, in twos or in eights, with or without later gates in part
    /// (at 64 lanes on x86-64 too, or not),
    /// storing every gate or only those read outside their chunk and the outputs, with or
    /// without a base register following the stores, with or without wide folds read twice
    /// passed through a block parameter, and with each way of sharing chunks between entries.
    #[test]
    fn native_agrees_with_the_interpreter_on_random_programs(
        shape in shape(),
        seed: u64,
        chunk_cost in prop_oneof![Just(1usize), 2usize..40, Just(16_384usize)],
        backend in prop_oneof![Just(Backend::Auto), Just(Backend::Cranelift)],
        keep in prop_oneof![Just(0usize), Just(1), Just(Options::default().keep), Just(40)],
        cluster in prop_oneof![Just(1usize), Just(2), Just(8)],
        partial: bool,
        cluster_x64: bool,
        store_every_gate: bool,
        window: bool,
        fold_shared: bool,
        sink: bool,
        sharing in prop_oneof![
            Just(Sharing::Auto), Just(Sharing::Separate), Just(Sharing::ViewApart), Just(Sharing::Shared)
        ],
        narrow in prop_oneof![Just(Narrow::Auto), Just(Narrow::FromWide)],
    ) {
        let program = random_program(&shape, seed);
        let options = Options {
            backend, keep, cluster, partial, cluster_x64, store_every_gate, window, fold_shared, sink,
            sharing, narrow, ..options(chunk_cost)
        };
        let result = differential(&program, &options, seed ^ 0x5eed);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Programs with loops (`with_loops`: bodies of one to six gates, one to three feedback
    /// slots each, some outputs reading feedback slots, entries needing some loops and not
    /// others) on native code against the interpreter, chunks small enough to cut a body into
    /// several or large enough to hold several bodies, at both backends, every sharing and
    /// both ways of running 64 lanes.
    #[test]
    fn native_runs_the_loops_of_random_programs_as_the_interpreter_does(
        shape in shape(),
        seed: u64,
        loops in 1usize..5,
        chunk_cost in prop_oneof![Just(1usize), 2usize..40, Just(16_384usize)],
        backend in prop_oneof![Just(Backend::Auto), Just(Backend::Cranelift)],
        sharing in prop_oneof![
            Just(Sharing::Auto), Just(Sharing::Separate), Just(Sharing::ViewApart), Just(Sharing::Shared)
        ],
        narrow in prop_oneof![Just(Narrow::Auto), Just(Narrow::FromWide)],
    ) {
        let program = with_loops(&random_program(&shape, seed), loops, seed);
        prop_assert!(program.validate().is_ok());
        let options = Options { backend, sharing, narrow, ..options(chunk_cost) };
        let result = differential(&program, &options, seed ^ 0x100b);
        prop_assert!(result.is_ok(), "{}", result.unwrap_err());
    }
}

/// `with_loops` makes loops of programs with gates, so that the test above tests something.
#[test]
fn random_programs_get_loops() {
    let mut with = 0;
    for seed in 0..20 {
        let program = with_loops(&random_program(&Shape::sized(20, 60), seed), 3, seed);
        with += usize::from(!program.loops.loops.is_empty());
    }
    assert!(with >= 15, "only {with} of 20 programs got loops");
}

#[test]
fn wide_gates_sharing_operands_computed_together_and_in_part() {
    // Wide gates and ordinary ones drawing half of their operands from a pool of bases and
    // inputs, in chunks large enough to hold several wide gates, so that Cranelift's code
    // computes wide gates in clusters, with blocks of shared operands, and later gates in part.
    for seed in 0..24u64 {
        let shape = Shape {
            inputs_per_role: vec![6, 9],
            wide_gates: 3 + (seed % 6) as usize,
            max_fanin: 3 + (seed % 9) as usize,
            pool: [6, 20, 60][(seed % 3) as usize],
            ..Shape::sized(40, 60 + 10 * seed as usize)
        };
        let program = random_program(&shape, seed);
        // x86-64's 64-lane code computes each gate alone unless `cluster_x64` says otherwise.
        for (cluster, partial, keep, cluster_x64) in [
            (2, true, 8, false),
            (2, true, 8, true),
            (8, true, 8, true),
            (8, false, 8, true),
            (4, true, 0, true),
            (3, true, 40, true),
        ] {
            let opts = Options {
                backend: Backend::Cranelift,
                cluster,
                partial,
                cluster_x64,
                keep,
                ..options(Options::default().chunk_cost)
            };
            check(&program, &opts, seed);
        }
    }
}

#[test]
fn every_way_of_sharing_chunks_between_entries_agrees() {
    // Each entry with chunks of its own, the view apart, everything shared, and the choice made
    // per program, with chunks from one gate up to everything in one, so that a gate one entry
    // keeps in a register is stored by the chunks another entry shares with a third.
    for seed in 0..12u64 {
        let mut shape = Shape::sized(30 + 5 * seed as usize, 150 + 40 * seed as usize);
        shape.views = 20 + 10 * seed as usize;
        let program = random_program(&shape, seed);
        for sharing in [
            Sharing::Auto,
            Sharing::Separate,
            Sharing::ViewApart,
            Sharing::Shared,
        ] {
            for chunk_cost in [1, 37, 400, Options::default().chunk_cost] {
                for backend in [Backend::Cranelift, Backend::Auto] {
                    let opts = Options {
                        sharing,
                        backend,
                        ..options(chunk_cost)
                    };
                    check(&program, &opts, seed);
                }
            }
        }
    }
}

#[test]
fn a_program_larger_than_several_default_chunks() {
    // Many views and next bits, so that their entries need most of the gates.
    let mut shape = Shape::sized(2_000, 30_000);
    shape.views = 3_000;
    let program = random_program(&shape, 11);
    let lowered = lower::lower(program.clone(), &options(Options::default().chunk_cost)).expect("lowers");
    let chunks = lowered.native.chunk_count(Entry::View, Width::X64);
    assert!(
        chunks >= 3,
        "the view entry has {chunks} chunks for {} gates; the test wants several",
        program.gates_of(Entry::View).len()
    );
    check(&program, &options(Options::default().chunk_cost), 5);
}

/// `program` with three wide gates appended, each over 70 to 90 gates of its own that are
/// ANDs of seven random literals (so that they are rarely true and the wide gate is not
/// saturated: about half of the lanes differ), mixed with gates of the program, with a base
/// or two as further operands; the terminal bit, the first next bit and the first view read
/// them, and a few of the small gates are views too. The small gates are folded into their
/// wide gate as they are computed, across chunk cuts (`sink` in `lower::Options`).
fn with_wide_gates_over_gates(program: &Program, seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let mut p = program.clone();
    let bases = p.num_bases() as u32;
    let inputs = p.num_inputs() as u32;
    let lit = |rng: &mut Rng, with_inputs: bool| {
        let choices = bases + if with_inputs { inputs } else { 0 };
        let slot = 2 + rng.below(choices);
        if rng.below(2) == 0 {
            Lit::neg(slot)
        } else {
            Lit::pos(slot)
        }
    };
    let gate = |p: &mut Program, op: Op, operands: &[Lit]| -> u32 {
        let start = p.operands.len() as u32;
        p.operands.extend_from_slice(operands);
        p.gates.push(Gate {
            op,
            start,
            len: operands.len() as u32,
        });
        (p.first_gate_slot() + p.gates.len() - 1) as u32
    };
    // (the wide gate's operation, whether its small gates are negated operands, whether they
    // may read inputs)
    let mut wide = Vec::new();
    for (op, negated, with_inputs) in [
        (Op::Or, false, false),
        (Op::Or, false, true),
        (Op::And, true, true),
    ] {
        let count = 70 + rng.below(21);
        let mut operands = Vec::new();
        for _ in 0..count {
            let ands: Vec<Lit> = (0..7).map(|_| lit(&mut rng, with_inputs)).collect();
            let h = gate(&mut p, Op::And, &ands);
            operands.push(if negated { Lit::neg(h) } else { Lit::pos(h) });
            if rng.below(8) == 0 {
                p.views.push(Lit::pos(h));
                p.layout.views.push(format!("(small {h})"));
            }
        }
        // A base in the group the small gates do not join, and one in the group they join.
        let (x, y) = (2 + rng.below(bases), 2 + rng.below(bases));
        operands.extend(if negated {
            [Lit::pos(x), Lit::neg(y)]
        } else {
            [Lit::neg(x), Lit::pos(y)]
        });
        wide.push(gate(&mut p, op, &operands));
    }
    p.terminal = Lit::pos(wide[0]);
    if let Some(n) = p.next.first_mut() {
        *n = Lit::neg(wide[1]);
    }
    if let Some(v) = p.views.first_mut() {
        *v = Lit::pos(wide[2]);
    }
    p.compute_entry_gates();
    p
}

#[test]
fn wide_gates_fold_the_gates_they_read_as_these_are_computed() {
    let mut differs = 0;
    for seed in 0..6u64 {
        let mut shape = Shape::sized(20 + 5 * seed as usize, 120 + 30 * seed as usize);
        shape.max_fanin = 3;
        shape.views = 10;
        let program = with_wide_gates_over_gates(&random_program(&shape, seed), seed);
        for sharing in [Sharing::Auto, Sharing::Separate, Sharing::Shared] {
            for chunk_cost in [1, 5, 37, 400, Options::default().chunk_cost] {
                for (keep, store_every_gate) in [(8, false), (0, false), (8, true), (1, false)] {
                    let opts = Options {
                        sharing,
                        keep,
                        store_every_gate,
                        backend: Backend::Cranelift,
                        ..options(chunk_cost)
                    };
                    check(&program, &opts, seed);
                    if chunk_cost == 400 && keep == 8 && !store_every_gate {
                        let with = lower::lower(program.clone(), &opts).expect("lowers");
                        let without = Options { sink: false, ..opts };
                        let without = lower::lower(program.clone(), &without).expect("lowers");
                        differs += usize::from(with.stats.code_bytes != without.stats.code_bytes);
                    }
                }
            }
        }
    }
    // The wide gates did change the code (each program has three).
    assert!(differs > 0, "folding gates into wide gates changed nothing");
}

#[test]
fn the_single_pass_allocator_and_64_lanes_alone_agree_too() {
    for seed in 0..8 {
        let program = random_program(&Shape::sized(70, 400), seed);
        let opts = Options {
            regalloc: Regalloc::SinglePass,
            x128: false,
            backend: Backend::Cranelift,
            ..options(100)
        };
        check(&program, &opts, seed);
        let native = lower::lower(program, &opts).expect("lowers").native;
        assert!(!native.has_width(Width::X128));
        assert_eq!(
            native.lanes(Width::X128).unwrap_err(),
            NativeError::WidthUnavailable(Width::X128)
        );
    }
}

#[test]
fn the_64_lane_calls_run_the_128_lane_code_when_only_that_is_compiled() {
    for seed in 0..8 {
        let program = random_program(&Shape::sized(70, 400), seed);
        for regalloc in [Regalloc::Backtracking, Regalloc::SinglePass] {
            let opts = Options {
                regalloc,
                narrow: Narrow::FromWide,
                backend: Backend::Cranelift,
                ..options(100)
            };
            // Every path: 64-lane arrays, both lane widths, the single-state methods.
            check(&program, &opts, seed);
            let lowered = lower::lower(program.clone(), &opts).expect("lowers");
            let native = &lowered.native;
            if !lowered.stats.x128 {
                // A host without 128-bit vectors compiles the 64-lane code instead.
                assert!(!lowered.stats.x64_from_x128);
                continue;
            }
            assert!(lowered.stats.x64_from_x128);
            assert!(native.has_width(Width::X64) && native.has_width(Width::X128));
            for entry in Entry::ALL {
                assert_eq!(native.chunk_count(entry, Width::X64), 0);
            }
            let both = lower::lower(
                program.clone(),
                &Options {
                    narrow: Narrow::Compiled,
                    ..opts
                },
            )
            .expect("lowers");
            assert_eq!(lowered.stats.gates * 2, both.stats.gates);
        }
    }
    // The default compiles both widths below the threshold.
    assert!(!Narrow::Auto.from_wide(lower::WIDE_ONLY_ABOVE));
    assert!(Narrow::Auto.from_wide(lower::WIDE_ONLY_ABOVE + 1));
}

#[test]
fn a_gate_of_a_thousand_operands_of_both_signs() {
    let mut shape = Shape::sized(64, 0);
    shape.inputs_per_role = vec![1];
    let mut program = random_program(&shape, 3);
    // One AND and one OR over every base, alternating signs, and their views.
    let operands: Vec<Lit> = (0..1000)
        .map(|i| {
            let slot = 2 + (i % 64) as u32;
            if i % 2 == 0 {
                Lit::pos(slot)
            } else {
                Lit::neg(slot)
            }
        })
        .collect();
    for op in [propjet_runtime::Op::And, propjet_runtime::Op::Or] {
        program.gates.push(propjet_runtime::Gate {
            op,
            start: program.operands.len() as u32,
            len: operands.len() as u32,
        });
        program.operands.extend_from_slice(&operands);
    }
    let first = program.first_gate_slot() as u32;
    program.views = vec![Lit::pos(first), Lit::neg(first + 1)];
    program.layout.views = vec!["(big and)".into(), "(big nor)".into()];
    program.compute_entry_gates();
    for backend in [Backend::Auto, Backend::Cranelift] {
        check(
            &program,
            &Options {
                backend,
                ..options(16_384)
            },
            9,
        );
    }
}

#[test]
fn the_direct_generator_is_chosen_on_x86_64_and_refused_elsewhere() {
    let program = random_program(&Shape::sized(40, 300), 2);
    // Cranelift is the default everywhere; `Auto` takes the direct generator where it can.
    let lowered = lower::lower(program.clone(), &options(64)).expect("lowers");
    assert_eq!(lowered.stats.backend, Backend::Cranelift);
    let direct = Options {
        backend: Backend::X64,
        ..options(64)
    };
    let auto = Options {
        backend: Backend::Auto,
        ..options(64)
    };
    if cfg!(all(target_arch = "x86_64", unix)) {
        let lowered = lower::lower(program.clone(), &auto).expect("lowers");
        assert_eq!(lowered.stats.backend, Backend::X64);
        check(&program, &direct, 3);
    } else {
        match lower::lower(program.clone(), &direct) {
            Err(LowerError::UnsupportedHost(_)) => {}
            other => panic!("expected UnsupportedHost, got {other:?}"),
        }
    }
    let cranelift = Options {
        backend: Backend::Cranelift,
        ..options(64)
    };
    let lowered = lower::lower(program.clone(), &cranelift).expect("lowers");
    assert_eq!(lowered.stats.backend, Backend::Cranelift);
}

#[test]
fn native_lanes_belong_to_one_compiled_game() {
    let program = random_program(&Shape::sized(10, 30), 1);
    let a = lower::lower(program.clone(), &options(64))
        .expect("lowers")
        .native;
    let b = lower::lower(program.clone(), &options(64))
        .expect("lowers")
        .native;
    assert_ne!(a.id(), b.id());
    let mut lanes = a.lanes(Width::X64).expect("64 lanes");
    assert_eq!(
        b.eval_lanes(Entry::Next, &mut lanes).unwrap_err(),
        NativeError::ForeignLanes {
            lanes: a.id(),
            native: b.id()
        }
    );
    let state = PackedState::from_words(vec![0]);
    assert!(matches!(
        b.set_state(&mut lanes, 0, &state),
        Err(NativeError::ForeignLanes { .. })
    ));
    assert_eq!(
        a.set_state(&mut lanes, 64, &state).unwrap_err(),
        NativeError::LaneOutOfRange { lane: 64, lanes: 64 }
    );
    assert_eq!(
        a.set_state(&mut lanes, 0, &PackedState::from_words(vec![0, 0]))
            .unwrap_err(),
        NativeError::MaskSize {
            what: "bases",
            expected: 1,
            got: 2
        }
    );
    assert_eq!(
        a.set_inputs(&mut lanes, 0, &[]).unwrap_err(),
        NativeError::MaskSize {
            what: "inputs",
            expected: 1,
            got: 0
        }
    );
    let mut short = vec![0u64; program.num_slots() - 1];
    assert_eq!(
        a.eval(Entry::Legal, &mut short).unwrap_err(),
        NativeError::ValuesTooShort {
            needed: program.num_slots(),
            got: program.num_slots() - 1
        }
    );
    let mut wide = a.lanes(Width::X128).expect("128 lanes");
    assert!(a.set_state(&mut wide, 127, &state).is_ok());
    assert_eq!(
        a.set_state(&mut wide, 128, &state).unwrap_err(),
        NativeError::LaneOutOfRange {
            lane: 128,
            lanes: 128
        }
    );
}

#[test]
fn native_is_send_and_sync_and_runs_on_several_threads_at_once() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Native>();
    send_sync::<Engine>();
    let program = random_program(&Shape::sized(40, 300), 21);
    let interp = Interpreter::new(program.clone()).expect("valid");
    let native = lower::lower(program.clone(), &options(50))
        .expect("lowers")
        .native;
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (native, interp, program) = (&native, &interp, &program);
            scope.spawn(move || {
                let mut rng = Rng::new(t);
                for _ in 0..200 {
                    let state = random_state(&mut rng, program.num_bases());
                    assert_eq!(native.is_terminal(&state), interp.is_terminal(&state));
                    let joint = random_joint(&mut rng, program).expect("every role has moves");
                    assert_eq!(
                        native.next_state_unchecked(&state, &joint),
                        interp.next_state_unchecked(&state, &joint)
                    );
                }
            });
        }
    });
}

#[test]
fn the_engine_falls_back_to_the_interpreter_past_the_limit_and_says_so() {
    let program = random_program(&Shape::sized(10, 30), 4);
    let limited = Options {
        max_gates: 29,
        ..options(64)
    };
    match lower::lower(program.clone(), &limited) {
        Err(LowerError::TooLarge { gates: 30, limit: 29 }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let engine = lower::engine(program.clone(), &limited).expect("an engine");
    assert_eq!(engine.engine_name(), "interp");
    let reason = engine.fallback_reason().expect("a reason");
    assert!(reason.contains("30 gates"), "{reason}");
    let engine = lower::engine(program.clone(), &options(64)).expect("an engine");
    assert_eq!(engine.engine_name(), "native");
    assert!(engine.fallback_reason().is_none() && engine.as_native().is_some());
    let interp = Interpreter::new(program).expect("valid");
    let state = interp.initial_state();
    assert_eq!(engine.is_terminal(&state), interp.is_terminal(&state));
}

#[test]
fn an_invalid_program_is_refused_with_the_reason() {
    let mut program = random_program(&Shape::sized(10, 30), 4);
    program.next.pop();
    match lower::lower(program, &options(64)) {
        Err(LowerError::Invalid(e)) => assert!(e.to_string().contains("next"), "{e}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

/// Random programs with opaque atoms (`common::random_program::with_opaque`, answered by a hash
/// of the state): the native wrapper fills them as the interpreter does, through every path.
/// Whole value arrays (random words in every slot, so the demand differs from lane to lane and
/// between the halves of the 128-lane code), the lane API at both widths with a different
/// state in every lane, the single-state `Machine` methods, and seeded rollouts on the lanes
/// of both engines at 64 and 128 lanes (and on fewer lanes than the width).
#[test]
fn native_fills_opaque_atoms_like_the_interpreter_on_random_programs() {
    let shapes = [
        (Shape::sized(12, 60), 5, 1),
        (Shape::sized(40, 300), 20, 2),
        (Shape::sized(70, 400), 64, 3),
        (Shape::sized(3, 8), 1, 4),
    ];
    for (shape, atoms, seed) in shapes {
        let program = with_opaque(&random_program(&shape, seed), atoms, seed);
        program
            .validate()
            .expect("the program with opaque atoms is valid");
        assert_eq!(program.num_opaque(), atoms);
        let evaluator = Arc::new(HashedOpaque::default());
        let interp =
            Interpreter::with_opaque(program.clone(), evaluator.clone()).expect("the interpreter takes it");
        let native = lower::lower_with(program.clone(), Some(evaluator.clone()), &options(50))
            .expect("lowers")
            .native;
        assert!(
            Entry::ALL.iter().any(|&e| program.entry_reads_opaque(e)),
            "seed {seed}: no entry reads an opaque atom"
        );
        let states = engines_agree(&program, &interp, &native, seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\nprogram: {program:?}"));
        // With the 64-lane calls served by the 128-lane code, the opaque slots are widened too.
        let narrow = Options {
            narrow: Narrow::FromWide,
            ..options(50)
        };
        let from_wide = lower::lower_with(program.clone(), Some(evaluator.clone()), &narrow)
            .expect("lowers")
            .native;
        engines_agree(&program, &interp, &from_wide, seed)
            .unwrap_or_else(|e| panic!("seed {seed}, 64 lanes from 128: {e}\nprogram: {program:?}"));
        assert!(
            evaluator.asked.load(Ordering::Relaxed) > 0,
            "seed {seed}: no opaque atom was asked for"
        );
        let plan = Plan {
            starts: &states[..3],
            seed,
            max_depth: 30,
            goals: GoalRule::HighestOrZero,
            stall: Stall::End,
        };
        let run = |engine: LaneEngine<'_>, lanes: u32| {
            lane_rollouts(engine, &plan, &RolloutSource::count(150), lanes, false)
                .map(|(totals, _)| totals)
                .map_err(|e| e.to_string())
        };
        let want = machine_rollouts(&interp, &plan, &RolloutSource::count(150)).map_err(|e| e.to_string());
        for (name, got) in [
            ("interpreter, 64 lanes", run(LaneEngine::Interp(&interp), 64)),
            (
                "native, 64 lanes",
                run(LaneEngine::Native(&native, Width::X64), 64),
            ),
            (
                "native, 128 lanes",
                run(LaneEngine::Native(&native, Width::X128), 128),
            ),
            (
                "native, 100 of 128 lanes",
                run(LaneEngine::Native(&native, Width::X128), 100),
            ),
            (
                "native, one state at a time",
                machine_rollouts(&native, &plan, &RolloutSource::count(150)).map_err(|e| e.to_string()),
            ),
        ] {
            assert_eq!(
                got, want,
                "seed {seed}: rollouts on {name} differ from the interpreter's"
            );
        }
        // The engine for such a program is native code, not the interpreter.
        let engine = lower::engine_with(Arc::new(program.clone()), Some(evaluator.clone()), &options(50))
            .expect("an engine");
        assert_eq!(engine.engine_name(), "native", "{:?}", engine.fallback_reason());
        assert_eq!(engine.opaque_error(), None);
        assert_eq!(native.opaque_error(), None);
    }
}

/// A program with opaque atoms is refused without an evaluator, by the lowering and by the
/// engine; an evaluator's error is a value of the lane calls, and a `Machine` call without an
/// error value records it for the next `next_state`, as in the interpreter.
#[test]
fn opaque_atoms_need_an_evaluator_and_its_errors_are_values() {
    let program = with_opaque(&random_program(&Shape::sized(12, 60), 5), 6, 5);
    match lower::lower(program.clone(), &options(50)) {
        Err(e @ LowerError::Opaque(6, _)) => assert!(e.to_string().contains("6 opaque atoms"), "{e}"),
        other => panic!("expected Opaque, got {other:?}"),
    }
    assert!(
        lower::engine_with(Arc::new(program.clone()), None, &options(50)).is_err(),
        "an engine without an evaluator"
    );
    let entry = *Entry::ALL
        .iter()
        .find(|&&e| program.entry_reads_opaque(e))
        .expect("an entry reads an opaque atom");
    let failing = || -> Arc<dyn Opaque> {
        Arc::new(HashedOpaque {
            fail_after: Some(0),
            ..HashedOpaque::default()
        })
    };
    let interp = Interpreter::with_opaque(program.clone(), failing()).expect("valid");
    let native = lower::lower_with(program.clone(), Some(failing()), &options(50))
        .expect("lowers")
        .native;
    // Every lane's demand is true in some lane of random words, so the evaluator is asked.
    let mut rng = Rng::new(9);
    let mut values: Vec<u64> = (0..program.num_slots()).map(|_| rng.next_u64()).collect();
    let want = interp.eval(entry, &mut values.clone()).map_err(|e| e.to_string());
    let got = native.eval(entry, &mut values).map_err(|e| e.to_string());
    assert!(got.is_err(), "the evaluator's error is lost: {got:?}");
    assert_eq!(got, want);
    let mut lanes = native.lanes(Width::X128).expect("128 lanes");
    for word in lanes.words_mut() {
        *word = rng.next_u64();
    }
    assert!(matches!(
        native.eval_lanes(entry, &mut lanes),
        Err(NativeError::Opaque(_))
    ));
    // The Machine methods: the first call that fills records the error, and next_state then
    // reports it, on both engines alike.
    let machines: [&dyn Machine<State = PackedState>; 2] = [&interp, &native];
    let outcomes: Vec<String> = machines
        .iter()
        .map(|m| {
            let state = PackedState::from_words(vec![!0; program.layout.bases.len().div_ceil(64)]);
            for r in 0..m.roles().len() {
                m.legal_moves(&state, RoleIdx(r as u32));
            }
            m.is_terminal(&state);
            m.goal_values(&state, RoleIdx(0));
            let joint = random_joint(&mut Rng::new(1), &program).expect("every role has moves");
            match m.next_state_unchecked(&state, &joint) {
                Err(MachineError::Opaque(e)) => e,
                other => panic!("{}: expected the opaque error, got {other:?}", m.engine_name()),
            }
        })
        .collect();
    assert_eq!(outcomes[0], outcomes[1]);
    assert_eq!(interp.opaque_error(), native.opaque_error());
}
