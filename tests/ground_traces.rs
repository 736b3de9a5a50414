//! The grounder, through the naive ground evaluator, replays every trace of the corpus
//! (../shared/traces), written by an independent prover, with zero mismatches: the differential
//! test of the grounder.
//!
//! All games run, on two threads; a game that fails (a mismatch, a description the front end
//! rejects, a grounding error, an evaluator that refuses the program or a panic) is collected
//! with its reason, and the test fails at the end listing every failure, so one broken game
//! never hides another.
//!
//! While working on one game, `PROPJET_TRACES=name` replays only the traces whose name contains
//! `name`; without it (as in CI) every trace runs.

use propjet::compare::{self, Report};
use propjet::gdl;
use propjet::ground::{self, GroundError, GroundLimits, GroundMachine};
use propjet::trace;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shared corpus, or `None` (after a note) when it is absent outside CI. In CI its absence
/// is a failure: the test would otherwise pass without checking anything.
fn shared_dir() -> Option<PathBuf> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"));
    if dir.join("traces").is_dir() && dir.join("games").is_dir() {
        return Some(dir.to_path_buf());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the corpus {} (games/ and traces/) is missing",
        dir.display()
    );
    eprintln!(
        "note: {} is missing; the trace replay test checks nothing",
        dir.display()
    );
    None
}

/// Games where the ground evaluator is known to disagree with its trace, with the first
/// mismatch it gives (step and what differs). Each entry is checked: the game must still fail
/// exactly so, and a game that starts to agree fails the test until its entry is removed. An
/// entry is a FIXME with the reason beside it; today there is none.
const KNOWN_DISAGREEMENTS: &[(&str, u32, &str)] = &[];

/// Games the grounder cannot ground (see `tests/ground_corpus.rs` and `doc/grounding.md`), whose
/// traces therefore cannot be replayed, with the reason. Each must still stop with a `Limit`
/// error (given [`UNGROUNDABLE_TIME`] rather than the default two minutes, to keep the test
/// fast); a game that starts to ground fails the test until its entry is removed.
const UNGROUNDABLE: &[(&str, &str)] = &[
    (
        "chess",
        "the check test after every move asks for hundreds of thousands of attack tests",
    ),
    ("dresden_chess", "the same check test as chess"),
    (
        "comp2006_argentina",
        "the same check test in an obfuscated chess variant",
    ),
];

/// The time limit for the games of [`UNGROUNDABLE`].
const UNGROUNDABLE_TIME: Duration = Duration::from_secs(15);

/// One game's result: its name, how long it took, and its report (`None` for a game of
/// [`UNGROUNDABLE`] that failed to ground as expected) or why it could not run.
struct Outcome {
    game: String,
    time: Duration,
    result: Result<Option<Report>, String>,
}

/// Parses and grounds the game, builds the ground evaluator and replays the trace.
fn replay_game(games: &Path, trace_path: &Path, game: &str) -> Result<Option<Report>, String> {
    let kif = games.join(format!("{game}.kif"));
    let text = std::fs::read_to_string(&kif).map_err(|e| format!("cannot read {}: {e}", kif.display()))?;
    let desc = gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))?;
    let ungroundable = UNGROUNDABLE.iter().any(|(name, _)| *name == game);
    let mut limits = GroundLimits::default();
    if ungroundable {
        limits.max_time = UNGROUNDABLE_TIME;
    }
    let grounded = match (ground::ground(&desc, &limits), ungroundable) {
        (Ok(g), false) => g,
        (Err(GroundError::Limit { .. }), true) => return Ok(None),
        (Ok(_), true) => return Err("the game grounds now; remove it from UNGROUNDABLE".to_string()),
        (Err(e), _) => return Err(format!("the grounder refuses the game: {e}")),
    };
    let machine =
        GroundMachine::new(grounded).map_err(|e| format!("the ground evaluator refuses the program: {e}"))?;
    let trace = trace::read_trace(trace_path).map_err(|e| e.to_string())?;
    if trace.playouts.iter().any(|p| p.header.game != game) {
        return Err(format!("{} holds playouts of another game", trace_path.display()));
    }
    Ok(Some(compare::replay_trace(&machine, &trace)))
}

#[test]
fn ground_program_replays_every_corpus_trace_without_a_mismatch() {
    let Some(shared) = shared_dir() else { return };
    let games = shared.join("games");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(shared.join("traces"))
        .expect("the traces directory is readable")
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    if let Ok(only) = std::env::var("PROPJET_TRACES") {
        traces.retain(|p| p.file_stem().is_some_and(|n| n.to_string_lossy().contains(&only)));
        let _ = writeln!(
            std::io::stderr(),
            "PROPJET_TRACES={only}: {} traces",
            traces.len()
        );
    }
    traces.sort();
    assert!(
        !traces.is_empty(),
        "no .jsonl trace in {}",
        shared.join("traces").display()
    );

    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = traces.get(i) else { break };
                let game = path
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                let clock = Instant::now();
                // A panic in one game is turned into that game's failure, so that the games
                // after it still run and the panic message is reported with the others.
                let result = panic::catch_unwind(AssertUnwindSafe(|| replay_game(&games, path, &game)))
                    .unwrap_or_else(|payload| Err(format!("panicked: {}", panic_text(payload.as_ref()))));
                let outcome = Outcome {
                    game,
                    time: clock.elapsed(),
                    result,
                };
                outcomes
                    .lock()
                    .expect("no thread panics while holding the lock")
                    .push(outcome);
            });
        }
    });
    let mut outcomes = outcomes
        .into_inner()
        .expect("no thread panicked while holding the lock");
    assert_eq!(outcomes.len(), traces.len(), "every trace was replayed");

    // The timings go straight to the process's stderr, which the test harness does not
    // capture, so that CI logs show where the time goes even when the test passes.
    outcomes.sort_by_key(|o| std::cmp::Reverse(o.time));
    let states: u64 = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok().and_then(Option::as_ref))
        .map(|r| r.states)
        .sum();
    let total: Duration = outcomes.iter().map(|o| o.time).sum();
    let mut log = format!(
        "ground trace replay: {} traces, {states} states compared, {:.1} s of replay; slowest games:\n",
        outcomes.len(),
        total.as_secs_f64()
    );
    for o in outcomes.iter().take(10) {
        log += &format!("  {:>9.1} ms  {}\n", o.time.as_secs_f64() * 1e3, o.game);
    }
    let _ = std::io::stderr().write_all(log.as_bytes());

    outcomes.sort_by(|a, b| a.game.cmp(&b.game));
    let failures: Vec<String> = outcomes.iter().filter_map(judge).collect();
    assert!(
        failures.is_empty(),
        "{} of {} games fail:\n\n{}",
        failures.len(),
        outcomes.len(),
        failures.join("\n")
    );
}

/// Why a game's outcome fails the test, or `None` when it passes.
fn judge(o: &Outcome) -> Option<String> {
    let known = KNOWN_DISAGREEMENTS.iter().find(|(game, _, _)| *game == o.game);
    let result = match &o.result {
        Ok(None) => {
            let _ = writeln!(std::io::stderr(), "not groundable (as expected): {}", o.game);
            return None;
        }
        Ok(Some(report)) => Ok(report),
        Err(e) => Err(e),
    };
    match (result, known) {
        (Err(reason), _) => Some(format!("{}: {reason}", o.game)),
        (Ok(report), None) if report.is_clean() && report.states > 0 => None,
        (Ok(report), None) if report.is_clean() => Some(format!("{}: no state was compared", o.game)),
        (Ok(report), None) => Some(format!("{}: {report}", o.game)),
        (Ok(report), Some((_, step, aspect))) => match &report.first {
            Some(m) if m.step == *step && m.aspect.to_string() == *aspect => {
                let _ = writeln!(std::io::stderr(), "known disagreement (FIXME): {}: {m}", o.game);
                None
            }
            Some(_) => Some(format!(
                "{}: disagrees differently from its known disagreement (step {step}: {aspect}): {report}",
                o.game
            )),
            None => Some(format!(
                "{}: now agrees with its trace; remove it from KNOWN_DISAGREEMENTS",
                o.game
            )),
        },
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}
