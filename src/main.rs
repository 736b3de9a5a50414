//! The propjet command-line tool.
//!
//! `propjet check GAME.kif` checks an engine on a game: against a reference trace with
//! `--trace`, otherwise on seeded random playouts where the engine's own consistency is checked
//! (and, once several engines exist, every engine against the first).
//!
//! Exit status: 0 when everything agreed, 1 when the check found a mismatch or a playout never
//! ended, 2 when the input could not be used (a missing file, a description that is not valid
//! GDL, a malformed trace) or the arguments were wrong.

use clap::{Parser, Subcommand, ValueEnum};
use propjet::compare::{self, Cursor, Report, DEFAULT_MAX_STEPS};
use propjet::reference::Reference;
use propjet::{compile, gdl, lower, net, trace};
use propjet_runtime::Interpreter;
use std::path::PathBuf;
use std::process::ExitCode;
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
    #[command(flatten)]
    limits: LimitArgs,
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
    let text = std::fs::read_to_string(game)
        .map_err(|e| Failure::input(format!("cannot read {}: {e}", game.display())))?;
    let desc = gdl::parse(&text).map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
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
        Some(std::sync::Arc::new(compiled.program))
    } else {
        None
    };
    let interp = match &program {
        Some(program) if wants(EngineKind::Interp) => Some(
            Interpreter::new(std::sync::Arc::clone(program))
                .map_err(|e| Failure::input(format!("{}: {e}", game.display())))?,
        ),
        _ => None,
    };
    let native = match &program {
        Some(program) if wants(EngineKind::Native) => {
            let clock = Instant::now();
            let engine = lower::engine(std::sync::Arc::clone(program), &lower::Options::default())
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
    let text = std::fs::read_to_string(game)
        .map_err(|e| Failure::input(format!("cannot read {}: {e}", game.display())))?;
    let desc = gdl::parse(&text).map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
    let parse_time = clock.elapsed();
    let mut options = args.limits.options();
    options.optimize = !args.no_optimize;
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
    let lower_time = if args.no_native {
        Duration::ZERO
    } else {
        let clock = Instant::now();
        match lower::lower(p.clone(), &lower::Options::default()) {
            Ok(l) => {
                let s = &l.stats;
                println!(
                    "native: {} functions, {} gates lowered, {:.1} KiB of code ({:.1} bytes per gate), {} lanes",
                    s.functions,
                    s.gates,
                    s.code_bytes as f64 / 1024.0,
                    s.code_bytes as f64 / s.gates.max(1) as f64,
                    if s.x128 { "64 and 128" } else { "64" }
                );
            }
            Err(e) => println!("native: not lowered: {e}"),
        }
        clock.elapsed()
    };
    let t = &c.timings;
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
    if let Some(path) = &args.dot {
        let dot = net::to_dot(&c.net).ok_or_else(|| {
            Failure::input(format!(
                "the net has {} nodes, more than the {} that --dot draws",
                c.net.nodes.len(),
                net::DOT_MAX_NODES
            ))
        })?;
        std::fs::write(path, dot)
            .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))?;
        println!("wrote {}", path.display());
    }
    Ok(())
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
