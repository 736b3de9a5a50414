//! The compiler pipeline: a checked description to an ordered [`Program`], through grounding,
//! net building, optimization and ordering, each phase timed.

use crate::gdl::Description;
use crate::ground::{self, GroundError, GroundLimits};
use crate::net::{self, NetError, NetLimits, NetStats, PassReport, Propnet};
use propjet_runtime::Program;
use std::time::{Duration, Instant};

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ground: GroundLimits::default(),
            net: NetLimits::default(),
            optimize: true,
            max_rounds: 8,
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
    /// Ordering into a program.
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
    /// The ordered program failed validation: always a bug.
    #[error("internal error (a bug): the compiled program is invalid: {0}")]
    Invalid(String),
}

/// Compiles `desc`.
pub fn compile(desc: &Description, options: &Options) -> Result<Compiled, CompileError> {
    let mut timings = Timings::default();
    let start = Instant::now();
    let grounded = ground::ground(desc, &options.ground)?;
    timings.ground = start.elapsed();

    let start = Instant::now();
    let built = net::build(&grounded, &options.net)?;
    timings.build = start.elapsed();
    let unoptimized = NetStats::of(&built);
    let (ground_atoms, ground_rules) = (grounded.atoms.len(), grounded.rules.len());
    drop(grounded);

    let start = Instant::now();
    let (net, passes) = if options.optimize {
        net::optimize(built, options.max_rounds)
    } else {
        (built, Vec::new())
    };
    net.verify()?;
    timings.optimize = start.elapsed();

    let start = Instant::now();
    let program = net::order(&net);
    program
        .validate()
        .map_err(|e| CompileError::Invalid(e.to_string()))?;
    timings.order = start.elapsed();

    Ok(Compiled {
        program,
        net,
        ground_atoms,
        ground_rules,
        unoptimized,
        passes,
        timings,
    })
}
