//! The dependency structure of a net: which bases depend on the players' moves, what each node
//! reads, and the connected components of the action-dependent transitions.
//!
//! Everything here is a linear sweep over the arena (which is in topological order) or a
//! breadth-first search over its reader lists, so it scales to nets of 100k gates and more: no
//! per-node sets of propositions are ever built.

use crate::net::{Node, NodeId, Propnet};

/// Reader lists of the net, in compressed form: the nodes that read node `n` are
/// `readers[start[n] .. start[n+1]]`.
pub struct Readers {
    start: Vec<u32>,
    readers: Vec<NodeId>,
}

impl Readers {
    /// Builds the reader lists of `net`.
    pub fn of(net: &Propnet) -> Readers {
        let n = net.nodes.len();
        let mut count = vec![0u32; n + 1];
        for node in &net.nodes {
            for op in node.operands() {
                count[op.index() + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut readers = vec![NodeId(0); count[n] as usize];
        for (i, node) in net.nodes.iter().enumerate() {
            for op in node.operands() {
                readers[fill[op.index()] as usize] = NodeId(i as u32);
                fill[op.index()] += 1;
            }
        }
        Readers {
            start: count,
            readers,
        }
    }

    /// The nodes that read `id`.
    pub fn of_node(&self, id: NodeId) -> &[NodeId] {
        &self.readers[self.start[id.index()] as usize..self.start[id.index() + 1] as usize]
    }
}

/// What each node's cone (its transitive operands) contains.
pub struct Cones {
    /// Whether base `b` depends on the moves, through any chain of transitions.
    pub action_dependent: Vec<bool>,
    /// The node of each base proposition, if the net has one.
    pub base_node: Vec<Option<NodeId>>,
    /// The node of each input proposition, if the net has one.
    pub input_node: Vec<Option<NodeId>>,
    /// Whether the node's cone holds an action-dependent base.
    pub has_state: Vec<bool>,
    /// Whether the node's cone holds an input.
    pub has_input: Vec<bool>,
    /// Whether the node's cone holds an action-independent base.
    pub has_shared: Vec<bool>,
    /// Whether the node lies in the cone of the next function of an action-dependent base.
    pub in_next_cone: Vec<bool>,
}

impl Cones {
    /// Computes the cone contents of every node of `net`.
    pub fn of(net: &Propnet, readers: &Readers) -> Cones {
        let n = net.nodes.len();
        let mut base_node = vec![None; net.bases.len()];
        let mut input_node = vec![None; net.inputs.len()];
        for (i, node) in net.nodes.iter().enumerate() {
            match *node {
                Node::Base(b) => base_node[b as usize] = Some(NodeId(i as u32)),
                Node::Input(x) => input_node[x as usize] = Some(NodeId(i as u32)),
                _ => {}
            }
        }
        // A base depends on the moves when an input reaches its next function, through gates
        // and through the transitions of other bases: a search forward from every input.
        let mut next_of: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (b, base) in net.bases.iter().enumerate() {
            next_of[base.next.index()].push(b as u32);
        }
        let mut reached = vec![false; n];
        let mut action_dependent = vec![false; net.bases.len()];
        let mut queue: Vec<NodeId> = input_node.iter().flatten().copied().collect();
        for id in &queue {
            reached[id.index()] = true;
        }
        while let Some(id) = queue.pop() {
            for &r in readers.of_node(id) {
                if !reached[r.index()] {
                    reached[r.index()] = true;
                    queue.push(r);
                }
            }
            for &b in &next_of[id.index()] {
                if !action_dependent[b as usize] {
                    action_dependent[b as usize] = true;
                    if let Some(node) = base_node[b as usize] {
                        if !reached[node.index()] {
                            reached[node.index()] = true;
                            queue.push(node);
                        }
                    }
                }
            }
        }

        let mut has_state = vec![false; n];
        let mut has_input = vec![false; n];
        let mut has_shared = vec![false; n];
        for (i, node) in net.nodes.iter().enumerate() {
            match *node {
                Node::Base(b) if action_dependent[b as usize] => has_state[i] = true,
                Node::Base(_) => has_shared[i] = true,
                Node::Input(_) => has_input[i] = true,
                _ => {
                    for op in node.operands() {
                        has_state[i] |= has_state[op.index()];
                        has_input[i] |= has_input[op.index()];
                        has_shared[i] |= has_shared[op.index()];
                    }
                }
            }
        }

        let mut in_next_cone = vec![false; n];
        for (b, base) in net.bases.iter().enumerate() {
            if action_dependent[b] {
                in_next_cone[base.next.index()] = true;
            }
        }
        for i in (0..n).rev() {
            if in_next_cone[i] {
                for op in net.nodes[i].operands() {
                    in_next_cone[op.index()] = true;
                }
            }
        }
        Cones {
            action_dependent,
            base_node,
            input_node,
            has_state,
            has_input,
            has_shared,
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
            Node::Const(_) | Node::Input(_) => Reach::Local(None),
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
