//! Grounds games and prints, for each, the time and size of its ground program.
//!
//! `cargo run --release --example ground_bench -- GAME.kif…` (every game of ../shared/games
//! without arguments). Each game is grounded `PROPJET_REPEAT` times (default 3) and the fastest
//! run is reported (in CPU time of the thread, so that other processes on the machine do not
//! distort it, except for runs under 20 ms, which the scheduler accounts too coarsely and which
//! are reported in wall time; the phase columns are wall time); the memory column is the
//! process's peak resident set after the game, so it is per game only when one game is given.

use propjet::gdl;
use propjet::ground::{self, GroundLimits};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// CPU time of this thread in nanoseconds (the first field of its schedstat), which other
/// processes competing for the machine do not inflate.
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let mut games: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if games.is_empty() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/games");
        let Ok(entries) = std::fs::read_dir(dir) else {
            eprintln!("no games given and {dir} is missing");
            std::process::exit(2);
        };
        games = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "kif"))
            .collect();
        games.sort();
    }
    let repeat: usize = std::env::var("PROPJET_REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    println!(
        "{:<28} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8}",
        "game", "ground_ms", "prep_ms", "fix_ms", "inst_ms", "atoms", "rules", "literals", "peak_MB"
    );
    let mut limits = GroundLimits::default();
    let env = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<usize>().ok());
    if let Some(n) = env("PROPJET_MAX_ATOMS") {
        limits.max_atoms = n;
    }
    if let Some(n) = env("PROPJET_MAX_RULES") {
        limits.max_rules = n;
        limits.max_literals = n.saturating_mul(10);
    }
    if let Some(n) = env("PROPJET_MAX_SECONDS") {
        limits.max_time = Duration::from_secs(n as u64);
    }
    let verbose = std::env::var_os("PROPJET_VERBOSE").is_some();
    for path in &games {
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let desc = match gdl::load(path) {
            Ok(d) => d,
            Err(gdl::LoadError::Io { source, .. }) => {
                println!("{name:<28} cannot read: {source}");
                continue;
            }
            Err(gdl::LoadError::Parse { source, .. }) => {
                println!("{name:<28} front end: {source}");
                continue;
            }
        };
        let mut best: Option<(Duration, ground::GroundStats, ground::Grounded)> = None;
        let mut failure = None;
        for _ in 0..repeat.max(1) {
            let clock = Instant::now();
            let cpu = cpu_ns();
            match ground::ground_with_stats(&desc, &limits) {
                Ok((g, stats)) => {
                    let wall = clock.elapsed();
                    // Report CPU time where the system gives it, wall time otherwise and for
                    // runs shorter than the scheduler's accounting granularity (a few ms).
                    let t = match (cpu, cpu_ns()) {
                        (Some(a), Some(b)) if b.saturating_sub(a) >= 20_000_000 => {
                            Duration::from_nanos(b - a)
                        }
                        _ => wall,
                    };
                    if best.as_ref().is_none_or(|(b, _, _)| t < *b) {
                        best = Some((t, stats, g));
                    }
                }
                Err(e) => {
                    failure = Some((clock.elapsed(), e));
                    break;
                }
            }
        }
        let peak = peak_rss_mb().unwrap_or(f64::NAN);
        match (best, failure) {
            (_, Some((t, e))) => println!("{name:<28} {:>9.1} error: {e}", t.as_secs_f64() * 1e3),
            (Some((t, s, g)), None) => {
                let literals: usize = g.rules.iter().map(|r| r.body.len()).sum();
                println!(
                    "{name:<28} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>9} {:>9} {:>8.0}",
                    t.as_secs_f64() * 1e3,
                    s.prepare.as_secs_f64() * 1e3,
                    s.fixpoint.as_secs_f64() * 1e3,
                    s.instantiate.as_secs_f64() * 1e3,
                    g.atoms.len(),
                    g.rules.len(),
                    literals,
                    peak
                );
                if verbose {
                    println!(
                        "    {} terms, {:.0} MB in terms, relations and indexes at the end",
                        s.terms,
                        s.bytes as f64 / 1e6
                    );
                    for (rel, n) in &s.largest {
                        println!("    {n:>9} atoms  {rel}");
                    }
                    for c in s.costliest.iter().take(5) {
                        println!(
                            "    line {:>5} {:<24} derive {:>8.1} ms ({} atoms), instantiate {:>8.1} ms ({} rules)",
                            c.line,
                            c.relation,
                            c.derive.as_secs_f64() * 1e3,
                            c.derived,
                            c.instantiate.as_secs_f64() * 1e3,
                            c.rules
                        );
                    }
                    if std::env::var("PROPJET_VERBOSE").is_ok_and(|v| v == "2") {
                        println!("    derivations (M: a magic rule, of the calls of a relation):");
                        for d in &s.derivations {
                            println!(
                                "    line {:>5} {:<36} {:>8.1} ms {:>9} new {:>9} solutions {:>5} runs",
                                d.line,
                                d.relation,
                                d.time.as_secs_f64() * 1e3,
                                d.derived,
                                d.solutions,
                                d.runs
                            );
                        }
                    }
                }
            }
            (None, None) => println!("{name:<28} no run"),
        }
    }
}
