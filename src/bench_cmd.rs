//! `propjet bench` and `propjet perf-test`: random rollouts per second on every engine.

use crate::{millis, EngineKind, Failure};
use propjet::reference::Reference;
use propjet::{compile, gdl, lower};
use propjet_runtime::{
    lane_rollouts, machine_rollouts, GoalRule, InputOrder, Interpreter, LaneEngine, Machine, Native, Phases,
    Plan, Program, RolloutError, RolloutSource, Stall, Totals, Width,
};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest rollout the benchmarks play; a longer one is reported as an error.
const MAX_DEPTH: u32 = 100_000;

/// The goal rule of the benchmarks: a game whose terminal states give a role several goal
/// values (pentago) or none is still timed; the highest value counts, or zero.
const GOALS: GoalRule = GoalRule::HighestOrZero;

/// What the benchmarks do at a dead end (a non-terminal state where a role has no legal move,
/// which some corpus games such as 4pffa reach): the game cannot go on, so the rollout ends
/// there and counts, with the goals of that state (0 for a role without one), and is reported
/// as stalled.
const STALL: Stall = Stall::End;

/// Programs up to this many gates count as small: `bench` times the reference on them without
/// being asked.
const SMALL_GATES: usize = 2_000;

/// How many seeded rollouts every engine replays after timing, at most, to check that all
/// engines agree on their totals.
const CHECK_ROLLOUTS: u64 = 256;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// The game description (GDL in KIF syntax).
    game: PathBuf,
    /// How long each engine plays, in seconds.
    #[arg(long, default_value_t = 3.0, value_name = "S")]
    seconds: f64,
    /// Which engines to time; by default the interpreter and native code, and the reference on
    /// small games.
    #[arg(long, value_enum)]
    engine: Option<EngineKind>,
    /// Threads per engine, each with its own states over the shared compiled code.
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: usize,
    /// The seed of the rollouts (rollout i draws from a generator derived from seed and i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Measures where the lane drivers spend their time (terminal, goals, legal, move choice,
    /// next) and prints it per engine; costs a little speed.
    #[arg(long)]
    profile: bool,
}

#[derive(clap::Args)]
pub struct PerfTestArgs {
    /// The game description (GDL in KIF syntax).
    game: PathBuf,
    /// The file the results are written to.
    outfile: PathBuf,
    /// How long to play rollouts, in seconds. Read as text, so that any value, a negative one
    /// included, gets an `errorMessage` line rather than a usage error.
    #[arg(allow_hyphen_values = true)]
    seconds: String,
}

/// A game set up for the benchmarks, with every engine that could be had.
struct Setup {
    reference: Option<Reference>,
    /// The compiled engines, or why the game did not compile; then only the reference runs.
    compiled: Result<Engines, String>,
    /// Phase names and times of the compilation, in order.
    timings: Vec<(&'static str, Duration)>,
}

/// The engines of a compiled game.
struct Engines {
    program: Arc<Program>,
    interp: Interpreter,
    native: Result<Native, String>,
}

fn setup(game: &Path, want_reference: bool) -> Result<Setup, Failure> {
    let mut timings = Vec::new();
    let clock = Instant::now();
    let desc = gdl::load(game).map_err(|e| Failure::input(e.to_string()))?;
    timings.push(("parse", clock.elapsed()));
    let clock = Instant::now();
    let compiled = match compile::compile(&desc, &compile::Options::default()) {
        // Lane rollouts of a program with opaque relations would ask the top-down evaluator
        // for up to 64 states a step (about 0.4 s each for dresden_corridor), so such a game
        // is benchmarked on the reference evaluator, like a game that does not compile.
        Ok(c) if !c.opaque_relations.is_empty() => Err(format!(
            "{}: compiled with opaque relations ({}), which the benchmark does not run on lanes",
            game.display(),
            c.opaque_relations.join(", ")
        )),
        Ok(c) => {
            timings.push(("compile", clock.elapsed()));
            let program = Arc::new(c.program);
            let interp = Interpreter::new(Arc::clone(&program))
                .map_err(|e| Failure::input(format!("{}: {e}", game.display())))?;
            let clock = Instant::now();
            let native = lower::lower(Arc::clone(&program), &lower::Options::default())
                .map(|l| l.native)
                .map_err(|e| e.to_string());
            timings.push(("lower", clock.elapsed()));
            Ok(Engines {
                program,
                interp,
                native,
            })
        }
        // A game the compiler cannot handle is still played, by the reference evaluator.
        Err(e) => Err(format!("{}: {e}", game.display())),
    };
    let small = compiled
        .as_ref()
        .is_ok_and(|c| c.program.num_gates() <= SMALL_GATES);
    let reference = if want_reference || small || compiled.is_err() {
        let clock = Instant::now();
        match Reference::new(&desc) {
            Ok(r) => {
                timings.push(("reference setup", clock.elapsed()));
                Some(r)
            }
            Err(e) if want_reference || compiled.is_err() => {
                let why = compiled
                    .as_ref()
                    .err()
                    .map(|c| format!("{c}; "))
                    .unwrap_or_default();
                return Err(Failure::input(format!(
                    "{why}{}: the reference evaluator cannot run this game: {e}",
                    game.display()
                )));
            }
            Err(_) => None,
        }
    } else {
        None
    };
    Ok(Setup {
        reference,
        compiled,
        timings,
    })
}

impl Setup {
    /// The role names, from whichever engine there is.
    fn roles(&self) -> Vec<String> {
        match (&self.compiled, &self.reference) {
            (Ok(c), _) => c.program.layout.roles.clone(),
            (Err(_), Some(r)) => r.roles().to_vec(),
            (Err(_), None) => Vec::new(),
        }
    }
}

/// One engine of the table.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Row {
    Reference,
    Interp,
    InterpLanes,
    NativeSingle,
    NativeLanes(Width),
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::Reference => "reference",
            Row::Interp => "interp",
            Row::InterpLanes => "interp lanes 64",
            Row::NativeSingle => "native single",
            Row::NativeLanes(Width::X64) => "native lanes 64",
            Row::NativeLanes(Width::X128) => "native lanes 128",
        }
    }

    /// The rollouts started before `deadline`: the drivers that play one state at a time
    /// read the clock at every rollout, since one rollout of theirs can take seconds on a
    /// large game; the lane drivers every few rollouts.
    fn source(self, deadline: Instant) -> RolloutSource {
        match self {
            Row::Reference | Row::Interp | Row::NativeSingle => RolloutSource::until_each(deadline),
            _ => RolloutSource::until(deadline),
        }
    }
}

/// What one driver thread returns.
type DriverResult = Result<(Totals, Phases), RolloutError>;

/// What one engine did in one run.
struct Run {
    totals: Totals,
    phases: Phases,
    wall: Duration,
    /// CPU time of the worker threads, where the system reports it.
    cpu: Option<Duration>,
}

impl Setup {
    /// Plays the batch of `source` on `row` with `threads` threads, showing progress under the
    /// name `label` when `progress` is set.
    fn run(
        &self,
        row: Row,
        seed: u64,
        source: &RolloutSource,
        threads: usize,
        profile: bool,
        progress: Option<(&str, Duration)>,
    ) -> Result<Run, String> {
        let compiled = match (row, &self.compiled) {
            (Row::Reference, _) => self.compiled.as_ref().ok(),
            (_, Err(e)) => return Err(format!("the game did not compile: {e}")),
            (_, Ok(c)) => Some(c),
        };
        let packed_start: Vec<_> = compiled.iter().map(|c| c.interp.initial_state()).collect();
        let packed = Plan {
            starts: &packed_start,
            seed,
            max_depth: MAX_DEPTH,
            goals: GOALS,
            stall: STALL,
        };
        let reference = match (row, &self.reference) {
            (Row::Reference, None) => return Err("the reference evaluator cannot run this game".into()),
            (_, reference) => reference.as_ref(),
        };
        let native = match (row, compiled.map(|c| &c.native)) {
            (Row::NativeSingle | Row::NativeLanes(_), Some(Err(e))) => {
                return Err(format!("no native code: {e}"))
            }
            (_, native) => native.and_then(|n| n.as_ref().ok()),
        };
        let one = || -> DriverResult {
            match row {
                Row::Reference => {
                    // Checked above: the row exists only with its engine.
                    let Some(reference) = reference else {
                        return Err(RolloutError::NoStart);
                    };
                    let start = [reference.initial_state()];
                    let plan = Plan {
                        starts: &start,
                        seed,
                        max_depth: MAX_DEPTH,
                        goals: GOALS,
                        stall: STALL,
                    };
                    // With a compiled game, moves are taken in the program's order, so that
                    // the reference plays the same rollouts as the other engines.
                    let totals = match compiled {
                        Some(c) => {
                            machine_rollouts(&InputOrder::new(reference, &c.program.layout), &plan, source)?
                        }
                        None => machine_rollouts(reference, &plan, source)?,
                    };
                    Ok((totals, Phases::default()))
                }
                Row::Interp | Row::InterpLanes => {
                    // Checked above: these rows need a compiled game.
                    let Some(c) = compiled else {
                        return Err(RolloutError::NoStart);
                    };
                    if row == Row::Interp {
                        Ok((machine_rollouts(&c.interp, &packed, source)?, Phases::default()))
                    } else {
                        lane_rollouts(LaneEngine::Interp(&c.interp), &packed, source, 64, profile)
                    }
                }
                Row::NativeSingle | Row::NativeLanes(_) => {
                    // Checked above, as for the reference.
                    let Some(native) = native else {
                        return Err(RolloutError::NoStart);
                    };
                    let (width, lanes) = match row {
                        Row::NativeLanes(w) => (w, w.lanes()),
                        _ => (Width::X64, 1),
                    };
                    lane_rollouts(LaneEngine::Native(native, width), &packed, source, lanes, profile)
                }
            }
        };
        let clock = Instant::now();
        let results: Vec<(DriverResult, Option<Duration>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads.max(1))
                .map(|_| {
                    scope.spawn(|| {
                        let cpu_start = thread_cpu();
                        let result = one();
                        let cpu = thread_cpu()
                            .zip(cpu_start)
                            .map(|(end, start)| end.saturating_sub(start));
                        (result, cpu)
                    })
                })
                .collect();
            if let Some((label, budget)) = progress {
                show_progress(label, budget, source, clock, || {
                    workers.iter().all(|w| w.is_finished())
                });
            }
            workers
                .into_iter()
                .map(|w| match w.join() {
                    Ok(r) => r,
                    Err(payload) => std::panic::resume_unwind(payload),
                })
                .collect()
        });
        let wall = clock.elapsed();
        let mut totals = Totals::new(self.roles().len());
        let mut phases = Phases::default();
        let mut cpu = Some(Duration::ZERO);
        for (result, thread_cpu) in results {
            let (t, p) = result.map_err(|e| e.to_string())?;
            totals.merge(&t);
            phases.merge(&p);
            cpu = cpu.zip(thread_cpu).map(|(a, b)| a + b);
        }
        Ok(Run {
            totals,
            phases,
            wall,
            cpu,
        })
    }
}

/// A carriage-return progress line on stderr while `done` is false, when stderr is a terminal.
fn show_progress(
    label: &str,
    budget: Duration,
    source: &RolloutSource,
    clock: Instant,
    done: impl Fn() -> bool,
) {
    let terminal = std::io::stderr().is_terminal();
    while !done() {
        std::thread::sleep(Duration::from_millis(100));
        if terminal {
            let elapsed = clock.elapsed().min(budget);
            let filled = (20.0 * elapsed.as_secs_f64() / budget.as_secs_f64().max(1e-9)) as usize;
            eprint!(
                "\r{label:<17} [{:<20}] {:>5.1}/{:.1} s, {} rollouts started",
                "#".repeat(filled.min(20)),
                elapsed.as_secs_f64(),
                budget.as_secs_f64(),
                source.claimed()
            );
            let _ = std::io::stderr().flush();
        }
    }
    if terminal {
        eprint!("\r{:80}\r", "");
    }
}

/// The CPU time of the calling thread so far, from Linux's scheduler statistics (nanoseconds,
/// the first field of `/proc/thread-self/schedstat`); `None` elsewhere.
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

pub fn bench(args: &BenchArgs) -> Result<(), Failure> {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return Err(Failure::input(format!(
            "--seconds must be positive, not {}",
            args.seconds
        )));
    }
    if args.threads == 0 {
        return Err(Failure::input("--threads must be at least 1".to_string()));
    }
    let wants = |kind: EngineKind| match args.engine {
        None => kind != EngineKind::Reference,
        Some(e) => e == kind || e == EngineKind::All,
    };
    let setup = setup(&args.game, args.engine.is_some() && wants(EngineKind::Reference))?;
    let roles = setup.roles();
    match &setup.compiled {
        Ok(c) => println!(
            "{}: {} roles ({}); {} bases, {} inputs, {} gates",
            args.game.display(),
            roles.len(),
            roles.join(", "),
            c.program.num_bases(),
            c.program.num_inputs(),
            c.program.num_gates()
        ),
        Err(e) => println!(
            "{}: {} roles ({}); not compiled ({e}), so only the reference evaluator plays",
            args.game.display(),
            roles.len(),
            roles.join(", ")
        ),
    }
    let total: Duration = setup.timings.iter().map(|(_, d)| *d).sum();
    let phases: Vec<String> = setup
        .timings
        .iter()
        .map(|(what, d)| format!("{what} {}", millis(*d)))
        .collect();
    println!("compile time: {} ({})", millis(total), phases.join(", "));
    if let Ok(Engines { native: Err(e), .. }) = &setup.compiled {
        println!("native code unavailable: {e}");
    }

    let mut rows = Vec::new();
    if setup.reference.is_some() && (wants(EngineKind::Reference) || args.engine.is_none()) {
        rows.push(Row::Reference);
    }
    if wants(EngineKind::Interp) && setup.compiled.is_ok() {
        rows.extend([Row::Interp, Row::InterpLanes]);
    }
    if wants(EngineKind::Native) {
        if let Ok(Engines {
            native: Ok(native), ..
        }) = &setup.compiled
        {
            rows.push(Row::NativeSingle);
            rows.extend(
                Width::ALL
                    .into_iter()
                    .filter(|w| native.has_width(*w))
                    .map(Row::NativeLanes),
            );
        }
    }
    if rows.is_empty() {
        return Err(Failure::input("no engine selected can run this game".to_string()));
    }
    println!(
        "{} s per engine, {} thread{}, seed {}",
        args.seconds,
        args.threads,
        if args.threads == 1 { "" } else { "s" },
        args.seed
    );

    let budget = Duration::from_secs_f64(args.seconds);
    let mut runs = Vec::new();
    for &row in &rows {
        let source = row.source(Instant::now() + budget);
        let run = setup
            .run(
                row,
                args.seed,
                &source,
                args.threads,
                args.profile,
                Some((row.name(), budget)),
            )
            .map_err(|e| Failure {
                message: format!("{}: {e}", row.name()),
                status: 1,
            })?;
        runs.push((row, run));
    }

    // Rollouts that ended in a dead end get a column, on games that have them.
    let any_stalled = runs.iter().any(|(_, run)| run.totals.stalled > 0);
    println!(
        "{:<17} {:>10} {:>12} {:>12} {:>13} {:>9} {:>8}  {:<24} {:>9}{}",
        "engine",
        "rollouts",
        "rollouts/s",
        "per CPU-s",
        "states/s",
        "ns/state",
        "depth",
        format!("mean goal ({})", roles.join(", ")),
        "vs interp",
        if any_stalled {
            format!(" {:>10}", "stalled")
        } else {
            String::new()
        }
    );
    let interp_rate = runs
        .iter()
        .find(|(r, _)| *r == Row::Interp)
        .map(|(_, run)| rate(run.totals.rollouts, run.wall));
    for (row, run) in &runs {
        let t = &run.totals;
        let cpu = run.cpu.unwrap_or(run.wall * args.threads as u32);
        let n = t.rollouts.max(1) as f64;
        let goals: Vec<String> = t.goals.iter().map(|g| format!("{:.2}", *g as f64 / n)).collect();
        let speedup = match interp_rate {
            Some(base) if base > 0.0 => format!("{:.1}x", rate(t.rollouts, run.wall) / base),
            _ => "-".to_string(),
        };
        println!(
            "{:<17} {:>10} {:>12} {:>12} {:>13} {:>9.1} {:>8.2}  {:<24} {:>9}{}",
            row.name(),
            t.rollouts,
            group(rate(t.rollouts, run.wall)),
            group(rate(t.rollouts, cpu)),
            group(rate(t.state_changes, run.wall)),
            cpu.as_secs_f64() * 1e9 / t.state_changes.max(1) as f64,
            t.state_changes as f64 / n,
            goals.join(", "),
            speedup,
            if any_stalled {
                format!(" {:>10}", t.stalled)
            } else {
                String::new()
            }
        );
    }
    if any_stalled {
        println!(
            "stalled: rollouts that reached a non-terminal state where a role has no legal move; \
             they end there, counted, with that state's goals (0 for a role without one)"
        );
    }
    if args.profile {
        println!("where the lane drivers' time goes (share of the measured phases):");
        for (row, run) in &runs {
            let ph = &run.phases;
            let all = ph.total().as_secs_f64().max(1e-12);
            if ph.steps == 0 || all <= 1e-12 {
                continue;
            }
            let share = |d: Duration| format!("{:.0}%", 100.0 * d.as_secs_f64() / all);
            println!(
                "  {:<17} {} steps, {:.0} ns per step: terminal {}, goals+restart {}, legal {}, choose {}, next {}",
                row.name(),
                ph.steps,
                all * 1e9 / ph.steps as f64,
                share(ph.terminal),
                share(ph.goals),
                share(ph.legal),
                share(ph.choose),
                share(ph.next)
            );
        }
    }

    // The same seeded rollouts on every engine must give the same totals. The count is what
    // the slowest engine did in its time, at most CHECK_ROLLOUTS, so the check costs about as
    // long again as the slowest run at worst.
    let count = runs
        .iter()
        .map(|(_, run)| run.totals.rollouts)
        .min()
        .unwrap_or(0)
        .clamp(1, CHECK_ROLLOUTS);
    let mut first: Option<(Row, Totals)> = None;
    for &row in &rows {
        let source = RolloutSource::count(count);
        let run = setup
            .run(row, args.seed, &source, 1, false, None)
            .map_err(|e| Failure {
                message: format!("{}: {e}", row.name()),
                status: 1,
            })?;
        match &first {
            None => first = Some((row, run.totals)),
            Some((first_row, want)) if *want != run.totals => {
                return Err(Failure {
                    message: format!(
                        "check failed: seeded rollouts 0..{count} give {:?} on {} but {:?} on {}",
                        want,
                        first_row.name(),
                        run.totals,
                        row.name()
                    ),
                    status: 1,
                })
            }
            Some(_) => {}
        }
    }
    if let Some((_, t)) = first {
        let stalled = if t.stalled > 0 {
            format!(", {} stalled", t.stalled)
        } else {
            String::new()
        };
        println!(
            "check: seeded rollouts 0..{count} agree on every engine (goal totals {:?}, {} state changes{stalled}, fingerprint {:016x})",
            t.goals, t.state_changes, t.fingerprint
        );
    }
    Ok(())
}

/// Events per second.
fn rate(events: u64, time: Duration) -> f64 {
    events as f64 / time.as_secs_f64().max(1e-12)
}

/// A rate with thousands separators, rounded to a whole number.
fn group(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `propjet perf-test GAME OUTFILE SECONDS`: rollouts from the initial state for SECONDS on one
/// thread with the fastest engine, results written to OUTFILE as `key = value` lines, or an
/// `errorMessage` line on any failure.
pub fn perf_test(args: &PerfTestArgs) -> Result<(), Failure> {
    let result = perf_test_lines(args);
    let text = match &result {
        Ok(lines) => lines.clone(),
        // The protocol wants one line: the message's own line breaks would end it early.
        Err(message) => format!("errorMessage = {}\n", message.replace(['\n', '\r'], " ")),
    };
    std::fs::write(&args.outfile, text)
        .map_err(|e| Failure::input(format!("cannot write {}: {e}", args.outfile.display())))?;
    match result {
        Ok(_) => Ok(()),
        Err(message) => Err(Failure { message, status: 1 }),
    }
}

fn perf_test_lines(args: &PerfTestArgs) -> Result<String, String> {
    let seconds: f64 = args
        .seconds
        .trim()
        .parse()
        .map_err(|_| format!("SECONDS must be a number, not {:?}", args.seconds))?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("SECONDS must be positive, not {seconds}"));
    }
    let setup = setup(&args.game, false).map_err(|f| f.message)?;
    let row = match &setup.compiled {
        Ok(Engines {
            native: Ok(native), ..
        }) if native.has_width(Width::X128) => Row::NativeLanes(Width::X128),
        Ok(Engines { native: Ok(_), .. }) => Row::NativeLanes(Width::X64),
        Ok(Engines { native: Err(_), .. }) => Row::InterpLanes,
        // The fastest engine of a game the compiler cannot handle is the reference evaluator.
        Err(_) => Row::Reference,
    };
    let source = row.source(Instant::now() + Duration::from_secs_f64(seconds));
    let run = setup
        .run(row, 1, &source, 1, false, None)
        .map_err(|e| format!("{}: {e}", row.name()))?;
    // The protocol's file has no place for it, so the count of rollouts that ended in a dead
    // end goes to stderr.
    eprintln!(
        "stalled: {} of {} rollouts ended in a non-terminal state where a role has no legal move",
        run.totals.stalled, run.totals.rollouts
    );
    Ok(format!(
        "version = propjet {} ({})\nmillisecondsTaken = {}\nnumStateChanges = {}\nnumRollouts = {}\n",
        env!("CARGO_PKG_VERSION"),
        row.name(),
        run.wall.as_millis(),
        run.totals.state_changes,
        run.totals.rollouts
    ))
}
