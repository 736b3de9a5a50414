//! Factoring an or of ands: an operand shared by several of the ands is taken out, `(a ∧ b) ∨
//! (a ∧ c) ∨ (a ∧ d)` becomes `a ∧ (b ∨ c ∨ d)`. The factor pass applies it to the ands an or
//! alone reads, and the builder to the rules of an atom before it writes any of their ands
//! (`doc/propnet.md`).

use super::{Node, NodeId};
use std::ops::Range;

/// The operands of several ands in one vector (the builder factors millions of small ors, and
/// a vector per and was a third of its time).
#[derive(Default)]
pub(super) struct Bodies {
    /// The operands of every and, one after the other.
    pub ops: Vec<NodeId>,
    /// Where each and's operands end in `ops`.
    pub ends: Vec<u32>,
    /// Buffers of [`factor_groups`], kept with the bodies: the factor pass meets hundreds of
    /// thousands of ors, and allocating them afresh for each was a fifth of its work.
    scratch: Scratch,
}

/// The buffers of [`factor_groups`].
#[derive(Default)]
struct Scratch {
    /// (operand, and) pairs, each as `operand << 32 | and`: sorted as numbers, they sort as
    /// the pairs would, with one comparison each instead of two (the sort is a third of the
    /// factor pass on chess).
    pairs: Vec<u64>,
    candidates: Vec<Range<usize>>,
    group: Vec<usize>,
    used: Vec<bool>,
    /// The residual ands and operands of the group being factored, kept for the next group:
    /// each group that pays factors its residuals in an or of their own, and chess's factor
    /// passes meet tens of thousands of them. Those bodies keep their own buffers in turn,
    /// for the groups of the inner or.
    inner: Option<Box<(Bodies, Vec<NodeId>)>>,
}

impl Bodies {
    /// The number of ands.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    fn range(&self, k: usize) -> Range<usize> {
        let start = if k == 0 { 0 } else { self.ends[k - 1] as usize };
        start..self.ends[k] as usize
    }

    /// The operands of and `k`.
    pub fn get(&self, k: usize) -> &[NodeId] {
        &self.ops[self.range(k)]
    }

    /// Ends the and whose operands were pushed onto `ops` since the last one ended.
    pub fn close(&mut self) {
        self.ends
            .push(u32::try_from(self.ops.len()).expect("fewer than 2^32 operands"));
    }

    /// Drops the operands pushed since the last and ended.
    pub fn discard(&mut self) {
        let start = self.ends.last().map_or(0, |&e| e as usize);
        self.ops.truncate(start);
    }

    /// The operands pushed since the last and ended.
    pub fn open(&mut self) -> &mut [NodeId] {
        let start = self.ends.last().map_or(0, |&e| e as usize);
        &mut self.ops[start..]
    }

    /// Which ands the groups of the last [`factor_groups`] over these bodies took.
    pub fn used(&self) -> &[bool] {
        &self.scratch.used
    }
}

/// Factors the or of the ands of `bodies` (each without repeats, of two or more operands, and
/// read by that or alone): greedily, the most shared operand first, each and factored at most
/// once, and only where that costs less. Returns one node per factored group; which ands the
/// groups took is then [`Bodies::used`], and the caller writes the others as they were. `add`
/// writes a new node.
pub(super) fn factor_groups<E>(
    bodies: &mut Bodies,
    add: &mut impl FnMut(Node) -> Result<NodeId, E>,
) -> Result<Vec<NodeId>, E> {
    let mut scratch = std::mem::take(&mut bodies.scratch);
    let groups = groups_of(bodies, &mut scratch, add);
    bodies.scratch = scratch;
    groups
}

/// [`factor_groups`] with its buffers.
fn groups_of<E>(
    bodies: &Bodies,
    scratch: &mut Scratch,
    add: &mut impl FnMut(Node) -> Result<NodeId, E>,
) -> Result<Vec<NodeId>, E> {
    let Scratch {
        pairs,
        candidates,
        group,
        used,
        inner,
    } = scratch;
    used.clear();
    used.resize(bodies.len(), false);
    let mut groups = Vec::new();
    if bodies.len() < 2 {
        return Ok(groups);
    }
    // Each operand with the ands that hold it: (operand, and) pairs sorted, so that the
    // holders of one operand are a run.
    pairs.clear();
    for k in 0..bodies.len() {
        pairs.extend(bodies.get(k).iter().map(|&x| u64::from(x.0) << 32 | k as u64));
    }
    pairs.sort_unstable();
    let operand = |pair: u64| NodeId((pair >> 32) as u32);
    candidates.clear();
    let mut start = 0;
    for i in 1..=pairs.len() {
        if i == pairs.len() || operand(pairs[i]) != operand(pairs[start]) {
            if i - start >= 2 {
                candidates.push(start..i);
            }
            start = i;
        }
    }
    // Most shared first; ties by id, so that the result does not depend on the order of the
    // ands.
    candidates.sort_unstable_by(|a, b| {
        b.len()
            .cmp(&a.len())
            .then(operand(pairs[a.start]).cmp(&operand(pairs[b.start])))
    });
    for run in candidates.iter() {
        let shared = operand(pairs[run.start]);
        group.clear();
        group.extend(
            pairs[run.clone()]
                .iter()
                .map(|&pair| pair as u32 as usize)
                .filter(|&k| !used[k]),
        );
        if group.len() < 2 {
            continue;
        }
        // Factoring k ands replaces them (they die: the or is their one reader) by the
        // residual ands of two or more operands, an inner or and one and. Counting a gate and
        // an operand each as one (an operation and a store, or a load, in generated code),
        // factor only when that costs less; a residual of nothing makes the whole group true
        // and always pays.
        let (mut long, mut long_ops, mut all_ops, mut empty) = (0i64, 0i64, 0i64, false);
        for &k in group.iter() {
            let rest = bodies.get(k).len() as i64 - 1;
            all_ops += rest;
            match rest {
                ..=0 => empty = true,
                1 => {}
                _ => {
                    long += 1;
                    long_ops += rest;
                }
            }
        }
        let k = group.len() as i64;
        let gates = long + 2 - k;
        let edges = long_ops + 3 - all_ops - k;
        if !empty && gates + edges >= 0 {
            continue;
        }
        for &k in group.iter() {
            used[k] = true;
        }
        // `shared ∧ (r₁ ∨ r₂ ∨ …)`; an empty residual is true, and then so is the or.
        if empty {
            groups.push(shared);
            continue;
        }
        let (rest, rest_plain) = &mut **inner.get_or_insert_with(Default::default);
        rest.ops.clear();
        rest.ends.clear();
        rest_plain.clear();
        for &k in group.iter() {
            rest.ops.extend(bodies.get(k).iter().filter(|&&x| x != shared));
            if rest.open().len() == 1 {
                rest_plain.push(rest.open()[0]);
                rest.discard();
            } else {
                rest.close();
            }
        }
        let or = factored_or(rest, rest_plain, add)?;
        groups.push(add(Node::And(smallvec::smallvec![shared, or]))?);
    }
    Ok(groups)
}

/// The or of `plain` and of the ands of `bodies` (as [`factor_groups`] takes them), factored;
/// an or of one operand is that operand, and an or of none is false (the node `add` gives for
/// `Node::Const(false)`).
pub(super) fn factored_or<E>(
    bodies: &mut Bodies,
    plain: &[NodeId],
    add: &mut impl FnMut(Node) -> Result<NodeId, E>,
) -> Result<NodeId, E> {
    let mut out = factor_groups(bodies, add)?;
    for k in 0..bodies.len() {
        if !bodies.used()[k] {
            out.push(add(Node::And(super::Operands::from_slice(bodies.get(k))))?);
        }
    }
    out.extend_from_slice(plain);
    or_node(out, add)
}

/// The or of `plain` and of the ands of `bodies`, as they are. `add_and` writes the and of
/// the operands it is given, `add` any other node: the builder looks an and up before it
/// allocates its operands, and most of the ands a large game's rules write are there already
/// (chess: half of them).
pub(super) fn or_of<E>(
    bodies: &Bodies,
    plain: &[NodeId],
    add_and: &mut impl FnMut(&[NodeId]) -> Result<NodeId, E>,
    add: &mut impl FnMut(Node) -> Result<NodeId, E>,
) -> Result<NodeId, E> {
    let mut out = Vec::with_capacity(bodies.len() + plain.len());
    for k in 0..bodies.len() {
        out.push(add_and(bodies.get(k))?);
    }
    out.extend_from_slice(plain);
    or_node(out, add)
}

/// The or over `out`: its operand when it has one, false when it has none.
fn or_node<E>(out: Vec<NodeId>, add: &mut impl FnMut(Node) -> Result<NodeId, E>) -> Result<NodeId, E> {
    match out[..] {
        [] => add(Node::Const(false)),
        [one] => Ok(one),
        _ => add(Node::Or(out.into())),
    }
}
