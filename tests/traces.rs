//! The reference evaluator replays every trace of the corpus (../shared/traces), written by an
//! independent prover, with zero mismatches.
//!
//! All games run, on two threads; a game that fails (a mismatch, a description the front end
//! rejects, an evaluator that refuses the game or panics) is collected with its reason, and the
//! test fails at the end listing every failure, so one broken game never hides another.
//!
//! While working on one game, `PROPJET_GAMES=name` replays only the traces whose name contains
//! `name`; without it (as in CI) every trace runs.

use propjet::compare::{self, Report};
use propjet::gdl;
use propjet::reference::Reference;
use propjet::trace;
use std::io::Write;
use std::path::Path;

mod common;

/// Games where the reference evaluator is known to disagree with its trace, with the first
/// mismatch it gives (step and what differs). Each entry is checked: the game must still fail
/// exactly so, and a game that starts to agree fails the test until its entry is removed. An
/// entry is a FIXME with the reason beside it; today there is none.
const KNOWN_DISAGREEMENTS: &[(&str, u32, &str)] = &[];

/// Parses the game, builds the reference evaluator and replays the trace.
fn replay_game(games: &Path, trace_path: &Path, game: &str) -> Result<Report, String> {
    let kif = games.join(format!("{game}.kif"));
    let text = std::fs::read_to_string(&kif).map_err(|e| format!("cannot read {}: {e}", kif.display()))?;
    let desc = gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))?;
    let machine =
        Reference::new(&desc).map_err(|e| format!("the reference evaluator refuses the game: {e}"))?;
    let trace = trace::read_trace(trace_path).map_err(|e| e.to_string())?;
    if trace.playouts.iter().any(|p| p.header.game != game) {
        return Err(format!("{} holds playouts of another game", trace_path.display()));
    }
    Ok(compare::replay_trace(&machine, &trace))
}

#[test]
fn reference_replays_every_corpus_trace_without_a_mismatch() {
    let Some(traces) = common::corpus_traces("the trace replay test") else {
        return;
    };
    let games = traces[0]
        .parent()
        .and_then(Path::parent)
        .expect("traces lie in shared/traces")
        .join("games");
    let outcomes = common::run_all("reference trace replay", &traces, |path| {
        replay_game(&games, path, &common::stem(path))
    });
    let states: u64 = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok())
        .map(|r| r.states)
        .sum();
    eprintln!("reference trace replay: {states} states compared");
    let failures: Vec<String> = outcomes.iter().filter_map(judge).collect();
    common::assert_no_failures(&failures, outcomes.len());
}

/// Why a game's outcome fails the test, or `None` when it passes.
fn judge(o: &common::Outcome<Report>) -> Option<String> {
    let known = KNOWN_DISAGREEMENTS.iter().find(|(game, _, _)| *game == o.name);
    match (&o.result, known) {
        (Err(reason), _) => Some(format!("{}: {reason}", o.name)),
        (Ok(report), None) if report.is_clean() && report.states > 0 => None,
        (Ok(report), None) if report.is_clean() => Some(format!("{}: no state was compared", o.name)),
        (Ok(report), None) => Some(format!("{}: {report}", o.name)),
        (Ok(report), Some((_, step, aspect))) => match &report.first {
            Some(m) if m.step == *step && m.aspect.to_string() == *aspect => {
                let _ = writeln!(std::io::stderr(), "known disagreement (FIXME): {}: {m}", o.name);
                None
            }
            Some(_) => Some(format!(
                "{}: disagrees differently from its known disagreement (step {step}: {aspect}): {report}",
                o.name
            )),
            None => Some(format!(
                "{}: now agrees with its trace; remove it from KNOWN_DISAGREEMENTS",
                o.name
            )),
        },
    }
}
