//! Unit tests of the analysis on small nets built by hand.

use super::deps::{components, Cones, Graph};
use super::latch::{inductive, single_latches, Core};
use super::{analyze, Obstacle, Relation};
use crate::net::{BaseProp, InputProp, Node, NodeId, Propnet};
use propjet_runtime::RoleIdx;

/// A net with one role, the given bases (name, next node) and inputs (name), nodes given in
/// order; terminal and legal are constant.
fn net(nodes: Vec<Node>, bases: &[(&str, u32)], inputs: &[&str]) -> Propnet {
    let mut nodes = nodes;
    nodes.push(Node::Const(true));
    let t = NodeId(nodes.len() as u32 - 1);
    let net = Propnet {
        roles: vec!["r".into()],
        bases: bases
            .iter()
            .map(|&(name, next)| BaseProp {
                name: name.into(),
                init: false,
                next: NodeId(next),
            })
            .collect(),
        inputs: inputs
            .iter()
            .map(|&name| InputProp {
                role: RoleIdx(0),
                name: name.into(),
                legal: t,
            })
            .collect(),
        terminal: t,
        nodes,
        ..Propnet::default()
    };
    net.verify().expect("a valid test net");
    net
}

fn latches_of(net: &Propnet) -> (Vec<u32>, Vec<u32>) {
    let l = single_latches(&Core::of(net, &Graph::of(net)));
    (l.positive, l.negative)
}

#[test]
fn an_or_of_itself_is_a_positive_latch_and_an_and_a_negative_one() {
    // n0 = p, n1 = q, n2 = r, n3 = does a, n4 = p ∨ a, n5 = q ∧ a, n6 = ¬r.
    let n = net(
        vec![
            Node::Base(0),
            Node::Base(1),
            Node::Base(2),
            Node::Input(0),
            Node::Or(smallvec::smallvec![NodeId(0), NodeId(3)]),
            Node::And(smallvec::smallvec![NodeId(1), NodeId(3)]),
            Node::Not(NodeId(2)),
        ],
        &[("p", 4), ("q", 5), ("r", 6)],
        &["a"],
    );
    assert_eq!(latches_of(&n), (vec![0], vec![1]));
}

#[test]
fn a_latch_through_gates_and_a_constant_base() {
    // n0 = p, n1 = does a, n2 = ¬p, n3 = ¬n2 ∧ ¬a … p stays true through a double negation
    // inside an or: next(p) = (¬¬p) ∨ (a ∧ ¬p). A base whose next is constant false is a
    // negative latch and not a positive one.
    let n = net(
        vec![
            Node::Base(0),
            Node::Input(0),
            Node::Not(NodeId(0)),
            Node::Not(NodeId(2)),
            Node::And(smallvec::smallvec![NodeId(1), NodeId(2)]),
            Node::Or(smallvec::smallvec![NodeId(3), NodeId(4)]),
            Node::Const(false),
        ],
        &[("p", 5), ("z", 6)],
        &["a"],
    );
    assert_eq!(latches_of(&n), (vec![0], vec![1]));
}

#[test]
fn a_latch_that_needs_a_move_is_not_proven() {
    // next(p) = p ∧ a: p true stays true only if a is played; nor is p a positive latch
    // through next(p) = a alone. It is a negative latch (false stays false).
    let n = net(
        vec![
            Node::Base(0),
            Node::Input(0),
            Node::And(smallvec::smallvec![NodeId(0), NodeId(1)]),
            Node::Base(1),
        ],
        &[("p", 2), ("q", 1)],
        &["a"],
    );
    let (pos, neg) = latches_of(&n);
    assert!(pos.is_empty());
    assert_eq!(neg, vec![0]);
}

#[test]
fn two_bases_that_swap_are_latches_only_together() {
    // next(a) = b, next(b) = a: neither alone, but both true (or both false) stay so.
    let n = net(vec![Node::Base(0), Node::Base(1)], &[("a", 1), ("b", 0)], &[]);
    assert_eq!(latches_of(&n), (vec![], vec![]));
    assert_eq!(
        inductive(&n, &[Some(true), Some(true)]),
        vec![Some(true), Some(true)]
    );
    assert_eq!(
        inductive(&n, &[Some(false), Some(false)]),
        vec![Some(false), Some(false)]
    );
    // a true and b false swap: nothing is kept.
    assert_eq!(inductive(&n, &[Some(true), Some(false)]), vec![None, None]);
}

#[test]
fn independent_bases_form_components_and_a_counter_is_shared() {
    // x reads itself and move a; y reads itself and move b; c (a counter) reads only itself;
    // z reads x and y.
    let n = net(
        vec![
            Node::Base(0),                                       // n0 x
            Node::Base(1),                                       // n1 y
            Node::Base(2),                                       // n2 c
            Node::Input(0),                                      // n3 a
            Node::Input(1),                                      // n4 b
            Node::Or(smallvec::smallvec![NodeId(0), NodeId(3)]), // n5 next x
            Node::Or(smallvec::smallvec![NodeId(1), NodeId(4)]), // n6 next y
            Node::Not(NodeId(2)),                                // n7 next c
        ],
        &[("x", 5), ("y", 6), ("c", 7)],
        &["a", "b"],
    );
    let cones = Cones::of(&n, &Graph::of(&n));
    assert_eq!(cones.action_dependent, vec![true, true, false]);
    let (comp, count) = components(&n, &cones);
    assert_eq!(count, 2);
    assert_eq!(comp, vec![Some(0), Some(1), None]);
    // One role choosing a or b acts on one of the two: a choice, not a product.
    let a = analyze(&n);
    let why = a
        .factoring
        .expect_err("a choice between two bases does not factor");
    assert!(
        why.iter().any(|o| matches!(o, Obstacle::MovesCouple { .. })),
        "{why:?}"
    );
}

#[test]
fn relations_project_on_a_factor() {
    use super::Atom;
    let atom = |factor| Atom {
        factor,
        node: NodeId(0),
        name: String::new(),
        views: Vec::new(),
    };
    let atoms = vec![atom(Some(0)), atom(Some(1)), atom(None)];
    let rel = Relation::Or(vec![
        Relation::And(vec![Relation::Atom(0), Relation::Atom(1)]),
        Relation::Atom(2),
    ]);
    assert_eq!(
        rel.project(0, &atoms),
        Some(Relation::Or(vec![Relation::Atom(0), Relation::Atom(2)]))
    );
    assert!(rel.eval(&|a| a == 2));
    assert!(!rel.eval(&|a| a == 0));
    assert!(rel.eval(&|a| a < 2));
}
