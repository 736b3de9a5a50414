//! The dependency structure of a net: which bases depend on the players' moves, what each node
//! reads, and the connected components of the action-dependent transitions.
//!
//! Everything here is a linear sweep over the arena (which is in topological order) or a
//! breadth-first search over its reader lists, so it scales to nets of 100k gates and more: no
//! per-node sets of propositions are ever built.

use crate::net::{Node, NodeId, Propnet};

/// What a node is, in the compact form of a [`Graph`].
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Kind {
    /// The constant false.
    False,
    /// The constant true.
    True,
    /// A base proposition.
    Base,
    /// An input proposition.
    Input,
    /// A negation.
    Not,
    /// A conjunction.
    And,
    /// A disjunction.
    Or,
}

/// The net in compact form: each node's kind, its base or input number, and its operands and
/// readers as flat lists (`ops[op_start[n] .. op_start[n+1]]`, likewise for readers, readers in
/// ascending order). The analysis sweeps the net many times; flat arrays make a sweep of a net
/// of a million nodes a matter of milliseconds, where following each node's own operand
/// vector costs a cache miss per node.
pub struct Graph {
    /// The kind of each node.
    pub kind: Vec<Kind>,
    /// For a base or input node, its number; zero otherwise.
    pub index: Vec<u32>,
    op_start: Vec<u32>,
    ops: Vec<u32>,
    read_start: Vec<u32>,
    readers: Vec<u32>,
}

impl Graph {
    /// Builds the compact form of `net`.
    pub fn of(net: &Propnet) -> Graph {
        let n = net.nodes.len();
        let mut kind = Vec::with_capacity(n);
        let mut index = Vec::with_capacity(n);
        let mut op_start = Vec::with_capacity(n + 1);
        let mut ops: Vec<u32> = Vec::new();
        op_start.push(0);
        for node in &net.nodes {
            let (k, x) = match node {
                Node::Const(false) => (Kind::False, 0),
                Node::Const(true) => (Kind::True, 0),
                Node::Base(b) => (Kind::Base, *b),
                // An opaque atom is a function of the state that the analysis cannot see into:
                // taken as an unknown like an input, which only weakens what it proves.
                Node::Opaque(_) => (Kind::Input, u32::MAX),
                // So is a feedback leaf of a loop, a function of the state and the moves.
                Node::Feedback(_) => (Kind::Input, u32::MAX),
                Node::Input(x) => (Kind::Input, *x),
                Node::Not(_) => (Kind::Not, 0),
                Node::And(_) => (Kind::And, 0),
                Node::Or(_) => (Kind::Or, 0),
            };
            kind.push(k);
            index.push(x);
            ops.extend(node.operands().iter().map(|o| o.0));
            op_start.push(ops.len() as u32);
        }
        let (read_start, readers) = reverse(n, &op_start, &ops);
        Graph {
            kind,
            index,
            op_start,
            ops,
            read_start,
            readers,
        }
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    /// The operands of node `i`.
    pub fn operands(&self, i: usize) -> &[u32] {
        &self.ops[self.op_start[i] as usize..self.op_start[i + 1] as usize]
    }

    /// The nodes that read node `i`, ascending.
    pub fn readers(&self, i: usize) -> &[u32] {
        &self.readers[self.read_start[i] as usize..self.read_start[i + 1] as usize]
    }
}

/// The reader lists of a graph given by its operand lists (`ops[op_start[i]..op_start[i + 1]]`
/// for node `i`), in the same compressed form ([`crate::graph::reverse`]).
pub fn reverse(n: usize, op_start: &[u32], ops: &[u32]) -> (Vec<u32>, Vec<u32>) {
    crate::graph::reverse(n, |i| {
        ops[op_start[i] as usize..op_start[i + 1] as usize]
            .iter()
            .copied()
    })
}

/// What each node's cone (its transitive operands) contains.
pub struct Cones {
    /// Whether base `b` depends on the moves, through any chain of transitions.
    pub action_dependent: Vec<bool>,
    /// The node of each base proposition, if the net has one.
    pub base_node: Vec<Option<NodeId>>,
    /// Whether the node's cone holds an action-dependent base.
    pub has_state: Vec<bool>,
    /// Whether the node's cone holds an input.
    pub has_input: Vec<bool>,
    /// Whether the node lies in the cone of the next function of an action-dependent base.
    pub in_next_cone: Vec<bool>,
}

impl Cones {
    /// Computes the cone contents of every node of `net`, whose compact form is `graph`.
    pub fn of(net: &Propnet, graph: &Graph) -> Cones {
        let n = graph.len();
        let mut base_node = vec![None; net.bases.len()];
        let mut inputs: Vec<u32> = Vec::new();
        for (i, k) in graph.kind.iter().enumerate() {
            match k {
                Kind::Base => base_node[graph.index[i] as usize] = Some(NodeId(i as u32)),
                Kind::Input => inputs.push(i as u32),
                _ => {}
            }
        }
        // A base depends on the moves when an input reaches its next function, through gates
        // and through the transitions of other bases: a search forward from every input.
        let mut next_of: Vec<(u32, u32)> = net
            .bases
            .iter()
            .enumerate()
            .map(|(b, base)| (base.next.0, b as u32))
            .collect();
        next_of.sort_unstable();
        let mut is_next = vec![false; n];
        for &(node, _) in &next_of {
            is_next[node as usize] = true;
        }
        let mut reached = vec![false; n];
        let mut action_dependent = vec![false; net.bases.len()];
        let mut queue = inputs;
        for &i in &queue {
            reached[i as usize] = true;
        }
        while let Some(i) = queue.pop() {
            for &r in graph.readers(i as usize) {
                if !reached[r as usize] {
                    reached[r as usize] = true;
                    queue.push(r);
                }
            }
            if !is_next[i as usize] {
                continue;
            }
            let from = next_of.partition_point(|&(node, _)| node < i);
            for &(_, b) in next_of[from..].iter().take_while(|&&(node, _)| node == i) {
                if !action_dependent[b as usize] {
                    action_dependent[b as usize] = true;
                    if let Some(node) = base_node[b as usize] {
                        if !reached[node.index()] {
                            reached[node.index()] = true;
                            queue.push(node.0);
                        }
                    }
                }
            }
        }

        // Both facts as bits of one byte per node, in one sweep.
        const STATE: u8 = 1;
        const INPUT: u8 = 2;
        let mut has = vec![0u8; n];
        for i in 0..n {
            has[i] = match graph.kind[i] {
                Kind::Base if action_dependent[graph.index[i] as usize] => STATE,
                Kind::Base => 0,
                Kind::Input => INPUT,
                _ => graph
                    .operands(i)
                    .iter()
                    .fold(0, |acc, &op| acc | has[op as usize]),
            };
        }
        let mut in_next_cone = vec![false; n];
        for (b, base) in net.bases.iter().enumerate() {
            if action_dependent[b] {
                in_next_cone[base.next.index()] = true;
            }
        }
        for i in (0..n).rev() {
            if in_next_cone[i] {
                for &op in graph.operands(i) {
                    in_next_cone[op as usize] = true;
                }
            }
        }
        Cones {
            action_dependent,
            base_node,
            has_state: has.iter().map(|h| h & STATE != 0).collect(),
            has_input: has.iter().map(|h| h & INPUT != 0).collect(),
            in_next_cone,
        }
    }

    /// Whether node `i` is a function of the moves (and possibly shared state) alone.
    pub fn is_move_level(&self, i: usize) -> bool {
        self.has_input[i] && !self.has_state[i]
    }
}

/// A union-find over small integers.
#[derive(Clone, Debug)]
pub struct UnionFind {
    parent: Vec<u32>,
}

impl UnionFind {
    /// `n` singletons.
    pub fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n as u32).collect(),
        }
    }

    /// The representative of `x`'s set.
    pub fn find(&mut self, x: usize) -> usize {
        let mut root = x;
        while self.parent[root] as usize != root {
            root = self.parent[root] as usize;
        }
        let mut y = x;
        while self.parent[y] as usize != root {
            let up = self.parent[y] as usize;
            self.parent[y] = root as u32;
            y = up;
        }
        root
    }

    /// Joins the sets of `a` and `b`; whether they were apart.
    pub fn union(&mut self, a: usize, b: usize) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[hi] = lo as u32;
        true
    }
}

/// The connected components of the action-dependent transitions: two action-dependent bases are
/// together when one's next function reads the other, directly or through gates that read
/// action-dependent state (moves and action-independent state do not connect). Returns the
/// component of each base (`None` for action-independent bases), numbered from 0 in base order.
pub fn components(net: &Propnet, cones: &Cones) -> (Vec<Option<usize>>, usize) {
    let n = net.nodes.len();
    let mut uf = UnionFind::new(n);
    for (i, node) in net.nodes.iter().enumerate() {
        if !cones.in_next_cone[i] || !cones.has_state[i] {
            continue;
        }
        for op in node.operands() {
            if cones.has_state[op.index()] {
                uf.union(i, op.index());
            }
        }
    }
    for (b, base) in net.bases.iter().enumerate() {
        if let (true, Some(node)) = (cones.action_dependent[b], cones.base_node[b]) {
            if cones.has_state[base.next.index()] {
                uf.union(node.index(), base.next.index());
            }
        }
    }
    // A base no gate reads is placed by its next function alone.
    let mut number: Vec<Option<usize>> = vec![None; n];
    let mut count = 0;
    let mut comp = vec![None; net.bases.len()];
    for (b, base) in net.bases.iter().enumerate() {
        if !cones.action_dependent[b] {
            continue;
        }
        let node = cones.base_node[b].unwrap_or(base.next);
        let root = uf.find(node.index());
        let c = *number[root].get_or_insert_with(|| {
            count += 1;
            count - 1
        });
        comp[b] = Some(c);
    }
    (comp, count)
}

/// Which factors a node's cone touches, as far as one factor: `Local(None)` for none
/// (constants, moves and shared state only), `Local(Some(f))` for factor `f` alone.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Reach {
    /// At most one factor.
    Local(Option<u32>),
    /// Two factors or more.
    Mixed,
}

/// The reach of every node, given the factor of each base (`None` for shared bases).
pub fn reach(net: &Propnet, factor_of_base: &[Option<u32>]) -> Vec<Reach> {
    let mut out = Vec::with_capacity(net.nodes.len());
    for node in &net.nodes {
        let r = match *node {
            Node::Base(b) => Reach::Local(factor_of_base[b as usize]),
            Node::Const(_) | Node::Input(_) | Node::Opaque(_) => Reach::Local(None),
            // A loop's feedback leaf may read any base.
            Node::Feedback(_) => Reach::Mixed,
            _ => {
                let mut acc = Reach::Local(None);
                for op in node.operands() {
                    acc = match (acc, out[op.index()]) {
                        (Reach::Mixed, _) | (_, Reach::Mixed) => Reach::Mixed,
                        (Reach::Local(None), x) | (x, Reach::Local(None)) => x,
                        (Reach::Local(Some(a)), Reach::Local(Some(b))) if a == b => acc,
                        _ => Reach::Mixed,
                    };
                    if acc == Reach::Mixed {
                        break;
                    }
                }
                acc
            }
        };
        out.push(r);
    }
    out
}
