//! Every game of the shared corpus (../shared/games) grounds within the default limits into a
//! program that keeps the invariants of `Grounded`, except the games listed in
//! [`EXPECTED_FAILURES`] with the error each must give and why. The edge-case files of
//! `tests/gdl/` that the front end accepts ground too, with their own list of exceptions.
//!
//! All corpus games run, on two threads; every failure is collected and reported at the end.

use propjet::gdl;
use propjet::ground::{self, GroundError, GroundLimits, Grounded};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a game that cannot be grounded must give.
#[derive(Debug, PartialEq)]
enum Expected {
    /// A `Limit` error. Which relation it names depends on what is being grounded when the
    /// time runs out, so only the kind is checked.
    Limit,
    /// An `Unsupported` error at this line.
    Unsupported(u32),
}

/// The corpus games that do not ground, with the error expected and the reason.
const EXPECTED_FAILURES: &[(&str, Expected, &str)] = &[
    (
        "chess",
        Expected::Limit,
        "whether the king is attacked after a move is asked for every move, king square and \
         captured square (hundreds of thousands of calls), each an `or` over every attacker: \
         tens of millions of ground rules",
    ),
    ("dresden_chess", Expected::Limit, "the same check test as chess"),
    (
        "comp2006_argentina",
        Expected::Limit,
        "a chess-like game (obfuscated) with the same check test over attack rays",
    ),
    (
        "dresden_corridor",
        Expected::Unsupported(908),
        "the legal moves run a depth-first search over lists of cells with visited sets; the \
         helper relations are unsafe on their own and are called through relations that are \
         safe, so nothing binds their arguments bottom-up (and the search over every wall \
         layout of the over-approximation would not be finite in practice)",
    ),
];

/// The time limit for the games expected to fail on a limit: the default would stop them too,
/// after two minutes each; a shorter one keeps the test fast.
const FAILURE_TIME: Duration = Duration::from_secs(15);

/// The shared corpus, or `None` (after a note) when it is absent outside CI. In CI its absence
/// is a failure: the test would otherwise pass without checking anything.
fn corpus_games() -> Option<Vec<PathBuf>> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/games"));
    if !dir.is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but the corpus directory {} is missing",
            dir.display()
        );
        eprintln!(
            "note: {} is missing; the corpus grounding test checks nothing",
            dir.display()
        );
        return None;
    }
    let mut games: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the corpus directory is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kif"))
        .collect();
    games.sort();
    Some(games)
}

fn expected_failure(game: &str) -> Option<&'static Expected> {
    EXPECTED_FAILURES
        .iter()
        .find(|(name, _, _)| *name == game)
        .map(|(_, e, _)| e)
}

/// Whether `result` is what `expected` asks for.
fn matches(expected: &Expected, result: &Result<Grounded, GroundError>) -> bool {
    match (expected, result) {
        (Expected::Limit, Err(GroundError::Limit { .. })) => true,
        (Expected::Unsupported(line), Err(GroundError::Unsupported { line: l, .. })) => line == l,
        _ => false,
    }
}

/// Grounds one game; `None` when it passes, otherwise why it fails.
fn check_game(path: &Path) -> Option<String> {
    let game = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let src = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => return Some(format!("{game}: cannot read: {e}")),
    };
    let desc = match gdl::parse(&src) {
        Ok(d) => d,
        Err(e) => return Some(format!("{game}: the front end rejects it: {e}")),
    };
    let expected = expected_failure(&game);
    let mut limits = GroundLimits::default();
    if matches!(expected, Some(Expected::Limit)) {
        limits.max_time = FAILURE_TIME;
    }
    let result = ground::ground(&desc, &limits);
    match (expected, &result) {
        (None, Ok(g)) => match g.check_invariants() {
            Ok(()) if g.rules.is_empty() => Some(format!("{game}: the ground program has no rule")),
            Ok(()) => None,
            Err(e) => Some(format!("{game}: {e}")),
        },
        (None, Err(e)) => Some(format!("{game}: {e}")),
        (Some(expected), _) if matches(expected, &result) => None,
        (Some(expected), Ok(_)) => Some(format!(
            "{game}: grounds now; remove it from EXPECTED_FAILURES (it expected {expected:?})"
        )),
        (Some(expected), Err(e)) => Some(format!("{game}: expected {expected:?}, got: {e}")),
    }
}

#[test]
fn every_corpus_game_grounds_within_the_default_limits() {
    let Some(games) = corpus_games() else { return };
    for (name, _, _) in EXPECTED_FAILURES {
        assert!(
            games.iter().any(|p| p.file_stem().is_some_and(|s| s == *name)),
            "EXPECTED_FAILURES names {name}, which is not in the corpus"
        );
    }
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = games.get(i) else { break };
                let clock = Instant::now();
                let failure = check_game(path);
                let game = path
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                results
                    .lock()
                    .expect("no thread panics while holding the lock")
                    .push((game, clock.elapsed(), failure));
            });
        }
    });
    let mut results = results
        .into_inner()
        .expect("no thread panicked while holding the lock");
    assert_eq!(results.len(), games.len(), "every game was grounded");
    results.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut log = format!("corpus grounding: {} games; slowest:\n", results.len());
    for (game, time, _) in results.iter().take(8) {
        log += &format!("  {:>9.1} ms  {game}\n", time.as_secs_f64() * 1e3);
    }
    let _ = std::io::stderr().write_all(log.as_bytes());
    let mut failures: Vec<String> = results.into_iter().filter_map(|r| r.2).collect();
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} games fail:\n{}",
        failures.len(),
        games.len(),
        failures.join("\n")
    );
}

/// The edge-case files the front end accepts that cannot be grounded, with the error kind.
const GDL_FILE_FAILURES: &[(&str, &str, &str)] = &[(
    "top_down_list_helper.kif",
    "term_depth",
    "the list in the state grows by one element a turn and nothing in the over-approximation \
     stops it (the real game ends after one turn, but the grounder cannot know)",
)];

#[test]
fn every_accepted_edge_case_file_grounds() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gdl"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tests/gdl is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kif"))
        .collect();
    files.sort();
    let mut grounded = 0;
    let mut failures = Vec::new();
    for path in &files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let src = std::fs::read_to_string(path).expect("an edge-case file is UTF-8");
        let Ok(desc) = gdl::parse(&src) else { continue };
        let expected = GDL_FILE_FAILURES.iter().find(|(f, _, _)| *f == name);
        match (ground::ground(&desc, &GroundLimits::default()), expected) {
            (Ok(g), None) => match g.check_invariants() {
                Ok(()) => grounded += 1,
                Err(e) => failures.push(format!("{name}: {e}")),
            },
            (Err(GroundError::Limit { limit, .. }), Some((_, want, _))) if limit == *want => {}
            (Ok(_), Some(_)) => {
                failures.push(format!("{name}: grounds now; remove it from GDL_FILE_FAILURES"))
            }
            (Err(e), _) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(grounded >= 20, "only {grounded} edge-case files were grounded");
}

#[test]
fn tiny_limits_name_the_limit_and_the_growing_relation() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/games/tictactoe.kif"))
        .expect("the shipped tic-tac-toe game is readable");
    let desc = gdl::parse(&src).expect("the shipped game parses");
    let tiny = GroundLimits {
        max_atoms: 10,
        ..GroundLimits::default()
    };
    match ground::ground(&desc, &tiny) {
        Err(GroundError::Limit {
            limit,
            value,
            relation,
        }) => {
            assert_eq!((limit, value), ("max_atoms", 10));
            assert!(
                relation.ends_with(|c: char| c.is_ascii_digit()),
                "{relation} is name/arity"
            );
            assert!(relation.contains('/'), "{relation} is name/arity");
        }
        other => panic!("expected an atom limit, got {other:?}"),
    }
    let tiny = GroundLimits {
        max_literals: 5,
        ..GroundLimits::default()
    };
    assert!(matches!(
        ground::ground(&desc, &tiny),
        Err(GroundError::Limit {
            limit: "max_literals",
            ..
        })
    ));
}
