//! Lowers games with Cranelift under several settings and prints, for each, the CPU time of
//! the lowering and the speed of the code it produced.
//!
//! `cargo run --release --example lower_bench -- GAME.kif…`. Each game is compiled once; then
//! each setting lowers it on one thread (so that the thread's CPU time, which other processes
//! competing for the machine do not inflate, is the whole lowering), and the next-state entry
//! runs on 64- and 128-lane batches for about `PROPJET_SECONDS` (default 0.5) seconds of the
//! thread's CPU time. Settings alternate, `PROPJET_REPEAT` times (default 2), and the best run
//! of each is printed.

use propjet::lower::{self, Options, Regalloc};
use propjet::{compile, gdl};
use propjet_runtime::{Entry, Native, Width};
use std::path::PathBuf;
use std::sync::Arc;

/// CPU time of this thread in nanoseconds (the first field of its schedstat).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Evaluations of the next-state entry per second of CPU time, in millions of states.
fn speed(native: &Native, width: Width, seconds: f64) -> f64 {
    let mut lanes = native.lanes(width).expect("the width has code");
    let start = cpu_ns();
    let mut calls = 0u64;
    while (cpu_ns() - start) as f64 / 1e9 < seconds {
        for _ in 0..16 {
            native.eval_lanes(Entry::Next, &mut lanes).expect("runs");
        }
        calls += 16;
    }
    let secs = (cpu_ns() - start) as f64 / 1e9;
    calls as f64 * width.lanes() as f64 / secs / 1e6
}

fn main() {
    let games: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let env = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let repeat = env("PROPJET_REPEAT", 2.0) as usize;
    let seconds = env("PROPJET_SECONDS", 0.5);
    // Settings as `regalloc:keep:chunk_cost` (regalloc `bt` or `sp`), comma-separated.
    let spec = std::env::var("PROPJET_SETTINGS").unwrap_or_else(|_| "bt:8:4096,sp:8:4096".to_string());
    let settings: Vec<(String, Options)> = spec
        .split(',')
        .map(|s| {
            let parts: Vec<&str> = s.split(':').collect();
            let regalloc = if parts[0] == "sp" {
                Regalloc::SinglePass
            } else {
                Regalloc::Backtracking
            };
            let options = Options {
                threads: 1,
                regalloc,
                keep: parts.get(1).and_then(|k| k.parse().ok()).unwrap_or(8),
                chunk_cost: parts.get(2).and_then(|k| k.parse().ok()).unwrap_or(4096),
                ..Options::default()
            };
            (s.to_string(), options)
        })
        .collect();
    println!(
        "{:<20} {:<14} {:>9} {:>9} {:>8} {:>10} {:>10}",
        "game", "setting", "gates", "lower_ms", "us/gate", "M/s x64", "M/s x128"
    );
    for game in games {
        let desc = gdl::load(game.as_ref()).expect("a readable, valid game");
        let compiled = compile::compile(&desc, &compile::Options::default()).expect("compiles");
        let program = Arc::new(compiled.program);
        let mut best: Vec<(f64, f64, f64, usize)> = vec![(f64::MAX, 0.0, 0.0, 0); settings.len()];
        for _ in 0..repeat {
            for (k, (_, options)) in settings.iter().enumerate() {
                let start = cpu_ns();
                let lowered = lower::lower(Arc::clone(&program), options).expect("lowers");
                let ms = (cpu_ns() - start) as f64 / 1e6;
                let x64 = speed(&lowered.native, Width::X64, seconds);
                let x128 = speed(&lowered.native, Width::X128, seconds);
                let b = &mut best[k];
                *b = (b.0.min(ms), b.1.max(x64), b.2.max(x128), lowered.stats.gates);
            }
        }
        let name = game
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned());
        for (k, (setting, _)) in settings.iter().enumerate() {
            let (ms, x64, x128, gates) = best[k];
            println!(
                "{:<20} {:<14} {:>9} {:>9.0} {:>8.2} {:>10.1} {:>10.1}",
                name,
                setting,
                gates,
                ms,
                ms * 1e3 / gates.max(1) as f64,
                x64,
                x128
            );
        }
    }
}
