//! Graphviz output for nets small enough to look at.

use super::{Node, NodeId, Propnet};
use std::fmt::Write;

/// The largest net [`to_dot`] draws; larger drawings are unreadable anyway.
pub const DOT_MAX_NODES: usize = 5_000;

/// The net as a Graphviz digraph: propositions as boxes (bases blue, inputs green), gates as
/// small shapes, outputs labelled, transitions dashed from a base's next back to the base.
/// `None` when the net has more than [`DOT_MAX_NODES`] nodes.
pub fn to_dot(net: &Propnet) -> Option<String> {
    if net.nodes.len() > DOT_MAX_NODES {
        return None;
    }
    let mut labels: Vec<Vec<String>> = vec![Vec::new(); net.nodes.len()];
    for input in &net.inputs {
        labels[input.legal.index()].push(format!(
            "(legal {} {})",
            net.roles[input.role.index()],
            input.name
        ));
    }
    for g in &net.goals {
        labels[g.node.index()].push(format!("(goal {} {})", net.roles[g.role.index()], g.value));
    }
    labels[net.terminal.index()].push("terminal".into());
    for b in &net.bases {
        labels[b.next.index()].push(format!("(next {})", b.name));
    }
    let mut out = String::from("digraph propnet {\n  rankdir=LR;\n  node [fontsize=10];\n");
    for (i, node) in net.nodes.iter().enumerate() {
        let (shape, text, color) = match node {
            Node::Const(b) => ("plaintext", b.to_string(), "black"),
            Node::Base(b) => ("box", net.bases[*b as usize].name.clone(), "blue"),
            Node::Input(x) => {
                let input = &net.inputs[*x as usize];
                (
                    "box",
                    format!("(does {} {})", net.roles[input.role.index()], input.name),
                    "darkgreen",
                )
            }
            Node::Opaque(x) => ("box", net.opaque[*x as usize].clone(), "purple"),
            Node::Feedback(x) => ("box", format!("feedback {x}"), "orange"),
            Node::And(_) => ("invtriangle", "and".into(), "black"),
            Node::Or(_) => ("ellipse", "or".into(), "black"),
            Node::Not(_) => ("diamond", "not".into(), "black"),
        };
        let mut label = text;
        for l in &labels[i] {
            label.push_str("\\n");
            label.push_str(l);
        }
        let _ = writeln!(
            out,
            "  n{i} [shape={shape}, color={color}, label=\"{}\"];",
            label.replace('"', "\\\"")
        );
        for op in node.operands() {
            let _ = writeln!(out, "  n{} -> n{i};", op.0);
        }
    }
    for (b, base) in net.bases.iter().enumerate() {
        if let Some(node) = base_node(net, b) {
            let _ = writeln!(out, "  n{} -> n{} [style=dashed];", base.next.0, node.0);
        }
    }
    out.push_str("}\n");
    Some(out)
}

fn base_node(net: &Propnet, b: usize) -> Option<NodeId> {
    net.nodes
        .iter()
        .position(|n| matches!(n, Node::Base(x) if *x as usize == b))
        .map(NodeId::from_index)
}
