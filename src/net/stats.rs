//! Size and shape of a net.

use super::{Node, Propnet};
use std::fmt;

/// Counts that describe a net.
///
/// Components are counted as propositions + gates + transitions, where the propositions are
/// the bases, the inputs and the output propositions (legal, goal, terminal); view
/// propositions are not counted separately, since in this net a view is the name of the gate
/// that computes it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NetStats {
    /// Base propositions (and as many transitions).
    pub bases: usize,
    /// Input propositions.
    pub inputs: usize,
    /// Legal propositions (one per input).
    pub legals: usize,
    /// Goal propositions.
    pub goals: usize,
    /// Named view propositions still in the net.
    pub views: usize,
    /// Constant nodes.
    pub constants: usize,
    /// And gates.
    pub ands: usize,
    /// Or gates.
    pub ors: usize,
    /// Not gates.
    pub nots: usize,
    /// Operands of and/or gates, summed.
    pub edges: usize,
    /// The largest fan-in of an and/or gate.
    pub max_fan_in: usize,
    /// The longest path through gates from a base or input to an output.
    pub depth: usize,
    /// Facts stored as constants rather than bases.
    pub constant_facts: usize,
    /// Opaque atoms still read by the net (propositions computed outside it).
    pub opaque: usize,
}

impl NetStats {
    /// The statistics of `net`.
    pub fn of(net: &Propnet) -> NetStats {
        // The counts and the depths in one sweep: each node's operands are read once (chess's
        // net as built has 775,000 nodes, whose operand vectors are mostly out of the cache).
        let mut s = NetStats::sizes(net);
        let mut depth = vec![0u32; net.nodes.len()];
        for (i, node) in net.nodes.iter().enumerate() {
            s.count(node);
            if node.is_gate() {
                depth[i] = 1 + node
                    .operands()
                    .iter()
                    .map(|o| depth[o.index()])
                    .max()
                    .unwrap_or(0);
            }
        }
        s.depth = net
            .outputs()
            .map(|o| depth[o.index()] as usize)
            .max()
            .unwrap_or(0);
        s
    }

    /// The statistics of `net` but its depth, which is left at 0: the pass pipeline counts
    /// after every pass, and leaving the depth out took linesOfAction's optimize from
    /// 2.73/2.73/2.29 s to 2.43/2.09/2.46 s in alternating runs.
    pub fn counts(net: &Propnet) -> NetStats {
        let mut s = NetStats::sizes(net);
        for node in &net.nodes {
            s.count(node);
        }
        s
    }

    /// The statistics of `net` that are the lengths of its lists, nothing counted yet.
    fn sizes(net: &Propnet) -> NetStats {
        NetStats {
            bases: net.bases.len(),
            inputs: net.inputs.len(),
            legals: net.inputs.len(),
            goals: net.goals.len(),
            views: net.views.len(),
            constant_facts: net.constant_facts.len(),
            ..NetStats::default()
        }
    }

    /// Counts `node`.
    fn count(&mut self, node: &Node) {
        match node {
            Node::Const(_) => self.constants += 1,
            Node::Base(_) | Node::Input(_) | Node::Feedback(_) => {}
            Node::Opaque(_) => self.opaque += 1,
            Node::And(ops) => {
                self.ands += 1;
                self.edges += ops.len();
                self.max_fan_in = self.max_fan_in.max(ops.len());
            }
            Node::Or(ops) => {
                self.ors += 1;
                self.edges += ops.len();
                self.max_fan_in = self.max_fan_in.max(ops.len());
            }
            Node::Not(_) => self.nots += 1,
        }
    }

    /// And, or and not gates.
    pub fn gates(&self) -> usize {
        self.ands + self.ors + self.nots
    }

    /// Propositions + gates + transitions, as described on the type.
    pub fn components(&self) -> usize {
        let propositions = self.bases + self.inputs + self.opaque + self.legals + self.goals + 1;
        propositions + self.gates() + self.bases
    }
}

impl fmt::Display for NetStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} components: {} bases, {} inputs, {} goals, {} gates ({} and, {} or, {} not), \
             {} edges, max fan-in {}, depth {}",
            self.components(),
            self.bases,
            self.inputs,
            self.goals,
            self.gates(),
            self.ands,
            self.ors,
            self.nots,
            self.edges,
            self.max_fan_in,
            self.depth
        )?;
        if self.opaque > 0 {
            write!(f, ", {} opaque atoms", self.opaque)?;
        }
        Ok(())
    }
}
