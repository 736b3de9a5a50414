//! The rollout drivers against each other: the same seeded batch of rollouts must give the same
//! totals (rollouts, state changes, goal sums and the per-rollout fingerprint) on the reference
//! evaluator, the interpreter and native code one state at a time through `Machine`, and on
//! the lane drivers at every width, lane count and thread count. On the shipped games (with the
//! reference), from several start states, on a sample of corpus games, and on games made to
//! break a playout (no end, no legal move, two goals, a terminal initial state). A game with
//! dead ends (a role without a legal move in a non-terminal state: `tests/gdl/dead_end.kif`
//! and the corpus's 4pffa) must stall the same rollouts on every engine under [`Stall::End`],
//! and fail under [`Stall::Error`].
//!
//! `PROPJET_GAMES=name` restricts the corpus sample to games whose name contains `name`.

mod common;

use common::{assert_no_failures, compiles_at_best_slowly, corpus_games, judge, run_all, test_options};
use propjet::compare::Report;
use propjet::compile;
use propjet::gdl;
use propjet::lower;
use propjet::reference::Reference;
use propjet_runtime::{
    lane_rollouts, machine_rollouts, random_playout, random_playout_with, GoalRule, InputOrder, Interpreter,
    LaneEngine, Machine, MachineError, Native, PackedState, Plan, PlayoutError, Program, Rng, RolloutError,
    RolloutSource, Stall, Totals, Width,
};
use std::path::Path;
use std::sync::Arc;

/// The longest rollout these tests allow.
const MAX_DEPTH: u32 = 10_000;

/// The most gates of a corpus program played here: larger ones take a minute each to lower and
/// play, and the native corpus test covers their code.
const MAX_GATES: usize = 100_000;

struct Engines {
    program: Arc<Program>,
    interp: Interpreter,
    native: Native,
}

fn engines(desc: &gdl::Description) -> Result<Engines, String> {
    let compiled = compile::compile(desc, &test_options()).map_err(|e| format!("does not compile: {e}"))?;
    let program = Arc::new(compiled.program);
    let interp =
        Interpreter::new(Arc::clone(&program)).map_err(|e| format!("the interpreter refuses: {e}"))?;
    let native = lower::lower(Arc::clone(&program), &lower::Options::default())
        .map_err(|e| format!("lowering fails: {e}"))?
        .native;
    Ok(Engines {
        program,
        interp,
        native,
    })
}

fn parse(text: &str) -> gdl::Description {
    gdl::parse(text).expect("the test's game is valid GDL")
}

fn shipped(name: &str) -> gdl::Description {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("games")
        .join(format!("{name}.kif"));
    parse(&std::fs::read_to_string(&path).expect("a shipped game is readable"))
}

/// Every lane configuration: the interpreter's 64 lanes and fewer, native code on one lane, on
/// an odd number of lanes, and on every lane of each width.
fn lane_configs(e: &Engines) -> Vec<(String, LaneEngine<'_>, u32)> {
    let mut configs = vec![
        ("interp lanes 64".to_string(), LaneEngine::Interp(&e.interp), 64),
        ("interp lanes 7".to_string(), LaneEngine::Interp(&e.interp), 7),
        (
            "native single".to_string(),
            LaneEngine::Native(&e.native, Width::X64),
            1,
        ),
        (
            "native lanes 64".to_string(),
            LaneEngine::Native(&e.native, Width::X64),
            64,
        ),
    ];
    if e.native.has_width(Width::X128) {
        configs.push((
            "native lanes 128".to_string(),
            LaneEngine::Native(&e.native, Width::X128),
            128,
        ));
        configs.push((
            "native lanes 100 of 128".to_string(),
            LaneEngine::Native(&e.native, Width::X128),
            100,
        ));
    }
    configs
}

/// Rollouts `0..count` on `threads` threads of a lane configuration, totals merged.
fn lanes_totals(
    engine: LaneEngine<'_>,
    lanes: u32,
    plan: &Plan<'_, PackedState>,
    count: u64,
    threads: usize,
    roles: usize,
) -> Result<Totals, RolloutError> {
    let source = RolloutSource::count(count);
    let parts: Vec<Result<Totals, RolloutError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| lane_rollouts(engine, plan, &source, lanes, false).map(|(t, _)| t)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a driver does not panic"))
            .collect()
    });
    let mut totals = Totals::new(roles);
    for part in parts {
        totals.merge(&part?);
    }
    Ok(totals)
}

/// Checks every engine against the interpreter's `Machine` on rollouts `0..count` from
/// `starts`; with `reference`, that one too (from its initial state, so `starts` must then be
/// the initial state alone). Rollouts that reach a dead end end there ([`Stall::End`], what
/// the commands use). Returns the interpreter's totals.
fn all_agree(
    e: &Engines,
    reference: Option<&Reference>,
    starts: &[PackedState],
    seed: u64,
    count: u64,
) -> Result<Totals, String> {
    let roles = e.program.layout.roles.len();
    let plan = Plan {
        starts,
        seed,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::End,
    };
    let want = machine_rollouts(&e.interp, &plan, &RolloutSource::count(count)).map_err(|e| e.to_string())?;
    if want.rollouts != count {
        return Err(format!(
            "the interpreter played {} rollouts, not {count}",
            want.rollouts
        ));
    }
    let compare = |name: &str, got: Result<Totals, RolloutError>| -> Result<(), String> {
        let got = got.map_err(|err| format!("{name}: {err}"))?;
        if got != want {
            return Err(format!("{name} gives {got:?}, the interpreter {want:?}"));
        }
        Ok(())
    };
    if let Some(reference) = reference {
        let ordered = InputOrder::new(reference, &e.program.layout);
        let start = [reference.initial_state()];
        let plan = Plan {
            starts: &start,
            seed,
            max_depth: MAX_DEPTH,
            goals: GoalRule::Exact,
            stall: Stall::End,
        };
        compare(
            "reference",
            machine_rollouts(&ordered, &plan, &RolloutSource::count(count)),
        )?;
    }
    compare(
        "native machine",
        machine_rollouts(&e.native, &plan, &RolloutSource::count(count)),
    )?;
    for (name, engine, lanes) in lane_configs(e) {
        compare(&name, lanes_totals(engine, lanes, &plan, count, 1, roles))?;
    }
    let widest = if e.native.has_width(Width::X128) {
        Width::X128
    } else {
        Width::X64
    };
    compare(
        "native widest lanes on 2 threads",
        lanes_totals(
            LaneEngine::Native(&e.native, widest),
            widest.lanes(),
            &plan,
            count,
            2,
            roles,
        ),
    )?;
    Ok(want)
}

#[test]
fn every_engine_plays_the_same_seeded_rollouts_on_the_shipped_games() {
    for (game, count) in [
        ("tictactoe", 500),
        ("connectfour", 300),
        ("doubletictactoe", 300),
        ("buttons", 300),
        ("race", 200),
        ("breakthrough", 20),
    ] {
        let desc = shipped(game);
        let e = engines(&desc).unwrap_or_else(|err| panic!("{game}: {err}"));
        let reference = Reference::new(&desc).expect("the reference runs a shipped game");
        let start = [e.interp.initial_state()];
        let totals =
            all_agree(&e, Some(&reference), &start, 42, count).unwrap_or_else(|err| panic!("{game}: {err}"));
        // The totals must depend on the seed, or the check would not see the moves at all.
        let other = all_agree(&e, None, &start, 43, count).unwrap_or_else(|err| panic!("{game}: {err}"));
        assert_eq!(totals.rollouts, count, "{game}");
        if game != "buttons" {
            assert_ne!(
                totals.fingerprint, other.fingerprint,
                "{game}: seeds 42 and 43 play alike"
            );
        }
    }
}

#[test]
fn a_rollout_is_random_playout_with_its_own_generator() {
    // The drivers' totals are sums over `random_playout(.., Rng::for_rollout(seed, i), ..)`:
    // computed here directly, they must equal the batch's.
    let desc = shipped("tictactoe");
    let e = engines(&desc).expect("tictactoe compiles");
    let start = [e.interp.initial_state()];
    let plan = Plan {
        starts: &start,
        seed: 9,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::Error,
    };
    let mut want = Totals::new(2);
    for i in 0..200 {
        let mut rng = Rng::for_rollout(9, i);
        let p = random_playout(&e.interp, &start[0], &mut rng, MAX_DEPTH).expect("tictactoe ends");
        want.add(i, &p.goals, p.depth, p.stalled);
    }
    let (got, _) = lane_rollouts(
        LaneEngine::Native(&e.native, Width::X64),
        &plan,
        &RolloutSource::count(200),
        64,
        true,
    )
    .expect("the batch plays");
    assert_eq!(got, want);
}

#[test]
fn rollouts_from_several_start_states_agree() {
    for game in ["tictactoe", "connectfour", "race"] {
        let desc = shipped(game);
        let e = engines(&desc).unwrap_or_else(|err| panic!("{game}: {err}"));
        // Reachable start states: the states along a few seeded games, terminal ones included.
        let mut starts = vec![e.interp.initial_state()];
        let mut rng = Rng::new(5);
        for _ in 0..4 {
            let mut state = e.interp.initial_state();
            loop {
                starts.push(state.clone());
                if e.interp.is_terminal(&state) {
                    break;
                }
                let joint: Vec<_> = (0..e.program.layout.roles.len())
                    .map(|r| {
                        let legal = e.interp.legal_moves(&state, propjet_runtime::RoleIdx(r as u32));
                        legal[rng.below(legal.len() as u32) as usize]
                    })
                    .collect();
                state = e.interp.next_state(&state, &joint).expect("legal moves");
            }
        }
        assert!(starts.iter().any(|s| e.interp.is_terminal(s)));
        let totals = all_agree(&e, None, &starts, 7, 400).unwrap_or_else(|err| panic!("{game}: {err}"));
        assert!(totals.state_changes > 0, "{game}");
    }
}

#[test]
fn every_engine_agrees_on_a_sample_of_corpus_games() {
    let Some(mut games) = corpus_games("the rollout comparison") else {
        return;
    };
    games.retain(|p| !compiles_at_best_slowly(p));
    // The games of the throughput table and every sixth other game: enough variety (many roles,
    // simultaneous moves, long games) at a cost the suite can afford.
    let table = [
        "ticTacToe",
        "connectFour",
        "breakthrough",
        "knightThrough",
        "pentago",
        "nineBoardTicTacToe",
        "speedChess",
        "reversi",
    ];
    let sample: Vec<_> = games
        .iter()
        .enumerate()
        .filter(|(i, p)| i % 6 == 0 || table.iter().any(|t| common::stem(p) == *t))
        .map(|(_, p)| p.clone())
        .collect();
    let outcomes = run_all("rollout comparison", &sample, |path| {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let desc = gdl::parse(&text).map_err(|e| format!("the front end rejects the game: {e}"))?;
        let compiled =
            compile::compile(&desc, &test_options()).map_err(|e| format!("does not compile: {e}"))?;
        if compiled.program.num_gates() > MAX_GATES {
            eprintln!(
                "not lowered: {}: {} gates",
                common::stem(path),
                compiled.program.num_gates()
            );
            return Ok(Report {
                states: 1,
                ..Report::default()
            });
        }
        let e = engines(&desc)?;
        let start = [e.interp.initial_state()];
        // A game may break a rollout (no legal move, two goals): then every engine must report
        // the same kind of failure, which is checked, and the game counts as agreeing.
        match all_agree(&e, None, &start, 3, 30) {
            Ok(totals) => Ok(Report {
                states: totals.state_changes + 1,
                ..Report::default()
            }),
            Err(err) => failures_agree(&e, &start, err),
        }
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| judge(&o.name, &o.result))
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

/// When a batch fails, every engine must fail it alike: the interpreter's error kind, from the
/// `Machine` driver, must be what the lane drivers report too.
fn failures_agree(e: &Engines, starts: &[PackedState], first: String) -> Result<Report, String> {
    let plan = Plan {
        starts,
        seed: 3,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::End,
    };
    let want = match machine_rollouts(&e.interp, &plan, &RolloutSource::count(30)) {
        Err(RolloutError::Playout { error, .. }) => error,
        _ => return Err(first),
    };
    for (name, engine, lanes) in lane_configs(e) {
        match lane_rollouts(engine, &plan, &RolloutSource::count(30), lanes, false) {
            Err(RolloutError::Playout { error, .. }) if same_kind(&error, &want) => {}
            other => {
                return Err(format!(
                    "{name}: {other:?}, but the interpreter fails with {want}"
                ))
            }
        }
    }
    eprintln!("every engine fails alike: {want}");
    Ok(Report {
        states: 1,
        ..Report::default()
    })
}

fn same_kind(a: &PlayoutError, b: &PlayoutError) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// The kind of failure of rollouts `0..10` on every driver, which must be alike.
fn failure_everywhere(desc: &gdl::Description, max_depth: u32, stall: Stall) -> PlayoutError {
    let e = engines(desc).expect("the test's game compiles");
    let start = [e.interp.initial_state()];
    let plan = Plan {
        starts: &start,
        seed: 1,
        max_depth,
        goals: GoalRule::Exact,
        stall,
    };
    let want = match machine_rollouts(&e.interp, &plan, &RolloutSource::count(10)) {
        Err(RolloutError::Playout { error, .. }) => error,
        other => panic!("the interpreter should fail, but gives {other:?}"),
    };
    match machine_rollouts(&e.native, &plan, &RolloutSource::count(10)) {
        Err(RolloutError::Playout { error, .. }) => assert_eq!(error, want, "native machine"),
        other => panic!("native machine: {other:?}"),
    }
    for (name, engine, lanes) in lane_configs(&e) {
        match lane_rollouts(engine, &plan, &RolloutSource::count(10), lanes, false) {
            Err(RolloutError::Playout { error, .. }) => assert_eq!(error, want, "{name}"),
            other => panic!("{name}: {other:?}, but the interpreter fails with {want}"),
        }
    }
    want
}

#[test]
fn a_game_without_end_hits_the_depth_limit_on_every_driver() {
    let desc = shipped("tictactoe");
    assert_eq!(
        failure_everywhere(&desc, 3, Stall::End),
        PlayoutError::DepthLimit(3)
    );
}

#[test]
fn a_role_without_a_legal_move_fails_on_every_driver_under_the_strict_policy() {
    match failure_everywhere(&parse(STUCK_AT_TWO), 100, Stall::Error) {
        PlayoutError::NoLegalMove { role, depth } => assert_eq!((role.as_str(), depth), ("robot", 2)),
        other => panic!("{other}"),
    }
}

/// Robot may move only while the counter is below 2, but the game ends at 3: every rollout
/// reaches a dead end after two moves.
const STUCK_AT_TWO: &str = "(role robot) (init (c 0)) (succ 0 1) (succ 1 2) (succ 2 3)
     (<= (legal robot go) (true (c 0)))
     (<= (legal robot go) (true (c 1)))
     (<= (next (c ?y)) (true (c ?x)) (succ ?x ?y))
     (<= terminal (true (c 3)))
     (goal robot 100)";

#[test]
fn a_dead_end_ends_the_rollout_there_on_every_driver() {
    let desc = parse(STUCK_AT_TWO);
    let e = engines(&desc).expect("compiles");
    let reference = Reference::new(&desc).expect("the reference runs it");
    let start = [e.interp.initial_state()];
    let totals = all_agree(&e, Some(&reference), &start, 1, 200).expect("every engine agrees");
    // Every rollout stops after its two moves, with the goal of the state it stopped in.
    assert_eq!(
        (
            totals.rollouts,
            totals.stalled,
            totals.state_changes,
            totals.goals.clone()
        ),
        (200, 200, 400, vec![100 * 200])
    );
    let mut rng = Rng::new(1);
    let playout = random_playout_with(&reference, &reference.initial_state(), &mut rng, 100, Stall::End);
    assert_eq!(
        playout,
        Ok(propjet_runtime::Playout {
            goals: vec![100],
            depth: 2,
            stalled: true
        })
    );
}

/// The edge-case file whose random playouts reach a dead end on some paths.
fn dead_end_game() -> gdl::Description {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gdl/dead_end.kif");
    parse(&std::fs::read_to_string(&path).expect("tests/gdl/dead_end.kif is readable"))
}

#[test]
fn rollouts_that_reach_a_dead_end_on_some_paths_stall_alike_on_every_engine() {
    let desc = dead_end_game();
    let e = engines(&desc).expect("the dead-end game compiles");
    let reference = Reference::new(&desc).expect("the reference runs it");
    let ordered = InputOrder::new(&reference, &e.program.layout);
    let start = [e.interp.initial_state()];
    for seed in [5, 6] {
        let count = 400;
        // Each rollout one at a time on the reference, checked against the rules: a dead end
        // comes after one to four moves, where red scores 70 and blue, without a goal there, 0;
        // a game that is not trapped lasts five moves.
        let mut want = Totals::new(2);
        for i in 0..count {
            let mut rng = Rng::for_rollout(seed, i);
            let p = random_playout_with(
                &ordered,
                &reference.initial_state(),
                &mut rng,
                MAX_DEPTH,
                Stall::End,
            )
            .unwrap_or_else(|err| panic!("rollout {i}: {err}"));
            if p.stalled {
                assert!((1..=4).contains(&p.depth), "rollout {i}: {p:?}");
                assert_eq!(p.goals, vec![70, 0], "rollout {i}");
            } else {
                assert_eq!(p.depth, 5, "rollout {i}: {p:?}");
                assert!(p.goals == [100, 0] || p.goals == [25, 100], "rollout {i}: {p:?}");
            }
            want.add(i, &p.goals, p.depth, p.stalled);
        }
        // The chance that a game escapes the trap is (3/4)^4, about a third.
        assert!(
            want.stalled > count / 2 && want.stalled < count * 9 / 10,
            "seed {seed}: {} of {count} stalled",
            want.stalled
        );
        let totals =
            all_agree(&e, Some(&reference), &start, seed, count).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(totals, want, "seed {seed}");
    }
}

#[test]
fn the_strict_policy_reports_the_dead_end_on_every_driver() {
    let e = engines(&dead_end_game()).expect("the dead-end game compiles");
    let start = [e.interp.initial_state()];
    let plan = Plan {
        starts: &start,
        seed: 5,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::Error,
    };
    // Drivers may meet different rollouts' dead ends first, so they agree on the kind: blue
    // without a move after one to four moves.
    let check = |name: &str, got: Result<Totals, RolloutError>| match got {
        Err(RolloutError::Playout {
            error: PlayoutError::NoLegalMove { role, depth },
            ..
        }) => assert!(
            role == "blue" && (1..=4).contains(&depth),
            "{name}: {role} at {depth}"
        ),
        other => panic!("{name}: {other:?}"),
    };
    check(
        "interp machine",
        machine_rollouts(&e.interp, &plan, &RolloutSource::count(50)),
    );
    check(
        "native machine",
        machine_rollouts(&e.native, &plan, &RolloutSource::count(50)),
    );
    for (name, engine, lanes) in lane_configs(&e) {
        check(
            &name,
            lane_rollouts(engine, &plan, &RolloutSource::count(50), lanes, false).map(|(t, _)| t),
        );
    }
    // And `random_playout`, the strict single-state driver, on some seed.
    let failed = (0..50).any(|seed| {
        let got = random_playout(&e.interp, &start[0], &mut Rng::new(seed), MAX_DEPTH);
        matches!(got, Err(PlayoutError::NoLegalMove { .. }))
    });
    assert!(failed, "no seed reached a dead end");
}

#[test]
fn four_player_free_for_all_stalls_alike_on_every_engine() {
    // The corpus game whose rules leave a role without a move in some reachable positions.
    let Some(shared) = common::shared_dir("the 4pffa rollout comparison") else {
        return;
    };
    let path = shared.join("games").join("4pffa.kif");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let desc = parse(&text);
    let e = engines(&desc).expect("4pffa compiles");
    let reference = Reference::new(&desc).expect("the reference runs 4pffa");
    let start = [e.interp.initial_state()];
    // About one rollout in sixty stalls; the reference plays a few hundred a second.
    let totals = all_agree(&e, Some(&reference), &start, 2, 300).unwrap_or_else(|err| panic!("{err}"));
    assert!(
        totals.stalled > 0 && totals.stalled < totals.rollouts,
        "4pffa: {} of {} rollouts stalled",
        totals.stalled,
        totals.rollouts
    );
}

#[test]
fn two_goals_for_a_role_fail_on_every_driver() {
    let desc = parse(
        "(role robot) (init (c 0)) (<= (legal robot go) (true (c 0)))
         (<= (next (c 1)) (true (c 0)))
         (<= terminal (true (c 1)))
         (<= (goal robot 100) (true (c 1)))
         (<= (goal robot 50) (true (c 1)))
         (<= (goal robot 0) (true (c 0)))",
    );
    match failure_everywhere(&desc, 100, Stall::End) {
        PlayoutError::Machine(MachineError::GoalNotUnique { role, values }) => {
            assert_eq!((role.as_str(), values), ("robot", vec![50, 100]))
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_terminal_initial_state_gives_rollouts_of_depth_zero() {
    let desc = parse(
        "(role robot) (init (c 0)) (<= (legal robot go) (true (c 0)))
         (<= (next (c 0)) (true (c 0)))
         (<= terminal (true (c 0)))
         (<= (goal robot 70) (true (c 0)))",
    );
    let e = engines(&desc).expect("compiles");
    let reference = Reference::new(&desc).expect("the reference runs it");
    let start = [e.interp.initial_state()];
    let totals = all_agree(&e, Some(&reference), &start, 1, 300).expect("every engine agrees");
    assert_eq!(
        (totals.rollouts, totals.state_changes, totals.goals.clone()),
        (300, 0, vec![70 * 300])
    );
}

#[test]
fn lane_counts_beyond_the_width_are_refused() {
    let e = engines(&shipped("tictactoe")).expect("compiles");
    let start = [e.interp.initial_state()];
    let plan = Plan {
        starts: &start,
        seed: 1,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::End,
    };
    for (engine, lanes) in [
        (LaneEngine::Interp(&e.interp), 0),
        (LaneEngine::Interp(&e.interp), 65),
        (LaneEngine::Native(&e.native, Width::X64), 65),
        (LaneEngine::Native(&e.native, Width::X128), 129),
    ] {
        let got = lane_rollouts(engine, &plan, &RolloutSource::count(1), lanes, false);
        assert!(
            matches!(got, Err(RolloutError::Lanes { asked, .. }) if asked == lanes),
            "{got:?}"
        );
    }
    let empty: [PackedState; 0] = [];
    let no_start = Plan {
        starts: &empty,
        seed: 1,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::End,
    };
    assert_eq!(
        machine_rollouts(&e.interp, &no_start, &RolloutSource::count(1)),
        Err(RolloutError::NoStart)
    );
    let short = [PackedState::empty(e.program.num_bases() + 64)];
    let wrong = Plan {
        starts: &short,
        seed: 1,
        max_depth: MAX_DEPTH,
        goals: GoalRule::Exact,
        stall: Stall::End,
    };
    let got = lane_rollouts(
        LaneEngine::Interp(&e.interp),
        &wrong,
        &RolloutSource::count(1),
        64,
        false,
    );
    assert!(matches!(got, Err(RolloutError::StartSize { .. })), "{got:?}");
}

#[test]
fn the_lenient_goal_rule_takes_the_highest_value_or_zero_on_every_driver() {
    // Robot's terminal state has goals 50 and 100 and the other role's none.
    let desc = parse(
        "(role robot) (role other) (init (c 0))
         (<= (legal robot go) (true (c 0))) (<= (legal other wait) (true (c 0)))
         (<= (next (c 1)) (true (c 0)))
         (<= terminal (true (c 1)))
         (<= (goal robot 100) (true (c 1)))
         (<= (goal robot 50) (true (c 1)))
         (<= (goal robot 0) (true (c 0)))
         (<= (goal other 10) (true (c 0)))",
    );
    let e = engines(&desc).expect("compiles");
    let start = [e.interp.initial_state()];
    let plan = Plan {
        starts: &start,
        seed: 1,
        max_depth: MAX_DEPTH,
        goals: GoalRule::HighestOrZero,
        stall: Stall::End,
    };
    let want = machine_rollouts(&e.interp, &plan, &RolloutSource::count(100)).expect("lenient");
    assert_eq!(
        (want.goals.clone(), want.state_changes),
        (vec![100 * 100, 0], 100)
    );
    assert_eq!(
        machine_rollouts(&e.native, &plan, &RolloutSource::count(100)),
        Ok(want.clone())
    );
    for (name, engine, lanes) in lane_configs(&e) {
        let got = lane_rollouts(engine, &plan, &RolloutSource::count(100), lanes, false).map(|(t, _)| t);
        assert_eq!(got, Ok(want.clone()), "{name}");
    }
}
