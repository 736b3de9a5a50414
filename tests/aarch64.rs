//! The aarch64 code, run under qemu-user, against the interpreter.
//!
//! For each program, `propjet::lower::object::emit` writes the chunk functions for
//! `aarch64-unknown-linux-gnu` into an object file; Debian's cross compiler links it statically
//! with the C driver `tests/aarch64/harness.c`, and `qemu-aarch64-static` runs the driver on a
//! file of value arrays. Every entry runs at 64 and 128 lanes on arrays holding random words in
//! every slot (not only reachable states, and gate slots too, so an entry must overwrite its
//! outputs and leave the slots outside it alone) and on arrays whose lanes hold different
//! reachable states with legal joint moves from seeded playouts. Whole value arrays are compared
//! with the interpreter except the entry's gate slots that are not its outputs, so every output
//! and view bit is. Each program's arrays go through one qemu run.
//!
//! `PROPJET_GAMES=name` restricts the games to those whose name contains `name`. The files of
//! each program (`NAME.o`, the linked `NAME.elf`, the arrays `NAME.in` and the results
//! `NAME.out`) stay in `target/tmp/aarch64/TEST/` to be rerun by hand.
//!
//! The test needs `aarch64-linux-gnu-gcc` and `qemu-aarch64-static` (or `qemu-aarch64`); `.ci/run`
//! installs them. Without them it prints a note and checks nothing, unless the environment
//! variable `CI` is set, where their absence is a failure.

mod common;

use common::differential::{first_difference, random_mask, random_state, random_words, reachable};
use common::random_program::{random_program, Shape};
use common::{assert_no_failures, corpus_games, run_all, stem, test_options};
use propjet::compile;
use propjet::gdl;
use propjet::lower::object::{self, Object};
use propjet::lower::Options;
use propjet_runtime::{Entry, Interpreter, Layout, Machine, PackedState, Program, Rng, Width};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Instant;
use target_lexicon::Triple;

const TARGET: &str = "aarch64-unknown-linux-gnu";
const GCC: &str = "aarch64-linux-gnu-gcc";

/// The corpus games checked besides the shipped ones: the three the issue measures, and three
/// of the widest gates (fan-in 1521 to 2520; speedChess has 1738), whose chunks are compiled
/// without Cranelift's optimizer. reversi is also the deepest of them (131 levels). tron_10x10,
/// of fan-in 20880, is left out: its lowering alone takes over ten seconds.
const CORPUS_SAMPLE: &[&str] = &[
    "connectFour",
    "breakthrough",
    "speedChess",
    "amazons_8x8",
    "battle",
    "reversi",
];

/// The cross toolchain: the compiler and the emulator, with the driver compiled once.
struct Toolchain {
    qemu: String,
    dir: PathBuf,
    harness: PathBuf,
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The toolchain with the driver compiled into a directory of its own for `test`, or `None`
/// (after a note) when a tool is missing outside CI. In CI a missing tool is a failure.
fn toolchain(test: &str) -> Option<Toolchain> {
    let qemu = ["qemu-aarch64-static", "qemu-aarch64"]
        .into_iter()
        .find(|q| runs(q));
    let (true, Some(qemu)) = (runs(GCC), qemu) else {
        let missing = "the aarch64 cross toolchain (aarch64-linux-gnu-gcc and qemu-aarch64-static or \
             qemu-aarch64; Debian: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
             qemu-user-static) is missing";
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but {missing}; .ci/run installs it"
        );
        // Straight to stderr, which the test harness does not capture, so the note is seen.
        let _ = writeln!(std::io::stderr(), "note: {missing}; {test} checks nothing");
        return None;
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("aarch64").join(test);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let harness = dir.join("harness.o");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/aarch64/harness.c");
    let mut compile = Command::new(GCC);
    compile.args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-c"]);
    compile.arg(&source).arg("-o").arg(&harness);
    if let Err(e) = run(&mut compile) {
        panic!("the driver does not compile: {e}");
    }
    Some(Toolchain {
        qemu: qemu.to_string(),
        dir,
        harness,
    })
}

/// Runs a command to completion; its stdout, or the failure with its stderr.
fn run(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("{command:?} does not start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{command:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// One value array to run: an entry at a width, and the array as the interpreter sees it, one
/// 64-lane array per word of a lane value.
struct Record {
    entry: Entry,
    width: Width,
    halves: Vec<Vec<u64>>,
}

/// The records of one program: for every entry and width of the object, two arrays of random
/// words, and, given reachable states, one array whose lanes hold them (lane `k` the state and
/// joint move `k + shift` around the list, a different shift for every array) over random gate
/// slots.
fn records(
    program: &Program,
    interp: &Interpreter,
    object: &Object,
    steps: &[(PackedState, Vec<u64>)],
    rng: &mut Rng,
) -> Result<Vec<Record>, String> {
    let slots = program.num_slots();
    let mut out = Vec::new();
    let mut shift = 0;
    for width in Width::ALL {
        for entry in Entry::ALL {
            if object.entries[entry.index()].at(width).is_none() {
                continue;
            }
            for _ in 0..2 {
                let halves = (0..width.words()).map(|_| random_words(rng, slots)).collect();
                out.push(Record { entry, width, halves });
            }
            if steps.is_empty() {
                continue;
            }
            let mut halves = Vec::new();
            for _ in 0..width.words() {
                let mut values = random_words(rng, slots);
                for lane in 0..64 {
                    let (state, inputs) = &steps[(lane + shift) % steps.len()];
                    let err = |e: propjet_runtime::LaneError| e.to_string();
                    interp
                        .spread_state(state, lane as u32, &mut values)
                        .map_err(err)?;
                    interp
                        .spread_inputs(inputs, lane as u32, &mut values)
                        .map_err(err)?;
                }
                shift += 64;
                halves.push(values);
            }
            out.push(Record { entry, width, halves });
        }
    }
    Ok(out)
}

/// The harness's description of the object, as the Rust side expects it.
fn expected_description(object: &Object) -> String {
    let mut text = format!("slots {}\n", object.num_slots);
    for entry in Entry::ALL {
        for width in Width::ALL {
            let chunks = object.entries[entry.index()]
                .at(width)
                .map_or(-1, |c| c.len() as i64);
            text += &format!(
                "entry {} lanes {} chunks {chunks}\n",
                entry.index(),
                width.lanes()
            );
        }
    }
    text
}

/// Lowers `program` for aarch64, links it with the driver, runs every record of it under qemu
/// and compares each resulting array with the interpreter's. Returns the object checked.
fn check_program(
    tools: &Toolchain,
    name: &str,
    program: &Program,
    options: &Options,
    steps: &[(PackedState, Vec<u64>)],
    seed: u64,
) -> Result<Object, String> {
    let interp = Interpreter::new(program.clone()).map_err(|e| format!("the interpreter refuses: {e}"))?;
    let target = Triple::from_str(TARGET).map_err(|e| e.to_string())?;
    let object = object::emit(program, &target, options).map_err(|e| format!("no object: {e}"))?;
    let clock = Instant::now();
    if options.x128 && !object.stats.x128 {
        return Err("no 128-lane code for aarch64, which has NEON".to_string());
    }
    let base = tools.dir.join(name);
    let (object_path, binary) = (base.with_extension("o"), base.with_extension("elf"));
    let (input_path, output_path) = (base.with_extension("in"), base.with_extension("out"));
    std::fs::write(&object_path, &object.bytes).map_err(|e| format!("cannot write the object: {e}"))?;
    run(Command::new(GCC)
        .arg("-static")
        .arg(&tools.harness)
        .arg(&object_path)
        .arg("-o")
        .arg(&binary))?;

    let link = clock.elapsed();
    let description = run(Command::new(&tools.qemu).arg(&binary).arg("describe"))?;
    if description != expected_description(&object) {
        return Err(format!(
            "the object describes itself as\n{description}but the Rust side says\n{}",
            expected_description(&object)
        ));
    }

    let mut rng = Rng::new(seed);
    let records = records(program, &interp, &object, steps, &mut rng)?;
    let mut input = Vec::new();
    for r in &records {
        input.extend_from_slice(&(r.entry.index() as u32).to_le_bytes());
        input.extend_from_slice(&r.width.lanes().to_le_bytes());
        for slot in 0..program.num_slots() {
            for half in &r.halves {
                input.extend_from_slice(&half[slot].to_le_bytes());
            }
        }
    }
    std::fs::write(&input_path, &input).map_err(|e| format!("cannot write the input: {e}"))?;
    let clock = Instant::now();
    run(Command::new(&tools.qemu)
        .arg(&binary)
        .arg("run")
        .arg(&input_path)
        .arg(&output_path))?;
    let emulated = clock.elapsed();
    let output = std::fs::read(&output_path).map_err(|e| format!("cannot read the output: {e}"))?;
    let mut words = output
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("chunks of eight bytes")));
    let expected_words: usize = records.iter().map(|r| r.halves.len() * program.num_slots()).sum();
    if output.len() != expected_words * 8 {
        return Err(format!(
            "the harness wrote {} bytes, not {}",
            output.len(),
            expected_words * 8
        ));
    }
    for (i, r) in records.iter().enumerate() {
        let mut got = vec![Vec::with_capacity(program.num_slots()); r.halves.len()];
        for _ in 0..program.num_slots() {
            for half in &mut got {
                half.push(words.next().ok_or("the output ends early")?);
            }
        }
        for (h, (want, got)) in r.halves.iter().zip(&got).enumerate() {
            let mut want = want.clone();
            interp.eval(r.entry, &mut want).map_err(|e| e.to_string())?;
            let what = format!("aarch64, record {i}, {} lanes, word {h}", r.width.lanes());
            first_difference(program, r.entry, &what, &want, got)?;
        }
    }
    // Where the time goes, for choosing what CI can afford; written to stderr directly, which
    // the test harness does not capture.
    let log = format!(
        "{name}: {} gates, {} functions, {} KiB of aarch64 code; lowering {:.0} ms, linking {:.0} ms, \
         {} arrays under qemu {:.0} ms\n",
        program.num_gates(),
        object.stats.functions,
        object.stats.code_bytes / 1024,
        object.stats.time.as_secs_f64() * 1e3,
        link.as_secs_f64() * 1e3,
        records.len(),
        emulated.as_secs_f64() * 1e3
    );
    let _ = std::io::stderr().write_all(log.as_bytes());
    Ok(object)
}

fn read_game(path: &Path) -> Result<gdl::Description, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))
}

/// Options for the tests: the verifier on, as for the host's code.
fn options(chunk_cost: usize) -> Options {
    Options {
        chunk_cost,
        verifier: true,
        threads: 1,
        ..Options::default()
    }
}

/// Compiles a game and checks its aarch64 code on random words and reachable states.
fn check_game(tools: &Toolchain, path: &Path) -> Result<(), String> {
    let desc = read_game(path)?;
    // The object path has no harness for loops (`lower::object`), so recursion is unrolled.
    let mut unrolled = test_options();
    unrolled.net.recursion = propjet::net::Recursion::Unroll;
    let compiled = compile::compile(&desc, &unrolled).map_err(|e| format!("does not compile: {e}"))?;
    let program = compiled.program;
    let interp = Interpreter::new(program.clone()).map_err(|e| format!("the interpreter refuses: {e}"))?;
    let mut rng = Rng::new(0xaa64);
    let mut steps = reachable(&interp, &program, &mut rng, 256);
    if steps.is_empty() {
        // The initial state is terminal or a role has no move there: the lanes then hold the
        // initial state with no move.
        steps.push((
            interp.initial_state(),
            vec![0; Layout::words(program.num_inputs())],
        ));
    }
    let options = options(Options::default().chunk_cost);
    check_program(tools, &stem(path), &program, &options, &steps, 0x5eed).map(|_| ())
}

fn check_games(tools: &Toolchain, what: &str, games: &[PathBuf]) {
    let outcomes = run_all(what, games, |path| check_game(tools, path));
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.name)))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

#[test]
fn shipped_games_agree_on_aarch64() {
    let Some(tools) = toolchain("shipped") else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("games");
    let mut games: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("games/ is readable")
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "kif"))
        .collect();
    games.sort();
    assert!(!games.is_empty(), "no game in {}", dir.display());
    // As for the corpus: `PROPJET_GAMES=text` keeps the games whose name contains `text`.
    if let Ok(only) = std::env::var("PROPJET_GAMES") {
        games.retain(|p| stem(p).contains(&only));
    }
    check_games(&tools, "aarch64, shipped games", &games);
}

#[test]
fn a_sample_of_corpus_games_agrees_on_aarch64() {
    let Some(tools) = toolchain("corpus") else {
        return;
    };
    let Some(mut games) = corpus_games("the aarch64 corpus sample") else {
        return;
    };
    games.retain(|p| CORPUS_SAMPLE.contains(&stem(p).as_str()));
    let found: Vec<String> = games.iter().map(|p| stem(p)).collect();
    if std::env::var_os("PROPJET_GAMES").is_none() {
        for name in CORPUS_SAMPLE {
            assert!(found.iter().any(|f| f == name), "the corpus has no game {name}");
        }
    }
    check_games(&tools, "aarch64, corpus sample", &games);
}

#[test]
fn random_programs_agree_on_aarch64() {
    let Some(tools) = toolchain("random") else {
        return;
    };
    let shape = |bases, gates, f: &dyn Fn(&mut Shape)| {
        let mut s = Shape::sized(bases, gates);
        f(&mut s);
        s
    };
    // (name, shape, chunk budget): each of the shapes of the host's tests once.
    let cases: Vec<(&str, Shape, usize)> = vec![
        ("empty", shape(0, 0, &|s| s.inputs_per_role.clear()), 4_096),
        ("no_gates", shape(70, 0, &|_| {}), 4_096),
        (
            "constant_outputs",
            shape(5, 20, &|s| s.constant_outputs = true),
            4_096,
        ),
        ("single_gate", shape(3, 1, &|_| {}), 4_096),
        ("general", shape(40, 150, &|s| s.max_fanin = 7), 4_096),
        ("chunk_per_gate", shape(30, 120, &|_| {}), 1),
        ("small_chunks", shape(66, 400, &|_| {}), 25),
        ("wide_fanin", shape(64, 60, &|s| s.wide_gates = 4), 4_096),
        ("wide_fanin_chunks", shape(64, 200, &|s| s.wide_gates = 6), 200),
        (
            "several_default_chunks",
            shape(500, 12_000, &|s| s.views = 1_000),
            4_096,
        ),
    ];
    let mut failures = Vec::new();
    for (i, (name, shape, budget)) in cases.iter().enumerate() {
        let seed = 0xa64 + i as u64;
        let program = random_program(shape, seed);
        let mut rng = Rng::new(seed);
        // Random states and moves, legal or not, in the lanes of the third array.
        let steps: Vec<(PackedState, Vec<u64>)> = (0..128)
            .map(|_| {
                (
                    random_state(&mut rng, program.num_bases()),
                    random_mask(&mut rng, program.num_inputs()),
                )
            })
            .collect();
        match check_program(&tools, name, &program, &options(*budget), &steps, seed) {
            Err(e) => failures.push(format!("{name} (seed {seed}): {e}")),
            // The cases meant to span several chunks must do so, or they test less than they say.
            Ok(object) if *budget != 4_096 || *name == "several_default_chunks" => {
                let chunks = object.entries[Entry::View.index()].x64.len();
                if chunks < 3 {
                    failures.push(format!("{name}: the view entry has only {chunks} chunks"));
                }
            }
            Ok(_) => {}
        }
    }
    assert_no_failures(&failures, cases.len());
}

/// Without any tool: the object's description of each entry is the host's, chunk for chunk,
/// since both come from the same plan; and the chunk symbols are the object's functions in plan
/// order, each entry's list in run order.
#[test]
fn the_object_describes_the_same_chunks_as_the_host_code() {
    let target = Triple::from_str(TARGET).expect("a known triple");
    for (seed, budget) in [(1u64, 1usize), (2, 30), (3, 4_096)] {
        let program = random_program(&Shape::sized(40, 300), seed);
        let object = object::emit(&program, &target, &options(budget)).expect("emits");
        let native = propjet::lower::lower(program.clone(), &options(budget))
            .expect("lowers for the host")
            .native;
        assert_eq!(object.num_slots, program.num_slots());
        assert!(object.stats.x128, "aarch64 has 128-bit vectors");
        for entry in Entry::ALL {
            for width in Width::ALL {
                let symbols = object.entries[entry.index()].at(width).expect("both widths");
                assert_eq!(
                    symbols.len(),
                    native.chunk_count(entry, width),
                    "{entry:?} {width:?}"
                );
                let indices: Vec<usize> = symbols
                    .iter()
                    .map(|s| {
                        s.strip_prefix("propjet_chunk_")
                            .and_then(|i| i.parse().ok())
                            .unwrap_or_else(|| panic!("{s} is not a chunk symbol"))
                    })
                    .collect();
                assert!(indices.windows(2).all(|w| w[0] < w[1]), "{indices:?}");
                assert!(indices.iter().all(|&i| i < object.stats.functions));
            }
        }
        assert!(
            object.entries[Entry::View.index()].x64.len() > 1 || budget == 4_096,
            "a small budget gives several chunks"
        );
    }
}
