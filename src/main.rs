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
use propjet::{gdl, trace};
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
    /// Which engine to check.
    #[arg(long, value_enum, default_value_t = EngineKind::Reference)]
    engine: EngineKind,
}

/// The engines the tool can run. Later engines (the net interpreter, native code, and all of
/// them compared with each other) join this list.
#[derive(Copy, Clone, PartialEq, Eq, Debug, ValueEnum)]
enum EngineKind {
    /// The GDL-level reference evaluator.
    Reference,
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
    let machine = match args.engine {
        EngineKind::Reference => Reference::new(&desc).map_err(|e| {
            Failure::input(format!(
                "{}: the reference evaluator cannot run this game: {e}",
                game.display()
            ))
        })?,
    };
    let mut engines: Vec<Box<dyn Cursor + '_>> = vec![compare::cursor(&machine)];
    timings.push(("setup", clock.elapsed()));

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
            compare::replay_trace_on(engines[0].as_mut(), trace)
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

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}
