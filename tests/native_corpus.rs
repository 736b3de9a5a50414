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
use propjet_runtime::{Interpreter, Layout, Machine, Native, PackedState, Program, Rng};
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

/// The game compiled, run by the interpreter and by native code (the verifier on).
fn engines(desc: &gdl::Description) -> Result<(Arc<Program>, Interpreter, Native), String> {
    let compiled = compile::compile(desc, &test_options()).map_err(|e| format!("does not compile: {e}"))?;
    if compiled.program.num_gates() > MAX_GATES {
        return Err(format!("{TOO_LARGE}: {} gates", compiled.program.num_gates()));
    }
    let program = Arc::new(compiled.program);
    let interp =
        Interpreter::new(Arc::clone(&program)).map_err(|e| format!("the interpreter refuses: {e}"))?;
    let options = lower::Options {
        verifier: true,
        ..lower::Options::default()
    };
    let native = lower::lower(Arc::clone(&program), &options)
        .map_err(|e| format!("lowering fails: {e}"))?
        .native;
    Ok((program, interp, native))
}

/// A game with an opaque relation: native code does not fill opaque atoms yet, so the engine
/// must say it runs the interpreter, and play like the interpreter (a short prefix: each state
/// costs a top-down search).
fn opaque_engine_falls_back(desc: &gdl::Description, name: &str) -> Result<Report, String> {
    let compiled = compile::compile(desc, &test_options()).map_err(|e| format!("does not compile: {e}"))?;
    let interp = compiled
        .interpreter()
        .map_err(|e| format!("the interpreter refuses: {e}"))?;
    let options = lower::Options {
        verifier: true,
        ..lower::Options::default()
    };
    let engine = lower::engine_with(
        Arc::new(compiled.program.clone()),
        compiled.opaque.clone(),
        &options,
    )
    .map_err(|e| format!("no engine: {e}"))?;
    match engine.fallback_reason() {
        Some(reason) if reason.contains("opaque") => {}
        other => {
            return Err(format!(
                "the engine should fall back for the opaque atoms, but says {other:?}"
            ))
        }
    }
    let mut engines = vec![compare::cursor(&interp), compare::cursor(&engine)];
    playout_budget(name, 3, 300).run(&mut engines, 1)
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
            return opaque_engine_falls_back(&desc, &stem(path));
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
