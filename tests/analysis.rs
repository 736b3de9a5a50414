//! Structure analysis: the expected factoring of the conjoined-looking corpus games and of the
//! single games, the factor differential test (the factors replayed alongside seeded playouts
//! of the whole game, by the interpreter and by native code), latch soundness on playouts, and
//! the latch proofs against a plain reference evaluation on random programs.
//!
//! `PROPJET_GAMES=name` restricts the corpus latch test to games whose name contains `name`.

mod common;

use common::random_program::{random_program, Shape};
use common::{
    assert_no_failures, compiles_at_best_slowly, corpus_games, expected_failure, is_opaque, run_all,
    shared_dir, test_options, SLOW_GAMES,
};
use propjet::analysis::{self, Factoring};
use propjet::compile;
use propjet::gdl;
use propjet::lower;
use propjet::net::{BaseProp, GoalProp, InputProp, Node, NodeId, Propnet};
use propjet_runtime::{
    Engine, Entry, Interpreter, Lit, Machine, MoveIdx, Op, PackedState, Program, Rng, RoleIdx,
};
use std::path::Path;
use std::sync::Arc;

/// What the analysis must find for a game.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// This many factors.
    Factors(usize),
    /// No factors; the reason must contain this text.
    NoFactors(&'static str),
}

/// The conjoined-looking corpus games, each with the expected answer and why, decided by
/// reading its rules.
const CORPUS: &[(&str, Expect, &str)] = &[
    (
        "ticTacToeParallel",
        Expect::Factors(2),
        "each move (mark x1 y1 x2 y2) marks one cell on each board, legal is control and a blank \
         cell on each board, terminal is an or and goals combine per-board goal propositions",
    ),
    (
        "doubletictactoe",
        Expect::NoFactors("legal partitionability fails"),
        "a move (mark square board) marks one board only, so a role's moves are a choice between \
         the boards, not a product, and (legal noop) reads both boards",
    ),
    (
        "double_tictactoe_dengji",
        Expect::NoFactors("not a product"),
        "a move is (mark1 x y) or (mark2 x y): one board per step, a choice between the boards",
    ),
    (
        "nineBoardTicTacToe",
        Expect::NoFactors("legal partitionability fails"),
        "the cell played decides which board the opponent must play next (currentboard), so \
         every legal reads the state of all boards",
    ),
    (
        "blockerParallel",
        Expect::Factors(2),
        "each move (mark x1 y1 x2 y2) plays on both boards at once and nothing reads two boards \
         except terminal and goals, which combine per-board propositions",
    ),
    (
        "asteroidsParallel",
        Expect::Factors(2),
        "each move (do xy) steers both ships at once (a product of three commands each), the \
         step counter is shared and action independent",
    ),
    (
        "lightsOnParallel",
        Expect::NoFactors("not a product"),
        "one press per step acts on one cell only, so the cells (and quadrants) are a choice, \
         not independent simultaneous games",
    ),
    (
        "jointButtonsAndLights25",
        Expect::NoFactors("not a product"),
        "one button per step acts on one of the 25 p/q/r triples: a choice, not a product",
    ),
    (
        "dualConnect4",
        Expect::NoFactors("not a product"),
        "a move drops into the normal board or into the suicide board, never both",
    ),
    (
        "jointConnectFour77",
        Expect::NoFactors("not a product"),
        "a move drops into the normal board or into the suicide board, never both",
    ),
    (
        "factoringGeorgeForman",
        Expect::NoFactors("one connected component"),
        "the round counter advances only when all four lights are on, so its transition reads \
         every cell and couples them",
    ),
    (
        "hodgepodge",
        Expect::Factors(2),
        "white plays a blocks world and black a cell game, each role's moves acting on its own \
         board; the step counter is shared",
    ),
    // Games outside the list that the analysis splits, held to the same differential
    // test so that no factoring the analysis reports goes unchecked.
    (
        "lightsOnSimul4",
        Expect::Factors(4),
        "found by the analysis (the rules were not read for it); checked here by the differential test",
    ),
    (
        "mummymaze2p",
        Expect::Factors(2),
        "found by the analysis (the rules were not read for it); checked here by the differential test",
    ),
    (
        "pacman2p",
        Expect::Factors(3),
        "found by the analysis (the rules were not read for it); checked here by the differential test",
    ),
    (
        "ticTacToe",
        Expect::NoFactors("not a product"),
        "a single board: one mark per step, so the cells are a choice, and lines read several",
    ),
    (
        "connectFour",
        Expect::NoFactors("not a product"),
        "a single board: one drop per step into one column",
    ),
];

/// Seeded playouts of the whole game with the factors replayed alongside: at every step the
/// factors' states are the whole state restricted to their bases, every whole input's legality
/// is the composition of its factor moves' legality, terminal and every goal bit are the
/// relations over the factors' atoms, and each factor's next state (run by `factor_engines`)
/// is the restriction of the whole next state. Returns the number of states compared.
fn differential(
    program: &Arc<Program>,
    f: &Factoring,
    factor_engines: &[Engine],
    playouts: u64,
    max_steps: u32,
) -> Result<usize, String> {
    let whole = Interpreter::new(Arc::clone(program)).map_err(|e| e.to_string())?;
    let interps: Vec<Interpreter> = f
        .factors
        .iter()
        .map(|fa| Interpreter::new(fa.program.clone()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let roles = program.layout.roles.len();
    let project = |s: &PackedState, g: usize| -> PackedState {
        let fa = &f.factors[g];
        let mut out = PackedState::empty(fa.bases.len());
        for (k, &b) in fa.bases.iter().enumerate() {
            out.set(k, s.get(b as usize));
        }
        out
    };
    let mut states = 0;
    for seed in 0..playouts {
        let mut rng = Rng::new(seed);
        let mut s = whole.initial_state();
        let mut fs: Vec<PackedState> = (0..f.factors.len()).map(|g| interps[g].initial_state()).collect();
        for step in 0..=max_steps {
            let at = format!("playout {seed} step {step}");
            states += 1;
            for (g, fstate) in fs.iter().enumerate() {
                if *fstate != project(&s, g) {
                    return Err(format!("{at}: factor {g}'s state is not the whole state's part"));
                }
            }
            // Views of every factor: the atoms.
            let mut views: Vec<Vec<bool>> = Vec::new();
            for (g, interp) in interps.iter().enumerate() {
                let mut values = interp.new_values();
                interp
                    .spread_state(&fs[g], 0, &mut values)
                    .map_err(|e| e.to_string())?;
                interp.eval(Entry::View, &mut values).map_err(|e| e.to_string())?;
                let p = &f.factors[g].program;
                let vs = p
                    .views
                    .iter()
                    .map(|&lit| Interpreter::read(&values, lit).map(|w| w & 1 == 1))
                    .collect::<Result<Vec<bool>, _>>()
                    .map_err(|e| e.to_string())?;
                views.push(vs);
            }
            let atom = |a: usize| f.atom_value(a, &|g, v| views[g][v as usize]);
            let terminal = whole.is_terminal(&s);
            if f.terminal.eval(&atom) != terminal {
                return Err(format!(
                    "{at}: terminal is {terminal}, the relation says otherwise"
                ));
            }
            let mut values = whole.new_values();
            whole
                .spread_state(&s, 0, &mut values)
                .map_err(|e| e.to_string())?;
            whole.eval(Entry::Goals, &mut values).map_err(|e| e.to_string())?;
            for (j, (&lit, rel)) in program.goals.iter().zip(&f.goals).enumerate() {
                let bit = Interpreter::read(&values, lit).map_err(|e| e.to_string())? & 1 == 1;
                if rel.eval(&atom) != bit {
                    return Err(format!(
                        "{at}: goal bit {j} is {bit}, the relation says otherwise"
                    ));
                }
            }
            // Legality composes.
            let mut legal_sets: Vec<Vec<Vec<bool>>> = Vec::new();
            for (g, interp) in interps.iter().enumerate() {
                let mut legal = vec![false; f.factors[g].program.num_inputs()];
                for r in 0..roles {
                    for m in interp.legal_moves(&fs[g], RoleIdx::from_index(r)) {
                        legal[m.index()] = true;
                    }
                }
                legal_sets.push(vec![legal]);
            }
            let mut whole_legal: Vec<Vec<MoveIdx>> = Vec::new();
            for r in 0..roles {
                let moves = whole.legal_moves(&s, RoleIdx::from_index(r));
                let range = program.layout.role_inputs[r].clone();
                for x in range.start as usize..range.end as usize {
                    let is_legal = moves.contains(&MoveIdx::from_index(x));
                    let composed = if f.shared_inputs[x] {
                        legal_sets[0][0][f.move_map[x][0] as usize]
                    } else {
                        (0..f.factors.len()).all(|g| legal_sets[g][0][f.move_map[x][g] as usize])
                    };
                    if composed != is_legal {
                        return Err(format!(
                            "{at}: input {} of role {r} is legal {is_legal}, its factor moves say {composed}",
                            program.layout.inputs[x].1
                        ));
                    }
                }
                whole_legal.push(moves);
            }
            if terminal || whole_legal.iter().any(|m| m.is_empty()) || step == max_steps {
                break;
            }
            let joint: Vec<MoveIdx> = whole_legal
                .iter()
                .map(|m| m[rng.below(m.len() as u32) as usize])
                .collect();
            let next = whole.next_state(&s, &joint).map_err(|e| e.to_string())?;
            for (g, engine) in factor_engines.iter().enumerate() {
                let fjoint: Vec<MoveIdx> = joint
                    .iter()
                    .map(|m| MoveIdx::from_index(f.move_map[m.index()][g] as usize))
                    .collect();
                let fnext = engine
                    .next_state(&fs[g], &fjoint)
                    .map_err(|e| format!("{at}: factor {g}: {e}"))?;
                let check = interps[g]
                    .next_state(&fs[g], &fjoint)
                    .map_err(|e| format!("{at}: factor {g}: {e}"))?;
                if fnext != check {
                    return Err(format!("{at}: factor {g}: native and interpreter disagree"));
                }
                fs[g] = fnext;
            }
            s = next;
        }
    }
    Ok(states)
}

/// Compiles and analyses `path`; checks the expectation and, for factors, runs the
/// differential test with native factor engines. Returns a line to print.
fn check_game(path: &Path, expect: Expect) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let desc = gdl::parse(&text).map_err(|e| e.to_string())?;
    let compiled = compile::compile(&desc, &test_options()).map_err(|e| e.to_string())?;
    let analysis = analysis::analyze(&compiled.net);
    match (expect, &analysis.factoring) {
        (Expect::Factors(n), Ok(f)) if f.factors.len() == n => {
            let engines = f
                .factors
                .iter()
                .map(|fa| {
                    lower::engine(fa.program.clone(), &lower::Options::default()).map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let program = Arc::new(compiled.program);
            let states = differential(&program, f, &engines, 20, 300)?;
            Ok(format!("{n} factors, {states} states compared"))
        }
        (Expect::Factors(n), Ok(f)) => Err(format!("{} factors, expected {n}", f.factors.len())),
        (Expect::Factors(n), Err(why)) => Err(format!(
            "does not factor, expected {n} factors: {}",
            why.iter().map(|o| o.to_string()).collect::<Vec<_>>().join("; ")
        )),
        (Expect::NoFactors(_), Ok(f)) => Err(format!("factors into {}, expected none", f.factors.len())),
        (Expect::NoFactors(reason), Err(why)) => {
            let text: Vec<String> = why.iter().map(|o| o.to_string()).collect();
            if text.iter().any(|t| t.contains(reason)) {
                Ok(format!(
                    "does not factor: {}",
                    text.last().cloned().unwrap_or_default()
                ))
            } else {
                Err(format!(
                    "does not factor, but not because \"{reason}\": {}",
                    text.join("; ")
                ))
            }
        }
    }
}

#[test]
fn corpus_games_factor_as_expected() {
    let Some(dir) = shared_dir("corpus_games_factor_as_expected") else {
        return;
    };
    let paths: Vec<_> = CORPUS
        .iter()
        .map(|(g, _, _)| dir.join("games").join(format!("{g}.kif")))
        .collect();
    let outcomes = run_all("analysis of conjoined games", &paths, |path| {
        let name = common::stem(path);
        let (_, expect, why) = CORPUS.iter().find(|(g, _, _)| *g == name).expect("listed");
        check_game(path, *expect).map_err(|e| format!("{e} (expected because {why})"))
    });
    let mut failures = Vec::new();
    for o in &outcomes {
        match &o.result {
            Ok(line) => eprintln!("{}: {line}", o.name),
            Err(e) if SLOW_GAMES.contains(&o.name.as_str()) && e.contains("grounding limit reached") => {
                eprintln!("slow game out of the grounding budget (FIXME): {}: {e}", o.name)
            }
            Err(e) => failures.push(format!("{}: {e}", o.name)),
        }
    }
    assert_no_failures(&failures, outcomes.len());
}

/// Our own double tic-tac-toe factors into its two boards, and the factors reproduce it.
#[test]
fn own_double_tictactoe_factors_into_its_boards() {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/games/doubletictactoe.kif"));
    let text = std::fs::read_to_string(path).expect("the game is readable");
    let desc = gdl::parse(&text).expect("it parses");
    let compiled = compile::compile(&desc, &compile::Options::default()).expect("it compiles");
    let analysis = analysis::analyze(&compiled.net);
    let f = analysis.factoring.as_ref().expect("it factors");
    assert_eq!(f.factors.len(), 2);
    for (g, fa) in f.factors.iter().enumerate() {
        let own: Vec<&str> = fa
            .bases
            .iter()
            .filter(|b| !f.shared_bases.contains(b))
            .map(|&b| compiled.net.bases[b as usize].name.as_str())
            .collect();
        assert_eq!(own.len(), 27, "factor {g}: 9 cells of 3 values");
        let board = own[0].split(' ').nth(1).expect("(cell b m n w)").to_string();
        assert!(
            own.iter()
                .all(|n| n.starts_with("(cell ") && n.split(' ').nth(1) == Some(board.as_str())),
            "factor {g} mixes boards: {own:?}"
        );
    }
    let shared: Vec<&str> = f
        .shared_bases
        .iter()
        .map(|&b| compiled.net.bases[b as usize].name.as_str())
        .collect();
    assert_eq!(shared, ["(control black)", "(control white)"]);
    let engines = f
        .factors
        .iter()
        .map(|fa| lower::engine(fa.program.clone(), &lower::Options::default()).expect("the factor lowers"))
        .collect::<Vec<_>>();
    let program = Arc::new(compiled.program);
    let states = differential(&program, f, &engines, 50, 300).expect("the factors reproduce the game");
    assert!(states > 50);
}

/// Contingent factoring: from a state of our double tic-tac-toe where both boards are decided,
/// folding the latches in leaves nothing that changes but control.
#[test]
fn latches_fold_into_constants_from_a_state() {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/games/doubletictactoe.kif"));
    let text = std::fs::read_to_string(path).expect("the game is readable");
    let desc = gdl::parse(&text).expect("it parses");
    let compiled = compile::compile(&desc, &compile::Options::default()).expect("it compiles");
    let net = &compiled.net;
    // Every cell of both boards marked: all are positive latches, and the blanks negative.
    let mut state_text = String::from("(control white)\n");
    for b in 1..=2 {
        for m in 1..=3 {
            for n in 1..=3 {
                let w = if (m + n) % 2 == 0 { "x" } else { "o" };
                state_text += &format!("(cell {b} {m} {n} {w})\n");
            }
        }
    }
    let state = analysis::parse_state(net, &state_text).expect("a valid state");
    let c = analysis::analyze_from(net, &state, 8);
    assert_eq!(c.fixed.len(), 54, "every cell base is fixed: {:?}", c.fixed);
    assert!(c.net.bases.len() < net.bases.len());
    assert!(c.net.bases.iter().all(|b| b.name.starts_with("(control")));
    assert!(analysis::parse_state(net, "(cell 9 9 9 x)").is_err());
    assert!(analysis::parse_state(net, "((cell 1 1 1 x)").is_err());
}

/// A proven latch never flips along seeded playouts of the corpus games.
#[test]
fn latches_hold_on_corpus_playouts() {
    let Some(games) = corpus_games("latches_hold_on_corpus_playouts") else {
        return;
    };
    // The games with an opaque relation are left out: 800 playout steps of top-down search
    // would take minutes, and the latches of such a net treat the opaque atoms as unknowns.
    let games: Vec<_> = games
        .into_iter()
        .filter(|p| !compiles_at_best_slowly(p) && !is_opaque(&common::stem(p)))
        .collect();
    let outcomes = run_all("latch soundness", &games, |path| {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let desc = gdl::parse(&text).map_err(|e| e.to_string())?;
        let compiled = compile::compile(&desc, &test_options()).map_err(|e| e.to_string())?;
        let analysis = analysis::analyze(&compiled.net);
        let latches = &analysis.latches;
        let interp = Interpreter::new(compiled.program).map_err(|e| e.to_string())?;
        let roles = interp.roles().len();
        let mut flips_checked = 0usize;
        for seed in 0..4u64 {
            let mut rng = Rng::new(seed ^ 0x5eed);
            let mut s = interp.initial_state();
            for step in 0..200 {
                if interp.is_terminal(&s) {
                    break;
                }
                let moves: Vec<Vec<MoveIdx>> = (0..roles)
                    .map(|r| interp.legal_moves(&s, RoleIdx::from_index(r)))
                    .collect();
                if moves.iter().any(|m| m.is_empty()) {
                    break;
                }
                let joint: Vec<MoveIdx> = moves
                    .iter()
                    .map(|m| m[rng.below(m.len() as u32) as usize])
                    .collect();
                let next = interp.next_state(&s, &joint).map_err(|e| e.to_string())?;
                for &b in &latches.positive {
                    if s.get(b as usize) && !next.get(b as usize) {
                        return Err(format!(
                            "positive latch {} fell at step {step} of playout {seed}",
                            compiled.net.bases[b as usize].name
                        ));
                    }
                }
                for &b in &latches.negative {
                    if !s.get(b as usize) && next.get(b as usize) {
                        return Err(format!(
                            "negative latch {} rose at step {step} of playout {seed}",
                            compiled.net.bases[b as usize].name
                        ));
                    }
                }
                flips_checked += latches.positive.len() + latches.negative.len();
                s = next;
            }
        }
        Ok(flips_checked)
    });
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| match &o.result {
            Ok(_) => None,
            Err(e) if expected_failure(&o.name).is_some_and(|w| e.contains(w)) => None,
            Err(e) => Some(format!("{}: {e}", o.name)),
        })
        .collect();
    assert_no_failures(&failures, outcomes.len());
}

/// A three-valued truth value of the reference evaluator below.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Tv {
    F,
    T,
    X,
}

/// The reference three-valued evaluation: every node of the net in order, the given bases
/// fixed, every other base and every input unknown. It is the definition the latch proofs
/// implement incrementally, written as plainly as possible.
fn sweep(net: &Propnet, fixed: &[Option<bool>]) -> Vec<Tv> {
    let mut vals: Vec<Tv> = Vec::with_capacity(net.nodes.len());
    for node in &net.nodes {
        let v = match node {
            Node::Const(c) => [Tv::F, Tv::T][*c as usize],
            Node::Base(b) => fixed[*b as usize].map_or(Tv::X, |v| [Tv::F, Tv::T][v as usize]),
            Node::Input(_) | Node::Opaque(_) | Node::Feedback(_) => Tv::X,
            Node::Not(x) => match vals[x.index()] {
                Tv::F => Tv::T,
                Tv::T => Tv::F,
                Tv::X => Tv::X,
            },
            Node::And(ops) | Node::Or(ops) => {
                let (decides, otherwise) = if matches!(node, Node::And(_)) {
                    (Tv::F, Tv::T)
                } else {
                    (Tv::T, Tv::F)
                };
                let ops: Vec<Tv> = ops.iter().map(|o| vals[o.index()]).collect();
                if ops.contains(&decides) {
                    decides
                } else if ops.contains(&Tv::X) {
                    Tv::X
                } else {
                    otherwise
                }
            }
        };
        vals.push(v);
    }
    vals
}

/// The reference latches: for each base and value, a full evaluation with that base alone fixed.
fn reference_latches(net: &Propnet) -> analysis::Latches {
    let mut out = analysis::Latches::default();
    for (b, base) in net.bases.iter().enumerate() {
        for value in [true, false] {
            let mut fixed = vec![None; net.bases.len()];
            fixed[b] = Some(value);
            let want = if value { Tv::T } else { Tv::F };
            if sweep(net, &fixed)[base.next.index()] == want {
                if value {
                    out.positive.push(b as u32);
                } else {
                    out.negative.push(b as u32);
                }
            }
        }
    }
    out
}

/// The reference inductive subset: evaluate everything, drop every assumption whose next value
/// is not proven, repeat until nothing is dropped.
fn reference_inductive(net: &Propnet, assume: &[Option<bool>]) -> Vec<Option<bool>> {
    let mut kept = assume.to_vec();
    loop {
        let vals = sweep(net, &kept);
        let mut dropped = false;
        for (b, base) in net.bases.iter().enumerate() {
            if let Some(v) = kept[b] {
                if vals[base.next.index()] != [Tv::F, Tv::T][v as usize] {
                    kept[b] = None;
                    dropped = true;
                }
            }
        }
        if !dropped {
            return kept;
        }
    }
}

/// The net of a program: a node per slot, and a negation node for each negated slot read.
fn net_of(program: &Program) -> Propnet {
    let layout = &program.layout;
    let mut nodes = vec![Node::Const(false), Node::Const(true)];
    nodes.extend((0..layout.bases.len() as u32).map(Node::Base));
    nodes.extend((0..layout.inputs.len() as u32).map(Node::Input));
    let mut slot_node: Vec<NodeId> = (0..nodes.len() as u32).map(NodeId).collect();
    let mut negated: std::collections::HashMap<u32, NodeId> = std::collections::HashMap::new();
    let mut lit = |nodes: &mut Vec<Node>, slot_node: &[NodeId], l: Lit| -> NodeId {
        let plain = slot_node[l.slot() as usize];
        if !l.is_negated() {
            return plain;
        }
        *negated.entry(l.slot()).or_insert_with(|| {
            nodes.push(Node::Not(plain));
            NodeId(nodes.len() as u32 - 1)
        })
    };
    for gate in &program.gates {
        let ops: Vec<NodeId> = program.operands[gate.start as usize..(gate.start + gate.len) as usize]
            .iter()
            .map(|&l| lit(&mut nodes, &slot_node, l))
            .collect();
        nodes.push(match gate.op {
            Op::And => Node::And(ops.into()),
            Op::Or => Node::Or(ops.into()),
        });
        slot_node.push(NodeId(nodes.len() as u32 - 1));
    }
    let mut out = |l: Lit| lit(&mut nodes, &slot_node, l);
    let bases = (0..layout.bases.len())
        .map(|b| BaseProp {
            name: layout.bases[b].clone(),
            init: program.init[b / 64] >> (b % 64) & 1 == 1,
            next: out(program.next[b]),
        })
        .collect();
    let inputs = (0..layout.inputs.len())
        .map(|x| InputProp {
            role: layout.inputs[x].0,
            name: layout.inputs[x].1.clone(),
            legal: out(program.legal[x]),
        })
        .collect();
    let goals = (0..layout.goals.len())
        .map(|g| GoalProp {
            role: layout.goals[g].0,
            value: layout.goals[g].1,
            node: out(program.goals[g]),
        })
        .collect();
    let terminal = out(program.terminal);
    let net = Propnet {
        roles: layout.roles.clone(),
        nodes,
        bases,
        constant_facts: Vec::new(),
        inputs,
        goals,
        terminal,
        views: Vec::new(),
        ..Propnet::default()
    };
    net.verify().expect("a program's net is valid");
    net
}

#[test]
fn latch_proofs_match_the_reference_on_random_programs() {
    let mut shapes = vec![Shape::sized(6, 30), Shape::sized(20, 200), Shape::sized(40, 400)];
    // Wide gates are where counting operands instead of re-evaluating them matters.
    shapes.push(Shape {
        wide_gates: 4,
        ..Shape::sized(30, 300)
    });
    shapes.push(Shape {
        inputs_per_role: vec![5],
        max_fanin: 2,
        ..Shape::sized(12, 60)
    });
    let mut found = (0, 0, 0);
    for shape in &shapes {
        for seed in 0..60u64 {
            let net = net_of(&random_program(shape, seed));
            let latches = analysis::latch::latches(&net);
            assert_eq!(latches, reference_latches(&net), "{shape:?} seed {seed}");
            found.0 += latches.positive.len();
            found.1 += latches.negative.len();
            // From the initial state, and from random partial assumptions.
            let mut rng = Rng::new(seed ^ 0x5eed);
            let init: Vec<Option<bool>> = net.bases.iter().map(|b| Some(b.init)).collect();
            let partial: Vec<Option<bool>> = (0..net.bases.len())
                .map(|_| match rng.below(3) {
                    0 => None,
                    v => Some(v == 1),
                })
                .collect();
            for assume in [init, partial] {
                let kept = analysis::latch::inductive(&net, &assume);
                assert_eq!(kept, reference_inductive(&net, &assume), "{shape:?} seed {seed}");
                found.2 += kept.iter().flatten().count();
            }
        }
    }
    // The comparison means something only if the random nets have latches to find.
    assert!(found.0 > 0 && found.1 > 0 && found.2 > 0, "{found:?}");
}
