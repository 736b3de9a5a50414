//! The propjet command-line tool.
//!
//! `propjet check GAME.kif` checks an engine on a game: against a reference trace with
//! `--trace`, otherwise on seeded random playouts where the engine's own consistency is checked
//! (and, once several engines exist, every engine against the first).
//!
//! Exit status: 0 when everything agreed, 1 when the check found a mismatch or a playout never
//! ended, 2 when the input could not be used (a missing file, a description that is not valid
//! GDL, a malformed trace) or the arguments were wrong.

mod bench_cmd;

use clap::{Parser, Subcommand, ValueEnum};
use propjet::compare::{self, Cursor, Report, DEFAULT_MAX_STEPS};
use propjet::reference::Reference;
use propjet::{analysis, compile, gdl, lower, measure, net, trace};
use propjet_runtime::{Entry, Interpreter, Native, Width};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "propjet",
    version,
    about = "GDL games to propositional nets and native code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Checks an engine on a game: replays a reference trace, or plays seeded random games.
    Check(CheckArgs),
    /// Compiles a game to an ordered propnet and native code and prints statistics and phase times.
    Compile(CompileArgs),
    /// Analyses a game's structure: the action-independent part, latches, and its factors
    /// (independent sub-games), or why it does not factor.
    Analyze(AnalyzeArgs),
    /// Times seeded random rollouts on every engine and prints a table, then checks that all
    /// engines agree on the same seeded rollouts.
    Bench(bench_cmd::BenchArgs),
    /// The external-engine protocol of the GDL reasoner benchmark: rollouts for SECONDS on one
    /// thread, results (or `errorMessage = ...`) written to OUTFILE.
    PerfTest(bench_cmd::PerfTestArgs),
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// The game description (GDL in KIF syntax).
    game: PathBuf,
    /// A state (its true base facts in KIF, one per line or as one list) from which to analyse
    /// the game: the latches that hold there are folded in as constants first.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Writes the result as one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(clap::Args)]
struct CompileArgs {
    /// The game description (GDL in KIF syntax).
    game: PathBuf,
    /// Writes the optimized net as Graphviz to FILE (nets of at most 5000 nodes).
    #[arg(long, value_name = "FILE")]
    dot: Option<PathBuf>,
    /// Skips the optimization passes.
    #[arg(long)]
    no_optimize: bool,
    /// Skips lowering to native code.
    #[arg(long)]
    no_native: bool,
    /// Also writes the code for --target to FILE as a relocatable object (see doc/native.md).
    #[arg(long, value_name = "FILE")]
    object: Option<PathBuf>,
    /// The target of --object, as a target triple.
    #[arg(
        long,
        value_name = "TRIPLE",
        default_value = "aarch64-unknown-linux-gnu",
        requires = "object"
    )]
    target: String,
    /// Also prints the time of each phase (parse, ground, net, optimize, order, lower) and the
    /// state evaluations per second of each engine (interpreter at 64 lanes, native code at 64
    /// and 128) on random states: the engines take turns in five rounds of equal time, and each
    /// one's fastest round is printed.
    #[arg(long)]
    stats: bool,
    /// Which entry --stats measures.
    #[arg(long, value_enum, default_value_t = StatsEntry::Next, value_name = "ENTRY")]
    stats_entry: StatsEntry,
    /// How long --stats measures each engine on each entry, in seconds (all five rounds).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    stats_seconds: f64,
    /// Which code generator writes the native code: Cranelift (the default), the direct x86-64
    /// one where the host allows it and Cranelift elsewhere (auto), or the direct one (x64, an
    /// error on other hosts).
    #[arg(long, value_enum, default_value_t = BackendArg::Cranelift)]
    backend: BackendArg,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The code generators `compile --backend` can choose.
#[derive(Copy, Clone, PartialEq, Eq, Debug, ValueEnum)]
enum BackendArg {
    /// The direct x86-64 generator where the host allows it, Cranelift elsewhere.
    Auto,
    /// Cranelift.
    Cranelift,
    /// The direct x86-64 generator.
    X64,
}

/// The entries `compile --stats` can measure.
#[derive(Copy, Clone, PartialEq, Eq, Debug, ValueEnum)]
enum StatsEntry {
    /// The legal moves of every role.
    Legal,
    /// The terminal flag.
    Terminal,
    /// The goal values.
    Goals,
    /// The next state.
    Next,
    /// Every view proposition.
    View,
    /// One playout step: legal, terminal, goals and next on the same states, one after the
    /// other, each state counted once.
    Step,
    /// Every entry, one after the other, then the step.
    All,
}

impl StatsEntry {
    /// What is measured, each a line of figures: a name and the entries run on the same states.
    fn measured(self) -> Vec<(String, Vec<Entry>)> {
        let one = |e: Entry| (format!("{e:?}").to_lowercase(), vec![e]);
        let step = || ("step".to_string(), measure::STEP.to_vec());
        match self {
            StatsEntry::Legal => vec![one(Entry::Legal)],
            StatsEntry::Terminal => vec![one(Entry::Terminal)],
            StatsEntry::Goals => vec![one(Entry::Goals)],
            StatsEntry::Next => vec![one(Entry::Next)],
            StatsEntry::View => vec![one(Entry::View)],
            StatsEntry::Step => vec![step()],
            StatsEntry::All => Entry::ALL.into_iter().map(one).chain([step()]).collect(),
        }
    }
}

/// Budgets of the compiler; hitting one is an error that names it.
#[derive(clap::Args)]
struct LimitArgs {
    /// The most ground atoms.
    #[arg(long, value_name = "N")]
    max_atoms: Option<usize>,
    /// The most ground rules.
    #[arg(long, value_name = "N")]
    max_rules: Option<usize>,
    /// The most nodes of the net.
    #[arg(long, value_name = "N")]
    max_nodes: Option<usize>,
    /// The longest grounding may take, in seconds.
    #[arg(long, value_name = "SECONDS")]
    max_ground_seconds: Option<f64>,
    /// How recursive views are built: unrolled into one copy per round, or as loops that the
    /// executors run until nothing changes (`doc/propnet.md`).
    #[arg(long, value_enum)]
    recursion: Option<RecursionArg>,
}

/// The values of `--recursion`.
#[derive(Copy, Clone, ValueEnum)]
enum RecursionArg {
    /// One copy of the component per round.
    Unroll,
    /// One copy, run as a loop.
    Loop,
}

impl LimitArgs {
    fn options(&self) -> compile::Options {
        let mut o = compile::Options::default();
        if let Some(n) = self.max_atoms {
            o.ground.max_atoms = n;
        }
        if let Some(n) = self.max_rules {
            o.ground.max_rules = n;
        }
        if let Some(n) = self.max_nodes {
            o.net.max_nodes = n;
        }
        if let Some(s) = self.max_ground_seconds {
            o.ground.max_time = Duration::from_secs_f64(s.max(0.0));
        }
        match self.recursion {
            Some(RecursionArg::Unroll) => o.net.recursion = net::Recursion::Unroll,
            Some(RecursionArg::Loop) => o.net.recursion = net::Recursion::Loop,
            None => {}
        }
        o
    }
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The game description (GDL in KIF syntax).
    game: PathBuf,
    /// A trace of reference playouts (.jsonl) to replay and compare state by state.
    #[arg(long, value_name = "FILE.jsonl")]
    trace: Option<PathBuf>,
    /// How many seeded random playouts to play when no trace is given.
    #[arg(long, default_value_t = 10, conflicts_with = "trace")]
    playouts: usize,
    /// The seed of the first random playout; playout i uses seed + i.
    #[arg(long, default_value_t = 0, conflicts_with = "trace")]
    seed: u64,
    /// The bound on the length of a random playout, in joint moves.
    #[arg(long, default_value_t = DEFAULT_MAX_STEPS, conflicts_with = "trace")]
    max_steps: u32,
    /// Which engine to check; `all` runs every engine and compares them with each other.
    #[arg(long, value_enum, default_value_t = EngineKind::Reference)]
    engine: EngineKind,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The engines the tool can run.
#[derive(Copy, Clone, PartialEq, Eq, Debug, ValueEnum)]
enum EngineKind {
    /// The GDL-level reference evaluator.
    Reference,
    /// The interpreter of the compiled, optimized propnet.
    Interp,
    /// Native code of the compiled, optimized propnet (the interpreter where the host has no
    /// code generator, said on the first line).
    Native,
    /// Every engine, compared with each other.
    All,
}

/// Why a command stopped before giving a verdict: the message to print and the exit status.
struct Failure {
    message: String,
    status: u8,
}

impl Failure {
    /// Input the tool cannot use.
    fn input(message: String) -> Failure {
        Failure { message, status: 2 }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check(&args),
        Command::Compile(args) => compile_game(&args).map(|()| Report::default()),
        Command::Analyze(args) => analyze_game(&args).map(|()| Report::default()),
        Command::Bench(args) => bench_cmd::bench(&args).map(|()| Report::default()),
        Command::PerfTest(args) => bench_cmd::perf_test(&args).map(|()| Report::default()),
    };
    match result {
        Ok(report) if report.is_clean() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

fn check(args: &CheckArgs) -> Result<Report, Failure> {
    let mut timings: Vec<(&str, Duration)> = Vec::new();
    let game = &args.game;

    let clock = Instant::now();
    let desc = gdl::load(game).map_err(|e| Failure::input(e.to_string()))?;
    timings.push(("parse", clock.elapsed()));

    // The trace is read before the engine is set up, so that a bad trace is reported at once.
    let trace = match &args.trace {
        Some(path) => {
            let clock = Instant::now();
            let trace = trace::read_trace(path).map_err(|e| Failure::input(e.to_string()))?;
            timings.push(("read trace", clock.elapsed()));
            Some(trace)
        }
        None => None,
    };

    let clock = Instant::now();
    let wants = |kind: EngineKind| args.engine == kind || args.engine == EngineKind::All;
    let reference = if wants(EngineKind::Reference) {
        let reference = Reference::new(&desc).map_err(|e| {
            Failure::input(format!(
                "{}: the reference evaluator cannot run this game: {e}",
                game.display()
            ))
        })?;
        timings.push(("reference setup", clock.elapsed()));
        Some(reference)
    } else {
        None
    };
    let program = if wants(EngineKind::Interp) || wants(EngineKind::Native) {
        let clock = Instant::now();
        let compiled = compile::compile(&desc, &args.limits.options())
            .map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
        timings.push(("compile", clock.elapsed()));
        if !compiled.opaque_relations.is_empty() {
            println!(
                "opaque relations (evaluated per state outside the net): {}",
                compiled.opaque_relations.join(", ")
            );
        }
        Some((std::sync::Arc::new(compiled.program), compiled.opaque))
    } else {
        None
    };
    let interp = match &program {
        Some((program, opaque)) if wants(EngineKind::Interp) => Some(
            match opaque {
                Some(o) => Interpreter::with_opaque(std::sync::Arc::clone(program), std::sync::Arc::clone(o)),
                None => Interpreter::new(std::sync::Arc::clone(program)),
            }
            .map_err(|e| Failure::input(format!("{}: {e}", game.display())))?,
        ),
        _ => None,
    };
    let native = match &program {
        Some((program, opaque)) if wants(EngineKind::Native) => {
            let clock = Instant::now();
            let engine = lower::engine_with(
                std::sync::Arc::clone(program),
                opaque.clone(),
                &lower::Options::default(),
            )
            .map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
            timings.push(("lower", clock.elapsed()));
            if let Some(reason) = engine.fallback_reason() {
                println!("native code unavailable, running the interpreter instead: {reason}");
            }
            Some(engine)
        }
        _ => None,
    };
    let mut engines: Vec<Box<dyn Cursor + '_>> = Vec::new();
    if let Some(r) = &reference {
        engines.push(compare::cursor(r));
    }
    if let Some(i) = &interp {
        engines.push(compare::cursor(i));
    }
    if let Some(n) = &native {
        engines.push(compare::cursor(n));
    }

    println!(
        "{}: {} roles ({}), engine {}",
        game.display(),
        engines[0].roles().len(),
        engines[0].roles().join(", "),
        engines
            .iter()
            .map(|e| e.engine_name())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let clock = Instant::now();
    let report = match &trace {
        Some(trace) => {
            println!(
                "replaying {} playouts of {}",
                trace.playouts.len(),
                trace.source.display()
            );
            // Each engine replays the trace on its own; the reports add up.
            let mut total = Report::default();
            let engines_len = engines.len();
            for engine in engines.iter_mut() {
                let report = compare::replay_trace_on(engine.as_mut(), trace);
                if engines_len > 1 {
                    println!(
                        "{}: {} mismatches in {} states",
                        engine.engine_name(),
                        report.mismatches,
                        report.states
                    );
                }
                total.playouts = report.playouts;
                total.states = total.states.max(report.states);
                total.mismatches += report.mismatches;
                if total.first.is_none() {
                    total.first = report.first;
                }
            }
            total
        }
        None => {
            println!(
                "playing {} random playouts from seed {} (at most {} steps each)",
                args.playouts, args.seed, args.max_steps
            );
            compare::lockstep(&mut engines, args.playouts, args.seed, args.max_steps).map_err(|e| {
                Failure {
                    message: e.to_string(),
                    status: 1,
                }
            })?
        }
    };
    timings.push((
        if trace.is_some() { "replay" } else { "playouts" },
        clock.elapsed(),
    ));

    println!("{report}");
    let times: Vec<String> = timings
        .iter()
        .map(|(what, d)| format!("{what} {}", millis(*d)))
        .collect();
    println!("time: {}", times.join(", "));
    Ok(report)
}

fn compile_game(args: &CompileArgs) -> Result<(), Failure> {
    let game = &args.game;
    let clock = Instant::now();
    let desc = gdl::load(game).map_err(|e| Failure::input(e.to_string()))?;
    let parse_time = clock.elapsed();
    let mut options = args.limits.options();
    options.optimize = !args.no_optimize;
    if args.object.is_some() && args.limits.recursion.is_none() {
        // The object's harness calls each function once; it cannot run a loop.
        options.net.recursion = net::Recursion::Unroll;
        eprintln!("note: recursion unrolled for --object");
    }
    let compiled =
        compile::compile(&desc, &options).map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
    let c = &compiled;
    println!(
        "{}: {} roles ({})",
        game.display(),
        c.net.roles.len(),
        c.net.roles.join(", ")
    );
    println!("ground: {} atoms, {} rules", c.ground_atoms, c.ground_rules);
    println!("net as built: {}", c.unoptimized);
    for p in &c.passes {
        println!(
            "  round {} {:<16} {:>9} components, {:>8} gates  ({})",
            p.round,
            p.pass.to_string(),
            p.stats.components(),
            p.stats.gates(),
            millis(p.time)
        );
    }
    let s = net::NetStats::of(&c.net);
    println!("net: {s}");
    if !c.opaque_relations.is_empty() {
        println!(
            "opaque: {} ({} atoms, evaluated per state outside the net; {} demand gates)",
            c.opaque_relations.join(", "),
            c.program.num_opaque(),
            c.program.opaque.demand_gates.len()
        );
    }
    println!(
        "propositions: {} base, {} input, {} legal, {} goal, 1 terminal, {} view; {} constant facts",
        s.bases, s.inputs, s.legals, s.goals, s.views, s.constant_facts
    );
    println!(
        "gates: {} and, {} or, {} not; {} edges, fan-in max {} mean {:.2}; depth {}",
        s.ands,
        s.ors,
        s.nots,
        s.edges,
        s.max_fan_in,
        s.edges as f64 / (s.ands + s.ors).max(1) as f64,
        s.depth
    );
    let p = &c.program;
    println!(
        "program: {} gates, {} operands; entry gates: legal {}, terminal {}, goals {}, next {}, view {}",
        p.gates.len(),
        p.operands.len(),
        p.entry_gates[0].len(),
        p.entry_gates[1].len(),
        p.entry_gates[2].len(),
        p.entry_gates[3].len(),
        p.entry_gates[4].len()
    );
    if !p.loops.loops.is_empty() {
        println!(
            "loops: {}, {} feedback slots, {} body gates (largest {})",
            p.loops.loops.len(),
            p.loops.slots,
            p.loops.loops.iter().map(|l| l.body.len()).sum::<usize>(),
            p.loops.loops.iter().map(|l| l.body.len()).max().unwrap_or(0)
        );
    }
    // The program moves into its `Arc` rather than being copied (chess: half a million gates
    // and 3.8 million operands).
    let compile::Compiled {
        program,
        net: final_net,
        timings: t,
        opaque,
        ..
    } = compiled;
    let program = std::sync::Arc::new(program);
    let mut native = None;
    let lower_time = if args.no_native {
        Duration::ZERO
    } else {
        let clock = Instant::now();
        let options = lower::Options {
            backend: match args.backend {
                BackendArg::Auto => lower::Backend::Auto,
                BackendArg::Cranelift => lower::Backend::Cranelift,
                BackendArg::X64 => lower::Backend::X64,
            },
            ..lower::Options::default()
        };
        match lower::lower_with(std::sync::Arc::clone(&program), opaque, &options) {
            Ok(l) => {
                let s = &l.stats;
                println!(
                    "native: {} functions, {} gates lowered, {:.1} KiB of code ({:.1} bytes per gate), {} lanes, {} code generator",
                    s.functions,
                    s.gates,
                    s.code_bytes as f64 / 1024.0,
                    s.code_bytes as f64 / s.gates.max(1) as f64,
                    match (s.x128, s.x64_from_x128) {
                        (true, false) => "64 and 128",
                        (true, true) => "128 (64-lane calls run it on widened arrays)",
                        (false, _) => "64",
                    },
                    match (s.backend, s.regalloc) {
                        (lower::Backend::Cranelift, lower::Regalloc::SinglePass) => {
                            "Cranelift (single-pass register allocator)"
                        }
                        (lower::Backend::Cranelift, _) => "Cranelift",
                        _ => "direct x86-64",
                    }
                );
                let parts: Vec<String> = s
                    .parts
                    .iter()
                    .map(|part| {
                        let names: Vec<String> =
                            part.iter().map(|e| format!("{e:?}").to_lowercase()).collect();
                        names.join("+")
                    })
                    .collect();
                println!("native: entries sharing chunks: {}", parts.join(", "));
                native = Some(l.native);
            }
            Err(e) => println!("native: not lowered: {e}"),
        }
        clock.elapsed()
    };
    println!(
        "time: parse {}, ground {}, build {}, optimize {}, order {}, lower {}, total {}",
        millis(parse_time),
        millis(t.ground),
        millis(t.build),
        millis(t.optimize),
        millis(t.order),
        millis(lower_time),
        millis(parse_time + t.total() + lower_time)
    );
    if let Some(kib) = peak_memory_kib() {
        println!("peak memory: {:.1} MiB", kib as f64 / 1024.0);
    }
    if let Some(path) = &args.object {
        write_object(&program, &args.target, path)?;
    }
    if args.stats {
        println!(
            "phases: parse {}, ground {}, net {}, optimize {}, order {}, lower(native) {}, total {}",
            millis(parse_time),
            millis(t.ground),
            millis(t.build),
            millis(t.optimize),
            millis(t.order),
            millis(lower_time),
            millis(parse_time + t.total() + lower_time)
        );
        if program.num_opaque() > 0 {
            println!("throughput: not measured for a program with opaque atoms");
        } else {
            print_throughput(&program, native.as_ref(), args)?;
        }
    }
    if let Some(path) = &args.dot {
        let dot = net::to_dot(&final_net).ok_or_else(|| {
            Failure::input(format!(
                "the net has {} nodes, more than the {} that --dot draws",
                final_net.nodes.len(),
                net::DOT_MAX_NODES
            ))
        })?;
        std::fs::write(path, dot)
            .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))?;
        println!("wrote {}", path.display());
    }
    // The process ends when this command returns, and the operating system takes its memory
    // back at once: freeing the net, the program, the native code and the description one
    // allocation at a time first would only add to the wall time (chess: half a million
    // nodes and gates, 3.8 million operands).
    std::mem::forget(final_net);
    std::mem::forget(native);
    std::mem::forget(program);
    std::mem::forget(desc);
    Ok(())
}

fn analyze_game(args: &AnalyzeArgs) -> Result<(), Failure> {
    let game = &args.game;
    let desc = gdl::load(game).map_err(|e| Failure::input(e.to_string()))?;
    let mut options = args.limits.options();
    // The analysis reads the net as an acyclic function of the state and the moves.
    options.net.recursion = net::Recursion::Unroll;
    let clock = Instant::now();
    let compiled =
        compile::compile(&desc, &options).map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
    let compile_time = clock.elapsed();
    let (net, analysis, fixed) = match &args.state {
        None => {
            let analysis = analysis::analyze(&compiled.net);
            (compiled.net, analysis, None)
        }
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))?;
            let state = analysis::parse_state(&compiled.net, &text)
                .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
            let c = analysis::analyze_from(&compiled.net, &state, options.max_rounds);
            (c.net, c.analysis, Some(c.fixed))
        }
    };
    let report =
        analysis::report::Report::new(&game.display().to_string(), &net, &analysis, fixed.as_deref());
    if args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::input(format!("cannot write JSON: {e}")))?;
        println!("{json}");
    } else {
        print!("{}", report.text());
        println!(
            "time: compile {}, analysis {}",
            millis(compile_time),
            millis(analysis.time)
        );
    }
    Ok(())
}

/// Measures and prints the state evaluations per second of each engine on the entries
/// `--stats-entry` names, about `--stats-seconds` each, in [`STATS_ROUNDS`] rounds in which the
/// engines take turns; each engine's fastest round is printed.
fn print_throughput(
    program: &std::sync::Arc<propjet_runtime::Program>,
    native: Option<&Native>,
    args: &CompileArgs,
) -> Result<(), Failure> {
    if !(args.stats_seconds.is_finite() && args.stats_seconds >= 0.0) {
        return Err(Failure::input(format!(
            "--stats-seconds must be a number of seconds, not {}",
            args.stats_seconds
        )));
    }
    let budget = Duration::from_secs_f64(args.stats_seconds);
    let interp = Interpreter::new(std::sync::Arc::clone(program))
        .map_err(|e| Failure::input(format!("internal error (a bug): {e}")))?;
    let window = budget / STATS_ROUNDS;
    let widths: Vec<Width> = Width::ALL
        .into_iter()
        .filter(|&w| native.is_some_and(|n| n.has_width(w)))
        .collect();
    for (name, entries) in args.stats_entry.measured() {
        // The gates each state goes through: an entry runs all of its own, shared or not.
        let gates: usize = entries.iter().map(|&e| program.gates_of(e).len()).sum();
        let mut base: Option<measure::Throughput> = None;
        let mut natives: Vec<Option<measure::Throughput>> = vec![None; widths.len()];
        for _ in 0..STATS_ROUNDS {
            keep_fastest(&mut base, measure::interpreter(&interp, &entries, window, 1));
            if let Some(native) = native {
                for (best, &width) in natives.iter_mut().zip(&widths) {
                    let t = measure::native(native, &entries, width, window, 1)
                        .map_err(|e| Failure::input(format!("internal error (a bug): {e}")))?;
                    keep_fastest(best, t);
                }
            }
        }
        let Some(base) = base else { continue };
        let base_rate = base.states_per_second();
        let line = |t: &measure::Throughput| {
            let rate = t.states_per_second();
            let ratio = if t.engine == "interp" {
                String::new()
            } else {
                format!(" ({:.1}x interp)", rate / base_rate.max(1e-9))
            };
            println!(
                "states/s {name} ({gates} gates): {} {} lanes {}{ratio}",
                t.engine,
                t.lanes,
                si(rate)
            );
        };
        line(&base);
        for t in natives.iter().flatten() {
            line(t);
        }
    }
    Ok(())
}

/// The rounds of `--stats`' throughput figures. The machines this runs on are shared: a
/// neighbour's burst slows whichever engine is measured at the time, so the engines take turns
/// and each keeps its fastest round (the one least slowed), which makes their ratio steadier
/// than one long window each (speedChess's next entry at 128 lanes: 7.0x and 10.3x the
/// interpreter in two runs a minute apart with one window).
const STATS_ROUNDS: u32 = 5;

/// Keeps in `best` the faster of it and `t`.
fn keep_fastest(best: &mut Option<measure::Throughput>, t: measure::Throughput) {
    if best
        .as_ref()
        .is_none_or(|b| t.states_per_second() > b.states_per_second())
    {
        *best = Some(t);
    }
}

/// Lowers `program` for `target` and writes the object file to `path`.
fn write_object(program: &propjet_runtime::Program, target: &str, path: &Path) -> Result<(), Failure> {
    let triple = target_lexicon::Triple::from_str(target)
        .map_err(|e| Failure::input(format!("--target {target}: not a target triple: {e}")))?;
    let object = lower::object::emit(program, &triple, &lower::Options::default())
        .map_err(|e| Failure::input(format!("--target {target}: {e}")))?;
    std::fs::write(path, &object.bytes)
        .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))?;
    let s = &object.stats;
    println!(
        "object: {}, {} functions, {:.1} KiB of {} code ({:.1} bytes per gate), {} lanes, {}",
        path.display(),
        s.functions,
        s.code_bytes as f64 / 1024.0,
        object.target,
        s.code_bytes as f64 / s.gates.max(1) as f64,
        if s.x128 { "64 and 128" } else { "64" },
        millis(s.time)
    );
    Ok(())
}

/// A rate with an SI prefix: `12.3 M`.
fn si(x: f64) -> String {
    let (value, prefix) = if x >= 1e9 {
        (x / 1e9, " G")
    } else if x >= 1e6 {
        (x / 1e6, " M")
    } else if x >= 1e3 {
        (x / 1e3, " k")
    } else {
        (x, " ")
    };
    format!("{value:.3}{prefix}")
}

/// The process's peak resident memory, where the system reports it (Linux).
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}
