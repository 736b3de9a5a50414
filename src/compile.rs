//! The compiler pipeline: a checked description to an ordered [`Program`], through grounding,
//! net building, optimization and ordering, each phase timed.

use crate::gdl::Description;
use crate::ground::{self, GroundError, GroundLimits};
use crate::net::{self, NetError, NetLimits, NetStats, PassReport, Propnet};
use crate::opaque::{self, TopDown};
use propjet_runtime::{Opaque, Program};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether the compiler may leave a relation opaque when grounding fails (`doc/opaque.md`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum OpaqueChoice {
    /// Ground as usual; if that fails, retry with the relations nearest the GDL relations on
    /// the way to the one that failed left opaque, evaluated per state outside the net.
    #[default]
    Auto,
    /// Never: a game that does not ground does not compile.
    Off,
}

/// What the compiler may spend and whether it optimizes.
#[derive(Clone, Debug)]
pub struct Options {
    /// Budgets of the grounder.
    pub ground: GroundLimits,
    /// Budgets of the net builder.
    pub net: NetLimits,
    /// Whether to run the optimization passes.
    pub optimize: bool,
    /// The most rounds of the pass pipeline.
    pub max_rounds: u32,
    /// Whether a relation may be left opaque.
    pub opaque: OpaqueChoice,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ground: GroundLimits::default(),
            net: NetLimits::default(),
            optimize: true,
            max_rounds: 8,
            opaque: OpaqueChoice::Auto,
        }
    }
}

/// How long each phase took.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// Grounding.
    pub ground: Duration,
    /// Building the unoptimized net.
    pub build: Duration,
    /// All optimization passes.
    pub optimize: Duration,
    /// Ordering into a program, and checking the optimized net (on a large net, beside it).
    pub order: Duration,
}

impl Timings {
    /// The sum of the phases.
    pub fn total(&self) -> Duration {
        self.ground + self.build + self.optimize + self.order
    }
}

/// A compiled game.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The ordered program, validated.
    pub program: Program,
    /// The final net.
    pub net: Propnet,
    /// Ground atoms and rules, for the statistics.
    pub ground_atoms: usize,
    /// Ground rules.
    pub ground_rules: usize,
    /// The net before optimization.
    pub unoptimized: NetStats,
    /// The size after each pass.
    pub passes: Vec<PassReport>,
    /// Phase times.
    pub timings: Timings,
    /// The relations left opaque (`name/arity`); empty for nearly every game.
    pub opaque_relations: Vec<String>,
    /// The evaluator of the program's opaque atoms, if it has any; engines need it
    /// ([`Compiled::interpreter`], [`crate::lower::engine_with`]).
    pub opaque: Option<Arc<dyn Opaque>>,
}

impl Compiled {
    /// An interpreter for the program, with the evaluator of its opaque atoms if it has any.
    pub fn interpreter(&self) -> Result<propjet_runtime::Interpreter, propjet_runtime::ProgramError> {
        let program = Arc::new(self.program.clone());
        match &self.opaque {
            Some(o) => propjet_runtime::Interpreter::with_opaque(program, Arc::clone(o)),
            None => propjet_runtime::Interpreter::new(program),
        }
    }
}

/// Why a game did not compile.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Grounding failed or hit a limit.
    #[error("grounding: {0}")]
    Ground(#[from] GroundError),
    /// The net could not be built or hit a limit.
    #[error("building the net: {0}")]
    Net(#[from] NetError),
    /// The evaluator of the opaque atoms could not be set up.
    #[error("the evaluator of the opaque relations: {0}")]
    Opaque(String),
    /// The ordered program failed validation: always a bug.
    #[error("internal error (a bug): the compiled program is invalid: {0}")]
    Invalid(String),
}

/// The number of nodes of the optimized net from which it is checked on a second thread.
const PARALLEL_NODES: usize = 1 << 16;

/// Compiles `desc`.
pub fn compile(desc: &Description, options: &Options) -> Result<Compiled, CompileError> {
    let mut timings = Timings::default();
    let start = Instant::now();
    let (grounded, opaque_relations) = match options.opaque {
        OpaqueChoice::Off => (ground::ground(desc, &options.ground)?, Vec::new()),
        OpaqueChoice::Auto => {
            let (g, _, relations) = opaque::ground_auto(desc, &options.ground)?;
            (g, relations)
        }
    };
    timings.ground = start.elapsed();

    let start = Instant::now();
    // The views come unnamed, in atom order: their names are sorted on a thread of their own
    // while the net is optimized, and given to the views after the passes (`ViewNames`).
    let (mut built, mut names) = net::build_unnamed(&grounded, &options.net)?;
    if !built.loops.is_empty() && !built.opaque.is_empty() {
        // The demand of the opaque atoms (`add_demand`) is a function of the state that the
        // executors compute before the entry, with no loop; a net with both is built unrolled.
        let unrolled = net::NetLimits {
            recursion: net::Recursion::Unroll,
            ..options.net.clone()
        };
        (built, names) = net::build_unnamed(&grounded, &unrolled)?;
    }
    timings.build = start.elapsed();
    let unoptimized = NetStats::of(&built);
    let (ground_atoms, ground_rules) = (grounded.atoms.len(), grounded.rules.len());
    // Nothing reads the ground program any more. Freeing it (chess: 4.5 million rules and
    // their atoms' texts, about 85 ms of an idle core) is left to a thread of its own, so that
    // the optimizer starts at once; the second core is otherwise idle here. If no thread can
    // be started, the closure and the program in it are dropped here instead.
    let _ = std::thread::Builder::new()
        .name("free ground".into())
        .spawn(move || drop(grounded));

    let start = Instant::now();
    let (mut net, passes) = if options.optimize {
        net::optimize_unnamed(built, options.max_rounds)
    } else {
        (built, Vec::new())
    };
    names.name(&mut net)?;
    net::add_demand(&mut net);
    timings.optimize = start.elapsed();

    // A large optimized net is checked on a second thread while this one orders it (chess: a
    // sweep over 3.8 million operands). An invalid net is a bug that ordering may meet as a
    // panic; the check's error is reported first all the same.
    let start = Instant::now();
    net::arrange_inputs(&mut net);
    let program = if net.nodes.len() >= PARALLEL_NODES {
        let (verified, ordered) = std::thread::scope(|s| {
            let check = std::thread::Builder::new()
                .name("verify".into())
                .spawn_scoped(s, || net.verify());
            let ordered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| net::order(&net)));
            let verified = match check {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No thread could be started: the net is checked here.
                Err(_) => net.verify(),
            };
            (verified, ordered)
        });
        verified?;
        ordered.unwrap_or_else(|p| std::panic::resume_unwind(p))
    } else {
        net.verify()?;
        net::order(&net)
    };
    program
        .validate()
        .map_err(|e| CompileError::Invalid(e.to_string()))?;
    timings.order = start.elapsed();
    let opaque: Option<Arc<dyn Opaque>> = if program.num_opaque() > 0 {
        Some(Arc::new(
            TopDown::new(desc, &program).map_err(CompileError::Opaque)?,
        ))
    } else {
        None
    };

    Ok(Compiled {
        opaque_relations,
        opaque,
        program,
        net,
        ground_atoms,
        ground_rules,
        unoptimized,
        passes,
        timings,
    })
}
