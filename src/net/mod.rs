//! The propositional net: base and input propositions, and/or/not gates, transitions, and the
//! named outputs (legal, goal, terminal, next) of a game (see `doc/propnet.md`).
//!
//! A [`Propnet`] is an arena of [`Node`]s in which every node's operands come before it, so
//! the arena order is a topological order and every pass is a forward sweep. Views are not
//! nodes of their own: a view proposition is the name of the node that computes it. Each base
//! proposition has a transition from its `next` node, so the transitions are the `bases` table.

mod build;
mod demand;
mod dot;
mod extract;
mod factor;
mod intern;
mod order;
mod passes;
mod signed;
mod stats;
mod subsets;

pub(crate) use build::build_unnamed;
pub use build::{build, NetLimits, Recursion};
pub use demand::add_demand;
pub use dot::{to_dot, DOT_MAX_NODES};
pub use order::{arrange_inputs, order};
pub(crate) use passes::optimize_unnamed;
pub use passes::{optimize, optimize_built, Pass, PassReport};
pub use stats::NetStats;

use propjet_runtime::RoleIdx;
use std::fmt;
use std::ops::Range;

/// A node of a [`Propnet`], numbered in topological order.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as a `usize`.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    fn from_index(i: usize) -> NodeId {
        NodeId(u32::try_from(i).expect("more than 2^32 nodes"))
    }
}

/// The operands of a gate: up to four kept in the node itself, more on the heap. Most gates
/// have few operands, and the net's passes rewrite every gate, so a heap allocation for each
/// would be most of their allocations.
pub type Operands = smallvec::SmallVec<[NodeId; 4]>;

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// What a node computes.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Node {
    /// A constant.
    Const(bool),
    /// Base proposition `i` (an index into [`Propnet::bases`]).
    Base(u32),
    /// Input proposition `i` (an index into [`Propnet::inputs`]).
    Input(u32),
    /// Opaque atom `i` (an index into [`Propnet::opaque`]): a function of the state computed
    /// outside the net (`doc/opaque.md`). The passes treat it as an unknown, like a base.
    Opaque(u32),
    /// Feedback leaf `i` (an index into [`Propnet::feedback`]): the previous round's value of
    /// an atom of a recursive component evaluated as a loop (`doc/propnet.md`, "Recursion as
    /// loops"). The passes treat it as an unknown, like a base.
    Feedback(u32),
    /// Conjunction of the operands (true when there are none).
    And(Operands),
    /// Disjunction of the operands (false when there are none).
    Or(Operands),
    /// Negation.
    Not(NodeId),
}

impl Node {
    /// The operands of a gate; empty for constants and propositions.
    pub fn operands(&self) -> &[NodeId] {
        match self {
            Node::And(ops) | Node::Or(ops) => ops,
            Node::Not(x) => std::slice::from_ref(x),
            Node::Const(_) | Node::Base(_) | Node::Input(_) | Node::Opaque(_) | Node::Feedback(_) => &[],
        }
    }

    /// Whether the node is an and, or or not gate.
    pub fn is_gate(&self) -> bool {
        matches!(self, Node::And(_) | Node::Or(_) | Node::Not(_))
    }
}

/// A base proposition: a fact of the state, with its transition.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BaseProp {
    /// The fact in canonical KIF, `(cell 1 1 b)`.
    pub name: String,
    /// Whether the fact holds in the initial state.
    pub init: bool,
    /// The node that computes whether the fact holds in the next state.
    pub next: NodeId,
}

/// An input proposition `(does role action)`, paired with its legal proposition.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct InputProp {
    /// The role.
    pub role: RoleIdx,
    /// The action in canonical KIF, `(mark 1 1)`.
    pub name: String,
    /// The node that computes `(legal role action)`.
    pub legal: NodeId,
}

/// A goal proposition `(goal role value)`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GoalProp {
    /// The role.
    pub role: RoleIdx,
    /// The value.
    pub value: u32,
    /// The node that computes it.
    pub node: NodeId,
}

/// A game as a propositional net.
#[derive(Clone, Debug, Default)]
pub struct Propnet {
    /// Role names in the game's order.
    pub roles: Vec<String>,
    /// The nodes, operands before the nodes that read them.
    pub nodes: Vec<Node>,
    /// The base propositions (one transition each).
    pub bases: Vec<BaseProp>,
    /// Facts that hold in every reachable state and so need no base proposition, sorted.
    pub constant_facts: Vec<String>,
    /// The input propositions, grouped by role in role order.
    pub inputs: Vec<InputProp>,
    /// The goal propositions, by role then value.
    pub goals: Vec<GoalProp>,
    /// The terminal proposition.
    pub terminal: NodeId,
    /// Named view propositions (every ground view atom of the game that still has a node), in
    /// canonical KIF, sorted by name.
    pub views: Vec<(String, NodeId)>,
    /// The opaque atoms in canonical KIF, sorted; empty for nearly every game.
    pub opaque: Vec<String>,
    /// The demand of each opaque atom (a node over the bases; see [`add_demand`]), or empty
    /// before it is added.
    pub demand: Vec<NodeId>,
    /// For each feedback leaf `i` ([`Node::Feedback`]), the node that computes its atom in one
    /// round of its component from the feedback leaves: the loop runs the round until every
    /// `feedback[i]` equals leaf `i`. Readers outside the component read these nodes. Empty
    /// when recursion is unrolled ([`Recursion::Unroll`]).
    pub feedback: Vec<NodeId>,
    /// The feedback leaves of each loop (one per recursive component), consecutive ranges that
    /// cover `0..feedback.len()` in order, a component after those it reads.
    pub loops: Vec<Range<u32>>,
}

impl Propnet {
    /// The node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The indices of role `role`'s inputs in [`Propnet::inputs`], which are grouped by role
    /// in role order.
    pub fn role_inputs(&self, role: usize) -> std::ops::Range<usize> {
        let start = self.inputs.partition_point(|i| i.role.index() < role);
        let end = self.inputs.partition_point(|i| i.role.index() <= role);
        start..end
    }

    /// The nodes every output reads, directly: legal, goal, terminal, next and the loops'
    /// feedback outputs, in that order.
    pub fn outputs(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.inputs
            .iter()
            .map(|i| i.legal)
            .chain(self.goals.iter().map(|g| g.node))
            .chain(std::iter::once(self.terminal))
            .chain(self.bases.iter().map(|b| b.next))
            .chain(self.feedback.iter().copied())
    }

    /// Checks the structural invariants: operands before readers, indices in range. A failure is
    /// a bug in the code that built or rewrote the net.
    pub fn verify(&self) -> Result<(), NetError> {
        let n = self.nodes.len();
        for (i, node) in self.nodes.iter().enumerate() {
            for &op in node.operands() {
                if op.index() >= i {
                    return Err(NetError::Internal(format!(
                        "node n{i} reads n{} which is not before it",
                        op.0
                    )));
                }
            }
            match *node {
                Node::Base(b) if b as usize >= self.bases.len() => {
                    return Err(NetError::Internal(format!(
                        "node n{i} is base {b} of {}",
                        self.bases.len()
                    )))
                }
                Node::Input(x) if x as usize >= self.inputs.len() => {
                    return Err(NetError::Internal(format!(
                        "node n{i} is input {x} of {}",
                        self.inputs.len()
                    )))
                }
                Node::Opaque(x) if x as usize >= self.opaque.len() => {
                    return Err(NetError::Internal(format!(
                        "node n{i} is opaque atom {x} of {}",
                        self.opaque.len()
                    )))
                }
                Node::Feedback(x) if x as usize >= self.feedback.len() => {
                    return Err(NetError::Internal(format!(
                        "node n{i} is feedback leaf {x} of {}",
                        self.feedback.len()
                    )))
                }
                _ => {}
            }
        }
        let out_of_range = self
            .outputs()
            .chain(self.views.iter().map(|v| v.1))
            .chain(self.demand.iter().copied())
            .find(|id| id.index() >= n);
        if let Some(id) = out_of_range {
            return Err(NetError::Internal(format!(
                "an output reads {id}, beyond the {n} nodes"
            )));
        }
        let mut end = 0;
        for range in &self.loops {
            if range.start != end || range.end <= range.start {
                return Err(NetError::Internal(format!(
                    "loop {range:?} does not start at {end} or is empty"
                )));
            }
            end = range.end;
        }
        if end as usize != self.feedback.len() {
            return Err(NetError::Internal(format!(
                "the loops cover {end} of {} feedback leaves",
                self.feedback.len()
            )));
        }
        Ok(())
    }
}

/// Why the net could not be built.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Views depend on each other in a cycle that least-fixpoint unrolling could not resolve
    /// (a cycle through negation, which a stratified game cannot have, or one too large to
    /// unroll within the limits).
    #[error("a cycle among views: {}", .propositions.join(", "))]
    Cycle {
        /// Some of the propositions on the cycle.
        propositions: Vec<String>,
        /// Why it could not be unrolled.
        reason: String,
    },
    /// A budget of [`NetLimits`] was reached.
    #[error("net limit reached: {limit} = {value} while building {what}")]
    Limit {
        /// Which limit.
        limit: &'static str,
        /// Its value.
        value: u64,
        /// What was being built.
        what: String,
    },
    /// The ground program has something the net cannot express yet.
    #[error("not supported by the net: {0}")]
    Unsupported(String),
    /// A bug: an invariant failed.
    #[error("internal net error (a bug): {0}")]
    Internal(String),
}

#[cfg(test)]
mod tests;
