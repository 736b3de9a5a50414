//! Compile time and peak memory of every corpus game, one process per game so that each
//! game's memory is its own: `cargo bench --bench corpus_compile`. Prints a Markdown table
//! (the one kept in `doc/compile-times.md`); with `PROPJET_GAMES=text`, only games whose name
//! contains `text`.
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
    println!(
        "| game | ground ms | optimize ms | total ms | peak MiB | components before | components after |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for path in &games {
        let name = path.file_stem().unwrap_or_default().to_string_lossy();
        // A game that cannot be grounded stops at the time limit instead of holding up the table.
        let out = Command::new(env!("CARGO_BIN_EXE_propjet"))
            .args(["compile", "--max-ground-seconds", "20"])
            .arg(path)
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                println!("| {name} | cannot run propjet: {e} |||||");
                continue;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            println!(
                "| {name} | fails: {} |||||",
                err.trim().replace('|', "/").replace('\n', " ")
            );
            continue;
        }
        let time = field(&stdout, "time: ").unwrap_or("");
        let components = |prefix: &str| {
            field(&stdout, prefix)
                .and_then(|s| s.split(" components").next())
                .unwrap_or("?")
                .trim()
                .to_string()
        };
        let show = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.1}"));
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            show(millis(time, "ground")),
            show(millis(time, "optimize")),
            show(millis(time, "total")),
            field(&stdout, "peak memory: ")
                .and_then(|s| s.split(' ').next())
                .unwrap_or("?"),
            components("net as built: "),
            components("net: "),
        );
    }
}
