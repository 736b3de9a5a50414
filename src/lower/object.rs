//! Lowering to a relocatable object file for another target, such as
//! `aarch64-unknown-linux-gnu` from an x86-64 host (see `doc/native.md`, section aarch64).
//!
//! The object holds the same chunk functions as the JIT code of [`super::lower`] (every entry,
//! at 64 lanes and, where the target has 128-bit vectors, at 128), built by the same code for
//! the other ISA, and a small description of which chunks make up each entry, so that a C
//! program linked with it can run any entry without knowing the game:
//!
//! ```c
//! extern const uint64_t propjet_num_slots;          /* Program::num_slots */
//! typedef void (*propjet_chunk)(uint64_t *values);
//! /* Index entry * 2 + (lanes == 128), entries in Entry::ALL order (legal, terminal, goals,
//!    next, view): a null-terminated list of the entry's chunks in the order they run, or a
//!    null pointer when the target has no code of that width. */
//! extern const propjet_chunk *const propjet_entries[10];
//! ```
//!
//! Each list is also its own symbol (`propjet_next_128`, say), and each chunk is the exported
//! function `propjet_chunk_<i>`; [`Object::entries`] names them on the Rust side. A chunk keeps
//! the calling convention of the JIT code (`runtime/src/native.rs`): one pointer to the value
//! array, one lane value per slot, 16-byte aligned at 128 lanes; the caller sets slot 0 to
//! zeros and slot 1 to ones.

use cranelift_codegen::isa;
use cranelift_module::{
    default_libcall_names, DataDescription, DataId, FuncId, Linkage, Module, ModuleError,
};
use cranelift_object::{ObjectBuilder, ObjectModule};
use propjet_runtime::{Entry, Program, Width};
use std::time::Instant;
use target_lexicon::{Endianness, Triple};

use super::{
    chunk_signature, compile_parallel, configured_isa, shape, supports_x128, Backend, Isas, LowerError,
    LowerStats, Options, Plan,
};

/// The symbol of the number of slots, a 64-bit unsigned integer.
pub const NUM_SLOTS_SYMBOL: &str = "propjet_num_slots";

/// The symbol of the table of chunk lists, indexed by `entry * 2 + width` (see the module
/// documentation).
pub const ENTRIES_SYMBOL: &str = "propjet_entries";

/// The exported name of the function of chunk `i`.
pub fn chunk_symbol(i: usize) -> String {
    format!("propjet_chunk_{i}")
}

/// The symbol of the null-terminated chunk list of `entry` at `width`.
pub fn entry_symbol(entry: Entry, width: Width) -> String {
    let name = match entry {
        Entry::Legal => "legal",
        Entry::Terminal => "terminal",
        Entry::Goals => "goals",
        Entry::Next => "next",
        Entry::View => "view",
    };
    format!("propjet_{name}_{}", width.lanes())
}

/// The chunk functions of one entry, by symbol, in the order they run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntrySymbols {
    /// The chunks of the 64-lane code.
    pub x64: Vec<String>,
    /// The chunks of the 128-lane code, or `None` when the target has no such code.
    pub x128: Option<Vec<String>>,
}

impl EntrySymbols {
    /// The chunks at `width`, if the object has code of that width.
    pub fn at(&self, width: Width) -> Option<&[String]> {
        match width {
            Width::X64 => Some(&self.x64),
            Width::X128 => self.x128.as_deref(),
        }
    }
}

/// An object file holding a program's code for one target.
#[derive(Clone, Debug)]
pub struct Object {
    /// The target the code is for.
    pub target: Triple,
    /// The object file (ELF for Linux targets).
    pub bytes: Vec<u8>,
    /// The program's number of slots, as in the object's [`NUM_SLOTS_SYMBOL`].
    pub num_slots: usize,
    /// Each entry's chunks, indexed as [`Entry::ALL`].
    pub entries: [EntrySymbols; 5],
    /// What lowering produced and spent (the time includes writing the object).
    pub stats: LowerStats,
}

/// Why no object was made.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Cranelift has no code generator for the target in this build, or refused our settings
    /// for it.
    #[error("no code generator for target {target}: {message}")]
    UnsupportedTarget {
        /// The target asked for.
        target: String,
        /// Cranelift's reason.
        message: String,
    },
    /// Lowering the program failed, as it would for the host.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// The object writer refused what we gave it: always a bug of this module.
    #[error("internal error (a bug): the object file could not be written: {0}")]
    Write(String),
}

/// Lowers `program` for `target` into an object file, with the same options and chunks as
/// [`super::lower`] for the host.
pub fn emit(program: &Program, target: &Triple, options: &Options) -> Result<Object, ObjectError> {
    let start = Instant::now();
    program.validate().map_err(LowerError::from)?;
    // The object's functions would read the opaque slots, but its harness has no evaluator to
    // fill them and no demand function to ask (`doc/opaque.md` §6).
    if program.num_opaque() > 0 {
        return Err(LowerError::Opaque(
            program.num_opaque(),
            "an object file has no evaluator to fill them",
        )
        .into());
    }
    // Its harness calls each entry's functions once, in order; a loop would need it to run
    // the body's functions until nothing changes (compile with `Recursion::Unroll` instead).
    if !program.loops.loops.is_empty() {
        return Err(LowerError::Loops(program.loops.loops.len()).into());
    }
    if program.num_gates() > options.max_gates {
        return Err(LowerError::TooLarge {
            gates: program.num_gates(),
            limit: options.max_gates,
        }
        .into());
    }
    let options = &Options {
        regalloc: options.regalloc.for_gates(program.num_gates()),
        ..options.clone()
    };
    let unsupported = |message: String| ObjectError::UnsupportedTarget {
        target: target.to_string(),
        message,
    };
    let isa_for = |optimize: bool| -> Result<_, ObjectError> {
        let builder = isa::lookup(target.clone()).map_err(|e| unsupported(e.to_string()))?;
        // The object goes to a linker, which takes position-independent code as it is into
        // any kind of executable; the functions reference nothing, so this costs nothing.
        configured_isa(builder, options, optimize, true).map_err(|e| unsupported(e.to_string()))
    };
    let isas = Isas {
        speed: isa_for(true)?,
        plain: isa_for(false)?,
    };
    let x128 = options.x128 && supports_x128(&isas.speed);
    let widths: &[Width] = if x128 { &Width::ALL } else { &[Width::X64] };
    let plan = Plan::new(
        program,
        options.chunk_cost,
        widths,
        options.store_every_gate,
        options.sharing,
        options.sink,
    );
    let compiled = compile_parallel(
        &isas,
        program,
        &plan,
        options.threads.max(1),
        Backend::Cranelift,
        shape(options),
    )?;

    let write = |e: ModuleError| ObjectError::Write(e.to_string());
    let builder = ObjectBuilder::new(isas.speed, "propjet", default_libcall_names()).map_err(write)?;
    let mut module = ObjectModule::new(builder);
    let signature = chunk_signature(module.isa());
    let mut functions: Vec<FuncId> = Vec::with_capacity(plan.jobs.len());
    let mut entries: [EntrySymbols; 5] = Default::default();
    for e in &mut entries {
        e.x128 = x128.then(Vec::new);
    }
    let mut code_bytes = 0;
    for (i, (job, code)) in plan.jobs.iter().zip(compiled).enumerate() {
        let name = chunk_symbol(i);
        let id = module
            .declare_function(&name, Linkage::Export, &signature)
            .map_err(write)?;
        // The code has no relocation: `compile_job` refuses any.
        module
            .define_function_bytes(id, code.alignment, &code.bytes, &[])
            .map_err(write)?;
        code_bytes += code.bytes.len();
        functions.push(id);
        for entry in Entry::ALL {
            if job.entries >> entry.index() & 1 == 1 {
                let symbols = &mut entries[entry.index()];
                match job.width {
                    Width::X64 => symbols.x64.push(name.clone()),
                    Width::X128 => symbols.x128.get_or_insert_with(Vec::new).push(name.clone()),
                }
            }
        }
    }

    let pointer = target
        .pointer_width()
        .map_err(|()| unsupported("the target has no known pointer width".to_string()))?
        .bytes() as usize;
    let little = target.endianness() != Ok(Endianness::Big);
    // One null-terminated list of function addresses per entry and width, in run order.
    let mut lists: Vec<Option<DataId>> = Vec::with_capacity(10);
    for entry in Entry::ALL {
        for width in Width::ALL {
            if width == Width::X128 && !x128 {
                lists.push(None);
                continue;
            }
            let ids: Vec<FuncId> = plan
                .jobs
                .iter()
                .zip(&functions)
                .filter(|(job, _)| job.width == width && job.entries >> entry.index() & 1 == 1)
                .map(|(_, &id)| id)
                .collect();
            let data = module
                .declare_data(&entry_symbol(entry, width), Linkage::Export, false, false)
                .map_err(write)?;
            let mut description = DataDescription::new();
            // Explicit zeros: zero-initialized data goes to a section without contents, where
            // the linker would not fill in the addresses.
            description.define(vec![0; pointer * (ids.len() + 1)].into_boxed_slice());
            description.set_align(pointer as u64);
            for (k, &id) in ids.iter().enumerate() {
                let func = module.declare_func_in_data(id, &mut description);
                description.write_function_addr((k * pointer) as u32, func);
            }
            module.define_data(data, &description).map_err(write)?;
            lists.push(Some(data));
        }
    }
    let table = module
        .declare_data(ENTRIES_SYMBOL, Linkage::Export, false, false)
        .map_err(write)?;
    let mut description = DataDescription::new();
    description.define(vec![0; pointer * lists.len()].into_boxed_slice());
    description.set_align(pointer as u64);
    for (k, list) in lists.iter().enumerate() {
        if let Some(list) = list {
            let value = module.declare_data_in_data(*list, &mut description);
            description.write_data_addr((k * pointer) as u32, value, 0);
        }
    }
    module.define_data(table, &description).map_err(write)?;

    let slots = module
        .declare_data(NUM_SLOTS_SYMBOL, Linkage::Export, false, false)
        .map_err(write)?;
    let mut description = DataDescription::new();
    let count = program.num_slots() as u64;
    let bytes = if little {
        count.to_le_bytes()
    } else {
        count.to_be_bytes()
    };
    description.define(Box::new(bytes));
    description.set_align(8);
    module.define_data(slots, &description).map_err(write)?;

    let bytes = module
        .finish()
        .emit()
        .map_err(|e| ObjectError::Write(e.to_string()))?;
    Ok(Object {
        target: target.clone(),
        bytes,
        num_slots: program.num_slots(),
        entries,
        stats: LowerStats {
            functions: plan.jobs.len(),
            gates: plan.jobs.iter().map(|j| j.gates.len()).sum(),
            code_bytes,
            x128,
            x64_from_x128: false,
            regalloc: options.regalloc,
            time: start.elapsed(),
            backend: Backend::Cranelift,
            parts: plan.part_entries(),
        },
    })
}
