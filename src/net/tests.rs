//! A hand-written ground program run through build, passes and ordering.

use super::*;
use crate::ground::{AtomId, AtomKind, GroundAtom, GroundLit, GroundRules, Grounded};
use propjet_runtime::{Interpreter, Machine, RoleIdx};

fn atom(kind: AtomKind, text: &str) -> GroundAtom {
    GroundAtom {
        kind,
        text: text.into(),
    }
}

fn lit(atom: u32, negated: bool) -> GroundLit {
    GroundLit::new(AtomId(atom), negated)
}

fn rule(head: u32, body: &[GroundLit]) -> (AtomId, Vec<GroundLit>) {
    (AtomId(head), body.to_vec())
}

/// One role `a` with one move `go`, legal while `p` does not hold; `go` makes `p` hold; `q`
/// holds from the start and forever; `r` and `s` are mutually recursive (`s ⇐ r`, `r ⇐ s ∨ p`,
/// whose least fixpoint is `r = s = p`); terminal is `s`; the goal is 100 with `p`, else 0.
fn toy() -> Grounded {
    let atoms = vec![
        atom(AtomKind::True, "p"),                                    // 0
        atom(AtomKind::True, "q"),                                    // 1
        atom(AtomKind::Does { role: 0 }, "go"),                       // 2
        atom(AtomKind::Legal { role: 0 }, "go"),                      // 3
        atom(AtomKind::Next, "p"),                                    // 4
        atom(AtomKind::Next, "q"),                                    // 5
        atom(AtomKind::View, "r"),                                    // 6
        atom(AtomKind::View, "s"),                                    // 7
        atom(AtomKind::Terminal, "terminal"),                         // 8
        atom(AtomKind::Goal { role: 0, value: 100 }, "(goal a 100)"), // 9
        atom(AtomKind::Goal { role: 0, value: 0 }, "(goal a 0)"),     // 10
    ];
    let list = vec![
        rule(3, &[lit(0, true)]),
        rule(4, &[lit(2, false)]),
        rule(4, &[lit(0, false)]),
        rule(5, &[lit(1, false)]),
        rule(7, &[lit(6, false)]),
        rule(6, &[lit(7, false)]),
        rule(6, &[lit(0, false)]),
        rule(8, &[lit(7, false)]),
        rule(9, &[lit(0, false)]),
        rule(10, &[lit(0, true)]),
    ];
    let mut rules = GroundRules::new();
    for (head, body) in list {
        rules.push(head, &body);
    }
    Grounded {
        roles: vec!["a".into()],
        atoms,
        rules,
        init: vec![AtomId(1)],
    }
}

fn play(net: &Propnet) {
    let program = order(net);
    let m = Interpreter::new(program).expect("a valid program");
    let a = RoleIdx(0);
    let s0 = m.initial_state();
    let facts = |s| {
        m.state_facts(s)
            .into_iter()
            .map(|f| m.fact_name(f))
            .collect::<Vec<_>>()
    };
    assert_eq!(facts(&s0), vec!["q".to_string()]);
    assert!(!m.is_terminal(&s0));
    assert_eq!(m.goals(&s0).expect("one goal"), vec![0]);
    let go = m.find_move(a, "go").expect("go is a move");
    assert_eq!(m.legal_moves(&s0, a), vec![go]);
    let s1 = m.next_state(&s0, &[go]).expect("go is legal");
    let mut f1 = facts(&s1);
    f1.sort();
    assert_eq!(f1, vec!["p".to_string(), "q".to_string()]);
    assert!(m.is_terminal(&s1), "the recursive views reach p");
    assert_eq!(m.goals(&s1).expect("one goal"), vec![100]);
    assert!(m.legal_moves(&s1, a).is_empty());
}

#[test]
fn toy_game_plays_right_before_and_after_the_passes() {
    let built = build(&toy(), &NetLimits::default()).expect("builds");
    built.verify().expect("a well-formed net");
    play(&built);
    let (optimized, reports) = optimize(built.clone(), 8);
    optimized.verify().expect("a well-formed net");
    play(&optimized);
    assert!(!reports.is_empty());
    // `q` never changes, so it is a constant fact rather than a base.
    assert_eq!(optimized.bases.len(), 1);
    assert_eq!(optimized.constant_facts, vec!["q".to_string()]);
    assert!(NetStats::of(&optimized).components() < NetStats::of(&built).components());
}

#[test]
fn a_cycle_through_negation_is_an_error_naming_it() {
    let mut g = toy();
    let (head, body) = rule(7, &[lit(6, true)]);
    g.rules.push(head, &body);
    match build(&g, &NetLimits::default()) {
        Err(NetError::Cycle { propositions, .. }) => {
            assert!(propositions.contains(&"r".to_string()) && propositions.contains(&"s".to_string()))
        }
        other => panic!("expected a cycle error, got {other:?}"),
    }
}

#[test]
fn the_node_limit_is_reported() {
    let limits = NetLimits {
        max_nodes: 5,
        ..NetLimits::default()
    };
    match build(&toy(), &limits) {
        Err(NetError::Limit { limit, .. }) => assert_eq!(limit, "max_nodes"),
        other => panic!("expected a limit error, got {other:?}"),
    }
}

#[test]
fn dot_output_names_the_propositions() {
    let built = build(&toy(), &NetLimits::default()).expect("builds");
    let dot = to_dot(&built).expect("a small net");
    for name in ["(does a go)", "(legal a go)", "terminal", "(next p)"] {
        assert!(dot.contains(name), "{name} missing from the drawing");
    }
}

/// A net over bases `b0..b5` whose next of `b0` is an or of ands, each and `b0` with `rest`
/// other bases; with `shared`, a goal reads each and as well.
fn or_of_ands(rests: &[&[u32]], shared: bool) -> Propnet {
    let mut nodes: Vec<Node> = (0..6).map(Node::Base).collect();
    let id = |i: usize| NodeId(i as u32);
    let mut ands = Vec::new();
    for rest in rests {
        let mut ops = vec![id(0)];
        ops.extend(rest.iter().map(|&b| id(b as usize)));
        ands.push(id(nodes.len()));
        nodes.push(Node::And(ops.into()));
    }
    let or = id(nodes.len());
    nodes.push(Node::Or(ands.clone().into()));
    let falsum = id(nodes.len());
    nodes.push(Node::Const(false));
    let bases = (0..6)
        .map(|b| BaseProp {
            name: format!("b{b}"),
            init: b % 2 == 0,
            next: if b == 0 { or } else { id(b) },
        })
        .collect();
    let goals = if shared {
        ands.iter()
            .enumerate()
            .map(|(v, &node)| GoalProp {
                role: RoleIdx(0),
                value: v as u32,
                node,
            })
            .collect()
    } else {
        vec![GoalProp {
            role: RoleIdx(0),
            value: 0,
            node: falsum,
        }]
    };
    Propnet {
        roles: vec!["a".into()],
        nodes,
        bases,
        goals,
        terminal: falsum,
        ..Propnet::default()
    }
}

/// The value of `id` when base `b` holds exactly where bit `b` of `state` is set, and input
/// `i` where bit `bases + i` is.
fn value(net: &Propnet, id: NodeId, state: u32) -> bool {
    match net.node(id) {
        Node::Const(c) => *c,
        Node::Base(b) => state >> b & 1 == 1,
        Node::Input(i) => state >> (net.bases.len() + *i as usize) & 1 == 1,
        // These nets have no opaque atoms and no loops.
        Node::Opaque(_) | Node::Feedback(_) => false,
        Node::And(ops) => ops.iter().all(|&o| value(net, o, state)),
        Node::Or(ops) => ops.iter().any(|&o| value(net, o, state)),
        Node::Not(x) => !value(net, *x, state),
    }
}

/// Factors and cleans up `net`; checks that the result computes the same next state and goals
/// on every state, and returns the sizes before and after.
fn factor_checked(net: &Propnet) -> (NetStats, NetStats) {
    let factored = passes::run(passes::run(net.clone(), Pass::Factor), Pass::DeadNodes);
    factored.verify().expect("a well-formed net");
    for state in 0..64 {
        let next = |n: &Propnet| value(n, n.bases[0].next, state);
        assert_eq!(next(net), next(&factored), "state {state:06b}");
        for (g, h) in net.goals.iter().zip(&factored.goals) {
            assert_eq!(value(net, g.node, state), value(&factored, h.node, state));
        }
    }
    (NetStats::of(net), NetStats::of(&factored))
}

#[test]
fn factoring_happens_where_it_pays() {
    // `(b0 ∧ b1) ∨ (b0 ∧ b2) ∨ (b0 ∧ b3)`: 4 gates and 9 operands become `b0 ∧ (b1 ∨ b2 ∨ b3)`,
    // 2 gates and 5 operands.
    let (before, after) = factor_checked(&or_of_ands(&[&[1], &[2], &[3]], false));
    assert_eq!((before.ands + before.ors, before.edges), (4, 9));
    assert_eq!((after.ands + after.ors, after.edges), (2, 5));
}

#[test]
fn factoring_leaves_the_net_alone_where_it_does_not_pay() {
    // `(b0 ∧ b1 ∧ b2) ∨ (b0 ∧ b3 ∧ b4)` would become `b0 ∧ ((b1 ∧ b2) ∨ (b3 ∧ b4))`: one gate
    // more for one operand less.
    let (before, after) = factor_checked(&or_of_ands(&[&[1, 2], &[3, 4]], false));
    assert_eq!(after, before);
    // Ands that a goal reads too stay in the net, so factoring them could only add gates.
    let (before, after) = factor_checked(&or_of_ands(&[&[1], &[2], &[3]], true));
    assert_eq!(after, before);
}

/// Every output of `a` and `b` (legal, goal, terminal, next) on every state and input of
/// `bits` bits, and their views where both still name them.
fn assert_same_outputs(a: &Propnet, b: &Propnet, bits: u32) {
    assert_eq!(a.outputs().count(), b.outputs().count());
    for state in 0..1u32 << bits {
        for (k, (x, y)) in a.outputs().zip(b.outputs()).enumerate() {
            assert_eq!(
                value(a, x, state),
                value(b, y, state),
                "output {k}, state {state:b}"
            );
        }
        for (name, y) in &b.views {
            let x = a
                .views
                .iter()
                .find(|v| &v.0 == name)
                .expect("a view of the old net")
                .1;
            assert_eq!(
                value(a, x, state),
                value(b, *y, state),
                "view {name}, state {state:b}"
            );
        }
    }
}

/// Bases `b0..b3`, one input `i0`, and `open = ¬b0 ∧ ¬b1` read by two legal-like ands and
/// negated by a next, as in a board game's empty cell.
fn empty_cell() -> Propnet {
    let id = |i: u32| NodeId(i);
    let mut nodes: Vec<Node> = (0..4).map(Node::Base).collect();
    nodes.push(Node::Input(0)); // n4
    nodes.push(Node::Not(id(0))); // n5
    nodes.push(Node::Not(id(1))); // n6
    nodes.push(Node::And(smallvec::smallvec![id(5), id(6)])); // n7: open
    nodes.push(Node::And(smallvec::smallvec![id(2), id(7)])); // n8
    nodes.push(Node::And(smallvec::smallvec![id(3), id(7)])); // n9
    nodes.push(Node::Not(id(7))); // n10
    nodes.push(Node::And(smallvec::smallvec![id(4), id(10)])); // n11
    let bases = (0..4)
        .map(|b| BaseProp {
            name: format!("b{b}"),
            init: false,
            next: id([11, 8, 9, 2][b]),
        })
        .collect();
    Propnet {
        roles: vec!["a".into()],
        nodes,
        bases,
        inputs: vec![InputProp {
            role: RoleIdx(0),
            name: "i0".into(),
            legal: id(9),
        }],
        terminal: id(8),
        views: vec![("open".into(), id(7))],
        ..Propnet::default()
    }
}

#[test]
fn polarity_computes_an_empty_cell_as_the_negation_of_an_or() {
    let net = empty_cell();
    net.verify().expect("a well-formed net");
    let after = passes::run(net.clone(), Pass::Polarity);
    after.verify().expect("a well-formed net");
    assert_same_outputs(&net, &after, 5);
    // `¬b0 ∧ ¬b1` and its negation take three nots; `b0 ∨ b1` and its negation one.
    let (before, after) = (NetStats::of(&net), NetStats::of(&after));
    assert_eq!((before.ands, before.ors, before.nots), (4, 0, 3));
    assert_eq!((after.ands, after.ors, after.nots), (3, 1, 1));
}

#[test]
fn polarity_merges_gates_equal_up_to_de_morgan() {
    // `¬b0 ∧ ¬b1` and `¬(b0 ∨ b1)` as two goals are one gate and a not after the pass.
    let id = |i: u32| NodeId(i);
    let mut net = or_of_ands(&[], false);
    net.nodes = (0..6).map(Node::Base).collect();
    net.nodes.push(Node::Not(id(0))); // n6
    net.nodes.push(Node::Not(id(1))); // n7
    net.nodes.push(Node::And(smallvec::smallvec![id(6), id(7)])); // n8
    net.nodes.push(Node::Or(smallvec::smallvec![id(0), id(1)])); // n9
    net.nodes.push(Node::Not(id(9))); // n10
    for b in &mut net.bases {
        b.next = id(0);
    }
    net.terminal = id(9);
    net.goals = [8, 10]
        .iter()
        .enumerate()
        .map(|(v, &n)| GoalProp {
            role: RoleIdx(0),
            value: v as u32,
            node: id(n),
        })
        .collect();
    net.verify().expect("a well-formed net");
    let after = passes::run(net.clone(), Pass::Polarity);
    after.verify().expect("a well-formed net");
    assert_same_outputs(&net, &after, 6);
    let stats = NetStats::of(&after);
    assert_eq!(stats.gates(), 2, "{stats}");
    assert_eq!(after.goals[0].node, after.goals[1].node);
}

#[test]
fn polarity_flattens_an_and_that_only_one_and_reads() {
    // `(b0 ∧ b1) ∧ b2` read by a goal becomes `b0 ∧ b1 ∧ b2`; `b3 ∨ (b4 ∨ b5)` likewise.
    let id = |i: u32| NodeId(i);
    let mut net = or_of_ands(&[], false);
    net.nodes = (0..6).map(Node::Base).collect();
    net.nodes.push(Node::And(smallvec::smallvec![id(0), id(1)])); // n6
    net.nodes.push(Node::And(smallvec::smallvec![id(6), id(2)])); // n7
    net.nodes.push(Node::Or(smallvec::smallvec![id(4), id(5)])); // n8
    net.nodes.push(Node::Or(smallvec::smallvec![id(3), id(8)])); // n9
    net.bases[0].next = id(7);
    net.bases[1].next = id(9);
    for b in &mut net.bases[2..] {
        b.next = id(0);
    }
    net.goals.clear();
    net.terminal = id(0);
    net.verify().expect("a well-formed net");
    let after = passes::run(net.clone(), Pass::Polarity);
    assert_same_outputs(&net, &after, 6);
    let stats = NetStats::of(&after);
    assert_eq!(
        (stats.ands, stats.ors, stats.nots, stats.edges),
        (1, 1, 0, 6),
        "{stats}"
    );
}

/// A random net over `bases` bases and `inputs` inputs with `gates` gates reading earlier
/// nodes, constants among them; its outputs read random nodes.
fn random_net(rng: &mut propjet_runtime::Rng, bases: u32, inputs: u32, gates: u32) -> Propnet {
    let mut nodes = vec![Node::Const(false), Node::Const(true)];
    nodes.extend((0..bases).map(Node::Base));
    nodes.extend((0..inputs).map(Node::Input));
    for _ in 0..gates {
        let n = nodes.len() as u32;
        let node = match rng.below(5) {
            0 => Node::Not(NodeId(rng.below(n))),
            k => {
                let len = 1 + rng.below(4);
                let ops = (0..len).map(|_| NodeId(rng.below(n))).collect();
                if k % 2 == 0 {
                    Node::And(ops)
                } else {
                    Node::Or(ops)
                }
            }
        };
        nodes.push(node);
    }
    with_outputs(rng, nodes, bases, inputs, gates)
}

/// A net of `nodes` (its leaves first: the two constants, then `bases` bases and `inputs`
/// inputs, then `gates` gates) whose outputs read random nodes among the last gates.
fn with_outputs(
    rng: &mut propjet_runtime::Rng,
    nodes: Vec<Node>,
    bases: u32,
    inputs: u32,
    gates: u32,
) -> Propnet {
    let n = nodes.len() as u32;
    let mut pick = || NodeId(n - 1 - rng.below(n.min(gates + 1)));
    let bases_ = (0..bases)
        .map(|b| BaseProp {
            name: format!("b{b}"),
            init: b % 2 == 0,
            next: pick(),
        })
        .collect();
    let inputs_ = (0..inputs)
        .map(|i| InputProp {
            role: RoleIdx(0),
            name: format!("i{i}"),
            legal: pick(),
        })
        .collect();
    let goals = (0..2)
        .map(|v| GoalProp {
            role: RoleIdx(0),
            value: v,
            node: pick(),
        })
        .collect();
    let mut views: Vec<(String, NodeId)> = (0..n)
        .step_by(3)
        .map(|i| (format!("v{i:03}"), NodeId(i)))
        .collect();
    views.sort();
    Propnet {
        roles: vec!["a".into()],
        nodes,
        bases: bases_,
        inputs: inputs_,
        goals,
        terminal: pick(),
        views,
        ..Propnet::default()
    }
}

#[test]
fn polarity_keeps_random_nets_as_they_were_and_never_grows_them() {
    let mut rng = propjet_runtime::Rng::new(7);
    for round in 0..300 {
        let net = random_net(&mut rng, 4, 2, 4 + round % 40);
        net.verify().expect("a well-formed net");
        let once = passes::run(passes::run(net.clone(), Pass::DeadNodes), Pass::Polarity);
        once.verify().expect("a well-formed net");
        assert_same_outputs(&net, &once, 6);
        let twice = passes::run(once.clone(), Pass::Polarity);
        assert_same_outputs(&net, &twice, 6);
        let dead = NetStats::of(&passes::run(net.clone(), Pass::DeadNodes));
        assert!(
            NetStats::of(&once).gates() <= dead.gates(),
            "round {round}: {} gates became {}",
            dead.gates(),
            NetStats::of(&once).gates()
        );
    }
}

/// A random net of ors over ands that share operands, and of ors that read ors: ands of two
/// operands, a base and a base or one of the last gates; ors of two or three of the last
/// gates. An or that the factor pass rewrites as an and is then taken by the or that reads it.
fn sharing_net(rng: &mut propjet_runtime::Rng, bases: u32, gates: u32) -> Propnet {
    let mut nodes = vec![Node::Const(false), Node::Const(true)];
    nodes.extend((0..bases).map(Node::Base));
    for _ in 0..gates {
        let n = nodes.len() as u32;
        let base = |rng: &mut propjet_runtime::Rng| NodeId(2 + rng.below(bases));
        let recent = |rng: &mut propjet_runtime::Rng| NodeId(n - 1 - rng.below(n.min(4)));
        let node = match rng.below(2) {
            0 => {
                let other = if rng.below(2) == 0 { base(rng) } else { recent(rng) };
                Node::And(smallvec::smallvec![base(rng), other])
            }
            _ => Node::Or((0..2 + rng.below(2)).map(|_| recent(rng)).collect()),
        };
        nodes.push(node);
    }
    with_outputs(rng, nodes, bases, 0, gates)
}

/// The factor pass tries no or before the first one its scan finds to factor
/// (`first_to_factor`) unless it reads what the pass changed; trying every or must give the
/// same net, node for node.
#[test]
fn factoring_from_the_first_or_found_is_factoring_every_or() {
    let mut rng = propjet_runtime::Rng::new(17);
    let (mut factored, mut rounds) = (0, 0);
    for round in 0..1000 {
        let mut net = sharing_net(&mut rng, 3, 10 + round % 60);
        for pass in [Pass::Merge, Pass::DeadNodes] {
            net = passes::run(net, pass);
        }
        // Twice, so that the second pass meets the ors the first one wrote.
        for _ in 0..2 {
            let every = passes::factor_every_or(net.clone());
            let marked = passes::run(net.clone(), Pass::Factor);
            assert!(
                shape(&marked) == shape(&every),
                "round {round}: factoring from the first or found differs from trying every or"
            );
            assert_same_outputs(&net, &marked, 5);
            if shape(&marked) != shape(&net) {
                factored += 1;
            }
            rounds += 1;
            net = marked;
        }
    }
    // Many nets factored something (141 of the 800 runs with this seed), so the comparison
    // covered nets in which the pass wrote ors anew.
    assert!(factored * 8 > rounds, "{factored} of {rounds}");
}

/// After a pass that leaves only needed nodes, the factor pass removes the ands it took into
/// groups without a sweep for dead nodes (`Rewriter::killed`); that must be the net the sweep
/// gives, node for node, also when a group takes an and of one operand, after which the pass
/// falls back to the sweep.
#[test]
fn factoring_a_net_without_dead_nodes_removes_what_the_sweep_removes() {
    let mut rng = propjet_runtime::Rng::new(29);
    let (mut factored, mut runs) = (0, 0);
    for round in 0..1000 {
        let mut net = sharing_net(&mut rng, 3, 10 + round % 60);
        for pass in [Pass::Merge, Pass::DeadNodes] {
            net = passes::run(net, pass);
        }
        for _ in 0..2 {
            let swept = passes::run(net.clone(), Pass::Factor);
            let known = passes::factor_all_live(net.clone());
            assert!(
                shape(&known) == shape(&swept),
                "round {round}: removing the taken ands differs from the sweep for dead nodes"
            );
            if shape(&swept) != shape(&net) {
                factored += 1;
            }
            runs += 1;
            net = swept;
        }
    }
    assert!(factored * 8 > runs, "{factored} of {runs}");
}

/// The exclusive-inputs pass keeps the nodes before the first or its scan finds to rewrite
/// where they are (`keep_prefix`), unless a leaf occurs twice among them; rewriting from the
/// first node on must give the same net, node for node.
#[test]
fn exclusive_inputs_from_the_first_or_found_is_rewriting_every_node() {
    let mut rng = propjet_runtime::Rng::new(23);
    let (mut late, mut rewritten) = (0, 0);
    for round in 0..600 {
        let (bases, inputs, gates) = (3, 3, 10 + round % 50);
        let mut nodes = vec![Node::Const(false), Node::Const(true)];
        nodes.extend((0..bases).map(Node::Base));
        nodes.extend((0..inputs).map(Node::Input));
        for _ in 0..gates {
            let n = nodes.len() as u32;
            let any = |rng: &mut propjet_runtime::Rng| NodeId(rng.below(n));
            let input = |rng: &mut propjet_runtime::Rng| NodeId(2 + bases + rng.below(inputs));
            let node = match rng.below(8) {
                // Now and then a leaf met twice, which the rewriter shares.
                0 if round % 3 == 0 => Node::Input(rng.below(inputs)),
                0 | 1 => Node::Not(any(&mut rng)),
                2 | 3 => Node::And((0..2).map(|_| any(&mut rng)).collect()),
                // Ors over inputs, some over more than half of them.
                _ => {
                    let mut ops: Vec<NodeId> = (0..1 + rng.below(4)).map(|_| input(&mut rng)).collect();
                    ops.push(any(&mut rng));
                    Node::Or(ops.into())
                }
            };
            nodes.push(node);
        }
        let net = with_outputs(&mut rng, nodes, bases, inputs, gates);
        net.verify().expect("a well-formed net");
        let every = passes::exclusive_every_or(net.clone());
        let kept = passes::run(net.clone(), Pass::ExclusiveInputs);
        assert!(
            shape(&kept) == shape(&every),
            "round {round}: rewriting from the first or found differs from rewriting every node"
        );
        // The same outputs wherever exactly one input holds, which the pass assumes.
        for state in (0..1u32 << bases).flat_map(|b| (0..inputs).map(move |i| b | 1 << (bases + i))) {
            for (k, (x, y)) in net.outputs().zip(kept.outputs()).enumerate() {
                assert_eq!(
                    value(&net, x, state),
                    value(&kept, y, state),
                    "output {k}, state {state:b}"
                );
            }
        }
        if shape(&kept) != shape(&net) {
            rewritten += 1;
            let first_gate = 2 + (bases + inputs) as usize;
            if kept.nodes[..first_gate + 3] == net.nodes[..first_gate + 3] {
                late += 1;
            }
        }
    }
    // Many nets were rewritten, many of them after a few gates written as they were.
    assert!(rewritten > 200 && late > 50, "{rewritten} rewritten, {late} late");
}

/// Everything of a net that a pass may change: its nodes and what each output and view reads.
fn shape(net: &Propnet) -> (Vec<Node>, Vec<NodeId>, Vec<(String, NodeId)>) {
    (net.nodes.clone(), net.outputs().collect(), net.views.clone())
}

/// Polarity's rebuild hash-conses only the ands that flattening touches when that merges and
/// folds nothing, and every and otherwise (`signed::rebuild`); both must give the same net,
/// node for node, on nets where flattening makes gates equal and on nets where it does not.
#[test]
fn polarity_hashing_only_the_touched_ands_is_hashing_them_all() {
    let mut rng = propjet_runtime::Rng::new(31);
    let fallbacks = || signed::FALLBACKS.with(|f| f.get());
    let (mut untouched, mut runs) = (0, 0);
    for round in 0..2000 {
        let mut net = passes::run(random_net(&mut rng, 3, 2, 4 + round % 50), Pass::DeadNodes);
        // Twice, so that the second run starts from a net polarity wrote.
        for _ in 0..2 {
            let all = signed::signs_with(net.clone(), true, true);
            let before = fallbacks();
            let touched = signed::signs_with(net.clone(), true, false);
            untouched += usize::from(fallbacks() == before);
            runs += 1;
            assert!(
                shape(&touched) == shape(&all),
                "round {round}: hashing the touched ands differs from hashing them all"
            );
            net = touched;
        }
    }
    // Both ways were taken often (with this seed 3,787 and 213 of the 4,000 runs), so the
    // comparison covered nets whose rebuild merges gates.
    let fell_back = runs - untouched;
    assert!(
        untouched > 1000 && fell_back > 50,
        "{untouched} untouched, {fell_back} fell back"
    );
}

/// Polarity makes the nodes of the net it writes on two threads, in chunks that each takes
/// from its end until none is left (`signed::emit`); the net must be the one that one thread
/// makes, node for node, whichever thread made which chunk and whatever their size. Each net
/// is written with the chunks left to this thread's speed (often all made here) and with the
/// other thread making them all, so that its chunks are joined in order.
#[test]
fn polarity_on_two_threads_writes_what_one_thread_writes() {
    let mut rng = propjet_runtime::Rng::new(43);
    let one = signed::EmitSplit {
        from: usize::MAX,
        chunk: 1,
        helper_alone: false,
    };
    let mut several = 0;
    for round in 0..400 {
        let net = passes::run(random_net(&mut rng, 3, 2, 4 + round % 60), Pass::DeadNodes);
        let alone = signed::signs_split(net.clone(), true, false, one).0;
        for chunk in [1, 2, 5, 64] {
            for helper_alone in [false, true] {
                let split = signed::EmitSplit {
                    from: 0,
                    chunk,
                    helper_alone,
                };
                let two = signed::signs_split(net.clone(), true, false, split).0;
                assert!(
                    shape(&two) == shape(&alone),
                    "round {round}, {split:?}: two threads wrote another net"
                );
            }
        }
        several += usize::from(alone.nodes.len() > 5);
    }
    // Most nets had several chunks of the smallest sizes to join.
    assert!(several > 300, "{several} nets of more than 5 nodes");
}

#[test]
fn polarity_leaves_nothing_for_the_passes_the_pipeline_skips_after_it() {
    let mut rng = propjet_runtime::Rng::new(11);
    for round in 0..300 {
        let net = random_net(&mut rng, 4, 2, 4 + round % 40);
        let once = passes::run(passes::run(net, Pass::DeadNodes), Pass::Polarity);
        for pass in [
            Pass::DeadNodes,
            Pass::ConstantFolding,
            Pass::Collapse,
            Pass::Merge,
        ] {
            let again = passes::run(once.clone(), pass);
            assert!(
                shape(&again) == shape(&once),
                "round {round}: {pass} changed the net polarity wrote"
            );
        }
    }
}

#[test]
fn folding_and_collapsing_skip_the_rewrite_exactly_when_it_would_change_nothing() {
    let mut rng = propjet_runtime::Rng::new(13);
    let (mut skipped, mut rewritten) = ([0; 2], [0; 2]);
    for round in 0..300 {
        let raw = random_net(&mut rng, 4, 2, 4 + round % 40);
        // Random nets nearly always read a constant and hold gates of one operand; the same
        // nets folded, collapsed and merged often hold nothing left to do.
        let mut clean = raw.clone();
        for pass in [
            Pass::ConstantFolding,
            Pass::Collapse,
            Pass::Merge,
            Pass::DeadNodes,
        ] {
            clean = passes::run(clean, pass);
        }
        for net in [raw, clean] {
            for (k, pass) in [Pass::ConstantFolding, Pass::Collapse].into_iter().enumerate() {
                let (scan, out) = passes::rewrite_anyway(net.clone(), pass);
                assert_eq!(
                    scan,
                    shape(&out) != shape(&net),
                    "round {round}: the scan for {pass} disagrees with the rewrite"
                );
                if scan {
                    rewritten[k] += 1;
                } else {
                    skipped[k] += 1;
                }
            }
        }
    }
    // Both answers were seen for both passes, so the test compared each kind of net.
    assert!(
        skipped.iter().chain(&rewritten).all(|&n| n > 0),
        "{skipped:?} {rewritten:?}"
    );
}

/// The builder hash-conses its gates as the merge pass would: every and and or has its
/// operands sorted and distinct and no two gates are alike, so `optimize_built`, which skips
/// the first round's merge, gives the net `optimize` gives. Two views with the same body of
/// two literals share one and, and the shipped games check the rest.
#[test]
fn the_built_net_is_merged_already() {
    let atoms = vec![
        atom(AtomKind::True, "p"),               // 0
        atom(AtomKind::True, "q"),               // 1
        atom(AtomKind::View, "u"),               // 2
        atom(AtomKind::View, "v"),               // 3
        atom(AtomKind::Terminal, "terminal"),    // 4
        atom(AtomKind::Next, "p"),               // 5
        atom(AtomKind::Next, "q"),               // 6
        atom(AtomKind::Does { role: 0 }, "go"),  // 7
        atom(AtomKind::Legal { role: 0 }, "go"), // 8
    ];
    let mut rules = GroundRules::new();
    for (head, body) in [
        rule(2, &[lit(0, false), lit(1, true)]),
        rule(3, &[lit(1, true), lit(0, false)]),
        rule(4, &[lit(2, false), lit(3, false)]),
        rule(5, &[lit(3, false), lit(7, false)]),
        rule(6, &[lit(2, false), lit(7, false)]),
        rule(8, &[lit(1, true)]),
    ] {
        rules.push(head, &body);
    }
    let g = Grounded {
        roles: vec!["a".into()],
        atoms,
        rules,
        init: vec![AtomId(0)],
    };
    let net = build(&g, &NetLimits::default()).expect("builds");
    let u = net.views.iter().find(|(n, _)| n == "u").expect("u is a view").1;
    let v = net.views.iter().find(|(n, _)| n == "v").expect("v is a view").1;
    assert_eq!(u, v, "two views with one body are one gate");
    assert_eq!(net.terminal, u, "u ∧ v is u, with no gate of one operand");
    assert_merged(&net);

    let games = [
        "breakthrough",
        "buttons",
        "connectfour",
        "doubletictactoe",
        "race",
    ];
    for game in games {
        let path = format!("{}/games/{game}.kif", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("a shipped game");
        let desc = crate::gdl::parse(&text).expect("parses");
        let g = crate::ground::ground(&desc, &Default::default()).expect("grounds");
        let net = build(&g, &NetLimits::default()).expect("builds");
        assert_merged(&net);
        let (a, _) = optimize(net.clone(), 8);
        let (b, _) = optimize_built(net, 8);
        assert_eq!(shape(&a), shape(&b), "{game}: optimize_built and optimize differ");
    }
}

/// Asserts that no two gates of `net` are alike and that every and and or has sorted,
/// distinct operands.
fn assert_merged(net: &Propnet) {
    let mut seen = std::collections::HashSet::new();
    for (i, node) in net.nodes.iter().enumerate() {
        if let Node::And(ops) | Node::Or(ops) = node {
            assert!(ops.windows(2).all(|w| w[0] < w[1]), "node {i}: {node:?}");
        }
        if node.is_gate() {
            assert!(
                seen.insert(node.clone()),
                "node {i} repeats an earlier gate: {node:?}"
            );
        }
    }
}

/// The builder and the ordering make the same net and program on two threads as on one, and
/// the builder stops with the same error when the gates it builds hit the node limit while
/// the second thread still hands it components.
#[test]
fn two_threads_build_and_order_what_one_does() {
    // Two views of one name: no grounder writes them, but the builder orders them as a sort of
    // the pairs (name, node) would, on one thread or two. The second is `p`'s base node,
    // before the first's gate.
    let mut tied = toy();
    tied.atoms.push(atom(AtomKind::View, "r")); // 11
    let (head, body) = rule(11, &[lit(0, false)]);
    tied.rules.push(head, &body);
    let mut games = vec![("toy".to_string(), toy()), ("tied".to_string(), tied)];
    for game in ["breakthrough", "connectfour", "tictactoe"] {
        let path = format!("{}/games/{game}.kif", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("a shipped game");
        let desc = crate::gdl::parse(&text).expect("parses");
        let g = crate::ground::ground(&desc, &Default::default()).expect("grounds");
        games.push((game.to_string(), g));
    }
    for (name, g) in &games {
        for recursion in [Recursion::Loop, Recursion::Unroll] {
            let limits = NetLimits {
                recursion,
                ..NetLimits::default()
            };
            let one = named(g, &limits, false).expect("builds");
            let two = named(g, &limits, true).expect("builds");
            assert_eq!(format!("{one:?}"), format!("{two:?}"), "{name}, {recursion:?}");
            let mut sorted = one.views.clone();
            sorted.sort();
            assert_eq!(
                one.views, sorted,
                "{name}: the views are sorted by name, then node"
            );
            assert_eq!(
                order::order_with(&one, false),
                order::order_with(&one, true),
                "{name}, {recursion:?}"
            );
            // The views' names in chunks of a few, so that both threads take some.
            assert_eq!(
                order::order_with(&one, false),
                order::order_in_chunks(&one, true, 3),
                "{name}, {recursion:?}, small chunks"
            );
        }
    }
    let built = named(&games[1].1, &NetLimits::default(), true).expect("builds");
    let nodes: Vec<NodeId> = built
        .views
        .iter()
        .filter(|(n, _)| n == "r")
        .map(|v| v.1)
        .collect();
    assert!(nodes.len() == 2 && nodes[0] < nodes[1], "{nodes:?}");

    let breakthrough = &games[2].1;
    let full = named(breakthrough, &NetLimits::default(), false).expect("builds");
    let limits = NetLimits {
        max_nodes: full.nodes.len() / 2,
        ..NetLimits::default()
    };
    for parallel in [false, true] {
        match named(breakthrough, &limits, parallel) {
            Err(NetError::Limit { limit, .. }) => assert_eq!(limit, "max_nodes"),
            other => panic!("expected a limit error, got {other:?}"),
        }
    }
    let mut cyclic = toy();
    let (head, body) = rule(7, &[lit(6, true)]);
    cyclic.rules.push(head, &body);
    for parallel in [false, true] {
        match named(&cyclic, &NetLimits::default(), parallel) {
            Err(NetError::Cycle { propositions, .. }) => assert!(propositions.contains(&"r".to_string())),
            other => panic!("expected a cycle error, got {other:?}"),
        }
    }
}

/// The net of `g` built on one thread or two (`parallel`), its views named at once.
fn named(g: &Grounded, limits: &NetLimits, parallel: bool) -> Result<Propnet, NetError> {
    let (mut net, names) = build::build_with(g, limits, parallel)?;
    names.name(&mut net)?;
    Ok(net)
}

/// `compile` optimizes the net with its views unnamed and in atom order, and names them after
/// the passes (`ViewNames`): the net, and the views with their names in their order, are those
/// of the named net optimized, for nets whose passes remove views and with two views of one
/// name, the first of which by atom is built after the other.
#[test]
fn views_named_after_the_passes_are_the_views_of_the_named_net() {
    let mut tied = toy();
    tied.atoms.push(atom(AtomKind::View, "r")); // 11
    let (head, body) = rule(11, &[lit(0, false)]);
    tied.rules.push(head, &body);
    let mut games = vec![("tied".to_string(), tied)];
    for game in ["breakthrough", "connectfour", "tictactoe", "buttons"] {
        let path = format!("{}/games/{game}.kif", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("a shipped game");
        let desc = crate::gdl::parse(&text).expect("parses");
        let g = crate::ground::ground(&desc, &Default::default()).expect("grounds");
        games.push((game.to_string(), g));
    }
    let mut removed = 0;
    for (name, g) in &games {
        for parallel in [false, true] {
            let limits = NetLimits::default();
            let whole = named(g, &limits, parallel).expect("builds");
            let (plain, plain_reports) = optimize_built(whole.clone(), 8);
            let (unnamed, names) = build::build_with(g, &limits, parallel).expect("builds");
            assert_eq!(unnamed.views.len(), whole.views.len(), "{name}");
            let (mut later, later_reports) = passes::optimize_unnamed(unnamed, 8);
            names.name(&mut later).expect("named");
            assert_eq!(
                format!("{plain:?}"),
                format!("{later:?}"),
                "{name}, parallel {parallel}"
            );
            let sizes = |r: &[PassReport]| -> Vec<(Pass, u32, NetStats)> {
                r.iter().map(|r| (r.pass, r.round, r.stats.clone())).collect()
            };
            assert_eq!(sizes(&plain_reports), sizes(&later_reports), "{name}");
            removed += whole.views.len() - plain.views.len();
            let mut sorted = whole.views.clone();
            sorted.sort();
            assert_eq!(
                whole.views, sorted,
                "{name}: the views are sorted by name, then node"
            );
            if name == "tied" {
                // The views in atom order: the two `r` are atoms 6 and 11.
                let place = |a: usize| {
                    g.atoms[..a]
                        .iter()
                        .filter(|x| !matches!(x.kind, AtomKind::True | AtomKind::Does { .. }))
                        .count()
                };
                let built = build::build_with(g, &limits, parallel).expect("builds").0;
                assert!(built.views[place(6)].1 > built.views[place(11)].1);
                let rs: Vec<NodeId> = whole
                    .views
                    .iter()
                    .filter(|(n, _)| n == "r")
                    .map(|v| v.1)
                    .collect();
                assert!(rs.len() == 2 && rs[0] < rs[1], "{rs:?}");
            }
        }
    }
    assert!(removed > 0, "the passes removed some views");
}

/// On two threads, `order` copies the views' names in chunks that one thread takes from the
/// front and the other from the back (`order::NameChunks`); however the chunks fall to the
/// two, the names come out in the order of the views.
#[test]
fn view_names_copied_in_chunks_from_both_ends_are_in_order() {
    let views: Vec<(String, NodeId)> = (0..50).map(|i| (format!("v{i}"), NodeId(i))).collect();
    let plain: Vec<String> = views.iter().map(|(name, _)| name.clone()).collect();
    for chunk in [1, 3, 7, 50, 64] {
        for from_front in 0..=views.len().div_ceil(chunk) {
            let names = order::NameChunks::new(&views, chunk);
            let front = names.take(false, from_front);
            let back = names.take(true, usize::MAX);
            assert_eq!(
                order::joined(front, back, views.len()),
                plain,
                "chunks of {chunk}, {from_front} taken from the front"
            );
        }
    }
    // The two ends in turn, one chunk at a time.
    let names = order::NameChunks::new(&views, 4);
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let f = names.take(false, 1);
        let b = names.take(true, 1);
        if f.is_empty() && b.is_empty() {
            break;
        }
        front.extend(f);
        back.splice(0..0, b);
    }
    assert_eq!(order::joined(front, back, views.len()), plain);
}

/// The values of every node of `net` in 64 states at once: bit `k` of a leaf's word is its
/// value in state `k`, drawn from `rng`.
fn words(net: &Propnet, leaves: &[u64]) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(net.nodes.len());
    for node in &net.nodes {
        let w = match node {
            Node::Const(c) => 0u64.wrapping_sub(*c as u64),
            Node::Base(b) => leaves[*b as usize],
            Node::Input(i) => leaves[net.bases.len() + *i as usize],
            Node::Opaque(_) | Node::Feedback(_) => 0,
            Node::And(ops) => ops.iter().fold(!0, |a, o| a & v[o.index()]),
            Node::Or(ops) => ops.iter().fold(0, |a, o| a | v[o.index()]),
            Node::Not(x) => !v[x.index()],
        };
        v.push(w);
    }
    v
}

/// The leaves of a family net (constants, `bases` bases, `inputs` inputs) and ten small
/// gates over them, and where the gates begin.
fn family_start(rng: &mut propjet_runtime::Rng, bases: u32, inputs: u32) -> (Vec<Node>, usize) {
    let mut nodes = vec![Node::Const(false), Node::Const(true)];
    nodes.extend((0..bases).map(Node::Base));
    nodes.extend((0..inputs).map(Node::Input));
    let first_gate = nodes.len();
    for _ in 0..10 {
        let n = nodes.len() as u32;
        let ops = vec![NodeId(rng.below(n)), NodeId(rng.below(n))];
        nodes.push(match rng.below(3) {
            0 => Node::Not(ops[0]),
            1 => Node::And(ops.into()),
            _ => Node::Or(ops.into()),
        });
    }
    (nodes, first_gate)
}

/// Rewrites 2,000 random nets of `make` (seeded with `seed`) with `rewrite`, checks that each
/// result is well formed and has every output and view of its net on 256 random states, and
/// returns how many nets were rewritten and the operands of all nets before and after.
fn rewrites_keep_outputs(
    seed: u64,
    make: fn(&mut propjet_runtime::Rng) -> Propnet,
    rewrite: impl Fn(Propnet) -> (Propnet, bool),
) -> (usize, usize, usize) {
    let mut rng = propjet_runtime::Rng::new(seed);
    let (mut before, mut after, mut changed) = (0, 0, 0);
    for round in 0..2000 {
        let net = make(&mut rng);
        net.verify().expect("a well-formed net");
        let (out, rewrote) = rewrite(net.clone());
        out.verify().expect("a well-formed net");
        changed += rewrote as usize;
        before += NetStats::of(&net).edges;
        after += NetStats::of(&out).edges;
        for _ in 0..4 {
            let leaves: Vec<u64> = (0..14).map(|_| rng.next_u64()).collect();
            let (a, b) = (words(&net, &leaves), words(&out, &leaves));
            for (k, (x, y)) in net.outputs().zip(out.outputs()).enumerate() {
                assert_eq!(a[x.index()], b[y.index()], "round {round}, output {k}");
            }
            assert_eq!(net.views.len(), out.views.len());
            for ((name, x), (other, y)) in net.views.iter().zip(&out.views) {
                assert_eq!(name, other);
                assert_eq!(a[x.index()], b[y.index()], "round {round}, view {name}");
            }
        }
    }
    (changed, before, after)
}

/// A random net with families of wide gates: each family draws a set of earlier nodes, and
/// each member is that set less a few of them and with a few others, all of one kind.
fn family_net(rng: &mut propjet_runtime::Rng) -> Propnet {
    let (bases, inputs) = (10, 4);
    let (mut nodes, first_gate) = family_start(rng, bases, inputs);
    for _ in 0..1 + rng.below(5) {
        let n = nodes.len() as u32;
        let mut set: Vec<u32> = (0..4 + rng.below(40)).map(|_| rng.below(n)).collect();
        set.sort_unstable();
        set.dedup();
        // The pass takes only ors; the ands are there to be left as they are.
        let or = rng.below(4) != 0;
        for _ in 0..1 + rng.below(10) {
            let n = nodes.len() as u32;
            let mut ops: Vec<u32> = set.iter().copied().filter(|_| rng.below(16) != 0).collect();
            ops.extend((0..rng.below(3)).map(|_| rng.below(n)));
            ops.sort_unstable();
            ops.dedup();
            let ops = ops.into_iter().map(NodeId).collect();
            nodes.push(if or { Node::Or(ops) } else { Node::And(ops) });
        }
    }
    let gates = (nodes.len() - first_gate) as u32;
    with_outputs(rng, nodes, bases, inputs, gates)
}

#[test]
fn extraction_keeps_every_output_of_random_nets() {
    let (changed, before, after) = rewrites_keep_outputs(19, family_net, |net| extract::extract(net, 0));
    // The nets are made to share runs of operands, so the pass must have found them.
    assert!(changed > 500, "extraction changed {changed} of 2000 nets");
    assert!(after * 10 < before * 9, "operands {before} became {after}");
}

#[test]
fn gates_read_through_their_subsets_keep_every_output_of_random_nets() {
    let substitute = |net| subsets::substitute(net, 0, 0);
    let (changed, before, after) = rewrites_keep_outputs(23, and_family_net, substitute);
    // Some members of each family are the family's core alone, which the others read.
    assert!(changed > 500, "the pass changed {changed} of 2000 nets");
    assert!(after * 20 < before * 19, "operands {before} became {after}");
    // Random nets of every kind of node, operands unsorted and repeated among them.
    let (changed, ..) = rewrites_keep_outputs(29, |rng| random_net(rng, 4, 2, 60), substitute);
    assert!(changed > 0, "the pass changed no random net");
}

#[test]
fn a_gate_reads_an_earlier_one_only_where_its_outputs_need_that_one() {
    // n6 = a ∧ b is read by the legal output; n7 = a ∧ b ∧ c by the next state and n8 =
    // a ∧ b ∧ d by the legal output. Only n8 may read n6: n7's entry would compute n6 for it.
    let (a, b, c, d) = (NodeId(2), NodeId(3), NodeId(4), NodeId(5));
    let mut nodes = vec![Node::Const(false), Node::Const(true)];
    nodes.extend((0..4).map(Node::Base));
    nodes.push(Node::And([a, b].into_iter().collect()));
    nodes.push(Node::And([a, b, c].into_iter().collect()));
    nodes.push(Node::And([a, b, d].into_iter().collect()));
    let base = |b: u32, next: u32| BaseProp {
        name: format!("b{b}"),
        init: false,
        next: NodeId(next),
    };
    let legal = |i: u32, node: u32| InputProp {
        role: RoleIdx(0),
        name: format!("i{i}"),
        legal: NodeId(node),
    };
    let net = Propnet {
        roles: vec!["a".into()],
        nodes,
        bases: vec![base(0, 7), base(1, 2), base(2, 3), base(3, 4)],
        inputs: vec![legal(0, 6), legal(1, 8)],
        terminal: NodeId(0),
        ..Propnet::default()
    };
    net.verify().expect("a well-formed net");
    let (out, changed) = subsets::substitute(net.clone(), 0, 0);
    assert!(changed);
    assert_eq!(
        out.nodes[7], net.nodes[7],
        "the next state's gate took a legal gate"
    );
    assert_eq!(out.nodes[8], Node::And([d, NodeId(6)].into_iter().collect()));
    assert_same_outputs(&net, &out, 4);
}

/// A random net with families of narrow ands: each family draws a pair or a triple of earlier
/// nodes, and each member is those with one or two others.
fn and_family_net(rng: &mut propjet_runtime::Rng) -> Propnet {
    let (bases, inputs) = (10, 4);
    let (mut nodes, first_gate) = family_start(rng, bases, inputs);
    for _ in 0..1 + rng.below(6) {
        let n = nodes.len() as u32;
        let core: Vec<u32> = (0..2 + rng.below(2)).map(|_| rng.below(n)).collect();
        for _ in 0..1 + rng.below(10) {
            let n = nodes.len() as u32;
            let mut ops: Vec<u32> = core.clone();
            ops.extend((0..1 + rng.below(2)).map(|_| rng.below(n)));
            // Sometimes a member is the pair alone, the gate other members may read.
            if rng.below(8) == 0 {
                ops.truncate(2);
            }
            ops.sort_unstable();
            ops.dedup();
            if ops.len() < 2 {
                continue;
            }
            nodes.push(Node::And(ops.into_iter().map(NodeId).collect()));
        }
    }
    let gates = (nodes.len() - first_gate) as u32;
    with_outputs(rng, nodes, bases, inputs, gates)
}

/// The ands' shared pairs (`extract::and_pairs_only`) keep every output and view of random
/// nets whose ands share pairs, and take operands away.
#[test]
fn and_pairs_keep_every_output_of_random_nets() {
    let (changed, before, after) = rewrites_keep_outputs(20, and_family_net, extract::and_pairs_only);
    // The families share pairs by construction, so the step must have found many of them.
    assert!(changed > 500, "pairs changed {changed} of 2000 nets");
    assert!(after * 10 < before * 9, "operands {before} became {after}");
}

#[test]
fn inputs_are_arranged_in_the_order_the_next_state_entry_first_reads_them() {
    let mut moved = 0;
    for name in [
        "breakthrough",
        "buttons",
        "connectfour",
        "doubletictactoe",
        "race",
        "tictactoe",
    ] {
        let path = format!("{}/games/{name}.kif", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("the shipped game");
        let desc = crate::gdl::parse(&text).expect("parses");
        let compiled = crate::compile::compile(&desc, &crate::compile::Options::default()).expect("compiles");
        let program = &compiled.program;
        // The net handed out is the program's: it was arranged before it was ordered.
        assert!(
            order(&compiled.net) == *program,
            "{name}: the net orders to another program"
        );
        // Within each role, the inputs first read by the next-state entry's gates, in their
        // order, are the role's first inputs, one after the other.
        let layout = &program.layout;
        let first = program.first_input_slot() as u32;
        let mut expected: Vec<u32> = layout.role_inputs.iter().map(|r| r.start).collect();
        let mut seen = vec![false; program.num_inputs()];
        for &g in program.gates_of(propjet_runtime::Entry::Next) {
            for lit in program.gate_operands(g as usize).expect("a gate") {
                let i = lit.slot().wrapping_sub(first);
                if (i as usize) < seen.len() && !seen[i as usize] {
                    seen[i as usize] = true;
                    let role = layout.inputs[i as usize].0.index();
                    assert_eq!(
                        i, expected[role],
                        "{name}: input {} read first out of turn",
                        layout.inputs[i as usize].1
                    );
                    expected[role] += 1;
                }
            }
        }
        // The same net with its inputs back in sorted order computes the same outputs, each
        // input read where its name is.
        let mut sorted_net = compiled.net.clone();
        let mut old_of_new: Vec<u32> = (0..sorted_net.inputs.len() as u32).collect();
        old_of_new.sort_by(|&a, &b| {
            let (x, y) = (&sorted_net.inputs[a as usize], &sorted_net.inputs[b as usize]);
            (x.role, &x.name).cmp(&(y.role, &y.name))
        });
        if old_of_new.iter().enumerate().any(|(k, &i)| k as u32 != i) {
            moved += 1;
        }
        super::order::permute_inputs(&mut sorted_net, &old_of_new);
        let sorted = order(&sorted_net);
        let ours = Interpreter::new(program.clone()).expect("valid");
        let theirs = Interpreter::new(sorted.clone()).expect("valid");
        let mut rng = propjet_runtime::Rng::new(3);
        for _ in 0..20 {
            let mut a = vec![0u64; program.num_slots()];
            for v in &mut a[2..program.first_gate_slot()] {
                *v = rng.next_u64();
            }
            a[1] = !0;
            let mut b = vec![0u64; sorted.num_slots()];
            b[..first as usize].copy_from_slice(&a[..first as usize]);
            for (new, &old) in old_of_new.iter().enumerate() {
                b[first as usize + new] = a[first as usize + old as usize];
            }
            for entry in propjet_runtime::Entry::ALL {
                ours.eval(entry, &mut a).expect("runs");
                theirs.eval(entry, &mut b).expect("runs");
                let value = |v: &[u64], l: &propjet_runtime::Lit| {
                    v[l.slot() as usize] ^ if l.is_negated() { !0 } else { 0 }
                };
                let (x, y) = (program.outputs(entry), sorted.outputs(entry));
                if entry == propjet_runtime::Entry::Legal {
                    // One legal output per input, in input order.
                    for (new, &old) in old_of_new.iter().enumerate() {
                        assert_eq!(value(&a, &x[old as usize]), value(&b, &y[new]), "{name}: legal");
                    }
                } else {
                    for (x, y) in x.iter().zip(y) {
                        assert_eq!(value(&a, x), value(&b, y), "{name}: {entry:?}");
                    }
                }
            }
        }
    }
    assert!(moved > 0, "no game had its inputs moved");
}
