//! The corpus games that compile only with the default limits, and slowly (`common::LARGE_GAMES`:
//! the chess variants), checked in full: each is compiled once with the default limits, and its
//! interpreter replays the independent prover's trace of the game and plays seeded random
//! playouts in lockstep with the reference evaluator; native code (the direct x86-64 generator
//! where the host has it, which lowers a million gates in seconds, Cranelift elsewhere) replays
//! the trace too. Chess must not factor.
//!
//! The other corpus tests leave these games out (or accept a limit error from them under their
//! tighter budget), so this is where they are checked. `PROPJET_GAMES=name` restricts the run.

mod common;

use common::{assert_no_failures, corpus_games, is_large, run_all, stem};
use propjet::analysis;
use propjet::compare::{self, Report};
use propjet::compile::{self, Options};
use propjet::gdl;
use propjet::lower;
use propjet::reference::Reference;
use propjet::trace;
use propjet_runtime::{Interpreter, Program};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default limits, with room for grounding on a loaded machine: these games ground in
/// about a minute when the machine is busy.
fn options() -> Options {
    let mut o = Options::default();
    o.ground.max_time = Duration::from_secs(600);
    o
}

/// Everything checked on one game; the report sums the comparisons.
fn check_game(path: &Path) -> Result<Report, String> {
    let name = stem(path);
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let desc = gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))?;
    let start = Instant::now();
    let compiled = compile::compile(&desc, &options()).map_err(|e| format!("does not compile: {e}"))?;
    eprintln!(
        "{name}: compiled in {:.1} s: {} ground rules, {} gates",
        start.elapsed().as_secs_f64(),
        compiled.ground_rules,
        compiled.program.num_gates()
    );
    if name == "chess" {
        let a = analysis::analyze(&compiled.net);
        if let Ok(f) = &a.factoring {
            return Err(format!("chess factors into {} factors", f.factors.len()));
        }
    }
    let program = Arc::new(compiled.program);
    let interp =
        Interpreter::new(Arc::clone(&program)).map_err(|e| format!("the interpreter refuses: {e}"))?;

    let trace_path = path
        .parent()
        .and_then(Path::parent)
        .expect("games lie in shared/games")
        .join("traces")
        .join(format!("{name}.jsonl"));
    let trace = trace::read_trace(&trace_path).map_err(|e| e.to_string())?;
    let mut report = compare::replay_trace(&interp, &trace);
    if !report.is_clean() {
        return Err(format!("interpreter against the trace: {report}"));
    }

    let native = native(&program)?;
    let on_native = compare::replay_trace(&native, &trace);
    if !on_native.is_clean() {
        return Err(format!("native code against the trace: {on_native}"));
    }
    report.states += on_native.states;

    let reference = Reference::new(&desc).map_err(|e| format!("the reference refuses the game: {e}"))?;
    let mut engines = vec![compare::cursor(&reference), compare::cursor(&interp)];
    let played = compare::lockstep(&mut engines, 1, 3, 1000).map_err(|e| e.to_string())?;
    if !played.is_clean() {
        return Err(format!("interpreter against the reference: {played}"));
    }
    report.states += played.states;
    Ok(report)
}

/// The program lowered to native code by the quickest generator the host has.
fn native(program: &Arc<Program>) -> Result<propjet_runtime::Native, String> {
    let options = lower::Options {
        backend: lower::Backend::Auto,
        ..lower::Options::default()
    };
    lower::lower(Arc::clone(program), &options)
        .map(|l| l.native)
        .map_err(|e| format!("lowering fails: {e}"))
}

#[test]
fn large_games_agree_with_their_traces_and_the_reference() {
    let Some(games) = corpus_games("the large games test") else {
        return;
    };
    let games: Vec<_> = games.into_iter().filter(|p| is_large(&stem(p))).collect();
    if std::env::var_os("PROPJET_GAMES").is_none() {
        assert_eq!(
            games.len(),
            common::LARGE_GAMES.len(),
            "every large game is in the corpus"
        );
    }
    let outcomes = run_all("large games", &games, check_game);
    let mut failures = Vec::new();
    for o in &outcomes {
        match &o.result {
            Ok(r) if r.states > 0 => eprintln!("{}: {r}", o.name),
            Ok(_) => failures.push(format!("{}: no state was compared", o.name)),
            Err(e) => failures.push(format!("{}: {e}", o.name)),
        }
    }
    assert_no_failures(&failures, outcomes.len());
}
