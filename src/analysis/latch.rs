//! Latches proven from the net's structure by three-valued simulation.
//!
//! A base `p` is a positive latch when `p` true implies `next(p)` true in every state and for
//! every move; a negative latch when `p` false implies `next(p)` false. The proof evaluates the
//! net with `p` fixed and every other base and input unknown (`X`): an and with a false operand
//! is false, an or with a true operand is true, and otherwise any unknown operand makes the gate
//! unknown. Three-valued evaluation never claims a value the two-valued net could contradict, so
//! a proven latch is a latch; it may miss latches that need reasoning across operands (such as
//! `q ∨ ¬q`), or the fact that each role makes exactly one move.
//!
//! The inductive case proves sets together: assume a set of bases fixed (some true, some false),
//! evaluate every next function, drop the bases whose next value is not proven equal to their
//! assumed value, and repeat until nothing changes. The set that remains is inductive: in any
//! state where all of its bases have their assumed values, they keep them in every later state.

use crate::net::Propnet;

use super::deps::{reverse, Graph, Kind};

/// A three-valued truth value.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Tv {
    /// False.
    F,
    /// True.
    T,
    /// Unknown.
    X,
}

/// The latches of a net, by base index, ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Latches {
    /// Bases that once true stay true.
    pub positive: Vec<u32>,
    /// Bases that once false stay false.
    pub negative: Vec<u32>,
}

/// The part of the net the proofs read: the nodes in the cone of some next function, renumbered
/// in the same (topological) order, in compact form. Legal, goal and terminal logic that no next
/// function reads is left out, and with it most of the net in games with many moves.
pub(crate) struct Core {
    kind: Vec<Kind>,
    /// For a base node, its base number.
    index: Vec<u32>,
    op_start: Vec<u32>,
    ops: Vec<u32>,
    read_start: Vec<u32>,
    readers: Vec<u32>,
    /// The core node of each base, if some next function reads it.
    base_node: Vec<Option<u32>>,
    /// The core node of each base's next function.
    next: Vec<u32>,
}

impl Core {
    /// The core of `net`, whose compact form is `graph`.
    pub(crate) fn of(net: &Propnet, graph: &Graph) -> Core {
        let n = graph.len();
        let mut keep = vec![false; n];
        for base in &net.bases {
            keep[base.next.index()] = true;
        }
        for i in (0..n).rev() {
            if keep[i] {
                for &op in graph.operands(i) {
                    keep[op as usize] = true;
                }
            }
        }
        let mut new_index = vec![u32::MAX; n];
        let mut core = Core {
            kind: Vec::new(),
            index: Vec::new(),
            op_start: vec![0],
            ops: Vec::new(),
            read_start: Vec::new(),
            readers: Vec::new(),
            base_node: vec![None; net.bases.len()],
            next: Vec::with_capacity(net.bases.len()),
        };
        for i in (0..n).filter(|&i| keep[i]) {
            let at = core.kind.len() as u32;
            new_index[i] = at;
            core.kind.push(graph.kind[i]);
            core.index.push(graph.index[i]);
            if graph.kind[i] == Kind::Base {
                core.base_node[graph.index[i] as usize] = Some(at);
            }
            core.ops
                .extend(graph.operands(i).iter().map(|&op| new_index[op as usize]));
            core.op_start.push(core.ops.len() as u32);
        }
        core.next = net.bases.iter().map(|b| new_index[b.next.index()]).collect();
        let (read_start, readers) = reverse(core.kind.len(), &core.op_start, &core.ops);
        core.read_start = read_start;
        core.readers = readers;
        core
    }

    fn operands(&self, i: usize) -> &[u32] {
        &self.ops[self.op_start[i] as usize..self.op_start[i + 1] as usize]
    }

    fn readers(&self, i: usize) -> &[u32] {
        &self.readers[self.read_start[i] as usize..self.read_start[i + 1] as usize]
    }

    /// Evaluates every node with the given bases fixed and everything else unknown, and counts
    /// each gate's deciding and unknown operands.
    fn evaluate(&self, fixed: &[Option<bool>]) -> (Vec<Tv>, Counts) {
        let n = self.kind.len();
        let mut vals = Vec::with_capacity(n);
        let mut counts = Counts {
            deciding: vec![0; n],
            unknown: vec![0; n],
        };
        for i in 0..n {
            let kind = self.kind[i];
            let v = match kind {
                Kind::False => Tv::F,
                Kind::True => Tv::T,
                Kind::Base => match fixed[self.index[i] as usize] {
                    Some(true) => Tv::T,
                    Some(false) => Tv::F,
                    None => Tv::X,
                },
                Kind::Input => Tv::X,
                Kind::Not => not(vals[self.operands(i)[0] as usize]),
                Kind::And | Kind::Or => {
                    for &op in self.operands(i) {
                        let v = vals[op as usize];
                        counts.deciding[i] += controls(kind, v) as u32;
                        counts.unknown[i] += (v == Tv::X) as u32;
                    }
                    counts.value(kind, i)
                }
            };
            vals.push(v);
        }
        (vals, counts)
    }

    /// The value of node `i` after an operand changed: from its counts for a gate, from its
    /// operand for a negation.
    fn value(&self, counts: &Counts, i: usize, vals: &[Tv]) -> Tv {
        match self.kind[i] {
            Kind::Not => not(vals[self.operands(i)[0] as usize]),
            kind => counts.value(kind, i),
        }
    }
}

fn not(v: Tv) -> Tv {
    match v {
        Tv::T => Tv::F,
        Tv::F => Tv::T,
        Tv::X => Tv::X,
    }
}

/// Whether `v` decides a gate of kind `kind` on its own: false for an and, true for an or.
fn controls(kind: Kind, v: Tv) -> bool {
    matches!((kind, v), (Kind::And, Tv::F) | (Kind::Or, Tv::T))
}

/// For every and and or gate, how many of its operands decide it and how many are unknown.
/// With them, an operand that changes updates its reader in constant time, whatever the
/// reader's fan-in: re-evaluating a gate of thousands of operands each time one of them
/// changes is what made the proofs slow on nets with wide gates.
#[derive(Clone)]
struct Counts {
    deciding: Vec<u32>,
    unknown: Vec<u32>,
}

impl Counts {
    /// Records that one operand of node `i` changed from `old` to `new`.
    fn update(&mut self, kind: Kind, i: usize, old: Tv, new: Tv) {
        if let Kind::And | Kind::Or = kind {
            self.deciding[i] = self.deciding[i] + controls(kind, new) as u32 - controls(kind, old) as u32;
            self.unknown[i] = self.unknown[i] + (new == Tv::X) as u32 - (old == Tv::X) as u32;
        }
    }

    /// The value of gate `i` of kind `kind` (an and or an or) from its counts.
    fn value(&self, kind: Kind, i: usize) -> Tv {
        let (decided, otherwise) = if kind == Kind::And {
            (Tv::F, Tv::T)
        } else {
            (Tv::T, Tv::F)
        };
        if self.deciding[i] > 0 {
            decided
        } else if self.unknown[i] > 0 {
            Tv::X
        } else {
            otherwise
        }
    }

    /// Copies the counts of gate `i` from `from`.
    fn restore(&mut self, from: &Counts, i: usize) {
        self.deciding[i] = from.deciding[i];
        self.unknown[i] = from.unknown[i];
    }
}

/// The latches of `net`, each base proven on its own (what [`super::analyze`] reports).
pub fn latches(net: &Propnet) -> Latches {
    single_latches(&Core::of(net, &Graph::of(net)))
}

/// Proves each base's latches on its own: `p` fixed, everything else unknown.
///
/// Fixing one base only turns unknown nodes known (three-valued evaluation is monotone), so
/// each node changes at most once, and with the per-gate [`Counts`] a change costs one step
/// per reader. Per base, only the nodes whose value the fixed base decides are visited, and
/// among those only nodes of the [`Core`] that come before `next(p)` in its order (which is
/// topological): the cost follows what the base decides, not the net size nor the fan-in of
/// the gates it feeds.
pub(crate) fn single_latches(core: &Core) -> Latches {
    let (base_vals, base_counts) = core.evaluate(&vec![None; core.next.len()]);
    let mut vals = base_vals.clone();
    let mut counts = base_counts.clone();
    // The nodes whose value, and the gates whose counts, changed for the current base.
    let mut changed: Vec<usize> = Vec::new();
    let mut dirty: Vec<usize> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut latches = Latches::default();
    for (b, &next) in core.next.iter().enumerate() {
        for value in [true, false] {
            let want = if value { Tv::T } else { Tv::F };
            let next_value = match core.base_node[b] {
                None => base_vals[next as usize],
                Some(node) => {
                    vals[node as usize] = want;
                    changed.push(node as usize);
                    stack.push(node as usize);
                    while let Some(i) = stack.pop() {
                        let (old, new) = (base_vals[i], vals[i]);
                        // Readers are ascending: those after next(p) cannot change it.
                        for &r in core.readers(i).iter().take_while(|&&r| r <= next) {
                            let ri = r as usize;
                            let kind = core.kind[ri];
                            counts.update(kind, ri, old, new);
                            dirty.push(ri);
                            let v = core.value(&counts, ri, &vals);
                            if v != vals[ri] {
                                debug_assert_eq!(vals[ri], Tv::X, "a node changes once, from unknown");
                                vals[ri] = v;
                                changed.push(ri);
                                stack.push(ri);
                            }
                        }
                    }
                    let out = vals[next as usize];
                    for i in changed.drain(..) {
                        vals[i] = base_vals[i];
                    }
                    for i in dirty.drain(..) {
                        counts.restore(&base_counts, i);
                    }
                    out
                }
            };
            if next_value == want {
                if value {
                    latches.positive.push(b as u32);
                } else {
                    latches.negative.push(b as u32);
                }
            }
        }
    }
    latches
}

/// The largest inductive subset of the assumptions `assume` (a value per base, or `None` for
/// no assumption): every base it keeps provably keeps its assumed value in the next state
/// whenever all kept bases have theirs. Returns the kept assumptions.
pub fn inductive(net: &Propnet, assume: &[Option<bool>]) -> Vec<Option<bool>> {
    inductive_in(&Core::of(net, &Graph::of(net)), assume)
}

/// [`inductive`] on the net's [`Core`].
///
/// Dropping an assumption only turns known values unknown, never the reverse, so each node
/// changes at most once; with the per-gate [`Counts`], a change costs one step per reader, and
/// a next function that turns unknown drops its base at once. After one evaluation of the core,
/// the whole proof costs at most one visit of each reader edge.
pub(crate) fn inductive_in(core: &Core, assume: &[Option<bool>]) -> Vec<Option<bool>> {
    // The bases whose next function is each node, in compressed form: sorted by node.
    let mut next_of: Vec<(u32, u32)> = core
        .next
        .iter()
        .enumerate()
        .map(|(b, &next)| (next, b as u32))
        .collect();
    next_of.sort_unstable();
    let bases_reading = |i: usize| {
        let from = next_of.partition_point(|&(n, _)| (n as usize) < i);
        next_of[from..]
            .iter()
            .take_while(move |&&(n, _)| n as usize == i)
            .map(|&(_, b)| b as usize)
    };
    let mut kept = assume.to_vec();
    let (mut vals, mut counts) = core.evaluate(&kept);
    let want = |v: bool| if v { Tv::T } else { Tv::F };
    let mut drops: Vec<usize> = (0..core.next.len())
        .filter(|&b| kept[b].is_some_and(|v| vals[core.next[b] as usize] != want(v)))
        .collect();
    // Nodes that turned unknown, with their value before.
    let mut stack: Vec<(usize, Tv)> = Vec::new();
    while let Some(b) = drops.pop() {
        if kept[b].take().is_none() {
            continue;
        }
        let Some(node) = core.base_node[b] else { continue };
        let node = node as usize;
        if vals[node] == Tv::X {
            continue;
        }
        stack.push((node, vals[node]));
        vals[node] = Tv::X;
        drops.extend(bases_reading(node));
        while let Some((i, old)) = stack.pop() {
            for &r in core.readers(i) {
                let ri = r as usize;
                counts.update(core.kind[ri], ri, old, Tv::X);
                let v = core.value(&counts, ri, &vals);
                if v != vals[ri] {
                    debug_assert_eq!(v, Tv::X, "a node changes once, to unknown");
                    stack.push((ri, vals[ri]));
                    vals[ri] = v;
                    drops.extend(bases_reading(ri));
                }
            }
        }
    }
    kept
}
