//! Builds, optimizes and orders the nets of games and prints, for each, the time of each of
//! those phases and the size of the optimized net.
//!
//! `cargo run --release --example net_bench -- GAME.kif…`. Each game is grounded once; then
//! its net is built, optimized and ordered `PROPJET_REPEAT` times (default 3) and the fastest
//! run of each phase is printed, in CPU time of the main thread (which other processes on the
//! machine do not inflate), in CPU time of the whole process (which also counts the threads a
//! phase starts), and in wall time.

use propjet::gdl;
use propjet::ground::{self, GroundLimits};
use propjet::net::{self, NetLimits, NetStats};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// CPU time of this thread in nanoseconds (the first field of its schedstat).
fn thread_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time of the process, its ended threads included, in nanoseconds (user and system
/// time of /proc/self/stat, in clock ticks of 10 ms).
fn process_ns() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // The command name may hold spaces; the fields after it are plain.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
    (ticks(11) + ticks(12)) * 10_000_000
}

/// The three clocks of one phase, in milliseconds: main thread, process, wall.
#[derive(Copy, Clone)]
struct Clocks([f64; 3]);

impl Clocks {
    fn best(self, other: Clocks) -> Clocks {
        Clocks(std::array::from_fn(|i| self.0[i].min(other.0[i])))
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Clocks) {
    let (thread, process, wall) = (thread_ns(), process_ns(), Instant::now());
    let out = f();
    let ms = |ns: u64| ns as f64 / 1e6;
    let clocks = Clocks([
        ms(thread_ns() - thread),
        ms(process_ns() - process),
        wall.elapsed().as_secs_f64() * 1e3,
    ]);
    (out, clocks)
}

fn main() {
    let games: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if games.is_empty() {
        eprintln!("usage: net_bench GAME.kif…");
        std::process::exit(2);
    }
    let repeat: usize = std::env::var("PROPJET_REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let limits = GroundLimits {
        max_time: Duration::from_secs(900),
        ..GroundLimits::default()
    };
    println!(
        "{:<24} {:>26} {:>26} {:>26}  net",
        "game", "build thread/proc/wall", "optimize thread/proc/wall", "order thread/proc/wall"
    );
    for path in games {
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{name}: {e}");
                continue;
            }
        };
        let grounded = match gdl::parse(&text)
            .map_err(|e| e.to_string())
            .and_then(|d| ground::ground(&d, &limits).map_err(|e| e.to_string()))
        {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{name}: {e}");
                continue;
            }
        };
        let mut best: Option<[Clocks; 3]> = None;
        let mut stats = String::new();
        for _ in 0..repeat {
            let (built, build) = timed(|| net::build(&grounded, &NetLimits::default()));
            let built = match built {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("{name}: {e}");
                    break;
                }
            };
            let ((optimized, _), optimize) = timed(|| net::optimize_built(built, 8));
            let (_, order) = timed(|| net::order(&optimized));
            stats = NetStats::of(&optimized).to_string();
            let now = [build, optimize, order];
            best = Some(match best {
                None => now,
                Some(b) => std::array::from_fn(|i| b[i].best(now[i])),
            });
        }
        let Some(best) = best else { continue };
        let col = |c: Clocks| format!("{:.0}/{:.0}/{:.0}", c.0[0], c.0[1], c.0[2]);
        println!(
            "{:<24} {:>26} {:>26} {:>26}  {stats}",
            name,
            col(best[0]),
            col(best[1]),
            col(best[2])
        );
    }
}
