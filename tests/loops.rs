//! Recursion built as loops against recursion unrolled (`doc/propnet.md`, "Recursion as
//! loops"): the same game compiled both ways must give the same legal, goal, terminal and next
//! bits and the same value of every view proposition both have, in every lane, on reachable
//! states and on random ones (any assignment of the bases, one move per role).

mod common;

use common::differential::{random_state, reachable};
use common::test_options;
use propjet::compile::{self, Compiled, Options};
use propjet::gdl;
use propjet::net::Recursion;
use propjet_runtime::{Entry, Interpreter, Layout, Lit, Program, Rng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn compile_with(desc: &gdl::Description, recursion: Recursion, optimize: bool) -> Compiled {
    let mut options: Options = test_options();
    options.net.recursion = recursion;
    options.optimize = optimize;
    compile::compile(desc, &options).expect("the game compiles")
}

fn gdl_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gdl")).to_path_buf()
}

/// The value array of `program` after every entry ran on lanes holding `states` and `inputs`.
fn run_all(interp: &Interpreter, states: &[(Vec<u64>, Vec<u64>)]) -> Vec<Vec<u64>> {
    let mut values = interp.new_values();
    for (lane, (state, inputs)) in states.iter().enumerate() {
        let state = propjet_runtime::PackedState::from_words(state.clone());
        interp
            .spread_state(&state, lane as u32, &mut values)
            .expect("a state");
        interp
            .spread_inputs(inputs, lane as u32, &mut values)
            .expect("inputs");
    }
    Entry::ALL
        .iter()
        .map(|&e| {
            let mut v = values.clone();
            interp.eval(e, &mut v).expect("the entry runs");
            v
        })
        .collect()
}

fn word(values: &[u64], lit: Lit) -> u64 {
    Interpreter::read(values, lit).expect("in range")
}

/// Compares the two programs on the lanes `states` (at most 64), every output and every view
/// both name; returns how many views were compared.
fn agree(
    a: &Program,
    b: &Program,
    ia: &Interpreter,
    ib: &Interpreter,
    states: &[(Vec<u64>, Vec<u64>)],
) -> usize {
    assert_eq!(a.layout.bases, b.layout.bases, "the same bases");
    assert_eq!(a.layout.inputs, b.layout.inputs, "the same inputs");
    let lanes = if states.len() == 64 {
        !0
    } else {
        (1u64 << states.len()) - 1
    };
    let (va, vb) = (run_all(ia, states), run_all(ib, states));
    for (k, &entry) in Entry::ALL.iter().enumerate() {
        if entry == Entry::View {
            continue;
        }
        for (i, (&la, &lb)) in a.outputs(entry).iter().zip(b.outputs(entry)).enumerate() {
            assert_eq!(
                word(&va[k], la) & lanes,
                word(&vb[k], lb) & lanes,
                "entry {entry:?} output {i}"
            );
        }
    }
    let k = Entry::View.index();
    let named: HashMap<&str, Lit> = b
        .layout
        .views
        .iter()
        .map(String::as_str)
        .zip(b.views.iter().copied())
        .collect();
    let mut compared = 0;
    for (name, &la) in a.layout.views.iter().zip(&a.views) {
        if let Some(&lb) = named.get(name.as_str()) {
            assert_eq!(word(&va[k], la) & lanes, word(&vb[k], lb) & lanes, "view {name}");
            compared += 1;
        }
    }
    compared
}

/// Compiles `path` unrolled and as loops (optimized, and as loops unoptimized) and compares
/// them on reachable and random states; returns the loops of the optimized program.
fn check_game(path: &Path, seed: u64) -> usize {
    let text = std::fs::read_to_string(path).expect("the game is readable");
    let desc = gdl::parse(&text).expect("the game parses");
    let unrolled = compile_with(&desc, Recursion::Unroll, true);
    let looped = compile_with(&desc, Recursion::Loop, true);
    let raw = compile_with(&desc, Recursion::Loop, false);
    assert!(unrolled.program.loops.loops.is_empty(), "unrolled means no loop");
    let iu = unrolled.interpreter().expect("valid");
    let il = looped.interpreter().expect("valid");
    let ir = raw.interpreter().expect("valid");
    let mut rng = Rng::new(seed);
    let p = &unrolled.program;
    let mut batches: Vec<Vec<(Vec<u64>, Vec<u64>)>> = Vec::new();
    let reach: Vec<_> = reachable(&iu, p, &mut rng, 128)
        .into_iter()
        .map(|(s, i)| (s.words().to_vec(), i))
        .collect();
    batches.extend(reach.chunks(64).map(<[_]>::to_vec));
    for _ in 0..3 {
        let batch = (0..64)
            .map(|_| {
                let state = random_state(&mut rng, p.num_bases()).words().to_vec();
                let mut inputs = vec![0u64; Layout::words(p.num_inputs())];
                for range in &p.layout.role_inputs {
                    if range.end > range.start {
                        let m = range.start + rng.below(range.end - range.start);
                        inputs[m as usize / 64] |= 1 << (m % 64);
                    }
                }
                (state, inputs)
            })
            .collect();
        batches.push(batch);
    }
    let mut views = 0;
    for batch in &batches {
        views += agree(p, &looped.program, &iu, &il, batch);
        agree(p, &raw.program, &iu, &ir, batch);
    }
    assert!(views > 0, "some view compared");
    looped.program.loops.loops.len()
}

#[test]
fn small_recursive_games_agree_unrolled_and_as_loops() {
    let games = [
        ("loop_grid_reachability", 1),
        ("loop_counter_ring", 1),
        ("loop_mutual_recursion", 2),
        ("loop_reads_loop", 2),
        ("logic_loop_positive", 1),
        // Recursion the grounder resolves leaves no loop.
        ("recursion_transitive_closure", 0),
        ("recursion_across_relations", 0),
    ];
    for (k, (name, loops)) in games.iter().enumerate() {
        let got = check_game(&gdl_dir().join(format!("{name}.kif")), k as u64);
        assert_eq!(got, *loops, "{name}: loops");
    }
}

#[test]
fn lines_of_action_agrees_unrolled_and_as_loops() {
    let Some(dir) = common::shared_dir("lines of action, loops") else {
        return;
    };
    let loops = check_game(&dir.join("games/linesOfAction.kif"), 7);
    assert_eq!(loops, 128, "2 players by 64 source cells");
}

/// The loops of a program run until nothing changes: on the ring of six atoms seeded at one
/// cell with every cell on, the seed's value has to travel five steps, which needs six rounds
/// (five that change something and one that does not).
#[test]
fn a_loop_runs_until_its_last_atom_is_reached() {
    let text = std::fs::read_to_string(gdl_dir().join("loop_counter_ring.kif")).expect("readable");
    let desc = gdl::parse(&text).expect("parses");
    let looped = compile_with(&desc, Recursion::Loop, true);
    let interp = looped.interpreter().expect("valid");
    let p = &looped.program;
    let mut values = interp.new_values();
    let base = |name: &str| p.layout.bases.iter().position(|b| b == name).expect("a base") as u32;
    // Lane 0: every cell on, seed at 3; lane 1: nothing on, seed at 3.
    for k in 1..=6 {
        values[p.base_slot(base(&format!("(on {k})")) as usize) as usize] = 1;
    }
    values[p.base_slot(base("(seed 3)") as usize) as usize] = 0b11;
    interp.eval(Entry::Terminal, &mut values).expect("runs");
    assert_eq!(
        word(&values, p.terminal) & 0b11,
        0b01,
        "lane 0 reaches every cell, lane 1 only 3"
    );
}

/// Native code of a program with loops against the interpreter, at every backend the host has,
/// both widths, 64 lanes compiled or run on the 128-lane code, chunks small enough to cut a
/// body into several, and every way of sharing chunks between entries: whole value arrays
/// (the feedback slots included), the lane API and the single-state methods.
fn native_agrees(path: &Path, seed: u64, costs: &[usize]) {
    use common::differential::{arrays_agree, lanes_agree, machines_agree};
    use propjet::lower::{self, Backend, Narrow, Sharing};
    let text = std::fs::read_to_string(path).expect("the game is readable");
    let desc = gdl::parse(&text).expect("the game parses");
    let looped = compile_with(&desc, Recursion::Loop, true);
    assert!(
        !looped.program.loops.loops.is_empty(),
        "{}: loops",
        path.display()
    );
    let interp = looped.interpreter().expect("valid");
    let program = std::sync::Arc::clone(interp.program());
    let mut rng = Rng::new(seed);
    let (states, inputs): (Vec<_>, Vec<_>) = reachable(&interp, &program, &mut rng, 40).into_iter().unzip();
    for backend in [Backend::Cranelift, Backend::X64] {
        for narrow in [Narrow::Compiled, Narrow::FromWide] {
            for sharing in [Sharing::Auto, Sharing::Separate, Sharing::Shared] {
                for &chunk_cost in costs {
                    let options = lower::Options {
                        verifier: true,
                        backend,
                        narrow,
                        sharing,
                        chunk_cost,
                        ..lower::Options::default()
                    };
                    let native = match lower::lower(std::sync::Arc::clone(&program), &options) {
                        Ok(lowered) => lowered.native,
                        // The direct generator exists on x86-64 System V hosts only.
                        Err(lower::LowerError::UnsupportedHost(_)) if backend == Backend::X64 => continue,
                        Err(e) => panic!("{}: lowering fails: {e}", path.display()),
                    };
                    let what = format!(
                        "{} {backend:?} {narrow:?} {sharing:?} {chunk_cost}",
                        path.display()
                    );
                    arrays_agree(&program, &interp, &native, &mut rng)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    lanes_agree(&program, &interp, &native, &states, &inputs)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    machines_agree(&program, &interp, &native, &states, &mut rng)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                }
            }
        }
    }
}

#[test]
fn native_code_runs_loops_as_the_interpreter_does() {
    let games = [
        "loop_grid_reachability",
        "loop_counter_ring",
        "loop_mutual_recursion",
        "loop_reads_loop",
        "logic_loop_positive",
    ];
    for (k, name) in games.iter().enumerate() {
        native_agrees(
            &gdl_dir().join(format!("{name}.kif")),
            100 + k as u64,
            &[4, 1_000_000],
        );
    }
}

#[test]
fn native_code_runs_the_loops_of_lines_of_action() {
    let Some(dir) = common::shared_dir("lines of action, native loops") else {
        return;
    };
    native_agrees(&dir.join("games/linesOfAction.kif"), 9, &[300, 20_000]);
}

/// The object path has no harness for loops: it says so rather than emit code that skips them.
#[test]
fn the_object_path_refuses_loops() {
    use propjet::lower::{self, object};
    let text = std::fs::read_to_string(gdl_dir().join("loop_counter_ring.kif")).expect("readable");
    let desc = gdl::parse(&text).expect("parses");
    let looped = compile_with(&desc, Recursion::Loop, true);
    let target: target_lexicon::Triple = "aarch64-unknown-linux-gnu".parse().expect("a triple");
    match object::emit(&looped.program, &target, &lower::Options::default()) {
        Err(e) => assert!(e.to_string().contains("loops"), "{e}"),
        Ok(_) => panic!("the object path emitted a program with loops"),
    }
}
