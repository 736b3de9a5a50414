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
//! - `2+B+I+g`: the output of gate `g`, gates in topological order (a gate reads only slots
//!   below its own).
//!
//! Gate operands and outputs are [`Lit`]s: a slot, possibly negated, so negation costs no gate.

use std::ops::Range;

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
}
