//! What the corpus tests share: finding ../shared, listing its games and traces, and running
//! one job per game on two threads with every failure collected.
//!
//! Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

pub mod differential;
pub mod random_program;

use propjet::compare::Report;
use propjet::compile::Options;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shared corpus directory, or `None` (after a note naming `test`) when it is absent outside
/// CI. In CI its absence is a failure: the test would otherwise pass without checking anything.
pub fn shared_dir(test: &str) -> Option<PathBuf> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"));
    if dir.join("traces").is_dir() && dir.join("games").is_dir() {
        return Some(dir.to_path_buf());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the corpus {} (games/ and traces/) is missing",
        dir.display()
    );
    eprintln!("note: {} is missing; {test} checks nothing", dir.display());
    None
}

/// The files of `sub` (games or traces) in the corpus ending in `.ext`, sorted. With the
/// environment variable `PROPJET_GAMES=text`, only those whose name contains `text`, for
/// working on one game.
pub fn corpus_files(test: &str, sub: &str, ext: &str) -> Option<Vec<PathBuf>> {
    let dir = shared_dir(test)?.join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", dir.display()))
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    if let Ok(only) = std::env::var("PROPJET_GAMES") {
        files.retain(|p| p.file_stem().is_some_and(|n| n.to_string_lossy().contains(&only)));
        eprintln!("PROPJET_GAMES={only}: {} files", files.len());
    }
    files.sort();
    assert!(!files.is_empty(), "no .{ext} file in {}", dir.display());
    Some(files)
}

/// The corpus games (`.kif`).
pub fn corpus_games(test: &str) -> Option<Vec<PathBuf>> {
    corpus_files(test, "games", "kif")
}

/// The corpus traces (`.jsonl`).
pub fn corpus_traces(test: &str) -> Option<Vec<PathBuf>> {
    corpus_files(test, "traces", "jsonl")
}

/// The name of a game or trace file: its stem.
pub fn stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// One job's result: its name, how long it took, and its value or why it failed.
pub struct Outcome<T> {
    pub name: String,
    pub time: Duration,
    pub result: Result<T, String>,
}

/// Runs `job` on every path on two threads. A panic in one job becomes that job's failure, so
/// the jobs after it still run. Prints the slowest jobs to stderr (which the harness does not
/// capture, so CI logs show where the time goes) and returns the outcomes sorted by name.
pub fn run_all<T: Send>(
    what: &str,
    paths: &[PathBuf],
    job: impl Fn(&Path) -> Result<T, String> + Sync,
) -> Vec<Outcome<T>> {
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else { break };
                let clock = Instant::now();
                let result = panic::catch_unwind(AssertUnwindSafe(|| job(path)))
                    .unwrap_or_else(|payload| Err(format!("panicked: {}", panic_text(payload.as_ref()))));
                let outcome = Outcome {
                    name: stem(path),
                    time: clock.elapsed(),
                    result,
                };
                outcomes
                    .lock()
                    .expect("no job panics while holding the lock")
                    .push(outcome);
            });
        }
    });
    let mut outcomes = outcomes
        .into_inner()
        .expect("no job panicked while holding the lock");
    assert_eq!(outcomes.len(), paths.len(), "every job ran");
    outcomes.sort_by_key(|o| std::cmp::Reverse(o.time));
    let total: Duration = outcomes.iter().map(|o| o.time).sum();
    let mut log = format!(
        "{what}: {} jobs, {:.1} s in all; slowest:\n",
        outcomes.len(),
        total.as_secs_f64()
    );
    for o in outcomes.iter().take(8) {
        log += &format!("  {:>9.1} ms  {}\n", o.time.as_secs_f64() * 1e3, o.name);
    }
    let _ = std::io::stderr().write_all(log.as_bytes());
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));
    outcomes
}

/// Fails with every message in `failures`, if any.
pub fn assert_no_failures(failures: &[String], of: usize) {
    assert!(
        failures.is_empty(),
        "{} of {of} games fail:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Corpus games that do not compile today, with a part of the error they must give. Each is a
/// FIXME: the test fails if a listed game starts to compile, so that its entry is removed and
/// the game is checked like the others. None today.
pub const EXPECTED_COMPILE_FAILURES: &[(&str, &str)] = &[];

/// Corpus games that compile only with a relation left opaque (`doc/opaque.md`): their legal
/// rules search paths with lists, which cannot be grounded, so the compiler leaves the search
/// relation to a top-down evaluator that costs up to a second per state. The corpus tests
/// check them like the others, on [`playout_budget`]'s few short playouts.
pub const OPAQUE_GAMES: &[&str] = &["dresden_corridor"];

/// Whether `game` is one of the [`OPAQUE_GAMES`].
pub fn is_opaque(game: &str) -> bool {
    OPAQUE_GAMES.contains(&game)
}

/// How many seeded playouts of how many steps a corpus test compares an engine on.
pub struct Budget {
    pub playouts: usize,
    pub steps: u32,
    /// Whether the playouts are prefixes: reaching `steps` ends one without an error.
    pub prefix: bool,
}

impl Budget {
    /// Compares `engines` in lockstep on this budget's playouts, from `seed`.
    pub fn run(
        &self,
        engines: &mut [Box<dyn propjet::compare::Cursor + '_>],
        seed: u64,
    ) -> Result<Report, String> {
        let run = if self.prefix {
            propjet::compare::lockstep_prefix
        } else {
            propjet::compare::lockstep
        };
        run(engines, self.playouts, seed, self.steps).map_err(|e| e.to_string())
    }
}

/// The playouts a corpus test spends on `game`: what it asks for (whole playouts of at most
/// `steps` steps), except for the [`OPAQUE_GAMES`], which get the first 2 steps of one playout:
/// each of their states costs up to a second per engine that evaluates the opaque relation top
/// down.
pub fn playout_budget(game: &str, playouts: usize, steps: u32) -> Budget {
    if is_opaque(game) {
        Budget {
            playouts: 1,
            steps: steps.min(2),
            prefix: true,
        }
    } else {
        Budget {
            playouts,
            steps,
            prefix: false,
        }
    }
}

/// Corpus games that compile only with the default limits and take a minute or more to do so
/// (FIXME: the grounder must get faster): the chess variants, whose 7-ary check test is asked
/// for every move and king square (argentina is chess under obfuscated names). The corpus
/// tests, with their tighter budget, accept a limit error from them; `tests/large_games.rs`
/// compiles each one in full and checks it against its trace and the reference.
pub const LARGE_GAMES: &[&str] = &["chess", "comp2006_argentina", "dresden_chess"];

/// Whether `game` is one of the `LARGE_GAMES`.
pub fn is_large(game: &str) -> bool {
    LARGE_GAMES.contains(&game)
}

/// Corpus games whose grounding takes longer than the tests' budget on this 2-core machine,
/// or near it, or reaches a size limit first, depending on the machine's load (FIXME: the
/// grounder must get faster). Running into a grounding limit is accepted for them, with a note; when one compiles, it is checked like any other game.
pub const SLOW_GAMES: &[&str] = &[
    "alexChess",
    "blockerParallel",
    "chineseCheckers3",
    "chineseCheckers6",
    "comp2006_farmers",
    "linesOfAction",
    "merrills",
    "racer4",
    "skirmish",
];

/// The compiler options of these tests: the defaults, with a grounding time budget that keeps
/// a game the grounder cannot handle from holding up the suite.
pub fn test_options() -> Options {
    let mut o = Options::default();
    o.ground.max_time = std::time::Duration::from_secs(15);
    o
}

/// The text a compile failure of `game` must contain, if the game is expected not to compile.
pub fn expected_failure(game: &str) -> Option<&'static str> {
    EXPECTED_COMPILE_FAILURES
        .iter()
        .find(|(g, _)| *g == game)
        .map(|(_, why)| *why)
}

/// Judges one game's outcome: a clean report with at least one state, or the expected failure.
pub fn judge(name: &str, result: &Result<Report, String>) -> Option<String> {
    let slow = SLOW_GAMES.contains(&name) || is_large(name);
    match (result, expected_failure(name)) {
        // Engines must agree; a flaw of the game itself (a terminal state with two goals for a
        // role, say), reported alike by both engines, is the game's, not a failure.
        (Ok(r), None) if r.disagreements() == 0 && r.states > 0 => {
            if r.flaws > 0 {
                eprintln!("{name}: {r}");
            }
            None
        }
        (Ok(r), None) if r.disagreements() == 0 => Some(format!("{name}: no state was compared")),
        (Ok(r), None) => Some(format!("{name}: {r}")),
        (Ok(_), Some(_)) => Some(format!(
            "{name}: compiles now; remove it from EXPECTED_COMPILE_FAILURES"
        )),
        (Err(e), Some(why)) if e.contains(why) => {
            eprintln!("expected compile failure (FIXME): {name}: {e}");
            None
        }
        (Err(e), None) if slow && e.contains("grounding limit reached") => {
            eprintln!("slow game out of the grounding budget (FIXME): {name}: {e}");
            None
        }
        (Err(e), _) => Some(format!("{name}: {e}")),
    }
}

/// Whether a game is checked only by the reference comparison, which covers every corpus game:
/// games known not to compile, which elsewhere would only spend the grounding budget again.
pub fn compiles_at_best_slowly(path: &Path) -> bool {
    let name = stem(path);
    expected_failure(&name).is_some() || SLOW_GAMES.contains(&name.as_str()) || is_large(&name)
}
