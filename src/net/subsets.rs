//! Gates that read every operand of an earlier gate of their kind read that gate instead
//! (`doc/propnet.md`, "Subsets read through their gate").
//!
//! When `h = a ∧ b` is a gate and a later gate `g = a ∧ b ∧ c` reads both of its operands, then
//! `g = h ∧ c`: one operand instead of two, and `h` is computed anyway for its own readers. The
//! same holds for ors. In the chess variants' legal entries many moves ask the same pair or
//! triple of conditions that another gate already combines (the same piece on one square and
//! the same square empty), so about one operand in eight can go.
//!
//! The pass changes operands only: every node keeps its index and its function, and no node
//! loses its last reader (the gate read instead is one that another gate read). Only gates
//! before `g` are read instead, so the arena stays in topological order.

use super::{Node, NodeId, Propnet};

/// Below this many nodes the pass is not run: the small nets have few such subsets (connectFour
/// 12 operands, speedChess 44) and their component counts are compared with published ones.
pub(super) const MIN_NODES: usize = 100_000;

/// Nor on a net whose gates have fewer operands than this on average.
pub(super) const MIN_FANIN: usize = 4;

/// A gate whose operands each have more later readers than this is not looked for in others:
/// the candidates would be read one by one (a gate of two of vectorracer4's most read nodes
/// had tens of thousands).
const MAX_CANDIDATES: usize = 1024;

/// The net with each gate reading, instead of their operands, disjoint earlier gates of its
/// kind whose operands it all reads (the largest first), and whether a gate changed. A net
/// under `min_nodes` nodes, or whose gates have fewer than `min_fanin` operands on average, is
/// returned as it is ([`MIN_NODES`] and [`MIN_FANIN`] in the pipeline).
pub(super) fn substitute(mut net: Propnet, min_nodes: usize, min_fanin: usize) -> (Propnet, bool) {
    let n = net.nodes.len();
    if n < min_nodes {
        return (net, false);
    }
    // Nets of narrow gates have few gates within others, and the search would cost more than
    // it saves: 4,000 of alexChess's 1.1 million operands (mean fan-in 2.9) in 37 ms, 61,000
    // of comp2006_farmers' million (3.3) in 43 ms, and none of vectorracer4's 1.9 million
    // (3.0), against a tenth and more of the operands of the chess variants (5.1).
    let (mut gates, mut operands) = (0usize, 0usize);
    for node in &net.nodes {
        if let Node::And(ops) | Node::Or(ops) = node {
            gates += 1;
            operands += ops.len();
        }
    }
    if operands < min_fanin * gates {
        return (net, false);
    }
    // Each node's readers among the and and or gates, ascending, in one array.
    let (start, readers) = crate::graph::reverse(n, |g| {
        let ops: &[NodeId] = match &net.nodes[g] {
            Node::And(ops) | Node::Or(ops) => ops,
            _ => &[],
        };
        ops.iter().map(|x| x.0)
    });
    // Each gate's kind and size, and the set of its operands' hashes as 64 bits, in arrays
    // small enough to stay in the cache, so that most candidates fail without their operands
    // being read.
    let mut size = vec![0u32; n];
    let mut sig = vec![0u64; n];
    for (g, node) in net.nodes.iter().enumerate() {
        if let Node::And(ops) | Node::Or(ops) = node {
            size[g] = (ops.len() as u32) << 1 | u32::from(matches!(node, Node::And(_)));
            sig[g] = ops.iter().fold(0, |acc, x| acc | bit(*x));
        }
    }
    let needed = entries(&net);
    let found = Found {
        needed: &needed,
        nodes: &net.nodes,
        start: &start,
        readers: &readers,
        size: &size,
        sig: &sig,
    };
    // The search only reads, so the gates are shared out between two threads, half of the
    // operands each.
    let half = {
        let total = start[n] as usize / 2;
        let mut seen = 0;
        net.nodes
            .iter()
            .position(|node| {
                seen += node.operands().len();
                seen >= total
            })
            .unwrap_or(n)
    };
    let mut pairs = std::thread::scope(|s| {
        let later = s.spawn(|| found.pairs(half..n));
        let mut pairs = found.pairs(0..half);
        // A panic of the helper is a bug of `Found::pairs`; it is passed on.
        pairs.extend(later.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        pairs
    });
    if pairs.is_empty() {
        return (net, false);
    }
    drop((readers, start, sig));
    // By gate, the largest subsets first (ties by node, so that the result does not depend on
    // the order the pairs were found in).
    pairs.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then((size[b.1 as usize] >> 1).cmp(&(size[a.1 as usize] >> 1)))
            .then(a.1.cmp(&b.1))
    });
    // taken[x] == g + 1: operand x of gate g is read through a chosen subset.
    let mut taken = vec![0u32; n];
    let mut chosen: Vec<NodeId> = Vec::new();
    let mut changed = false;
    // The last gate first: a gate's subsets are earlier gates, so they still have the
    // operands the search found in them.
    for group in pairs.chunk_by(|a, b| a.0 == b.0).rev() {
        let g = group[0].0;
        let stamp = g + 1;
        chosen.clear();
        for &(_, h) in group {
            let ops = net.nodes[h as usize].operands();
            if ops.iter().all(|x| taken[x.index()] != stamp) {
                for x in ops {
                    taken[x.index()] = stamp;
                }
                chosen.push(NodeId(h));
            }
        }
        let (Node::And(ops) | Node::Or(ops)) = &mut net.nodes[g as usize] else {
            unreachable!("pairs name and and or gates only");
        };
        ops.retain(|x| taken[x.index()] != stamp);
        ops.extend(chosen.iter().copied());
        ops.sort_unstable();
        // A chosen gate may have been an operand already (absorbed: `g = h ∧ a ∧ b` with
        // `h = a ∧ b`).
        ops.dedup();
        changed = true;
    }
    (net, changed)
}

/// What the search for subsets reads: the nodes, each node's readers among the gates
/// (`readers[start[x]..start[x + 1]]`, ascending), and each gate's size and kind
/// (`size[g] = operands << 1 | is_and`) and set of operand hashes ([`bit`]).
struct Found<'a> {
    /// Which outputs need each node ([`entries`]).
    needed: &'a [u8],
    nodes: &'a [Node],
    start: &'a [u32],
    readers: &'a [u32],
    size: &'a [u32],
    sig: &'a [u64],
}

impl Found<'_> {
    fn readers_of(&self, x: NodeId) -> &[u32] {
        &self.readers[self.start[x.index()] as usize..self.start[x.index() + 1] as usize]
    }

    /// The pairs `(g, h)` with `h` in `range`: gate `g` reads every operand of the earlier
    /// gate `h` of its kind, and more.
    fn pairs(&self, range: std::ops::Range<usize>) -> Vec<(u32, u32)> {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for h in range {
            let node = &self.nodes[h];
            let (and, small) = match node {
                Node::And(ops) => (true, ops),
                Node::Or(ops) => (false, ops),
                _ => continue,
            };
            if small.len() < 2 {
                continue;
            }
            // Every gate that reads all of h's operands reads the two with fewest readers: the
            // candidates are the later readers of both.
            let (mut a, mut b) = (small[0], small[1]);
            if self.readers_of(b).len() < self.readers_of(a).len() {
                std::mem::swap(&mut a, &mut b);
            }
            for &x in &small[2..] {
                let k = self.readers_of(x).len();
                if k < self.readers_of(a).len() {
                    b = a;
                    a = x;
                } else if k < self.readers_of(b).len() {
                    b = x;
                }
            }
            let (rare, other) = (
                later_than(self.readers_of(a), h),
                later_than(self.readers_of(b), h),
            );
            if rare.len() > MAX_CANDIDATES {
                continue;
            }
            let (want, small_sig) = (small.len() as u32, self.sig[h]);
            let mut candidate = |g: u32| {
                let gs = self.size[g as usize];
                // Reading h must not add h to the work of an entry point that needs g: the
                // next-state entry would compute a gate of the legal one's to save an operand.
                if gs >> 1 <= want
                    || (gs & 1 == 1) != and
                    || small_sig & !self.sig[g as usize] != 0
                    || self.needed[g as usize] & !self.needed[h] != 0
                {
                    return;
                }
                // g reads the two rarest: with no other operand, nothing is left to check.
                if small.len() == 2 || is_subset(small, self.nodes[g as usize].operands()) {
                    pairs.push((g, h as u32));
                }
            };
            if other.len() > 8 * rare.len() {
                for &g in rare {
                    if other.binary_search(&g).is_ok() {
                        candidate(g);
                    }
                }
            } else {
                let mut j = 0;
                for &g in rare {
                    while j < other.len() && other[j] < g {
                        j += 1;
                    }
                    if j < other.len() && other[j] == g {
                        candidate(g);
                    }
                }
            }
        }
        pairs
    }
}

/// For each node, which groups of outputs need it, one bit each: the legal outputs, the goals,
/// the terminal, the next state (with the loops' feedback and the opaque atoms' demand, which
/// the entry points that read them compute alongside), and the views. Each group is an entry
/// point of the ordered program, which computes only the gates it needs.
fn entries(net: &Propnet) -> Vec<u8> {
    let mut needed = vec![0u8; net.nodes.len()];
    let mut mark = |x: NodeId, bit: u8| needed[x.index()] |= bit;
    net.inputs.iter().for_each(|i| mark(i.legal, 1));
    net.goals.iter().for_each(|g| mark(g.node, 2));
    mark(net.terminal, 4);
    net.bases.iter().for_each(|b| mark(b.next, 8));
    // Loops and demand serve every entry that reads what they compute.
    net.feedback.iter().chain(&net.demand).for_each(|&x| mark(x, 15));
    net.views.iter().for_each(|(_, x)| {
        if *x != super::passes::GONE_VIEW {
            mark(*x, 16);
        }
    });
    for i in (0..net.nodes.len()).rev() {
        let m = needed[i];
        if m != 0 {
            for x in net.nodes[i].operands() {
                needed[x.index()] |= m;
            }
        }
    }
    needed
}

/// The readers in `list` (ascending) after node `h`.
fn later_than(list: &[u32], h: usize) -> &[u32] {
    &list[list.partition_point(|&g| g as usize <= h)..]
}

/// The bit of node `x` in a gate's set of operand hashes.
#[inline]
fn bit(x: NodeId) -> u64 {
    1 << (x.0.wrapping_mul(0x9e37_79b9) >> 26)
}

/// Whether every element of `small` is in `big`, both ascending.
fn is_subset(small: &[NodeId], big: &[NodeId]) -> bool {
    let mut j = 0;
    for x in small {
        // The rest of `big` must still hold the rest of `small`.
        while j < big.len() && big[j] < *x {
            j += 1;
        }
        if j == big.len() || big[j] != *x {
            return false;
        }
        j += 1;
    }
    true
}
