//! Lowering: an ordered [`Program`] to native bit-parallel functions with Cranelift (see
//! `doc/native.md`).
//!
//! Each entry (legal, terminal, goals, next, view) becomes one or more *chunk* functions with
//! the C signature `void f(uint64_t *values)`, each computing a run of the entry's gates in
//! order; [`propjet_runtime::Native`] owns the code and documents the calling convention. Every
//! gate is lowered the same way, on `u64` lane words (64 states per call) and, where the ISA has
//! them, on 128-bit vectors (128 states per call):
//!
//! 1. load each operand's slot from the value array, unless an earlier gate of the chunk left
//!    the value in a register;
//! 2. combine them with bitwise operations: an AND gate is `AND(positives) & !OR(negated)`, an
//!    OR gate is `OR(positives) | !AND(negated)`, so a gate costs at most one negation; long
//!    groups are folded into several accumulators so that they are not one long chain;
//! 3. store the result into the gate's slot.
//!
//! Cranelift's alias analysis is off, so each load reads memory. Keeping every value in SSA
//! form across gates made register allocation superlinear (a 10k-gate function took seconds);
//! `gates.rs` keeps at most [`Options::keep`] values in registers across gates (those read
//! again soonest), which bounds the register pressure, so compile time stays linear in the
//! gates. Entries larger than [`Options::chunk_cost`] are split into several functions so that
//! compile memory stays small too.
//!
//! On x86-64 hosts the same functions can be written by a direct generator instead (`x64.rs`,
//! chosen by [`Backend::X64`] or [`Backend::Auto`]) without going through Cranelift: they are
//! simple enough to emit from fixed templates, which takes a fraction of a microsecond per gate
//! where Cranelift takes several, and gives code at least as fast. Cranelift stays the default,
//! as the design asks (see `doc/native.md`).
//!
//! [`object`] emits the same functions for another target into an object file.

pub mod object;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cranelift_codegen::ir::{self, types, AbiParam, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{CodegenError, Context};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Module, ModuleError};
use propjet_runtime::{
    ChunkLoop, Engine, Entry, EntryChunks, Interpreter, Lit, Native, NativeError, Op, Opaque, Program,
    ProgramError, ValidProgram, Width,
};
use rustc_hash::FxHashMap;

mod gates;
mod x64;

/// Which code generator writes the machine code.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Backend {
    /// The direct x86-64 generator on x86-64 hosts with the System V calling convention (when
    /// every slot is addressable with a 32-bit displacement), Cranelift elsewhere.
    Auto,
    /// Cranelift, on every host (the default).
    #[default]
    Cranelift,
    /// The direct x86-64 generator (`src/lower/x64.rs`): the same functions written from fixed
    /// templates, far faster to produce. Refused with [`LowerError::UnsupportedHost`] on other
    /// hosts.
    X64,
}

/// Which register allocator Cranelift runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Regalloc {
    /// [`Regalloc::Backtracking`] for programs of at most [`SINGLE_PASS_ABOVE`] gates,
    /// [`Regalloc::SinglePass`] for larger ones (the default).
    #[default]
    Auto,
    /// Cranelift's default allocator: slower to run, better code.
    Backtracking,
    /// The single-pass allocator: about half the lowering time, but it spills more, which
    /// made the 128-lane code of real games 10–35% slower (`doc/native.md`).
    SinglePass,
}

/// Whether the 64-lane code is compiled, or the 64-lane calls run the 128-lane code (the
/// wrapper widens the leaf slots into a 128-lane array and narrows the outputs back), which
/// halves the lowering of a large program at the price of its 64-lane speed.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Narrow {
    /// [`Narrow::Compiled`] for programs of at most [`WIDE_ONLY_ABOVE`] gates,
    /// [`Narrow::FromWide`] above (the default).
    #[default]
    Auto,
    /// Both widths are compiled.
    Compiled,
    /// Only the 128-lane code is compiled, where the ISA has it; without it, only the 64-lane
    /// code.
    FromWide,
}

/// The most gates of a program whose 64-lane code [`Narrow::Auto`] compiles. Above it, the
/// lowering is most of the compile time (the programs of the single-pass allocator,
/// [`SINGLE_PASS_ABOVE`]), and compiling one width instead of two took 52–60% of it on chess,
/// linesOfAction and comp2006_farmers (`doc/native.md`).
pub const WIDE_ONLY_ABOVE: usize = 100_000;

impl Narrow {
    /// Whether the 64-lane calls of a program of `gates` gates run the 128-lane code.
    pub fn from_wide(self, gates: usize) -> bool {
        match self {
            Narrow::Auto => gates > WIDE_ONLY_ABOVE,
            Narrow::Compiled => false,
            Narrow::FromWide => true,
        }
    }
}

/// Which entries share code. A gate that several entries need can be compiled once, in a
/// chunk that each of them runs, but then the entries' chunks are cut by which entries need
/// each gate, and every gate that a chunk of another such group reads must be stored: on
/// speedChess, sharing its gates with the terminal and view entries made the legal entry
/// store 7,146 of its 7,248 gates, where 3,476 are its outputs (`doc/native.md`).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Sharing {
    /// Of every way to cut the entries into parts, the one that minimizes the stores that
    /// legal, terminal and next run (the entries of every step of a playout), each counted as
    /// [`AUTO_GATES_PER_STORE`] gates, plus the gates compiled per width, within
    /// [`AUTO_MOST_GATES`] gates per width (`Plan::auto`; the default).
    #[default]
    Auto,
    /// Every entry has chunks of its own, which store only its outputs and what another of its
    /// chunks reads. A gate that several entries need is compiled for each.
    Separate,
    /// The speed entries share chunks among themselves, and the view entry, which is for
    /// inspection and differential tests, has chunks of its own.
    ViewApart,
    /// Every entry, the view included, runs the chunks of the gates it needs, each gate
    /// compiled once per width: a chunk stores every output of every entry that runs it (the
    /// layout before [`Sharing::Auto`]).
    Shared,
}

/// Every entry.
const ALL_ENTRIES: u8 = 31;

/// The most gates per width that [`Sharing::Auto`] compiles: it gives no entry chunks of its
/// own where that would take the gates compiled beyond it. Each gate compiled again costs
/// about 5–10 µs of lowering per width, so this bounds what splitting adds to about 0.3 s of
/// one core; hex (48,132 gates), whose view apart would double its lowering to 1.2 s of one
/// core, and every larger program keep one shared part.
pub const AUTO_MOST_GATES: usize = 40_000;

/// The gates per width that [`Sharing::Auto`] counts as worth one store of
/// the entries a playout runs at every step. A heuristic, checked on four games
/// (`doc/native.md`): connectFour's next entry apart (48 of those stores for 240 gates) made
/// its 128-lane code 25% faster, speedChess's legal entry apart (3,454 for 7,248) 60% faster,
/// and reversi's view apart (896 for 16,844) changed nothing but doubled its lowering time.
pub const AUTO_GATES_PER_STORE: usize = 8;

/// The bit of the view entry in a set of entries.
const VIEW_BIT: u8 = 1 << 4;

impl Sharing {
    /// The entries of each part of the plan, unless chosen per program ([`Sharing::Auto`]): a
    /// part's chunks are run only by its entries, and each entry is in exactly one part.
    fn parts(self) -> Option<Vec<u8>> {
        match self {
            Sharing::Auto => None,
            Sharing::Separate => Some(Entry::ALL.iter().map(|e| 1 << e.index()).collect()),
            Sharing::ViewApart => Some(vec![ALL_ENTRIES & !VIEW_BIT, VIEW_BIT]),
            Sharing::Shared => Some(vec![ALL_ENTRIES]),
        }
    }
}

/// The most gates of a program whose code [`Regalloc::Auto`] has the backtracking allocator
/// write. Above it, lowering takes over a second on this project's 2-core machine even in
/// parallel, and is most of the compile time: there the single-pass allocator's halving of it
/// is worth slower 128-lane code. hex (48k gates) stays below; othello-comp2007 (187k) and
/// shogi_ctk (127k) are above.
pub const SINGLE_PASS_ABOVE: usize = 100_000;

impl Regalloc {
    /// The allocator that runs for a program of `gates` gates: [`Regalloc::Auto`] resolved.
    pub fn for_gates(self, gates: usize) -> Regalloc {
        match self {
            Regalloc::Auto if gates > SINGLE_PASS_ABOVE => Regalloc::SinglePass,
            Regalloc::Auto => Regalloc::Backtracking,
            chosen => chosen,
        }
    }
}

/// How to lower a program.
#[derive(Clone, Debug)]
pub struct Options {
    /// The most work one generated function holds, counted as one per operand load plus one per
    /// gate. Larger entries are split into several functions called in order.
    pub chunk_cost: usize,
    /// Whether to also generate the 128-lane code (when the ISA supports it).
    pub x128: bool,
    /// Whether the 64-lane code is compiled or served by the 128-lane code (only where that
    /// is compiled). The object path ([`object::emit`]) compiles both widths anyway: its
    /// harness runs each.
    pub narrow: Narrow,
    /// Whether Cranelift's IR verifier runs on every function. On in debug builds and tests,
    /// off in release builds, where it would only cost time.
    pub verifier: bool,
    /// The register allocator.
    pub regalloc: Regalloc,
    /// The most gates [`lower`] accepts; a larger program is refused with
    /// [`LowerError::TooLarge`], and [`engine`] then runs it on the interpreter.
    pub max_gates: usize,
    /// How many threads compile functions at once (at least one).
    pub threads: usize,
    /// The code generator.
    pub backend: Backend,
    /// The most lane values Cranelift's code keeps in registers from one gate to later ones
    /// (values read again soon: an operand or a gate's result), so that reading them again
    /// needs no load. Zero keeps none; more than the registers of the ISA makes Cranelift spill.
    /// The direct generator ignores it (it keeps each gate's result in a ring of registers).
    pub keep: usize,
    /// The most wide gates Cranelift's code computes together, so that an operand several of
    /// them read is loaded once (one: each gate alone). The direct generator ignores it.
    pub cluster: usize,
    /// Whether a cluster also computes in part the later gates that read several of its
    /// operands (see `gates.rs`). The direct generator ignores it.
    pub partial: bool,
    /// Whether x86-64's 64-lane code also computes wide gates together and later gates in
    /// part (`cluster` and `partial`). Off by default: there it computes each gate alone, which
    /// ran speedChess's next entry 1.6x as fast (same instructions, twice the instructions per
    /// cycle; `doc/native.md`). The 128-lane code and other ISAs follow `cluster` and
    /// `partial` either way.
    pub cluster_x64: bool,
    /// Whether Cranelift's code stores every gate into its slot, as the interpreter does. By
    /// default (false) it stores only the outputs of the entries that run a chunk and the gates
    /// that another chunk of the same part reads ([`Sharing`]); a gate read only within its
    /// chunk stays in a register unless it must leave the registers before its last read. The
    /// direct generator stores every gate anyway.
    pub store_every_gate: bool,
    /// Whether Cranelift's x86-64 code addresses the slots near the gates it stores from a
    /// base register that follows the stores up the array, with one-byte displacements (3
    /// bytes shorter per instruction than four-byte ones from the array's start). Other ISAs
    /// and the direct generator ignore it.
    pub window: bool,
    /// Whether Cranelift's code passes a fold of 8 or more operands whose value is read more
    /// than once (a gate stored and read again, a block of shared operands) through a block
    /// parameter, so that Cranelift folds the fold's loads into its operations as memory
    /// operands (see `gates::root`). Other ISAs, the direct generator and the single-pass
    /// register allocator ignore it (that allocator keeps every value live across the blocks
    /// it adds in a stack slot, which made chess's code 27% larger and slower).
    pub fold_shared: bool,
    /// Which entries share code (see [`Sharing`]).
    pub sharing: Sharing,
    /// Whether Cranelift's code folds the gates that a wide gate of the same chunk group reads
    /// into that gate's value as soon as each is computed, carrying the partial value from
    /// chunk to chunk in the wide gate's slot, instead of storing them and loading them again
    /// (see [`SINK_OPERANDS`]). The direct generator ignores it.
    pub sink: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            chunk_cost: 4_096,
            x128: true,
            narrow: Narrow::Auto,
            verifier: cfg!(debug_assertions),
            regalloc: Regalloc::Auto,
            max_gates: 4_000_000,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
            backend: Backend::Cranelift,
            keep: 8,
            cluster: 2,
            partial: true,
            cluster_x64: false,
            store_every_gate: false,
            window: true,
            fold_shared: true,
            sharing: Sharing::Auto,
            sink: true,
        }
    }
}

/// Why a program was not lowered.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The host has no code generator in this build (or Cranelift refused its settings).
    #[error("native code is not available on this host: {0}")]
    UnsupportedHost(String),
    /// The program exceeds [`Options::max_gates`].
    #[error("the program has {gates} gates, more than the native limit of {limit}")]
    TooLarge {
        /// The program's gates.
        gates: usize,
        /// The limit.
        limit: usize,
    },
    /// The program has opaque atoms but no evaluator was given for them ([`lower_with`]), or
    /// the code is asked for where nothing fills them (the object path, `doc/opaque.md` §6).
    #[error("the program has {0} opaque atoms, which native code reads but cannot compute: {1}")]
    Opaque(usize, &'static str),
    /// The program has loops (recursion built with `Recursion::Loop`), which the object path
    /// does not handle: its harness would have to run them.
    #[error("the program has {0} loops, which the object path does not run")]
    Loops(usize),
    /// The program does not validate: a bug of whatever built it.
    #[error("invalid program: {0}")]
    Invalid(#[from] ProgramError),
    /// Executable memory could not be had from the operating system.
    #[error("executable memory for the code could not be set up: {0}")]
    Memory(String),
    /// Cranelift failed on a function we built: always a bug of the lowering.
    #[error("internal error (a bug): code generation failed for {what}: {message}")]
    Codegen {
        /// Which function.
        what: String,
        /// Cranelift's message.
        message: String,
    },
    /// The runtime refused the finished code: always a bug of the lowering.
    #[error("internal error (a bug): the runtime refused the code: {0}")]
    Runtime(#[from] NativeError),
}

/// What lowering produced and spent.
#[derive(Clone, Debug, Default)]
pub struct LowerStats {
    /// Generated functions (chunks), over all entries and widths.
    pub functions: usize,
    /// Gates lowered, over all entries and widths: a gate that several entries need is lowered
    /// once for each.
    pub gates: usize,
    /// Bytes of machine code.
    pub code_bytes: usize,
    /// Whether the 128-lane code was generated.
    pub x128: bool,
    /// Whether the 64-lane calls run the 128-lane code, no 64-lane code being compiled.
    pub x64_from_x128: bool,
    /// The register allocator Cranelift ran (whatever it was, for the direct generator).
    pub regalloc: Regalloc,
    /// The code generator that wrote the code: [`Backend::Cranelift`] or [`Backend::X64`].
    pub backend: Backend,
    /// Wall time of the whole lowering, building the IR through finalizing the code.
    pub time: Duration,
    /// The entries that share chunks, in groups: each entry is in one group and runs only
    /// chunks of its group ([`Sharing`]).
    pub parts: Vec<Vec<Entry>>,
}

/// A lowered program and its statistics.
#[derive(Debug)]
pub struct Lowered {
    /// The native code.
    pub native: Native,
    /// What lowering produced and spent.
    pub stats: LowerStats,
}

/// Lowers `program` to native code for the host. A program with opaque atoms needs their
/// evaluator: see [`lower_with`].
pub fn lower(program: impl Into<Arc<Program>>, options: &Options) -> Result<Lowered, LowerError> {
    lower_with(program, None, options)
}

/// Lowers `program` to native code for the host, with `opaque` computing its opaque atoms if it
/// has any (`doc/opaque.md` §6). The opaque slots are leaves of the generated code, read like
/// inputs; the runtime's wrapper fills them before each entry that reads them.
pub fn lower_with(
    program: impl Into<Arc<Program>>,
    opaque: Option<Arc<dyn Opaque>>,
    options: &Options,
) -> Result<Lowered, LowerError> {
    lower_valid(ValidProgram::new(program)?, opaque, options)
}

/// As [`lower_with`], for a program already validated, which is not checked again.
pub fn lower_valid(
    valid: ValidProgram,
    opaque: Option<Arc<dyn Opaque>>,
    options: &Options,
) -> Result<Lowered, LowerError> {
    let start = Instant::now();
    let program: &Program = &valid;
    if program.num_opaque() > 0 && opaque.is_none() {
        return Err(LowerError::Opaque(
            program.num_opaque(),
            "no evaluator was given for them (use lower_with)",
        ));
    }
    if program.num_gates() > options.max_gates {
        return Err(LowerError::TooLarge {
            gates: program.num_gates(),
            limit: options.max_gates,
        });
    }
    let options = &Options {
        regalloc: options.regalloc.for_gates(program.num_gates()),
        ..options.clone()
    };
    let isas = Isas {
        speed: host_isa(options, true)?,
        plain: host_isa(options, false)?,
    };
    let direct_possible = x64_host(&*isas.speed) && x64::fits(program, Width::X128);
    let backend = match options.backend {
        Backend::Cranelift => Backend::Cranelift,
        Backend::Auto if direct_possible => Backend::X64,
        Backend::Auto => Backend::Cranelift,
        Backend::X64 if direct_possible => Backend::X64,
        Backend::X64 => {
            return Err(LowerError::UnsupportedHost(
                "the direct x86-64 generator needs an x86-64 System V host and a value array \
                 of at most 2 GiB"
                    .to_string(),
            ))
        }
    };
    // SSE2, which the direct generator's 128-lane code uses, is part of every x86-64 processor.
    let x128 = options.x128 && (backend == Backend::X64 || supports_x128(&isas.speed));
    let x64_from_x128 = x128 && options.narrow.from_wide(program.num_gates());
    let widths: &[Width] = match (x128, x64_from_x128) {
        (true, true) => &[Width::X128],
        (true, false) => &Width::ALL,
        (false, _) => &[Width::X64],
    };
    let plan = Plan::new(
        program,
        options.chunk_cost,
        widths,
        options.store_every_gate,
        options.sharing,
        // A wide gate that folds in gates as they are computed would fold a loop's body in
        // again every round.
        options.sink && backend == Backend::Cranelift && program.loops.loops.is_empty(),
    );
    let compiled = compile_parallel(
        &isas,
        program,
        &plan,
        options.threads.max(1),
        backend,
        shape(options),
    )?;
    let mut module = JITModule::new(JITBuilder::with_isa(isas.speed, default_libcall_names()));
    let defined =
        define(&mut module, &plan, compiled, x128, x64_from_x128).and_then(|(chunks, code_bytes)| {
            module
                .finalize_definitions()
                .map_err(|e| LowerError::Memory(e.to_string()))?;
            Ok((chunks, code_bytes))
        });
    let (chunks, code_bytes) = match defined {
        Ok(done) => done,
        Err(e) => {
            // SAFETY: no pointer to the module's code was taken, so freeing it cannot leave a
            // dangling one.
            unsafe { module.free_memory() };
            return Err(e);
        }
    };
    let stats = LowerStats {
        functions: plan.jobs.len(),
        gates: plan.jobs.iter().map(|j| j.gates.len()).sum(),
        code_bytes,
        x128,
        x64_from_x128,
        regalloc: options.regalloc,
        backend,
        time: Duration::ZERO,
        parts: plan.part_entries(),
    };
    // SAFETY: every id in `chunks` was declared and defined in `module` by `define`, and
    // `finalize_definitions` ran after the last definition. Each function has one pointer
    // parameter and no result in the ISA's default calling convention, which is the host's C
    // convention (`chunk_signature`; the direct generator is used only where that is System V,
    // `x64_host`). `build_function` emits only loads and stores at `base + slot * stride` for
    // slots of the validated program (every operand slot is below its gate's slot and every
    // gate slot below `num_slots`), bitwise operations and a return: no other memory, no call,
    // no trap, no loop; and `compile_job` refused any code with a relocation. The direct
    // generator (`x64::emit`) writes the same shape of code: loads and stores only at
    // `[rdi + slot * stride]` for the same slots (`x64::fits` checked that every offset fits
    // its displacement), bitwise operations on caller-saved registers, no stack, no branch,
    // and a final `ret`. Loads and stores claim (or, for SSE2 memory operands, need)
    // alignment to the lane width, which `u64` arrays have and which the runtime checks for
    // 128-bit lanes.
    let native = unsafe { Native::from_jit(valid, opaque, module, chunks) }?;
    Ok(Lowered {
        native,
        stats: LowerStats {
            time: start.elapsed(),
            ..stats
        },
    })
}

/// The program on native code when that can be had, or else on the interpreter with the reason.
/// A bug (an invalid program, a code generation failure) is an error, not a fallback.
pub fn engine(program: impl Into<Arc<Program>>, options: &Options) -> Result<Engine, LowerError> {
    engine_with(program.into(), None, options)
}

/// As [`engine`], for a program whose opaque atoms (if any) `opaque` computes: native code
/// reads them and its wrapper fills them, as the interpreter does. A program with opaque atoms
/// and no evaluator is refused (an error, not a fallback: no engine can run it).
pub fn engine_with(
    program: Arc<Program>,
    opaque: Option<Arc<dyn Opaque>>,
    options: &Options,
) -> Result<Engine, LowerError> {
    let interp = |program: Arc<Program>| match &opaque {
        Some(o) => Interpreter::with_opaque(program, Arc::clone(o)),
        None => Interpreter::new(program),
    };
    match lower_with(Arc::clone(&program), opaque.clone(), options) {
        Ok(lowered) => Ok(Engine::Native(lowered.native)),
        Err(e @ (LowerError::UnsupportedHost(_) | LowerError::TooLarge { .. } | LowerError::Memory(_))) => {
            Ok(Engine::Interp {
                interp: interp(program)?,
                reason: e.to_string(),
            })
        }
        Err(e) => Err(e),
    }
}

/// The two ISAs a lowering uses: `speed` (Cranelift's optimizer on) for the module and the
/// vector probe, `plain` (optimizer off) for every chunk, whose instructions `gates::emit`
/// already orders as they should run. The optimizer also took superlinear time on chunks of
/// very wide gates (95 gates with 3800 operands: 200 ms optimized, 10 ms not).
struct Isas {
    speed: OwnedTargetIsa,
    plain: OwnedTargetIsa,
}

/// Whether the direct x86-64 generator can write code for `isa`: an x86-64 target whose C
/// calling convention passes the first argument in `rdi`.
fn x64_host(isa: &dyn TargetIsa) -> bool {
    isa.triple().architecture == target_lexicon::Architecture::X86_64
        && isa.default_call_conv() == cranelift_codegen::isa::CallConv::SystemV
}

/// The host ISA with our settings, optimizing or not.
fn host_isa(options: &Options, optimize: bool) -> Result<OwnedTargetIsa, LowerError> {
    let builder = cranelift_native::builder().map_err(|m| LowerError::UnsupportedHost(m.to_string()))?;
    configured_isa(builder, options, optimize, false)
}

/// The ISA of `builder` with our settings, optimizing or not, with position-independent code
/// or not. The JIT module requires non-PIC code; an object file for a linker takes either, as
/// the functions reference nothing.
fn configured_isa(
    builder: cranelift_codegen::isa::Builder,
    options: &Options,
    optimize: bool,
    pic: bool,
) -> Result<OwnedTargetIsa, LowerError> {
    let setting = |e: settings::SetError| LowerError::UnsupportedHost(format!("a Cranelift setting: {e}"));
    let mut flags = settings::builder();
    let opt_level = if optimize { "speed" } else { "none" };
    flags.set("opt_level", opt_level).map_err(setting)?;
    flags.set("enable_alias_analysis", "false").map_err(setting)?;
    let verifier = if options.verifier { "true" } else { "false" };
    flags.set("enable_verifier", verifier).map_err(setting)?;
    let regalloc = match options.regalloc {
        // Callers resolve `Auto` for their program first; on its own it means the default.
        Regalloc::Backtracking | Regalloc::Auto => "backtracking",
        Regalloc::SinglePass => "single_pass",
    };
    flags.set("regalloc_algorithm", regalloc).map_err(setting)?;
    // The JIT module requires long-range calls; our functions are leaves that never unwind, so
    // they need no unwind information either.
    flags
        .set("is_pic", if pic { "true" } else { "false" })
        .map_err(setting)?;
    flags.set("use_colocated_libcalls", "false").map_err(setting)?;
    flags.set("unwind_info", "false").map_err(setting)?;
    builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| LowerError::UnsupportedHost(e.to_string()))
}

/// Whether the ISA compiles the 128-bit vector operations we use, tried on a small function.
fn supports_x128(isa: &OwnedTargetIsa) -> bool {
    let mut ctx = Context::new();
    ctx.func.signature = chunk_signature(&**isa);
    let mut fctx = FunctionBuilderContext::new();
    let gates = [
        (Op::And, vec![Lit::pos(2), Lit::neg(3)]),
        (Op::Or, vec![Lit::neg(2), Lit::neg(3)]),
        (Op::And, vec![]),
    ];
    build_function(&mut ctx.func, &mut fctx, isa.frontend_config(), |b, base| {
        for (i, (op, operands)) in gates.iter().enumerate() {
            let v = gate_value(b, base, Width::X128, *op, operands);
            store(b, base, Width::X128, 4 + i as u32, v);
        }
    });
    ctx.compile(&**isa, &mut Default::default()).is_ok()
}

/// The gate ranges of each chunk: consecutive runs of `gates` whose cost (operands plus one per
/// gate) stays within `budget`, except that a single gate above the budget gets a chunk alone.
#[cfg(test)]
fn chunk_ranges(program: &Program, gates: &[u32], budget: usize) -> Vec<std::ops::Range<usize>> {
    chunk_ranges_by(gates, budget, |g| program.gates[g as usize].len as usize + 1)
}

/// [`chunk_ranges`] with the cost of each gate given by `cost`.
fn chunk_ranges_by(
    gates: &[u32],
    budget: usize,
    cost_of: impl Fn(u32) -> usize,
) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut cost) = (0, 0);
    for (i, &g) in gates.iter().enumerate() {
        let c = cost_of(g);
        if cost > 0 && cost + c > budget {
            ranges.push(start..i);
            (start, cost) = (i, 0);
        }
        cost += c;
    }
    if start < gates.len() {
        ranges.push(start..gates.len());
    }
    ranges
}

/// One function to generate: a run of gates at one width, all needed by the same entries.
struct Job {
    /// The entries that run this function: bit `i` for `Entry::ALL[i]`.
    entries: u8,
    width: Width,
    gates: Vec<u32>,
    /// Which of [`Plan::stored`] says which of its gates to store.
    part: usize,
    /// The loop whose body this job's gates are part of (`u32::MAX`: none). A loop's body is
    /// chunks of its own, which the runtime calls once per round ([`EntryChunks::loops`]).
    body_of: u32,
    /// The chunk (numbered over the whole plan) whose gates this job computes at its width:
    /// the jobs of one chunk share its schedule.
    chunk: u32,
}

/// What to generate: the functions, in the order every entry runs those it needs.
///
/// The plan has one or more *parts* ([`Sharing::parts`]), each the chunks of some entries,
/// with each entry in exactly one part. Within a part, gates are grouped by the set of the
/// part's entries that need them (their *signature*), and each group is cut into chunks, so
/// each gate is compiled once per part and width. If gate `g` reads gate `h`, every entry
/// needing `g` needs `h`, so the signature of `h` contains that of `g`: either they are equal
/// (same group, `h < g` in ascending order) or `h`'s is a strict superset with more entries.
/// Groups ordered by decreasing number of entries are therefore in dependency order, and each
/// entry runs exactly its own gates by running, in plan order, the chunks whose signature
/// contains it.
struct Plan {
    jobs: Vec<Job>,
    /// The number of chunks (each compiled once per width).
    chunks: usize,
    /// For each part and each gate, whether its value must be in its slot when its chunk of
    /// that part returns: it is an output of an entry of the part, or a gate of another chunk
    /// of the part reads it. A gate read only within its own chunk may stay in a register
    /// (`gates.rs` stores it only if it must leave the registers before its last read).
    stored: Vec<Vec<bool>>,
    /// The entries of each part.
    parts: Vec<u8>,
    /// For each part and each gate, the wide gate of the same group (the same part and
    /// signature) that it is folded into as soon as it is computed (`u32::MAX`: none); see
    /// [`SINK_OPERANDS`].
    sinks: Vec<Vec<u32>>,
}

/// The fewest operands of a gate whose operand gates of its own group are folded into it as
/// they are computed (its *sinks*): the wide gate's value is computed in part by every chunk
/// that computes some of them, the partial value carried from chunk to chunk in its slot, so
/// that they need not be stored for it and loaded again (speedChess's terminal entry is an OR
/// over two ORs of its 1,738 legal-move gates each, which the chunk cuts separate from them).
pub(super) const SINK_OPERANDS: usize = 64;

/// The fewest operand gates of its group a wide gate must fold that way (in the one operand
/// group, positive or negated, that has more of them).
const SINK_LEAST: usize = 32;

impl Plan {
    /// The plan of `program`'s chunks; with `store_every_gate`, every gate is to be stored;
    /// with `sink`, wide gates fold their operand gates in as they are computed.
    fn new(
        program: &Program,
        chunk_cost: usize,
        widths: &[Width],
        store_every_gate: bool,
        sharing: Sharing,
        sink: bool,
    ) -> Plan {
        let needed_by = needed_by(program);
        let parts = match sharing.parts() {
            Some(parts) => parts,
            None => Plan::auto(program, &needed_by, chunk_cost, store_every_gate, sink),
        };
        Plan::with_parts(
            program,
            &needed_by,
            chunk_cost,
            widths,
            store_every_gate,
            sink,
            parts,
        )
    }

    /// The parts [`Sharing::Auto`] chooses: of the 52 ways to cut the five entries into
    /// parts, the one of least cost, counting each store that legal, terminal or next run as
    /// [`AUTO_GATES_PER_STORE`] gates, plus the gates compiled per width; a layout compiling
    /// more than [`AUTO_MOST_GATES`] gates per width is left out, and a program above it keeps
    /// one part. Sharing cuts an entry's gates into chunks by who else needs them, and every
    /// gate read across a cut is stored (speedChess's legal entry stored 7,146 of its 7,248
    /// gates sharing with the others, 3,692 alone), but a gate compiled for two parts costs
    /// lowering time twice. On a tie, the layout listed first (fewer parts) stays.
    fn auto(
        program: &Program,
        needed_by: &[u8],
        chunk_cost: usize,
        store_every_gate: bool,
        sink: bool,
    ) -> Vec<u8> {
        let shared = vec![ALL_ENTRIES];
        if program.num_gates() > AUTO_MOST_GATES {
            return shared;
        }
        // A part's chunks, stores and sinks depend on its own entries only, so a layout's
        // stores and gates are the sums of its parts': 31 parts to plan instead of the 203 of
        // the 52 layouts.
        let mut of_part: [Option<(usize, usize)>; 32] = [None; 32];
        let mut best = (usize::MAX, shared);
        for parts in layouts(&Entry::ALL.map(|e| 1u8 << e.index())) {
            let (mut stores, mut gates) = (0, 0);
            for &part in &parts {
                let (s, g) = *of_part[usize::from(part)].get_or_insert_with(|| {
                    Plan::part_cost(program, needed_by, chunk_cost, store_every_gate, sink, part)
                });
                stores += s;
                gates += g;
            }
            let cost = stores * AUTO_GATES_PER_STORE + gates;
            if gates <= AUTO_MOST_GATES && cost < best.0 {
                best = (cost, parts);
            }
        }
        best.1
    }

    /// The stores that legal, terminal and next run in a part of the `part` entries, and the
    /// gates it compiles per width.
    fn part_cost(
        program: &Program,
        needed_by: &[u8],
        chunk_cost: usize,
        store_every_gate: bool,
        sink: bool,
        part: u8,
    ) -> (usize, usize) {
        let plan = Plan::with_parts(
            program,
            needed_by,
            chunk_cost,
            &[Width::X64],
            store_every_gate,
            sink,
            vec![part],
        );
        (plan.speed_stores(), plan.jobs.iter().map(|j| j.gates.len()).sum())
    }

    /// The plan with the given parts (each a set of entries; each entry in exactly one).
    fn with_parts(
        program: &Program,
        needed_by: &[u8],
        chunk_cost: usize,
        widths: &[Width],
        store_every_gate: bool,
        sink: bool,
        parts: Vec<u8>,
    ) -> Plan {
        let mut jobs = Vec::new();
        let mut stored = Vec::new();
        let mut sinks = Vec::new();
        let mut chunks = 0;
        for &entries in &parts {
            let mut groups: Vec<Vec<u32>> = vec![Vec::new(); 32];
            for (g, &n) in needed_by.iter().enumerate() {
                groups[usize::from(n & entries)].push(g as u32);
            }
            let mut signatures: Vec<u8> = (1..32u8)
                .filter(|&s| !groups[usize::from(s)].is_empty())
                .collect();
            signatures.sort_by_key(|sig| (std::cmp::Reverse(sig.count_ones()), *sig));
            let mut part = Part::new(program, stored.len(), chunks, sink);
            for signature in signatures {
                let gates = std::mem::take(&mut groups[usize::from(signature)]);
                // A gate is in the group of the signature of the part's entries that need it
                // (a test of the array, where a set of the group's gates took chess and
                // alexChess a hash of half a million gates).
                let in_group = |h: u32| needed_by[h as usize] & entries == signature;
                part.add(program, &mut jobs, signature, gates, in_group, chunk_cost, widths);
            }
            chunks = part.first + part.chunks;
            stored.push(part.stored(program, entries, store_every_gate));
            sinks.push(part.sink);
        }
        Plan {
            jobs,
            chunks: chunks as usize,
            stored,
            parts,
            sinks,
        }
    }

    /// The entries of each part.
    fn part_entries(&self) -> Vec<Vec<Entry>> {
        let of = |bits: u8| {
            Entry::ALL
                .into_iter()
                .filter(|e| bits >> e.index() & 1 == 1)
                .collect()
        };
        self.parts.iter().map(|&bits| of(bits)).collect()
    }

    /// The stores that the entries a playout runs at every step (legal, terminal, next) run
    /// at the first width planned, each counted once for every such entry that runs it.
    fn speed_stores(&self) -> usize {
        let every_step = [Entry::Legal, Entry::Terminal, Entry::Next]
            .iter()
            .fold(0u8, |bits, e| bits | 1 << e.index());
        let Some(width) = self.jobs.first().map(|j| j.width) else {
            return 0;
        };
        self.jobs
            .iter()
            .filter(|j| j.width == width)
            .map(|j| {
                let stored = j
                    .gates
                    .iter()
                    .filter(|&&g| self.stored[j.part][g as usize])
                    .count();
                stored * (j.entries & every_step).count_ones() as usize
            })
            .sum()
    }
}

/// Every way to cut `entries` (single bits) into parts, each part a set of entries, the
/// layouts with fewer parts first (one part of them all first of all): 52 for five entries.
fn layouts(entries: &[u8]) -> Vec<Vec<u8>> {
    let Some((&first, rest)) = entries.split_first() else {
        return vec![Vec::new()];
    };
    let mut out = Vec::new();
    for layout in layouts(rest) {
        // `first` joins one of the parts, or is a part of its own.
        for i in 0..layout.len() {
            let mut joined = layout.clone();
            joined[i] |= first;
            out.push(joined);
        }
        let mut apart = layout;
        apart.insert(0, first);
        out.push(apart);
    }
    out.sort_by_key(Vec::len);
    out
}

/// The loop whose body holds gate `g` (`u32::MAX`: none).
fn body_of(program: &Program, g: u32) -> u32 {
    let loops = &program.loops.loops;
    let i = loops.partition_point(|l| l.body.end <= g);
    match loops.get(i) {
        Some(l) if l.body.contains(&g) => i as u32,
        _ => u32::MAX,
    }
}

/// For each gate, the set of entries that need it (bit `i` for `Entry::ALL[i]`).
fn needed_by(program: &Program) -> Vec<u8> {
    let mut needed_by = vec![0u8; program.num_gates()];
    for entry in Entry::ALL {
        for &g in program.gates_of(entry) {
            needed_by[g as usize] |= 1 << entry.index();
        }
    }
    needed_by
}

/// The chunks of one part of a [`Plan`] while it is built: which chunk computes each gate.
struct Part {
    /// The part's index in the plan.
    index: usize,
    /// `u32::MAX`: no chunk of the part computes the gate.
    chunk_of: Vec<u32>,
    chunks: u32,
    /// The plan-wide number of the part's first chunk.
    first: u32,
    /// For each gate, the gate it is folded into (see [`Plan::sinks`]), or `u32::MAX`.
    sink: Vec<u32>,
    /// Whether wide gates get sinks at all.
    sinking: bool,
}

impl Part {
    fn new(program: &Program, index: usize, first: u32, sinking: bool) -> Part {
        Part {
            index,
            chunk_of: vec![u32::MAX; program.num_gates()],
            chunks: 0,
            first,
            sink: vec![u32::MAX; program.num_gates()],
            sinking,
        }
    }

    /// Chooses the gates of the group `gates` (ascending) that are folded into a wide gate of
    /// the group as soon as computed (see [`SINK_OPERANDS`]): for each gate of at least that
    /// many operands, the gates of the group it reads once, in its operand group (positive or
    /// negated) that has more of them, if at least [`SINK_LEAST`] and none folded into another
    /// wide gate already. Returns for each wide gate how many operands it no longer reads.
    /// `in_group` says whether a gate is in the group.
    fn choose_sinks(
        &mut self,
        program: &Program,
        gates: &[u32],
        in_group: impl Fn(u32) -> bool,
    ) -> FxHashMap<u32, usize> {
        let first = program.first_gate_slot();
        let mut folded = FxHashMap::default();
        let mut seen: FxHashMap<u32, u32> = FxHashMap::default();
        for &g in gates {
            let operands = program.gate_operands(g as usize).unwrap_or(&[]);
            if operands.len() < SINK_OPERANDS {
                continue;
            }
            seen.clear();
            for lit in operands {
                *seen.entry(lit.slot()).or_default() += 1;
            }
            let candidate = |lit: &&Lit| {
                let h = (lit.slot() as usize).checked_sub(first)? as u32;
                (in_group(h) && self.sink[h as usize] == u32::MAX && seen[&lit.slot()] == 1).then_some(h)
            };
            let negated = operands
                .iter()
                .filter(|l| l.is_negated())
                .filter(|l| candidate(l).is_some())
                .count();
            let positive = operands
                .iter()
                .filter(|l| !l.is_negated())
                .filter(|l| candidate(l).is_some())
                .count();
            let take_negated = negated > positive;
            if negated.max(positive) < SINK_LEAST {
                continue;
            }
            let chosen: Vec<u32> = operands
                .iter()
                .filter(|l| l.is_negated() == take_negated)
                .filter_map(|l| candidate(&l))
                .collect();
            for &h in &chosen {
                self.sink[h as usize] = g;
            }
            folded.insert(g, chosen.len());
        }
        folded
    }

    /// Cuts `gates` (ascending) into chunks run by `entries` and adds their jobs at every
    /// width. `in_group` says whether a gate is one of `gates`.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        program: &Program,
        jobs: &mut Vec<Job>,
        entries: u8,
        gates: Vec<u32>,
        in_group: impl Fn(u32) -> bool,
        chunk_cost: usize,
        widths: &[Width],
    ) {
        // A wide gate costs what it still reads; each gate folded into one, one more.
        let folded = if self.sinking {
            self.choose_sinks(program, &gates, in_group)
        } else {
            FxHashMap::default()
        };
        let cost = |g: u32| {
            let own = program.gates[g as usize].len as usize + 1;
            let gone = folded.get(&g).map_or(0, |&n| n.saturating_sub(1));
            own - gone + usize::from(self.sink[g as usize] != u32::MAX)
        };
        // Each loop's body is cut apart from the gates around it: every entry that needs one
        // of its gates needs them all, so the body is one run of the group.
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        let mut bodies: Vec<u32> = Vec::new();
        let mut at = 0;
        while at < gates.len() {
            let l = body_of(program, gates[at]);
            let end = match l {
                u32::MAX => gates[at..]
                    .iter()
                    .position(|&g| body_of(program, g) != u32::MAX)
                    .map_or(gates.len(), |p| at + p),
                l => {
                    let body = &program.loops.loops[l as usize].body;
                    at + gates[at..].partition_point(|&g| g < body.end)
                }
            };
            for r in chunk_ranges_by(&gates[at..end], chunk_cost, cost) {
                ranges.push(at + r.start..at + r.end);
                bodies.push(l);
            }
            at = end;
        }
        let first = self.chunks;
        for range in &ranges {
            for &g in &gates[range.clone()] {
                self.chunk_of[g as usize] = self.chunks;
            }
            self.chunks += 1;
        }
        for &width in widths {
            for (k, range) in ranges.iter().enumerate() {
                jobs.push(Job {
                    entries,
                    width,
                    gates: gates[range.clone()].to_vec(),
                    part: self.index,
                    body_of: bodies[k],
                    chunk: self.first + first + k as u32,
                });
            }
        }
    }

    /// Which gates the part's chunks must store: the outputs of `entries` that the part
    /// computes and every gate that a gate of another chunk of the part reads (every gate with `store_every_gate`).
    fn stored(&self, program: &Program, entries: u8, store_every_gate: bool) -> Vec<bool> {
        let first = program.first_gate_slot();
        let gate_of = |lit: &Lit| {
            (lit.slot() as usize)
                .checked_sub(first)
                .filter(|&g| g < self.chunk_of.len())
        };
        let mut stored = vec![store_every_gate; program.num_gates()];
        for entry in Entry::ALL.into_iter().filter(|e| entries >> e.index() & 1 == 1) {
            for g in program.outputs(entry).iter().filter_map(gate_of) {
                // An output that another part computes is that part's to store.
                stored[g] |= self.chunk_of[g] != u32::MAX;
            }
        }
        // The runtime compares and copies each loop's pair literals in memory after a round.
        for lp in &program.loops.loops {
            for (_, lit) in &lp.pairs {
                if let Some(g) = gate_of(lit) {
                    stored[g] |= self.chunk_of[g] != u32::MAX;
                }
            }
        }
        for (g, &chunk) in self.chunk_of.iter().enumerate() {
            if chunk == u32::MAX {
                continue;
            }
            for h in program.gate_operands(g).unwrap_or(&[]).iter().filter_map(gate_of) {
                // A gate folded into `g` as soon as computed is not read by it.
                if self.chunk_of[h] != chunk && self.sink[h] != g as u32 {
                    stored[h] = true;
                }
            }
        }
        stored
    }
}

/// A worker's Cranelift contexts, reused from function to function: the function and its
/// analyses, the IR builder's, and the register allocator's.
type Contexts = (Context, FunctionBuilderContext, regalloc2::Ctx);

/// The machine code of one job.
struct CompiledChunk {
    bytes: Vec<u8>,
    alignment: u64,
}

/// Compiles every job of `plan` on `threads` threads, each with its own Cranelift context.
/// Returns the code in job order, or the first failure.
fn compile_parallel(
    isas: &Isas,
    program: &Program,
    plan: &Plan,
    threads: usize,
    backend: Backend,
    shapes: Shapes,
) -> Result<Vec<CompiledChunk>, LowerError> {
    let x86_64 = isas.plain.triple().architecture == target_lexicon::Architecture::X86_64;
    // The jobs of one chunk (one per width) go to one worker, one after the other, so that
    // they share the chunk's schedule where their shapes' steps are the same
    // (`gates::schedule`).
    let mut units: Vec<Vec<usize>> = vec![Vec::new(); plan.chunks];
    for (i, job) in plan.jobs.iter().enumerate() {
        units[job.chunk as usize].push(i);
    }
    units.retain(|unit| !unit.is_empty());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<CompiledChunk, LowerError>>>> =
        Mutex::new((0..plan.jobs.len()).map(|_| None).collect());
    let worker = || {
        let mut contexts: Contexts = (
            Context::new(),
            FunctionBuilderContext::new(),
            regalloc2::Ctx::default(),
        );
        let mut ids = gates::SlotIds::default();
        'units: loop {
            let u = next.fetch_add(1, Ordering::Relaxed);
            let Some(unit) = units.get(u) else { break };
            // The last schedule made, with the steps of the shape it was made for.
            let mut schedule: Option<((usize, bool), gates::Schedule)> = None;
            for &i in unit {
                let job = &plan.jobs[i];
                let shape = shapes.at(job.width, x86_64);
                let result = if backend == Backend::X64 {
                    Ok(CompiledChunk {
                        bytes: x64::emit(program, &job.gates, job.width),
                        alignment: 16,
                    })
                } else {
                    let steps = (shape.cluster, shape.partial);
                    let made = match schedule.take() {
                        Some((s, made)) if s == steps => made,
                        _ => gates::schedule(program, &job.gates, shape, &plan.sinks[job.part], &mut ids),
                    };
                    let result = compile_job(
                        isas,
                        &mut contexts,
                        program,
                        job,
                        &made,
                        &plan.stored[job.part],
                        shape,
                    );
                    schedule = Some((steps, made));
                    result
                };
                let result = result.map_err(|message| LowerError::Codegen {
                    what: format!(
                        "a chunk of {} gates (entries {:05b}) at {} lanes",
                        job.gates.len(),
                        job.entries,
                        job.width.lanes()
                    ),
                    message,
                });
                let failed = result.is_err();
                // Each slot is written in one assignment, so a poisoned lock holds nothing torn.
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(result);
                if failed {
                    // The other workers stop after their current chunk.
                    next.store(units.len(), Ordering::Relaxed);
                    continue 'units;
                }
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(units.len()) {
            scope.spawn(worker);
        }
        worker();
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    // The first failure in job order is reported; jobs left undone after it are not.
    let mut out = Vec::with_capacity(results.len());
    for (i, result) in results.into_iter().enumerate() {
        match result {
            Some(r) => out.push(r?),
            None => {
                return Err(LowerError::Codegen {
                    what: format!("function {i}"),
                    message: "not compiled, because another function failed".to_string(),
                })
            }
        }
    }
    Ok(out)
}

/// Builds and compiles one job's function, whose chunk has `schedule`, in a worker's
/// Cranelift contexts.
fn compile_job(
    isas: &Isas,
    (ctx, fctx, regalloc): &mut Contexts,
    program: &Program,
    job: &Job,
    schedule: &gates::Schedule,
    stored: &[bool],
    shape: gates::Shape,
) -> Result<CompiledChunk, String> {
    // Every chunk is compiled without Cranelift's optimizer: `gates::emit` already places
    // each instruction where it should run, and the optimizer would move every operation of a
    // gate after all of its loads, which keeps the loaded values live across the gate (spills
    // on wide gates) and stops loads from becoming memory operands (see `doc/native.md`).
    let isa = &isas.plain;
    ctx.clear();
    ctx.func.signature = chunk_signature(&**isa);
    // These save bytes of x86-64 encodings (one-byte displacements, loads folded into memory
    // operands, which other ISAs' operations do not have); elsewhere the code stays as it was
    // measured.
    let x86_64 = isa.triple().architecture == target_lexicon::Architecture::X86_64;
    let shape = gates::Shape {
        window: shape.window && x86_64,
        root: shape.root && x86_64,
        reload: shape.reload && x86_64,
        ..shape
    };
    build_function(&mut ctx.func, fctx, isa.frontend_config(), |b, base| {
        gates::emit(b, base, job.width, program, schedule, stored, shape);
    });
    let code = if ctx.func.layout.blocks().nth(1).is_none() {
        // A function of one block, as nearly every chunk is, has nothing for the passes that
        // `Context::compile` runs before selection (unreachable code, constant block
        // parameters, value aliases, which the builder makes none of without variables), so
        // the ISA compiles it directly, with the control flow graph and dominator tree that
        // selection needs; `doc/native.md` has what this saves.
        if isa.flags().enable_verifier() {
            cranelift_codegen::verify_function(&ctx.func, &**isa)
                .map_err(|errors| format!("verifier: {errors}"))?;
        }
        ctx.compute_cfg();
        ctx.compute_domtree();
        isa.compile_function(&ctx.func, &ctx.domtree, regalloc, false, &mut Default::default())
            .map_err(codegen_text)?
            .apply_params(&ctx.func.params)
    } else {
        ctx.compile(&**isa, &mut Default::default())
            .map_err(|e| codegen_text(e.inner))?;
        ctx.take_compiled_code().ok_or("Cranelift returned no code")?
    };
    // The code is placed as raw bytes, so it must not need patching. Our functions call
    // nothing and use no global data, so this fails only if Cranelift starts emitting
    // references we did not expect; refusing such code keeps the runtime's safety contract.
    if !code.buffer.relocs().is_empty() {
        return Err(format!(
            "the code has {} relocations; a chunk must have none",
            code.buffer.relocs().len()
        ));
    }
    Ok(CompiledChunk {
        bytes: code.code_buffer().to_vec(),
        alignment: u64::from(code.buffer.alignment),
    })
}

/// How Cranelift's code of a chunk keeps values and folds operands, from the options: for
/// each width, the shape of its code, and whether x86-64's 64-lane code keeps clusters and
/// partial values ([`Options::cluster_x64`]).
#[derive(Copy, Clone)]
pub(super) struct Shapes {
    shape: gates::Shape,
    cluster_x64: bool,
}

impl Shapes {
    /// The shape of the code of `width` on an x86-64 ISA or not. x86-64's 64-lane code
    /// computes each gate alone and nothing in part unless asked: on speedChess's next entry
    /// the same schedule as the 128-lane code ran at half the instructions per cycle of this
    /// one, with about as many instructions (`doc/native.md`).
    fn at(self, width: Width, x86_64: bool) -> gates::Shape {
        if width == Width::X64 && x86_64 && !self.cluster_x64 {
            gates::Shape {
                cluster: 1,
                partial: false,
                ..self.shape
            }
        } else {
            self.shape
        }
    }
}

fn shape(options: &Options) -> Shapes {
    Shapes {
        shape: gates::Shape {
            keep: options.keep,
            accumulators: gates::ACCUMULATORS,
            cluster: options.cluster.max(1),
            partial: options.partial,
            window: options.window,
            // The single-pass allocator keeps every value that lives across a block boundary
            // in a stack slot, the array's address included, so the blocks of `gates::root`
            // made it reload that address before nearly every load (`doc/native.md`).
            root: options.fold_shared && options.regalloc != Regalloc::SinglePass,
            // Where `root` is off for that allocator, a value is used once instead (x86-64
            // only: it helps by making loads memory operands).
            reload: options.regalloc == Regalloc::SinglePass,
        },
        cluster_x64: options.cluster_x64,
    }
}

/// The signature of every chunk: one pointer, no result, the ISA's default (C) convention.
fn chunk_signature(isa: &dyn TargetIsa) -> ir::Signature {
    let mut signature = ir::Signature::new(isa.default_call_conv());
    signature.params.push(AbiParam::new(isa.pointer_type()));
    signature
}

/// Places the compiled code in `module` and returns each entry's functions and the bytes of
/// code.
fn define(
    module: &mut JITModule,
    plan: &Plan,
    compiled: Vec<CompiledChunk>,
    x128: bool,
    x64_from_x128: bool,
) -> Result<([EntryChunks; 5], usize), LowerError> {
    let signature = chunk_signature(module.isa());
    let mut chunks: [EntryChunks; 5] = Default::default();
    for c in &mut chunks {
        c.x128 = x128.then(Vec::new);
        c.x64_from_x128 = x64_from_x128;
    }
    let mut code_bytes = 0;
    for (job, code) in plan.jobs.iter().zip(compiled) {
        let place = |e: ModuleError| LowerError::Memory(e.to_string());
        let id = module.declare_anonymous_function(&signature).map_err(place)?;
        module
            .define_function_bytes(id, code.alignment, &code.bytes, &[])
            .map_err(place)?;
        code_bytes += code.bytes.len();
        for entry in Entry::ALL {
            if job.entries >> entry.index() & 1 == 1 {
                let c = &mut chunks[entry.index()];
                let list = match job.width {
                    Width::X64 => &mut c.x64,
                    Width::X128 => c.x128.get_or_insert_with(Vec::new),
                };
                list.push(id);
                // Every width has the same chunks in the same order; the loops are noted at
                // the width whose list is the longest so far, the first planned.
                if job.width == plan.jobs[0].width {
                    note_loop(&mut c.loops, list.len() - 1, job.body_of);
                }
            }
        }
    }
    Ok((chunks, code_bytes))
}

/// Notes chunk `at` of an entry's list as part of the body of loop `body_of` (`u32::MAX`:
/// none): a body's chunks follow each other, so a chunk of the loop the last noted range
/// belongs to extends it.
pub(super) fn note_loop(loops: &mut Vec<ChunkLoop>, at: usize, body_of: u32) {
    if body_of == u32::MAX {
        return;
    }
    match loops.last_mut() {
        Some(last) if last.index == body_of && last.chunks.end == at => last.chunks.end = at + 1,
        _ => loops.push(ChunkLoop {
            index: body_of,
            chunks: at..at + 1,
        }),
    }
}

/// Cranelift's message for a code generation error, with the verifier's findings spelled out.
fn codegen_text(e: CodegenError) -> String {
    match e {
        CodegenError::Verifier(errors) => format!("verifier: {errors}"),
        other => other.to_string(),
    }
}

/// Builds a function of one block whose parameter is the value array, with `body` emitting the
/// gates, then a return.
fn build_function(
    func: &mut ir::Function,
    fctx: &mut FunctionBuilderContext,
    config: cranelift_codegen::isa::TargetFrontendConfig,
    body: impl FnOnce(&mut FunctionBuilder, Value),
) {
    let mut b = FunctionBuilder::new(func, fctx);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    b.seal_block(block);
    let base = b.block_params(block)[0];
    body(&mut b, base);
    b.ins().return_(&[]);
    b.finalize(config);
}

/// The Cranelift type of one lane value.
pub(super) fn lane_type(width: Width) -> ir::Type {
    match width {
        Width::X64 => types::I64,
        Width::X128 => types::I64X2,
    }
}

/// The address of `slot` as a base value and a 32-bit offset. Offsets that do not fit in 32
/// bits (beyond 2 GiB of values) are added to the base first.
pub(super) fn address(b: &mut FunctionBuilder, base: Value, width: Width, slot: u32) -> (Value, i32) {
    let offset = u64::from(slot) * (width.words() as u64 * 8);
    match i32::try_from(offset) {
        Ok(offset) => (base, offset),
        // A slot is below 2^31 and a lane value 16 bytes at most, so the offset fits in i64.
        Err(_) => (b.ins().iadd_imm_u(base, offset as i64), 0),
    }
}

fn load(b: &mut FunctionBuilder, base: Value, width: Width, slot: u32) -> Value {
    let (addr, offset) = address(b, base, width, slot);
    b.ins()
        .load(lane_type(width), MemFlagsData::trusted(), addr, offset)
}

fn store(b: &mut FunctionBuilder, base: Value, width: Width, slot: u32, value: Value) {
    let (addr, offset) = address(b, base, width, slot);
    b.ins().store(MemFlagsData::trusted(), value, addr, offset);
}

/// A lane value with every bit `bit`.
fn constant(b: &mut FunctionBuilder, width: Width, bit: bool) -> Value {
    let word = b.ins().iconst(types::I64, if bit { -1 } else { 0 });
    match width {
        Width::X64 => word,
        Width::X128 => b.ins().splat(types::I64X2, word),
    }
}

/// Emits the loads and bitwise operations of one gate, one chain per operand group and
/// nothing kept, and returns its value: the plain form the vector probe ([`supports_x128`])
/// tries; chunks are emitted by `gates::emit`.
fn gate_value(b: &mut FunctionBuilder, base: Value, width: Width, op: Op, operands: &[Lit]) -> Value {
    let mut positive: Option<Value> = None;
    let mut negated: Option<Value> = None;
    for lit in operands {
        let v = load(b, base, width, lit.slot());
        // Within the positive group the gate's own operation joins; within the negated group,
        // the dual one.
        let (acc, join_and) = if lit.is_negated() {
            (&mut negated, op == Op::Or)
        } else {
            (&mut positive, op == Op::And)
        };
        *acc = Some(match *acc {
            None => v,
            Some(a) if join_and => b.ins().band(a, v),
            Some(a) => b.ins().bor(a, v),
        });
    }
    gates::combine(b, width, op, positive, negated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashSet;

    #[test]
    fn auto_picks_the_single_pass_allocator_only_above_the_threshold_and_choices_stand() {
        let auto = Regalloc::Auto;
        assert_eq!(auto.for_gates(0), Regalloc::Backtracking);
        assert_eq!(auto.for_gates(SINGLE_PASS_ABOVE), Regalloc::Backtracking);
        assert_eq!(auto.for_gates(SINGLE_PASS_ABOVE + 1), Regalloc::SinglePass);
        for chosen in [Regalloc::Backtracking, Regalloc::SinglePass] {
            for gates in [0, SINGLE_PASS_ABOVE + 1] {
                assert_eq!(chosen.for_gates(gates), chosen);
            }
        }
        assert_eq!(Options::default().regalloc, Regalloc::Auto);
    }

    #[test]
    fn chunks_respect_the_budget_and_cover_every_gate() {
        let mut program = Program {
            layout: propjet_runtime::Layout {
                roles: Vec::new(),
                bases: vec!["a".into()],
                constant_facts: Vec::new(),
                inputs: Vec::new(),
                role_inputs: Vec::new(),
                goals: Vec::new(),
                views: Vec::new(),
            },
            gates: Vec::new(),
            operands: Vec::new(),
            init: vec![0],
            legal: Vec::new(),
            goals: Vec::new(),
            terminal: Lit::FALSE,
            next: vec![Lit::pos(2)],
            views: Vec::new(),
            entry_gates: Default::default(),
            opaque: Default::default(),
            loops: Default::default(),
        };
        // Gates of 1, 2, 9 and 0 operands: costs 2, 3, 10 and 1.
        for len in [1u32, 2, 9, 0] {
            let start = program.operands.len() as u32;
            program.operands.extend((0..len).map(|_| Lit::pos(2)));
            program.gates.push(propjet_runtime::Gate {
                op: Op::And,
                start,
                len,
            });
        }
        let all = [0, 1, 2, 3];
        assert_eq!(chunk_ranges(&program, &all, 5), vec![0..2, 2..3, 3..4]);
        assert_eq!(chunk_ranges(&program, &all, 100), vec![0..4]);
        assert_eq!(chunk_ranges(&program, &all, 1), vec![0..1, 1..2, 2..3, 3..4]);
        assert_eq!(
            chunk_ranges(&program, &[], 5),
            Vec::<std::ops::Range<usize>>::new()
        );
        assert_eq!(chunk_ranges(&program, &[2, 3], 11), vec![0..2]);
    }

    /// A program of one base and four gates: `g0 = AND(b)`, `g1 = OR(g0)`, `g2 = AND(b)`,
    /// `g3 = AND(g2)`, with next reading `g1` and the views reading `views`.
    fn two_cones(views: Vec<Lit>) -> Program {
        let b = Lit::pos(2);
        let (g0, g2) = (Lit::pos(3), Lit::pos(5));
        let gates = [(Op::And, b), (Op::Or, g0), (Op::And, b), (Op::And, g2)];
        let mut program = Program {
            layout: propjet_runtime::Layout {
                roles: Vec::new(),
                bases: vec!["a".into()],
                constant_facts: Vec::new(),
                inputs: Vec::new(),
                role_inputs: Vec::new(),
                goals: Vec::new(),
                views: (0..views.len()).map(|v| format!("(v {v})")).collect(),
            },
            gates: (0..4)
                .map(|g| propjet_runtime::Gate {
                    op: gates[g].0,
                    start: g as u32,
                    len: 1,
                })
                .collect(),
            operands: gates.iter().map(|&(_, lit)| lit).collect(),
            init: vec![0],
            legal: Vec::new(),
            goals: Vec::new(),
            terminal: Lit::FALSE,
            next: vec![Lit::pos(4)],
            views,
            entry_gates: Default::default(),
            opaque: Default::default(),
            loops: Default::default(),
        };
        program.compute_entry_gates();
        program
    }

    #[test]
    fn the_layouts_are_every_way_to_cut_the_entries_into_parts_once() {
        let entries = Entry::ALL.map(|e| 1u8 << e.index());
        let all = layouts(&entries);
        // The Bell number of five.
        assert_eq!(all.len(), 52);
        assert_eq!(all[0], vec![ALL_ENTRIES]);
        let mut seen = FxHashSet::default();
        for parts in &all {
            // Each entry in exactly one part, no part empty.
            assert!(parts.iter().all(|&p| p != 0));
            assert_eq!(parts.iter().fold(0, |a, &p| a | p), ALL_ENTRIES);
            assert_eq!(parts.iter().map(|p| p.count_ones()).sum::<u32>(), 5);
            let mut sorted = parts.clone();
            sorted.sort_unstable();
            assert!(seen.insert(sorted), "{parts:?} twice");
        }
        assert!(all.windows(2).all(|w| w[0].len() <= w[1].len()));
    }

    #[test]
    fn a_layouts_stores_and_gates_are_the_sums_of_its_parts() {
        let desc = crate::gdl::parse(include_str!("../../games/connectfour.kif")).unwrap();
        let compiled = crate::compile::compile(&desc, &Default::default()).unwrap();
        let program = &compiled.program;
        let needed_by = needed_by(program);
        let mut stores = FxHashSet::default();
        for (every, sink) in [(false, true), (false, false), (true, true)] {
            for parts in layouts(&Entry::ALL.map(|e| 1u8 << e.index())) {
                let whole = Plan::with_parts(
                    program,
                    &needed_by,
                    512,
                    &[Width::X64],
                    every,
                    sink,
                    parts.clone(),
                );
                let gates: usize = whole.jobs.iter().map(|j| j.gates.len()).sum();
                let summed = parts.iter().fold((0, 0), |(s, g), &part| {
                    let (ps, pg) = Plan::part_cost(program, &needed_by, 512, every, sink, part);
                    (s + ps, g + pg)
                });
                assert_eq!((whole.speed_stores(), gates), summed, "{parts:?}");
                stores.insert(summed.0);
            }
        }
        assert!(program.num_gates() > 100, "the test needs a real program");
        assert!(stores.len() > 1, "the layouts' stores differ: {stores:?}");
    }

    const MODES: [Sharing; 4] = [
        Sharing::Auto,
        Sharing::Separate,
        Sharing::ViewApart,
        Sharing::Shared,
    ];

    fn plan(program: &Program, budget: usize, every: bool, sharing: Sharing) -> Plan {
        Plan::new(program, budget, &Width::ALL, every, sharing, true)
    }

    #[test]
    fn only_outputs_and_gates_read_by_another_chunk_of_the_part_must_be_stored() {
        let (no, yes) = (false, true);
        let none = vec![no; 4];
        // g0 is read by g1 (next) and g2 by g3 (the view): in one chunk per entry, neither
        // needs its slot; with one gate per chunk both do, and outputs always do.
        let program = two_cones(vec![Lit::pos(6)]);
        assert_eq!(
            plan(&program, 100, false, Sharing::Shared).stored,
            vec![vec![no, yes, no, yes]]
        );
        assert_eq!(
            plan(&program, 1, false, Sharing::Shared).stored,
            vec![vec![yes; 4]]
        );
        assert_eq!(
            plan(&program, 100, true, Sharing::Shared).stored,
            vec![vec![yes; 4]]
        );
        let (next, view) = (vec![no, yes, no, no], vec![no, no, no, yes]);
        assert_eq!(
            plan(&program, 100, false, Sharing::ViewApart).stored,
            vec![next.clone(), view.clone()]
        );
        assert_eq!(
            plan(&program, 100, false, Sharing::Separate).stored,
            vec![none.clone(), none.clone(), none.clone(), next.clone(), view]
        );
        // A view of g0 makes it an output of the view, which the next entry's chunks no
        // longer store when the view has chunks of its own.
        let program = two_cones(vec![Lit::neg(3), Lit::pos(6)]);
        assert_eq!(
            plan(&program, 100, false, Sharing::Shared).stored,
            vec![vec![yes, yes, no, yes]]
        );
        let view = vec![yes, no, no, yes];
        assert_eq!(
            plan(&program, 100, false, Sharing::ViewApart).stored,
            vec![next.clone(), view.clone()]
        );
        // With g2 reading g0 instead of the base, g0 is needed by next and the view, and g1
        // (next alone) reads it: sharing cuts them into two chunks, so g0 is stored for g1.
        let mut program = two_cones(vec![Lit::pos(6)]);
        program.operands[2] = Lit::pos(3);
        program.compute_entry_gates();
        assert_eq!(
            plan(&program, 100, false, Sharing::Shared).stored,
            vec![vec![yes, yes, no, yes]]
        );
        assert_eq!(
            plan(&program, 100, false, Sharing::Separate).stored,
            vec![none.clone(), none.clone(), none, next, vec![no, no, no, yes]]
        );
    }

    /// Runs the chunks of `entry` under `plan` at `width` symbolically and checks that each
    /// gate it computes is one of the entry's, computed after the gates it reads (in the same
    /// chunk, or stored by an earlier one), that it computes every gate of the entry, and that
    /// every output of the entry is in memory at the end.
    fn check_run(program: &Program, plan: &Plan, entry: Entry, width: Width) {
        let first = program.first_gate_slot();
        let gate_of = |lit: &Lit| (lit.slot() as usize).checked_sub(first);
        let mut memory = vec![false; program.num_gates()];
        let mut computed = vec![false; program.num_gates()];
        let jobs = plan
            .jobs
            .iter()
            .filter(|j| j.width == width && j.entries >> entry.index() & 1 == 1);
        for job in jobs {
            let mut here = vec![false; program.num_gates()];
            for &g in &job.gates {
                let g = g as usize;
                assert!(
                    program.gates_of(entry).contains(&(g as u32)),
                    "{entry:?} runs {g}"
                );
                for h in program
                    .gate_operands(g)
                    .expect("in bounds")
                    .iter()
                    .filter_map(gate_of)
                {
                    // A gate folded into `g` as it was computed (in this chunk or an earlier
                    // one of the same group) is not read by it.
                    let folded = plan.sinks[job.part][h] == g as u32;
                    assert!(
                        here[h] || memory[h] || folded,
                        "{entry:?}: gate {g} reads {h}, not there"
                    );
                }
                here[g] = true;
                computed[g] = true;
            }
            for &g in &job.gates {
                memory[g as usize] |= plan.stored[job.part][g as usize];
            }
        }
        for &g in program.gates_of(entry) {
            assert!(computed[g as usize], "{entry:?} does not compute {g}");
        }
        for g in program.outputs(entry).iter().filter_map(gate_of) {
            assert!(memory[g], "{entry:?} leaves its output {g} out of memory");
        }
    }

    #[test]
    fn every_entry_computes_exactly_its_gates_after_their_operands_and_each_part_compiles_a_gate_once() {
        for views in [
            vec![Lit::pos(4), Lit::pos(5)],
            vec![Lit::pos(6)],
            vec![Lit::pos(3)],
            vec![Lit::neg(3), Lit::pos(4), Lit::pos(6)],
        ] {
            let mut shared_operand = two_cones(views.clone());
            shared_operand.operands[2] = Lit::pos(3);
            shared_operand.compute_entry_gates();
            for program in [two_cones(views), shared_operand] {
                for sharing in MODES {
                    for budget in [1, 3, 100] {
                        for every in [false, true] {
                            let plan = plan(&program, budget, every, sharing);
                            for width in Width::ALL {
                                for entry in Entry::ALL {
                                    check_run(&program, &plan, entry, width);
                                }
                                for part in 0..plan.stored.len() {
                                    let mut compiled: Vec<u32> = plan
                                        .jobs
                                        .iter()
                                        .filter(|j| j.width == width && j.part == part)
                                        .flat_map(|j| j.gates.iter().copied())
                                        .collect();
                                    compiled.sort_unstable();
                                    let before = compiled.len();
                                    compiled.dedup();
                                    assert_eq!(before, compiled.len(), "a gate is compiled twice");
                                }
                            }
                            // Each entry runs the chunks of one part only, and the jobs of a
                            // chunk (which share its schedule) are its gates at each width.
                            for job in &plan.jobs {
                                assert_eq!(job.entries & !plan.parts[job.part], 0);
                                let same: Vec<&Job> =
                                    plan.jobs.iter().filter(|j| j.chunk == job.chunk).collect();
                                assert_eq!(same.len(), Width::ALL.len());
                                for other in same {
                                    assert_eq!(
                                        (other.part, other.entries, &other.gates),
                                        (job.part, job.entries, &job.gates)
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
