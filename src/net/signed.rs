//! Signed gates: the net as ands over signed operands, then a choice of sign for each gate.
//!
//! In the ordered program a negation costs nothing (it flips the sign of a literal), but in the
//! net it is a `not` node, a component like any other. This pass rewrites the net as ands
//! whose operands may be negated, an or being the negated and of its negated operands. In that
//! form gates that are equal up to De Morgan's laws are one gate, and an and that only ands
//! read can hand its operands to its readers and go (flattening). Then each gate is given a
//! sign: the net computes either the and or its negation, the or of the negated operands,
//! whichever leaves fewer nodes that some reader needs negated, since each of those costs one
//! `not`.

use super::intern::Interner;
use super::passes::{free_aside, live_nodes, with_room, GONE_VIEW};
use super::{GoalProp, Node, NodeId, Propnet};
use rustc_hash::FxHashMap;
use std::ops::Range;

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

/// A node of the signed net, in 12 bytes: the sweeps over it are bound by memory, and the
/// leaf it used to hold in place (a [`Node`], 32 bytes) made the arena of a million nodes
/// nearly three times larger, for a few thousand leaves.
#[derive(Clone)]
enum SNode {
    /// The constant false, a base or an input (a [`Node`] that is not a gate): this entry of
    /// [`Arena::leaf_nodes`].
    Leaf(u32),
    /// The and of the operands in this range of [`Arena::ops`].
    And(Range<u32>),
}

/// An arena of signed nodes, operands before readers, the operands of all ands in one
/// vector.
struct Arena {
    nodes: Vec<SNode>,
    ops: Vec<Lit>,
    /// Whether each and was written as an or, the sign it starts with when signs are chosen.
    or_hint: Vec<bool>,
    /// The leaves, in the order they were made ([`SNode::Leaf`]).
    leaf_nodes: Vec<Node>,
    /// The node of each leaf.
    leaves: FxHashMap<Node, u32>,
    /// Ands by their operands, when merging: the table holds only node numbers, hashed by
    /// the operands they point to.
    ands: Interner,
    merge: bool,
}

impl Arena {
    fn new(nodes: usize, ops: usize, merge: bool) -> Arena {
        Arena::with_table(
            nodes,
            ops,
            merge,
            Interner::with_capacity(if merge { nodes } else { 0 }),
        )
    }

    /// An arena that hash-conses its ands in `ands`, an empty table.
    fn with_table(nodes: usize, ops: usize, merge: bool, ands: Interner) -> Arena {
        let mut arena = Arena {
            nodes: Vec::with_capacity(nodes),
            ops: Vec::with_capacity(ops),
            or_hint: Vec::with_capacity(nodes),
            leaf_nodes: vec![Node::Const(false)],
            leaves: FxHashMap::default(),
            ands,
            merge,
        };
        arena.nodes.push(SNode::Leaf(0));
        arena.or_hint.push(false);
        arena
    }

    fn push(&mut self, node: SNode, or_hint: bool) -> Lit {
        let id = u32::try_from(self.nodes.len()).expect("fewer than 2^31 nodes");
        self.nodes.push(node);
        self.or_hint.push(or_hint);
        id << 1
    }

    fn leaf(&mut self, node: &Node) -> Lit {
        match node {
            Node::Const(b) => FALSE ^ *b as Lit,
            node => {
                if let Some(&id) = self.leaves.get(node) {
                    return id << 1;
                }
                let leaf = u32::try_from(self.leaf_nodes.len()).expect("fewer than 2^32 leaves");
                self.leaf_nodes.push(node.clone());
                let lit = self.push(SNode::Leaf(leaf), false);
                self.leaves.insert(node.clone(), lit >> 1);
                lit
            }
        }
    }

    /// The operands of the and `lit` points to, or `None` for a leaf.
    fn and_ops(&self, lit: Lit) -> Option<&[Lit]> {
        match &self.nodes[node_of(lit)] {
            SNode::And(r) => Some(&self.ops[r.start as usize..r.end as usize]),
            SNode::Leaf(_) => None,
        }
    }

    /// The and of the operands pushed onto `self.ops` from `start` on, folded and, when
    /// merging, shared.
    fn and_from(&mut self, start: usize, or_hint: bool) -> Lit {
        let len = match canonical(&mut self.ops[start..]) {
            Ok(len) => len,
            Err(l) => {
                self.ops.truncate(start);
                return l;
            }
        };
        self.ops.truncate(start + len);
        let hash = fx_hash(&self.ops[start..]);
        self.and_hashed(start, hash, or_hint)
    }

    /// The and of the operands pushed onto `self.ops` from `start` on, which are canonical
    /// (sorted and distinct, two or more) and hash to `hash`; shared when merging.
    fn and_hashed(&mut self, start: usize, hash: u64, or_hint: bool) -> Lit {
        let range = start as u32..self.ops.len() as u32;
        if !self.merge {
            return self.push(SNode::And(range), or_hint);
        }
        let (nodes, all_ops) = (&self.nodes, &self.ops);
        let ops_of = |id: u32| match &nodes[id as usize] {
            SNode::And(r) => &all_ops[r.start as usize..r.end as usize],
            SNode::Leaf(_) => &[],
        };
        let id = u32::try_from(nodes.len()).expect("fewer than 2^31 nodes");
        let found = self.ands.find_or_insert(
            hash,
            id,
            |id| ops_of(id) == &all_ops[start..],
            |id| fx_hash(ops_of(id)),
        );
        if let Some(id) = found {
            self.ops.truncate(start);
            return id << 1;
        }
        self.push(SNode::And(range), or_hint)
    }
}

/// Sorts `ops`, the operands of an and, and moves the distinct ones to the front: `Ok` with how
/// many there are when they are two or more, else `Err` with the literal the and is (false
/// when it reads false or a literal and its negation, true when it reads nothing else, the
/// operand when it has one).
fn canonical(ops: &mut [Lit]) -> Result<usize, Lit> {
    ops.sort_unstable();
    let mut len = 0;
    for i in 0..ops.len() {
        let l = ops[i];
        if l == TRUE || (len > 0 && ops[len - 1] == l) {
            continue;
        }
        // Sorted, `x` and `¬x` are neighbours, and their and is false; so is an and that
        // reads false, which sorts first.
        if l == FALSE || (len > 0 && ops[len - 1] ^ 1 == l) {
            return Err(FALSE);
        }
        ops[len] = l;
        len += 1;
    }
    match len {
        0 => Err(TRUE),
        1 => Err(ops[0]),
        _ => Ok(len),
    }
}

/// How many gates the sweeps that hash-cons take at a time: before the first of them, they
/// prepare those whose operands are all done ([`Batch`]).
const BATCH: usize = 16;

/// What a [`Batch`] knows of one of its nodes.
#[derive(Copy, Clone)]
enum Ahead {
    /// Nothing: the node is no and, or some operand of it was not done when the batch began.
    No,
    /// The and is this literal ([`canonical`] folded it).
    Folded(Lit),
    /// The and's canonical operands are `ops[start..end]` of the batch, with their hash.
    And { start: u32, end: u32, hash: u64 },
}

/// The ands of one batch of a sweep that hash-conses, prepared before the first of them is
/// made: their operands made canonical and hashed once (a sweep used to do both twice, once
/// to load the slots ahead and once to make the and), and the table slots of their hashes
/// loaded together ([`Interner::touch`]).
#[derive(Default)]
struct Batch {
    ahead: Vec<Ahead>,
    ops: Vec<Lit>,
    hashes: Vec<u64>,
}

impl Batch {
    fn clear(&mut self) {
        self.ahead.clear();
        self.ops.clear();
        self.hashes.clear();
    }

    /// Prepares the next node of the batch, an and whose operands were pushed onto
    /// `self.ops` from `start` on.
    fn prepare(&mut self, start: usize) {
        let ahead = match canonical(&mut self.ops[start..]) {
            Ok(len) => {
                self.ops.truncate(start + len);
                let hash = fx_hash(&self.ops[start..]);
                self.hashes.push(hash);
                Ahead::And {
                    start: start as u32,
                    end: self.ops.len() as u32,
                    hash,
                }
            }
            Err(l) => {
                self.ops.truncate(start);
                Ahead::Folded(l)
            }
        };
        self.ahead.push(ahead);
    }

    /// Leaves the next node of the batch unprepared.
    fn skip(&mut self) {
        self.ahead.push(Ahead::No);
    }

    /// The literal of node `k` of the batch made in `arena`, if it was prepared.
    fn make(&self, k: usize, arena: &mut Arena, or_hint: bool) -> Option<Lit> {
        match self.ahead[k] {
            Ahead::No => None,
            Ahead::Folded(l) => Some(l),
            Ahead::And { start, end, hash } => {
                let from = arena.ops.len();
                arena
                    .ops
                    .extend_from_slice(&self.ops[start as usize..end as usize]);
                Some(arena.and_hashed(from, hash, or_hint))
            }
        }
    }
}

fn fx_hash(ops: &[Lit]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(ops)
}

/// The outputs of a net as signed references: legal, goal, terminal and next, in the order of
/// [`Propnet::outputs`]; and what became of every node of the net the pass started from.
struct Outputs {
    outputs: Vec<Lit>,
    /// What each node became in each sweep so far, in order: the literal of each node of the
    /// net in the first arena ([`to_signed`]), then the literal of each node of that arena in
    /// the rebuilt one ([`rebuild`]); [`UNNEEDED`] for a node no output needs. The views are
    /// looked up through them once, when the net is emitted ([`view_literal`]), rather than
    /// moved from arena to arena: chess has 945,440 views, each a load at random per sweep.
    images: Vec<Vec<Lit>>,
}

/// The image of a node that no output needs ([`Outputs::images`]); no literal is this (it
/// would be a node 2^31 - 1).
const UNNEEDED: Lit = Lit::MAX;

/// The literal that the node `v` of the net the pass started from became, through `images`
/// ([`Outputs::images`]); `None` if no output needs it.
fn view_literal(images: &[Vec<Lit>], v: NodeId) -> Option<Lit> {
    if v == GONE_VIEW {
        return None;
    }
    let mut l = (v.0 as Lit) << 1;
    for image in images {
        let m = image[node_of(l)];
        if m == UNNEEDED {
            return None;
        }
        l = m ^ (l & 1);
    }
    Some(l)
}

/// The signed form of the part of `net` that the outputs need, literally: no folding or
/// merging beyond what the net has. Nodes no output needs are left out (their literal is a
/// placeholder that nothing reads): the factor pass before this one leaves every `and` it
/// replaced behind, a million dead gates on the largest games, and hashing them into the arena
/// took most of this pass's time there.
///
/// With `all_live` the caller knows that every node is needed (the net comes from a pass that
/// writes only those), and the sweep that would find them is left out.
fn to_signed(net: &Propnet, all_live: bool) -> (Arena, Outputs) {
    let live = if all_live {
        vec![true; net.nodes.len()]
    } else {
        live_nodes(net)
    };
    let edges = net
        .nodes
        .iter()
        .zip(&live)
        .filter(|(_, &l)| l)
        .map(|(n, _)| n.operands().len())
        .sum();
    let mut arena = Arena::new(net.nodes.len(), edges, true);
    let mut lit: Vec<Lit> = Vec::with_capacity(net.nodes.len());
    let mut batch = Batch::default();
    for (i, (node, &needed)) in net.nodes.iter().zip(&live).enumerate() {
        if i % BATCH == 0 {
            batch.clear();
            let end = (i + BATCH).min(net.nodes.len());
            for (node, &needed) in net.nodes[i..end].iter().zip(&live[i..end]) {
                match node {
                    Node::And(ops) | Node::Or(ops) if needed && ops.iter().all(|o| o.index() < i) => {
                        let or = matches!(node, Node::Or(_)) as Lit;
                        let start = batch.ops.len();
                        batch.ops.extend(ops.iter().map(|o| lit[o.index()] ^ or));
                        batch.prepare(start);
                    }
                    _ => batch.skip(),
                }
            }
            arena.ands.touch(&batch.hashes);
        }
        if !needed {
            lit.push(UNNEEDED);
            continue;
        }
        let l = match node {
            Node::Not(x) => lit[x.index()] ^ 1,
            Node::And(ops) | Node::Or(ops) => {
                let or = matches!(node, Node::Or(_));
                match batch.make(i % BATCH, &mut arena, or) {
                    Some(l) => l ^ or as Lit,
                    None => {
                        let start = arena.ops.len();
                        arena.ops.extend(ops.iter().map(|o| lit[o.index()] ^ or as Lit));
                        arena.and_from(start, or) ^ or as Lit
                    }
                }
            }
            leaf => arena.leaf(leaf),
        };
        lit.push(l);
    }
    let outputs = Outputs {
        outputs: net.outputs().map(|o| lit[o.index()]).collect(),
        images: vec![lit],
    };
    (arena, outputs)
}

/// How many times the outputs and the ands that the outputs need read each node; zero for the
/// nodes no output needs. `each` is called with every operand of every and counted, and the
/// and's number: the callers count more per operand in the same sweep, which reads each
/// operand once instead of once per count.
fn references(arena: &Arena, outputs: &Outputs, mut each: impl FnMut(Lit, usize)) -> Vec<u32> {
    let mut refs = vec![0u32; arena.nodes.len()];
    for &l in &outputs.outputs {
        refs[node_of(l)] += 1;
    }
    for n in (0..arena.nodes.len()).rev() {
        if refs[n] == 0 {
            continue;
        }
        if let SNode::And(r) = &arena.nodes[n] {
            for &l in &arena.ops[r.start as usize..r.end as usize] {
                refs[node_of(l)] += 1;
                each(l, n);
            }
        }
    }
    refs
}

/// Rebuilds the signed net, merging equal ands and keeping only what the outputs need. An and
/// that only ands read, unnegated, hands its operands to them and goes where that pays.
///
/// `table` holds every and of `old` ([`to_signed`] hash-consed them all). The rebuild is
/// first tried without hash-consing the ands that no flattening touches
/// ([`rebuild_untouched`]), which is exact unless flattening makes two gates equal or folds
/// one; when it meets that, the table is emptied and the ands are all hash-consed in it
/// ([`rebuild_hashed`]). `hash_all` goes there at once (the tests compare both ways).
fn rebuild(old: &Arena, outputs: Outputs, mut table: Interner, hash_all: bool) -> (Arena, Outputs) {
    // How many times live ands read each node unnegated.
    let mut unnegated = vec![0u32; old.nodes.len()];
    let refs = references(old, &outputs, |l, _| {
        if !negated(l) {
            unnegated[node_of(l)] += 1;
        }
    });
    if !hash_all {
        if let Some((arena, map)) = rebuild_untouched(old, &table, &refs, &unnegated) {
            return (arena, rebuilt_outputs(outputs, map));
        }
        #[cfg(test)]
        FALLBACKS.with(|f| f.set(f.get() + 1));
    }
    table.clear();
    let (arena, map) = rebuild_hashed(old, table, &refs, &unnegated);
    (arena, rebuilt_outputs(outputs, map))
}

#[cfg(test)]
thread_local! {
    /// How many times this thread's [`rebuild`] found that [`rebuild_untouched`] would not do.
    pub(super) static FALLBACKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The signed net as [`rebuild_hashed`] rebuilds it, if flattening merges and folds no gate;
/// `None` if it may. `table` holds every and of `old`, hashed by its operands.
///
/// `old` is hash-consed, no two ands with the same operands. While no gate is merged or
/// folded, every node the outputs need becomes a node of its own, numbered in the order of
/// `old`, so what the old nodes become is in the same order as they are, and the signs of
/// the operands are kept: an and none of whose operands is flattened into it (untouched)
/// reads the images of its old operands, still sorted and distinct, which no other untouched
/// and reads (its old operands being those of no other and). So only an and that flattening
/// touched can equal another gate: it is looked up among the touched ands written before it,
/// and among the ands of `old` whose operands are its own, taken back to the old nodes; if
/// either finds a needed one, the ands are merged in [`rebuild_hashed`], which is then run.
/// The untouched ands are neither sorted nor hashed (most of the gates: on chess about nine
/// in ten of a round's ands).
fn rebuild_untouched(
    old: &Arena,
    table: &Interner,
    refs: &[u32],
    unnegated: &[u32],
) -> Option<(Arena, Vec<Lit>)> {
    // Flattening adds operands: room for them, so that the operands are not copied as they grow.
    let mut arena = Arena::with_table(
        old.nodes.len(),
        with_room(old.ops.len()),
        false,
        Interner::with_capacity(0),
    );
    // The touched ands, hashed by their operands in `arena`.
    let mut touched = Interner::with_capacity(1 << 10);
    let mut map: Vec<Lit> = vec![UNNEEDED; old.nodes.len()];
    // The old node each node of `arena` comes from.
    let mut back: Vec<u32> = Vec::with_capacity(old.nodes.len());
    back.push(0);
    let mut flatten: Vec<Flatten> = vec![NO_FLATTEN; old.nodes.len()];
    let mut preimage: Vec<Lit> = Vec::new();
    for (n, node) in old.nodes.iter().enumerate() {
        if refs[n] == 0 {
            continue;
        }
        let before = arena.nodes.len();
        let m = match node {
            &SNode::Leaf(k) => arena.leaf(&old.leaf_nodes[k as usize]),
            SNode::And(r) => {
                let start = arena.ops.len();
                let hint = old.or_hint[n] as Flatten;
                let mut touches = false;
                for &l in &old.ops[r.start as usize..r.end as usize] {
                    let x = node_of(l);
                    let m = map[x] ^ (l & 1);
                    if flatten[x] == hint && !negated(l) {
                        touches = true;
                        arena.ops.extend_from_within(ops_range(&arena, m));
                    } else {
                        arena.ops.push(m);
                    }
                }
                if touches {
                    let len = canonical(&mut arena.ops[start..]).ok()?;
                    arena.ops.truncate(start + len);
                    let ops = &arena.ops[start..];
                    let id = u32::try_from(arena.nodes.len()).expect("fewer than 2^31 nodes");
                    let (nodes, all_ops) = (&arena.nodes, &arena.ops);
                    let ops_of = |id: u32| match &nodes[id as usize] {
                        SNode::And(r) => &all_ops[r.start as usize..r.end as usize],
                        SNode::Leaf(_) => &[],
                    };
                    let hash = fx_hash(ops);
                    if touched
                        .find_or_insert(hash, id, |id| ops_of(id) == ops, |id| fx_hash(ops_of(id)))
                        .is_some()
                    {
                        return None;
                    }
                    // Each node of `arena` comes from one old node, in order, so the old
                    // operands are sorted as these are.
                    preimage.clear();
                    preimage.extend(ops.iter().map(|&l| back[node_of(l)] << 1 | (l & 1)));
                    let same = table.find(fx_hash(&preimage), |u| old.and_ops(u << 1) == Some(&preimage[..]));
                    if same.is_some_and(|u| refs[u as usize] > 0) {
                        return None;
                    }
                }
                let range = start as u32..arena.ops.len() as u32;
                arena.push(SNode::And(range), old.or_hint[n])
            }
        };
        if arena.nodes.len() > before {
            back.push(n as u32);
        } else if n != 0 {
            // Node 0, the constant, is there already; any other node met again is a merge.
            return None;
        }
        map[n] = m;
        flatten[n] = flatten_of(&arena, old, refs, unnegated, n, m);
    }
    Some((arena, map))
}

/// Where the operands of the flattened and `m` of `arena` are in `arena.ops`.
fn ops_range(arena: &Arena, m: Lit) -> Range<usize> {
    match &arena.nodes[node_of(m)] {
        SNode::And(r) => r.start as usize..r.end as usize,
        SNode::Leaf(_) => unreachable!("a flattened node is an and"),
    }
}

/// The outputs of the rebuilt net, `map` giving what each old node became ([`UNNEEDED`] for
/// the nodes no output needs, which are not rebuilt: a view of one loses its name).
fn rebuilt_outputs(outputs: Outputs, map: Vec<Lit>) -> Outputs {
    let Outputs { outputs, mut images } = outputs;
    let outputs = outputs.iter().map(|&l| map[node_of(l)] ^ (l & 1)).collect();
    images.push(map);
    Outputs { outputs, images }
}

/// [`rebuild`] hash-consing every and into `table`, an empty table.
fn rebuild_hashed(old: &Arena, table: Interner, refs: &[u32], unnegated: &[u32]) -> (Arena, Vec<Lit>) {
    let mut arena = Arena::with_table(old.nodes.len(), with_room(old.ops.len()), true, table);
    let mut map: Vec<Lit> = vec![UNNEEDED; old.nodes.len()];
    let mut flatten: Vec<Flatten> = vec![NO_FLATTEN; old.nodes.len()];
    let mut scratch: Vec<Lit> = Vec::new();
    let mut batch = Batch::default();
    for (n, node) in old.nodes.iter().enumerate() {
        if n % BATCH == 0 {
            batch.clear();
            let end = (n + BATCH).min(old.nodes.len());
            for (j, &readers) in (n..end).zip(&refs[n..end]) {
                match &old.nodes[j] {
                    SNode::And(r)
                        if readers > 0
                            && old.ops[r.start as usize..r.end as usize]
                                .iter()
                                .all(|&l| node_of(l) < n) =>
                    {
                        let start = batch.ops.len();
                        flattened(&arena, old, &map, &flatten, j, &mut batch.ops);
                        batch.prepare(start);
                    }
                    _ => batch.skip(),
                }
            }
            arena.ands.touch(&batch.hashes);
        }
        if refs[n] == 0 {
            continue;
        }
        let m = match node {
            &SNode::Leaf(k) => arena.leaf(&old.leaf_nodes[k as usize]),
            SNode::And(_) => match batch.make(n % BATCH, &mut arena, old.or_hint[n]) {
                Some(l) => l,
                None => {
                    scratch.clear();
                    flattened(&arena, old, &map, &flatten, n, &mut scratch);
                    let start = arena.ops.len();
                    arena.ops.extend_from_slice(&scratch);
                    arena.and_from(start, old.or_hint[n])
                }
            },
        };
        map[n] = m;
        flatten[n] = flatten_of(&arena, old, refs, unnegated, n, m);
    }
    (arena, map)
}

/// Whether a rebuilt node hands its operands to the ands that read it: [`NO_FLATTEN`], or the
/// node's `or_hint` (as `u8`), since it is flattened only into readers written alike.
type Flatten = u8;

/// The rebuilt node keeps its operands.
const NO_FLATTEN: Flatten = 2;

/// Whether the node `x` of `old`, rebuilt as `m` in `arena`, hands its operands to its
/// readers. When every reader of `x` is an and that reads it unnegated, `x` dies if each of
/// its `k` readers takes its `n` operands: one gate less, and `k (n - 1) - n` operands more,
/// which is taken when it is at most one (always, for a single reader). Only between gates
/// written alike (two ands, or two ors): `a ∧ ¬(b ∨ c)` flattened is `a ∧ ¬b ∧ ¬c`, which
/// needs the negations of `b` and `c` instead of the one of the or.
///
/// Decided once, when `x` is rebuilt, and kept in one byte per node: deciding it at each
/// reader loaded the rebuilt and, its counts of readers and its hint from four arrays, for
/// every operand of every and, to flatten a few.
fn flatten_of(arena: &Arena, old: &Arena, refs: &[u32], unnegated: &[u32], x: usize, m: Lit) -> Flatten {
    if negated(m) || unnegated[x] != refs[x] {
        return NO_FLATTEN;
    }
    match arena.and_ops(m) {
        Some(inner) if refs[x] as usize * (inner.len() - 1) <= inner.len() + 1 => old.or_hint[x] as Flatten,
        _ => NO_FLATTEN,
    }
}

/// Pushes onto `out` the operands of the and `n` of `old` as rebuilt into `arena` (`map` gives
/// what each earlier node became, `flatten` whether it hands its operands to its readers,
/// [`flatten_of`]).
fn flattened(arena: &Arena, old: &Arena, map: &[Lit], flatten: &[Flatten], n: usize, out: &mut Vec<Lit>) {
    let SNode::And(r) = &old.nodes[n] else { return };
    let hint = old.or_hint[n] as Flatten;
    for &l in &old.ops[r.start as usize..r.end as usize] {
        let x = node_of(l);
        let m = map[x] ^ (l & 1);
        if flatten[x] == hint && !negated(l) {
            let inner = arena.and_ops(m).expect("a flattened node is an and");
            out.extend_from_slice(inner);
        } else {
            out.push(m);
        }
    }
}

/// Chooses a sign for each and: `true` where the net should compute its negation as an or.
/// Starting from the signs the gates were written with, flips one gate at a time while that
/// lowers the number of nodes read negated, sweeping from the outputs back until a sweep
/// changes nothing (or a few sweeps have run: each flip pays, so later sweeps gain little).
///
/// Returns the references of each and ([`references`]) with the signs.
fn choose_signs(arena: &Arena, outputs: &Outputs) -> (Vec<u32>, Vec<bool>) {
    const MAX_SWEEPS: usize = 8;
    let n = arena.nodes.len();
    let mut flip: Vec<bool> = arena.or_hint.clone();
    // How many readers need each node as it is stored (`plain`) and negated (`negs`), counted
    // in the sweep that counts the references.
    let mut plain = vec![0u32; n];
    let mut negs = vec![0u32; n];
    for &l in &outputs.outputs {
        let x = node_of(l);
        if negated(l) ^ flip[x] {
            negs[x] += 1;
        } else {
            plain[x] += 1;
        }
    }
    let refs = references(arena, outputs, |l, m| {
        let x = node_of(l);
        if negated(l) ^ flip[m] ^ flip[x] {
            negs[x] += 1;
        } else {
            plain[x] += 1;
        }
    });
    let ops_of = |m: usize| match &arena.nodes[m] {
        SNode::And(r) if refs[m] > 0 => &arena.ops[r.start as usize..r.end as usize],
        _ => &[],
    };
    for _ in 0..MAX_SWEEPS {
        let mut changed = false;
        for m in (1..n).rev() {
            let ops = ops_of(m);
            if ops.is_empty() {
                continue;
            }
            // Flipping `m` swaps which of its readers read it negated, and flips the sign in
            // which it reads each operand.
            let mut gain = i64::from(negs[m] > 0) - i64::from(plain[m] > 0);
            for &l in ops {
                let x = node_of(l);
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
                if negated(l) ^ flip[m] ^ flip[x] {
                    negs[x] -= 1;
                    plain[x] += 1;
                } else {
                    plain[x] -= 1;
                    negs[x] += 1;
                }
            }
            std::mem::swap(&mut plain[m], &mut negs[m]);
            flip[m] = !flip[m];
        }
        if !changed {
            break;
        }
    }
    (refs, flip)
}

/// What one node of the emitted net is, decided by [`emit`]'s first sweep: the nodes are
/// numbered there, and made from these in a second sweep that needs no other order.
#[derive(Copy, Clone)]
enum Slot {
    /// A constant.
    Const(bool),
    /// The leaf or and of this number in the signed arena.
    Signed(u32),
    /// The `not` of the node that stores this signed node.
    Not(u32),
}

/// How [`emit`] shares the making of the nodes between two threads: from `from` nodes on,
/// `chunk` nodes at a time, until none is left.
#[derive(Copy, Clone, Debug)]
pub(super) struct EmitSplit {
    /// The fewest nodes made on two threads; below, one makes them all.
    pub from: usize,
    /// The nodes a thread takes at a time.
    pub chunk: usize,
    /// Whether this thread waits for the other to make every chunk before it takes one (the
    /// tests' way to have the other thread's chunks joined, which this thread's speed
    /// otherwise decides).
    pub helper_alone: bool,
}

/// Below 65,536 nodes [`emit`] makes the nodes on one thread: starting a second costs more
/// than it saves. Above, in chunks of 4,096 (chess: about 140 chunks a pass).
const EMIT_SPLIT: EmitSplit = EmitSplit {
    from: 1 << 16,
    chunk: 1 << 12,
    helper_alone: false,
};

/// [`emit`]'s first sweep: the nodes of the net written, numbered as their first readers
/// meet them.
struct Numbering {
    slots: Vec<Slot>,
    /// How many gates and outputs read each node of the net written, counted as the nodes are
    /// numbered: the factor pass of the next round needs them, and counting them there is a
    /// sweep over every operand vector of the net (chess: about 8 ms a round).
    readers: Vec<u32>,
    /// The node that computes each signed node as stored (negated where flipped), and the
    /// `not` of it once a reader needs one.
    stored: Vec<Option<NodeId>>,
    not: Vec<Option<NodeId>>,
    constants: [Option<NodeId>; 2],
}

impl Numbering {
    /// Numbers the next node, read by none yet.
    fn add(&mut self, slot: Slot) -> NodeId {
        self.slots.push(slot);
        self.readers.push(0);
        NodeId::from_index(self.slots.len() - 1)
    }

    /// The node for `l` read by a reader computed with sign `reader_flip` (`flip` gives every
    /// signed node's), numbered at its first reader; counted as read once more.
    #[inline]
    fn read(&mut self, l: Lit, reader_flip: bool, flip: &[bool]) -> NodeId {
        let x = node_of(l);
        let id = if x == 0 {
            let b = negated(l) ^ reader_flip;
            match self.constants[b as usize] {
                Some(id) => id,
                None => {
                    let id = self.add(Slot::Const(b));
                    self.constants[b as usize] = Some(id);
                    id
                }
            }
        } else {
            let plain = self.stored[x].expect("operands come first");
            if negated(l) ^ reader_flip ^ flip[x] {
                match self.not[x] {
                    Some(id) => id,
                    None => {
                        // The `not` reads the node that stores `x`.
                        self.readers[plain.index()] = self.readers[plain.index()].saturating_add(1);
                        let id = self.add(Slot::Not(x as u32));
                        self.not[x] = Some(id);
                        id
                    }
                }
            } else {
                plain
            }
        };
        self.readers[id.index()] = self.readers[id.index()].saturating_add(1);
        id
    }
}

/// Writes the signed net back as a propnet with and, or and not gates, each and computed with
/// the sign `flip` gives it; `old` supplies everything but the nodes.
///
/// In two sweeps: the first numbers the nodes (each signed node the outputs need, each
/// constant and `not` where its first reader meets it), the second makes them. Making them
/// is most of the work, a vector of operands to allocate, fill and sort for each gate, and
/// each node depends only on the numbers, so on a large net the nodes are made on two
/// threads ([`EmitSplit`]): this one takes chunks of them from the front, the other from the
/// back, until none is left. Halves, as they were until 2026-11-24 (`opt20`), left one
/// thread waiting for the other: the vectors cost more to allocate on this thread, whose
/// allocator pool holds the freed nodes of earlier passes in pieces (chess, round 1: 94 ms
/// for this thread's half, 53 for the other's, timed under load).
fn emit(
    arena: &Arena,
    refs: &[u32],
    outputs: &Outputs,
    flip: &[bool],
    old: Propnet,
    split: EmitSplit,
) -> (Propnet, Vec<u32>) {
    let n = arena.nodes.len();
    let mut numbering = Numbering {
        slots: Vec::with_capacity(n),
        readers: Vec::with_capacity(n),
        stored: vec![None; n],
        not: vec![None; n],
        constants: [None; 2],
    };
    for (m, node) in arena.nodes.iter().enumerate() {
        if refs[m] == 0 || m == 0 {
            continue;
        }
        if let SNode::And(r) = node {
            for &l in &arena.ops[r.start as usize..r.end as usize] {
                numbering.read(l, flip[m], flip);
            }
        }
        numbering.stored[m] = Some(numbering.add(Slot::Signed(m as u32)));
    }
    let out: Vec<NodeId> = outputs
        .outputs
        .iter()
        .map(|&l| numbering.read(l, false, flip))
        .collect();
    let Numbering {
        slots,
        readers,
        stored,
        not,
        constants,
    } = numbering;
    // Every operand's `not` is numbered now, so an operand reads the same node as in the
    // first sweep.
    let operand = |l: Lit, reader_flip: bool| {
        let x = node_of(l);
        if x == 0 {
            constants[(negated(l) ^ reader_flip) as usize]
        } else if negated(l) ^ reader_flip ^ flip[x] {
            not[x]
        } else {
            stored[x]
        }
        .expect("numbered in the first sweep")
    };
    let make = |slot: &Slot| match *slot {
        Slot::Const(b) => Node::Const(b),
        Slot::Not(x) => Node::Not(stored[x as usize].expect("numbered in the first sweep")),
        Slot::Signed(m) => match &arena.nodes[m as usize] {
            SNode::Leaf(k) => arena.leaf_nodes[*k as usize].clone(),
            SNode::And(r) => {
                let m = m as usize;
                let mut ops: Vec<NodeId> = arena.ops[r.start as usize..r.end as usize]
                    .iter()
                    .map(|&l| operand(l, flip[m]))
                    .collect();
                // Sorted, as the merge pass writes them: the net is then exactly what merge
                // would make of it, which lets the pass pipeline skip merge after this pass.
                ops.sort_unstable();
                if flip[m] {
                    Node::Or(ops.into())
                } else {
                    Node::And(ops.into())
                }
            }
        },
    };
    let mut out = out.into_iter();
    let Propnet {
        roles,
        mut bases,
        constant_facts,
        mut inputs,
        goals,
        mut views,
        opaque,
        mut feedback,
        loops,
        ..
    } = old;
    // A view keeps its name where its value is still a node; one that only a `not` nobody
    // else reads would compute loses its name rather than add a gate. A view that loses its
    // node keeps its place in the list ([`GONE_VIEW`]).
    let name_views = |views: &mut Vec<(String, NodeId)>| {
        for (_, id) in views {
            let node = view_literal(&outputs.images, *id).and_then(|l| {
                let x = node_of(l);
                if x == 0 {
                    constants[negated(l) as usize]
                } else if refs[x] == 0 {
                    None
                } else if negated(l) ^ flip[x] {
                    not[x]
                } else {
                    stored[x]
                }
            });
            *id = node.unwrap_or(GONE_VIEW);
        }
    };
    let nodes: Vec<Node> = if slots.len() < split.from {
        name_views(&mut views);
        slots.iter().map(make).collect()
    } else {
        let chunk = split.chunk.max(1);
        let left = std::sync::Mutex::new(0..slots.len().div_ceil(chunk));
        // The next chunk not taken yet, from the back or from the front; `None` when none is
        // left. A panic never happens while the lock is held, so a poisoned lock still holds
        // a consistent range.
        let take = |from_back: bool| {
            let mut left = left.lock().unwrap_or_else(|e| e.into_inner());
            let c = if from_back { left.next_back() } else { left.next() }?;
            Some(&slots[c * chunk..((c + 1) * chunk).min(slots.len())])
        };
        std::thread::scope(|s| {
            // The chunks the helper makes, the last first, after the views (chess: 945,440,
            // each looked up through the images of two sweeps, about 15 ms a pass), which
            // this thread would otherwise move after making its chunks.
            let views = &mut views;
            let helper = s.spawn(move || {
                name_views(views);
                let mut made: Vec<Vec<Node>> = Vec::new();
                while let Some(part) = take(true) {
                    made.push(part.iter().map(make).collect());
                }
                made
            });
            // Room for the factor pass of the next round, which writes its nodes after
            // these in the same vector (`with_room`). The chunks this thread takes are the
            // first ones, in order, so it writes them in place.
            let mut nodes = Vec::with_capacity(with_room(slots.len()));
            // A panic of the helper is a bug of this function; it is passed on as it is.
            let join = |h: std::thread::ScopedJoinHandle<'_, Vec<Vec<Node>>>| {
                h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
            };
            let front = |nodes: &mut Vec<Node>| {
                while let Some(part) = take(false) {
                    nodes.extend(part.iter().map(make));
                }
            };
            let made = if split.helper_alone {
                let made = join(helper);
                front(&mut nodes);
                made
            } else {
                front(&mut nodes);
                join(helper)
            };
            for part in made.into_iter().rev() {
                nodes.extend(part);
            }
            nodes
        })
    };
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
    for f in &mut feedback {
        *f = out.next().expect("a feedback output");
    }
    let net = Propnet {
        roles,
        nodes,
        bases,
        constant_facts,
        inputs,
        goals,
        terminal,
        views,
        opaque,
        // The demand is added after the passes (`add_demand`).
        demand: Vec::new(),
        feedback,
        loops,
    };
    (net, readers)
}

/// Rewrites `net` in signed form (merging gates equal up to De Morgan's laws and flattening
/// ands into the ands that read them) and back, each gate computed as itself or as its
/// negation so that as few nodes as possible are read negated. Returns the net with how many
/// gates and outputs read each of its nodes (as the factor pass counts them, saturating).
///
/// With `all_live`, every node of `net` is needed by an output (see [`to_signed`]).
pub(super) fn signs(net: Propnet, all_live: bool) -> (Propnet, Vec<u32>) {
    signs_split(net, all_live, false, EMIT_SPLIT)
}

/// [`signs`] without the counts of readers, the rebuild hash-consing every and (`hash_all`)
/// or only those flattening touches ([`rebuild`]); the nets are the same.
#[cfg(test)]
pub(super) fn signs_with(net: Propnet, all_live: bool, hash_all: bool) -> Propnet {
    signs_split(net, all_live, hash_all, EMIT_SPLIT).0
}

/// [`signs`], the rebuild hash-consing every and or not (`hash_all`), the nodes of the result
/// made on two threads as `split` says; the nets are the same.
pub(super) fn signs_split(
    mut net: Propnet,
    all_live: bool,
    hash_all: bool,
    split: EmitSplit,
) -> (Propnet, Vec<u32>) {
    let (mut arena, outputs) = to_signed(&net, all_live);
    free_aside(std::mem::take(&mut net.nodes));
    // The second sweep looks ands up in the first one's table, and if it must hash-cons them
    // all, does so into that table, emptied: a table of a million slots, fresh, is as many
    // pages for the kernel to zero and map as the sweep touches them.
    let table = std::mem::replace(&mut arena.ands, Interner::with_capacity(0));
    let (arena, outputs) = rebuild(&arena, outputs, table, hash_all);
    let (refs, flip) = choose_signs(&arena, &outputs);
    emit(&arena, &refs, &outputs, &flip, net, split)
}
