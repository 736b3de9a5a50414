//! dresden_corridor, the corpus game whose legal wall placements run a depth-first search that
//! cannot be grounded, played with `dfs/3` opaque (doc/opaque.md): the grounder grounds the
//! rest, the ground evaluator asks a reference evaluator for the `dfs` atoms a state needs, and
//! the whole must play exactly as the reference evaluator plays the game. The oracle is a
//! second reference instance, so the comparison's own reference shares no tables with it.
//!
//! The compiled game runs beside them in the same lockstep on native code, its wrapper filling
//! the opaque slots from the compiler's own top-down evaluator (`doc/opaque.md` §6), so the
//! whole pipeline, grounding through native code, is checked against the reference too.
//!
//! Wall placements are legal only where `dfs` finds a path, so the test also checks that the
//! initial state has `place` moves: a `dfs` that never held would leave none.

mod common;

use common::shared_dir;
use propjet::compare::{self, Cursor};
use propjet::compile;
use propjet::gdl;
use propjet::ground::{self, AtomKind, GroundLimits, GroundMachine, GroundOptions};
use propjet::lower;
use propjet::reference::Reference;
use propjet_runtime::{Machine, RoleIdx};
use std::sync::Arc;

#[test]
fn dresden_corridor_plays_like_the_reference_with_dfs_opaque() {
    let Some(shared) = shared_dir("the opaque corridor test") else {
        return;
    };
    let path = shared.join("games/dresden_corridor.kif");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let desc = gdl::parse(&text).unwrap_or_else(|e| panic!("the front end rejects the game: {e}"));
    let options = GroundOptions {
        opaque: vec!["dfs/3".to_string()],
    };
    let (g, _) = ground::ground_with_options(&desc, &GroundLimits::default(), &options)
        .unwrap_or_else(|e| panic!("the game does not ground with dfs/3 opaque: {e}"));
    g.check_invariants()
        .expect("the ground program keeps its invariants");
    assert!(
        g.atoms.iter().any(|a| a.kind == AtomKind::Opaque),
        "no dfs atom was made opaque"
    );

    let reference = Reference::new(&desc).expect("the reference takes the game");
    let oracle = Arc::new(Reference::new(&desc).expect("the reference takes the game"));
    let machine = GroundMachine::with_opaque(g, oracle).expect("the ground evaluator takes the program");
    let compiled = compile::compile(&desc, &compile::Options::default()).expect("the game compiles");
    assert_eq!(compiled.opaque_relations, ["dfs/3"]);
    let native = lower::engine_with(
        Arc::new(compiled.program.clone()),
        compiled.opaque.clone(),
        &lower::Options::default(),
    )
    .expect("an engine");
    assert_eq!(
        native.engine_name(),
        "native",
        "the engine falls back: {:?}",
        native.fallback_reason()
    );
    let mut engines: Vec<Box<dyn Cursor + '_>> = vec![
        compare::cursor(&reference),
        compare::cursor(&machine),
        compare::cursor(&native),
    ];
    // Each state costs up to a second of top-down search on both sides (the searches of up to
    // 128 wall placements), so one short playout.
    let report = compare::lockstep_prefix(&mut engines, 1, 11, 4).expect("the playouts run");
    assert!(
        report.is_clean(),
        "the opaque grounding disagrees with the reference: {report}"
    );
    assert!(report.states >= 4, "too few states compared: {report}");
    let (error, asked) = machine.opaque_log();
    assert_eq!(error, None, "the oracle failed");
    assert_eq!(
        native.opaque_error(),
        None,
        "the native engine's evaluator failed"
    );
    assert!(asked > 0, "no dfs atom was asked about");
    // Only the role in control can place a wall, from one pawn cell, so the demand of the
    // legal rules selects at most the 128 wall placements of that role per state.
    assert!(
        asked <= 128 * report.states,
        "{asked} dfs atoms asked in {} states: the demand lets more through than one role's",
        report.states
    );
    eprintln!("{report}; {asked} dfs atoms asked");
    // Asked after the count above: the evaluator keeps one state's values, so this asks again.
    let start = machine.initial_state();
    let places = (0..2)
        .flat_map(|r| machine.legal_moves(&start, RoleIdx::from_index(r)))
        .filter(|&m| machine.move_name(m).starts_with("(place"))
        .count();
    assert!(
        places > 0,
        "no wall placement is legal in the initial state: dfs never held"
    );
}
