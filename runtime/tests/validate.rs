//! `Program::validate` rejects each kind of malformed Program with the error that names the
//! broken item. Each case breaks one thing in a valid hand-built Program.

mod common;

use common::counter;
use propjet_runtime::{Entry, Interpreter, Layout, Lit, Output, Program, ProgramError, RoleIdx, Slot};

/// The counter with one change applied.
fn broken(change: impl FnOnce(&mut Program)) -> ProgramError {
    broken_from(counter(), change)
}

/// `p` with one change applied, which both validation and the interpreter must refuse.
fn broken_from(mut p: Program, change: impl FnOnce(&mut Program)) -> ProgramError {
    change(&mut p);
    let err = p
        .validate()
        .expect_err("the change must make the program invalid");
    // The interpreter refuses the same program with the same error.
    assert_eq!(Interpreter::new(p).err(), Some(err.clone()));
    err
}

/// The gate computing `neither` in the counter: the first gate built, reading both inputs.
const NEITHER: u32 = 0;

#[test]
fn the_hand_built_programs_are_valid() {
    assert_eq!(counter().validate(), Ok(()));
    assert_eq!(common::tictactoe().validate(), Ok(()));
    let empty = Program {
        layout: Layout {
            roles: vec![],
            bases: vec![],
            constant_facts: vec![],
            inputs: vec![],
            role_inputs: vec![],
            goals: vec![],
            views: vec![],
        },
        gates: vec![],
        operands: vec![],
        init: vec![],
        legal: vec![],
        goals: vec![],
        terminal: Lit::TRUE,
        next: vec![],
        views: vec![],
        entry_gates: Default::default(),
        opaque: Default::default(),
        loops: Default::default(),
    };
    assert_eq!(empty.validate(), Ok(()));
}

#[test]
fn table_lengths() {
    let e = broken(|p| {
        p.legal.pop();
    });
    assert!(
        matches!(e, ProgramError::LengthMismatch { table, expected: 4, got: 3 } if table.starts_with("legal"))
    );
    let e = broken(|p| p.next.push(Lit::TRUE));
    assert!(
        matches!(e, ProgramError::LengthMismatch { table, expected: 5, got: 6 } if table.starts_with("next"))
    );
    let e = broken(|p| {
        p.goals.pop();
    });
    assert!(
        matches!(e, ProgramError::LengthMismatch { table, expected: 5, got: 4 } if table.starts_with("goals"))
    );
    let e = broken(|p| p.views.push(Lit::FALSE));
    assert!(
        matches!(e, ProgramError::LengthMismatch { table, expected: 1, got: 2 } if table.starts_with("views"))
    );
    let e = broken(|p| p.init.push(0));
    assert!(
        matches!(e, ProgramError::LengthMismatch { table, expected: 1, got: 2 } if table.starts_with("init"))
    );
}

#[test]
fn init_padding() {
    let e = broken(|p| p.init[0] |= 1 << 7);
    assert_eq!(e, ProgramError::InitBitBeyondBases { bit: 7, bases: 5 });
}

#[test]
fn role_ranges() {
    let e = broken(|p| {
        p.layout.role_inputs.pop();
    });
    assert_eq!(e, ProgramError::RoleRangeCount { roles: 2, got: 1 });
    let e = broken(|p| p.layout.role_inputs[1] = 1..4);
    assert_eq!(
        e,
        ProgramError::RoleRangeGap {
            role: 1,
            range: 1..4,
            expected_start: 2
        }
    );
    // A reversed range is refused even where it starts in the right place.
    #[allow(clippy::reversed_empty_ranges)]
    let e = broken(|p| p.layout.role_inputs[1] = 2..1);
    assert!(matches!(e, ProgramError::RoleRangeGap { role: 1, .. }));
    let e = broken(|p| p.layout.role_inputs[1] = 2..3);
    assert_eq!(e, ProgramError::RoleRangesEnd { end: 3, inputs: 4 });
    let e = broken(|p| p.layout.inputs[3].0 = RoleIdx(0));
    assert_eq!(
        e,
        ProgramError::InputRoleMismatch {
            input: 3,
            name: "wait".to_string(),
            role: RoleIdx(0),
            range_role: 1
        }
    );
    let e = broken(|p| p.layout.goals[2].0 = RoleIdx(5));
    assert_eq!(
        e,
        ProgramError::GoalRoleOutOfRange {
            goal: 2,
            role: RoleIdx(5),
            roles: 2
        }
    );
}

#[test]
fn operand_runs_and_order() {
    let e = broken(|p| p.gates[2].start = p.operands.len() as u32 - 1);
    assert!(matches!(
        e,
        ProgramError::OperandRunOutOfBounds { gate: 2, len: 2, .. }
    ));
    let e = broken(|p| {
        p.gates[1].start = u32::MAX;
        p.gates[1].len = u32::MAX;
    });
    assert!(matches!(e, ProgramError::OperandRunOutOfBounds { gate: 1, .. }));

    // A gate reading itself, a later gate, and a slot past the end.
    for (target, kind) in [(3, Slot::Gate(3)), (6, Slot::Gate(6))] {
        let e = broken(|p| {
            let slot = p.gate_slot(target as usize);
            let at = p.gates[3].start as usize + 1;
            p.operands[at] = Lit::neg(slot);
        });
        let ProgramError::OperandNotBelow {
            gate: 3,
            operand: 1,
            kind: k,
            ..
        } = e
        else {
            panic!("unexpected error {e:?}");
        };
        assert_eq!(k, kind);
        assert!(
            e.to_string().contains("gate 3") && e.to_string().contains("operand 1"),
            "{e}"
        );
    }
    let e = broken(|p| {
        let at = p.gates[0].start as usize;
        p.operands[at] = Lit::pos(100_000);
    });
    assert!(matches!(
        e,
        ProgramError::OperandNotBelow {
            gate: 0,
            operand: 0,
            slot: 100_000,
            kind: Slot::OutOfRange,
            ..
        }
    ));
}

#[test]
fn outputs_in_bounds() {
    let e = broken(|p| p.terminal = Lit::pos(p.num_slots() as u32));
    assert!(matches!(
        e,
        ProgramError::OutputOutOfBounds {
            output: Output::Terminal,
            ..
        }
    ));
    let e = broken(|p| p.next[2] = Lit::neg(5000));
    assert!(matches!(
        e,
        ProgramError::OutputOutOfBounds {
            output: Output::Next(2),
            slot: 5000,
            ..
        }
    ));
    assert!(e.to_string().starts_with("output next[2] reads slot 5000"), "{e}");
}

#[test]
fn entry_gate_lists() {
    let e = broken(|p| p.entry_gates[Entry::Next.index()].push(999));
    assert!(matches!(
        e,
        ProgramError::EntryGateOutOfRange {
            entry: Entry::Next,
            gate: 999,
            ..
        }
    ));
    let e = broken(|p| p.entry_gates[Entry::Next.index()].swap(0, 1));
    assert!(matches!(
        e,
        ProgramError::EntryGatesNotAscending {
            entry: Entry::Next,
            position: 1,
            ..
        }
    ));
    let e = broken(|p| {
        let list = &mut p.entry_gates[Entry::Next.index()];
        list.insert(1, list[1]);
    });
    assert!(matches!(
        e,
        ProgramError::EntryGatesNotAscending {
            entry: Entry::Next,
            position: 2,
            ..
        }
    ));

    // The view `even` is the last gate of its entry and read by the output directly.
    let even = counter().views[0].slot() - counter().gate_slot(0);
    let e = broken(|p| {
        p.entry_gates[Entry::View.index()].pop();
    });
    assert_eq!(
        e,
        ProgramError::EntryMissesOutputGate {
            entry: Entry::View,
            output: Output::View(0),
            missing: even
        }
    );
    // `neither` is read only by other gates of next.
    let e = broken(|p| {
        p.entry_gates[Entry::Next.index()].retain(|&g| g != NEITHER);
    });
    assert!(matches!(
        e,
        ProgramError::EntryMissesOperandGate {
            entry: Entry::Next,
            missing: NEITHER,
            ..
        }
    ));
}

#[test]
fn base_only_entries_never_read_inputs() {
    let e = broken(|p| p.legal[1] = Lit::neg(p.input_slot(2)));
    assert_eq!(
        e,
        ProgramError::OutputReadsInput {
            output: Output::Legal(1),
            input: 2
        }
    );
    let e = broken(|p| {
        p.terminal = Lit::pos(p.gate_slot(NEITHER as usize));
        p.compute_entry_gates();
    });
    assert_eq!(
        e,
        ProgramError::GateReadsInput {
            entry: Entry::Terminal,
            gate: NEITHER,
            operand: 0,
            input: 0
        }
    );
    // Next and view may read inputs.
    let mut p = counter();
    p.views[0] = Lit::pos(p.input_slot(1));
    assert_eq!(p.validate(), Ok(()));
    // Only the gates an entry needs must not read inputs: terminal's list padded with
    // `neither`, which reads both inputs but which terminal does not need, is allowed (the
    // one-pass check of the lists refuses it, and the check entry by entry accepts it).
    let mut p = counter();
    p.entry_gates[Entry::Terminal.index()].push(NEITHER);
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn computed_gate_lists_are_exactly_what_outputs_need() {
    let mut p = counter();
    // Terminal reads a base, so it needs no gate; legal reads bases and constants only.
    assert!(p.gates_of(Entry::Terminal).is_empty());
    assert!(p.gates_of(Entry::Legal).is_empty());
    // Padding an entry with an unneeded gate is allowed; recomputing removes it.
    let needed = p.gates_of(Entry::View).to_vec();
    p.entry_gates[Entry::View.index()].insert(0, NEITHER);
    assert_eq!(p.validate(), Ok(()));
    p.compute_entry_gates();
    assert_eq!(p.gates_of(Entry::View), needed.as_slice());
}

/// The counter with one loop: its last gate (`even`, read by the view entry only) reads
/// feedback slot 0, whose literal is that gate.
fn looped() -> Program {
    let mut p = counter();
    let first_gate = p.first_gate_slot() as u32;
    let shift = |lit: &mut Lit| {
        if lit.slot() >= first_gate {
            *lit = Lit(lit.0 + 2);
        }
    };
    p.operands.iter_mut().for_each(shift);
    p.legal.iter_mut().for_each(shift);
    p.goals.iter_mut().for_each(shift);
    shift(&mut p.terminal);
    p.next.iter_mut().for_each(shift);
    p.views.iter_mut().for_each(shift);
    p.loops.slots = 1;
    let g = p.gates.len() as u32 - 1;
    let start = p.gates[g as usize].start as usize;
    p.operands[start] = Lit::pos(p.first_feedback_slot() as u32);
    p.loops.loops.push(propjet_runtime::Loop {
        body: g..g + 1,
        pairs: vec![(0, Lit::pos(p.gate_slot(g as usize)))],
    });
    p.compute_entry_gates();
    p
}

fn broken_loop(change: impl FnOnce(&mut Program)) -> ProgramError {
    broken_from(looped(), change)
}

#[test]
fn loops() {
    let p = looped();
    assert_eq!(p.validate(), Ok(()));
    assert_eq!(p.loops_of(Entry::View), &[0]);
    assert!(
        p.loops_of(Entry::Legal).is_empty(),
        "legal does not read the loop"
    );
    assert_eq!(p.slot_kind(p.first_feedback_slot() as u32), Slot::Feedback(0));
    let is_loops = |e: ProgramError| matches!(e, ProgramError::Loops(_));
    // A pair's literal computed after the body.
    assert!(is_loops(broken_loop(
        |p| p.loops.loops[0].pairs[0].1 = Lit::pos(p.num_slots() as u32)
    )));
    // A body that does not hold the gate its pair reads.
    assert!(is_loops(broken_loop(|p| {
        p.loops.loops[0].body.start -= 1;
        p.loops.loops[0].body.end -= 1;
        p.compute_entry_gates();
    })));
    // An empty body.
    assert!(is_loops(broken_loop(|p| p.loops.loops[0].body.end -= 1)));
    // A feedback slot that no loop owns.
    assert!(is_loops(broken_loop(|p| p.loops.slots = 2)));
    // An entry that does not run a loop it needs.
    assert!(is_loops(broken_loop(|p| p.loops.entry_loops
        [Entry::View.index()]
    .clear())));
    // A gate before the body that reads the feedback slot.
    assert!(is_loops(broken_loop(|p| {
        let start = p.gates[0].start as usize;
        p.operands[start] = Lit::pos(p.first_feedback_slot() as u32);
        p.compute_entry_gates();
    })));
    // A pair naming a slot twice.
    assert!(is_loops(broken_loop(|p| {
        let pair = p.loops.loops[0].pairs[0];
        p.loops.loops[0].pairs.push(pair);
    })));
}
