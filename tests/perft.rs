//! The games propjet ships (`games/*.kif`) and their perft golden files (`games/*.perft`).
//!
//! Every shipped game must have a golden file, and the reference evaluator and the compiled net
//! (interpreted) must reproduce every row of it. Run with `PROPJET_BLESS=1` to rewrite the rows from the reference evaluator
//! instead of comparing; each file keeps its header and its depth, so a new golden file starts
//! as a hand-written header plus rows `0 0 0 0` … `N 0 0 0` for the depth wanted.

use propjet::compile::{compile, Options};
use propjet::gdl;
use propjet::perft::{perft, PerftFile, PerftRow};
use propjet::reference::Reference;
use propjet_runtime::{random_playout, Interpreter, Machine, Rng};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn games_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("games")
}

/// The names of the files in `games/` that end in `.extension`, without it, sorted.
fn names_with_extension(extension: &str) -> Vec<String> {
    let dir = games_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path()
        })
        .filter(|path| path.extension().is_some_and(|ext| ext == extension))
        .filter_map(|path| path.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    names.sort();
    names
}

fn shipped_games() -> Vec<String> {
    let names = names_with_extension("kif");
    assert!(!names.is_empty(), "no games in {}", games_dir().display());
    names
}

fn load_game(name: &str) -> Result<Reference, String> {
    let path = games_dir().join(format!("{name}.kif"));
    let src = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let desc = gdl::parse(&src).map_err(|e| format!("{}: {e}", path.display()))?;
    Reference::new(&desc).map_err(|e| format!("{}: {e}", path.display()))
}

/// The game compiled and run by the interpreter.
fn load_compiled(name: &str) -> Result<Interpreter, String> {
    let path = games_dir().join(format!("{name}.kif"));
    let src = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let desc = gdl::parse(&src).map_err(|e| format!("{}: {e}", path.display()))?;
    let compiled = compile(&desc, &Options::default()).map_err(|e| format!("{}: {e}", path.display()))?;
    Interpreter::new(compiled.program).map_err(|e| format!("{}: {e}", path.display()))
}

fn golden_path(name: &str) -> PathBuf {
    games_dir().join(format!("{name}.perft"))
}

fn read_golden(name: &str) -> Result<PerftFile, String> {
    let path = golden_path(name);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {} ({e}); every shipped game needs a golden file: write a header and rows \
             `0 0 0 0` to `N 0 0 0` for the depth wanted, then run with PROPJET_BLESS=1",
            path.display()
        )
    })?;
    PerftFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn blessing() -> bool {
    std::env::var("PROPJET_BLESS").as_deref() == Ok("1")
}

/// The rows of `actual`, computed by `engine`, that differ from `expected`, one line each.
fn row_differences(expected: &[PerftRow], actual: &[PerftRow], engine: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (e, a) in expected.iter().zip(actual) {
        if e != a {
            out.push(format!(
                "depth {}: the file says states {} terminal {} joint_moves {}, the {engine} engine \
                 gives states {} terminal {} joint_moves {}",
                e.depth, e.states, e.terminal, e.joint_moves, a.states, a.terminal, a.joint_moves
            ));
        }
    }
    if expected.len() != actual.len() {
        out.push(format!(
            "{} rows expected, {} computed",
            expected.len(),
            actual.len()
        ));
    }
    out
}

/// Checks (or, when blessing, rewrites) the golden file of one game.
fn check_game(name: &str) -> Result<(), String> {
    let golden = read_golden(name)?;
    let machine = load_game(name)?;
    let start = Instant::now();
    let rows = perft(&machine, golden.max_depth()).map_err(|e| format!("{name}: {e}"))?;
    eprintln!(
        "{name}: perft to depth {} in {:.2} s",
        golden.max_depth(),
        start.elapsed().as_secs_f64()
    );
    if blessing() {
        let path = golden_path(name);
        let blessed = PerftFile {
            header: golden.header,
            rows,
        };
        std::fs::write(&path, blessed.to_string())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("{name}: wrote {}", path.display());
        return Ok(());
    }
    let mut differences = row_differences(&golden.rows, &rows, "reference");
    // The compiled net must give the same counts as the golden file.
    let interp = load_compiled(name)?;
    let start = Instant::now();
    let rows = perft(&interp, golden.max_depth()).map_err(|e| format!("{name}: interp: {e}"))?;
    eprintln!(
        "{name}: interpreter perft in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    differences.extend(row_differences(&golden.rows, &rows, "interp"));
    if differences.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}: {}", differences.join("\n  ")))
    }
}

/// One test per shipped game, so that the test harness spreads the games over its threads.
macro_rules! perft_tests {
    ($($name:ident),* $(,)?) => {
        mod perft_of {
            $(
                #[test]
                fn $name() {
                    super::check_game(stringify!($name)).unwrap_or_else(|e| panic!("{e}"));
                }
            )*
        }

        /// The games that have a test in `perft_of`.
        const PERFT_TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

perft_tests!(
    breakthrough,
    buttons,
    connectfour,
    doubletictactoe,
    race,
    tictactoe
);

#[test]
fn every_shipped_game_has_a_perft_test() {
    let mut tested: Vec<String> = PERFT_TESTED.iter().map(|name| name.to_string()).collect();
    tested.sort();
    assert_eq!(
        shipped_games(),
        tested,
        "add each game in games/ to the perft_tests! list, and only those"
    );
}

#[test]
fn every_perft_file_belongs_to_a_shipped_game() {
    let games = shipped_games();
    let orphans: Vec<String> = names_with_extension("perft")
        .into_iter()
        .filter(|name| !games.contains(name))
        .collect();
    assert!(orphans.is_empty(), "golden files without a game: {orphans:?}");
}

/// The distinct tic-tac-toe positions after each ply, counting only positions reached in play
/// (the game stops at a line or a full board): 5478 positions in all, of which 958 are
/// terminal, long-known figures.
#[test]
fn tictactoe_reaches_the_known_number_of_positions_per_ply() {
    const KNOWN: [u64; 10] = [1, 9, 72, 252, 756, 1260, 1520, 1140, 390, 78];
    let golden = read_golden("tictactoe").unwrap_or_else(|e| panic!("{e}"));
    let states: Vec<u64> = golden.rows.iter().map(|row| row.states).collect();
    assert_eq!(
        states, KNOWN,
        "the golden file must cover all nine plies and match the known counts"
    );
    assert_eq!(KNOWN.iter().sum::<u64>(), 5478);
    // Of those positions, 958 end the game: 626 won by x, 316 by o, and 16 full-board draws.
    let terminal: u64 = golden.rows.iter().map(|row| row.terminal).sum();
    assert_eq!(terminal, 958);
}

/// Double tic-tac-toe is two independent boards moved in step, so until a board can be over
/// (a line needs five plies) its positions are pairs of tic-tac-toe positions of the same ply
/// and its joint moves pairs of tic-tac-toe joint moves. The golden files of both games must
/// agree on that.
#[test]
fn doubletictactoe_counts_are_squares_of_tictactoe_counts() {
    let single = read_golden("tictactoe").unwrap_or_else(|e| panic!("{e}"));
    let double = read_golden("doubletictactoe").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        double.max_depth() >= 2,
        "the double game's golden file is too shallow to compare"
    );
    for (s, d) in single.rows.iter().zip(&double.rows).take(5) {
        assert_eq!(s.terminal, 0);
        assert_eq!(d.terminal, 0, "depth {}", d.depth);
        assert_eq!(d.states, s.states * s.states, "states at depth {}", d.depth);
        assert_eq!(
            d.joint_moves,
            s.joint_moves * s.joint_moves,
            "joint moves at depth {}",
            d.depth
        );
    }
}

/// The shipped games are meant as clean examples: the front end must accept them without a
/// warning (no rule that is only safe for some calls, no function symbol with two arities).
#[test]
fn shipped_games_parse_without_warnings() {
    let mut complaints = Vec::new();
    for name in shipped_games() {
        let path = games_dir().join(format!("{name}.kif"));
        let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match gdl::parse(&src) {
            Ok(desc) => complaints.extend(
                gdl::warnings(&desc, &src)
                    .into_iter()
                    .map(|w| format!("{name}: warning: {w}")),
            ),
            Err(e) => complaints.push(format!("{name}: {e}")),
        }
    }
    assert!(complaints.is_empty(), "{}", complaints.join("\n"));
}

/// Seeded random playouts of every shipped game must end in a terminal state where each role
/// has exactly one goal value, with a legal move for every role in every state on the way.
#[test]
fn shipped_games_play_out_to_one_goal_per_role() {
    const PLAYOUTS: u64 = 40;
    let mut failures = Vec::new();
    for name in shipped_games() {
        let machine = match load_game(&name) {
            Ok(machine) => machine,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let start = machine.initial_state();
        let mut depths = Vec::new();
        for seed in 0..PLAYOUTS {
            let mut rng = Rng::new(seed);
            match random_playout(&machine, &start, &mut rng, 1000) {
                Ok(playout) => depths.push(playout.depth),
                Err(e) => failures.push(format!("{name}, seed {seed}: {e}")),
            }
        }
        if let (Some(min), Some(max)) = (depths.iter().min(), depths.iter().max()) {
            eprintln!("{name}: {} playouts, {min} to {max} moves", depths.len());
        }
    }
    assert!(
        failures.is_empty(),
        "ill-formed playouts:\n{}",
        failures.join("\n")
    );
}
