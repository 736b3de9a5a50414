//! Runs the built `propjet` binary as a user would and checks its exit status and messages:
//! on a good game (random playouts and a trace replay), and on inputs it must refuse cleanly.

#[path = "common/run.rs"]
mod run;

use run::propjet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The shared corpus, or `None` (after a note) outside CI when it is missing; in CI its absence
/// fails the test.
fn shared_dir() -> Option<PathBuf> {
    let dir = Path::new(ROOT).join("../shared");
    if dir.join("games").is_dir() && dir.join("traces").is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the corpus {} is missing",
        dir.display()
    );
    eprintln!("note: {} is missing; this test checks nothing", dir.display());
    None
}

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("propjet-cli-{}-{test}", std::process::id()));
    // A leftover from an earlier run with the same process id is stale, never needed.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the temp directory is writable");
    dir
}

/// The number in `N states compared, M mismatches` on the report line.
fn counts(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.contains(" states compared, "))
        .unwrap_or_else(|| panic!("no report line in:\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let states = words[0].parse().expect("a state count");
    let mismatches = words[3].parse().expect("a mismatch count");
    (states, mismatches)
}

/// How many states a trace file describes: one per step line and one per end line.
fn trace_states(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("the trace is readable");
    text.lines()
        .filter(|l| l.contains(r#""type":"step""#) || l.contains(r#""type":"end""#))
        .count() as u64
}

#[test]
fn random_playouts_on_a_shipped_or_corpus_game_agree() {
    // The shipped tic-tac-toe when it exists, else the corpus one.
    let shipped = Path::new(ROOT).join("games/tictactoe.kif");
    let game = if shipped.is_file() {
        shipped
    } else {
        let Some(shared) = shared_dir() else { return };
        shared.join("games/ticTacToe.kif")
    };
    let game = game.to_string_lossy().into_owned();
    let (code, out, err) = propjet(&["check", &game, "--playouts", "20", "--seed", "3"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (states, mismatches) = counts(&out);
    // Tic-tac-toe lasts 5 to 9 moves, so 20 playouts show 120 to 200 states.
    assert!((120..=200).contains(&states), "{states} states in:\n{out}");
    assert_eq!(mismatches, 0);
    assert!(out.contains("time: parse"), "{out}");
    assert!(out.contains("engine reference"), "{out}");

    // The same seed plays the same games.
    let (_, again, _) = propjet(&["check", &game, "--playouts", "20", "--seed", "3"]);
    assert_eq!(counts(&again), counts(&out));
}

#[test]
fn the_corpus_trace_of_tictactoe_replays_without_a_mismatch() {
    let Some(shared) = shared_dir() else { return };
    let game = shared.join("games/ticTacToe.kif");
    let trace = shared.join("traces/ticTacToe.jsonl");
    let (code, out, err) = propjet(&[
        "check",
        &game.to_string_lossy(),
        "--trace",
        &trace.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(counts(&out), (trace_states(&trace), 0));
    assert!(out.contains("replay"), "{out}");
}

#[test]
fn a_missing_game_file_is_a_clear_error() {
    let (code, out, err) = propjet(&["check", "no/such/game.kif"]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("cannot read no/such/game.kif"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_malformed_game_file_shows_line_column_and_source() {
    let dir = scratch("malformed");
    let game = dir.join("broken.kif");
    std::fs::write(
        &game,
        "(role red)\n(init (cell 1 1 b)\n(<= terminal (true (cell 1 1 x)))\n",
    )
    .expect("the temp file is writable");
    let (code, out, err) = propjet(&["check", &game.to_string_lossy()]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("broken.kif: line "), "{err}");
    assert!(err.contains("column"), "{err}");
    assert!(err.contains(" | "), "the source line is shown: {err}");
    assert!(err.contains('^'), "a caret points at the column: {err}");
    assert!(!err.contains("panicked"), "{err}");

    // Text that is not GDL at all, and bytes that are not text.
    std::fs::write(&game, "this is not a game (").expect("the temp file is writable");
    let (code, _, err) = propjet(&["check", &game.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("line 1"), "{err}");
    std::fs::write(&game, [0xff, 0xfe, 0x28]).expect("the temp file is writable");
    let (code, _, err) = propjet(&["check", &game.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trace_with_a_wrong_line_is_reported() {
    let Some(shared) = shared_dir() else { return };
    let game = shared.join("games/ticTacToe.kif").to_string_lossy().into_owned();
    let original =
        std::fs::read_to_string(shared.join("traces/ticTacToe.jsonl")).expect("the trace is readable");
    let lines: Vec<&str> = original.lines().collect();
    let dir = scratch("wrong-trace");

    // Line 3 is the second step of the first playout. Claiming that oplayer may also play noop
    // there is a content error: the trace still reads, and the replay must find exactly that.
    let third: &str = lines[2];
    assert!(third.contains(r#""t":1,"#), "line 3 is step 1: {third}");
    let wrong = third.replacen(r#"],["(mark"#, r#"],["(mark 0 0)","(mark"#, 1);
    assert_ne!(wrong, third, "the edit applies");
    let mut edited = lines.clone();
    edited[2] = &wrong;
    let path = dir.join("wrong-legal.jsonl");
    std::fs::write(&path, edited.join("\n")).expect("the temp file is writable");
    let (code, out, err) = propjet(&["check", &game, "--trace", &path.to_string_lossy()]);
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    let (states, mismatches) = counts(&out);
    assert_eq!(mismatches, 1, "{out}");
    // The first playout stops at its second state; every other playout is replayed in full.
    let playout0_states = lines
        .iter()
        .take_while(|l| !l.contains(r#""type":"end""#))
        .count() as u64;
    assert_eq!(states, trace_states(&path) - playout0_states + 2, "{out}");
    assert!(out.contains("step 1: the legal moves of oplayer differ"), "{out}");
    assert!(out.contains("only trace: (mark 0 0)"), "{out}");

    // A line that is not JSON is a malformed trace, reported with file and line.
    let mut edited = lines.clone();
    edited[4] = "{\"type\":\"step\",";
    let path = dir.join("broken.jsonl");
    std::fs::write(&path, edited.join("\n")).expect("the temp file is writable");
    let (code, out, err) = propjet(&["check", &game, "--trace", &path.to_string_lossy()]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("broken.jsonl:5: not a trace line"), "{err}");

    let (code, _, err) = propjet(&["check", &game, "--trace", "no/such/trace.jsonl"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read trace no/such/trace.jsonl"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_are_refused_with_usage() {
    let (code, _, err) = propjet(&["check", "x.kif", "--engine", "quantum"]);
    assert_eq!(code, 2);
    assert!(err.contains("reference"), "the valid engines are listed: {err}");
    let (code, _, err) = propjet(&["check", "x.kif", "--trace", "t.jsonl", "--playouts", "3"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, _, _) = propjet(&["frobnicate"]);
    assert_eq!(code, 2);
}

#[test]
fn every_shipped_game_passes_a_short_check() {
    let mut games: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("games"))
        .expect("the games directory is part of the repository")
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kif"))
        .collect();
    games.sort();
    assert!(!games.is_empty(), "no shipped game in games/");
    for game in &games {
        let (code, out, err) = propjet(&[
            "check",
            &game.to_string_lossy(),
            "--playouts",
            "5",
            "--engine",
            "all",
        ]);
        assert_eq!(code, 0, "{}:\nstdout:\n{out}\nstderr:\n{err}", game.display());
        let (states, mismatches) = counts(&out);
        // Five playouts show at least their five initial and five terminal states.
        assert!(states >= 10, "{}: {states} states", game.display());
        assert_eq!(mismatches, 0);
    }
}

#[test]
fn the_interpreter_and_native_code_replay_the_corpus_trace_of_tictactoe() {
    let Some(shared) = shared_dir() else { return };
    let game = shared.join("games/ticTacToe.kif");
    let trace = shared.join("traces/ticTacToe.jsonl");
    for engine in ["interp", "native", "all"] {
        let (code, out, err) = propjet(&[
            "check",
            &game.to_string_lossy(),
            "--trace",
            &trace.to_string_lossy(),
            "--engine",
            engine,
        ]);
        assert_eq!(code, 0, "--engine {engine}: stdout:\n{out}\nstderr:\n{err}");
        assert_eq!(counts(&out), (trace_states(&trace), 0), "--engine {engine}");
        let named = if engine == "all" {
            "engine reference, interp, native"
        } else {
            engine
        };
        assert!(out.contains(named), "{out}");
    }
}

#[test]
fn compile_prints_statistics_and_writes_graphviz() {
    let dir = scratch("compile");
    let dot = dir.join("ttt.dot");
    let (code, out, err) = propjet(&["compile", "games/tictactoe.kif", "--dot", &dot.to_string_lossy()]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for expected in [
        "components",
        "constant folding",
        "dead nodes",
        "time: parse",
        "propositions:",
        "gates:",
        "native: ",
        "lower ",
    ] {
        assert!(out.contains(expected), "`{expected}` missing from:\n{out}");
    }
    let drawing = std::fs::read_to_string(&dot).expect("the drawing was written");
    assert!(drawing.starts_with("digraph"), "{drawing}");
    assert!(drawing.contains("(legal white (mark 1 1))"), "{drawing}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_limits_are_reported_by_name() {
    let (code, out, err) = propjet(&["compile", "games/tictactoe.kif", "--max-atoms", "10"]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("max_atoms"), "{err}");
}

#[test]
fn compile_writes_an_aarch64_object() {
    let dir = scratch("object");
    let path = dir.join("ttt.o");
    let (code, out, err) = propjet(&[
        "compile",
        "games/tictactoe.kif",
        "--object",
        &path.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("aarch64-unknown-linux-gnu"), "{out}");
    let bytes = std::fs::read(&path).expect("the object was written");
    // An ELF file (magic), 64-bit (class 2), little-endian (data 1), relocatable (type 1), for
    // aarch64 (machine 183): the header fields the cross linker checks first.
    assert_eq!(&bytes[..4], b"\x7fELF");
    assert_eq!((bytes[4], bytes[5]), (2, 1));
    assert_eq!(u16::from_le_bytes([bytes[16], bytes[17]]), 1);
    assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 183);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_object_target_is_refused() {
    let (code, out, err) = propjet(&[
        "compile",
        "games/tictactoe.kif",
        "--object",
        "/nonexistent/never-written.o",
        "--target",
        "not-a-triple-at-all",
    ]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("--target not-a-triple-at-all"), "{err}");
}

/// The rate of `engine` at `lanes` in the `states/s ENTRY` lines of `compile --stats`, in
/// states per second.
fn stats_rate(out: &str, entry: &str, engine: &str, lanes: u32) -> Option<f64> {
    let line = out.lines().find(|l| {
        l.starts_with(&format!("states/s {entry} ")) && l.contains(&format!(": {engine} {lanes} lanes "))
    })?;
    let rest = line.split(&format!("{engine} {lanes} lanes ")).nth(1)?;
    let mut words = rest.split_whitespace();
    let value: f64 = words.next()?.parse().ok()?;
    let scale = match words.next() {
        Some("k") => 1e3,
        Some("M") => 1e6,
        Some("G") => 1e9,
        _ => 1.0,
    };
    Some(value * scale)
}

#[test]
fn compile_stats_prints_every_phase_and_the_rate_of_every_engine() {
    let (code, out, err) = propjet(&[
        "compile",
        "games/tictactoe.kif",
        "--stats",
        "--stats-seconds",
        "0.05",
        "--stats-entry",
        "all",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // The existing lines stay.
    assert!(out.contains("time: parse") && out.contains("native: "), "{out}");
    let phases = out
        .lines()
        .find(|l| l.starts_with("phases: "))
        .unwrap_or_else(|| panic!("no phases line in:\n{out}"));
    for phase in [
        "parse",
        "ground",
        "net",
        "optimize",
        "order",
        "lower(native)",
        "total",
    ] {
        assert!(
            phases.contains(&format!(" {phase} ")),
            "`{phase}` missing from {phases}"
        );
    }
    for entry in ["legal", "terminal", "goals", "next", "view", "step"] {
        assert!(
            stats_rate(&out, entry, "interp", 64).is_some_and(|r| r > 0.0),
            "no interpreter rate for {entry} in:\n{out}"
        );
        assert!(
            stats_rate(&out, entry, "native", 64).is_some_and(|r| r > 0.0),
            "no native rate for {entry} in:\n{out}"
        );
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            assert!(
                stats_rate(&out, entry, "native", 128).is_some_and(|r| r > 0.0),
                "no 128-lane rate for {entry} in:\n{out}"
            );
        }
    }
    // The step runs legal, terminal, goals and next on each state: the gates of all four.
    let gates = |entry: &str| -> usize {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("states/s {entry} (")))
            .unwrap_or_else(|| panic!("no {entry} line in:\n{out}"));
        line.split(['(', ' '])
            .find_map(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no gate count in {line}"))
    };
    assert_eq!(
        gates("step"),
        ["legal", "terminal", "goals", "next"]
            .map(gates)
            .iter()
            .sum::<usize>(),
        "{out}"
    );
    assert!(gates("step") > gates("next"), "{out}");
    let (code, out, err) = propjet(&["compile", "games/tictactoe.kif", "--backend", "cranelift"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("Cranelift code generator"), "{out}");
    let (code, _, err) = propjet(&["compile", "games/tictactoe.kif", "--stats", "--stats-seconds=-1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--stats-seconds"), "{err}");
}

/// `propjet analyze`: our double tic-tac-toe as one JSON object with two factors of 27 bases;
/// tic-tac-toe as text saying why it does not factor; a state file folds its latches in; a bad
/// state is a clear error.
#[test]
fn analyze_reports_factors_as_json_and_text() {
    let (code, stdout, stderr) = propjet(&["analyze", "games/doubletictactoe.kif", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let factors = json["factors"].as_array().expect("a factors list");
    assert_eq!(factors.len(), 2);
    for f in factors {
        assert_eq!(f["bases"].as_array().expect("bases").len(), 27);
    }
    assert_eq!(json["factored"], true);

    let (code, stdout, stderr) = propjet(&["analyze", "games/tictactoe.kif"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("does not factor:"), "{stdout}");
    assert!(stdout.contains("not a product"), "{stdout}");

    let dir = scratch("analyze");
    let state = dir.join("state.kif");
    std::fs::write(&state, "(true (control white))\n(cell 1 1 1 x)\n(cell 2 2 2 o)\n").expect("writable");
    let (code, stdout, stderr) = propjet(&[
        "analyze",
        "games/doubletictactoe.kif",
        "--state",
        state.to_str().expect("a UTF-8 path"),
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let fixed = json["fixed"].as_array().expect("the fixed facts");
    assert!(
        fixed.iter().any(|f| f[0] == "(cell 1 1 1 x)" && f[1] == true),
        "{fixed:?}"
    );

    std::fs::write(&state, "(cell 7 7 7 q)\n").expect("writable");
    let (code, _, stderr) = propjet(&[
        "analyze",
        "games/doubletictactoe.kif",
        "--state",
        state.to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("is not a base proposition"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
