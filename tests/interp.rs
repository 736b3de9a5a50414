//! The compiled net, run by the interpreter, against everything else: every trace of the
//! independent prover, the reference evaluator on seeded random playouts of every corpus game,
//! and the unoptimized net against the optimized one (each pass must leave the game as it was).
//!
//! `PROPJET_GAMES=name` restricts the corpus to games whose name contains `name`.

mod common;

use common::{
    assert_no_failures, compiles_at_best_slowly, corpus_games, corpus_traces, judge, playout_budget, run_all,
    stem, test_options,
};
use propjet::compare;
use propjet::compile::{self, Options};
use propjet::gdl;
use propjet::reference::Reference;
use propjet::trace;
use propjet_runtime::Interpreter;
use std::path::Path;

fn games_dir() -> std::path::PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/games")).to_path_buf()
}

fn read_game(path: &Path) -> Result<gdl::Description, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))
}

/// The interpreter of the game compiled with `options`, or the compile error as text.
fn interpreter(desc: &gdl::Description, options: &Options) -> Result<Interpreter, String> {
    let compiled = compile::compile(desc, options).map_err(|e| format!("does not compile: {e}"))?;
    compiled
        .interpreter()
        .map_err(|e| format!("the interpreter refuses the program: {e}"))
}

#[test]
fn interpreter_replays_every_corpus_trace_without_a_mismatch() {
    let Some(mut traces) = corpus_traces("the interpreter trace replay") else {
        return;
    };
    traces.retain(|p| !compiles_at_best_slowly(p));
    let games = games_dir();
    let outcomes = run_all("interpreter trace replay", &traces, |path| {
        let game = stem(path);
        let desc = read_game(&games.join(format!("{game}.kif")))?;
        let machine = interpreter(&desc, &test_options())?;
        let trace = trace::read_trace(path).map_err(|e| e.to_string())?;
        Ok(compare::replay_trace(&machine, &trace))
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

#[test]
fn interpreter_agrees_with_the_reference_on_every_corpus_game() {
    let Some(games) = corpus_games("the interpreter-reference comparison") else {
        return;
    };
    let outcomes = run_all("interpreter vs reference", &games, |path| {
        let desc = read_game(path)?;
        let interp = interpreter(&desc, &test_options())?;
        let reference = Reference::new(&desc).map_err(|e| format!("the reference refuses the game: {e}"))?;
        let mut engines = vec![compare::cursor(&reference), compare::cursor(&interp)];
        playout_budget(&stem(path), 2, 300).run(&mut engines, 1)
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

#[test]
fn optimized_net_plays_like_the_unoptimized_net_on_every_corpus_game() {
    let Some(mut games) = corpus_games("the optimization comparison") else {
        return;
    };
    games.retain(|p| !compiles_at_best_slowly(p));
    let outcomes = run_all("unoptimized vs optimized", &games, |path| {
        let desc = read_game(path)?;
        let plain = interpreter(
            &desc,
            &Options {
                optimize: false,
                ..test_options()
            },
        )?;
        let optimized = interpreter(&desc, &test_options())?;
        let mut engines = vec![compare::cursor(&plain), compare::cursor(&optimized)];
        playout_budget(&stem(path), 6, 500).run(&mut engines, 7)
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}
