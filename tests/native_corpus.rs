//! Native code on every corpus game, against the interpreter and the independent prover's
//! traces: every trace replayed; seeded random playouts in lockstep with the interpreter; whole
//! value arrays on random (not only reachable) lane words for every entry; and the lane API at
//! 64 and 128 lanes with a different reachable state and joint move in every lane.
//!
//! `PROPJET_GAMES=name` restricts the corpus to games whose name contains `name`. Games that
//! compile at best slowly are left out as in the interpreter's corpus tests, and programs of
//! more than [`MAX_GATES`] gates are not lowered here (each is printed with its size): lowering
//! millions of gates with the verifier on takes minutes per game, more than CI can afford.

mod common;

use common::differential::{arrays_agree, lanes_agree, machines_agree, reachable};
use common::{
    assert_no_failures, compiles_at_best_slowly, corpus_games, corpus_traces, is_opaque, judge,
    playout_budget, run_all, stem, test_options,
};
use propjet::compare::{self, Report};
use propjet::compile;
use propjet::gdl;
use propjet::lower;
use propjet::trace;
use propjet_runtime::{Interpreter, Layout, Machine, Native, PackedState, Program, Rng, RoleIdx};
use std::path::Path;
use std::sync::Arc;

/// The most gates of a program lowered by these tests.
const MAX_GATES: usize = 250_000;

/// The start of the error text of a job that found its program too large to lower.
const TOO_LARGE: &str = "too large to lower in the tests";

fn games_dir() -> std::path::PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/games")).to_path_buf()
}

fn read_game(path: &Path) -> Result<gdl::Description, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))
}

/// The game compiled, run by the interpreter and by native code (the verifier on), both with
/// the evaluator of its opaque atoms if it has any.
fn engines(desc: &gdl::Description) -> Result<(Arc<Program>, Interpreter, Native), String> {
    let compiled = compile::compile(desc, &test_options()).map_err(|e| format!("does not compile: {e}"))?;
    if compiled.program.num_gates() > MAX_GATES {
        return Err(format!("{TOO_LARGE}: {} gates", compiled.program.num_gates()));
    }
    let interp = compiled
        .interpreter()
        .map_err(|e| format!("the interpreter refuses: {e}"))?;
    let program = Arc::clone(interp.program());
    let options = lower::Options {
        verifier: true,
        ..lower::Options::default()
    };
    let native = lower::lower_with(Arc::clone(&program), compiled.opaque.clone(), &options)
        .map_err(|e| format!("lowering fails: {e}"))?
        .native;
    Ok((program, interp, native))
}

/// A game with an opaque relation, whose states each cost top-down searches: native code
/// (which reads the opaque slots, its wrapper filling them) against the interpreter on the
/// reachable states of a short prefix only: the lanes at 64 and 128 with those states spread
/// over the lanes (so the fill meets several states in one call, in both halves of the wide
/// code), the single-state `Machine` methods, and a prefix in lockstep. Random words are left
/// out (a random state would demand searches in unreal positions), and so are lane rollouts:
/// the drivers check the depth limit every 64 steps, so even a rollout cut short plays 64
/// states of searches; `tests/native.rs` compares rollouts on random programs with opaque
/// atoms instead. The two engines share the evaluator, whose answers are cached by state, so
/// the second engine's searches are nearly free.
fn opaque_native_agrees(desc: &gdl::Description, name: &str) -> Result<Report, String> {
    let (program, interp, native) = engines(desc)?;
    if program.num_opaque() == 0 {
        return Err("listed in OPAQUE_GAMES, but has no opaque atom".to_string());
    }
    let mut rng = Rng::new(0x6f70_6171_7565);
    let steps = reachable_prefix(&interp, &program, &mut rng, 3)?;
    let (states, inputs): (Vec<PackedState>, Vec<Vec<u64>>) = steps.into_iter().unzip();
    lanes_agree(&program, &interp, &native, &states, &inputs)?;
    machines_agree(&program, &interp, &native, &states, &mut rng)?;
    if let Some(e) = native.opaque_error() {
        return Err(format!("the evaluator failed natively: {e}"));
    }
    let mut engines = vec![compare::cursor(&interp), compare::cursor(&native)];
    playout_budget(name, 3, 300).run(&mut engines, 1)
}

/// The first `count` states of one seeded playout of the interpreter, each with the joint move
/// played there (every role's first legal move after a random rotation).
fn reachable_prefix(
    interp: &Interpreter,
    program: &Program,
    rng: &mut Rng,
    count: usize,
) -> Result<Vec<(PackedState, Vec<u64>)>, String> {
    let mut out = Vec::new();
    let mut state = interp.initial_state();
    while out.len() < count && !interp.is_terminal(&state) {
        let mut joint = Vec::new();
        for r in 0..program.layout.roles.len() {
            let legal = interp.legal_moves(&state, RoleIdx(r as u32));
            if legal.is_empty() {
                return Err(format!("role {r} has no legal move after {} steps", out.len()));
            }
            joint.push(legal[rng.below(legal.len() as u32) as usize]);
        }
        let mut inputs = vec![0u64; Layout::words(program.num_inputs())];
        for m in &joint {
            inputs[m.index() / 64] |= 1 << (m.index() % 64);
        }
        out.push((state.clone(), inputs));
        state = interp.next_state(&state, &joint).map_err(|e| e.to_string())?;
    }
    if out.is_empty() {
        return Err("the initial state is terminal".to_string());
    }
    Ok(out)
}

/// The shared judgement, except that a program too large to lower here is a printed note.
fn judge_native(name: &str, result: &Result<Report, String>) -> Option<String> {
    match result {
        Err(e) if e.starts_with(TOO_LARGE) => {
            eprintln!("not lowered: {name}: {e}");
            None
        }
        _ => judge(name, result),
    }
}

#[test]
fn native_replays_every_corpus_trace_without_a_mismatch() {
    let Some(mut traces) = corpus_traces("the native trace replay") else {
        return;
    };
    traces.retain(|p| !compiles_at_best_slowly(p));
    let games = games_dir();
    let outcomes = run_all("native trace replay", &traces, |path| {
        let desc = read_game(&games.join(format!("{}.kif", stem(path))))?;
        let (_, _, native) = engines(&desc)?;
        let trace = trace::read_trace(path).map_err(|e| e.to_string())?;
        Ok(compare::replay_trace(&native, &trace))
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge_native(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

#[test]
fn native_agrees_with_the_interpreter_on_every_corpus_game() {
    let Some(mut games) = corpus_games("the native-interpreter comparison") else {
        return;
    };
    games.retain(|p| !compiles_at_best_slowly(p));
    let outcomes = run_all("native vs interpreter", &games, |path| {
        let desc = read_game(path)?;
        if is_opaque(&stem(path)) {
            return opaque_native_agrees(&desc, &stem(path));
        }
        let (program, interp, native) = engines(&desc)?;
        let mut rng = Rng::new(0x6e61_7469_7665);
        arrays_agree(&program, &interp, &native, &mut rng)?;
        let mut steps = reachable(&interp, &program, &mut rng, 128);
        if steps.is_empty() {
            // The initial state is terminal or a role has no move there: the lanes then hold
            // the initial state with no move.
            let no_move = vec![0u64; Layout::words(program.num_inputs())];
            steps.push((interp.initial_state(), no_move));
        }
        let (states, inputs): (Vec<PackedState>, Vec<Vec<u64>>) = steps.into_iter().unzip();
        lanes_agree(&program, &interp, &native, &states, &inputs)?;
        machines_agree(
            &program,
            &interp,
            &native,
            &states[..states.len().min(16)],
            &mut rng,
        )?;
        let mut engines = vec![compare::cursor(&interp), compare::cursor(&native)];
        compare::lockstep(&mut engines, 3, 1, 300).map_err(|e| e.to_string())
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge_native(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}
