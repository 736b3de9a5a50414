//! Optimization passes. Each is a forward sweep that rebuilds the arena, so operands stay
//! before their readers; each keeps the game's legal, goal, terminal and next functions as
//! they were (the differential test `tests/passes.rs` runs nets before and after side by side).

use super::{NetStats, Node, NodeId, Propnet};
use rustc_hash::FxHashMap;
use std::fmt;
use std::time::{Duration, Instant};

/// One optimization pass.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Pass {
    /// Propagates constants through gates.
    ConstantFolding,
    /// Replaces single-operand and/or gates by their operand and double negations by the node.
    Collapse,
    /// Merges structurally identical gates (operands as a sorted set), so each function of
    /// the same operands is computed once.
    Merge,
    /// Factors an operand shared by several ands under an or: `(a ∧ b) ∨ (a ∧ c)` becomes
    /// `a ∧ (b ∨ c)`.
    Factor,
    /// Exactly one input of each role holds in every joint move, so an or over more than half
    /// of a role's inputs is the negation of the or over the others.
    ExclusiveInputs,
    /// Removes inputs whose legal is constantly false and bases that can never change (their
    /// next is themselves, or the constant they start with).
    Propositions,
    /// Removes nodes that no output reads.
    DeadNodes,
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pass::ConstantFolding => "constant folding",
            Pass::Collapse => "collapse",
            Pass::Merge => "merge",
            Pass::Factor => "factor",
            Pass::ExclusiveInputs => "exclusive inputs",
            Pass::Propositions => "propositions",
            Pass::DeadNodes => "dead nodes",
        })
    }
}

/// The net's size after one pass.
#[derive(Clone, Debug)]
pub struct PassReport {
    /// The pass.
    pub pass: Pass,
    /// Which round of the pass pipeline (from 1).
    pub round: u32,
    /// Statistics after the pass.
    pub stats: NetStats,
    /// How long the pass took.
    pub time: Duration,
}

/// Runs the passes in rounds until a round changes nothing (at most `max_rounds`).
pub fn optimize(mut net: Propnet, max_rounds: u32) -> (Propnet, Vec<PassReport>) {
    let mut reports = Vec::new();
    for round in 1..=max_rounds {
        let before = NetStats::of(&net);
        for pass in [
            Pass::ConstantFolding,
            Pass::Collapse,
            Pass::Merge,
            Pass::Factor,
            Pass::ExclusiveInputs,
            Pass::Propositions,
            Pass::DeadNodes,
        ] {
            let start = Instant::now();
            net = run(&net, pass);
            reports.push(PassReport {
                pass,
                round,
                stats: NetStats::of(&net),
                time: start.elapsed(),
            });
        }
        if NetStats::of(&net) == before {
            break;
        }
    }
    (net, reports)
}

/// Runs one pass.
pub fn run(net: &Propnet, pass: Pass) -> Propnet {
    let flags = match pass {
        Pass::ConstantFolding => Flags {
            fold: true,
            ..Flags::default()
        },
        Pass::Collapse => Flags {
            collapse: true,
            ..Flags::default()
        },
        Pass::Merge => Flags {
            merge: true,
            ..Flags::default()
        },
        Pass::Factor => Flags {
            factor: true,
            ..Flags::default()
        },
        Pass::ExclusiveInputs => Flags {
            exclusive: true,
            ..Flags::default()
        },
        Pass::Propositions => return propositions(net),
        Pass::DeadNodes => return dead_nodes(net),
    };
    Rewriter::new(net, flags).run()
}

#[derive(Copy, Clone, Default)]
struct Flags {
    fold: bool,
    collapse: bool,
    merge: bool,
    factor: bool,
    exclusive: bool,
}

/// Rebuilds a net node by node, simplifying as the flags say.
struct Rewriter<'n> {
    old: &'n Propnet,
    flags: Flags,
    nodes: Vec<Node>,
    interned: FxHashMap<Node, NodeId>,
    /// What each old node became; `None` for nodes not rebuilt.
    map: Vec<Option<NodeId>>,
    /// What base and input propositions become (a node of the new arena), when not themselves.
    replace: FxHashMap<Node, Node>,
}

impl<'n> Rewriter<'n> {
    fn new(old: &'n Propnet, flags: Flags) -> Rewriter<'n> {
        Rewriter {
            old,
            flags,
            nodes: Vec::with_capacity(old.nodes.len()),
            interned: FxHashMap::default(),
            map: vec![None; old.nodes.len()],
            replace: FxHashMap::default(),
        }
    }

    /// Adds a node. Constants and propositions are always shared; gates only when merging.
    fn add(&mut self, node: Node) -> NodeId {
        let share = self.flags.merge || !node.is_gate();
        if share {
            if let Some(&id) = self.interned.get(&node) {
                return id;
            }
        }
        let id = NodeId::from_index(self.nodes.len());
        if share {
            self.interned.insert(node.clone(), id);
        }
        self.nodes.push(node);
        id
    }

    fn constant(&mut self, b: bool) -> NodeId {
        self.add(Node::Const(b))
    }

    fn as_const(&self, id: NodeId) -> Option<bool> {
        match self.nodes[id.index()] {
            Node::Const(b) => Some(b),
            _ => None,
        }
    }

    fn simplify(&mut self, node: Node) -> NodeId {
        match node {
            Node::And(ops) => self.junction(ops, true),
            Node::Or(ops) => self.junction(ops, false),
            Node::Not(x) => {
                if self.flags.fold {
                    if let Some(b) = self.as_const(x) {
                        return self.constant(!b);
                    }
                }
                if self.flags.collapse {
                    if let Node::Not(y) = self.nodes[x.index()] {
                        return y;
                    }
                }
                self.add(Node::Not(x))
            }
            other => {
                let other = self.replace.get(&other).cloned().unwrap_or(other);
                self.add(other)
            }
        }
    }

    /// An and (`is_and`) or an or over `ops`.
    fn junction(&mut self, mut ops: Vec<NodeId>, is_and: bool) -> NodeId {
        // For an and, true operands are neutral and a false one decides; for an or, the reverse.
        if self.flags.fold {
            let mut decided = false;
            ops.retain(|&x| match self.as_const(x) {
                Some(b) if b == is_and => false,
                Some(_) => {
                    decided = true;
                    true
                }
                None => true,
            });
            if decided {
                return self.constant(!is_and);
            }
            if ops.is_empty() {
                return self.constant(is_and);
            }
        }
        if self.flags.merge {
            ops.sort_unstable();
            ops.dedup();
        }
        if !is_and && self.flags.exclusive {
            ops = self.exclusive_inputs(ops);
        }
        if !is_and && self.flags.factor {
            return self.factor(ops);
        }
        if self.flags.collapse && ops.len() == 1 {
            return ops[0];
        }
        self.add(if is_and { Node::And(ops) } else { Node::Or(ops) })
    }

    /// The or over `ops` with shared operands of its and operands factored out, most shared
    /// first, until no operand is shared by two of them.
    fn factor(&mut self, mut ops: Vec<NodeId>) -> NodeId {
        loop {
            let mut count: FxHashMap<NodeId, u32> = FxHashMap::default();
            for &op in &ops {
                if let Node::And(inner) = &self.nodes[op.index()] {
                    for &x in inner {
                        *count.entry(x).or_insert(0) += 1;
                    }
                }
            }
            // The most shared operand, the smallest id among equals so the result is
            // deterministic.
            let Some((shared, n)) = count.into_iter().max_by_key(|&(x, n)| (n, std::cmp::Reverse(x))) else {
                break;
            };
            if n < 2 {
                break;
            }
            let mut residuals = Vec::new();
            let mut rest = Vec::new();
            for &op in &ops {
                match &self.nodes[op.index()] {
                    Node::And(inner) if inner.contains(&shared) => {
                        let remaining: Vec<NodeId> = inner.iter().copied().filter(|&x| x != shared).collect();
                        residuals.push(remaining);
                    }
                    _ => rest.push(op),
                }
            }
            // `shared ∧ (r₁ ∨ r₂ ∨ …)`; an empty residual is true, and then so is the or.
            let factored = if residuals.iter().any(|r| r.is_empty()) {
                shared
            } else {
                let ors: Vec<NodeId> = residuals
                    .into_iter()
                    .map(|r| {
                        if r.len() == 1 {
                            r[0]
                        } else {
                            self.add(Node::And(r))
                        }
                    })
                    .collect();
                let inner = self.factor(ors);
                self.add(Node::And(vec![shared, inner]))
            };
            rest.push(factored);
            ops = rest;
        }
        if ops.len() == 1 {
            return ops[0];
        }
        self.add(Node::Or(ops))
    }

    /// Replaces the inputs of one role among `ops` by the negated or of that role's other
    /// inputs, where that is fewer operands.
    fn exclusive_inputs(&mut self, ops: Vec<NodeId>) -> Vec<NodeId> {
        let mut by_role: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for &op in &ops {
            if let Node::Input(i) = self.nodes[op.index()] {
                by_role
                    .entry(self.old.inputs[i as usize].role.0)
                    .or_default()
                    .push(i);
            }
        }
        let mut out = ops;
        for (role, present) in by_role {
            let all: Vec<u32> = (0..self.old.inputs.len() as u32)
                .filter(|&i| self.old.inputs[i as usize].role.0 == role)
                .collect();
            if present.len() * 2 <= all.len() + 1 {
                continue;
            }
            let present_nodes: Vec<NodeId> = present.iter().map(|&i| self.add(Node::Input(i))).collect();
            out.retain(|x| !present_nodes.contains(x));
            let others: Vec<NodeId> = all
                .iter()
                .filter(|i| !present.contains(i))
                .map(|&i| self.add(Node::Input(i)))
                .collect();
            let or = if others.len() == 1 {
                others[0]
            } else {
                self.add(Node::Or(others))
            };
            let not = self.add(Node::Not(or));
            out.push(not);
        }
        out
    }

    fn run(mut self) -> Propnet {
        for i in 0..self.old.nodes.len() {
            let node = match &self.old.nodes[i] {
                Node::And(ops) => Node::And(ops.iter().map(|o| self.mapped(*o)).collect()),
                Node::Or(ops) => Node::Or(ops.iter().map(|o| self.mapped(*o)).collect()),
                Node::Not(x) => Node::Not(self.mapped(*x)),
                other => other.clone(),
            };
            let id = self.simplify(node);
            self.map[i] = Some(id);
        }
        let map = self.map;
        let old = self.old;
        remap(old, self.nodes, |id| map[id.index()])
    }

    fn mapped(&self, id: NodeId) -> NodeId {
        self.map[id.index()].expect("operands come before their readers")
    }
}

/// The net `old` with the arena `nodes`, outputs and views moved through `map`; views whose
/// node is gone are dropped.
fn remap(old: &Propnet, nodes: Vec<Node>, map: impl Fn(NodeId) -> Option<NodeId>) -> Propnet {
    let must = |id: NodeId| map(id).expect("every output survives");
    Propnet {
        roles: old.roles.clone(),
        nodes,
        bases: old
            .bases
            .iter()
            .map(|b| super::BaseProp {
                next: must(b.next),
                ..b.clone()
            })
            .collect(),
        constant_facts: old.constant_facts.clone(),
        inputs: old
            .inputs
            .iter()
            .map(|i| super::InputProp {
                legal: must(i.legal),
                ..i.clone()
            })
            .collect(),
        goals: old
            .goals
            .iter()
            .map(|g| super::GoalProp {
                node: must(g.node),
                ..g.clone()
            })
            .collect(),
        terminal: must(old.terminal),
        views: old
            .views
            .iter()
            .filter_map(|(name, id)| map(*id).map(|n| (name.clone(), n)))
            .collect(),
    }
}

/// Drops inputs that can never be legal and bases that never change, then renumbers.
fn propositions(net: &Propnet) -> Propnet {
    let is_const = |id: NodeId| match net.nodes[id.index()] {
        Node::Const(b) => Some(b),
        _ => None,
    };
    let keep_input: Vec<bool> = net
        .inputs
        .iter()
        .map(|i| is_const(i.legal) != Some(false))
        .collect();
    // A base keeps its initial value forever if its next is itself or that value.
    let fixed: Vec<Option<bool>> = net
        .bases
        .iter()
        .enumerate()
        .map(|(b, base)| {
            let stays = match net.nodes[base.next.index()] {
                Node::Base(x) => x as usize == b,
                Node::Const(v) => v == base.init,
                _ => false,
            };
            stays.then_some(base.init)
        })
        .collect();
    if keep_input.iter().all(|&k| k) && fixed.iter().all(|f| f.is_none()) {
        return net.clone();
    }
    let mut rw = Rewriter::new(net, Flags::default());
    let mut bases = Vec::new();
    let mut constant_facts = net.constant_facts.clone();
    for (b, base) in net.bases.iter().enumerate() {
        let to = match fixed[b] {
            Some(v) => {
                if v {
                    constant_facts.push(base.name.clone());
                }
                Node::Const(v)
            }
            None => {
                bases.push(base.clone());
                Node::Base(bases.len() as u32 - 1)
            }
        };
        rw.replace.insert(Node::Base(b as u32), to);
    }
    let mut inputs = Vec::new();
    for (i, input) in net.inputs.iter().enumerate() {
        let to = if keep_input[i] {
            inputs.push(input.clone());
            Node::Input(inputs.len() as u32 - 1)
        } else {
            Node::Const(false)
        };
        rw.replace.insert(Node::Input(i as u32), to);
    }
    constant_facts.sort();
    let mut out = rw.run();
    // `remap` kept every old base and input; keep only the survivors, with their new nodes.
    let kept_bases: Vec<usize> = (0..net.bases.len()).filter(|&b| fixed[b].is_none()).collect();
    out.bases = kept_bases.iter().map(|&b| out.bases[b].clone()).collect();
    let kept_inputs: Vec<usize> = (0..net.inputs.len()).filter(|&i| keep_input[i]).collect();
    out.inputs = kept_inputs.iter().map(|&i| out.inputs[i].clone()).collect();
    out.constant_facts = constant_facts;
    debug_assert_eq!(out.bases.len(), bases.len());
    debug_assert_eq!(out.inputs.len(), inputs.len());
    out
}

/// Keeps only the nodes some output reads, directly or not.
fn dead_nodes(net: &Propnet) -> Propnet {
    let mut live = vec![false; net.nodes.len()];
    for id in net.outputs() {
        live[id.index()] = true;
    }
    for i in (0..net.nodes.len()).rev() {
        if live[i] {
            for op in net.nodes[i].operands() {
                live[op.index()] = true;
            }
        }
    }
    let mut map: Vec<Option<NodeId>> = vec![None; net.nodes.len()];
    let mut nodes = Vec::with_capacity(net.nodes.len());
    for (i, node) in net.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let m = |x: &NodeId| map[x.index()].expect("a live node's operands are live");
        let node = match node {
            Node::And(ops) => Node::And(ops.iter().map(m).collect()),
            Node::Or(ops) => Node::Or(ops.iter().map(m).collect()),
            Node::Not(x) => Node::Not(m(x)),
            other => other.clone(),
        };
        map[i] = Some(NodeId::from_index(nodes.len()));
        nodes.push(node);
    }
    remap(net, nodes, |id| map[id.index()])
}
