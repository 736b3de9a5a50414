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
    Engine, Entry, EntryChunks, Interpreter, Lit, Native, NativeError, Op, Opaque, Program, ProgramError,
    Width,
};

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
    /// Whether Cranelift's code stores every gate into its slot, as the interpreter does. By
    /// default (false) it stores only the outputs of the entries and the gates that another
    /// chunk reads; a gate read only within its chunk stays in a register unless it must leave
    /// the registers before its last read. The direct generator stores every gate anyway.
    pub store_every_gate: bool,
    /// Whether Cranelift's x86-64 code addresses the slots near the gates it stores from a
    /// base register that follows the stores up the array, with one-byte displacements (3
    /// bytes shorter per instruction than four-byte ones from the array's start). Other ISAs
    /// and the direct generator ignore it.
    pub window: bool,
    /// Whether Cranelift's code passes a fold of 8 or more operands whose value is read more
    /// than once (a gate stored and read again, a block of shared operands) through a block
    /// parameter, so that Cranelift folds the fold's loads into its operations as memory
    /// operands (see `gates::root`). Other ISAs and the direct generator ignore it.
    pub fold_shared: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            chunk_cost: 4_096,
            x128: true,
            verifier: cfg!(debug_assertions),
            regalloc: Regalloc::Auto,
            max_gates: 4_000_000,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
            backend: Backend::Cranelift,
            keep: 8,
            cluster: 2,
            partial: true,
            store_every_gate: false,
            window: true,
            fold_shared: true,
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
    /// The register allocator Cranelift ran (whatever it was, for the direct generator).
    pub regalloc: Regalloc,
    /// The code generator that wrote the code: [`Backend::Cranelift`] or [`Backend::X64`].
    pub backend: Backend,
    /// Wall time of the whole lowering, building the IR through finalizing the code.
    pub time: Duration,
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
    let start = Instant::now();
    let program: Arc<Program> = program.into();
    program.validate()?;
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
    let direct_possible = x64_host(&*isas.speed) && x64::fits(&program, Width::X128);
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
    let widths: &[Width] = if x128 { &Width::ALL } else { &[Width::X64] };
    let plan = Plan::new(&program, options.chunk_cost, widths, options.store_every_gate);
    let compiled = compile_parallel(
        &isas,
        &program,
        &plan,
        options.threads.max(1),
        backend,
        shape(options),
    )?;
    let mut module = JITModule::new(JITBuilder::with_isa(isas.speed, default_libcall_names()));
    let defined = define(&mut module, &plan, compiled, x128).and_then(|(chunks, code_bytes)| {
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
        regalloc: options.regalloc,
        backend,
        time: Duration::ZERO,
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
    let native = unsafe { Native::from_jit(program, opaque, module, chunks) }?;
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
fn chunk_ranges(program: &Program, gates: &[u32], budget: usize) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut cost) = (0, 0);
    for (i, &g) in gates.iter().enumerate() {
        let c = program.gates[g as usize].len as usize + 1;
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
}

/// What to generate: the functions, in the order every entry runs those it needs.
///
/// Each gate is compiled once per width, however many entries need it. Gates are grouped by
/// the set of entries that need them (their *signature*), and each group is cut into chunks.
/// If gate `g` reads gate `h`, every entry needing `g` needs `h`, so the signature of `h`
/// contains that of `g`: either they are equal (same group, `h < g` in ascending order) or
/// `h`'s is a strict superset with more entries. Groups ordered by decreasing number of
/// entries are therefore in dependency order, and each entry runs exactly its own gates by
/// running, in plan order, the chunks whose signature contains it.
struct Plan {
    jobs: Vec<Job>,
    /// For each gate, whether its value must be in its slot when its chunk returns: it is an
    /// output of some entry, or a gate of another chunk reads it. A gate read only within its
    /// own chunk may stay in a register (`gates.rs` stores it only if it must leave the
    /// registers before its last read).
    stored: Vec<bool>,
}

impl Plan {
    /// The plan of `program`'s chunks; with `store_every_gate`, every gate is to be stored.
    fn new(program: &Program, chunk_cost: usize, widths: &[Width], store_every_gate: bool) -> Plan {
        let mut signature = vec![0u8; program.num_gates()];
        for entry in Entry::ALL {
            for &g in program.gates_of(entry) {
                signature[g as usize] |= 1 << entry.index();
            }
        }
        let mut groups: Vec<u8> = (1..32u8).filter(|sig| signature.contains(sig)).collect();
        groups.sort_by_key(|sig| (std::cmp::Reverse(sig.count_ones()), *sig));
        let mut jobs = Vec::new();
        // Which chunk computes each gate (the same at every width; `u32::MAX`: no entry needs
        // the gate, so nothing computes it).
        let mut chunk_of = vec![u32::MAX; program.num_gates()];
        let mut chunks = 0u32;
        for entries in groups {
            let gates: Vec<u32> = (0..program.num_gates() as u32)
                .filter(|&g| signature[g as usize] == entries)
                .collect();
            let ranges = chunk_ranges(program, &gates, chunk_cost);
            for range in &ranges {
                for &g in &gates[range.clone()] {
                    chunk_of[g as usize] = chunks;
                }
                chunks += 1;
            }
            for &width in widths {
                for range in &ranges {
                    jobs.push(Job {
                        entries,
                        width,
                        gates: gates[range.clone()].to_vec(),
                    });
                }
            }
        }
        let first = program.first_gate_slot();
        let gate_of = |lit: &Lit| {
            (lit.slot() as usize)
                .checked_sub(first)
                .filter(|&g| g < chunk_of.len())
        };
        let mut stored = vec![store_every_gate; program.num_gates()];
        for entry in Entry::ALL {
            for g in program.outputs(entry).iter().filter_map(gate_of) {
                stored[g] = true;
            }
        }
        for (g, &chunk) in chunk_of.iter().enumerate() {
            if chunk == u32::MAX {
                continue;
            }
            for h in program.gate_operands(g).unwrap_or(&[]).iter().filter_map(gate_of) {
                if chunk_of[h] != chunk {
                    stored[h] = true;
                }
            }
        }
        Plan { jobs, stored }
    }
}

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
    shape: gates::Shape,
) -> Result<Vec<CompiledChunk>, LowerError> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<CompiledChunk, LowerError>>>> =
        Mutex::new((0..plan.jobs.len()).map(|_| None).collect());
    let worker = || {
        let mut ctx = Context::new();
        let mut fctx = FunctionBuilderContext::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = plan.jobs.get(i) else { break };
            let result = if backend == Backend::X64 {
                Ok(CompiledChunk {
                    bytes: x64::emit(program, &job.gates, job.width),
                    alignment: 16,
                })
            } else {
                compile_job(isas, &mut ctx, &mut fctx, program, job, &plan.stored, shape)
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
                // The other workers stop after their current job.
                next.store(plan.jobs.len(), Ordering::Relaxed);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(plan.jobs.len()) {
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

/// Builds and compiles one job's function.
fn compile_job(
    isas: &Isas,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    program: &Program,
    job: &Job,
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
    // Both save bytes of x86-64 encodings (one-byte displacements, loads folded into memory
    // operands, which other ISAs' operations do not have); elsewhere the code stays as it was
    // measured.
    let x86_64 = isa.triple().architecture == target_lexicon::Architecture::X86_64;
    let shape = gates::Shape {
        window: shape.window && x86_64,
        root: shape.root && x86_64,
        ..shape
    };
    build_function(&mut ctx.func, fctx, isa.frontend_config(), |b, base| {
        gates::emit(b, base, job.width, program, &job.gates, stored, shape);
    });
    let code = ctx
        .compile(&**isa, &mut Default::default())
        .map_err(|e| codegen_text(e.inner))?;
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

/// How Cranelift's code of a chunk keeps values and folds operands, from the options.
fn shape(options: &Options) -> gates::Shape {
    gates::Shape {
        keep: options.keep,
        accumulators: gates::ACCUMULATORS,
        cluster: options.cluster.max(1),
        partial: options.partial,
        window: options.window,
        root: options.fold_shared,
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
) -> Result<([EntryChunks; 5], usize), LowerError> {
    let signature = chunk_signature(module.isa());
    let mut chunks: [EntryChunks; 5] = Default::default();
    for c in &mut chunks {
        c.x128 = x128.then(Vec::new);
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
                match job.width {
                    Width::X64 => c.x64.push(id),
                    Width::X128 => c.x128.get_or_insert_with(Vec::new).push(id),
                }
            }
        }
    }
    Ok((chunks, code_bytes))
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
        };
        program.compute_entry_gates();
        program
    }

    #[test]
    fn only_outputs_and_gates_read_by_another_chunk_must_be_stored() {
        // g0 is read by g1 (next) and g2 by g3 (the view): in one chunk per entry, neither
        // needs its slot; with one gate per chunk both do, and outputs always do.
        let program = two_cones(vec![Lit::pos(6)]);
        assert_eq!(
            Plan::new(&program, 100, &Width::ALL, false).stored,
            vec![false, true, false, true]
        );
        assert_eq!(Plan::new(&program, 1, &Width::ALL, false).stored, vec![true; 4]);
        assert_eq!(Plan::new(&program, 100, &Width::ALL, true).stored, vec![true; 4]);
        // A view of g0 makes it an output.
        let program = two_cones(vec![Lit::neg(3), Lit::pos(6)]);
        assert_eq!(
            Plan::new(&program, 100, &Width::ALL, false).stored,
            vec![true, true, false, true]
        );
    }

    /// The gates `entry` runs under `plan` at `width`, in order.
    fn run_order(plan: &Plan, entry: Entry, width: Width) -> Vec<u32> {
        plan.jobs
            .iter()
            .filter(|j| j.width == width && j.entries >> entry.index() & 1 == 1)
            .flat_map(|j| j.gates.iter().copied())
            .collect()
    }

    #[test]
    fn every_entry_runs_exactly_its_gates_after_their_operands_and_each_gate_is_compiled_once() {
        for views in [
            vec![Lit::pos(4), Lit::pos(5)],
            vec![Lit::pos(6)],
            vec![Lit::pos(3)],
        ] {
            let program = two_cones(views);
            for budget in [1, 3, 100] {
                let plan = Plan::new(&program, budget, &Width::ALL, false);
                for width in Width::ALL {
                    for entry in Entry::ALL {
                        let order = run_order(&plan, entry, width);
                        let mut sorted = order.clone();
                        sorted.sort_unstable();
                        assert_eq!(sorted, program.gates_of(entry), "{entry:?}");
                        for (i, &g) in order.iter().enumerate() {
                            for lit in program.gate_operands(g as usize).expect("in bounds") {
                                if let Some(h) = (lit.slot() as usize).checked_sub(program.first_gate_slot())
                                {
                                    assert!(
                                        order[..i].contains(&(h as u32)),
                                        "{entry:?}: gate {g} before {h}"
                                    );
                                }
                            }
                        }
                    }
                    let mut compiled: Vec<u32> = plan
                        .jobs
                        .iter()
                        .filter(|j| j.width == width)
                        .flat_map(|j| j.gates.iter().copied())
                        .collect();
                    compiled.sort_unstable();
                    let before = compiled.len();
                    compiled.dedup();
                    assert_eq!(before, compiled.len(), "a gate is compiled twice");
                }
            }
        }
    }
}
