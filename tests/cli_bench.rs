//! `propjet bench` and `propjet perf-test` run as a user (or the GDL reasoner benchmark) runs
//! them: the table and its check line, the perf-test file format, and the `errorMessage` line
//! on every kind of failure.

#[path = "common/run.rs"]
mod run;

use run::propjet;
use std::path::PathBuf;

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("propjet-cli-bench-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the temp directory is writable");
    dir
}

/// The table row of `engine`: its rollouts and its mean depth.
fn row(stdout: &str, engine: &str) -> Option<(u64, f64)> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(engine) && l[engine.len()..].starts_with("  ") && !l.contains("steps,"))?;
    let fields: Vec<&str> = line[engine.len()..].split_whitespace().collect();
    let rollouts = fields.first()?.parse().ok()?;
    let depth = fields.get(5)?.parse().ok()?;
    Some((rollouts, depth))
}

#[test]
fn bench_prints_compile_time_a_row_per_engine_and_the_check() {
    let (code, out, err) = propjet(&["bench", "games/tictactoe.kif", "--seconds", "0.2"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let compile = out.lines().position(|l| l.starts_with("compile time: "));
    let header = out
        .lines()
        .position(|l| l.starts_with("engine ") && l.contains("rollouts/s"));
    assert!(
        compile.is_some() && header.is_some() && compile < header,
        "the compile time comes first:\n{out}"
    );
    for column in [
        "per CPU-s",
        "states/s",
        "ns/state",
        "depth",
        "mean goal (white, black)",
        "vs interp",
    ] {
        assert!(out.contains(column), "no column {column}:\n{out}");
    }
    // Tic-tac-toe is small, so the reference is timed too without being asked.
    for engine in [
        "reference",
        "interp",
        "interp lanes 64",
        "native single",
        "native lanes 64",
    ] {
        let (rollouts, depth) = row(&out, engine).unwrap_or_else(|| panic!("no row {engine}:\n{out}"));
        assert!(rollouts > 0, "{engine} played nothing:\n{out}");
        // A game of tic-tac-toe lasts 5 to 9 moves.
        assert!(
            (5.0..=9.0).contains(&depth),
            "{engine}: mean depth {depth}:\n{out}"
        );
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("check: seeded rollouts 0..") && l.contains("agree on every engine")),
        "{out}"
    );
}

#[test]
fn bench_runs_only_the_engines_asked_for_on_several_threads() {
    let (code, out, err) = propjet(&[
        "bench",
        "games/connectfour.kif",
        "--seconds",
        "0.2",
        "--engine",
        "native",
        "--threads",
        "2",
        "--profile",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(row(&out, "native lanes 64").is_some(), "{out}");
    assert!(
        row(&out, "interp").is_none() && row(&out, "reference").is_none(),
        "{out}"
    );
    assert!(out.contains("2 threads"), "{out}");
    assert!(out.contains("where the lane drivers' time goes"), "{out}");
}

#[test]
fn bench_refuses_a_bad_game_and_bad_arguments() {
    let dir = scratch("bench-bad");
    let bad = dir.join("bad.kif");
    std::fs::write(&bad, "(role x) (init (").expect("writable");
    let (code, _, err) = propjet(&["bench", bad.to_str().expect("a UTF-8 path"), "--seconds", "0.1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    let (code, _, err) = propjet(&["bench", "games/tictactoe.kif", "--seconds", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--seconds"), "{err}");
    let (code, _, err) = propjet(&["bench", "games/tictactoe.kif", "--threads", "0"]);
    assert_eq!(code, 2, "{err}");
}

/// The `key = value` lines of a perf-test result file.
fn fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (k, v) = l
                .split_once(" = ")
                .unwrap_or_else(|| panic!("not a key = value line: {l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn perf_test_writes_the_four_result_lines() {
    let dir = scratch("perf-ok");
    let out = dir.join("result.txt");
    let (code, stdout, err) = propjet(&[
        "perf-test",
        "games/tictactoe.kif",
        out.to_str().expect("a UTF-8 path"),
        "0.3",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{err}");
    let text = std::fs::read_to_string(&out).expect("the result file is written");
    let f = fields(&text);
    let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["version", "millisecondsTaken", "numStateChanges", "numRollouts"],
        "{text}"
    );
    let number = |key: &str| -> u64 {
        let v = &f.iter().find(|(k, _)| k == key).expect("present").1;
        v.parse()
            .unwrap_or_else(|_| panic!("{key} is not a whole number: {v}"))
    };
    let (ms, states, rollouts) = (
        number("millisecondsTaken"),
        number("numStateChanges"),
        number("numRollouts"),
    );
    // The run lasts its 0.3 s give or take the rollouts under way at the end.
    assert!(ms >= 250, "{text}");
    assert!(rollouts > 0, "{text}");
    // Every game of tic-tac-toe takes 5 to 9 moves.
    assert!((5 * rollouts..=9 * rollouts).contains(&states), "{text}");
    assert!(f[0].1.starts_with("propjet "), "{text}");
}

#[test]
fn perf_test_reports_every_failure_as_an_error_message_line() {
    let dir = scratch("perf-bad");
    let bad = dir.join("bad.kif");
    std::fs::write(&bad, "(role x) (init (").expect("writable");
    // Reads as KIF, but a rule's head variable appears in no positive body literal, which the
    // checks of the front end reject: a failure after reading the file.
    let unsafe_rule = dir.join("unsafe.kif");
    std::fs::write(
        &unsafe_rule,
        "(role x) (<= (legal x ?m) (true (c 1))) (init (c 1)) (<= terminal (true (c 1))) (goal x 100)",
    )
    .expect("writable");
    let missing = dir.join("missing.kif");
    let cases = [
        (bad.to_str().expect("UTF-8"), "1"),
        (unsafe_rule.to_str().expect("UTF-8"), "1"),
        (missing.to_str().expect("UTF-8"), "1"),
        ("games/tictactoe.kif", "soon"),
        ("games/tictactoe.kif", "-1"),
    ];
    for (i, (game, seconds)) in cases.iter().enumerate() {
        let out = dir.join(format!("result{i}.txt"));
        let (code, _, err) = propjet(&["perf-test", game, out.to_str().expect("UTF-8"), seconds]);
        assert_ne!(code, 0, "{game} {seconds}: {err}");
        let text = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{game} {seconds}: no file: {e}"));
        let f = fields(&text);
        assert_eq!(f.len(), 1, "{game} {seconds}: {text}");
        assert_eq!(f[0].0, "errorMessage", "{game} {seconds}: {text}");
        assert!(!f[0].1.trim().is_empty(), "{game} {seconds}: {text}");
    }
}

/// A game the compiler cannot ground (its state list grows every turn in the
/// over-approximation) is still benchmarked, by the reference evaluator, and perf-test plays it
/// on that engine; both say so. The game ends after its one move with goal 100.
#[test]
fn bench_and_perf_test_fall_back_to_the_reference_when_the_game_does_not_compile() {
    let game = "tests/gdl/top_down_list_helper.kif";
    let (code, out, err) = propjet(&["bench", game, "--seconds", "0.2"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("not compiled") && out.contains("term_depth"),
        "{out}"
    );
    let (rollouts, depth) = row(&out, "reference").unwrap_or_else(|| panic!("no reference row:\n{out}"));
    assert!(rollouts > 0, "{out}");
    assert!(
        (depth - 1.0).abs() < 1e-9,
        "every rollout is one move long:\n{out}"
    );
    assert!(
        row(&out, "interp").is_none(),
        "no compiled engine can run:\n{out}"
    );
    assert!(out.contains("check: seeded rollouts"), "{out}");

    let dir = scratch("perf-reference");
    let file = dir.join("result.txt");
    let (code, stdout, err) = propjet(&["perf-test", game, file.to_str().expect("UTF-8"), "0.2"]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{err}");
    let text = std::fs::read_to_string(&file).expect("the result file is written");
    let f = fields(&text);
    let value = |key: &str| f.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    assert!(
        value("version").is_some_and(|v| v.contains("reference")),
        "{text}"
    );
    let rollouts: u64 = value("numRollouts")
        .and_then(|v| v.parse().ok())
        .expect("a count");
    let states: u64 = value("numStateChanges")
        .and_then(|v| v.parse().ok())
        .expect("a count");
    assert!(rollouts > 0 && states == rollouts, "{text}");
}

/// A game whose random playouts reach a dead end (a role without a legal move in a
/// non-terminal state) on some paths: both commands play it, the rollouts ending there.
/// `bench` shows how many stalled per engine, and `perf-test` keeps to the protocol's four lines
/// and says it on stderr.
#[test]
fn bench_and_perf_test_end_rollouts_at_a_dead_end_and_count_them() {
    let game = "tests/gdl/dead_end.kif";
    let (code, out, err) = propjet(&["bench", game, "--seconds", "0.2"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let header = out
        .lines()
        .find(|l| l.starts_with("engine "))
        .unwrap_or_else(|| panic!("no header:\n{out}"));
    assert!(header.trim_end().ends_with("stalled"), "{out}");
    for engine in ["reference", "interp", "native lanes 64"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(engine) && l[engine.len()..].starts_with("  "))
            .unwrap_or_else(|| panic!("no row {engine}:\n{out}"));
        let (rollouts, _) = row(&out, engine).expect("the row reads");
        let stalled: u64 = line
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no stalled count: {line}"));
        // About two games in three are trapped (tests/playouts.rs checks the rules).
        assert!(stalled > 0 && stalled < rollouts, "{engine}: {line}");
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("check: seeded rollouts") && l.contains(" stalled, ")),
        "{out}"
    );

    let dir = scratch("perf-dead-end");
    let file = dir.join("result.txt");
    let (code, stdout, err) = propjet(&["perf-test", game, file.to_str().expect("UTF-8"), "0.3"]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{err}");
    let text = std::fs::read_to_string(&file).expect("the result file is written");
    let f = fields(&text);
    let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["version", "millisecondsTaken", "numStateChanges", "numRollouts"],
        "{text}"
    );
    let number = |key: &str| -> u64 {
        let v = &f.iter().find(|(k, _)| k == key).expect("present").1;
        v.parse().unwrap_or_else(|_| panic!("{key}: {v}"))
    };
    let (states, rollouts) = (number("numStateChanges"), number("numRollouts"));
    // A rollout is one to five moves long.
    assert!(
        rollouts > 0 && (rollouts..=5 * rollouts).contains(&states),
        "{text}"
    );
    let line = err
        .lines()
        .find(|l| l.starts_with("stalled: "))
        .unwrap_or_else(|| panic!("no stalled line on stderr:\n{err}"));
    let counts: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(
        counts.len() == 2 && counts[0] > 0 && counts[0] < rollouts && counts[1] == rollouts,
        "{line} ({text})"
    );
}
