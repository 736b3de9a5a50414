//! Random valid Programs of every shape, evaluated by the interpreter and by an independent naive
//! evaluator written here (recursive, memoized over slots, reading `Op` directly).
//!
//! Checked for every entry: the outputs agree on random lane words; the computed gate lists are
//! exactly the transitive fan-in of the outputs; running only an entry's gates gives the same
//! outputs as running every gate, even when the other gate slots hold garbage; legal, terminal
//! and goals ignore the inputs; 64 states in 64 lanes give the same outputs as 64 single-state
//! runs; and the Machine methods agree with the lanes.

use std::collections::BTreeSet;

use propjet_runtime::{
    Entry, Gate, Interpreter, Layout, Lit, Machine, MoveIdx, Op, PackedState, Program, Rng, RoleIdx, Slot,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// How an operand or output chooses its slot among the candidates below it.
#[derive(Clone, Copy, Debug)]
enum Pick {
    /// Candidate `x % count`.
    Any(u32),
    /// The `k`-th candidate from the top, so chains and recent gates are read often.
    Recent(u32),
}

impl Pick {
    fn resolve(self, candidates: usize) -> usize {
        match self {
            Pick::Any(x) => x as usize % candidates,
            Pick::Recent(k) => candidates - 1 - k as usize % candidates,
        }
    }
}

#[derive(Clone, Debug)]
struct GateSpec {
    or: bool,
    operands: Vec<(Pick, bool)>,
}

#[derive(Clone, Debug)]
struct Spec {
    inputs_per_role: Vec<usize>,
    bases: usize,
    gates: Vec<GateSpec>,
    /// Output picks, used in order: legal, terminal, goals, next, views. A pool shorter than
    /// the outputs is reused cyclically; an empty pool makes every output constant.
    outputs: Vec<(Pick, bool)>,
    goals: usize,
    views: usize,
    goal_roles: Vec<u32>,
    seed: u64,
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![any::<u32>().prop_map(Pick::Any), (0u32..4).prop_map(Pick::Recent)]
}

fn gate(operands: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = GateSpec> {
    (any::<bool>(), vec((pick(), any::<bool>()), operands))
        .prop_map(|(or, operands)| GateSpec { or, operands })
}

fn gates() -> impl Strategy<Value = Vec<GateSpec>> {
    prop_oneof![
        // No gates at all: every output is a constant, a base or an input.
        Just(Vec::new()),
        // A single gate.
        gate(0..=4).prop_map(|g| vec![g]),
        // A general small net, including gates with no operand.
        vec(gate(0..=6), 1..80),
        // Fan-in of hundreds, among ordinary gates.
        (
            vec(gate(0..=4), 0..10),
            vec(gate(100..=400), 1..4),
            vec(gate(0..=4), 0..10)
        )
            .prop_map(|(a, b, c)| [a, b, c].concat()),
        // A deep chain: each gate reads the one below it and one random slot.
        vec((any::<bool>(), any::<bool>(), pick(), any::<bool>()), 200..700).prop_map(|v| {
            v.into_iter()
                .map(|(or, n0, p, n1)| GateSpec {
                    or,
                    operands: vec![(Pick::Recent(0), n0), (p, n1)],
                })
                .collect()
        }),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        vec(0usize..=5, 1..=3),
        prop_oneof![0usize..=8, 60usize..=70],
        gates(),
        vec((pick(), any::<bool>()), 0..40),
        0usize..=6,
        0usize..=4,
        vec(0u32..3, 6),
        any::<u64>(),
    )
        .prop_map(
            |(inputs_per_role, bases, gates, outputs, goals, views, goal_roles, seed)| Spec {
                inputs_per_role,
                bases,
                gates,
                outputs,
                goals,
                views,
                goal_roles,
                seed,
            },
        )
}

fn build(spec: &Spec) -> Program {
    let roles = spec.inputs_per_role.len();
    let mut layout = Layout {
        roles: (0..roles).map(|r| format!("r{r}")).collect(),
        bases: (0..spec.bases).map(|b| format!("(b {b})")).collect(),
        constant_facts: Vec::new(),
        inputs: Vec::new(),
        role_inputs: Vec::new(),
        goals: Vec::new(),
        views: (0..spec.views).map(|v| format!("(v {v})")).collect(),
    };
    for (r, &n) in spec.inputs_per_role.iter().enumerate() {
        let start = layout.inputs.len() as u32;
        for i in 0..n {
            layout.inputs.push((RoleIdx(r as u32), format!("(m {i})")));
        }
        layout.role_inputs.push(start..layout.inputs.len() as u32);
    }
    for g in 0..spec.goals {
        layout
            .goals
            .push((RoleIdx(spec.goal_roles[g] % roles as u32), 10 * g as u32));
    }
    let first_gate = 2 + spec.bases + layout.inputs.len();
    // Which slots depend on an input: the outputs of legal, terminal and goals must not.
    let mut tainted: Vec<bool> = (0..first_gate).map(|s| s >= 2 + spec.bases).collect();
    let mut gates = Vec::new();
    let mut operands = Vec::new();
    for (g, gs) in spec.gates.iter().enumerate() {
        let below = first_gate + g;
        let start = operands.len() as u32;
        let mut t = false;
        for &(p, negated) in &gs.operands {
            let slot = p.resolve(below);
            t |= tainted[slot];
            operands.push(if negated {
                Lit::neg(slot as u32)
            } else {
                Lit::pos(slot as u32)
            });
        }
        tainted.push(t);
        gates.push(Gate {
            op: if gs.or { Op::Or } else { Op::And },
            start,
            len: gs.operands.len() as u32,
        });
    }
    let clean: Vec<usize> = (0..tainted.len()).filter(|&s| !tainted[s]).collect();
    let mut pool = spec.outputs.iter().cycle();
    let mut out = |base_only: bool| match pool.next() {
        None => Lit::FALSE,
        Some(&(p, negated)) => {
            let slot = if base_only {
                clean[p.resolve(clean.len())]
            } else {
                p.resolve(tainted.len())
            };
            if negated {
                Lit::neg(slot as u32)
            } else {
                Lit::pos(slot as u32)
            }
        }
    };
    let legal = (0..layout.inputs.len()).map(|_| out(true)).collect();
    let terminal = out(true);
    let goals = (0..spec.goals).map(|_| out(true)).collect();
    let next = (0..spec.bases).map(|_| out(false)).collect();
    let views = (0..spec.views).map(|_| out(false)).collect();
    let mut rng = Rng::new(spec.seed);
    let mut init: Vec<u64> = (0..Layout::words(spec.bases)).map(|_| rng.next_u64()).collect();
    if !spec.bases.is_multiple_of(64) {
        if let Some(last) = init.last_mut() {
            *last &= (1 << (spec.bases % 64)) - 1;
        }
    }
    let mut program = Program {
        layout,
        gates,
        operands,
        init,
        legal,
        goals,
        terminal,
        next,
        views,
        entry_gates: Default::default(),
        opaque: Default::default(),
        loops: Default::default(),
    };
    program.compute_entry_gates();
    program
}

/// A lane word that makes wide gates informative: mostly all ones or all zeros with a few
/// lanes flipped, sometimes fully random.
fn lane_word(rng: &mut Rng) -> u64 {
    let mut flips = 0u64;
    for _ in 0..rng.below(3) {
        flips |= 1 << rng.below(64);
    }
    match rng.below(5) {
        0 | 1 => !flips,
        2 | 3 => flips,
        _ => rng.next_u64(),
    }
}

/// The naive evaluator: every gate computed on demand from its definition.
struct Naive<'a> {
    p: &'a Program,
    bases: &'a [u64],
    inputs: &'a [u64],
    memo: Vec<Option<u64>>,
}

impl Naive<'_> {
    fn slot(&mut self, s: u32) -> u64 {
        match self.p.slot_kind(s) {
            Slot::Const(v) => {
                if v {
                    !0
                } else {
                    0
                }
            }
            Slot::Base(i) => self.bases[i as usize],
            Slot::Input(i) => self.inputs[i as usize],
            // These programs have no loops.
            Slot::Opaque(_) | Slot::Feedback(_) => 0,
            Slot::Gate(g) => {
                if let Some(v) = self.memo[g as usize] {
                    return v;
                }
                let gate = self.p.gates[g as usize];
                let ops = &self.p.operands[gate.start as usize..(gate.start + gate.len) as usize];
                let v = match gate.op {
                    Op::And => ops.iter().fold(!0, |acc, &l| acc & self.lit(l)),
                    Op::Or => ops.iter().fold(0, |acc, &l| acc | self.lit(l)),
                };
                self.memo[g as usize] = Some(v);
                v
            }
            Slot::OutOfRange => panic!("the generator made an out-of-range slot {s}"),
        }
    }

    fn lit(&mut self, l: Lit) -> u64 {
        let v = self.slot(l.slot());
        if l.is_negated() {
            !v
        } else {
            v
        }
    }
}

/// The gates the outputs of `entry` reach, by a depth-first walk.
fn reach(p: &Program, entry: Entry) -> Vec<u32> {
    let first = p.first_gate_slot() as u32;
    let mut seen = BTreeSet::new();
    let mut stack: Vec<u32> = p.outputs(entry).iter().map(|l| l.slot()).collect();
    while let Some(s) = stack.pop() {
        if s >= first && seen.insert(s - first) {
            let gate = p.gates[(s - first) as usize];
            let ops = &p.operands[gate.start as usize..(gate.start + gate.len) as usize];
            stack.extend(ops.iter().map(|l| l.slot()));
        }
    }
    seen.into_iter().collect()
}

/// Runs `entry` on a value array whose every slot starts as garbage, with the given bases and
/// (for entries that read them) inputs; returns the output words.
fn run(interp: &Interpreter, entry: Entry, bases: &[u64], inputs: &[u64], rng: &mut Rng) -> Vec<u64> {
    let p = interp.program();
    let mut values: Vec<u64> = (0..p.num_slots()).map(|_| rng.next_u64()).collect();
    values[2..2 + bases.len()].copy_from_slice(bases);
    if entry.reads_inputs() {
        values[p.first_input_slot()..p.first_gate_slot()].copy_from_slice(inputs);
    }
    interp.eval(entry, &mut values).unwrap();
    p.outputs(entry)
        .iter()
        .map(|&l| Interpreter::read(&values, l).unwrap())
        .collect()
}

/// Lane `k` of `words` as a packed bitmask.
fn lane_mask(words: &[u64], k: u32) -> Vec<u64> {
    let mut mask = vec![0; Layout::words(words.len())];
    for (i, w) in words.iter().enumerate() {
        mask[i / 64] |= (w >> k & 1) << (i % 64);
    }
    mask
}

fn check(spec: &Spec) -> Result<(), TestCaseError> {
    let program = build(spec);
    prop_assert_eq!(program.validate(), Ok(()));
    let interp = Interpreter::new(program.clone()).unwrap();
    let mut every_gate = program.clone();
    every_gate.entry_gates = std::array::from_fn(|_| (0..program.num_gates() as u32).collect());
    let all = Interpreter::new(every_gate).unwrap();

    let mut rng = Rng::new(spec.seed ^ 0x5eed);
    let bases: Vec<u64> = (0..program.num_bases()).map(|_| lane_word(&mut rng)).collect();
    let inputs: Vec<u64> = (0..program.num_inputs()).map(|_| lane_word(&mut rng)).collect();
    let mut naive = Naive {
        p: &program,
        bases: &bases,
        inputs: &inputs,
        memo: vec![None; program.num_gates()],
    };
    for entry in Entry::ALL {
        prop_assert_eq!(
            program.gates_of(entry).to_vec(),
            reach(&program, entry),
            "{:?}",
            entry
        );
        let expected: Vec<u64> = program.outputs(entry).iter().map(|&l| naive.lit(l)).collect();
        // Garbage in the input slots must not matter to entries that do not read inputs.
        let got = run(&interp, entry, &bases, &inputs, &mut rng);
        prop_assert_eq!(&got, &expected, "{:?}", entry);
        prop_assert_eq!(
            &run(&all, entry, &bases, &inputs, &mut rng),
            &expected,
            "{:?}",
            entry
        );
    }

    // 64 states in 64 lanes against 64 single-state runs in lane 0.
    let states: Vec<PackedState> = (0..64)
        .map(|k| PackedState::from_words(lane_mask(&bases, k)))
        .collect();
    let moves: Vec<Vec<u64>> = (0..64).map(|k| lane_mask(&inputs, k)).collect();
    let mut lanes = interp.new_values();
    for k in 0..64 {
        interp.spread_state(&states[k as usize], k, &mut lanes).unwrap();
        interp.spread_inputs(&moves[k as usize], k, &mut lanes).unwrap();
    }
    for entry in Entry::ALL {
        interp.eval(entry, &mut lanes).unwrap();
        for k in 0..64 {
            let mut single = interp.new_values();
            interp.spread_state(&states[k as usize], 0, &mut single).unwrap();
            interp.spread_inputs(&moves[k as usize], 0, &mut single).unwrap();
            interp.eval(entry, &mut single).unwrap();
            prop_assert_eq!(
                interp.pack(entry, &single, 0).unwrap(),
                interp.pack(entry, &lanes, k).unwrap()
            );
        }
    }

    // The Machine methods agree with the lanes.
    let roles = program.layout.roles.len();
    for k in 0..8u32 {
        let state = &states[k as usize];
        let legal = interp.pack(Entry::Legal, &lanes, k).unwrap();
        for r in 0..roles {
            let from_lane: Vec<MoveIdx> = program.layout.role_inputs[r]
                .clone()
                .filter(|&i| legal[i as usize / 64] >> (i % 64) & 1 == 1)
                .map(MoveIdx)
                .collect();
            prop_assert_eq!(interp.legal_moves(state, RoleIdx(r as u32)), from_lane);
        }
        let terminal = interp.pack(Entry::Terminal, &lanes, k).unwrap();
        prop_assert_eq!(interp.is_terminal(state), terminal[0] == 1);
        if program.layout.role_inputs.iter().all(|r| !r.is_empty()) {
            // One move per role, so the joint move is the input mask with one bit per role.
            let joint: Vec<MoveIdx> = program
                .layout
                .role_inputs
                .iter()
                .map(|r| MoveIdx(r.start + rng.below(r.end - r.start)))
                .collect();
            let mut mask = vec![0u64; Layout::words(program.num_inputs())];
            for mv in &joint {
                mask[mv.index() / 64] |= 1 << (mv.index() % 64);
            }
            let mut single = interp.new_values();
            interp.spread_state(state, 0, &mut single).unwrap();
            interp.spread_inputs(&mask, 0, &mut single).unwrap();
            interp.eval(Entry::Next, &mut single).unwrap();
            prop_assert_eq!(
                interp.next_state_unchecked(state, &joint).unwrap(),
                interp.pack_state(&single, 0).unwrap()
            );
        }
    }
    prop_assert_eq!(interp.initial_state().words().to_vec(), program.init.clone());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_agree_with_the_naive_evaluator(spec in spec()) {
        check(&spec)?;
    }
}
