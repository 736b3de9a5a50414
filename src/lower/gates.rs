//! The Cranelift IR of a chunk's gates.
//!
//! Every gate still reads its operands from the value array and stores its result there, but
//! two things make the code do less than one load per operand in one chain per gate:
//!
//! - a small set of values stays in SSA registers across gates: the values whose next read in
//!   the chunk comes soonest (the furthest-next-use rule, optimal for a cache of fixed size
//!   when the future is known, which it is here). A gate that reads a value kept from an
//!   earlier operand or an earlier gate takes the register instead of loading again. At most
//!   [`Shape::keep`] values are kept, so register pressure, and with it the register
//!   allocator's time, stays bounded however long the chunk;
//! - wide groups of operands are folded into several accumulators, combined at the end, so the
//!   processor runs independent chains side by side instead of one chain of dependent
//!   operations as long as the gate.
//!
//! The instructions are emitted in the order they should run, each load just before the
//! operation that uses it, so that with Cranelift's optimizer off (see [`super::Isas`]) a load
//! read once becomes a memory operand of that operation.

use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use propjet_runtime::{Op, Program, Width};
use rustc_hash::FxHashMap;

/// How much to keep in registers and how far to split wide operand groups.
#[derive(Copy, Clone, Debug)]
pub(super) struct Shape {
    /// The most values kept in registers across gates (zero: none).
    pub keep: usize,
    /// The most accumulators one operand group is folded into (at least one).
    pub accumulators: usize,
}

/// The most accumulators a long operand group is folded into: enough to keep two or three
/// loads per cycle busy, few enough to leave registers for the kept values.
pub(super) const ACCUMULATORS: usize = 4;

/// No read follows: the value need not be kept.
const NEVER: u32 = u32::MAX;

/// For every read and write of a slot in `gates` (each gate's operands in order, then the gate
/// itself), the position of the next read of the same slot in the chunk, or [`NEVER`].
fn next_reads(program: &Program, gates: &[u32]) -> Vec<u32> {
    let mut events: Vec<u32> = Vec::new();
    for &g in gates {
        let g = g as usize;
        // The program validated, so every gate's operand run is in bounds.
        events.extend(program.gate_operands(g).unwrap_or(&[]).iter().map(|l| l.slot()));
        events.push(program.gate_slot(g));
    }
    let mut next = vec![NEVER; events.len()];
    let mut later: FxHashMap<u32, u32> = FxHashMap::default();
    // Walking backwards, `later` holds each slot's first read after the current position. A
    // gate's own write comes after its reads, and each slot is written at most once, before
    // any read of it in the chunk, so reads before a write never see past it.
    for (i, &slot) in events.iter().enumerate().rev() {
        next[i] = later.get(&slot).copied().unwrap_or(NEVER);
        later.insert(slot, i as u32);
    }
    next
}

/// The values kept in registers: slot, SSA value, position of the slot's next read.
struct Kept {
    entries: Vec<(u32, Value, u32)>,
    capacity: usize,
}

impl Kept {
    fn get(&self, slot: u32) -> Option<Value> {
        self.entries.iter().find(|e| e.0 == slot).map(|e| e.1)
    }

    /// Records that `slot` holds `value` and is next read at `next`, then drops the value read
    /// furthest in the future if there are too many (possibly this one).
    fn note(&mut self, slot: u32, value: Value, next: u32) {
        let found = self.entries.iter().position(|e| e.0 == slot);
        if next == NEVER {
            if let Some(i) = found {
                self.entries.swap_remove(i);
            }
            return;
        }
        match found {
            Some(i) => self.entries[i] = (slot, value, next),
            None => self.entries.push((slot, value, next)),
        }
        if self.entries.len() > self.capacity {
            if let Some(i) = (0..self.entries.len()).max_by_key(|&i| self.entries[i].2) {
                self.entries.swap_remove(i);
            }
        }
    }
}

/// One operand group of a gate (its positive or its negated operands) being folded.
struct Group {
    accumulators: Vec<Value>,
    /// How many accumulators the group uses.
    width: usize,
    /// Values folded so far.
    count: usize,
    /// Whether the group is joined with AND (else OR).
    and: bool,
}

impl Group {
    fn new(size: usize, and: bool, most: usize) -> Group {
        // Short groups stay one chain; the split pays only when the chain is long enough to
        // be the bottleneck, as the final combination costs one operation per accumulator.
        let width = match size {
            0..8 => 1,
            8..16 => 2,
            _ => 4,
        }
        .min(most.max(1));
        Group {
            accumulators: Vec::with_capacity(width),
            width,
            count: 0,
            and,
        }
    }

    fn join(b: &mut FunctionBuilder, and: bool, x: Value, y: Value) -> Value {
        if and {
            b.ins().band(x, y)
        } else {
            b.ins().bor(x, y)
        }
    }

    fn push(&mut self, b: &mut FunctionBuilder, v: Value) {
        let i = self.count % self.width;
        if self.accumulators.len() < self.width {
            self.accumulators.push(v);
        } else {
            self.accumulators[i] = Group::join(b, self.and, self.accumulators[i], v);
        }
        self.count += 1;
    }

    /// The group's value, combining the accumulators as a balanced tree.
    fn finish(mut self, b: &mut FunctionBuilder) -> Option<Value> {
        while self.accumulators.len() > 1 {
            let half = self.accumulators.len().div_ceil(2);
            for i in 0..self.accumulators.len() / 2 {
                self.accumulators[i] =
                    Group::join(b, self.and, self.accumulators[i], self.accumulators[i + half]);
            }
            self.accumulators.truncate(half);
        }
        self.accumulators.pop()
    }
}

/// Emits `gates` in order: each gate's value computed and stored into its slot.
pub(super) fn emit(
    b: &mut FunctionBuilder,
    base: Value,
    width: Width,
    program: &Program,
    gates: &[u32],
    shape: Shape,
) {
    let next = if shape.keep > 0 {
        next_reads(program, gates)
    } else {
        Vec::new()
    };
    let next_at = |i: usize| next.get(i).copied().unwrap_or(NEVER);
    let mut kept = Kept {
        entries: Vec::with_capacity(shape.keep + 1),
        capacity: shape.keep,
    };
    let mut position = 0;
    let mut order: Vec<usize> = Vec::new();
    for &g in gates {
        let g = g as usize;
        let op = program.gates[g].op;
        // The program validated, so every gate's operand run is in bounds.
        let operands = program.gate_operands(g).unwrap_or(&[]);
        let negated = operands.iter().filter(|l| l.is_negated()).count();
        // Within the positive group the gate's own operation joins; within the negated group,
        // the dual one.
        let mut positive = Group::new(operands.len() - negated, op == Op::And, shape.accumulators);
        let mut inverted = Group::new(negated, op == Op::Or, shape.accumulators);
        // Kept values first: a chain that starts with one needs no load to start.
        order.clear();
        order.extend(0..operands.len());
        order.sort_by_key(|&i| kept.get(operands[i].slot()).is_none());
        for &i in &order {
            let lit = operands[i];
            let slot = lit.slot();
            let group = if lit.is_negated() {
                &mut inverted
            } else {
                &mut positive
            };
            let v = match kept.get(slot) {
                Some(v) => v,
                None => super::load(b, base, width, slot),
            };
            kept.note(slot, v, next_at(position + i));
            group.push(b, v);
        }
        position += operands.len();
        let (p, n) = (positive.finish(b), inverted.finish(b));
        let v = combine(b, width, op, p, n);
        let slot = program.gate_slot(g);
        super::store(b, base, width, slot, v);
        kept.note(slot, v, next_at(position));
        position += 1;
    }
}

/// A gate's value from its folded groups: with `P` the positive and `N` the negated operands,
/// an AND gate is `AND(P) & !OR(N)` and an OR gate `OR(P) | !AND(N)`, so the gate costs at
/// most one negation, which `band_not`/`bor_not` fold into the last operation when both groups
/// are present.
pub(super) fn combine(
    b: &mut FunctionBuilder,
    width: Width,
    op: Op,
    p: Option<Value>,
    n: Option<Value>,
) -> Value {
    match (p, n) {
        // AND() is true and OR() false.
        (None, None) => super::constant(b, width, op == Op::And),
        (Some(p), None) => p,
        (None, Some(n)) => b.ins().bnot(n),
        (Some(p), Some(n)) => match op {
            Op::And => b.ins().band_not(p, n),
            Op::Or => b.ins().bor_not(p, n),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::{types, Function};
    use cranelift_frontend::FunctionBuilderContext;
    use propjet_runtime::{Gate, Layout, Lit};

    /// A program of two bases (slots 2 and 3) and the given gates, each an AND of its operand
    /// slots.
    fn program(gates: &[&[u32]]) -> Program {
        let mut operands = Vec::new();
        let mut list = Vec::new();
        for ops in gates {
            list.push(Gate {
                op: Op::And,
                start: operands.len() as u32,
                len: ops.len() as u32,
            });
            operands.extend(ops.iter().map(|&s| Lit::pos(s)));
        }
        let mut program = Program {
            layout: Layout {
                roles: Vec::new(),
                bases: vec!["a".into(), "b".into()],
                constant_facts: Vec::new(),
                inputs: Vec::new(),
                role_inputs: Vec::new(),
                goals: Vec::new(),
                views: Vec::new(),
            },
            gates: list,
            operands,
            init: vec![0],
            legal: Vec::new(),
            goals: Vec::new(),
            terminal: Lit::FALSE,
            next: vec![Lit::FALSE, Lit::FALSE],
            views: Vec::new(),
            entry_gates: Default::default(),
        };
        program.compute_entry_gates();
        program
    }

    #[test]
    fn next_reads_point_at_the_following_read_of_the_same_slot() {
        // Gates at slots 4, 5, 6: g4 = b2 & b3, g5 = b2 & g4, g6 = g4 & g5.
        let p = program(&[&[2, 3], &[2, 4], &[4, 5]]);
        // Events: 2 3 [4] 2 4 [5] 4 5 [6].
        let next = next_reads(&p, &[0, 1, 2]);
        assert_eq!(next, vec![3, NEVER, 4, NEVER, 6, 7, NEVER, NEVER, NEVER]);
    }

    /// Values to stand for SSA values in the bookkeeping tests.
    fn values(n: usize) -> Vec<Value> {
        let mut func = Function::new();
        let mut ctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut ctx);
        let block = b.create_block();
        b.switch_to_block(block);
        (0..n).map(|i| b.ins().iconst(types::I64, i as i64)).collect()
    }

    #[test]
    fn the_kept_set_drops_the_value_read_furthest_ahead() {
        let v = values(4);
        let mut kept = Kept {
            entries: Vec::new(),
            capacity: 2,
        };
        kept.note(10, v[0], 5);
        kept.note(11, v[1], 9);
        // A third value read sooner than slot 11 pushes slot 11 out.
        kept.note(12, v[2], 7);
        assert_eq!(kept.get(10), Some(v[0]));
        assert_eq!(kept.get(11), None);
        assert_eq!(kept.get(12), Some(v[2]));
        // One read later than everything kept is not kept at all.
        kept.note(13, v[3], 50);
        assert_eq!(kept.get(13), None);
        assert_eq!(kept.entries.len(), 2);
        // A value never read again leaves.
        kept.note(10, v[0], NEVER);
        assert_eq!(kept.get(10), None);
        // Nothing is kept with no room.
        let mut none = Kept {
            entries: Vec::new(),
            capacity: 0,
        };
        none.note(10, v[0], 1);
        assert_eq!(none.get(10), None);
    }

    #[test]
    fn groups_use_more_accumulators_only_when_long() {
        assert_eq!(Group::new(7, true, ACCUMULATORS).width, 1);
        assert_eq!(Group::new(8, true, ACCUMULATORS).width, 2);
        assert_eq!(Group::new(300, true, ACCUMULATORS).width, 4);
        assert_eq!(Group::new(300, true, 1).width, 1);
    }
}
