//! Native code on every corpus game, against the interpreter and the independent prover's
//! traces: every trace replayed; seeded random playouts in lockstep with the interpreter; whole
//! value arrays on random (not only reachable) lane words for every entry; and the lane API at
//! 64 and 128 lanes with a different reachable state and joint move in every lane.
//!
//! `PROPJET_GAMES=name` restricts the corpus to games whose name contains `name`.

mod common;

use common::differential::{arrays_agree, lanes_agree, machines_agree};
use common::{assert_no_failures, corpus_games, corpus_traces, run_all, stem};
use propjet::compare::{self, Report};
use propjet::compile::{self, Options};
use propjet::gdl;
use propjet::lower;
use propjet::trace;
use propjet_runtime::{Interpreter, Layout, Machine, MoveIdx, Native, PackedState, Program, Rng, RoleIdx};
use std::path::Path;
use std::sync::Arc;

fn games_dir() -> std::path::PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/games")).to_path_buf()
}

fn read_game(path: &Path) -> Result<gdl::Description, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))
}

/// The game compiled, run by the interpreter and by native code (the verifier on).
fn engines(desc: &gdl::Description) -> Result<(Arc<Program>, Interpreter, Native), String> {
    let compiled =
        compile::compile(desc, &Options::default()).map_err(|e| format!("does not compile: {e}"))?;
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

fn judge(name: &str, result: &Result<Report, String>) -> Option<String> {
    match result {
        Ok(r) if r.is_clean() && r.states > 0 => None,
        Ok(r) if r.is_clean() => Some(format!("{name}: no state was compared")),
        Ok(r) => Some(format!("{name}: {r}")),
        Err(e) => Some(format!("{name}: {e}")),
    }
}

#[test]
fn native_replays_every_corpus_trace_without_a_mismatch() {
    let Some(traces) = corpus_traces("the native trace replay") else {
        return;
    };
    let games = games_dir();
    let outcomes = run_all("native trace replay", &traces, |path| {
        let desc = read_game(&games.join(format!("{}.kif", stem(path))))?;
        let (_, _, native) = engines(&desc)?;
        let trace = trace::read_trace(path).map_err(|e| e.to_string())?;
        Ok(compare::replay_trace(&native, &trace))
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

/// Reachable states with a random joint move each (legal for every role), from seeded random
/// playouts of the interpreter, until `count` are collected or the playouts run out.
fn reachable(
    interp: &Interpreter,
    program: &Program,
    rng: &mut Rng,
    count: usize,
) -> Vec<(PackedState, Vec<u64>)> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let mut state = interp.initial_state();
        for _ in 0..200 {
            if out.len() == count || interp.is_terminal(&state) {
                break;
            }
            let mut joint = Vec::new();
            for r in 0..program.layout.roles.len() {
                let legal = interp.legal_moves(&state, RoleIdx(r as u32));
                if legal.is_empty() {
                    break;
                }
                joint.push(legal[rng.below(legal.len() as u32) as usize]);
            }
            if joint.len() != program.layout.roles.len() {
                break;
            }
            let mut inputs = vec![0u64; Layout::words(program.num_inputs())];
            for &MoveIdx(m) in &joint {
                inputs[m as usize / 64] |= 1 << (m % 64);
            }
            out.push((state.clone(), inputs));
            match interp.next_state_unchecked(&state, &joint) {
                Ok(next) => state = next,
                Err(_) => break,
            }
        }
    }
    out
}

#[test]
fn native_agrees_with_the_interpreter_on_every_corpus_game() {
    let Some(games) = corpus_games("the native-interpreter comparison") else {
        return;
    };
    let outcomes = run_all("native vs interpreter", &games, |path| {
        let desc = read_game(path)?;
        let (program, interp, native) = engines(&desc)?;
        let mut rng = Rng::new(0x6e61_7469_7665);
        arrays_agree(&program, &interp, &native, &mut rng)?;
        let steps = reachable(&interp, &program, &mut rng, 128);
        if steps.is_empty() {
            return Err("no reachable non-terminal state to put in the lanes".to_string());
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
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}
