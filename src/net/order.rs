//! From a propnet to a [`Program`]: gates in a topological order that keeps each entry's gates
//! together, negations folded into literals, constants into the two constant slots.

use super::{Node, NodeId, Propnet};
use propjet_runtime::{Gate, Layout, Lit, Op, OpaqueSlots, Program};
use std::ops::Range;

/// Orders `net` into a program. Gates are emitted depth-first from the outputs of the legal,
/// terminal, goal, next and view entries in turn, so that a gate comes right after the
/// operands it needs and each entry's gates lie mostly in one run.
pub fn order(net: &Propnet) -> Program {
    let first_opaque_slot = 2 + net.bases.len() as u32 + net.inputs.len() as u32;
    let first_gate_slot = first_opaque_slot + net.opaque.len() as u32;
    let mut lits: Vec<Option<Lit>> = vec![None; net.nodes.len()];
    let mut gates: Vec<Gate> = Vec::new();
    let mut operands: Vec<Lit> = Vec::new();
    let mut stack: Vec<(NodeId, bool)> = Vec::new();

    let mut emit = |root: NodeId, lits: &mut Vec<Option<Lit>>| -> Lit {
        stack.push((root, false));
        while let Some((id, expanded)) = stack.pop() {
            if lits[id.index()].is_some() {
                continue;
            }
            let node = &net.nodes[id.index()];
            if !expanded {
                stack.push((id, true));
                for &op in node.operands().iter().rev() {
                    if lits[op.index()].is_none() {
                        stack.push((op, false));
                    }
                }
                continue;
            }
            let lit = match node {
                Node::Const(false) => Lit::FALSE,
                Node::Const(true) => Lit::TRUE,
                Node::Base(b) => Lit::pos(2 + b),
                Node::Input(i) => Lit::pos(2 + net.bases.len() as u32 + i),
                Node::Opaque(i) => Lit::pos(first_opaque_slot + i),
                Node::Not(x) => lits[x.index()].expect("operand emitted").negate(),
                Node::And(ops) | Node::Or(ops) => {
                    let start = operands.len() as u32;
                    operands.extend(ops.iter().map(|o| lits[o.index()].expect("operand emitted")));
                    let op = if matches!(node, Node::And(_)) {
                        Op::And
                    } else {
                        Op::Or
                    };
                    gates.push(Gate {
                        op,
                        start,
                        len: ops.len() as u32,
                    });
                    Lit::pos(first_gate_slot + gates.len() as u32 - 1)
                }
            };
            lits[id.index()] = Some(lit);
        }
        lits[root.index()].expect("root emitted")
    };

    let legal: Vec<Lit> = net.inputs.iter().map(|i| emit(i.legal, &mut lits)).collect();
    let terminal = emit(net.terminal, &mut lits);
    let goals: Vec<Lit> = net.goals.iter().map(|g| emit(g.node, &mut lits)).collect();
    let next: Vec<Lit> = net.bases.iter().map(|b| emit(b.next, &mut lits)).collect();
    let views: Vec<Lit> = net.views.iter().map(|(_, v)| emit(*v, &mut lits)).collect();
    let demand: Vec<Lit> = net.demand.iter().map(|&d| emit(d, &mut lits)).collect();

    let mut role_inputs: Vec<Range<u32>> = vec![0..0; net.roles.len()];
    for (r, range) in role_inputs.iter_mut().enumerate() {
        let start = net.inputs.partition_point(|i| i.role.index() < r) as u32;
        let end = net.inputs.partition_point(|i| i.role.index() <= r) as u32;
        *range = start..end;
    }
    let mut init = vec![0u64; Layout::words(net.bases.len())];
    for (b, base) in net.bases.iter().enumerate() {
        if base.init {
            init[b / 64] |= 1 << (b % 64);
        }
    }
    let layout = Layout {
        roles: net.roles.clone(),
        bases: net.bases.iter().map(|b| b.name.clone()).collect(),
        constant_facts: net.constant_facts.clone(),
        inputs: net.inputs.iter().map(|i| (i.role, i.name.clone())).collect(),
        role_inputs,
        goals: net.goals.iter().map(|g| (g.role, g.value)).collect(),
        views: net.views.iter().map(|(name, _)| name.clone()).collect(),
    };
    let mut program = Program {
        layout,
        gates,
        operands,
        init,
        legal,
        goals,
        terminal,
        next,
        views,
        entry_gates: Default::default(),
        opaque: OpaqueSlots {
            names: net.opaque.clone(),
            demand,
            demand_gates: Vec::new(),
        },
    };
    program.compute_entry_gates();
    program
}
