//! Latches proven from the net's structure by three-valued simulation.
//!
//! A base `p` is a positive latch when `p` true implies `next(p)` true in every state and for
//! every move; a negative latch when `p` false implies `next(p)` false. The proof evaluates the
//! net with `p` fixed and every other base and input unknown (`X`): an and with a false operand
//! is false, an or with a true operand is true, and otherwise any unknown operand makes the gate
//! unknown. Three-valued evaluation never claims a value the two-valued net could contradict, so
//! a proven latch is a latch; it may miss latches that need reasoning across operands (such as
//! `q ∨ ¬q`), or the fact that each role makes exactly one move.
//!
//! The inductive case proves sets together: assume a set of bases fixed (some true, some false),
//! evaluate every next function, drop the bases whose next value is not proven equal to their
//! assumed value, and repeat until nothing changes. The set that remains is inductive: in any
//! state where all of its bases have their assumed values, they keep them in every later state.

use crate::net::{Node, NodeId, Propnet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::deps::{Cones, Readers};

/// A three-valued truth value.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Tv {
    /// False.
    F,
    /// True.
    T,
    /// Unknown.
    X,
}

fn eval(node: &Node, vals: &[Tv]) -> Tv {
    match node {
        Node::Const(b) => {
            if *b {
                Tv::T
            } else {
                Tv::F
            }
        }
        Node::Base(_) | Node::Input(_) => Tv::X,
        Node::Not(x) => match vals[x.index()] {
            Tv::T => Tv::F,
            Tv::F => Tv::T,
            Tv::X => Tv::X,
        },
        Node::And(ops) => {
            let mut out = Tv::T;
            for op in ops {
                match vals[op.index()] {
                    Tv::F => return Tv::F,
                    Tv::X => out = Tv::X,
                    Tv::T => {}
                }
            }
            out
        }
        Node::Or(ops) => {
            let mut out = Tv::F;
            for op in ops {
                match vals[op.index()] {
                    Tv::T => return Tv::T,
                    Tv::X => out = Tv::X,
                    Tv::F => {}
                }
            }
            out
        }
    }
}

/// The latches of a net, by base index, ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Latches {
    /// Bases that once true stay true.
    pub positive: Vec<u32>,
    /// Bases that once false stay false.
    pub negative: Vec<u32>,
}

/// Evaluates every node with the given bases fixed and everything else unknown.
fn sweep(net: &Propnet, fixed: &[Option<bool>]) -> Vec<Tv> {
    let mut vals = Vec::with_capacity(net.nodes.len());
    for node in &net.nodes {
        let v = match *node {
            Node::Base(b) => match fixed[b as usize] {
                Some(true) => Tv::T,
                Some(false) => Tv::F,
                None => Tv::X,
            },
            _ => eval(node, &vals),
        };
        vals.push(v);
    }
    vals
}

/// Proves each base's latches on its own: `p` fixed, everything else unknown. Only the nodes
/// whose value the fixed base changes are evaluated again, in topological order, so the cost
/// per base is the part of its forward cone it decides, not the whole net.
pub fn single_latches(net: &Propnet, readers: &Readers, cones: &Cones) -> Latches {
    let base_vals = sweep(net, &vec![None; net.bases.len()]);
    let mut vals = base_vals.clone();
    let mut touched: Vec<usize> = Vec::new();
    let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut queued = vec![false; net.nodes.len()];
    let mut latches = Latches::default();
    // Only nodes that some next function reads can matter, and for base `p` only nodes numbered
    // below `next(p)` (the arena is topological), so the propagation stops at the others.
    let mut in_next_cone = vec![false; net.nodes.len()];
    for base in &net.bases {
        in_next_cone[base.next.index()] = true;
    }
    for i in (0..net.nodes.len()).rev() {
        if in_next_cone[i] {
            for op in net.nodes[i].operands() {
                in_next_cone[op.index()] = true;
            }
        }
    }
    for (b, base) in net.bases.iter().enumerate() {
        let limit = base.next.0;
        for value in [true, false] {
            let want = if value { Tv::T } else { Tv::F };
            let next_value = match cones.base_node[b] {
                None => base_vals[base.next.index()],
                Some(node) => {
                    vals[node.index()] = want;
                    touched.push(node.index());
                    for &r in readers.of_node(node) {
                        if r.0 <= limit && in_next_cone[r.index()] && !queued[r.index()] {
                            queued[r.index()] = true;
                            heap.push(Reverse(r.0));
                        }
                    }
                    while let Some(Reverse(i)) = heap.pop() {
                        let i = i as usize;
                        queued[i] = false;
                        let v = eval(&net.nodes[i], &vals);
                        if v != vals[i] {
                            vals[i] = v;
                            touched.push(i);
                            for &r in readers.of_node(NodeId(i as u32)) {
                                if r.0 <= limit && in_next_cone[r.index()] && !queued[r.index()] {
                                    queued[r.index()] = true;
                                    heap.push(Reverse(r.0));
                                }
                            }
                        }
                    }
                    let out = vals[base.next.index()];
                    for i in touched.drain(..) {
                        vals[i] = base_vals[i];
                    }
                    out
                }
            };
            if next_value == want {
                if value {
                    latches.positive.push(b as u32);
                } else {
                    latches.negative.push(b as u32);
                }
            }
        }
    }
    latches
}

/// The largest inductive subset of the assumptions `assume` (a value per base, or `None` for
/// no assumption): every base it keeps provably keeps its assumed value in the next state
/// whenever all kept bases have theirs. Returns the kept assumptions.
///
/// Dropping an assumption only turns known values unknown, never the reverse, so each node
/// changes at most once: after one full evaluation, only the readers of dropped bases are
/// evaluated again (in topological order), and the whole proof costs about one pass over the net.
pub fn inductive(net: &Propnet, assume: &[Option<bool>]) -> Vec<Option<bool>> {
    let readers = Readers::of(net);
    let mut base_node = vec![None; net.bases.len()];
    for (i, node) in net.nodes.iter().enumerate() {
        if let Node::Base(b) = node {
            base_node[*b as usize] = Some(i);
        }
    }
    let mut kept = assume.to_vec();
    let mut vals = sweep(net, &kept);
    let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut queued = vec![false; net.nodes.len()];
    loop {
        let mut dropped = Vec::new();
        for (b, base) in net.bases.iter().enumerate() {
            if let Some(v) = kept[b] {
                let want = if v { Tv::T } else { Tv::F };
                if vals[base.next.index()] != want {
                    kept[b] = None;
                    dropped.push(b);
                }
            }
        }
        if dropped.is_empty() {
            return kept;
        }
        for b in dropped {
            let Some(node) = base_node[b] else { continue };
            if vals[node] == Tv::X {
                continue;
            }
            vals[node] = Tv::X;
            for &r in readers.of_node(NodeId(node as u32)) {
                if !queued[r.index()] {
                    queued[r.index()] = true;
                    heap.push(Reverse(r.0));
                }
            }
        }
        while let Some(Reverse(i)) = heap.pop() {
            let i = i as usize;
            queued[i] = false;
            let v = eval(&net.nodes[i], &vals);
            if v != vals[i] {
                vals[i] = v;
                for &r in readers.of_node(NodeId(i as u32)) {
                    if !queued[r.index()] {
                        queued[r.index()] = true;
                        heap.push(Reverse(r.0));
                    }
                }
            }
        }
    }
}
