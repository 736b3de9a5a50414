//! `Program` and `Layout`: the ordered netlist every executor runs, and which bit is which
//! proposition.
//!
//! The program works on a *value array* with one entry per slot. Each entry is a lane word: bit
//! `k` of every entry belongs to game state `k`, so one pass over the gates evaluates up to 64
//! states (the interpreter with `u64`, native code with `u64` or wider vectors). A single state is
//! run as lane 0.
//!
//! Slots are numbered:
//! - `0`: constant false; `1`: constant true;
//! - `2 .. 2+B`: the base propositions, in base order;
//! - `2+B .. 2+B+I`: the input propositions, in input order;
//! - `2+B+I .. 2+B+I+O`: the opaque atoms ([`OpaqueSlots`]), values computed outside the program
//!   by an evaluator the executor is given (`doc/opaque.md`); none in most games;
//! - `2+B+I+O .. 2+B+I+O+F`: the feedback slots of the loops ([`Loops`]): a recursive
//!   component's atoms as the previous round of its loop computed them; none in most games;
//! - `2+B+I+O+F+g`: the output of gate `g`, gates in topological order (a gate reads only slots
//!   below its own).
//!
//! Gate operands and outputs are [`Lit`]s: a slot, possibly negated, so negation costs no gate.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::ids::RoleIdx;

/// A slot of the value array, possibly negated: `slot << 1 | negated`.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Lit(pub u32);

impl Lit {
    /// Constant false.
    pub const FALSE: Lit = Lit(0);
    /// Constant true.
    pub const TRUE: Lit = Lit(2);

    /// The literal reading `slot` as it is.
    #[inline]
    pub fn pos(slot: u32) -> Lit {
        Lit(slot << 1)
    }

    /// The literal reading the negation of `slot`.
    #[inline]
    pub fn neg(slot: u32) -> Lit {
        Lit(slot << 1 | 1)
    }

    /// The slot read.
    #[inline]
    pub fn slot(self) -> u32 {
        self.0 >> 1
    }

    /// Whether the slot is read negated.
    #[inline]
    pub fn is_negated(self) -> bool {
        self.0 & 1 == 1
    }

    /// The literal with the opposite sign.
    #[inline]
    pub fn negate(self) -> Lit {
        Lit(self.0 ^ 1)
    }
}

/// What a gate computes from its operands.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Op {
    /// Conjunction; with no operand, true.
    And,
    /// Disjunction; with no operand, false.
    Or,
}

/// A gate: `op` over `Program::operands[start .. start+len]`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Gate {
    /// The operation.
    pub op: Op,
    /// First operand in `Program::operands`.
    pub start: u32,
    /// Number of operands.
    pub len: u32,
}

/// An entry point: one output group, computed by only the gates it needs.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Entry {
    /// The legal bits (reads bases only).
    Legal,
    /// The terminal bit (reads bases only).
    Terminal,
    /// The goal bits (reads bases only).
    Goals,
    /// The next-state bits (reads bases and inputs).
    Next,
    /// Every named view proposition (reads bases and inputs).
    View,
}

impl Entry {
    /// All entries, in a fixed order.
    pub const ALL: [Entry; 5] = [
        Entry::Legal,
        Entry::Terminal,
        Entry::Goals,
        Entry::Next,
        Entry::View,
    ];

    /// The position of the entry in [`Entry::ALL`], which also indexes
    /// [`Program::entry_gates`].
    #[inline]
    pub fn index(self) -> usize {
        match self {
            Entry::Legal => 0,
            Entry::Terminal => 1,
            Entry::Goals => 2,
            Entry::Next => 3,
            Entry::View => 4,
        }
    }

    /// Whether the entry may read input slots. Legal, terminal and goals depend on the state
    /// alone, so an executor need not set the inputs before running them.
    #[inline]
    pub fn reads_inputs(self) -> bool {
        matches!(self, Entry::Next | Entry::View)
    }
}

/// One output literal of a [`Program`], named so that messages can say which one is wrong.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Output {
    /// `Program::legal[i]`.
    Legal(u32),
    /// `Program::terminal`.
    Terminal,
    /// `Program::goals[i]`.
    Goal(u32),
    /// `Program::next[i]`.
    Next(u32),
    /// `Program::views[i]`.
    View(u32),
}

impl Output {
    /// The `i`-th output of `entry`.
    pub fn of(entry: Entry, i: u32) -> Output {
        match entry {
            Entry::Legal => Output::Legal(i),
            Entry::Terminal => Output::Terminal,
            Entry::Goals => Output::Goal(i),
            Entry::Next => Output::Next(i),
            Entry::View => Output::View(i),
        }
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Legal(i) => write!(f, "legal[{i}]"),
            Output::Terminal => write!(f, "terminal"),
            Output::Goal(i) => write!(f, "goals[{i}]"),
            Output::Next(i) => write!(f, "next[{i}]"),
            Output::View(i) => write!(f, "views[{i}]"),
        }
    }
}

/// What a slot of the value array holds.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Slot {
    /// Slot 0 (false) or slot 1 (true).
    Const(bool),
    /// Base proposition `i`.
    Base(u32),
    /// Input proposition `i`.
    Input(u32),
    /// Opaque atom `i`, filled by an evaluator outside the program.
    Opaque(u32),
    /// Feedback slot `i` of the loops.
    Feedback(u32),
    /// The output of gate `g`.
    Gate(u32),
    /// A slot beyond the value array.
    OutOfRange,
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Const(v) => write!(f, "constant {v}"),
            Slot::Base(i) => write!(f, "base {i}"),
            Slot::Input(i) => write!(f, "input {i}"),
            Slot::Opaque(i) => write!(f, "opaque {i}"),
            Slot::Feedback(i) => write!(f, "feedback {i}"),
            Slot::Gate(g) => write!(f, "gate {g}"),
            Slot::OutOfRange => write!(f, "out of range"),
        }
    }
}

/// Which bit of the packed bitmasks is which named proposition.
///
/// Packed bitmasks hold bit `i` in word `i / 64`, at position `i % 64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Role names in canonical KIF, in the game's order.
    pub roles: Vec<String>,
    /// Base facts in canonical KIF (`(cell 1 1 b)`), one per base bit.
    pub bases: Vec<String>,
    /// Facts that hold in every reachable state and are therefore not stored; sorted, distinct
    /// from `bases`. A state's facts are its set base bits plus these.
    pub constant_facts: Vec<String>,
    /// The move of each input bit: its role and its action in canonical KIF. Legal bit `i`
    /// says whether input `i` is legal. Inputs are grouped by role, in role order.
    pub inputs: Vec<(RoleIdx, String)>,
    /// For each role, its range of input (and legal) bits.
    pub role_inputs: Vec<Range<u32>>,
    /// Each goal bit: the role and the value.
    pub goals: Vec<(RoleIdx, u32)>,
    /// Named view propositions reported by [`Entry::View`], one per view bit.
    pub views: Vec<String>,
}

impl Layout {
    /// Number of u64 words of a packed bitmask of `bits` bits.
    #[inline]
    pub fn words(bits: usize) -> usize {
        bits.div_ceil(64)
    }
}

/// The atoms of a program whose values come from outside the net (`doc/opaque.md`): a relation
/// that could not be grounded, evaluated per state by an [`crate::Opaque`] evaluator. Empty for
/// nearly every game.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpaqueSlots {
    /// Each opaque atom in canonical KIF (`(dfs (n e 5) (wall a b 1 2) a)`), one per opaque slot.
    pub names: Vec<String>,
    /// For each opaque atom, a literal over the bases that is true in every state where the
    /// atom's value can change an output of legal, terminal, goals or next. An executor computes
    /// only the demanded atoms and leaves the others 0.
    pub demand: Vec<Lit>,
    /// The gates the demand literals need, ascending; they read bases only.
    pub demand_gates: Vec<u32>,
}

/// One loop: a recursive component of views evaluated until it stops changing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loop {
    /// The gates of one round, consecutive and at least one: they read the loop's feedback slots (and slots
    /// below `body.start`), and every gate that reads the loop's feedback slots is in the body
    /// or after it.
    pub body: Range<u32>,
    /// The loop's feedback slots, each (an index into the feedback slots, counted from
    /// [`Program::first_feedback_slot`]) with the literal that computes its next value in a
    /// round: a slot below the gate slot of `body.end`.
    pub pairs: Vec<(u32, Lit)>,
}

/// The loops of a program (`doc/propnet.md`, "Recursion as loops"); empty for most games.
///
/// An executor runs loop `l` of an entry just before the entry's first gate at or above
/// `loops[l].body.start` (after its last gate if there is none): it sets the loop's feedback
/// slots to 0, then repeats a round (compute the body's gates in order; note whether some
/// pair's literal differs from its feedback slot in some lane; copy each pair's literal into
/// its feedback slot) until a round changes nothing, or `pairs.len() + 1` rounds ran. The
/// component is monotone, so in each lane this reaches the least fixpoint within `pairs.len()`
/// rounds, and a lane that has reached it keeps its values in further rounds: lanes do not
/// affect each other. After the loop the feedback slots equal their literals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loops {
    /// The number of feedback slots.
    pub slots: u32,
    /// The loops, by ascending `body.start` (ties by the order of their bodies' ends); their
    /// bodies do not overlap and their feedback slots partition the feedback slots.
    pub loops: Vec<Loop>,
    /// For each entry, in the order of [`Entry::ALL`], the loops it runs, ascending; an entry
    /// that runs a loop has every gate of its body in its gate list.
    pub entry_loops: [Vec<u32>; 5],
}

impl Loop {
    /// The most rounds an executor runs: one more than the rounds that can change anything.
    #[inline]
    pub fn max_rounds(&self) -> usize {
        self.pairs.len() + 1
    }
}

/// A topologically ordered netlist with its layout: the contract between the compiler and every
/// executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Names of every bit.
    pub layout: Layout,
    /// The gates in topological order.
    pub gates: Vec<Gate>,
    /// Operands of all gates, each gate's in one run.
    pub operands: Vec<Lit>,
    /// The initial state, packed: `Layout::words(bases)` words.
    pub init: Vec<u64>,
    /// Literal of each legal bit (one per input).
    pub legal: Vec<Lit>,
    /// Literal of each goal bit.
    pub goals: Vec<Lit>,
    /// Literal of the terminal bit.
    pub terminal: Lit,
    /// Literal of each base's next value (one per base).
    pub next: Vec<Lit>,
    /// Literal of each named view (one per `Layout::views` entry).
    pub views: Vec<Lit>,
    /// For each entry, in the order of [`Entry::ALL`], the gates it needs, ascending.
    pub entry_gates: [Vec<u32>; 5],
    /// The opaque atoms and their demand; empty unless the game has an opaque relation.
    pub opaque: OpaqueSlots,
    /// The loops of recursive components; empty unless the game has recursion built as loops.
    pub loops: Loops,
}

/// A [`Program`] that passed [`Program::validate`], shared. The program cannot change once
/// it is in here (the `Arc` is never handed out mutably, and it holds a reference of its own,
/// so `Arc::get_mut` fails for every other holder), so whoever receives a `ValidProgram` can
/// rely on the checks without running them again: on chess, a validation is a sweep over
/// half a million gates and 3.8 million operands, and lowering used to run it twice after the
/// compiler had run it once.
#[derive(Clone, Debug)]
pub struct ValidProgram(Arc<Program>);

impl ValidProgram {
    /// Validates `program`.
    pub fn new(program: impl Into<Arc<Program>>) -> Result<ValidProgram, ProgramError> {
        let program = program.into();
        program.validate()?;
        Ok(ValidProgram(program))
    }

    /// The shared program.
    pub fn arc(&self) -> &Arc<Program> {
        &self.0
    }
}

impl std::ops::Deref for ValidProgram {
    type Target = Program;

    fn deref(&self) -> &Program {
        &self.0
    }
}

impl From<ValidProgram> for Arc<Program> {
    fn from(valid: ValidProgram) -> Arc<Program> {
        valid.0
    }
}

/// The most slots a program may have: a [`Lit`] keeps the slot in 31 bits.
pub const MAX_SLOTS: usize = 1 << 31;

/// Why a [`Program`] is malformed. The compiler's output must always validate, so any of these
/// from a compiled game is a compiler bug; each message says exactly which item is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// The value array would have more slots than a literal can address.
    #[error("the program has {slots} slots; a literal addresses at most {max}", max = MAX_SLOTS)]
    TooManySlots {
        /// Constants, bases, inputs and gates together.
        slots: usize,
    },
    /// A table has the wrong length for the layout.
    #[error("{table} has {got} entries, but the layout asks for {expected}")]
    LengthMismatch {
        /// Which table, and what its length must match.
        table: &'static str,
        /// The length the layout asks for.
        expected: usize,
        /// The actual length.
        got: usize,
    },
    /// The initial state sets a padding bit of its last word.
    #[error("init sets bit {bit}, but there are only {bases} bases")]
    InitBitBeyondBases {
        /// The offending bit.
        bit: usize,
        /// The number of bases.
        bases: usize,
    },
    /// `layout.role_inputs` does not have one range per role.
    #[error("layout.role_inputs has {got} ranges for {roles} roles")]
    RoleRangeCount {
        /// The number of roles.
        roles: usize,
        /// The number of ranges.
        got: usize,
    },
    /// A role's input range does not start where the previous one ended, or is reversed.
    #[error("the input range of role {role} is {range:?}; it must start at {expected_start} and not end before it starts")]
    RoleRangeGap {
        /// The role.
        role: usize,
        /// Its range.
        range: Range<u32>,
        /// Where the previous role's range ended (0 for the first role).
        expected_start: u32,
    },
    /// The role ranges do not end at the number of inputs.
    #[error("the role input ranges end at {end}, but there are {inputs} inputs")]
    RoleRangesEnd {
        /// Where the last range ends (0 with no role).
        end: u32,
        /// The number of inputs.
        inputs: usize,
    },
    /// An input lies in one role's range but names another role.
    #[error("input {input} ({name}) names role {role} in layout.inputs, but lies in the range of role {range_role}")]
    InputRoleMismatch {
        /// The input.
        input: usize,
        /// Its action.
        name: String,
        /// The role it names.
        role: RoleIdx,
        /// The role whose range holds it.
        range_role: usize,
    },
    /// A goal bit names a role that does not exist.
    #[error("goal bit {goal} names role {role}, but there are {roles} roles")]
    GoalRoleOutOfRange {
        /// The goal bit.
        goal: usize,
        /// The role it names.
        role: RoleIdx,
        /// The number of roles.
        roles: usize,
    },
    /// A gate's operand run reaches past `Program::operands`.
    #[error("gate {gate} has operands {start}..{start}+{len}, past the end of the {operands} operands")]
    OperandRunOutOfBounds {
        /// The gate.
        gate: usize,
        /// Its first operand.
        start: u32,
        /// Its operand count.
        len: u32,
        /// The length of `Program::operands`.
        operands: usize,
    },
    /// A gate reads a slot that is not computed before it.
    #[error("gate {gate} (slot {gate_slot}): operand {operand} reads slot {slot} ({kind}), which is not below the gate's own slot")]
    OperandNotBelow {
        /// The gate.
        gate: usize,
        /// The gate's own slot.
        gate_slot: usize,
        /// The operand's position within the gate.
        operand: usize,
        /// The slot it reads.
        slot: u32,
        /// What that slot is.
        kind: Slot,
    },
    /// An output literal reads a slot beyond the value array.
    #[error("output {output} reads slot {slot}, but the program has {slots} slots")]
    OutputOutOfBounds {
        /// The output.
        output: Output,
        /// The slot it reads.
        slot: u32,
        /// The number of slots.
        slots: usize,
    },
    /// An entry names a gate that does not exist.
    #[error("the gate list of entry {entry:?} names gate {gate}, but there are {gates} gates")]
    EntryGateOutOfRange {
        /// The entry.
        entry: Entry,
        /// The gate named.
        gate: u32,
        /// The number of gates.
        gates: usize,
    },
    /// An entry's gate list is not strictly ascending.
    #[error("the gate list of entry {entry:?} has gate {gate} at position {position}, not above the previous gate {previous}")]
    EntryGatesNotAscending {
        /// The entry.
        entry: Entry,
        /// The position in the list.
        position: usize,
        /// The gate before it.
        previous: u32,
        /// The gate at that position.
        gate: u32,
    },
    /// An entry lacks a gate that one of its outputs reads.
    #[error("the gate list of entry {entry:?} lacks gate {missing}, which output {output} reads")]
    EntryMissesOutputGate {
        /// The entry.
        entry: Entry,
        /// The output.
        output: Output,
        /// The gate it reads.
        missing: u32,
    },
    /// An entry lacks a gate that one of its gates reads.
    #[error("the gate list of entry {entry:?} lacks gate {missing}, which operand {operand} of its gate {gate} reads")]
    EntryMissesOperandGate {
        /// The entry.
        entry: Entry,
        /// The gate of the entry.
        gate: u32,
        /// The operand's position within that gate.
        operand: usize,
        /// The gate it reads.
        missing: u32,
    },
    /// The program has opaque atoms but the executor was given no evaluator for them.
    #[error("the program has {atoms} opaque atoms, which need an evaluator (use with_opaque)")]
    NoOpaqueEvaluator {
        /// How many opaque atoms.
        atoms: usize,
    },
    /// The loops are malformed.
    #[error("the loops: {0}")]
    Loops(String),
    /// The demand of the opaque atoms is malformed.
    #[error("the demand of the opaque atoms: {0}")]
    Demand(String),
    /// An output of legal, terminal or goals reads an input directly.
    #[error("output {output} reads input {input}; legal, terminal and goals may read bases only")]
    OutputReadsInput {
        /// The output.
        output: Output,
        /// The input.
        input: u32,
    },
    /// A gate needed by legal, terminal or goals reads an input.
    #[error("entry {entry:?} needs gate {gate}, whose operand {operand} reads input {input}; legal, terminal and goals may read bases only")]
    GateReadsInput {
        /// The entry.
        entry: Entry,
        /// The gate.
        gate: u32,
        /// The operand's position within the gate.
        operand: usize,
        /// The input.
        input: u32,
    },
}

impl Program {
    /// The slot of constant false.
    pub const FALSE_SLOT: u32 = 0;
    /// The slot of constant true.
    pub const TRUE_SLOT: u32 = 1;

    /// The number of base propositions.
    #[inline]
    pub fn num_bases(&self) -> usize {
        self.layout.bases.len()
    }

    /// The number of input propositions.
    #[inline]
    pub fn num_inputs(&self) -> usize {
        self.layout.inputs.len()
    }

    /// The number of gates.
    #[inline]
    pub fn num_gates(&self) -> usize {
        self.gates.len()
    }

    /// The number of opaque slots.
    #[inline]
    pub fn num_opaque(&self) -> usize {
        self.opaque.names.len()
    }

    /// The slot of the first opaque atom, right after the inputs.
    #[inline]
    pub fn first_opaque_slot(&self) -> usize {
        2 + self.num_bases() + self.num_inputs()
    }

    /// The slot of opaque atom `i` (meaningful for `i < num_opaque()`).
    #[inline]
    pub fn opaque_slot(&self, i: usize) -> u32 {
        (self.first_opaque_slot() + i) as u32
    }

    /// Whether `entry` reads an opaque slot, directly or through its gates, so that an executor
    /// must fill the opaque slots before running it.
    pub fn entry_reads_opaque(&self, entry: Entry) -> bool {
        if self.opaque.names.is_empty() {
            return false;
        }
        let range = self.first_opaque_slot() as u32..self.first_feedback_slot() as u32;
        self.outputs(entry).iter().any(|l| range.contains(&l.slot()))
            || self.gates_of(entry).iter().any(|&g| {
                self.gate_operands(g as usize)
                    .unwrap_or(&[])
                    .iter()
                    .any(|l| range.contains(&l.slot()))
            })
    }

    /// The length of the value array: two constants, the bases, the inputs, the opaque atoms,
    /// the feedback slots and the gates.
    #[inline]
    pub fn num_slots(&self) -> usize {
        self.first_gate_slot() + self.gates.len()
    }

    /// The slot of the first input.
    #[inline]
    pub fn first_input_slot(&self) -> usize {
        2 + self.num_bases()
    }

    /// The slot of the first feedback slot, right after the opaque atoms.
    #[inline]
    pub fn first_feedback_slot(&self) -> usize {
        2 + self.num_bases() + self.num_inputs() + self.num_opaque()
    }

    /// The number of feedback slots of the loops.
    #[inline]
    pub fn num_feedback(&self) -> usize {
        self.loops.slots as usize
    }

    /// The slot of gate 0.
    #[inline]
    pub fn first_gate_slot(&self) -> usize {
        self.first_feedback_slot() + self.num_feedback()
    }

    /// The loops `entry` runs, ascending.
    #[inline]
    pub fn loops_of(&self, entry: Entry) -> &[u32] {
        &self.loops.entry_loops[entry.index()]
    }

    /// The slot of base `i`. Meaningful for `i < num_bases()` of a program with at most
    /// [`MAX_SLOTS`] slots, which [`Program::validate`] checks.
    #[inline]
    pub fn base_slot(&self, i: usize) -> u32 {
        (2 + i) as u32
    }

    /// The slot of input `i` (meaningful for `i < num_inputs()`).
    #[inline]
    pub fn input_slot(&self, i: usize) -> u32 {
        (self.first_input_slot() + i) as u32
    }

    /// The slot of gate `g` (meaningful for `g < num_gates()`).
    #[inline]
    pub fn gate_slot(&self, g: usize) -> u32 {
        (self.first_gate_slot() + g) as u32
    }

    /// What `slot` holds.
    pub fn slot_kind(&self, slot: u32) -> Slot {
        let s = slot as usize;
        if s < 2 {
            Slot::Const(s == 1)
        } else if s < self.first_input_slot() {
            Slot::Base(slot - 2)
        } else if s < self.first_opaque_slot() {
            Slot::Input((s - self.first_input_slot()) as u32)
        } else if s < self.first_feedback_slot() {
            Slot::Opaque((s - self.first_opaque_slot()) as u32)
        } else if s < self.first_gate_slot() {
            Slot::Feedback((s - self.first_feedback_slot()) as u32)
        } else if s < self.num_slots() {
            Slot::Gate((s - self.first_gate_slot()) as u32)
        } else {
            Slot::OutOfRange
        }
    }

    /// The operands of gate `g`, or `None` if there is no such gate or its run is out of bounds.
    pub fn gate_operands(&self, g: usize) -> Option<&[Lit]> {
        let gate = self.gates.get(g)?;
        let start = gate.start as usize;
        self.operands.get(start..start.checked_add(gate.len as usize)?)
    }

    /// The output literals of `entry`, in bit order: one per input for legal, the terminal
    /// literal, one per goal bit, one per base for next, one per view.
    pub fn outputs(&self, entry: Entry) -> &[Lit] {
        match entry {
            Entry::Legal => &self.legal,
            Entry::Terminal => std::slice::from_ref(&self.terminal),
            Entry::Goals => &self.goals,
            Entry::Next => &self.next,
            Entry::View => &self.views,
        }
    }

    /// The gates `entry` runs, ascending.
    #[inline]
    pub fn gates_of(&self, entry: Entry) -> &[u32] {
        &self.entry_gates[entry.index()]
    }

    /// Which gates the outputs of `entry` read, directly or through other gates. Operands that
    /// are out of bounds or not below their gate are skipped, so this never panics;
    /// [`Program::validate`] reports them.
    fn needed_gates(&self, entry: Entry) -> Vec<bool> {
        self.needed_by(self.outputs(entry))
    }

    /// Which gates `lits` read, directly or through other gates.
    fn needed_by(&self, lits: &[Lit]) -> Vec<bool> {
        self.needed_with_loops(lits).0
    }

    /// Which gates and which loops `lits` read, directly or through other gates and loops: a
    /// loop is needed when a needed literal reads one of its feedback slots or a gate of its
    /// body, and then its whole body and its pairs' literals are needed. Slots out of range are
    /// skipped, so this never panics; [`Program::validate`] reports them.
    fn needed_with_loops(&self, lits: &[Lit]) -> (Vec<bool>, Vec<bool>) {
        let first = self.first_gate_slot();
        let count = self.gates.len();
        let mut needed = vec![false; count];
        if self.loops.loops.is_empty() {
            // The sweep without loops, as it was before them: nearly every program.
            for lit in lits {
                if let Some(g) = (lit.slot() as usize).checked_sub(first) {
                    if g < count {
                        needed[g] = true;
                    }
                }
            }
            for g in (0..count).rev() {
                if !needed[g] {
                    continue;
                }
                for lit in self.gate_operands(g).unwrap_or(&[]) {
                    if let Some(h) = (lit.slot() as usize).checked_sub(first) {
                        if h < g {
                            needed[h] = true;
                        }
                    }
                }
            }
            return (needed, Vec::new());
        }
        let mut loop_needed = vec![false; self.loops.loops.len()];
        // The loop of each feedback slot and of each body gate.
        let (fb_loop, gate_loop) = self.loop_maps();
        let fb_first = self.first_feedback_slot();
        // The highest gate a newly needed loop made needed, from which the sweep goes on.
        let mut top = None;
        let need =
            |lit: &Lit, needed: &mut Vec<bool>, loop_needed: &mut Vec<bool>, top: &mut Option<usize>| {
                let s = lit.slot() as usize;
                let l = if let Some(g) = s.checked_sub(first) {
                    if g < count {
                        needed[g] = true;
                        gate_loop[g]
                    } else {
                        u32::MAX
                    }
                } else if let Some(f) = s.checked_sub(fb_first) {
                    fb_loop.get(f).copied().unwrap_or(u32::MAX)
                } else {
                    u32::MAX
                };
                if l != u32::MAX && !loop_needed[l as usize] {
                    loop_needed[l as usize] = true;
                    let lp = &self.loops.loops[l as usize];
                    let body = lp.body.start as usize..(lp.body.end as usize).min(count);
                    for g in body.clone() {
                        needed[g] = true;
                    }
                    let mut hi = body.end.checked_sub(1);
                    for &(_, out) in &lp.pairs {
                        if let Some(g) = (out.slot() as usize).checked_sub(first) {
                            if g < count {
                                needed[g] = true;
                                hi = hi.max(Some(g));
                            }
                        }
                    }
                    *top = (*top).max(hi);
                }
            };
        for lit in lits {
            need(lit, &mut needed, &mut loop_needed, &mut top);
        }
        // Operands read only lower gates, so one sweep from the top reaches the whole fan-in;
        // a loop found needed may make gates above the sweep needed, where it starts again.
        let mut g = count;
        loop {
            if let Some(t) = top.take() {
                g = g.max(t + 1);
            }
            if g == 0 {
                break;
            }
            g -= 1;
            if !needed[g] {
                continue;
            }
            for lit in self.gate_operands(g).unwrap_or(&[]) {
                if (lit.slot() as usize) < first + g {
                    need(lit, &mut needed, &mut loop_needed, &mut top);
                }
            }
        }
        (needed, loop_needed)
    }

    /// The loop of each feedback slot and of each gate (`u32::MAX` for none); out-of-range
    /// items of malformed loops are skipped.
    fn loop_maps(&self) -> (Vec<u32>, Vec<u32>) {
        let mut fb_loop = vec![u32::MAX; self.num_feedback()];
        let mut gate_loop = vec![u32::MAX; self.gates.len()];
        for (l, lp) in self.loops.loops.iter().enumerate() {
            for &(f, _) in &lp.pairs {
                if let Some(x) = fb_loop.get_mut(f as usize) {
                    *x = l as u32;
                }
            }
            for g in lp.body.clone() {
                if let Some(x) = gate_loop.get_mut(g as usize) {
                    *x = l as u32;
                }
            }
        }
        (fb_loop, gate_loop)
    }

    /// Fills [`Program::entry_gates`] with each entry's transitive fan-in, ascending: exactly the
    /// gates its outputs need. The compiler calls it once the gates are ordered.
    pub fn compute_entry_gates(&mut self) {
        if self.loops.loops.is_empty() {
            self.compute_entry_gates_at_once();
            return;
        }
        for entry in Entry::ALL {
            let (needed, loops) = self.needed_with_loops(self.outputs(entry));
            self.entry_gates[entry.index()] = needed
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n)
                .map(|(g, _)| g as u32)
                .collect();
            self.loops.entry_loops[entry.index()] = loops
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n)
                .map(|(l, _)| l as u32)
                .collect();
        }
        self.opaque.demand_gates = self
            .needed_by(&self.opaque.demand)
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n)
            .map(|(g, _)| g as u32)
            .collect();
    }

    /// [`Program::compute_entry_gates`] for a program without loops, all entries in one sweep
    /// from the last gate back, each gate carrying one bit per entry that needs it, instead of
    /// one sweep per entry (chess: 529,000 gates and 3.8 million operands, read five times).
    fn compute_entry_gates_at_once(&mut self) {
        let first = self.first_gate_slot();
        let count = self.gates.len();
        let gate_of = |lit: &Lit| (lit.slot() as usize).checked_sub(first);
        // Bit `i` of a gate's mask: `Entry::ALL[i]` needs it.
        let mut mask = vec![0u8; count];
        for entry in Entry::ALL {
            for g in self.outputs(entry).iter().filter_map(gate_of) {
                if g < count {
                    mask[g] |= 1 << entry.index();
                }
            }
        }
        for g in (0..count).rev() {
            let m = mask[g];
            if m == 0 {
                continue;
            }
            for h in self.gate_operands(g).unwrap_or(&[]).iter().filter_map(gate_of) {
                if h < g {
                    mask[h] |= m;
                }
            }
        }
        for entry in Entry::ALL {
            let bit = 1 << entry.index();
            self.entry_gates[entry.index()] = (0..count as u32)
                .filter(|&g| mask[g as usize] & bit != 0)
                .collect();
            self.loops.entry_loops[entry.index()] = Vec::new();
        }
        self.opaque.demand_gates = if self.opaque.demand.is_empty() {
            Vec::new()
        } else {
            self.needed_by(&self.opaque.demand)
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n)
                .map(|(g, _)| g as u32)
                .collect()
        };
    }

    /// Checks every structural promise the executors rely on: table lengths agree with the
    /// layout, role ranges partition the inputs, every gate reads only slots below its own,
    /// every output is in bounds, every entry's gate list is ascending and closed under the
    /// operands of its gates and outputs, and legal, terminal and goals never read an input.
    /// An executor may then index the value array without further checks.
    pub fn validate(&self) -> Result<(), ProgramError> {
        let slots = self.num_slots();
        if slots > MAX_SLOTS {
            return Err(ProgramError::TooManySlots { slots });
        }
        self.validate_layout()?;
        self.validate_gates()?;
        for entry in Entry::ALL {
            for (i, lit) in self.outputs(entry).iter().enumerate() {
                if lit.slot() as usize >= slots {
                    return Err(ProgramError::OutputOutOfBounds {
                        output: Output::of(entry, i as u32),
                        slot: lit.slot(),
                        slots,
                    });
                }
            }
        }
        self.validate_loops()?;
        if !self.entries_surely_valid() {
            for entry in Entry::ALL {
                self.validate_entry(entry)?;
            }
        }
        self.validate_demand()
    }

    /// Checks the loops: bodies in range, ascending and disjoint; feedback slots partitioned
    /// among them; each pair's literal computed by the end of its body; every gate that reads a
    /// loop's feedback slot in its body or after it; and each entry's loop list exactly the
    /// loops its outputs need (which, with the entry's gate list checked to be exactly its
    /// needed gates, holds every body gate of them).
    fn validate_loops(&self) -> Result<(), ProgramError> {
        let err = |s: String| Err(ProgramError::Loops(s));
        let lp = &self.loops;
        if lp.slots == 0 && lp.loops.is_empty() {
            return match lp.entry_loops.iter().find(|l| !l.is_empty()) {
                Some(l) => err(format!("an entry runs loops {l:?} of a program without loops")),
                None => Ok(()),
            };
        }
        let gates = self.gates.len();
        let mut owner = vec![u32::MAX; self.num_feedback()];
        let mut prev_end = 0u32;
        for (l, x) in lp.loops.iter().enumerate() {
            if x.body.start >= x.body.end || x.body.end as usize > gates || x.body.start < prev_end {
                return err(format!(
                    "loop {l} has body {:?}, empty, not within the gates or overlapping the previous body",
                    x.body
                ));
            }
            prev_end = x.body.end;
            if x.pairs.is_empty() {
                return err(format!("loop {l} has no feedback slot"));
            }
            let end_slot = self.first_gate_slot() + x.body.end as usize;
            for &(f, out) in &x.pairs {
                match owner.get_mut(f as usize) {
                    Some(o) if *o == u32::MAX => *o = l as u32,
                    _ => return err(format!("loop {l} names feedback slot {f}, out of range or taken")),
                }
                if out.slot() as usize >= end_slot {
                    return err(format!(
                        "loop {l}: the literal of feedback slot {f} reads slot {}, not below the end of its body",
                        out.slot()
                    ));
                }
            }
        }
        if let Some(f) = owner.iter().position(|&o| o == u32::MAX) {
            return err(format!("feedback slot {f} belongs to no loop"));
        }
        let fb_first = self.first_feedback_slot();
        for g in 0..gates {
            for lit in self.gate_operands(g).unwrap_or(&[]) {
                let Some(f) = (lit.slot() as usize).checked_sub(fb_first) else {
                    continue;
                };
                let Some(&l) = owner.get(f) else { continue };
                let body = &lp.loops[l as usize].body;
                if (g as u32) < body.start {
                    return err(format!(
                        "gate {g} reads feedback slot {f} of loop {l}, before its body {body:?}"
                    ));
                }
            }
        }
        for entry in Entry::ALL {
            let (_, needed) = self.needed_with_loops(self.outputs(entry));
            let expected: Vec<u32> = (0..needed.len() as u32).filter(|&l| needed[l as usize]).collect();
            if expected != lp.entry_loops[entry.index()] {
                return err(format!(
                    "the loop list of entry {entry:?} is {:?}, but its outputs need {expected:?}",
                    lp.entry_loops[entry.index()]
                ));
            }
            let list = self.gates_of(entry);
            for &l in &expected {
                let body = &lp.loops[l as usize].body;
                if let Some(g) = body.clone().find(|g| list.binary_search(g).is_err()) {
                    return err(format!(
                        "entry {entry:?} runs loop {l} but lacks gate {g} of its body"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the opaque atoms' demand: one literal per atom, in bounds, its gate list exactly
    /// the gates it needs, and nothing it needs reads an input or an opaque slot (the demand is
    /// computed before the opaque slots are filled).
    fn validate_demand(&self) -> Result<(), ProgramError> {
        let o = &self.opaque;
        if o.demand.len() != o.names.len() {
            return Err(ProgramError::Demand(format!(
                "{} demand literals for {} opaque atoms",
                o.demand.len(),
                o.names.len()
            )));
        }
        let slots = self.num_slots();
        if let Some(lit) = o.demand.iter().find(|l| l.slot() as usize >= slots) {
            return Err(ProgramError::Demand(format!(
                "a demand literal reads slot {}, beyond the {slots} slots",
                lit.slot()
            )));
        }
        let needed = self.needed_by(&o.demand);
        let expected: Vec<u32> = (0..needed.len() as u32).filter(|&g| needed[g as usize]).collect();
        if expected != o.demand_gates {
            return Err(ProgramError::Demand(
                "the demand's gate list is not exactly the gates its literals need".into(),
            ));
        }
        let state_only = |lit: &Lit| {
            !matches!(
                self.slot_kind(lit.slot()),
                Slot::Input(_) | Slot::Opaque(_) | Slot::Feedback(_)
            )
        };
        if !o.demand.iter().all(state_only) {
            return Err(ProgramError::Demand(
                "a demand literal reads an input or opaque slot".into(),
            ));
        }
        for &g in &o.demand_gates {
            if !self
                .gate_operands(g as usize)
                .unwrap_or(&[])
                .iter()
                .all(state_only)
            {
                return Err(ProgramError::Demand(format!(
                    "demand gate {g} reads an input or opaque slot"
                )));
            }
        }
        Ok(())
    }

    fn validate_layout(&self) -> Result<(), ProgramError> {
        let layout = &self.layout;
        let lengths = [
            ("legal (one per input)", layout.inputs.len(), self.legal.len()),
            ("next (one per base)", layout.bases.len(), self.next.len()),
            (
                "goals (one per layout goal)",
                layout.goals.len(),
                self.goals.len(),
            ),
            (
                "views (one per layout view)",
                layout.views.len(),
                self.views.len(),
            ),
            (
                "init (words of the base bitmask)",
                Layout::words(layout.bases.len()),
                self.init.len(),
            ),
        ];
        for (table, expected, got) in lengths {
            if expected != got {
                return Err(ProgramError::LengthMismatch { table, expected, got });
            }
        }
        let bases = layout.bases.len();
        if let Some(&last) = self.init.last() {
            let used = bases - (self.init.len() - 1) * 64;
            if used < 64 && last >> used != 0 {
                let bit = (self.init.len() - 1) * 64 + (used + (last >> used).trailing_zeros() as usize);
                return Err(ProgramError::InitBitBeyondBases { bit, bases });
            }
        }
        let roles = layout.roles.len();
        if layout.role_inputs.len() != roles {
            return Err(ProgramError::RoleRangeCount {
                roles,
                got: layout.role_inputs.len(),
            });
        }
        let mut end = 0u32;
        for (role, range) in layout.role_inputs.iter().enumerate() {
            if range.start != end || range.end < range.start {
                return Err(ProgramError::RoleRangeGap {
                    role,
                    range: range.clone(),
                    expected_start: end,
                });
            }
            end = range.end;
        }
        if end as usize != layout.inputs.len() {
            return Err(ProgramError::RoleRangesEnd {
                end,
                inputs: layout.inputs.len(),
            });
        }
        for (range_role, range) in layout.role_inputs.iter().enumerate() {
            for input in range.start as usize..range.end as usize {
                let (role, name) = &layout.inputs[input];
                if role.index() != range_role {
                    return Err(ProgramError::InputRoleMismatch {
                        input,
                        name: name.clone(),
                        role: *role,
                        range_role,
                    });
                }
            }
        }
        for (goal, &(role, _)) in layout.goals.iter().enumerate() {
            if role.index() >= roles {
                return Err(ProgramError::GoalRoleOutOfRange { goal, role, roles });
            }
        }
        Ok(())
    }

    fn validate_gates(&self) -> Result<(), ProgramError> {
        for (g, gate) in self.gates.iter().enumerate() {
            let Some(operands) = self.gate_operands(g) else {
                return Err(ProgramError::OperandRunOutOfBounds {
                    gate: g,
                    start: gate.start,
                    len: gate.len,
                    operands: self.operands.len(),
                });
            };
            let gate_slot = self.first_gate_slot() + g;
            for (operand, lit) in operands.iter().enumerate() {
                if lit.slot() as usize >= gate_slot {
                    return Err(ProgramError::OperandNotBelow {
                        gate: g,
                        gate_slot,
                        operand,
                        slot: lit.slot(),
                        kind: self.slot_kind(lit.slot()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether every entry's gate list passes [`Program::validate_entry`], checked for all
    /// entries in one pass over the gates instead of one per entry and a sweep of the needed
    /// gates per entry that reads no input: on chess's 529k gates and 3.8M operands those
    /// passes took about 100 ms, and lowering validates twice. `false` says only that the
    /// entries must be checked one by one, which finds the error to report; it is also the
    /// answer for a program with loops, whose needed gates this does not follow.
    fn entries_surely_valid(&self) -> bool {
        if !self.loops.loops.is_empty() {
            return false;
        }
        let gates = self.gates.len();
        let first = self.first_gate_slot();
        let gate_of = |lit: &Lit| (lit.slot() as usize).checked_sub(first);
        let reads_input = |lit: &Lit| matches!(self.slot_kind(lit.slot()), Slot::Input(_));
        // Bit `i` of a gate's mask: the gate is in the list of `Entry::ALL[i]`.
        let mut mask = vec![0u8; gates];
        let mut base_only = 0u8;
        for entry in Entry::ALL {
            let bit = 1u8 << entry.index();
            let list = self.gates_of(entry);
            for (position, &gate) in list.iter().enumerate() {
                if gate as usize >= gates || (position > 0 && list[position - 1] >= gate) {
                    return false;
                }
                mask[gate as usize] |= bit;
            }
            for lit in self.outputs(entry) {
                let missing = gate_of(lit).is_some_and(|g| mask.get(g).is_none_or(|m| m & bit == 0));
                if missing || (!entry.reads_inputs() && reads_input(lit)) {
                    return false;
                }
            }
            if !entry.reads_inputs() {
                base_only |= bit;
            }
        }
        // Each list is closed under the operands of its gates (so, holding its outputs' gates,
        // it holds every gate they need), and no gate in the list of an entry that reads no
        // input reads one: a list holding more than the needed gates may be refused here and
        // accepted one entry at a time, never the other way round.
        for (g, &m) in mask.iter().enumerate() {
            if m == 0 {
                continue;
            }
            for lit in self.gate_operands(g).unwrap_or(&[]) {
                let missing = gate_of(lit).is_some_and(|h| mask.get(h).is_none_or(|&n| n & m != m));
                if missing || (m & base_only != 0 && reads_input(lit)) {
                    return false;
                }
            }
        }
        true
    }

    /// Checks one entry's gate list; the gates and outputs are already known to be in bounds.
    fn validate_entry(&self, entry: Entry) -> Result<(), ProgramError> {
        let list = self.gates_of(entry);
        let gates = self.gates.len();
        let mut present = vec![false; gates];
        for (position, &gate) in list.iter().enumerate() {
            if gate as usize >= gates {
                return Err(ProgramError::EntryGateOutOfRange { entry, gate, gates });
            }
            if position > 0 && list[position - 1] >= gate {
                return Err(ProgramError::EntryGatesNotAscending {
                    entry,
                    position,
                    previous: list[position - 1],
                    gate,
                });
            }
            present[gate as usize] = true;
        }
        // A list that holds every gate read by its outputs and by its own gates is closed under
        // the transitive fan-in, so checking the direct reads suffices.
        let first = self.first_gate_slot();
        let gate_of = |lit: &Lit| (lit.slot() as usize).checked_sub(first).map(|g| g as u32);
        for (i, lit) in self.outputs(entry).iter().enumerate() {
            if let Some(missing) = gate_of(lit) {
                if !present[missing as usize] {
                    return Err(ProgramError::EntryMissesOutputGate {
                        entry,
                        output: Output::of(entry, i as u32),
                        missing,
                    });
                }
            }
        }
        for &gate in list {
            for (operand, lit) in self
                .gate_operands(gate as usize)
                .unwrap_or(&[])
                .iter()
                .enumerate()
            {
                if let Some(missing) = gate_of(lit) {
                    if !present[missing as usize] {
                        return Err(ProgramError::EntryMissesOperandGate {
                            entry,
                            gate,
                            operand,
                            missing,
                        });
                    }
                }
            }
        }
        if !entry.reads_inputs() {
            self.validate_base_only(entry)?;
        }
        Ok(())
    }

    /// Checks that nothing `entry` needs reads an input slot.
    fn validate_base_only(&self, entry: Entry) -> Result<(), ProgramError> {
        let as_input = |lit: &Lit| match self.slot_kind(lit.slot()) {
            Slot::Input(i) => Some(i),
            _ => None,
        };
        for (i, lit) in self.outputs(entry).iter().enumerate() {
            if let Some(input) = as_input(lit) {
                return Err(ProgramError::OutputReadsInput {
                    output: Output::of(entry, i as u32),
                    input,
                });
            }
        }
        let needed = self.needed_gates(entry);
        for (g, _) in needed.iter().enumerate().filter(|&(_, &n)| n) {
            for (operand, lit) in self.gate_operands(g).unwrap_or(&[]).iter().enumerate() {
                if let Some(input) = as_input(lit) {
                    return Err(ProgramError::GateReadsInput {
                        entry,
                        gate: g as u32,
                        operand,
                        input,
                    });
                }
            }
        }
        Ok(())
    }
}
