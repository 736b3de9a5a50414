//! Hand-built games run through the interpreter's Machine API, checked against direct Rust
//! models of the same rules.

mod common;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use common::{cells, counter, tictactoe, COUNTER_MAX, LINES};
use propjet_runtime::{
    random_playout, Entry, FactIdx, Interpreter, Layout, Machine, MachineError, MoveIdx, PackedState, Rng,
    RoleIdx,
};

/// Tic-tac-toe written directly: 0 blank, 1 x, 2 o.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Board {
    cells: [u8; 9],
    x_to_move: bool,
}

impl Board {
    fn new() -> Board {
        Board {
            cells: [0; 9],
            x_to_move: true,
        }
    }

    fn facts(&self) -> Vec<String> {
        let mut facts: Vec<String> = cells()
            .iter()
            .zip(self.cells)
            .filter(|&(_, v)| v != 0)
            .map(|(&(m, n), v)| format!("(cell {m} {n} {})", if v == 1 { "x" } else { "o" }))
            .collect();
        facts.push(format!(
            "(control {})",
            if self.x_to_move { "xplayer" } else { "oplayer" }
        ));
        facts.sort();
        facts
    }

    fn line(&self, mark: u8) -> bool {
        LINES.iter().any(|l| l.iter().all(|&c| self.cells[c] == mark))
    }

    fn open(&self) -> bool {
        self.cells.contains(&0)
    }

    fn terminal(&self) -> bool {
        self.line(1) || self.line(2) || !self.open()
    }

    fn legal(&self, role: usize) -> Vec<String> {
        let mut moves: Vec<String> = if (role == 0) == self.x_to_move {
            cells()
                .iter()
                .zip(self.cells)
                .filter(|&(_, v)| v == 0)
                .map(|(&(m, n), _)| format!("(mark {m} {n})"))
                .collect()
        } else {
            vec!["noop".to_string()]
        };
        moves.sort();
        moves
    }

    fn play(&self, joint: &[String]) -> Board {
        let mut next = self.clone();
        for (role, action) in joint.iter().enumerate() {
            if let Some(c) = cells()
                .iter()
                .position(|&(m, n)| *action == format!("(mark {m} {n})"))
            {
                if self.cells[c] == 0 {
                    next.cells[c] = role as u8 + 1;
                }
            }
        }
        next.x_to_move = !self.x_to_move;
        next
    }

    fn goals(&self, role: usize) -> Vec<u32> {
        let (mine, theirs) = if role == 0 {
            (self.line(1), self.line(2))
        } else {
            (self.line(2), self.line(1))
        };
        let mut goals = Vec::new();
        if !mine && theirs {
            goals.push(0);
        }
        if !mine && !theirs {
            goals.push(50);
        }
        if mine {
            goals.push(100);
        }
        goals
    }
}

fn fact_names<M: Machine>(m: &M, s: &M::State) -> Vec<String> {
    let mut names: Vec<String> = m.state_facts(s).into_iter().map(|f| m.fact_name(f)).collect();
    names.sort();
    names
}

fn legal_names<M: Machine>(m: &M, s: &M::State, role: usize) -> Vec<String> {
    let mut names: Vec<String> = m
        .legal_moves(s, RoleIdx::from_index(role))
        .into_iter()
        .map(|mv| m.move_name(mv))
        .collect();
    names.sort();
    names
}

fn view(interp: &Interpreter, state: &PackedState, name: &str) -> bool {
    let p = interp.program();
    let i = p.layout.views.iter().position(|v| v == name).unwrap();
    let mut values = interp.new_values();
    interp.spread_state(state, 0, &mut values).unwrap();
    interp.eval(Entry::View, &mut values).unwrap();
    Interpreter::read(&values, p.views[i]).unwrap() & 1 == 1
}

/// Every reachable tic-tac-toe state, found by the interpreter, with its direct model.
fn reachable(interp: &Interpreter) -> Vec<(PackedState, Board)> {
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([(interp.initial_state(), Board::new())]);
    let mut out = Vec::new();
    while let Some((state, board)) = queue.pop_front() {
        if !seen.insert(state.clone()) {
            continue;
        }
        out.push((state.clone(), board.clone()));
        if board.terminal() {
            continue;
        }
        let (xs, os) = (
            interp.legal_moves(&state, RoleIdx(0)),
            interp.legal_moves(&state, RoleIdx(1)),
        );
        for &x in &xs {
            for &o in &os {
                let next = interp.next_state(&state, &[x, o]).unwrap();
                let names = [interp.move_name(x), interp.move_name(o)];
                queue.push_back((next, board.play(&names)));
            }
        }
    }
    out
}

#[test]
fn tictactoe_agrees_with_the_direct_model_in_every_reachable_state() {
    let interp = Interpreter::new(tictactoe()).unwrap();
    assert_eq!(interp.engine_name(), "interp");
    assert_eq!(interp.roles(), ["xplayer", "oplayer"]);
    let states = reachable(&interp);
    for (state, board) in &states {
        assert_eq!(fact_names(&interp, state), board.facts());
        assert_eq!(interp.is_terminal(state), board.terminal(), "{:?}", board);
        assert_eq!(view(&interp, state, "open"), board.open());
        assert_eq!(view(&interp, state, "(line x)"), board.line(1));
        assert_eq!(view(&interp, state, "(line o)"), board.line(2));
        for role in 0..2 {
            assert_eq!(interp.goal_values(state, RoleIdx(role as u32)), board.goals(role));
            if !board.terminal() {
                assert_eq!(legal_names(&interp, state, role), board.legal(role), "{board:?}");
            }
        }
    }
    // The direct model, walked on its own, reaches the same number of positions: the 5,478
    // legal positions of tic-tac-toe.
    let mut seen = HashSet::new();
    let mut stack = vec![Board::new()];
    while let Some(b) = stack.pop() {
        if !seen.insert(b.clone()) || b.terminal() {
            continue;
        }
        for x in b.legal(0) {
            for o in b.legal(1) {
                stack.push(b.play(&[x.clone(), o]));
            }
        }
    }
    assert_eq!(seen.len(), states.len());
    assert_eq!(states.len(), 5478);
}

#[test]
fn tictactoe_lanes_agree_with_single_states() {
    let interp = Interpreter::new(tictactoe()).unwrap();
    let program = interp.program().clone();
    let states = reachable(&interp);
    let mut rng = Rng::new(11);
    for chunk in states.chunks(64) {
        let mut values = interp.new_values();
        let mut joints = Vec::new();
        for (lane, (state, board)) in chunk.iter().enumerate() {
            interp.spread_state(state, lane as u32, &mut values).unwrap();
            // A random move of each role (any move of the role, legal or not: the net is
            // defined for every input).
            let joint: Vec<MoveIdx> = program
                .layout
                .role_inputs
                .iter()
                .map(|r| MoveIdx(r.start + rng.below(r.end - r.start)))
                .collect();
            let mut mask = vec![0u64; Layout::words(program.num_inputs())];
            for mv in &joint {
                mask[mv.index() / 64] |= 1 << (mv.index() % 64);
            }
            interp.spread_inputs(&mask, lane as u32, &mut values).unwrap();
            joints.push((joint, board.terminal()));
        }
        for entry in Entry::ALL {
            interp.eval(entry, &mut values).unwrap();
        }
        for (lane, ((state, _), (joint, _))) in chunk.iter().zip(&joints).enumerate() {
            let lane = lane as u32;
            let legal = interp.pack(Entry::Legal, &values, lane).unwrap();
            for role in 0..2 {
                let from_lane: Vec<MoveIdx> = program.layout.role_inputs[role]
                    .clone()
                    .filter(|&i| legal[i as usize / 64] >> (i % 64) & 1 == 1)
                    .map(MoveIdx)
                    .collect();
                assert_eq!(from_lane, interp.legal_moves(state, RoleIdx(role as u32)));
            }
            let terminal = interp.pack(Entry::Terminal, &values, lane).unwrap();
            assert_eq!(terminal[0] == 1, interp.is_terminal(state));
            let goals = interp.pack(Entry::Goals, &values, lane).unwrap();
            for role in 0..2u32 {
                let mut from_lane: Vec<u32> = program
                    .layout
                    .goals
                    .iter()
                    .enumerate()
                    .filter(|&(i, &(r, _))| r.0 == role && goals[i / 64] >> (i % 64) & 1 == 1)
                    .map(|(_, &(_, v))| v)
                    .collect();
                from_lane.sort();
                assert_eq!(from_lane, interp.goal_values(state, RoleIdx(role)));
            }
            let next = interp.pack_state(&values, lane).unwrap();
            assert_eq!(next, interp.next_state_unchecked(state, joint).unwrap());
        }
    }
}

#[test]
fn tictactoe_playouts_are_reproducible_and_end_with_well_defined_goals() {
    let interp = Arc::new(Interpreter::new(tictactoe()).unwrap());
    let start = interp.initial_state();
    let sequential: Vec<_> = (0..64u64)
        .map(|seed| random_playout(&*interp, &start, &mut Rng::new(seed), 20).unwrap())
        .collect();
    for p in &sequential {
        assert!(
            (5..=9).contains(&p.depth),
            "a game of tic-tac-toe lasts 5 to 9 moves"
        );
        assert!(matches!(p.goals.as_slice(), [100, 0] | [0, 100] | [50, 50]));
    }
    // The same playouts from four threads sharing one interpreter, so that some calls find the
    // scratch memory taken and use their own.
    let parallel: Vec<Vec<_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let interp = Arc::clone(&interp);
                let start = start.clone();
                scope.spawn(move || {
                    (0..64u64)
                        .map(|seed| random_playout(&*interp, &start, &mut Rng::new(seed), 20).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for results in parallel {
        assert_eq!(results, sequential);
    }
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn interpreter_is_send_and_sync() {
    assert_send_sync::<Interpreter>();
    assert_send_sync::<PackedState>();
}

/// The counter state with count `c`.
fn count_state(interp: &Interpreter, c: usize) -> PackedState {
    let mut s = PackedState::empty(interp.program().num_bases());
    assert!(s.set(c, true));
    s
}

#[test]
fn counter_follows_its_rules() {
    let interp = Interpreter::new(counter()).unwrap();
    let (left, right) = (RoleIdx(0), RoleIdx(1));
    assert_eq!(interp.initial_state(), count_state(&interp, 0));
    let inc = [
        interp.find_move(left, "inc").unwrap(),
        interp.find_move(right, "inc").unwrap(),
    ];
    let wait = [
        interp.find_move(left, "wait").unwrap(),
        interp.find_move(right, "wait").unwrap(),
    ];
    assert_ne!(inc[0], inc[1], "each role has its own moves");
    for c in 0..=COUNTER_MAX {
        let state = count_state(&interp, c);
        let at_max = c == COUNTER_MAX;
        assert_eq!(interp.is_terminal(&state), at_max);
        for r in 0..2 {
            let expected = if at_max {
                vec![wait[r]]
            } else {
                vec![inc[r], wait[r]]
            };
            assert_eq!(interp.legal_moves(&state, RoleIdx(r as u32)), expected);
        }
        assert_eq!(
            interp.goal_values(&state, left),
            vec![if at_max { 100 } else { 0 }]
        );
        // Right's two goal bits for 50 give one value; at count 0 it also has 10.
        let right_goals = if c == 0 { vec![10, 50] } else { vec![50] };
        assert_eq!(interp.goal_values(&state, right), right_goals);
        // Fact numbering: the set base, then the constant fact after all bases.
        let facts = interp.state_facts(&state);
        assert_eq!(facts, vec![FactIdx(c as u32), FactIdx(COUNTER_MAX as u32 + 1)]);
        assert_eq!(interp.fact_name(facts[0]), format!("(count {c})"));
        assert_eq!(interp.fact_name(facts[1]), "(step 1)");
        for (l, r) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let joint = [[wait[0], inc[0]][l], [wait[1], inc[1]][r]];
            let next = interp.next_state_unchecked(&state, &joint).unwrap();
            assert_eq!(next, count_state(&interp, (c + l + r).min(COUNTER_MAX)));
        }
    }
    let mut values = interp.new_values();
    for c in 0..=COUNTER_MAX {
        interp
            .spread_state(&count_state(&interp, c), c as u32, &mut values)
            .unwrap();
    }
    interp.eval(Entry::View, &mut values).unwrap();
    let even = Interpreter::read(&values, interp.program().views[0]).unwrap();
    assert_eq!(even & 0b11111, 0b10101, "the view holds in lanes 0, 2 and 4");
}

#[test]
fn counter_goals_are_reported_as_not_unique_where_right_has_two() {
    let interp = Interpreter::new(counter()).unwrap();
    let start = interp.initial_state();
    assert_eq!(
        interp.goals(&start),
        Err(MachineError::GoalNotUnique {
            role: "right".to_string(),
            values: vec![10, 50],
        })
    );
    assert_eq!(
        interp.goals(&count_state(&interp, COUNTER_MAX)),
        Ok(vec![100, 50])
    );
}

#[test]
fn machine_errors_and_names() {
    let interp = Interpreter::new(counter()).unwrap();
    let s = interp.initial_state();
    let (left, right) = (RoleIdx(0), RoleIdx(1));
    let inc_l = interp.find_move(left, "inc").unwrap();
    let inc_r = interp.find_move(right, "inc").unwrap();
    assert_eq!(interp.find_move(left, "  INC "), Some(inc_l));
    assert_eq!(
        interp.find_move(left, "(inc)"),
        None,
        "(inc) is another term than inc"
    );
    assert_eq!(interp.find_move(RoleIdx(2), "inc"), None);
    assert_eq!(interp.move_name(inc_r), "inc");
    assert_eq!(interp.move_name(MoveIdx(99)), "<unknown move 99>");
    assert_eq!(interp.fact_name(FactIdx(99)), "<unknown fact 99>");
    assert!(interp.legal_moves(&s, RoleIdx(2)).is_empty());
    assert!(interp.goal_values(&s, RoleIdx(2)).is_empty());
    assert_eq!(
        interp.next_state_unchecked(&s, &[inc_l]),
        Err(MachineError::WrongMoveCount { expected: 2, got: 1 })
    );
    assert_eq!(
        interp.next_state_unchecked(&s, &[inc_l, inc_l]),
        Err(MachineError::UnknownMove {
            role: "right".to_string(),
            mv: inc_l,
        })
    );
    assert_eq!(
        interp.next_state_unchecked(&s, &[MoveIdx(77), inc_r]),
        Err(MachineError::UnknownMove {
            role: "left".to_string(),
            mv: MoveIdx(77),
        })
    );
    let top = count_state(&interp, COUNTER_MAX);
    assert_eq!(
        interp.next_state(&top, &[inc_l, inc_r]),
        Err(MachineError::IllegalMove {
            role: "left".to_string(),
            mv: "inc".to_string(),
        })
    );
    // A state of the wrong size is answered, not a panic.
    let odd = PackedState::from_words(vec![]);
    assert!(!interp.is_terminal(&odd));
    let mut values = interp.new_values();
    assert!(interp.spread_state(&odd, 0, &mut values).is_err());
    assert!(interp.spread_state(&s, 64, &mut values).is_err());
    assert!(interp.eval(Entry::Next, &mut values[..3]).is_err());
    assert!(interp.pack(Entry::Next, &values[..3], 0).is_err());
}

#[test]
fn tictactoe_moves_by_name() {
    let interp = Interpreter::new(tictactoe()).unwrap();
    let x = RoleIdx(0);
    let mv = interp.find_move(x, "( MARK  1 2 )").unwrap();
    assert_eq!(interp.move_name(mv), "(mark 1 2)");
    assert_eq!(
        interp
            .find_move(RoleIdx(1), "(mark 1 2)")
            .map(|m| interp.move_name(m))
            .unwrap(),
        "(mark 1 2)"
    );
    assert_ne!(interp.find_move(RoleIdx(1), "(mark 1 2)"), Some(mv));
    assert_eq!(interp.find_move(x, "(mark 1 4)"), None);
    assert_eq!(interp.role_index("OPLAYER"), Some(RoleIdx(1)));
}
