//! From a propnet to a [`Program`]: gates in a topological order that keeps each entry's gates
//! together, negations folded into literals, constants into the two constant slots.

use super::{Node, NodeId, Propnet};
use propjet_runtime::{Gate, Layout, Lit, Loop, Loops, Op, OpaqueSlots, Program};
use std::ops::Range;

/// Orders `net` into a program. Gates are emitted depth-first from the outputs of the legal,
/// terminal, goal, next and view entries in turn, so that a gate comes right after the
/// operands it needs and each entry's gates lie mostly in one run.
pub fn order(net: &Propnet) -> Program {
    order_with(net, net.views.len() >= PARALLEL_VIEWS)
}

/// Orders `net` into a program, on two threads if `parallel` is set: the same program either
/// way.
pub(super) fn order_with(net: &Propnet, parallel: bool) -> Program {
    order_in_chunks(net, parallel, NAME_CHUNK)
}

/// [`order_with`], the views' names copied `chunk` at a time on two threads.
pub(super) fn order_in_chunks(net: &Propnet, parallel: bool, chunk: usize) -> Program {
    // The layout, mostly the names of the views (chess: 945,440, each copied), does not depend
    // on the gates: on a large net it is made on a second thread while this one orders them.
    // Copying the names took that thread longer than the gates took this one (chess), so the
    // names are copied in chunks that both take, the second thread from the first chunk on,
    // this one from the last back once its gates are emitted.
    let (emitted, (layout, init)) = if parallel {
        let names = NameChunks::new(&net.views, chunk);
        std::thread::scope(|s| {
            let helper = std::thread::Builder::new()
                .name("layout".into())
                .spawn_scoped(s, || (layout_of(net, false), names.take(false, usize::MAX)));
            let emitted = emit_gates(net);
            let back = names.take(true, usize::MAX);
            let ((mut layout, init), front) = match helper {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No thread could be started: this one took every chunk.
                Err(_) => (layout_of(net, false), Vec::new()),
            };
            layout.views = joined(front, back, net.views.len());
            (emitted, (layout, init))
        })
    } else {
        (emit_gates(net), layout_of(net, true))
    };
    let Emitted {
        gates,
        operands,
        legal,
        goals,
        terminal,
        next,
        views,
        demand,
        loops,
    } = emitted;
    let mut program = Program {
        layout,
        gates,
        operands,
        init,
        legal,
        goals,
        terminal,
        next,
        views,
        entry_gates: Default::default(),
        opaque: OpaqueSlots {
            names: net.opaque.clone(),
            demand,
            demand_gates: Vec::new(),
        },
        loops: Loops {
            slots: net.feedback.len() as u32,
            loops,
            entry_loops: Default::default(),
        },
    };
    program.compute_entry_gates();
    program
}

/// Puts each role's inputs of `net` in the order in which [`order`] will have the next-state
/// entry's gates first read them (`doc/native.md`, "Inputs in the order they are read").
/// Inputs that entry does not read follow those it reads, in the order they had. Only the
/// inputs' indices change (so their slots and places in the layout, once ordered); the
/// compiler calls it just before [`order`], so that the legal outputs, emitted in input order,
/// also lie in the new order.
///
/// The next-state entry reads every input, most more than once, and in lanes of 128 states
/// the input slots of a large game outgrow the level-1 data cache (speedChess: 3,522 inputs,
/// 56 KiB); in sorted order the inputs that one gate reads lie far apart, in the order they
/// are first read each cache line brings in inputs that the next gates read too.
pub fn arrange_inputs(net: &mut Propnet) {
    let Some(old_of_new) = inputs_by_first_read(net) else {
        return;
    };
    permute_inputs(net, &old_of_new);
}

/// `net` with input `old_of_new[k]` moved to index `k`: its place in `net.inputs` and every
/// node that is it. `old_of_new` must keep each role's inputs in the role's range.
pub(super) fn permute_inputs(net: &mut Propnet, old_of_new: &[u32]) {
    let mut new_of_old = vec![0u32; old_of_new.len()];
    for (new, &old) in old_of_new.iter().enumerate() {
        new_of_old[old as usize] = new as u32;
    }
    let mut inputs: Vec<Option<super::InputProp>> =
        std::mem::take(&mut net.inputs).into_iter().map(Some).collect();
    net.inputs = old_of_new
        .iter()
        .map(|&old| inputs[old as usize].take().expect("a permutation"))
        .collect();
    for node in &mut net.nodes {
        if let Node::Input(i) = node {
            *i = new_of_old[*i as usize];
        }
    }
}

/// Each role's inputs (old indices, in their new order) in the order in which the gates of the
/// next-state entry read them first, the inputs it does not read after them as they were;
/// `None` if that is the order they have.
///
/// [`order`] emits the next-state entry's gates depth-first from the bases' next nodes, in base
/// order, after the legal, terminal and goal outputs' gates, which read no input. This walks
/// the same way from the same nodes without those before it, so the gates that read inputs
/// come in the same order (nodes it passes through that `order` emitted earlier read none).
/// A net with loops has its gates emitted around the loops' bodies instead, so there the order
/// is only close to the first reads.
fn inputs_by_first_read(net: &Propnet) -> Option<Vec<u32>> {
    let n = net.inputs.len();
    let input_of = |id: NodeId| -> Option<usize> {
        match net.nodes[id.index()] {
            Node::Input(i) => Some(i as usize),
            Node::Not(x) => match net.nodes[x.index()] {
                Node::Input(i) => Some(i as usize),
                _ => None,
            },
            _ => None,
        }
    };
    let mut rank = vec![u32::MAX; n];
    let mut next_rank = 0;
    let mut emitted = vec![false; net.nodes.len()];
    // A node to visit (its operands first), or, with `true`, to emit.
    let mut stack: Vec<(NodeId, bool)> = Vec::new();
    for base in &net.bases {
        stack.push((base.next, false));
        while let Some((id, emit)) = stack.pop() {
            if emitted[id.index()] {
                continue;
            }
            let node = &net.nodes[id.index()];
            if emit {
                emitted[id.index()] = true;
                if matches!(node, Node::And(_) | Node::Or(_)) {
                    for &op in node.operands() {
                        if let Some(i) = input_of(op) {
                            if rank[i] == u32::MAX {
                                rank[i] = next_rank;
                                next_rank += 1;
                            }
                        }
                    }
                }
                continue;
            }
            stack.push((id, true));
            for &op in node.operands().iter().rev() {
                if !emitted[op.index()] {
                    stack.push((op, false));
                }
            }
        }
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    for r in 0..net.roles.len() {
        order[net.role_inputs(r)].sort_by_key(|&i| (rank[i as usize], i));
    }
    let moved = order.iter().enumerate().any(|(k, &i)| k as u32 != i);
    moved.then_some(order)
}

/// The number of views from which [`order`] makes the layout on a second thread.
const PARALLEL_VIEWS: usize = 1 << 16;

/// How many views' names [`order_with`]'s two threads copy at a time.
const NAME_CHUNK: usize = 1 << 13;

/// The views' names, in chunks that two threads take, one from the front and one from the
/// back, until none is left.
pub(super) struct NameChunks<'a> {
    views: &'a [(String, NodeId)],
    chunk: usize,
    /// The chunks not taken yet.
    left: std::sync::Mutex<Range<usize>>,
}

impl<'a> NameChunks<'a> {
    pub(super) fn new(views: &'a [(String, NodeId)], chunk: usize) -> NameChunks<'a> {
        let chunks = views.len().div_ceil(chunk);
        NameChunks {
            views,
            chunk,
            left: std::sync::Mutex::new(0..chunks),
        }
    }

    /// Copies the names of up to `most` chunks, taking each from the back of those left
    /// (`from_back`) or from the front, and returns them in the order of the views.
    pub(super) fn take(&self, from_back: bool, most: usize) -> Vec<Vec<String>> {
        let mut taken = Vec::new();
        while taken.len() < most {
            let next = {
                // A panic never happens while the lock is held, so a poisoned lock still
                // holds a consistent range.
                let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
                if from_back {
                    left.next_back()
                } else {
                    left.next()
                }
            };
            let Some(c) = next else { break };
            let end = ((c + 1) * self.chunk).min(self.views.len());
            taken.push(
                self.views[c * self.chunk..end]
                    .iter()
                    .map(|(name, _)| name.clone())
                    .collect(),
            );
        }
        if from_back {
            taken.reverse();
        }
        taken
    }
}

/// The names of all views, from the chunks [`NameChunks::take`] took from the front and from
/// the back, `len` in all.
pub(super) fn joined(front: Vec<Vec<String>>, back: Vec<Vec<String>>, len: usize) -> Vec<String> {
    let mut names = Vec::with_capacity(len);
    for chunk in front.into_iter().chain(back) {
        names.extend(chunk);
    }
    names
}

/// The gates of a program and the literals of its outputs, before its layout.
struct Emitted {
    gates: Vec<Gate>,
    operands: Vec<Lit>,
    legal: Vec<Lit>,
    goals: Vec<Lit>,
    terminal: Lit,
    next: Vec<Lit>,
    views: Vec<Lit>,
    demand: Vec<Lit>,
    loops: Vec<Loop>,
}

/// The layout of the program of `net` and its initial state; without the views' names unless
/// `with_views`.
fn layout_of(net: &Propnet, with_views: bool) -> (Layout, Vec<u64>) {
    let role_inputs: Vec<Range<u32>> = (0..net.roles.len())
        .map(|r| {
            let range = net.role_inputs(r);
            range.start as u32..range.end as u32
        })
        .collect();
    let mut init = vec![0u64; Layout::words(net.bases.len())];
    for (b, base) in net.bases.iter().enumerate() {
        if base.init {
            init[b / 64] |= 1 << (b % 64);
        }
    }
    let layout = Layout {
        roles: net.roles.clone(),
        bases: net.bases.iter().map(|b| b.name.clone()).collect(),
        constant_facts: net.constant_facts.clone(),
        inputs: net.inputs.iter().map(|i| (i.role, i.name.clone())).collect(),
        role_inputs,
        goals: net.goals.iter().map(|g| (g.role, g.value)).collect(),
        views: if with_views {
            net.views.iter().map(|(name, _)| name.clone()).collect()
        } else {
            Vec::new()
        },
    };
    (layout, init)
}

/// The gates of `net` in the order of [`order`], and its outputs' literals.
fn emit_gates(net: &Propnet) -> Emitted {
    let first_opaque_slot = 2 + net.bases.len() as u32 + net.inputs.len() as u32;
    let first_feedback_slot = first_opaque_slot + net.opaque.len() as u32;
    let first_gate_slot = first_feedback_slot + net.feedback.len() as u32;
    let mut lits: Vec<Option<Lit>> = vec![None; net.nodes.len()];
    let mut gates: Vec<Gate> = Vec::new();
    let mut operands: Vec<Lit> = Vec::new();
    let mut stack: Vec<Step> = Vec::new();

    // The loop of each node: the last loop (in build order, dependencies first) whose
    // feedback leaves it reads, directly or not. A loop's body is every gate of its own.
    const NONE: u32 = u32::MAX;
    let mut loop_of_leaf = vec![NONE; net.feedback.len()];
    for (l, range) in net.loops.iter().enumerate() {
        for f in range.clone() {
            loop_of_leaf[f as usize] = l as u32;
        }
    }
    let mut top = vec![NONE; net.nodes.len()];
    // Without loops every node's is none (chess: a sweep over 4 million operands saved).
    let nodes = if net.loops.is_empty() {
        &[][..]
    } else {
        &net.nodes[..]
    };
    for (i, node) in nodes.iter().enumerate() {
        let t = match node {
            Node::Feedback(f) => loop_of_leaf[*f as usize],
            _ => node
                .operands()
                .iter()
                .map(|o| top[o.index()])
                .filter(|&t| t != NONE)
                .max()
                .unwrap_or(NONE),
        };
        top[i] = t;
        if let Node::Feedback(f) = node {
            lits[i] = Some(Lit::pos(first_feedback_slot + f));
        }
    }
    // The body of each loop: the nodes of the loop that its feedback outputs read, in arena
    // order. Other nodes that read its feedback leaves go after the loop, where the leaves
    // hold the fixpoint; in the body they would run every round, and they may read inputs
    // that an entry needing the loop must not read.
    let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); net.loops.len()];
    let mut member = vec![false; net.nodes.len()];
    for (l, range) in net.loops.iter().enumerate() {
        let mut work: Vec<NodeId> = range.clone().map(|f| net.feedback[f as usize]).collect();
        while let Some(n) = work.pop() {
            if top[n.index()] != l as u32
                || member[n.index()]
                || matches!(net.nodes[n.index()], Node::Feedback(_))
            {
                continue;
            }
            member[n.index()] = true;
            members[l].push(n);
            work.extend(net.nodes[n.index()].operands().iter().copied());
        }
        members[l].sort_unstable();
    }
    // What each loop reads from outside its body: operands of its gates and its feedback
    // outputs that belong to no loop or an earlier one.
    let externals: Vec<Vec<NodeId>> = (0..net.loops.len())
        .map(|l| {
            let mut out: Vec<NodeId> = members[l]
                .iter()
                .flat_map(|&m| net.nodes[m.index()].operands().iter().copied())
                .chain(net.loops[l].clone().map(|f| net.feedback[f as usize]))
                .filter(|o| top[o.index()] != l as u32)
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();
    let mut loops: Vec<Loop> = Vec::new();
    let mut loop_done = vec![false; net.loops.len()];

    let mut emit = |root: Step, lits: &mut Vec<Option<Lit>>| {
        stack.push(root);
        while let Some(step) = stack.pop() {
            let id = match step {
                Step::Loop(l) => {
                    if loop_done[l as usize] {
                        continue;
                    }
                    loop_done[l as usize] = true;
                    let start = gates.len() as u32;
                    for &m in &members[l as usize] {
                        let lit = lit_of(net, m, lits, &mut gates, &mut operands, first_gate_slot);
                        lits[m.index()] = Some(lit);
                    }
                    let mut pairs: Vec<(u32, Lit)> = net.loops[l as usize]
                        .clone()
                        .map(|f| {
                            let out = net.feedback[f as usize];
                            (f, lits[out.index()].expect("a loop's output is emitted with it"))
                        })
                        .collect();
                    if gates.len() as u32 == start {
                        // Every output is a leaf or a gate before the loop (`p :- q`, `q :- p`
                        // alone): a gate of one operand per output makes the body, which every
                        // executor can then treat alike.
                        for pair in &mut pairs {
                            let start = operands.len() as u32;
                            operands.push(pair.1);
                            gates.push(Gate {
                                op: Op::Or,
                                start,
                                len: 1,
                            });
                            pair.1 = Lit::pos(first_gate_slot + gates.len() as u32 - 1);
                        }
                    }
                    loops.push(Loop {
                        body: start..gates.len() as u32,
                        pairs,
                    });
                    continue;
                }
                Step::Visit(id) => id,
                Step::Emit(id) => {
                    if lits[id.index()].is_none() {
                        let lit = lit_of(net, id, lits, &mut gates, &mut operands, first_gate_slot);
                        lits[id.index()] = Some(lit);
                    }
                    continue;
                }
            };
            let t = top[id.index()];
            if t != NONE && !loop_done[t as usize] {
                // A node that reads a loop's feedback leaves (or is one) comes after the loop,
                // and the loop after what it reads from outside.
                stack.push(Step::Visit(id));
                stack.push(Step::Loop(t));
                for &o in externals[t as usize].iter().rev() {
                    if lits[o.index()].is_none() || top[o.index()] != NONE {
                        stack.push(Step::Visit(o));
                    }
                }
                continue;
            }
            if lits[id.index()].is_some() {
                continue;
            }
            stack.push(Step::Emit(id));
            for &op in net.nodes[id.index()].operands().iter().rev() {
                if lits[op.index()].is_none() || top[op.index()] != NONE {
                    stack.push(Step::Visit(op));
                }
            }
        }
    };
    let mut emit_lit = |root: NodeId, lits: &mut Vec<Option<Lit>>| -> Lit {
        emit(Step::Visit(root), lits);
        lits[root.index()].expect("root emitted")
    };

    let legal: Vec<Lit> = net.inputs.iter().map(|i| emit_lit(i.legal, &mut lits)).collect();
    let terminal = emit_lit(net.terminal, &mut lits);
    let goals: Vec<Lit> = net.goals.iter().map(|g| emit_lit(g.node, &mut lits)).collect();
    let next: Vec<Lit> = net.bases.iter().map(|b| emit_lit(b.next, &mut lits)).collect();
    let views: Vec<Lit> = net.views.iter().map(|(_, v)| emit_lit(*v, &mut lits)).collect();
    let demand: Vec<Lit> = net.demand.iter().map(|&d| emit_lit(d, &mut lits)).collect();
    // Loops that no output needs still own their feedback slots.
    for l in 0..net.loops.len() {
        emit(Step::Loop(l as u32), &mut lits);
    }

    Emitted {
        gates,
        operands,
        legal,
        goals,
        terminal,
        next,
        views,
        demand,
        loops,
    }
}

/// A step of the depth-first emission.
#[derive(Copy, Clone)]
enum Step {
    /// Emit what the node reads, then the node.
    Visit(NodeId),
    /// Emit the node; its operands are emitted.
    Emit(NodeId),
    /// Emit the body of loop `l`; what it reads from outside is emitted.
    Loop(u32),
}

/// The literal of node `id` of `net`, whose operands have literals, writing a gate for an and
/// or an or.
fn lit_of(
    net: &Propnet,
    id: NodeId,
    lits: &[Option<Lit>],
    gates: &mut Vec<Gate>,
    operands: &mut Vec<Lit>,
    first_gate_slot: u32,
) -> Lit {
    let node = &net.nodes[id.index()];
    match node {
        Node::Const(false) => Lit::FALSE,
        Node::Const(true) => Lit::TRUE,
        Node::Base(b) => Lit::pos(2 + b),
        Node::Input(i) => Lit::pos(2 + net.bases.len() as u32 + i),
        Node::Opaque(i) => Lit::pos(2 + (net.bases.len() + net.inputs.len()) as u32 + i),
        Node::Feedback(f) => Lit::pos(first_gate_slot - net.feedback.len() as u32 + f),
        Node::Not(x) => lits[x.index()].expect("operand emitted").negate(),
        Node::And(ops) | Node::Or(ops) => {
            let start = operands.len() as u32;
            operands.extend(ops.iter().map(|o| lits[o.index()].expect("operand emitted")));
            let op = if matches!(node, Node::And(_)) {
                Op::And
            } else {
                Op::Or
            };
            gates.push(Gate {
                op,
                start,
                len: ops.len() as u32,
            });
            Lit::pos(first_gate_slot + gates.len() as u32 - 1)
        }
    }
}
