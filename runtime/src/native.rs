//! [`Native`]: a [`Program`] compiled to machine code, behind a safe API.
//!
//! The compiler (`propjet::lower`) builds the functions with Cranelift into a [`JITModule`] and
//! hands the finished module to [`Native::from_jit`]. From then on this type alone owns the
//! module: it does the only cast from a code pointer to a typed function, keeps the pointers
//! private, checks every buffer it passes to them, and frees the code when it is dropped.
//!
//! # The calling convention of the generated code
//!
//! Every generated function has the C signature `void f(uint64_t *values)` (one pointer, no
//! result) and computes a run of consecutive gates of one entry: for each gate it loads the
//! operand slots, combines them with bitwise operations and stores the result into the gate's
//! slot, unless only later gates of the same function read it and it is no output of any
//! entry (such a value may stay in a register). The value array has one lane value per slot of the program ([`Program::num_slots`]):
//! - [`Width::X64`]: one `u64` per slot, 8 bytes apart: bit `k` of every slot is game state `k`.
//! - [`Width::X128`]: one 128-bit vector per slot, 16 bytes apart and 16-byte aligned, stored as
//!   two `u64` words: lane `k` is bit `k % 64` of word `k / 64`.
//!
//! An entry is one or more such functions ("chunks"), called in order; large nets are split so
//! that Cranelift's compile time and memory stay linear. The caller sets the constant slots
//! (`0` to all zeros, `1` to all ones), the base slots and, for next and view, the input slots;
//! the outputs are then read through their literals, exactly as with the
//! [`Interpreter`](crate::Interpreter). Only the outputs are defined afterwards: the slots of
//! an entry's other gates may hold anything (the view entry's outputs are every view
//! proposition).
//!
//! A single state runs as lane 0 of the 64-lane code: the packed state is spread into the base
//! slots and the outputs are packed again.
//!
//! A program with opaque atoms (`doc/opaque.md`) has slots that the generated code only reads.
//! Before an entry that reads them, this wrapper fills them in Rust, exactly as the interpreter
//! does and with its code: the demand gates, then the evaluator for each lane's demanded atoms.
//! The generated code never calls back.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use cranelift_jit::JITModule;
use cranelift_module::FuncId;

use crate::interp::{loop_pairs, neg_mask, normalize_kif, pack_bits, run_loop, OpaqueFill};
use crate::opaque::{Opaque, OpaqueError};
use crate::program::{Entry, Lit, Program, ProgramError, ValidProgram};
use crate::state::PackedState;
use crate::{FactIdx, Layout, Machine, MachineError, MoveIdx, RoleIdx};

/// How many game states one call evaluates.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Width {
    /// One `u64` per slot: 64 states per call.
    X64,
    /// One 128-bit vector per slot: 128 states per call.
    X128,
}

impl Width {
    /// Both widths, narrow first.
    pub const ALL: [Width; 2] = [Width::X64, Width::X128];

    /// The number of lanes (game states) per call.
    #[inline]
    pub fn lanes(self) -> u32 {
        self.words() as u32 * 64
    }

    /// The number of `u64` words per slot.
    #[inline]
    pub fn words(self) -> usize {
        match self {
            Width::X64 => 1,
            Width::X128 => 2,
        }
    }

    /// The position of the width in [`Width::ALL`].
    #[inline]
    fn index(self) -> usize {
        self.words() - 1
    }
}

/// The functions of one entry as the lowering defined them in the module: the chunks of each
/// width, in the order they must run. `x128` is `None` when the target cannot run 128-bit
/// vectors (or they were not asked for).
#[derive(Clone, Debug, Default)]
pub struct EntryChunks {
    /// The chunks of the 64-lane code.
    pub x64: Vec<FuncId>,
    /// The chunks of the 128-lane code, if any.
    pub x128: Option<Vec<FuncId>>,
    /// Whether the 64-lane calls run the 128-lane code instead of `x64` (which is then
    /// empty): the wrapper copies the leaf slots into the low half of a 128-lane array, runs
    /// the 128-lane chunks and copies the entry's outputs back. Lowering a large program at one
    /// width halves its lowering time (`doc/native.md`). Every entry must agree, and it needs
    /// `x128`.
    pub x64_from_x128: bool,
    /// The loops the entry runs ([`crate::Loops`]), those of [`Program::loops_of`] in the
    /// order the chunks run them: each the positions of its body's chunks in the list of every
    /// width (the lists of all widths have the same chunks in the same order). The wrapper
    /// runs those chunks as the loop's rounds, as the interpreter runs the body.
    pub loops: Vec<ChunkLoop>,
}

/// A loop as an entry's chunks run it: see [`EntryChunks::loops`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkLoop {
    /// The loop, an index into `Program::loops.loops`.
    pub index: u32,
    /// The chunks of its body: positions in the entry's chunk list of each width.
    pub chunks: Range<usize>,
}

/// Why a native call refused its arguments, or native code could not be set up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NativeError {
    /// The program handed to [`Native::from_jit`] is malformed.
    #[error("invalid program: {0}")]
    Program(#[from] ProgramError),
    /// The chunks of an entry's loops do not match the program's loops of that entry, or lie
    /// outside its chunk list.
    #[error("entry {entry:?}: the loops of its chunks do not match the program's")]
    InconsistentLoops {
        /// The entry.
        entry: Entry,
    },
    /// The entries disagree on which widths they have (or on whether the 64-lane calls run
    /// the 128-lane code, which needs that code).
    #[error("entry {entry:?} disagrees with the others on its widths")]
    InconsistentWidths {
        /// An entry without the wide code.
        entry: Entry,
    },
    /// The lanes were made by another compiled game (or another compilation of the same game).
    #[error("these lanes belong to compiled game #{lanes}, not to this one (#{native})")]
    ForeignLanes {
        /// The id of the game that made the lanes.
        lanes: u64,
        /// The id of this game.
        native: u64,
    },
    /// This compiled game has no code of that width.
    #[error("this compiled game has no {} -lane code", .0.lanes())]
    WidthUnavailable(Width),
    /// A value array shorter than the program's slots.
    #[error("the value array has {got} slots, but the program has {needed}")]
    ValuesTooShort {
        /// The program's number of slots.
        needed: usize,
        /// The slots given.
        got: usize,
    },
    /// A 128-lane value array that is not 16-byte aligned.
    #[error("the 128-lane value array is not 16-byte aligned")]
    Misaligned,
    /// A lane beyond the width.
    #[error("lane {lane} does not exist; there are {lanes} lanes")]
    LaneOutOfRange {
        /// The lane asked for.
        lane: u32,
        /// The number of lanes.
        lanes: u32,
    },
    /// A packed bitmask of the wrong size for the program.
    #[error("the packed {what} has {got} words, but the program needs {expected}")]
    MaskSize {
        /// What the bitmask holds (bases or inputs).
        what: &'static str,
        /// The words the program needs.
        expected: usize,
        /// The words given.
        got: usize,
    },
    /// The evaluator of the opaque atoms failed while filling them before the entry ran
    /// (the entry ran all the same, with the atoms not yet answered read as 0).
    #[error("{0}")]
    Opaque(#[from] OpaqueError),
    /// A slot beyond the value array.
    #[error("slot {slot} does not exist; the program has {slots} slots")]
    SlotOutOfRange {
        /// The slot asked for.
        slot: u32,
        /// The number of slots.
        slots: usize,
    },
}

/// A generated function: see the module documentation for what it may assume and do.
type ChunkFn = unsafe extern "C" fn(*mut u64);

/// 128-bit lane values as words: value `s` is words `2 * s` and `2 * s + 1`.
fn wide_words_mut(v: &mut [Wide]) -> &mut [u64] {
    // SAFETY: `Wide` is `repr(C)` around `[u64; 2]`, 16 bytes with no padding, so the `Wide`s are
    // exactly `2 * len` contiguous, initialized `u64`s, and a 16-byte aligned pointer is aligned
    // for `u64`; any bit pattern is a valid `Wide`. The mutable borrow of `v` makes this slice the
    // only access to those bytes while it lives.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u64>(), v.len() * 2) }
}

/// One 128-bit lane value. The alignment makes every `Vec<Wide>` 16-byte aligned, which the
/// vector loads of the 128-lane code may require.
#[derive(Copy, Clone, Default, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
struct Wide([u64; 2]);

/// The value array of a batch of states, of either width.
#[derive(Clone, Debug)]
enum Store {
    X64(Vec<u64>),
    X128(Vec<Wide>),
}

/// A batch of 64 or 128 game states in lanes, made by [`Native::lanes`] for one compiled game
/// and accepted only by that game's [`Native`].
///
/// Slot `s` holds `width.words()` words; lane `k` is bit `k % 64` of word `k / 64`. A playout
/// driver can fill the base and input slots directly through [`Lanes::slot_mut`], or one lane
/// at a time through [`Native::set_state`] and [`Native::set_inputs`].
#[derive(Clone, Debug)]
pub struct Lanes {
    owner: u64,
    store: Store,
}

impl Lanes {
    /// The width of the batch.
    pub fn width(&self) -> Width {
        match self.store {
            Store::X64(_) => Width::X64,
            Store::X128(_) => Width::X128,
        }
    }

    /// The number of slots.
    pub fn num_slots(&self) -> usize {
        match &self.store {
            Store::X64(v) => v.len(),
            Store::X128(v) => v.len(),
        }
    }

    /// The words of `slot` (one or two), or `None` beyond the value array.
    pub fn slot(&self, slot: u32) -> Option<&[u64]> {
        match &self.store {
            Store::X64(v) => v.get(slot as usize).map(std::slice::from_ref),
            Store::X128(v) => v.get(slot as usize).map(|w| &w.0[..]),
        }
    }

    /// The words of `slot` (one or two) to write, or `None` beyond the value array.
    pub fn slot_mut(&mut self, slot: u32) -> Option<&mut [u64]> {
        match &mut self.store {
            Store::X64(v) => v.get_mut(slot as usize).map(std::slice::from_mut),
            Store::X128(v) => v.get_mut(slot as usize).map(|w| &mut w.0[..]),
        }
    }

    /// The value of `lit` in lane `lane`, or `None` if the slot or lane does not exist.
    pub fn get(&self, lit: Lit, lane: u32) -> Option<bool> {
        let words = self.slot(lit.slot())?;
        let word = words.get(lane as usize / 64)? ^ neg_mask(lit.0);
        Some(word >> (lane % 64) & 1 == 1)
    }

    /// The whole value array as words: slot `s` is words `s * w .. (s + 1) * w`, with `w` the
    /// width's [`Width::words`]. A playout driver reads and writes many slots per step, and one
    /// flat slice spares it a width dispatch per slot.
    pub fn words(&self) -> &[u64] {
        match &self.store {
            Store::X64(v) => v,
            Store::X128(v) => {
                // SAFETY: `Wide` is `repr(C)` around `[u64; 2]`, 16 bytes with no padding, so
                // `v.len()` of them are exactly `2 * v.len()` initialized, contiguous `u64`s, and a
                // 16-byte aligned pointer is aligned for `u64`. The slice borrows `self`, so the
                // vector can neither move nor change while it lives.
                unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u64>(), v.len() * 2) }
            }
        }
    }

    /// The whole value array as words to write, laid out as in [`Lanes::words`].
    pub fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.store {
            Store::X64(v) => v,
            Store::X128(v) => wide_words_mut(v),
        }
    }

    /// Sets every slot in every lane to zero.
    pub fn clear(&mut self) {
        match &mut self.store {
            Store::X64(v) => v.fill(0),
            Store::X128(v) => v.fill(Wide::default()),
        }
    }

    /// Writes bit `i` of `mask` into lane `lane` of slot `first + i`, for `i < count`. The
    /// caller checked the lane, the mask size and that the slots exist.
    fn spread(&mut self, mask: &[u64], count: usize, first: usize, lane: u32) {
        let (word, bit) = (lane as usize / 64, lane % 64);
        for i in 0..count {
            let on = mask[i / 64] >> (i % 64) & 1;
            if let Some(words) = self.slot_mut((first + i) as u32) {
                words[word] = words[word] & !(1 << bit) | on << bit;
            }
        }
    }
}

/// The machine code of one entry: the typed chunk functions of each width, and its loops.
#[derive(Debug, Default)]
struct EntryCode {
    by_width: [Option<Vec<ChunkFn>>; 2],
    loops: Vec<ChunkLoop>,
}

/// Whether `loops` are the program's loops of `entry` (in any order: the chunks run loops that
/// do not read each other in the order the lowering grouped their gates), each a nonempty run
/// of chunks within the `len` chunks of every width, the runs in order.
fn loops_match(program: &Program, entry: Entry, loops: &[ChunkLoop], len: usize) -> bool {
    let mut indices: Vec<u32> = loops.iter().map(|l| l.index).collect();
    indices.sort_unstable();
    let mut end = 0;
    indices == program.loops_of(entry)
        && loops.iter().all(|l| {
            let ok = l.chunks.start >= end && l.chunks.start < l.chunks.end && l.chunks.end <= len;
            end = l.chunks.end;
            ok
        })
}

/// Scratch memory for the [`Machine`] methods, as in the interpreter.
#[derive(Debug)]
struct Scratch {
    values: Vec<u64>,
    legal_key: Vec<u64>,
    legal: Vec<u64>,
    legal_valid: bool,
}

impl Scratch {
    fn new(slots: usize) -> Scratch {
        Scratch {
            values: vec![0; slots],
            legal_key: Vec::new(),
            legal: Vec::new(),
            legal_valid: false,
        }
    }
}

/// Distinct ids for every [`Native`] of the process, so lanes of one cannot reach another.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A [`Program`] compiled to native code; implements [`Machine`] (engine name `native`) with
/// [`PackedState`] states and offers 64- and 128-lane batch evaluation.
///
/// `Native` is `Send` and `Sync`, and soundly so without any `unsafe impl`: the generated code
/// is immutable once finalized and keeps no state of its own, so any number of threads may call
/// it at once, each on its own value array; the function pointers are plain `fn` pointers; the
/// module itself (which is `Send` but not `Sync`) sits behind a mutex that is only taken to free
/// it on drop; and the scratch memory of the [`Machine`] methods is behind a mutex too.
pub struct Native {
    id: u64,
    program: Arc<Program>,
    code: [EntryCode; 5],
    has_x128: bool,
    /// Whether 64-lane calls run the 128-lane code ([`EntryChunks::x64_from_x128`]).
    x64_from_x128: bool,
    /// The 128-lane array those calls run on, taken only by trying its lock.
    wide_scratch: Mutex<Vec<Wide>>,
    /// The opaque atoms' evaluator and demand, for a program that has opaque atoms: the
    /// generated code only reads their slots, and this wrapper fills them before an entry that
    /// reads them runs (`doc/opaque.md` §6).
    opaque: Option<OpaqueFill>,
    /// The first error of the opaque evaluator in a [`Machine`] call, which has no error
    /// value of its own; later calls that can fail report it.
    opaque_error: Mutex<Option<OpaqueError>>,
    /// For each role, its moves by normalized action text.
    moves: Vec<HashMap<String, MoveIdx>>,
    scratch: Mutex<Scratch>,
    /// For each loop of the program, its pairs as the interpreter runs them and its most rounds.
    loop_pairs: Vec<(Vec<(u32, u32)>, usize)>,
    /// The code's owner. Only [`Drop`] touches it: the code must outlive every pointer in `code`.
    /// Boxed because the module is large and a `Native` is moved around by value.
    module: Mutex<Option<Box<JITModule>>>,
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Native")
            .field("id", &self.id)
            .field("slots", &self.program.num_slots())
            .field("has_x128", &self.has_x128)
            .finish_non_exhaustive()
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(module) => module.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: `free_memory` requires that no function of the module is running and that
            // none of its pointers is called afterwards. The pointers live only in `self.code`,
            // which is dropped with `self` and never handed out; every call borrows `self`, so
            // none can be running while `drop` holds `&mut self`.
            unsafe { (*module).free_memory() };
        }
    }
}

impl Native {
    /// Takes ownership of a finalized module whose functions compute `program`, and casts its
    /// functions to typed pointers, the only place where that happens. A program with opaque
    /// atoms needs `opaque`, their evaluator (the code reads their slots, and the wrapper fills
    /// them); without one it is refused, as [`Interpreter::new`](crate::Interpreter::new) refuses
    /// it. For a program without opaque atoms `opaque` is not used. The program comes validated
    /// ([`ValidProgram`]), so that the caller, which needs a valid program to generate the code
    /// in the first place, does not have this function check it a second time.
    ///
    /// # Safety
    ///
    /// The caller guarantees, for every entry `e` (indexed as in [`Entry::ALL`]) and width `w`:
    /// - every [`FuncId`] in `chunks[e]` was declared and defined in `module`, and
    ///   [`JITModule::finalize_definitions`] has run since the last definition;
    /// - each such function has exactly one pointer parameter and no result, in the host's C
    ///   calling convention (`isa.default_call_conv()` of the native ISA);
    /// - given a pointer to `program.num_slots()` lane values of width `w` (8 bytes each for
    ///   [`Width::X64`]; 16 bytes each and 16-byte aligned for [`Width::X128`]), it reads and
    ///   writes only those bytes, touches no other memory, calls nothing, does not unwind and
    ///   always returns.
    ///
    /// Correctness (that the chunks compute the entry's gates) is not a safety matter; the
    /// differential tests check it against the interpreter.
    pub unsafe fn from_jit(
        program: ValidProgram,
        opaque: Option<Arc<dyn Opaque>>,
        module: JITModule,
        chunks: [EntryChunks; 5],
    ) -> Result<Native, NativeError> {
        let program: Arc<Program> = program.into();
        let has_x128 = chunks[0].x128.is_some();
        let x64_from_x128 = chunks[0].x64_from_x128;
        // The program was validated when the `ValidProgram` was made. The generated code only
        // reads the opaque slots; without an evaluator nothing could fill them.
        let refusal = if program.num_opaque() > 0 && opaque.is_none() {
            Some(NativeError::Program(ProgramError::NoOpaqueEvaluator {
                atoms: program.num_opaque(),
            }))
        } else {
            Entry::ALL
                .into_iter()
                .find(|e| {
                    let c = &chunks[e.index()];
                    c.x128.is_some() != has_x128
                        || c.x64_from_x128 != x64_from_x128
                        || (x64_from_x128 && (!has_x128 || !c.x64.is_empty()))
                        || (has_x128 && !x64_from_x128 && c.x128.as_ref().map_or(0, Vec::len) != c.x64.len())
                })
                .map(|entry| NativeError::InconsistentWidths { entry })
                .or_else(|| {
                    Entry::ALL
                        .into_iter()
                        .find(|e| {
                            let c = &chunks[e.index()];
                            let len = if x64_from_x128 {
                                c.x128.as_ref().map_or(0, Vec::len)
                            } else {
                                c.x64.len()
                            };
                            !loops_match(&program, *e, &c.loops, len)
                        })
                        .map(|entry| NativeError::InconsistentLoops { entry })
                })
        };
        if let Some(refusal) = refusal {
            // SAFETY: no pointer to the module's code has been taken yet, so freeing it cannot
            // leave a dangling one; without this a dropped module would keep its code mapped.
            unsafe { module.free_memory() };
            return Err(refusal);
        }
        let cast = |id: &FuncId| -> ChunkFn {
            let ptr = module.get_finalized_function(*id);
            // SAFETY: by this function's contract `ptr` is the entry of a finalized function
            // with one pointer parameter and no result in the C calling convention, which is
            // what `ChunkFn` says. The pointer stays valid while `module` lives, and `module`
            // lives in the `Native` built below, which owns every pointer made here.
            unsafe { std::mem::transmute::<*const u8, ChunkFn>(ptr) }
        };
        let code = chunks.each_ref().map(|c| EntryCode {
            by_width: [
                (!x64_from_x128).then(|| c.x64.iter().map(cast).collect()),
                c.x128.as_ref().map(|ids| ids.iter().map(cast).collect()),
            ],
            loops: c.loops.clone(),
        });
        let loop_pairs = program
            .loops
            .loops
            .iter()
            .map(|l| (loop_pairs(&program, l), l.max_rounds()))
            .collect();
        let layout = &program.layout;
        let mut moves = vec![HashMap::new(); layout.roles.len()];
        for (i, (role, action)) in layout.inputs.iter().enumerate() {
            // As in the interpreter: the first of two inputs with the same action wins.
            moves[role.index()]
                .entry(normalize_kif(action))
                .or_insert(MoveIdx::from_index(i));
        }
        let scratch = Mutex::new(Scratch::new(program.num_slots()));
        let opaque = match opaque {
            Some(evaluator) if program.num_opaque() > 0 => Some(OpaqueFill::new(&program, evaluator)),
            _ => None,
        };
        Ok(Native {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            program,
            code,
            has_x128,
            x64_from_x128,
            wide_scratch: Mutex::new(Vec::new()),
            opaque,
            opaque_error: Mutex::new(None),
            moves,
            scratch,
            loop_pairs,
            module: Mutex::new(Some(Box::new(module))),
        })
    }

    /// The program compiled.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// The process-unique id of this compiled game, which its [`Lanes`] carry.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether this compiled game has code of `width`.
    pub fn has_width(&self, width: Width) -> bool {
        width == Width::X64 || self.has_x128
    }

    /// The number of generated functions of `entry` at `width` (0 for an entry without gates
    /// or a width without code).
    pub fn chunk_count(&self, entry: Entry, width: Width) -> usize {
        self.code[entry.index()].by_width[width.index()]
            .as_ref()
            .map_or(0, Vec::len)
    }

    /// A zeroed batch of lanes of `width` for this game.
    pub fn lanes(&self, width: Width) -> Result<Lanes, NativeError> {
        if !self.has_width(width) {
            return Err(NativeError::WidthUnavailable(width));
        }
        let slots = self.program.num_slots();
        let store = match width {
            Width::X64 => Store::X64(vec![0; slots]),
            Width::X128 => Store::X128(vec![Wide::default(); slots]),
        };
        Ok(Lanes {
            owner: self.id,
            store,
        })
    }

    /// Runs `entry` on a 64-lane value array of at least [`Program::num_slots`] words, the
    /// contract of [`Interpreter::eval`](crate::Interpreter::eval) for everything read through
    /// [`Program::outputs`]: the constant slots are set, the entry's outputs computed, and gate
    /// slots of other entries left as they were. The slots of the entry's gates that are not
    /// its outputs are left unspecified (the interpreter writes them; native code may keep
    /// such values in registers instead).
    ///
    /// If the entry reads opaque slots, they are filled first for all 64 lanes, exactly as the
    /// interpreter fills them (the demand gates' slots and the opaque slots are written); an
    /// error of the evaluator is returned after the entry ran with the unanswered atoms 0.
    pub fn eval(&self, entry: Entry, values: &mut [u64]) -> Result<(), NativeError> {
        self.eval_active(entry, values, !0)
    }

    /// As [`Native::eval`], filling opaque slots only for the lanes set in `active` (the
    /// others read their opaque atoms as 0, so their outputs of entries that read them are
    /// meaningless), as [`Interpreter::eval_lanes`](crate::Interpreter::eval_lanes) does.
    pub fn eval_active(&self, entry: Entry, values: &mut [u64], active: u64) -> Result<(), NativeError> {
        let needed = self.program.num_slots();
        if values.len() < needed {
            return Err(NativeError::ValuesTooShort {
                needed,
                got: values.len(),
            });
        }
        values[Program::FALSE_SLOT as usize] = 0;
        values[Program::TRUE_SLOT as usize] = !0;
        let filled = self.fill::<1>(entry, values, [active]);
        self.call_x64(entry, &mut values[..needed]);
        Ok(filled?)
    }

    /// Runs `entry`'s 64-lane code on `values` (at least `num_slots` words, constants set,
    /// opaque slots filled), or its 128-lane code on a copy of the leaf slots with the outputs
    /// copied back when the 64-lane calls are served that way.
    fn call_x64(&self, entry: Entry, values: &mut [u64]) {
        if !self.x64_from_x128 {
            self.call(entry, Width::X64, values);
            return;
        }
        let slots = self.program.num_slots();
        let leaves = self.program.first_gate_slot();
        let mut fresh = Vec::new();
        let mut guard = match self.wide_scratch.try_lock() {
            Ok(guard) => Some(guard),
            // Every call rewrites the leaf slots and reads back only what the entry wrote.
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        let wide: &mut Vec<Wide> = guard.as_deref_mut().unwrap_or(&mut fresh);
        wide.resize(slots, Wide::default());
        for (w, &v) in wide[..leaves].iter_mut().zip(&values[..leaves]) {
            *w = Wide([v, 0]);
        }
        // `wide` holds `num_slots` aligned 128-lane values and is borrowed mutably here.
        self.call(entry, Width::X128, wide_words_mut(wide));
        for lit in self.program.outputs(entry) {
            let slot = lit.slot() as usize;
            if slot >= leaves {
                values[slot] = wide[slot].0[0];
            }
        }
        // The loops leave their feedback slots at the fixpoint, as the interpreter does.
        let feedback = self.program.first_feedback_slot()..leaves;
        for (v, w) in values[feedback.clone()].iter_mut().zip(&wide[feedback]) {
            *v = w.0[0];
        }
    }

    /// Fills the opaque slots of the lanes in `active` before `entry` runs, if it reads them;
    /// `words` holds the program's slots at `W` words each, constants set.
    #[inline]
    fn fill<const W: usize>(
        &self,
        entry: Entry,
        words: &mut [u64],
        active: [u64; W],
    ) -> Result<(), OpaqueError> {
        match &self.opaque {
            Some(fill) if fill.reads(entry) => fill.fill::<W>(&self.program, words, active),
            _ => Ok(()),
        }
    }

    /// Runs `entry` on a batch of lanes of this game, filling the opaque slots of every lane
    /// first if the entry reads them (see [`Native::eval`]).
    pub fn eval_lanes(&self, entry: Entry, lanes: &mut Lanes) -> Result<(), NativeError> {
        self.eval_lanes_active(entry, lanes, !0)
    }

    /// As [`Native::eval_lanes`], filling opaque slots only for the lanes set in `active`
    /// (lane `k` is bit `k`; bits beyond the width are ignored).
    pub fn eval_lanes_active(
        &self,
        entry: Entry,
        lanes: &mut Lanes,
        active: u128,
    ) -> Result<(), NativeError> {
        self.check_owner(lanes)?;
        let needed = self.program.num_slots();
        if lanes.num_slots() < needed {
            return Err(NativeError::ValuesTooShort {
                needed,
                got: lanes.num_slots(),
            });
        }
        match &mut lanes.store {
            Store::X64(values) => self.eval_active(entry, values, active as u64),
            Store::X128(values) => {
                if !self.has_x128 {
                    return Err(NativeError::WidthUnavailable(Width::X128));
                }
                // The type's alignment guarantees this; the check keeps the promise made to the
                // generated code local and visible.
                if values.as_ptr().align_offset(16) != 0 {
                    return Err(NativeError::Misaligned);
                }
                values[Program::FALSE_SLOT as usize] = Wide([0, 0]);
                values[Program::TRUE_SLOT as usize] = Wide([!0, !0]);
                let active = [active as u64, (active >> 64) as u64];
                let words = wide_words_mut(&mut values[..needed]);
                let filled = self.fill::<2>(entry, words, active);
                self.call(entry, Width::X128, words);
                Ok(filled?)
            }
        }
    }

    /// Calls the chunks of `entry` at `width` on `words`, running the entry's loops as their
    /// chunks' rounds. Every caller has checked that `words` holds exactly `num_slots` lane
    /// values of `width` (as `u64` words, two per value at 128 lanes), aligned for it; a width
    /// without code runs nothing.
    fn call(&self, entry: Entry, width: Width, words: &mut [u64]) {
        let code = &self.code[entry.index()];
        let Some(chunks) = &code.by_width[width.index()] else {
            return;
        };
        let mut at = 0;
        for lp in &code.loops {
            // `from_jit` checked that the loops' chunks lie within the list, in order.
            Self::call_chunks(&chunks[at..lp.chunks.start], words);
            let body = &chunks[lp.chunks.clone()];
            let (pairs, rounds) = &self.loop_pairs[lp.index as usize];
            match width {
                Width::X64 => run_loop::<1>(pairs, *rounds, words, |w| Self::call_chunks(body, w)),
                Width::X128 => run_loop::<2>(pairs, *rounds, words, |w| Self::call_chunks(body, w)),
            };
            at = lp.chunks.end;
        }
        Self::call_chunks(&chunks[at..], words);
    }

    /// Calls `chunks` in order on `words`, which [`Native::call`]'s callers checked.
    fn call_chunks(chunks: &[ChunkFn], words: &mut [u64]) {
        for chunk in chunks {
            // SAFETY: `chunk` came from `from_jit`, whose contract says it touches only the
            // `num_slots` lane values of its width behind its argument, needs 16-byte
            // alignment at most, and returns. Every caller of `call` checked that `words` is
            // exactly those values, aligned for the width, and it is borrowed mutably here,
            // so nothing else reads or writes it during the call; the code is alive because
            // `self` owns the module.
            unsafe { chunk(words.as_mut_ptr()) };
        }
    }

    fn check_owner(&self, lanes: &Lanes) -> Result<(), NativeError> {
        if lanes.owner == self.id {
            Ok(())
        } else {
            Err(NativeError::ForeignLanes {
                lanes: lanes.owner,
                native: self.id,
            })
        }
    }

    fn check_lane(lanes: &Lanes, lane: u32) -> Result<(), NativeError> {
        let count = lanes.width().lanes();
        if lane < count {
            Ok(())
        } else {
            Err(NativeError::LaneOutOfRange { lane, lanes: count })
        }
    }

    /// Puts `state` into lane `lane` of the base slots, leaving the other lanes as they are.
    pub fn set_state(&self, lanes: &mut Lanes, lane: u32, state: &PackedState) -> Result<(), NativeError> {
        self.check_owner(lanes)?;
        Self::check_lane(lanes, lane)?;
        let bases = self.program.num_bases();
        check_mask("bases", Layout::words(bases), state.words().len())?;
        lanes.spread(state.words(), bases, 2, lane);
        Ok(())
    }

    /// Puts a packed input bitmask (bit `i` for input `i`) into lane `lane` of the input slots,
    /// leaving the other lanes as they are.
    pub fn set_inputs(&self, lanes: &mut Lanes, lane: u32, inputs: &[u64]) -> Result<(), NativeError> {
        self.check_owner(lanes)?;
        Self::check_lane(lanes, lane)?;
        let count = self.program.num_inputs();
        check_mask("inputs", Layout::words(count), inputs.len())?;
        lanes.spread(inputs, count, self.program.first_input_slot(), lane);
        Ok(())
    }

    /// The outputs of `entry` in lane `lane` as a packed bitmask, bit `i` for output `i`, after
    /// the entry ran on `lanes`.
    pub fn pack(&self, entry: Entry, lanes: &Lanes, lane: u32) -> Result<Vec<u64>, NativeError> {
        self.check_owner(lanes)?;
        Self::check_lane(lanes, lane)?;
        let lits = self.program.outputs(entry);
        let mut out = vec![0; Layout::words(lits.len())];
        for (i, &lit) in lits.iter().enumerate() {
            let on = lanes.get(lit, lane).ok_or(NativeError::SlotOutOfRange {
                slot: lit.slot(),
                slots: lanes.num_slots(),
            })?;
            out[i / 64] |= u64::from(on) << (i % 64);
        }
        Ok(out)
    }

    /// The next state in lane `lane`, after [`Entry::Next`] ran on `lanes`.
    pub fn pack_state(&self, lanes: &Lanes, lane: u32) -> Result<PackedState, NativeError> {
        self.pack(Entry::Next, lanes, lane).map(PackedState::from_words)
    }

    fn scratch(&self) -> Option<MutexGuard<'_, Scratch>> {
        match self.scratch.try_lock() {
            Ok(guard) => Some(guard),
            // Every call rewrites the slots it reads, and the legal cache is marked valid only
            // once complete, so a panic cannot leave the scratch harmful.
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Runs `f` on the shared scratch, or on a fresh one when another thread holds it.
    fn with_scratch<R>(&self, f: impl FnOnce(&mut Scratch) -> R) -> R {
        match self.scratch() {
            Some(mut guard) => f(&mut guard),
            None => f(&mut Scratch::new(self.program.num_slots())),
        }
    }

    /// Runs one entry on a single state in lane 0 of the scratch values. Missing state words
    /// read as zero and extra words are ignored, so a state of another machine gives a
    /// meaningless answer, never a panic.
    fn run_single(&self, scratch: &mut Scratch, state: &PackedState, entry: Entry) {
        let values = &mut scratch.values;
        for (i, v) in values[2..2 + self.program.num_bases()].iter_mut().enumerate() {
            *v = state.words().get(i / 64).map_or(0, |w| w >> (i % 64) & 1);
        }
        values[Program::FALSE_SLOT as usize] = 0;
        values[Program::TRUE_SLOT as usize] = !0;
        let filled = self.fill::<1>(entry, values, [1]);
        self.note(filled);
        self.call_x64(entry, values);
    }

    /// The first error of the opaque evaluator met by a [`Machine`] call, if any. Such a call
    /// (`legal_moves`, say) has no error value, so it answers as if the failed atoms were false
    /// and records the error here; `next_state` then refuses with it, as the interpreter does.
    pub fn opaque_error(&self) -> Option<OpaqueError> {
        self.opaque_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the first opaque error of a [`Machine`] call.
    fn note(&self, result: Result<(), OpaqueError>) {
        if let Err(e) = result {
            let mut slot = self.opaque_error.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(e);
        }
    }

    fn role_name(&self, r: usize) -> String {
        self.program.layout.roles[r].clone()
    }
}

fn check_mask(what: &'static str, expected: usize, got: usize) -> Result<(), NativeError> {
    if expected == got {
        Ok(())
    } else {
        Err(NativeError::MaskSize { what, expected, got })
    }
}

/// Lane 0 of `lit` in a 64-lane value array.
#[inline]
fn lane0(values: &[u64], lit: Lit) -> bool {
    (values[lit.slot() as usize] ^ neg_mask(lit.0)) & 1 == 1
}

impl Machine for Native {
    type State = PackedState;

    fn engine_name(&self) -> &'static str {
        "native"
    }

    fn roles(&self) -> &[String] {
        &self.program.layout.roles
    }

    fn initial_state(&self) -> PackedState {
        PackedState::from_words(self.program.init.clone())
    }

    fn state_facts(&self, state: &PackedState) -> Vec<FactIdx> {
        let bases = self.program.num_bases();
        let constants = self.program.layout.constant_facts.len();
        state
            .iter_ones()
            .take_while(|&b| b < bases)
            .chain(bases..bases + constants)
            .map(FactIdx::from_index)
            .collect()
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        let layout = &self.program.layout;
        let i = fact.index();
        match i.checked_sub(layout.bases.len()) {
            None => layout.bases[i].clone(),
            Some(c) => match layout.constant_facts.get(c) {
                Some(name) => name.clone(),
                None => format!("<unknown fact {}>", fact.0),
            },
        }
    }

    fn legal_moves(&self, state: &PackedState, role: RoleIdx) -> Vec<MoveIdx> {
        let Some(range) = self.program.layout.role_inputs.get(role.index()) else {
            return Vec::new();
        };
        self.with_scratch(|s| {
            if !(s.legal_valid && s.legal_key == state.words()) {
                s.legal_valid = false;
                self.run_single(s, state, Entry::Legal);
                s.legal.clear();
                s.legal.resize(Layout::words(self.program.legal.len()), 0);
                pack_bits(&self.program.legal, &s.values, 0, &mut s.legal);
                s.legal_key.clear();
                s.legal_key.extend_from_slice(state.words());
                s.legal_valid = true;
            }
            (range.start as usize..range.end as usize)
                .filter(|&i| s.legal[i / 64] >> (i % 64) & 1 == 1)
                .map(MoveIdx::from_index)
                .collect()
        })
    }

    fn move_name(&self, mv: MoveIdx) -> String {
        match self.program.layout.inputs.get(mv.index()) {
            Some((_, action)) => action.clone(),
            None => format!("<unknown move {}>", mv.0),
        }
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        self.moves.get(role.index())?.get(&normalize_kif(name)).copied()
    }

    fn next_state_unchecked(
        &self,
        state: &PackedState,
        joint: &[MoveIdx],
    ) -> Result<PackedState, MachineError> {
        let layout = &self.program.layout;
        if joint.len() != layout.roles.len() {
            return Err(MachineError::WrongMoveCount {
                expected: layout.roles.len(),
                got: joint.len(),
            });
        }
        for (r, (mv, range)) in joint.iter().zip(&layout.role_inputs).enumerate() {
            if !range.contains(&mv.0) {
                return Err(MachineError::UnknownMove {
                    role: self.role_name(r),
                    mv: *mv,
                });
            }
        }
        if let Some(e) = self.opaque_error() {
            return Err(MachineError::Opaque(e.to_string()));
        }
        Ok(self.with_scratch(|s| {
            let first_input = self.program.first_input_slot();
            s.values[first_input..self.program.first_opaque_slot()].fill(0);
            for mv in joint {
                s.values[first_input + mv.index()] = 1;
            }
            self.run_single(s, state, Entry::Next);
            let mut next = vec![0; Layout::words(self.program.num_bases())];
            pack_bits(&self.program.next, &s.values, 0, &mut next);
            PackedState::from_words(next)
        }))
    }

    fn is_terminal(&self, state: &PackedState) -> bool {
        self.with_scratch(|s| {
            self.run_single(s, state, Entry::Terminal);
            lane0(&s.values, self.program.terminal)
        })
    }

    fn goal_values(&self, state: &PackedState, role: RoleIdx) -> Vec<u32> {
        if role.index() >= self.program.layout.roles.len() {
            return Vec::new();
        }
        let mut values: Vec<u32> = self.with_scratch(|s| {
            self.run_single(s, state, Entry::Goals);
            self.program
                .goals
                .iter()
                .zip(&self.program.layout.goals)
                .filter(|&(&lit, &(r, _))| r == role && lane0(&s.values, lit))
                .map(|(_, &(_, value))| value)
                .collect()
        });
        values.sort_unstable();
        values.dedup();
        values
    }
}
