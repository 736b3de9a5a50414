//! The grounder, through the naive ground evaluator, replays every trace of the corpus
//! (../shared/traces), written by an independent prover, with zero mismatches: the differential
//! test of the grounder on its own, before any net is built.
//!
//! Every game is grounded within the default limits, the slow ones included, so that every
//! trace the grounder can handle is replayed. The games it cannot ground at all (listed in
//! `tests/common/mod.rs`, checked with their errors by `tests/ground_corpus.rs`) are left out.
//! `PROPJET_GAMES=name` replays only the traces whose name contains `name`.

mod common;

use common::{assert_no_failures, corpus_traces, expected_failure, is_large, judge, run_all, stem};
use propjet::compare;
use propjet::gdl;
use propjet::ground::{self, GroundLimits, GroundMachine};
use propjet::trace;
use std::path::Path;

/// Parses and grounds the game, builds the ground evaluator and replays the trace.
fn replay_game(games: &Path, trace_path: &Path, game: &str) -> Result<compare::Report, String> {
    let kif = games.join(format!("{game}.kif"));
    let text = std::fs::read_to_string(&kif).map_err(|e| format!("cannot read {}: {e}", kif.display()))?;
    let desc = gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))?;
    let grounded =
        ground::ground(&desc, &GroundLimits::default()).map_err(|e| format!("does not compile: {e}"))?;
    let machine =
        GroundMachine::new(grounded).map_err(|e| format!("the ground evaluator refuses the program: {e}"))?;
    let trace = trace::read_trace(trace_path).map_err(|e| e.to_string())?;
    if trace.playouts.iter().any(|p| p.header.game != game) {
        return Err(format!("{} holds playouts of another game", trace_path.display()));
    }
    Ok(compare::replay_trace(&machine, &trace))
}

#[test]
fn ground_program_replays_every_corpus_trace_without_a_mismatch() {
    let Some(mut traces) = corpus_traces("the ground trace replay") else {
        return;
    };
    // The large games' ground programs have ten million rules, too many for the naive ground
    // evaluator; tests/large_games.rs replays their traces through the interpreter.
    traces.retain(|p| expected_failure(&stem(p)).is_none() && !is_large(&stem(p)));
    let games = traces[0]
        .parent()
        .and_then(Path::parent)
        .expect("traces lie in shared/traces")
        .join("games");
    let outcomes = run_all("ground program trace replay", &traces, |path| {
        replay_game(&games, path, &stem(path))
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}
