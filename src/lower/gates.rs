//! The Cranelift IR of a chunk's gates.
//!
//! Every gate still reads its operands from the value array and stores its result there when
//! something outside the chunk may read it (an output, or a gate of another chunk), but two
//! things make the code do less than one load per operand in one chain per gate:
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

use cranelift_codegen::ir::{types, BlockArg, InstBuilder, MemFlags, MemFlagsData, Opcode, Value};
use cranelift_frontend::FunctionBuilder;
use propjet_runtime::{Lit, Op, Program, Width};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

/// How much to keep in registers and how far to split wide operand groups.
#[derive(Copy, Clone, Debug)]
pub(super) struct Shape {
    /// The most values kept in registers across gates (zero: none).
    pub keep: usize,
    /// The most accumulators one operand group is folded into (at least one).
    pub accumulators: usize,
    /// The most wide gates computed together (one: each gate alone).
    pub cluster: usize,
    /// Whether a cluster also computes in part the later gates that share its operands.
    pub partial: bool,
    /// Whether slots near the gates being stored are addressed from a base register that
    /// follows the stores (see [`Window`]).
    pub window: bool,
    /// Whether wide folds read more than once go through [`root`].
    pub root: bool,
    /// Whether a gate's value is used at most once in the IR: a gate stored anyway and read
    /// again, or read more than once, is stored and read back from memory by each reader.
    /// Cranelift folds a load into the operation that reads it only if the loaded value is
    /// used once, counting through every chain of operations, so a gate's value used twice
    /// keeps every load of its fold a separate instruction; [`root`] avoids that with blocks,
    /// which the single-pass register allocator pays for with reloads of the array's address,
    /// and that allocator keeps a value used twice on the stack anyway, so that a read from a
    /// register is a load from the stack. For x86-64 code under that allocator.
    pub reload: bool,
}

/// The most accumulators a long operand group is folded into: enough to keep two or three
/// loads per cycle busy, few enough to leave registers for the kept values.
pub(super) const ACCUMULATORS: usize = 4;

/// No read follows: the value need not be kept.
const NEVER: u32 = u32::MAX;

/// For every event (a read or a write of a slot, in the order of the code), the position of
/// the next read of the same value in the chunk, or [`NEVER`]. `ids` numbers the slots (it is
/// started here), so that the reads still to come are an array rather than a map.
fn next_reads(events: &[(u32, bool)], num_slots: usize, ids: &mut SlotIds) -> Vec<u32> {
    ids.start(num_slots);
    for &(slot, _) in events {
        ids.add(slot);
    }
    let mut next = vec![NEVER; events.len()];
    let mut later = vec![NEVER; ids.len()];
    // Walking backwards, `later` holds each slot's first read after the current position and
    // before the slot is written again (a gate computed in part writes its slot twice: the
    // partial value, read by its own step, and then its value).
    for (i, &(slot, write)) in events.iter().enumerate().rev() {
        let at = &mut later[ids.get(slot).expect("numbered above") as usize];
        next[i] = *at;
        *at = if write { NEVER } else { i as u32 };
    }
    next
}

/// The values kept in registers: slot, SSA value, position of the slot's next read, and
/// whether the value is missing from memory (a partial value not stored yet).
struct Kept {
    entries: Vec<(u32, Value, u32, bool)>,
    capacity: usize,
}

impl Kept {
    fn get(&self, slot: u32) -> Option<Value> {
        self.entries.iter().find(|e| e.0 == slot).map(|e| e.1)
    }

    /// Records that `slot` holds `value` and is next read at `next`, then drops the value read
    /// furthest in the future if there are too many (possibly this one). `unstored` says
    /// whether the value is missing from memory (`None`: as before, for a value read again).
    /// Returns a dropped value that is missing from memory and read again: the caller stores
    /// it. A value never read again needs no store.
    fn note(&mut self, slot: u32, value: Value, next: u32, unstored: Option<bool>) -> Option<(u32, Value)> {
        let found = self.entries.iter().position(|e| e.0 == slot);
        if next == NEVER {
            if let Some(i) = found {
                self.entries.swap_remove(i);
            }
            return None;
        }
        match found {
            Some(i) => {
                let unstored = unstored.unwrap_or(self.entries[i].3);
                self.entries[i] = (slot, value, next, unstored);
            }
            None => self.entries.push((slot, value, next, unstored.unwrap_or(false))),
        }
        if self.entries.len() > self.capacity {
            if let Some(i) = (0..self.entries.len()).max_by_key(|&i| self.entries[i].2) {
                let (slot, value, _, unstored) = self.entries.swap_remove(i);
                return unstored.then_some((slot, value));
            }
        }
        None
    }
}

/// Addresses slots from the array's start, or from a base register that follows the stores of
/// the chunk's gates. A gate's slot comes after those of the gates before it, so the stores of a
/// chunk walk up the array; from a register pointing just past the current store, the next
/// stores and the reads of recent gates are within a one-byte displacement (-128 to 127), which
/// makes each such instruction 3 bytes shorter than with the four-byte displacement from the
/// array's start. When a store falls outside, the register moves up by one subtraction (an
/// addition of a constant would be folded back into every address by Cranelift).
struct Window {
    array: Value,
    /// The flags of every load and store (`notrap aligned`), interned in the function once
    /// rather than looked up again for each.
    flags: MemFlags,
    width: Width,
    enabled: bool,
    /// The base register and the byte offset into the array it points at.
    current: Option<(Value, i64)>,
}

/// Where the window's register points, in bytes past the store that moves it: a few slots
/// before it stay within reach.
const WINDOW_LEAD: i64 = 96;

impl Window {
    fn offset(&self, slot: u32) -> i64 {
        i64::from(slot) * (self.width.words() as i64 * 8)
    }

    fn address(&self, b: &mut FunctionBuilder, slot: u32) -> (Value, i32) {
        if let Some((value, at)) = self.current {
            let displacement = self.offset(slot) - at;
            if (-128..128).contains(&displacement) {
                return (value, displacement as i32);
            }
        }
        super::address(b, self.array, self.width, slot)
    }

    /// Moves the register up to `slot`, about to be stored into, if `slot` is out of its reach
    /// and beyond the first 128 bytes (which the array's start reaches with a short
    /// displacement) and the last reachable with a four-byte one.
    fn follow(&mut self, b: &mut FunctionBuilder, slot: u32) {
        let offset = self.offset(slot);
        if !self.enabled || offset < 128 || offset + WINDOW_LEAD >= i64::from(i32::MAX) {
            return;
        }
        if let Some((_, at)) = self.current {
            if (-128..128).contains(&(offset - at)) {
                return;
            }
        }
        let target = offset + WINDOW_LEAD;
        let (from, at) = self.current.unwrap_or((self.array, 0));
        let minus = b.ins().iconst(types::I64, at - target);
        self.current = Some((b.ins().isub(from, minus), target));
    }

    fn load(&self, b: &mut FunctionBuilder, slot: u32) -> Value {
        let (addr, offset) = self.address(b, slot);
        let ty = super::lane_type(self.width);
        let (inst, dfg) = b.ins().Load(Opcode::Load, ty, self.flags, offset.into(), addr);
        dfg.first_result(inst)
    }

    fn store(&self, b: &mut FunctionBuilder, slot: u32, value: Value) {
        let (addr, offset) = self.address(b, slot);
        let ty = super::lane_type(self.width);
        b.ins()
            .Store(Opcode::Store, ty, self.flags, offset.into(), value, addr);
    }
}

/// One operand group of a gate (its positive or its negated operands) being folded.
struct Group {
    /// At most [`ACCUMULATORS`], so they stay inline: a chunk makes two groups per gate.
    accumulators: SmallVec<[Value; ACCUMULATORS]>,
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
            accumulators: SmallVec::new(),
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

/// One step of a chunk's code: gates computed together, and the operand reads that feed them.
struct Step {
    /// The gates the step computes. The first `members` are computed whole and stored at the
    /// end of the step; the others only in part: some operands of one of their groups, folded
    /// into a partial value stored into the gate's slot, which the gate's own step, later,
    /// reads back as an operand in place of those operands.
    gates: SmallVec<[u32; 2]>,
    members: usize,
    /// Every operand of the step's gates as (slot, index of the gate in `gates`, literal), in
    /// the order they are read. Consecutive entries of the same slot are one read: a value
    /// loaded once and folded into every gate that reads it.
    uses: Uses,
    /// Consecutive ranges of `uses` covering them all, in order.
    parts: SmallVec<[Part; 1]>,
    /// Whether the partial value of the step's one gate computed in part must be stored at
    /// once: a wide gate of a later chunk whose sinks this step folds for the last time in the
    /// chunk (see [`sink_step`]).
    flush: bool,
}

/// A step's uses, inline up to the operands of most gates: a chunk has a step per gate or so,
/// and an allocation for each made building the steps cost as much as the rest of them.
type Uses = SmallVec<[(u32, u32, Lit); 6]>;

/// A run of a step's uses: plain (each value folded into the gates that read it), or a block
/// of slots that the same gate groups read, folded once into a partial value that each of
/// those groups then takes as one operand.
struct Part {
    uses: std::ops::Range<usize>,
    /// For a block: whether its groups join with AND, and the groups as (gate index in the
    /// step, whether it is the negated group).
    block: Option<(bool, Vec<(u32, bool)>)>,
    /// The partly computed gates (indices in the step) whose last operand this part reads:
    /// their partial values are stored right after it.
    done: Vec<u32>,
}

/// The reads of `uses`: runs of consecutive entries of the same slot.
fn reads(uses: &[(u32, u32, Lit)]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        let first = uses.get(start)?.0;
        let end = start + uses[start..].iter().take_while(|u| u.0 == first).count();
        let run = start..end;
        start = end;
        Some(run)
    })
}

/// Every slot event of the chunk in the order of the code, as (slot, whether it is a write):
/// each part's reads and then the partial values stored after it, and at the end of each step
/// the gates it computes whole.
fn events(program: &Program, steps: &[Step]) -> Vec<(u32, bool)> {
    let mut events = Vec::new();
    for step in steps {
        for part in &step.parts {
            let uses = &step.uses[part.uses.clone()];
            events.extend(reads(uses).map(|r| (uses[r.start].0, false)));
            events.extend(
                part.done
                    .iter()
                    .map(|&m| (program.gate_slot(step.gates[m as usize] as usize), true)),
            );
        }
        let whole = &step.gates[..step.members];
        events.extend(whole.iter().map(|&g| (program.gate_slot(g as usize), true)));
    }
    events
}

/// A dense numbering of the slots a chunk's gates read, kept by each worker from chunk to
/// chunk: an array over every slot of the program, reset after each chunk at the slots it
/// numbered. Indexing the readers of each slot by these numbers takes two passes over the
/// reads, where sorting them by slot and hashing each slot's range took about a quarter of
/// the schedule's time on chess (`doc/native.md`).
#[derive(Default)]
pub(super) struct SlotIds {
    /// The number of each slot, or `u32::MAX`.
    id: Vec<u32>,
    /// The slots numbered so far, in the order of their numbers.
    slots: Vec<u32>,
}

impl SlotIds {
    /// Ready for a chunk of a program of `num_slots` slots, with no slot numbered.
    fn start(&mut self, num_slots: usize) {
        for &slot in &self.slots {
            self.id[slot as usize] = u32::MAX;
        }
        self.slots.clear();
        if self.id.len() < num_slots {
            self.id.resize(num_slots, u32::MAX);
        }
    }

    /// Numbers `slot` if it has no number yet.
    fn add(&mut self, slot: u32) {
        let id = &mut self.id[slot as usize];
        if *id == u32::MAX {
            *id = self.slots.len() as u32;
            self.slots.push(slot);
        }
    }

    fn get(&self, slot: u32) -> Option<u32> {
        self.id.get(slot as usize).copied().filter(|&i| i != u32::MAX)
    }

    fn len(&self) -> usize {
        self.slots.len()
    }
}

/// The gates of a chunk that read each slot, as (slot, position in the chunk, literal): one
/// array grouped by the slots' numbers ([`SlotIds`]) and the start of each number's run in
/// it, a few allocations per chunk where a list per slot cost one per slot read.
#[derive(Default)]
struct Readers {
    entries: Vec<(u32, u32, Lit)>,
    /// After [`Readers::index`], the run of slot number `i` is `starts[i]..starts[i + 1]`.
    starts: Vec<u32>,
}

impl Readers {
    /// Groups the entries by slot, every entry's slot being numbered in `ids` (a counting
    /// sort, stable; the order within a slot does not matter to the callers, which count and
    /// collect).
    fn index(&mut self, ids: &SlotIds) {
        let id = |slot: u32| ids.get(slot).expect("every read slot is numbered") as usize;
        self.starts.clear();
        self.starts.resize(ids.len() + 1, 0);
        for e in &self.entries {
            self.starts[id(e.0) + 1] += 1;
        }
        for i in 1..self.starts.len() {
            self.starts[i] += self.starts[i - 1];
        }
        let Some(&first) = self.entries.first() else {
            return;
        };
        let mut at = self.starts.clone();
        let mut grouped = vec![first; self.entries.len()];
        for &e in &self.entries {
            let i = id(e.0);
            grouped[at[i] as usize] = e;
            at[i] += 1;
        }
        self.entries = grouped;
    }

    fn of(&self, slot: u32, ids: &SlotIds) -> &[(u32, u32, Lit)] {
        match ids.get(slot) {
            Some(i) if (i as usize) + 1 < self.starts.len() => {
                &self.entries[self.starts[i as usize] as usize..self.starts[i as usize + 1] as usize]
            }
            _ => &[],
        }
    }
}

/// Gates with fewer operands than this are computed alone: an operand shared by short gates
/// is kept in a register by the furthest-next-use rule already.
const CLUSTER_WIDTH: usize = 16;

/// The least number of operands a gate must share with a cluster to join it.
const CLUSTER_SHARE: u32 = 2;

/// The least number of operands a later gate must share with a cluster to be computed in part
/// with it: the partial value costs a store and a read, so it must save more reads than that.
const PARTIAL_SHARE: u32 = 3;

/// Cuts the chunk's gates (in their order, each after its operands) into steps. A gate of at
/// least [`CLUSTER_WIDTH`] operands starts a cluster of up to `most` such gates, adding the one
/// that shares the most operand slots with the cluster so far, as long as it shares at least
/// [`CLUSTER_SHARE`] and reads no gate that is not computed yet (in this cluster or later). A
/// gate computed early keeps the order valid: everything it reads comes before, and everything
/// that reads it comes later in the chunk anyway.
///
/// With `partial`, a cluster also computes in part every later gate of the chunk that reads at
/// least [`PARTIAL_SHARE`] of the cluster's operand slots in one of its groups (once per gate):
/// it folds those operands into a partial value and stores it into the gate's slot, and the
/// gate's own step reads that slot instead of them. Nothing reads a gate's slot before its own
/// step: its readers come after it, and a cluster takes only gates whose operands are done.
fn steps(
    program: &Program,
    gates: &[u32],
    most: usize,
    partial: bool,
    sinks: &[u32],
    ids: &mut SlotIds,
) -> Vec<Step> {
    // The operands each position still has to fold: its own unless a partial value replaced
    // some of them. The program validated, so every gate's operand run is in bounds.
    let mut rest: Vec<Option<Vec<Lit>>> = vec![None; gates.len()];
    let mut sunk = Sunk::new(program, gates, sinks);
    for (p, &g) in gates.iter().enumerate() {
        if let Some(left) = sunk.rest(program, g) {
            rest[p] = Some(left);
        }
    }
    // What the gates read once their sinks are folded in.
    let initial = rest.clone();
    fn operands<'a>(
        program: &'a Program,
        gates: &[u32],
        rest: &'a [Option<Vec<Lit>>],
        p: usize,
    ) -> &'a [Lit] {
        match &rest[p] {
            Some(ops) => ops,
            None => program.gate_operands(gates[p] as usize).unwrap_or(&[]),
        }
    }
    let original = |p: usize| match &initial[p] {
        Some(ops) => &ops[..],
        None => program.gate_operands(gates[p] as usize).unwrap_or(&[]),
    };
    let wide = |p: usize| original(p).len() >= CLUSTER_WIDTH;
    // Only a wide gate starts a cluster: without one, every gate is a step of its own, and the
    // readers below would go unused.
    let clusters = (most > 1 || partial) && (0..gates.len()).any(wide);
    // Which step computes each position (`u32::MAX`: none yet).
    let mut step_of = vec![u32::MAX; gates.len()];
    // The positions of the chunk's wide gates reading each slot, the positions of the chunk's
    // gates each wide gate reads (a range of `gate_reads` per position), and every gate's reads
    // of each slot.
    let mut readers = Readers::default();
    let mut reads_gates: Vec<std::ops::Range<u32>> = Vec::new();
    let mut gate_reads: Vec<u32> = Vec::new();
    let mut all_readers = Readers::default();
    ids.start(program.num_slots());
    if clusters {
        // A chunk's gates are ascending (a run of a group's gates, `Plan`), so a gate's
        // position is found by bisection; a map serves any other order.
        let sorted = gates.is_sorted();
        let map: FxHashMap<u32, u32> = if sorted {
            FxHashMap::default()
        } else {
            gates.iter().enumerate().map(|(p, &g)| (g, p as u32)).collect()
        };
        let position = |g: u32| {
            if sorted {
                gates.binary_search(&g).ok().map(|p| p as u32)
            } else {
                map.get(&g).copied()
            }
        };
        let first_gate = program.first_gate_slot() as u32;
        reads_gates.reserve(gates.len());
        for p in 0..gates.len() {
            let start = gate_reads.len() as u32;
            let wide_p = wide(p);
            for &lit in original(p) {
                if partial || wide_p {
                    ids.add(lit.slot());
                }
                if partial {
                    all_readers.entries.push((lit.slot(), p as u32, lit));
                }
                if !wide_p {
                    continue;
                }
                readers.entries.push((lit.slot(), p as u32, lit));
                let inside = lit.slot().checked_sub(first_gate).and_then(position);
                if let Some(q) = inside {
                    gate_reads.push(q);
                }
            }
            reads_gates.push(start..gate_reads.len() as u32);
        }
        readers.index(ids);
        all_readers.index(ids);
    }
    let ids = &*ids;
    // A wide gate with sinks holds their partial value in its slot: no cluster computes it in
    // part as well.
    let mut partly: Vec<bool> = initial.iter().map(Option::is_some).collect();
    // Sinks computed, not folded into their wide gate yet: (wide gate, sinks).
    let mut pending: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut out: Vec<Step> = Vec::new();
    // How many of the cluster's slots each open wide gate reads (by position; zero again when
    // the next cluster starts), and the positions counted: an array where a map per cluster
    // took a hash of every reader of every slot.
    let mut score: Vec<u32> = if clusters {
        vec![0; gates.len()]
    } else {
        Vec::new()
    };
    let mut scored: Vec<u32> = Vec::new();
    let mut union: FxHashSet<u32> = FxHashSet::default();
    // Scratch of `partial_targets`, by position.
    let (mut counts, mut target) = if clusters && partial {
        (vec![[0u32; 2]; gates.len()], vec![u32::MAX; gates.len()])
    } else {
        (Vec::new(), Vec::new())
    };
    for p in 0..gates.len() {
        if step_of[p] != u32::MAX {
            continue;
        }
        let id = out.len() as u32;
        step_of[p] = id;
        let mut members: SmallVec<[u32; 2]> = smallvec::smallvec![p as u32];
        let mut targets: Vec<(u32, Vec<Lit>)> = Vec::new();
        if clusters && wide(p) {
            for &h in &scored {
                score[h as usize] = 0;
            }
            scored.clear();
            union.clear();
            let add = |q: u32,
                       union: &mut FxHashSet<u32>,
                       score: &mut [u32],
                       scored: &mut Vec<u32>,
                       step_of: &[u32],
                       rest: &[Option<Vec<Lit>>]| {
                let own = program.gate_slot(gates[q as usize] as usize);
                for lit in operands(program, gates, rest, q as usize) {
                    // A gate's own slot (its partial value) is no operand of anything else.
                    if lit.slot() != own && union.insert(lit.slot()) {
                        for &(_, h, _) in readers.of(lit.slot(), ids) {
                            if step_of[h as usize] == u32::MAX {
                                if score[h as usize] == 0 {
                                    scored.push(h);
                                }
                                score[h as usize] += 1;
                            }
                        }
                    }
                }
            };
            add(p as u32, &mut union, &mut score, &mut scored, &step_of, &rest);
            while members.len() < most {
                let ready = |h: u32| {
                    let qs = reads_gates[h as usize].clone();
                    gate_reads[qs.start as usize..qs.end as usize]
                        .iter()
                        .all(|&q| step_of[q as usize] < id)
                };
                let best = scored
                    .iter()
                    .filter(|&&h| {
                        score[h as usize] >= CLUSTER_SHARE && step_of[h as usize] == u32::MAX && ready(h)
                    })
                    .max_by_key(|&&h| (score[h as usize], std::cmp::Reverse(h)));
                let Some(&h) = best else { break };
                step_of[h as usize] = id;
                members.push(h);
                add(h, &mut union, &mut score, &mut scored, &step_of, &rest);
            }
            if partial {
                targets = partial_targets(
                    &union,
                    &all_readers,
                    ids,
                    &step_of,
                    &partly,
                    |h| operands(program, gates, &rest, h as usize).len(),
                    &mut counts,
                    &mut target,
                );
                for (h, covered) in &targets {
                    let h = *h as usize;
                    partly[h] = true;
                    let negated = covered[0].is_negated();
                    let own = program.gate_slot(gates[h] as usize);
                    let mut left = vec![if negated { Lit::neg(own) } else { Lit::pos(own) }];
                    let mut taken = covered.clone();
                    for &lit in operands(program, gates, &rest, h) {
                        match taken.iter().position(|&c| c == lit) {
                            Some(i) => {
                                taken.swap_remove(i);
                            }
                            None => left.push(lit),
                        }
                    }
                    rest[h] = Some(left);
                }
            }
        }
        let mut uses = Uses::new();
        let mut parts = SmallVec::new();
        if members.len() == 1 && targets.is_empty() {
            uses.extend(
                operands(program, gates, &rest, p)
                    .iter()
                    .map(|&lit| (lit.slot(), 0, lit)),
            );
            parts.push(Part {
                uses: 0..uses.len(),
                block: None,
                done: Vec::new(),
            });
        } else {
            let mut lists: Vec<(Op, &[Lit])> = members
                .iter()
                .map(|&q| {
                    let op = program.gates[gates[q as usize] as usize].op;
                    (op, operands(program, gates, &rest, q as usize))
                })
                .collect();
            // A member that was computed in part reads its own slot; no partial target can
            // share that, so it is an ordinary operand here.
            lists.extend(
                targets
                    .iter()
                    .map(|(h, covered)| (program.gates[gates[*h as usize] as usize].op, &covered[..])),
            );
            interleave(&lists, members.len(), &mut uses, &mut parts);
        }
        // A wide gate's sinks waiting in registers are folded in before it.
        for &q in &members {
            if let Some(i) = pending.iter().position(|(g, _)| *g == gates[q as usize]) {
                let (g, folded) = pending.swap_remove(i);
                out.push(sunk.step(g, &folded));
            }
        }
        out.push(Step {
            gates: members
                .iter()
                .chain(targets.iter().map(|(h, _)| h))
                .map(|&q| gates[q as usize])
                .collect(),
            members: members.len(),
            uses,
            parts,
            flush: false,
        });
        // The gates just computed whole that wide gates fold in wait for [`SINK_BATCH`] of the
        // same wide gate, folded together and then into its partial value.
        for &q in &members {
            let h = gates[q as usize];
            let g = sinks.get(h as usize).copied().unwrap_or(u32::MAX);
            if g == u32::MAX {
                continue;
            }
            let i = match pending.iter().position(|(w, _)| *w == g) {
                Some(i) => i,
                None => {
                    pending.push((g, Vec::new()));
                    pending.len() - 1
                }
            };
            pending[i].1.push(h);
            if pending[i].1.len() >= SINK_BATCH {
                let (g, folded) = pending.swap_remove(i);
                out.push(sunk.step(g, &folded));
            }
        }
    }
    for (g, folded) in pending {
        out.push(sunk.step(g, &folded));
    }
    out
}

/// How many sinks of one wide gate are folded together before they join its partial value:
/// one chain through the partial value would take a cycle per sink, the length of the chain
/// through the chunk; in fours, a quarter of that, for a few registers more.
const SINK_BATCH: usize = 4;

/// The sinks of a chunk: gates folded into a wide gate of the same group as soon as they are
/// computed (`Plan::sinks` in `mod.rs`). The wide gate's slot holds the partial value (the
/// fold of its sinks computed so far, joined as its operand group joins) from one such step
/// to the next and from chunk to chunk, and the wide gate's own step reads it in place of its
/// sinks.
struct Sunk<'a> {
    sinks: &'a [u32],
    /// For each wide gate seen: the literal of its own slot in the operand group its sinks
    /// join, whether its slot holds a partial value already, and how many of its sinks the
    /// chunk computes that are not folded yet.
    state: FxHashMap<u32, (Lit, bool, usize)>,
    /// The literal of each sink seen in its wide gate's operands.
    lits: FxHashMap<u32, Lit>,
    /// The chunk's gates.
    here: FxHashSet<u32>,
}

impl<'a> Sunk<'a> {
    fn new(program: &Program, gates: &[u32], sinks: &'a [u32]) -> Sunk<'a> {
        let mut sunk = Sunk {
            sinks,
            state: FxHashMap::default(),
            lits: FxHashMap::default(),
            here: gates.iter().copied().collect(),
        };
        let first = gates.first().copied().unwrap_or(0);
        let sink_of = |h: u32| sinks.get(h as usize).copied().unwrap_or(u32::MAX);
        // Wide gates of the chunk with sinks, and wide gates of later chunks with sinks here.
        let mut wide: Vec<u32> = gates
            .iter()
            .map(|&h| sink_of(h))
            .filter(|&g| g != u32::MAX)
            .collect();
        wide.extend(
            gates
                .iter()
                .copied()
                .filter(|&g| program.gates[g as usize].len as usize >= super::SINK_OPERANDS),
        );
        wide.sort_unstable();
        wide.dedup();
        // How many of each wide gate's sinks the chunk computes, in one pass over the chunk.
        let mut here: FxHashMap<u32, usize> = FxHashMap::default();
        for &h in gates {
            let g = sink_of(h);
            if g != u32::MAX {
                *here.entry(g).or_default() += 1;
            }
        }
        let first_gate = program.first_gate_slot();
        for g in wide {
            let mut own = None;
            let mut before = false;
            for &lit in program.gate_operands(g as usize).unwrap_or(&[]) {
                let Some(h) = (lit.slot() as usize).checked_sub(first_gate) else {
                    continue;
                };
                if sink_of(h as u32) == g {
                    let slot = program.gate_slot(g as usize);
                    own = Some(if lit.is_negated() {
                        Lit::neg(slot)
                    } else {
                        Lit::pos(slot)
                    });
                    before |= (h as u32) < first;
                    sunk.lits.insert(h as u32, lit);
                }
            }
            if let Some(own) = own {
                let here = here.get(&g).copied().unwrap_or(0);
                sunk.state.insert(g, (own, before, here));
            }
        }
        sunk
    }

    /// What gate `g` of the chunk still reads if it has sinks: its partial value (its own
    /// slot) and its other operands.
    fn rest(&self, program: &Program, g: u32) -> Option<Vec<Lit>> {
        let &(own, _, _) = self.state.get(&g)?;
        let first = program.first_gate_slot();
        let mut left = vec![own];
        left.extend(
            program
                .gate_operands(g as usize)
                .unwrap_or(&[])
                .iter()
                .filter(|lit| {
                    (lit.slot() as usize)
                        .checked_sub(first)
                        .is_none_or(|h| self.sinks.get(h).copied() != Some(g))
                }),
        );
        Some(left)
    }

    /// The step folding `folded`, sinks of `g` just computed, into `g`'s partial value: it reads
    /// the partial value if there is one already, and stores the new one at once if `g` is not
    /// in the chunk and these are its last sinks here.
    fn step(&mut self, g: u32, folded: &[u32]) -> Step {
        // The sinks first, so that their fold does not wait for the partial value.
        let mut uses: Uses = folded
            .iter()
            .filter_map(|h| self.lits.get(h).map(|&lit| (lit.slot(), 0, lit)))
            .collect();
        let mut flush = false;
        if let Some((own, started, left)) = self.state.get_mut(&g) {
            if *started {
                uses.push((own.slot(), 0, *own));
            }
            *started = true;
            *left = left.saturating_sub(folded.len());
            flush = *left == 0 && !self.here.contains(&g);
        }
        Step {
            gates: smallvec::smallvec![g],
            members: 0,
            parts: smallvec::smallvec![Part {
                uses: 0..uses.len(),
                block: None,
                done: vec![0],
            }],
            uses,
            flush,
        }
    }
}

/// The gates (positions, ascending) that a cluster with operand slots `union` computes in part,
/// each with the operands it folds: the gates not computed or partly computed yet that read
/// at least [`PARTIAL_SHARE`] of those slots in one group (the positive one on a tie), and
/// more than half of their operands. A gate is computed in part once, so it waits for the
/// cluster that shares most of its operands rather than taking the first that shares a few.
#[allow(clippy::too_many_arguments)]
fn partial_targets(
    union: &FxHashSet<u32>,
    all_readers: &Readers,
    ids: &SlotIds,
    step_of: &[u32],
    partly: &[bool],
    operands: impl Fn(u32) -> usize,
    counts: &mut [[u32; 2]],
    target: &mut [u32],
) -> Vec<(u32, Vec<Lit>)> {
    // Counted first (by position, in `counts`, zero again on return), and the literals
    // collected only for the gates that qualify: most readers of a cluster's slots are short
    // gates reading a base or two of it, and a map of two vectors for each of them cost
    // about a tenth of the schedule on chess.
    let open = |h: u32| step_of[h as usize] == u32::MAX && !partly[h as usize];
    let mut touched: Vec<u32> = Vec::new();
    for slot in union {
        for &(_, h, lit) in all_readers.of(*slot, ids) {
            if open(h) {
                let c = &mut counts[h as usize];
                if *c == [0, 0] {
                    touched.push(h);
                }
                c[usize::from(lit.is_negated())] += 1;
            }
        }
    }
    touched.sort_unstable();
    // Each qualifying gate and whether it is its negated group that is covered (the positive
    // one on a tie).
    let mut targets: Vec<(u32, Vec<Lit>)> = Vec::new();
    let mut negated: Vec<bool> = Vec::new();
    for &h in &touched {
        let [p, n] = std::mem::take(&mut counts[h as usize]);
        let (group, side) = if n > p { (n, true) } else { (p, false) };
        if group >= PARTIAL_SHARE && 2 * group as usize > operands(h) {
            target[h as usize] = targets.len() as u32;
            targets.push((h, Vec::with_capacity(group as usize)));
            negated.push(side);
        }
    }
    if !targets.is_empty() {
        for slot in union {
            for &(_, h, lit) in all_readers.of(*slot, ids) {
                let t = target[h as usize];
                if t != u32::MAX && negated[t as usize] == lit.is_negated() {
                    targets[t as usize].1.push(lit);
                }
            }
        }
    }
    for (h, covered) in &mut targets {
        target[*h as usize] = u32::MAX;
        covered.sort_unstable();
    }
    targets
}

/// The uses of a cluster's operands, taking the gates' operands in turn (the next slot of the
/// first gate, then of the second, and so on), each slot once with every use of it. Taking
/// turns keeps each gate's chain of operations interleaved with the others', so the processor
/// always has independent operations to run; one gate's operands in a row would be one chain.
/// `lists` holds each gate's operation and operands, the `members` computed whole first, then
/// the gates computed in part, whose operands all come up in the members' turns.
///
/// Slots that the same two or more groups read (all joining with the same operation) form a
/// block, emitted whole when the first of them comes: folded once into a partial value, which
/// each of those groups then takes as one operand. That saves a load and an operation per
/// slot and group beyond the first.
fn interleave(lists: &[(Op, &[Lit])], members: usize, uses: &mut Uses, parts: &mut SmallVec<[Part; 1]>) {
    // Every use as (slot, list, literal), grouped by slot with each slot's uses in the order
    // of the lists (a stable sort), so that the uses of a slot are one run, known by its start:
    // a map holding a vector per slot cost an allocation per slot read.
    let mut all: Vec<(u32, u32, Lit)> = Vec::with_capacity(lists.iter().map(|l| l.1.len()).sum());
    let mut left: Vec<usize> = Vec::with_capacity(lists.len());
    for (m, (_, operands)) in lists.iter().enumerate() {
        all.extend(operands.iter().map(|&lit| (lit.slot(), m as u32, lit)));
        left.push(operands.len());
    }
    all.sort_by_key(|u| u.0);
    // The end of each run, at the run's start.
    let mut end = vec![0u32; all.len()];
    let mut from = 0;
    while from < all.len() {
        let to = from + all[from..].iter().take_while(|u| u.0 == all[from].0).count();
        end[from] = to as u32;
        from = to;
    }
    let run = |start: u32| start as usize..end[start as usize] as usize;
    // The start of the run of each member's operands, found once by bisection.
    let at: Vec<Vec<u32>> = lists[..members]
        .iter()
        .map(|(_, operands)| {
            operands
                .iter()
                .map(|lit| all.partition_point(|u| u.0 < lit.slot()) as u32)
                .collect()
        })
        .collect();
    // Whether each slot's uses were taken (by the start of its run).
    let mut taken = vec![false; all.len()];
    // Within the positive group a gate's own operation joins; within the negated group, the
    // dual one.
    let joins_and = |m: u32, lit: Lit| (lists[m as usize].0 == Op::And) != lit.is_negated();
    // The blocks: the slots of each set of groups (by the starts of their runs), in the order
    // the members list them, and the block of each slot's run (`u32::MAX`: none, or not looked
    // at yet).
    type Key = (bool, Vec<(u32, bool)>);
    let mut keys: Vec<Key> = Vec::new();
    let mut key_index: FxHashMap<Key, u32> = FxHashMap::default();
    let mut block_slots: Vec<Vec<u32>> = Vec::new();
    let mut block_of = vec![u32::MAX; all.len()];
    let mut looked = vec![false; all.len()];
    for (m, (_, operands)) in lists.iter().enumerate().take(members) {
        for (k, &lit) in operands.iter().enumerate() {
            let r = run(at[m][k]);
            // Whether a slot forms a block does not depend on which of its uses asks.
            if std::mem::replace(&mut looked[r.start], true) {
                continue;
            }
            let uses_of = &all[r.clone()];
            let and = joins_and(m as u32, lit);
            let mut groups: Vec<(u32, bool)> = uses_of.iter().map(|&(_, m, l)| (m, l.is_negated())).collect();
            groups.sort_unstable();
            groups.dedup();
            let uniform = uses_of.iter().all(|&(_, m, l)| joins_and(m, l) == and);
            if uniform && groups.len() == uses_of.len() && groups.len() > 1 {
                let key = (and, groups);
                let b = match key_index.get(&key) {
                    Some(&b) => b,
                    None => {
                        let b = keys.len() as u32;
                        key_index.insert(key.clone(), b);
                        keys.push(key);
                        block_slots.push(Vec::new());
                        b
                    }
                };
                block_slots[b as usize].push(r.start as u32);
                block_of[r.start] = b;
            }
        }
    }
    let mut cursor = vec![0usize; members];
    loop {
        let mut progress = false;
        for (m, (_, operands)) in lists.iter().enumerate().take(members) {
            // Skip slots an earlier turn took (with all their uses).
            while cursor[m] < operands.len() && taken[at[m][cursor[m]] as usize] {
                cursor[m] += 1;
            }
            let Some(&first) = at[m].get(cursor[m]) else {
                continue;
            };
            progress = true;
            let start = uses.len();
            let b = block_of[first as usize];
            let (block, runs) = if b == u32::MAX {
                (None, vec![first])
            } else {
                (
                    Some(keys[b as usize].clone()),
                    std::mem::take(&mut block_slots[b as usize]),
                )
            };
            let mut done = Vec::new();
            for r in runs {
                let r = run(r);
                if std::mem::replace(&mut taken[r.start], true) {
                    continue;
                }
                for &(slot, m, lit) in &all[r] {
                    uses.push((slot, m, lit));
                    left[m as usize] -= 1;
                    if m as usize >= members && left[m as usize] == 0 {
                        done.push(m);
                    }
                }
            }
            match parts.last_mut() {
                // Plain uses in a row make one part.
                Some(last) if block.is_none() && last.block.is_none() && last.uses.end == start => {
                    last.uses.end = uses.len();
                    last.done.extend(done);
                }
                _ => parts.push(Part {
                    uses: start..uses.len(),
                    block,
                    done,
                }),
            }
        }
        if !progress {
            break;
        }
    }
}

/// The order of a chunk's code, which is the same at every width: its steps, and for each slot
/// event the position of the next read of the same slot. Computing it took about as long as
/// building the IR of one width, so a chunk's widths share it.
pub(super) struct Schedule {
    steps: Vec<Step>,
    next: Vec<u32>,
}

/// The schedule of `gates` (a chunk) with `shape`'s clusters and partial values, each gate
/// that `sinks` (indexed by gate, `Plan::sinks`) folds into a wide gate folded into its
/// partial value right after it is computed.
pub(super) fn schedule(
    program: &Program,
    gates: &[u32],
    shape: Shape,
    sinks: &[u32],
    ids: &mut SlotIds,
) -> Schedule {
    let steps = steps(program, gates, shape.cluster, shape.partial, sinks, ids);
    // Needed even with nothing kept: a partial value is stored only when it leaves the
    // registers while still to be read.
    let next = next_reads(&events(program, &steps), program.num_slots(), ids);
    Schedule { steps, next }
}

/// Emits the gates of `schedule`: each gate's value computed, each after the gates it reads,
/// and stored into its slot if `stored` says so (indexed by gate) or if it leaves the
/// registers before a later gate of the chunk reads it. `shape`'s clusters and partial values
/// are those the schedule was made with.
pub(super) fn emit(
    b: &mut FunctionBuilder,
    base: Value,
    width: Width,
    program: &Program,
    schedule: &Schedule,
    stored: &[bool],
    shape: Shape,
) {
    let Schedule { steps, next } = schedule;
    let mut window = Window {
        array: base,
        flags: b.func.dfg.mem_flags.insert_unchecked(MemFlagsData::trusted()),
        width,
        enabled: shape.window,
        current: None,
    };
    let next_at = |i: usize| next.get(i).copied().unwrap_or(NEVER);
    let mut kept = Kept {
        entries: Vec::with_capacity(shape.keep + 1),
        capacity: shape.keep,
    };
    let mut position = 0;
    let mut runs: Vec<(std::ops::Range<usize>, usize)> = Vec::new();
    let mut folds: Vec<(Group, Group)> = Vec::new();
    let mut sizes: Vec<[usize; 2]> = Vec::new();
    for step in steps {
        // Each gate's groups: with several gates in the step, their chains already run side by
        // side, so each gets a share of the accumulators.
        // (A step folding sinks computes no gate whole.)
        let most = shape.accumulators.div_ceil(step.members.max(1));
        folds.clear();
        // Each gate's positive and negated uses, counted in one pass (a pass per gate was
        // quadratic in the gates of a cluster's step, which may compute many in part).
        sizes.clear();
        sizes.resize(step.gates.len(), [0, 0]);
        for u in &step.uses {
            sizes[u.1 as usize][usize::from(u.2.is_negated())] += 1;
        }
        for (m, &g) in step.gates.iter().enumerate() {
            let op = program.gates[g as usize].op;
            let [positive, negated] = sizes[m];
            let most = if m < step.members { most } else { 1 };
            // Within the positive group the gate's own operation joins; within the negated
            // group, the dual one.
            folds.push((
                Group::new(positive, op == Op::And, most),
                Group::new(negated, op == Op::Or, most),
            ));
        }
        for part in &step.parts {
            let uses = &step.uses[part.uses.clone()];
            runs.clear();
            runs.extend(reads(uses).enumerate().map(|(i, r)| (r, position + i)));
            position += runs.len();
            match &part.block {
                None => {
                    // Kept values first: a chain that starts with one needs no load to start.
                    runs.sort_by_key(|(r, _)| kept.get(uses[r.start].0).is_none());
                    for (run, at) in runs.drain(..) {
                        let slot = uses[run.start].0;
                        let v = read(b, &window, &mut kept, slot, next_at(at));
                        for &(_, m, lit) in &uses[run] {
                            let (positive, inverted) = &mut folds[m as usize];
                            if lit.is_negated() {
                                inverted.push(b, v);
                            } else {
                                positive.push(b, v);
                            }
                        }
                    }
                }
                Some((and, groups)) => {
                    let mut block = Group::new(runs.len(), *and, shape.accumulators);
                    for (run, at) in runs.drain(..) {
                        let slot = uses[run.start].0;
                        let v = read(b, &window, &mut kept, slot, next_at(at));
                        block.push(b, v);
                    }
                    let size = block.count;
                    if let Some(v) = block.finish(b) {
                        // A block feeds several groups.
                        let v = if shape.root && size >= ROOT_OPERANDS {
                            root(b, base, width, v)
                        } else {
                            v
                        };
                        for &(m, negated) in groups {
                            let (positive, inverted) = &mut folds[m as usize];
                            if negated {
                                inverted.push(b, v);
                            } else {
                                positive.push(b, v);
                            }
                        }
                    }
                }
            }
            // Partial values are stored as soon as complete, so they hold no register.
            for &m in &part.done {
                let empty = (Group::new(0, false, 1), Group::new(0, false, 1));
                let (positive, inverted) = std::mem::replace(&mut folds[m as usize], empty);
                // A gate is computed in part from one of its groups.
                if let Some(v) = positive.finish(b).or(inverted.finish(b)) {
                    // The partial value goes to memory only if it leaves the registers before
                    // its gate's step reads it.
                    let slot = program.gate_slot(step.gates[m as usize] as usize);
                    if step.flush {
                        // Read by a later chunk: stored now, and not kept.
                        window.store(b, slot, v);
                        kept.note(slot, v, NEVER, Some(false));
                    } else if let Some((slot, value)) = kept.note(slot, v, next_at(position), Some(true)) {
                        window.store(b, slot, value);
                    }
                }
                position += 1;
            }
        }
        for (&g, (positive, inverted)) in step.gates.iter().zip(folds.drain(..step.members)) {
            let op = program.gates[g as usize].op;
            let (p, n) = (positive.finish(b), inverted.finish(b));
            let v = combine(b, width, op, p, n);
            let slot = program.gate_slot(g as usize);
            let now = stored.get(g as usize).copied().unwrap_or(true);
            let read = next_at(position);
            let twice = read != NEVER && next_at(read as usize) != NEVER;
            // Stored and read again, or read twice: more than one use.
            let wide = shape.root && program.gates[g as usize].len as usize >= ROOT_OPERANDS;
            let v = if wide && read != NEVER && (now || twice) {
                root(b, base, width, v)
            } else {
                v
            };
            // A value that must be in memory is stored now; another only if it leaves the
            // registers before its last read, like a partial value. With `reload`, a value that
            // would have a second use (its store, or another read) is stored and every read
            // loads it again.
            let reload = shape.reload && (now || twice);
            if now || reload {
                window.follow(b, slot);
                window.store(b, slot, v);
            }
            let next = if reload { NEVER } else { read };
            if let Some((slot, value)) = kept.note(slot, v, next, Some(!now)) {
                window.store(b, slot, value);
            }
            position += 1;
        }
    }
}

/// The fewest operands a fold must have for [`root`] to pay: it costs a branch, two jumps and a
/// move or two (about 20 bytes), and saves 4 bytes per load it lets Cranelift fold.
const ROOT_OPERANDS: usize = 16;

/// `v` again, as the parameter of a new block that a branch on the array's address (never null)
/// reaches with `v`, and otherwise with zero. Cranelift folds a load into the operation that
/// reads it only when the loaded value is used once, and counts a value as used more than once
/// when anything computed from it is, through any chain of operations: one wide fold read twice
/// (a gate stored and kept for a later gate, a block feeding several groups) would keep every
/// load of the fold out of the operations, each a separate instruction of 8 bytes. The count
/// stops at a block parameter; the second value keeps Cranelift from replacing the parameter by
/// `v` (it removes parameters that receive one value only).
fn root(b: &mut FunctionBuilder, base: Value, width: Width, v: Value) -> Value {
    let taken = b.create_block();
    let other = b.create_block();
    let next = b.create_block();
    let param = b.append_block_param(next, super::lane_type(width));
    b.ins().brif(base, taken, &[], other, &[]);
    b.seal_block(taken);
    b.seal_block(other);
    b.switch_to_block(other);
    let zero = super::constant(b, width, false);
    b.ins().jump(next, &[BlockArg::Value(zero)]);
    b.switch_to_block(taken);
    b.ins().jump(next, &[BlockArg::Value(v)]);
    b.seal_block(next);
    b.switch_to_block(next);
    param
}

/// The value of `slot`: the register that holds it, or a load; then notes when it is read next.
fn read(b: &mut FunctionBuilder, window: &Window, kept: &mut Kept, slot: u32, next: u32) -> Value {
    let v = match kept.get(slot) {
        Some(v) => v,
        None => window.load(b, slot),
    };
    // A value read again keeps its place in memory or not; nothing is dropped unstored here
    // that a store would not have to follow, so store it.
    if let Some((slot, value)) = kept.note(slot, v, next, None) {
        window.store(b, slot, value);
    }
    v
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
    use cranelift_codegen::ir::{types, Function, InstructionData};
    use cranelift_frontend::FunctionBuilderContext;
    use propjet_runtime::{Gate, Layout};

    /// A program of two bases (slots 2 and 3) and the given gates, each an AND of its operand
    /// slots.
    fn program(gates: &[&[u32]]) -> Program {
        let gates: Vec<(Op, &[u32])> = gates.iter().map(|&ops| (Op::And, ops)).collect();
        program_with(2, &gates)
    }

    /// A program of `bases` bases (slots 2 and up) and the given gates over positive operands.
    fn program_with(bases: usize, gates: &[(Op, &[u32])]) -> Program {
        let mut operands = Vec::new();
        let mut list = Vec::new();
        for &(op, ops) in gates {
            list.push(Gate {
                op,
                start: operands.len() as u32,
                len: ops.len() as u32,
            });
            operands.extend(ops.iter().map(|&s| Lit::pos(s)));
        }
        let mut program = Program {
            layout: Layout {
                roles: Vec::new(),
                bases: (0..bases).map(|b| format!("(b {b})")).collect(),
                constant_facts: Vec::new(),
                inputs: Vec::new(),
                role_inputs: Vec::new(),
                goals: Vec::new(),
                views: Vec::new(),
            },
            gates: list,
            operands,
            init: vec![0; Layout::words(bases)],
            legal: Vec::new(),
            goals: Vec::new(),
            terminal: Lit::FALSE,
            next: vec![Lit::FALSE; bases],
            views: Vec::new(),
            entry_gates: Default::default(),
            opaque: Default::default(),
            loops: Default::default(),
        };
        program.compute_entry_gates();
        program
    }

    #[test]
    fn wide_gates_sharing_operands_are_computed_together_and_later_gates_in_part() {
        let g0: Vec<u32> = (2..22).collect();
        let g2: Vec<u32> = (12..32).collect();
        let mut g4: Vec<u32> = (30..42).collect();
        g4.extend([43, 44]);
        // Slots: bases 2..42, then g0 at 42, g1 at 43, g2 at 44, g3 at 45, g4 at 46.
        let p = program_with(
            40,
            &[
                (Op::Or, &g0),
                (Op::And, &[2, 3]),
                (Op::Or, &g2),
                (Op::Or, &[2, 3, 4, 42]),
                (Op::Or, &g4),
            ],
        );
        let all = [0, 1, 2, 3, 4];
        let found = steps(&p, &all, 2, true, &[], &mut SlotIds::default());
        // g0 and g2 share ten operands; g3 reads g0, so it cannot join, but three of its four
        // operands are g0's; g4 reads g1 and g2, which are not computed before the first step.
        assert_eq!(found[0].gates[..], [0, 2, 3]);
        assert_eq!(found[0].members, 2);
        let covered: Vec<(u32, u32)> = found[0]
            .uses
            .iter()
            .filter(|u| u.1 == 2)
            .map(|u| (u.0, u.1))
            .collect();
        assert_eq!(covered, vec![(2, 2), (3, 2), (4, 2)]);
        // The ten shared slots are one block feeding both wide gates.
        let blocks: Vec<&Part> = found[0]
            .parts
            .iter()
            .filter(|part| part.block.is_some())
            .collect();
        let shared = blocks
            .iter()
            .find(|part| {
                part.block
                    .as_ref()
                    .is_some_and(|(and, groups)| !and && groups == &vec![(0, false), (1, false)])
            })
            .expect("a block of the shared slots");
        let mut slots: Vec<u32> = found[0].uses[shared.uses.clone()].iter().map(|u| u.0).collect();
        slots.dedup();
        assert_eq!(slots, (12..22).collect::<Vec<u32>>());
        // g3's own step reads its partial value (its own slot) and g0.
        let step3 = found
            .iter()
            .find(|s| s.gates[..s.members].contains(&3))
            .expect("g3 is computed");
        let read: Vec<u32> = step3.uses.iter().map(|u| u.0).collect();
        assert_eq!(read, vec![45, 42]);
        // Every gate is computed whole once, after the gates it reads.
        let mut done = Vec::new();
        for step in &found {
            for &g in &step.gates[..step.members] {
                for lit in p.gate_operands(g as usize).expect("in bounds") {
                    if let Some(h) = (lit.slot() as usize).checked_sub(p.first_gate_slot()) {
                        assert!(done.contains(&(h as u32)), "gate {g} before gate {h}");
                    }
                }
            }
            done.extend_from_slice(&step.gates[..step.members]);
        }
        done.sort_unstable();
        assert_eq!(done, all);
        // One gate at a time without clusters, in order.
        let alone = steps(&p, &all, 1, false, &[], &mut SlotIds::default());
        let order: Vec<Vec<u32>> = alone.iter().map(|s| s.gates.to_vec()).collect();
        assert_eq!(order, vec![vec![0], vec![1], vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn gates_folded_into_a_wide_gate_are_folded_as_computed_across_chunks() {
        // 70 gates of two bases each (slots 42..112), then g70 = OR of all of them and a base.
        let mut list: Vec<(Op, Vec<u32>)> =
            (0..70).map(|i| (Op::And, vec![2 + i % 40, 3 + i % 37])).collect();
        let mut wide: Vec<u32> = (42..112).collect();
        wide.push(5);
        list.push((Op::Or, wide));
        let gates: Vec<(Op, &[u32])> = list.iter().map(|(op, ops)| (*op, &ops[..])).collect();
        let p = program_with(40, &gates);
        let own = p.gate_slot(70);
        let mut sinks = vec![u32::MAX; 71];
        sinks[..70].fill(70);
        // The first chunk computes half of them, the wide gate is in the second. They are
        // folded in fours, into the partial value once there is one, and the last three are
        // stored at the end for the next chunk.
        let sink_steps = |found: &[Step]| -> Vec<(Vec<u32>, bool)> {
            found
                .iter()
                .filter(|s| s.members == 0)
                .map(|s| {
                    assert_eq!(s.gates.to_vec(), vec![70]);
                    (s.uses.iter().map(|u| u.0).collect(), s.flush)
                })
                .collect()
        };
        let slots = |range: std::ops::Range<usize>| range.map(|h| p.gate_slot(h)).collect::<Vec<u32>>();
        let with_own = |mut v: Vec<u32>| {
            v.push(own);
            v
        };
        let first: Vec<u32> = (0..35).collect();
        let found = steps(&p, &first, 2, true, &sinks, &mut SlotIds::default());
        assert_eq!(found.len(), 35 + 9);
        let folds = sink_steps(&found);
        assert_eq!(folds[0], (slots(0..4), false));
        assert_eq!(folds[1], (with_own(slots(4..8)), false));
        assert_eq!(folds[8], (with_own(slots(32..35)), true));
        // Each gate is folded after its step.
        assert_eq!((found[4].members, found[3].gates.to_vec()), (0, vec![3]));
        let second: Vec<u32> = (35..71).collect();
        let found = steps(&p, &second, 2, true, &sinks, &mut SlotIds::default());
        assert_eq!(found.len(), 35 + 9 + 1);
        let folds = sink_steps(&found);
        // The first fold here reads the partial value the first chunk stored; the last three
        // are folded just before the wide gate.
        assert_eq!(folds[0], (with_own(slots(35..39)), false));
        assert_eq!(folds[8], (with_own(slots(67..70)), false));
        assert_eq!(found[found.len() - 2].members, 0);
        // The wide gate reads its partial value and the base only.
        let last = found.last().expect("steps");
        assert_eq!((last.gates.to_vec(), last.members), (vec![70], 1));
        let read: Vec<u32> = last.uses.iter().map(|u| u.0).collect();
        assert_eq!(read, vec![own, 5]);
    }

    #[test]
    fn next_reads_point_at_the_following_read_of_the_same_slot() {
        // Gates at slots 4, 5, 6: g4 = b2 & b3, g5 = b2 & g4, g6 = g4 & g5.
        let p = program(&[&[2, 3], &[2, 4], &[4, 5]]);
        // Events: 2 3 [4] 2 4 [5] 4 5 [6].
        let steps = steps(&p, &[0, 1, 2], 1, false, &[], &mut SlotIds::default());
        let next = next_reads(&events(&p, &steps), p.num_slots(), &mut SlotIds::default());
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
        assert_eq!(kept.note(10, v[0], 5, None), None);
        assert_eq!(kept.note(11, v[1], 9, None), None);
        // A third value read sooner than slot 11 pushes slot 11 out.
        assert_eq!(kept.note(12, v[2], 7, None), None);
        assert_eq!(kept.get(10), Some(v[0]));
        assert_eq!(kept.get(11), None);
        assert_eq!(kept.get(12), Some(v[2]));
        // One read later than everything kept is not kept at all.
        assert_eq!(kept.note(13, v[3], 50, None), None);
        assert_eq!(kept.get(13), None);
        assert_eq!(kept.entries.len(), 2);
        // A value never read again leaves.
        assert_eq!(kept.note(10, v[0], NEVER, None), None);
        assert_eq!(kept.get(10), None);
        // Nothing is kept with no room.
        let mut none = Kept {
            entries: Vec::new(),
            capacity: 0,
        };
        assert_eq!(none.note(10, v[0], 1, None), None);
        assert_eq!(none.get(10), None);
    }

    #[test]
    fn a_value_missing_from_memory_is_handed_back_when_dropped_before_its_read() {
        let v = values(4);
        let mut kept = Kept {
            entries: Vec::new(),
            capacity: 1,
        };
        // Unstored, read at 5: kept.
        assert_eq!(kept.note(20, v[0], 5, Some(true)), None);
        // Reading it keeps it unstored.
        assert_eq!(kept.note(20, v[0], 8, None), None);
        // A value read sooner pushes it out: the caller must store it.
        assert_eq!(kept.note(21, v[1], 6, None), Some((20, v[0])));
        // An unstored value read later than everything kept goes straight back.
        assert_eq!(kept.note(22, v[2], 9, Some(true)), Some((22, v[2])));
        // An unstored value never read again needs no store.
        assert_eq!(kept.note(23, v[3], NEVER, Some(true)), None);
        // Nothing kept: every unstored value comes back.
        let mut none = Kept {
            entries: Vec::new(),
            capacity: 0,
        };
        assert_eq!(none.note(24, v[0], 3, Some(true)), Some((24, v[0])));
    }

    #[test]
    fn with_reload_a_gate_read_twice_is_stored_and_read_back_so_its_value_is_used_once() {
        // Gates at slots 4, 5, 6: g4 = b2 & b3, read by g5 = g4 & b2 and g6 = g4 & b3; g4 is
        // no output, so only g5 and g6 must be stored.
        let p = program(&[&[2, 3], &[4, 2], &[4, 3]]);
        let stored = [false, true, true];
        // For each setting: the most uses of an operation's value, the stores, and the loads of
        // g4's slot.
        let emitted = |reload: bool| {
            let shape = Shape {
                keep: 8,
                accumulators: ACCUMULATORS,
                cluster: 1,
                partial: false,
                window: false,
                root: false,
                reload,
            };
            let schedule = schedule(&p, &[0, 1, 2], shape, &[], &mut SlotIds::default());
            let mut func = Function::new();
            let mut ctx = FunctionBuilderContext::new();
            let mut b = FunctionBuilder::new(&mut func, &mut ctx);
            let block = b.create_block();
            let base = b.append_block_param(block, types::I64);
            b.switch_to_block(block);
            emit(&mut b, base, Width::X128, &p, &schedule, &stored, shape);
            let mut uses: FxHashMap<Value, usize> = FxHashMap::default();
            let (mut stores, mut loads_of_g4) = (0, 0);
            let insts: Vec<_> = func.layout.block_insts(block).collect();
            for &inst in &insts {
                for v in func.dfg.inst_values(inst) {
                    *uses.entry(v).or_default() += 1;
                }
                match func.dfg.insts[inst] {
                    InstructionData::Store { .. } => stores += 1,
                    InstructionData::Load { offset, .. } if i32::from(offset) == 4 * 16 => loads_of_g4 += 1,
                    _ => {}
                }
            }
            let most = insts
                .iter()
                .filter(|&&inst| matches!(func.dfg.insts[inst].opcode(), Opcode::Band | Opcode::Bor))
                .map(|&inst| uses.get(&func.dfg.first_result(inst)).copied().unwrap_or(0))
                .max();
            (most, stores, loads_of_g4)
        };
        // Kept in a register, g4's value feeds both readers and its fold's loads could not be
        // memory operands.
        assert_eq!(emitted(false), (Some(2), 2, 0));
        // With reload, g4 is stored and loaded back, and the loaded value is kept for the
        // second reader: a load read twice keeps only itself out of the operations.
        assert_eq!(emitted(true), (Some(1), 3, 1));
    }

    #[test]
    fn groups_use_more_accumulators_only_when_long() {
        assert_eq!(Group::new(7, true, ACCUMULATORS).width, 1);
        assert_eq!(Group::new(8, true, ACCUMULATORS).width, 2);
        assert_eq!(Group::new(300, true, ACCUMULATORS).width, 4);
        assert_eq!(Group::new(300, true, 1).width, 1);
    }
}
