//! Signed gates: the net as ands over signed operands, then a choice of sign for each gate.
//!
//! In the ordered program a negation costs nothing (it flips the sign of a literal), but in the
//! net it is a `not` node, a component like any other. These passes rewrite the net as ands
//! whose operands may be negated, an or being the negated and of its negated operands. In that
//! form gates that are equal up to De Morgan's laws are one gate, and an and that reads an and
//! no one else reads can take over its operands (flattening). Then each gate is given a sign:
//! the net computes either the and or its negation, the or of the negated operands, whichever
//! leaves fewer nodes that some reader needs negated, since each of those costs one `not`.

use super::{GoalProp, Node, NodeId, Propnet};
use rustc_hash::FxHashMap;

/// A signed reference to a node of an [`Arena`]: `node << 1 | negated`.
type Lit = u32;

/// The constant false, node 0 of every arena.
const FALSE: Lit = 0;
/// The constant true.
const TRUE: Lit = 1;

fn node_of(l: Lit) -> usize {
    (l >> 1) as usize
}

fn negated(l: Lit) -> bool {
    l & 1 == 1
}

/// A node of the signed net.
enum SNode {
    /// The constant false, a base or an input.
    Leaf(Node),
    /// The and of its operands, sorted, without duplicates, constants or complementary pairs.
    And(Vec<Lit>),
}

/// An arena of signed nodes, operands before readers, with hash-consed ands.
struct Arena {
    nodes: Vec<SNode>,
    /// Whether each and was written as an or, the sign it starts with when signs are chosen.
    or_hint: Vec<bool>,
    leaves: FxHashMap<Node, u32>,
    /// Ands by the hash of their operands. A collision between different ands only loses a
    /// merge.
    ands: FxHashMap<u64, u32>,
}

impl Arena {
    fn new(capacity: usize) -> Arena {
        let mut nodes = Vec::with_capacity(capacity);
        nodes.push(SNode::Leaf(Node::Const(false)));
        Arena {
            nodes,
            or_hint: vec![false],
            leaves: FxHashMap::default(),
            ands: FxHashMap::default(),
        }
    }

    fn push(&mut self, node: SNode, or_hint: bool) -> Lit {
        let id = u32::try_from(self.nodes.len()).expect("fewer than 2^31 nodes");
        self.nodes.push(node);
        self.or_hint.push(or_hint);
        id << 1
    }

    fn leaf(&mut self, node: Node) -> Lit {
        match node {
            Node::Const(b) => FALSE ^ b as Lit,
            node => {
                if let Some(&id) = self.leaves.get(&node) {
                    return id << 1;
                }
                let lit = self.push(SNode::Leaf(node.clone()), false);
                self.leaves.insert(node, lit >> 1);
                lit
            }
        }
    }

    /// The and of `ops`, folded and shared.
    fn and(&mut self, mut ops: Vec<Lit>, or_hint: bool) -> Lit {
        ops.sort_unstable();
        ops.dedup();
        if ops.first() == Some(&FALSE) {
            return FALSE;
        }
        ops.retain(|&l| l != TRUE);
        // Sorted, `x` and `¬x` are neighbours, and their and is false.
        if ops.windows(2).any(|w| w[0] ^ 1 == w[1]) {
            return FALSE;
        }
        match ops.len() {
            0 => return TRUE,
            1 => return ops[0],
            _ => {}
        }
        let key = fx_hash(&ops);
        if let Some(&id) = self.ands.get(&key) {
            if matches!(&self.nodes[id as usize], SNode::And(found) if *found == ops) {
                return id << 1;
            }
            return self.push(SNode::And(ops), or_hint);
        }
        let lit = self.push(SNode::And(ops), or_hint);
        self.ands.insert(key, lit >> 1);
        lit
    }

    fn ops(&self, lit: Lit) -> Option<&[Lit]> {
        match &self.nodes[node_of(lit)] {
            SNode::And(ops) => Some(ops),
            SNode::Leaf(_) => None,
        }
    }
}

fn fx_hash(ops: &[Lit]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(ops)
}

/// The outputs of a net as signed references: legal, goal, terminal and next, in the order of
/// [`Propnet::outputs`], then the views (`None` for a view whose node no output needs).
struct Outputs {
    outputs: Vec<Lit>,
    views: Vec<Option<Lit>>,
}

/// The signed form of `net`.
fn to_signed(net: &Propnet) -> (Arena, Outputs) {
    let mut arena = Arena::new(net.nodes.len());
    let mut lit: Vec<Lit> = Vec::with_capacity(net.nodes.len());
    for node in &net.nodes {
        let l = match node {
            Node::Not(x) => lit[x.index()] ^ 1,
            Node::And(ops) => arena.and(ops.iter().map(|o| lit[o.index()]).collect(), false),
            Node::Or(ops) => arena.and(ops.iter().map(|o| lit[o.index()] ^ 1).collect(), true) ^ 1,
            leaf => arena.leaf(leaf.clone()),
        };
        lit.push(l);
    }
    let outputs = Outputs {
        outputs: net.outputs().map(|o| lit[o.index()]).collect(),
        views: net.views.iter().map(|(_, v)| Some(lit[v.index()])).collect(),
    };
    (arena, outputs)
}

/// How many times the outputs and the ands that the outputs need read each node; zero for the
/// nodes no output needs.
fn references(arena: &Arena, outputs: &Outputs) -> Vec<u32> {
    let mut refs = vec![0u32; arena.nodes.len()];
    for &l in &outputs.outputs {
        refs[node_of(l)] += 1;
    }
    for n in (0..arena.nodes.len()).rev() {
        if refs[n] == 0 {
            continue;
        }
        if let SNode::And(ops) = &arena.nodes[n] {
            for &l in ops {
                refs[node_of(l)] += 1;
            }
        }
    }
    refs
}

/// Rebuilds the signed net keeping only what the outputs need; with `flatten`, an and takes
/// over the operands of an and that it reads unnegated and that nothing else reads.
fn rebuild(old: &Arena, outputs: &Outputs, flatten: bool) -> (Arena, Outputs) {
    let refs = references(old, outputs);
    // How many times live ands read each node unnegated.
    let mut unnegated = vec![0u32; old.nodes.len()];
    for (n, node) in old.nodes.iter().enumerate() {
        if let (SNode::And(ops), true) = (node, refs[n] > 0) {
            for &l in ops.iter().filter(|&&l| !negated(l)) {
                unnegated[node_of(l)] += 1;
            }
        }
    }
    let mut arena = Arena::new(old.nodes.len());
    let mut map: Vec<Lit> = vec![FALSE; old.nodes.len()];
    for (n, node) in old.nodes.iter().enumerate() {
        if refs[n] == 0 {
            continue;
        }
        map[n] = match node {
            SNode::Leaf(leaf) => arena.leaf(leaf.clone()),
            SNode::And(ops) => {
                let mut new_ops = Vec::with_capacity(ops.len());
                for &l in ops {
                    let x = node_of(l);
                    let m = map[x] ^ (l & 1);
                    let inner = if flatten && !negated(m) && unnegated[x] == refs[x] {
                        // Every reader of `x` is an and that reads it unnegated, so `x` dies
                        // if each of its `k` readers takes its `n` operands: one gate less,
                        // and `k (n - 1) - n` operands more, which is taken when it is at
                        // most one (always, for a single reader).
                        arena.ops(m).filter(|inner| {
                            let (k, n) = (refs[x] as usize, inner.len());
                            k * (n - 1) <= n + 1
                        })
                    } else {
                        None
                    };
                    match inner {
                        Some(inner) => new_ops.extend_from_slice(inner),
                        None => new_ops.push(m),
                    }
                }
                arena.and(new_ops, old.or_hint[n])
            }
        };
    }
    // A view whose node no output needs is not rebuilt, and loses its name.
    let views = outputs
        .views
        .iter()
        .map(|&v| {
            v.filter(|&l| refs[node_of(l)] > 0)
                .map(|l| map[node_of(l)] ^ (l & 1))
        })
        .collect();
    let outputs = Outputs {
        outputs: outputs
            .outputs
            .iter()
            .map(|&l| map[node_of(l)] ^ (l & 1))
            .collect(),
        views,
    };
    (arena, outputs)
}

/// Chooses a sign for each and: `true` where the net should compute its negation as an or.
/// Starting from the signs the gates were written with, flips one gate at a time while that
/// lowers the number of nodes read negated, sweeping from the outputs back until a sweep
/// changes nothing (or a few sweeps have run: each flip pays, so later sweeps gain little).
fn choose_signs(arena: &Arena, outputs: &Outputs) -> Vec<bool> {
    const MAX_SWEEPS: usize = 8;
    let refs = references(arena, outputs);
    let n = arena.nodes.len();
    let mut flip: Vec<bool> = arena.or_hint.clone();
    // How many readers need each node as it is stored (`plain`) and negated (`negs`).
    let mut plain = vec![0u32; n];
    let mut negs = vec![0u32; n];
    let count = |plain: &mut [u32], negs: &mut [u32], x: usize, negative: bool, add: bool| {
        let c = if negative { &mut negs[x] } else { &mut plain[x] };
        if add {
            *c += 1;
        } else {
            *c -= 1;
        }
    };
    for &l in &outputs.outputs {
        let x = node_of(l);
        count(&mut plain, &mut negs, x, negated(l) ^ flip[x], true);
    }
    for (m, node) in arena.nodes.iter().enumerate() {
        if let (SNode::And(ops), true) = (node, refs[m] > 0) {
            for &l in ops {
                let x = node_of(l);
                count(&mut plain, &mut negs, x, negated(l) ^ flip[m] ^ flip[x], true);
            }
        }
    }
    for _ in 0..MAX_SWEEPS {
        let mut changed = false;
        for m in (1..n).rev() {
            let SNode::And(ops) = &arena.nodes[m] else {
                continue;
            };
            if refs[m] == 0 {
                continue;
            }
            // Flipping `m` swaps which of its readers read it negated, and flips the sign in
            // which it reads each operand.
            let mut gain = i64::from(negs[m] > 0) - i64::from(plain[m] > 0);
            for &l in ops {
                let x = node_of(l);
                if x == 0 {
                    continue;
                }
                if negated(l) ^ flip[m] ^ flip[x] {
                    gain += i64::from(negs[x] == 1);
                } else {
                    gain -= i64::from(negs[x] == 0);
                }
            }
            if gain <= 0 {
                continue;
            }
            changed = true;
            for &l in ops {
                let x = node_of(l);
                let was = negated(l) ^ flip[m] ^ flip[x];
                count(&mut plain, &mut negs, x, was, false);
                count(&mut plain, &mut negs, x, !was, true);
            }
            std::mem::swap(&mut plain[m], &mut negs[m]);
            flip[m] = !flip[m];
        }
        if !changed {
            break;
        }
    }
    flip
}

/// Writes the signed net back as a propnet with and, or and not gates, each and computed with
/// the sign `flip` gives it; `old` supplies everything but the nodes.
fn emit(arena: &Arena, outputs: &Outputs, flip: &[bool], old: Propnet) -> Propnet {
    let refs = references(arena, outputs);
    let n = arena.nodes.len();
    let mut nodes: Vec<Node> = Vec::with_capacity(n);
    // The node that computes each signed node as stored (negated where flipped), and the
    // `not` of it once a reader needs one.
    let mut stored: Vec<Option<NodeId>> = vec![None; n];
    let mut not: Vec<Option<NodeId>> = vec![None; n];
    let mut constants: [Option<NodeId>; 2] = [None; 2];
    let add = |nodes: &mut Vec<Node>, node: Node| {
        nodes.push(node);
        NodeId::from_index(nodes.len() - 1)
    };
    // The node for `l` read by a reader computed with sign `reader_flip`.
    let read = |nodes: &mut Vec<Node>,
                stored: &[Option<NodeId>],
                not: &mut [Option<NodeId>],
                constants: &mut [Option<NodeId>; 2],
                l: Lit,
                reader_flip: bool| {
        let x = node_of(l);
        if x == 0 {
            let b = negated(l) ^ reader_flip;
            return *constants[b as usize].get_or_insert_with(|| add(nodes, Node::Const(b)));
        }
        let plain = stored[x].expect("operands come first");
        if negated(l) ^ reader_flip ^ flip[x] {
            *not[x].get_or_insert_with(|| add(nodes, Node::Not(plain)))
        } else {
            plain
        }
    };
    for (m, node) in arena.nodes.iter().enumerate() {
        if refs[m] == 0 || m == 0 {
            continue;
        }
        let id = match node {
            SNode::Leaf(leaf) => add(&mut nodes, leaf.clone()),
            SNode::And(ops) => {
                let ops: Vec<NodeId> = ops
                    .iter()
                    .map(|&l| read(&mut nodes, &stored, &mut not, &mut constants, l, flip[m]))
                    .collect();
                add(&mut nodes, if flip[m] { Node::Or(ops) } else { Node::And(ops) })
            }
        };
        stored[m] = Some(id);
    }
    let mut out = outputs
        .outputs
        .iter()
        .map(|&l| read(&mut nodes, &stored, &mut not, &mut constants, l, false));
    let Propnet {
        roles,
        mut bases,
        constant_facts,
        mut inputs,
        goals,
        views,
        ..
    } = old;
    for i in &mut inputs {
        i.legal = out.next().expect("a legal output");
    }
    let goals: Vec<GoalProp> = goals
        .into_iter()
        .map(|g| GoalProp {
            node: out.next().expect("a goal output"),
            ..g
        })
        .collect();
    let terminal = out.next().expect("the terminal output");
    for b in &mut bases {
        b.next = out.next().expect("a next output");
    }
    // A view keeps its name where its value is still a node; one that only a `not` nobody
    // else reads would compute loses its name rather than add a gate.
    let views = views
        .into_iter()
        .zip(&outputs.views)
        .filter_map(|((name, _), &l)| {
            let l = l?;
            let x = node_of(l);
            let id = if x == 0 {
                constants[negated(l) as usize]
            } else if refs[x] == 0 {
                None
            } else if negated(l) ^ flip[x] {
                not[x]
            } else {
                stored[x]
            };
            id.map(|id| (name, id))
        })
        .collect();
    Propnet {
        roles,
        nodes,
        bases,
        constant_facts,
        inputs,
        goals,
        terminal,
        views,
    }
}

/// Merges gates equal up to De Morgan's laws and, with `flatten`, flattens ands into the ands
/// that alone read them; the gates keep the kind (and or or) they had.
pub(super) fn merge_signed(net: Propnet, flatten: bool) -> Propnet {
    let (arena, outputs) = to_signed(&net);
    let (arena, outputs) = rebuild(&arena, &outputs, flatten);
    let hint = arena.or_hint.clone();
    emit(&arena, &outputs, &hint, net)
}

/// Chooses for each gate whether the net computes it or its negation so that as few nodes as
/// possible are read negated.
pub(super) fn polarity(net: Propnet) -> Propnet {
    let (arena, outputs) = to_signed(&net);
    let (arena, outputs) = rebuild(&arena, &outputs, false);
    let flip = choose_signs(&arena, &outputs);
    emit(&arena, &outputs, &flip, net)
}
