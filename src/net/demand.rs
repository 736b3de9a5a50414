//! The demand of opaque atoms (`doc/opaque.md` §4): for each opaque atom, a node over the bases
//! that is true in every state where the atom's value can change an output, so that executors
//! ask the evaluator only for demanded atoms.

use super::{Node, NodeId, Propnet};

/// Adds to `net` one demand node per opaque atom (`Propnet::demand`), computed backwards from
/// the outputs of legal, goals, terminal and next, whose demand is true.
///
/// A node's demand is the or, over the gates reading it, of the gate's demand and, for an and,
/// of the gate's other operands that read neither inputs nor opaque atoms (if one of those is
/// false, the and is false whatever the node is). It is sound: if an output differs between two
/// fillings of the opaque atoms that agree on every demanded atom, follow a chain of differing
/// nodes from the output down to an atom. Along it, each differing and is true in one filling,
/// so its operands that depend on the bases alone are true (in both fillings), and the demand
/// of each node of the chain holds, down to the atom, which was then demanded: a contradiction.
/// Views are not roots: their demand would cover every atom a helper view reads, so an
/// executor fills every atom before computing the views.
///
/// Run it after the passes: they neither keep nor need the demand nodes.
pub fn add_demand(net: &mut Propnet) {
    net.demand.clear();
    if net.opaque.is_empty() {
        return;
    }
    let n = net.nodes.len();
    // Which nodes read an opaque atom, and which read an input or an opaque atom.
    let mut on_opaque = vec![false; n];
    let mut dynamic = vec![false; n];
    for (i, node) in net.nodes.iter().enumerate() {
        match node {
            Node::Opaque(_) => {
                on_opaque[i] = true;
                dynamic[i] = true;
            }
            Node::Input(_) => dynamic[i] = true,
            _ => {
                on_opaque[i] = node.operands().iter().any(|o| on_opaque[o.index()]);
                dynamic[i] = node.operands().iter().any(|o| dynamic[o.index()]);
            }
        }
    }
    let constant = |net: &mut Propnet, b: bool| -> NodeId {
        match net.nodes.iter().position(|x| *x == Node::Const(b)) {
            Some(i) => NodeId::from_index(i),
            None => push(net, Node::Const(b)),
        }
    };
    let truth = constant(net, true);
    let falsum = constant(net, false);
    // What each node's demand is an or of; `truth` among them makes it true.
    let mut parts: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let roots: Vec<NodeId> = net
        .inputs
        .iter()
        .map(|i| i.legal)
        .chain(net.goals.iter().map(|g| g.node))
        .chain(std::iter::once(net.terminal))
        .chain(net.bases.iter().map(|b| b.next))
        .collect();
    for r in roots {
        if on_opaque[r.index()] {
            parts[r.index()] = vec![truth];
        }
    }
    let mut demand_of = vec![falsum; n];
    for i in (0..n).rev() {
        if !on_opaque[i] {
            continue;
        }
        let mut own = std::mem::take(&mut parts[i]);
        own.sort_unstable();
        own.dedup();
        let d = if own.is_empty() {
            falsum
        } else if own.contains(&truth) {
            truth
        } else if own.len() == 1 {
            own[0]
        } else {
            push(net, Node::Or(own.into()))
        };
        demand_of[i] = d;
        if d == falsum {
            continue;
        }
        let node = net.nodes[i].clone();
        let ops = node.operands();
        for (k, o) in ops.iter().enumerate() {
            if !on_opaque[o.index()] {
                continue;
            }
            let part = match node {
                Node::And(_) => {
                    let mut side: Vec<NodeId> = ops
                        .iter()
                        .enumerate()
                        .filter(|&(j, x)| j != k && !dynamic[x.index()])
                        .map(|(_, &x)| x)
                        .collect();
                    if d != truth {
                        side.push(d);
                    }
                    match side.len() {
                        0 => truth,
                        1 => side[0],
                        _ => push(net, Node::And(side.into())),
                    }
                }
                _ => d,
            };
            parts[o.index()].push(part);
        }
    }
    let mut demand = vec![falsum; net.opaque.len()];
    for (i, node) in net.nodes[..n].iter().enumerate() {
        if let Node::Opaque(x) = node {
            demand[*x as usize] = demand_of[i];
        }
    }
    net.demand = demand;
}

fn push(net: &mut Propnet, node: Node) -> NodeId {
    net.nodes.push(node);
    NodeId::from_index(net.nodes.len() - 1)
}
