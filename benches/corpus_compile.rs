//! Compile time from text to native code and peak memory of every corpus game, one process per
//! compile so that each game's memory is its own: `cargo bench --bench corpus_compile`. Prints a
//! Markdown table (the one kept in `doc/compile-times.md`) with the time of grounding,
//! optimizing and lowering to native code, and the total from parsing to native code; with
//! `PROPJET_GAMES=text`, only games whose name contains `text`.
//!
//! Each game is compiled `PROPJET_RUNS` times (default 3), one process after another: the
//! machines this runs on are shared, and one run of the same binary on the same game can take
//! 15 % longer than the next. The table gives the run with the median total (its phases, its
//! memory), and beside it the fastest and slowest totals; the count of games under 2 s goes by
//! the median.
//!
//! This is a benchmark, not a test: it asserts nothing about time, it measures.

use std::path::Path;
use std::process::Command;

fn field<'a>(output: &'a str, prefix: &str) -> Option<&'a str> {
    output.lines().find_map(|l| l.strip_prefix(prefix))
}

/// The number before ` ms` after `what ` in a `time:` line.
fn millis(time_line: &str, what: &str) -> Option<f64> {
    let rest = &time_line[time_line.find(&format!("{what} "))? + what.len() + 1..];
    rest.split(" ms").next()?.trim().parse().ok()
}

fn main() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/games");
    let mut games: Vec<_> = match std::fs::read_dir(&shared) {
        Ok(dir) => dir
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "kif"))
            .collect(),
        Err(e) => {
            eprintln!("cannot list {}: {e}", shared.display());
            return;
        }
    };
    games.sort();
    if let Ok(only) = std::env::var("PROPJET_GAMES") {
        games.retain(|p| p.file_stem().is_some_and(|n| n.to_string_lossy().contains(&only)));
    }
    let runs: usize = std::env::var("PROPJET_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    println!(
        "| game | ground ms | optimize ms | lower ms | total ms (median of {runs}) | fastest–slowest ms | peak MiB | components before | components after |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (mut compiled, mut under_two_seconds) = (0, 0);
    'games: for path in &games {
        let name = path.file_stem().unwrap_or_default().to_string_lossy();
        // Each run's output and total; a failure of any run is the game's line.
        let mut outputs: Vec<(String, f64)> = Vec::with_capacity(runs);
        for _ in 0..runs {
            // A game that cannot be grounded stops at the time limit instead of holding up the
            // table.
            let out = Command::new(env!("CARGO_BIN_EXE_propjet"))
                .args(["compile", "--max-ground-seconds", "20"])
                .arg(path)
                .output();
            let out = match out {
                Ok(o) => o,
                Err(e) => {
                    println!("| {name} | cannot run propjet: {e} ||||||||");
                    continue 'games;
                }
            };
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                println!(
                    "| {name} | fails: {} ||||||||",
                    err.trim().replace('|', "/").replace('\n', " ")
                );
                continue 'games;
            }
            let total = field(&stdout, "time: ")
                .and_then(|time| millis(time, "total"))
                .unwrap_or(f64::NAN);
            outputs.push((stdout, total));
        }
        outputs.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (fastest, slowest) = (outputs[0].1, outputs[outputs.len() - 1].1);
        let stdout = &outputs[outputs.len() / 2].0;
        let time = field(stdout, "time: ").unwrap_or("");
        let components = |prefix: &str| {
            field(stdout, prefix)
                .and_then(|s| s.split(" components").next())
                .unwrap_or("?")
                .trim()
                .to_string()
        };
        let show = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.1}"));
        let total = millis(time, "total");
        compiled += 1;
        if total.is_some_and(|t| t < 2000.0) {
            under_two_seconds += 1;
        }
        println!(
            "| {name} | {} | {} | {} | {} | {:.0}–{:.0} | {} | {} | {} |",
            show(millis(time, "ground")),
            show(millis(time, "optimize")),
            show(millis(time, "lower")),
            show(total),
            fastest,
            slowest,
            field(stdout, "peak memory: ")
                .and_then(|s| s.split(' ').next())
                .unwrap_or("?"),
            components("net as built: "),
            components("net: "),
        );
    }
    println!();
    println!(
        "{under_two_seconds} of {compiled} compiling games go from text to native code in under 2 s (median of {runs} runs)."
    );
}
