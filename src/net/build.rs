//! From a ground program to a propnet, literally: one or-of-ands per view atom, one base per
//! `true` atom, one input per legal move. Recursion among views is unrolled to its least
//! fixpoint so that the net is acyclic.

use super::factor::{factored_or, or_of, Bodies};
use super::intern::Interner;
use super::{BaseProp, GoalProp, InputProp, NetError, Node, NodeId, Propnet};
use crate::ground::{AtomId, AtomKind, GroundLit, Grounded};
use propjet_runtime::RoleIdx;
use rustc_hash::FxHashMap;

/// Budgets for building and optimizing a net, and how recursion is built.
#[derive(Clone, Debug)]
pub struct NetLimits {
    /// Nodes of the net, constants and propositions included.
    pub max_nodes: usize,
    /// How a recursive component of views is built.
    pub recursion: Recursion,
}

impl Default for NetLimits {
    fn default() -> Self {
        NetLimits {
            max_nodes: 20_000_000,
            recursion: Recursion::default(),
        }
    }
}

/// How the builder writes a strongly connected component of view atoms (positive recursion).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Recursion {
    /// As `k` copies of its rules for `k` atoms, each round reading the previous one, the
    /// first reading false: an acyclic net of `k` times the component's size. The object
    /// path (`lower::object`) and the analysis need it.
    Unroll,
    /// As one copy of its rules reading feedback leaves ([`super::Node::Feedback`]), which the
    /// executors run as a loop until no atom changes ([`Propnet::loops`]). linesOfAction's 128
    /// components of 64 atoms were about 1 million gates unrolled.
    #[default]
    Loop,
}

/// Builds the unoptimized propnet of `g`.
pub fn build(g: &Grounded, limits: &NetLimits) -> Result<Propnet, NetError> {
    let (mut net, names) = build_unnamed(g, limits)?;
    names.name(&mut net)?;
    Ok(net)
}

/// Builds the unoptimized propnet of `g` with its views in atom order and without their names,
/// which [`ViewNames::name`] gives them, in the order of [`build`], once the caller is done
/// with the net: on a large game the names are sorted on a thread of their own meanwhile.
/// The passes never read a view's name nor depend on the order of the views, so `compile`
/// optimizes the net while they are sorted (chess: 945,440 names, whose sort took about
/// 0.2 s at the end of the build's second thread, the longer of its two).
pub(crate) fn build_unnamed(g: &Grounded, limits: &NetLimits) -> Result<(Propnet, ViewNames), NetError> {
    build_with(g, limits, g.atoms.len() >= PARALLEL_ATOMS)
}

/// [`build_unnamed`], on two threads if `parallel` is set: the same net and names either way.
pub(super) fn build_with(
    g: &Grounded,
    limits: &NetLimits,
    parallel: bool,
) -> Result<(Propnet, ViewNames), NetError> {
    if parallel {
        if let Some(built) = build_on_two_threads(g, limits) {
            return built;
        }
    }
    let heads = Heads::of(g);
    let mut b = Builder::new(g, &heads, limits);
    let leaves = b.leaves()?;
    b.build_views()?;
    let mut outputs = Outputs::of(g);
    outputs.goals.sort_by_key(|&(role, value, _)| (role, value));
    let names = Sorting::Done(sort_names(std::mem::take(&mut outputs.views)));
    b.finish(leaves, outputs, names)
}

/// Builds the net of `g` on two threads, or returns `None` if no second thread can be started.
///
/// Neither the order in which the views are built (their strongly connected components) nor
/// the outputs' names and their order depend on the gates. The second thread writes the names
/// while this one sorts the rules by head and makes the leaves, then finds the components and
/// hands them over in batches while this one builds their gates, then starts the sort of the
/// names on a thread of their own ([`ViewNames`]), which the build does not wait for. Chess
/// on one thread (`doc/propnet.md`, `build17`): the rules by head 43 ms, the leaves 13, the
/// components 145, the gates 418, the 945,440 names (each a copy of its atom's text or
/// formatted) 82 and their sort 265; the check of the net 20.
fn build_on_two_threads(g: &Grounded, limits: &NetLimits) -> Option<Result<(Propnet, ViewNames), NetError>> {
    let heads = std::sync::OnceLock::new();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<Components>();
        // The rules by head, handed over once this thread has sorted them. Were this thread
        // to panic first, the channel would close and the other thread stop.
        let (heads_tx, heads_rx) = std::sync::mpsc::sync_channel::<&Heads>(1);
        let helper = std::thread::Builder::new()
            .name("components".into())
            .spawn_scoped(s, move || {
                let mut outputs = Outputs::of(g);
                // The channel of components closes when this thread is done with it or the
                // builder stopped on an error, which it then returns itself.
                let stopped = || NetError::Internal("the builder stopped early".into());
                let heads = heads_rx.recv().map_err(|_| stopped())?;
                let sent = components(g, heads, |batch| tx.send(batch));
                drop(tx);
                sent.map_err(|_| stopped())?;
                let names = Sorting::start(&mut outputs);
                Ok((outputs, names))
            })
            .ok()?;
        let heads = heads.get_or_init(|| Heads::of(g));
        // The other thread waits for nothing else and the channel holds one: this cannot block.
        let _ = heads_tx.send(heads);
        let mut b = Builder::new(g, heads, limits);
        let built = b.leaves().and_then(|leaves| {
            rx.iter().try_for_each(|batch| b.build_components(&batch))?;
            Ok(leaves)
        });
        drop(rx);
        let outputs = helper.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        Some(built.and_then(|leaves| {
            let (outputs, names) = outputs?;
            b.finish(leaves, outputs, names)
        }))
    })
}

/// The views' names sorted: each name with the view's place in atom order, and the runs of
/// names that two or more views share ([`sort_names`]).
struct SortedNames {
    names: Vec<(String, u32)>,
    ties: Vec<std::ops::Range<usize>>,
}

/// The sort of the views' names, done or on a thread of its own.
enum Sorting {
    Done(SortedNames),
    /// The thread returns `None` if it never received the names.
    Running(std::thread::JoinHandle<Option<SortedNames>>),
}

impl Sorting {
    /// Sorts the names of `outputs`' views on a thread of its own, or here if none can be
    /// started, and its goals here; `outputs` keeps the views' atoms.
    fn start(outputs: &mut Outputs) -> Sorting {
        outputs.goals.sort_by_key(|&(role, value, _)| (role, value));
        let views = std::mem::take(&mut outputs.views);
        // The names are sent once the thread runs, so that they stay here if it cannot start.
        let (tx, rx) = std::sync::mpsc::channel::<Vec<(String, u32)>>();
        let spawned = std::thread::Builder::new()
            .name("view names".into())
            .spawn(move || rx.recv().ok().map(sort_names));
        match spawned {
            Ok(h) => {
                // The thread waits for them: this cannot fail while it runs.
                let _ = tx.send(views);
                Sorting::Running(h)
            }
            Err(_) => Sorting::Done(sort_names(views)),
        }
    }
}

/// The names of a net's views and their order, for a net built by [`build_unnamed`], whose
/// views are in atom order and unnamed.
pub(crate) struct ViewNames {
    sorting: Sorting,
    /// The node of each view (in atom order) in the net as built: views of the same name are
    /// ordered by it, as a sort of the pairs (name, node) of the built net would order them.
    built: Vec<NodeId>,
}

impl ViewNames {
    /// Gives the views of `net` their names, in the order of the names (views of the same name
    /// by their node as built), and drops those whose node the passes removed
    /// ([`super::passes::GONE_VIEW`]). `net` is the net [`build_unnamed`] returned with these
    /// names, its views still in their places (the passes keep them there).
    pub(crate) fn name(self, net: &mut Propnet) -> Result<(), NetError> {
        let ViewNames { sorting, built } = self;
        let SortedNames { mut names, ties } = match sorting {
            Sorting::Done(sorted) => sorted,
            Sorting::Running(h) => h
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
                .ok_or_else(|| NetError::Internal("the views' names were never sorted".into()))?,
        };
        if names.len() != net.views.len() || built.len() != names.len() {
            return Err(NetError::Internal(format!(
                "{} view names for {} views",
                names.len(),
                net.views.len()
            )));
        }
        for tie in ties {
            names[tie].sort_unstable_by_key(|&(_, k)| built[k as usize]);
        }
        let nodes: Vec<NodeId> = net.views.iter().map(|&(_, id)| id).collect();
        names.retain(|&(_, k)| nodes[k as usize] != super::passes::GONE_VIEW);
        net.views = names
            .into_iter()
            .map(|(name, k)| (name, nodes[k as usize]))
            .collect();
        Ok(())
    }
}

/// What [`Builder::leaves`] leaves for [`Builder::finish`]: the bases' atoms in the net's
/// order and the legal atom of each input.
struct Leaves {
    trues: Vec<AtomId>,
    legal_atoms: Vec<AtomId>,
}

struct Builder<'g> {
    g: &'g Grounded,
    limits: &'g NetLimits,
    net: Propnet,
    /// The node of each atom, once built.
    atom_node: Vec<Option<NodeId>>,
    /// One negation node per node that is read negated.
    negations: FxHashMap<NodeId, NodeId>,
    /// The rules of each head atom.
    heads: &'g Heads,
    false_node: NodeId,
    true_node: NodeId,
    /// The rule bodies of the atom being built, and its rules of one literal.
    bodies: Bodies,
    plain: Vec<NodeId>,
    /// The gates built so far, by content ([`push`]), and a buffer of hashes.
    gates: Interner,
    hashes: Vec<u64>,
}

impl<'g> Builder<'g> {
    fn new(g: &'g Grounded, heads: &'g Heads, limits: &'g NetLimits) -> Builder<'g> {
        let mut net = Propnet {
            roles: g.roles.clone(),
            ..Propnet::default()
        };
        // The arena grows to about as many nodes as gates are built (chess: 785,000 of at most
        // 1.45 million gates), and the factor pass of the first round writes its new nodes after
        // them in the same vector: room for both, so that the arena is not copied as it grows.
        // What is never written is never touched.
        let most = most_gates(g, &heads.start);
        net.nodes.reserve(super::passes::with_room(most));
        net.nodes.push(Node::Const(false));
        net.nodes.push(Node::Const(true));
        let gates = Interner::with_capacity(most);
        Builder {
            g,
            limits,
            net,
            atom_node: vec![None; g.atoms.len()],
            negations: FxHashMap::default(),
            heads,
            false_node: NodeId(0),
            true_node: NodeId(1),
            bodies: Bodies::default(),
            plain: Vec::new(),
            gates,
            hashes: Vec::new(),
        }
    }

    fn push(&mut self, node: Node) -> Result<NodeId, NetError> {
        push(&mut self.net.nodes, &mut self.gates, self.limits, node)
    }

    /// The leaves of the net: bases, inputs and opaque atoms.
    fn leaves(&mut self) -> Result<Leaves, NetError> {
        let g = self.g;
        // Bases, sorted by fact so that the layout does not depend on grounding order.
        let mut trues: Vec<AtomId> = (0..g.atoms.len())
            .map(AtomId::from_index)
            .filter(|a| g.atoms[a.index()].kind == AtomKind::True)
            .collect();
        trues.sort_by(|a, b| g.atoms[a.index()].text.cmp(&g.atoms[b.index()].text));
        let mut init = vec![false; g.atoms.len()];
        for a in &g.init {
            init[a.index()] = true;
        }
        for (b, &a) in trues.iter().enumerate() {
            let node = self.push(Node::Base(b as u32))?;
            self.atom_node[a.index()] = Some(node);
            self.net.bases.push(BaseProp {
                name: g.atoms[a.index()].text.clone(),
                init: init[a.index()],
                next: self.false_node,
            });
        }

        // Inputs: one per legal atom, by role then action.
        let mut legals: Vec<(u32, &str, AtomId)> = Vec::new();
        let mut does: FxHashMap<(u32, &str), AtomId> = FxHashMap::default();
        for (i, atom) in g.atoms.iter().enumerate() {
            match atom.kind {
                AtomKind::Legal { role } => legals.push((role, &atom.text, AtomId::from_index(i))),
                AtomKind::Does { role } => {
                    does.insert((role, &atom.text), AtomId::from_index(i));
                }
                _ => {}
            }
        }
        legals.sort();
        let mut legal_atoms = Vec::with_capacity(legals.len());
        for (i, &(role, text, legal)) in legals.iter().enumerate() {
            let node = self.push(Node::Input(i as u32))?;
            if let Some(d) = does.remove(&(role, text)) {
                self.atom_node[d.index()] = Some(node);
            }
            self.net.inputs.push(InputProp {
                role: RoleIdx(role),
                name: text.to_string(),
                legal: self.false_node,
            });
            legal_atoms.push(legal);
        }
        // A move that is never legal is never played.
        for (_, d) in does {
            self.atom_node[d.index()] = Some(self.false_node);
        }

        // Opaque atoms, sorted by text: leaves whose values an evaluator outside the net gives.
        let mut opaque: Vec<usize> = (0..g.atoms.len())
            .filter(|&a| g.atoms[a].kind == AtomKind::Opaque)
            .collect();
        opaque.sort_by(|&a, &b| g.atoms[a].text.cmp(&g.atoms[b].text));
        for (i, &a) in opaque.iter().enumerate() {
            let node = self.push(Node::Opaque(i as u32))?;
            self.atom_node[a] = Some(node);
            self.net.opaque.push(g.atoms[a].text.clone());
        }
        Ok(Leaves { trues, legal_atoms })
    }

    /// Points the outputs at the nodes of their atoms, once every view is built, and checks
    /// the net.
    fn finish(
        mut self,
        leaves: Leaves,
        outputs: Outputs,
        sorting: Sorting,
    ) -> Result<(Propnet, ViewNames), NetError> {
        let g = self.g;
        let Leaves { trues, legal_atoms } = leaves;
        let base_index: FxHashMap<&str, usize> = trues
            .iter()
            .enumerate()
            .map(|(b, a)| (g.atoms[a.index()].text.as_str(), b))
            .collect();
        for &a in &outputs.nexts {
            let text = &g.atoms[a.index()].text;
            let Some(&b) = base_index.get(text.as_str()) else {
                return Err(NetError::Internal(format!("(next {text}) has no base")));
            };
            self.net.bases[b].next = self.node_of(a);
        }
        for (i, &a) in legal_atoms.iter().enumerate() {
            self.net.inputs[i].legal = self.node_of(a);
        }
        self.net.goals = outputs
            .goals
            .iter()
            .map(|&(role, value, a)| GoalProp {
                role,
                value,
                node: self.node_of(a),
            })
            .collect();
        self.net.terminal = outputs.terminal.map_or(self.false_node, |a| self.node_of(a));
        // The views in atom order, unnamed until [`ViewNames::name`].
        let built: Vec<NodeId> = outputs.view_atoms.iter().map(|&a| self.node_of(a)).collect();
        self.net.views = built.iter().map(|&id| (String::new(), id)).collect();
        self.net.verify()?;
        Ok((self.net, ViewNames { sorting, built }))
    }

    /// The numbers of the rules whose head is `a`.
    fn rules_of(&self, a: AtomId) -> &'g [u32] {
        self.heads.rules_of(a)
    }

    fn node_of(&self, a: AtomId) -> NodeId {
        self.atom_node[a.index()].unwrap_or(self.false_node)
    }

    /// Builds the view atoms in dependency order, one strongly connected component at a time.
    fn build_views(&mut self) -> Result<(), NetError> {
        let (g, heads) = (self.g, self.heads);
        components(g, heads, |batch| self.build_components(&batch))
    }

    /// Builds the view atoms of the components of `batch`, in order.
    fn build_components(&mut self, batch: &Components) -> Result<(), NetError> {
        let mut start = 0;
        for (&end, &cyclic) in batch.ends.iter().zip(&batch.cyclic) {
            let scc = &batch.atoms[start..end as usize];
            start = end as usize;
            if cyclic {
                self.build_recursive(scc)?;
            } else {
                let a = scc[0];
                let node = self.build_atom(a, &|_| None, false)?;
                self.atom_node[a.index()] = Some(node);
            }
        }
        Ok(())
    }

    /// The or over `a`'s rules of the and of their literals; `inner` gives the node of atoms
    /// being unrolled. A rule of one literal is that literal's node and an atom of one rule
    /// is that rule's node, with no gate of one operand around them: in the largest games
    /// most ground rules are auxiliary atoms of one literal (chess: about 7 of 11 million),
    /// and gates the collapse pass would remove at once only cost time and memory. A rule
    /// with a false literal is left out and true literals are dropped (in the first round of
    /// an unrolled component every member is false). When `factor` is set the or is factored
    /// before any and is written ([`factored_or`]): an unrolled component repeats its rules
    /// once per round, and in linesOfAction those rounds were 4 million gates as built, of
    /// which the factor pass left a quarter. So is an atom of [`FACTOR_AS_BUILT`] rules or
    /// more. Elsewhere the ands are written as they are, and the passes merge them before
    /// they factor them: factoring every atom as it is built left larger nets after the
    /// passes on 13 corpus games (chess: 555,187 components instead of 547,431), because an
    /// and that two ors share after merging is not factored.
    fn build_atom(
        &mut self,
        a: AtomId,
        inner: &dyn Fn(AtomId) -> Option<NodeId>,
        factor: bool,
    ) -> Result<NodeId, NetError> {
        let g = self.g;
        let n = self.rules_of(a).len();
        // Buffers kept from one atom to the next: the builder meets millions of atoms.
        let mut bodies = std::mem::take(&mut self.bodies);
        let mut plain = std::mem::take(&mut self.plain);
        bodies.ops.clear();
        bodies.ends.clear();
        plain.clear();
        'rules: for k in 0..n {
            let body: &[GroundLit] = g.rules.body(self.rules_of(a)[k] as usize);
            for &lit in body {
                let node = inner(lit.atom()).unwrap_or_else(|| self.node_of(lit.atom()));
                let node = if lit.negated() { self.negation(node)? } else { node };
                if node == self.false_node {
                    bodies.discard();
                    continue 'rules;
                }
                if node != self.true_node {
                    bodies.ops.push(node);
                }
            }
            let ands = bodies.open();
            ands.sort_unstable();
            let (len, first, all) = (sorted_dedup(ands), ands.first().copied(), ands.len());
            match len {
                // A rule that holds whatever the state makes the atom true.
                0 => return Ok(self.true_node),
                1 => {
                    plain.extend(first);
                    bodies.discard();
                }
                _ => {
                    let start = bodies.ops.len() - all;
                    bodies.ops.truncate(start + len);
                    bodies.close();
                }
            }
        }
        let factored = factor || bodies.len() >= FACTOR_AS_BUILT;
        if !factored && bodies.len() > 1 {
            // The table is larger than the cache on the large games, and nearly every lookup
            // waits for memory: the slots of all the ands about to be written are loaded
            // first, one after the other, so that those waits overlap (alexChess writes
            // 660,000 ands under 100,000 ors), as the merge pass does ([`Interner::touch`]).
            let mut hashes = std::mem::take(&mut self.hashes);
            hashes.clear();
            hashes.extend((0..bodies.len()).map(|k| hash_of(AND, bodies.get(k))));
            self.gates.touch(&hashes);
            self.hashes = hashes;
        }
        let (limits, nodes, gates) = (self.limits, &mut self.net.nodes, &mut self.gates);
        let or = if factored {
            factored_or(&mut bodies, &plain, &mut |node| push(nodes, gates, limits, node))
        } else {
            // Both closures write into the same arena and table, one at a time.
            let arena = std::cell::RefCell::new((nodes, gates));
            or_of(
                &bodies,
                &plain,
                &mut |ops| {
                    let (nodes, gates) = &mut *arena.borrow_mut();
                    push_and(nodes, gates, limits, ops)
                },
                &mut |node| {
                    let (nodes, gates) = &mut *arena.borrow_mut();
                    push(nodes, gates, limits, node)
                },
            )
        };
        self.bodies = bodies;
        self.plain = plain;
        or
    }

    fn negation(&mut self, node: NodeId) -> Result<NodeId, NetError> {
        if node == self.false_node {
            return Ok(self.true_node);
        }
        if node == self.true_node {
            return Ok(self.false_node);
        }
        if let Some(&n) = self.negations.get(&node) {
            return Ok(n);
        }
        let n = self.push(Node::Not(node))?;
        self.negations.insert(node, n);
        Ok(n)
    }

    /// A recursive component has the least fixpoint of its positive rules as its meaning. With
    /// `k` atoms, `k` rounds of the rules starting from all-false reach it, since each round
    /// that changes anything makes at least one more atom true. Unrolled, the net holds the `k`
    /// rounds; as a loop, one round over feedback leaves, which the executors repeat until no
    /// atom changes (usually far fewer than `k` times).
    fn build_recursive(&mut self, scc: &[AtomId]) -> Result<(), NetError> {
        let g = self.g;
        let members: FxHashMap<AtomId, usize> = scc.iter().enumerate().map(|(i, &a)| (a, i)).collect();
        for &a in scc {
            for &r in self.rules_of(a) {
                if g.rules
                    .body(r as usize)
                    .iter()
                    .any(|l| l.negated() && members.contains_key(&l.atom()))
                {
                    let mut propositions: Vec<String> = scc
                        .iter()
                        .take(8)
                        .map(|a| g.atoms[a.index()].text.clone())
                        .collect();
                    if scc.len() > 8 {
                        propositions.push(format!("… ({} in all)", scc.len()));
                    }
                    return Err(NetError::Cycle {
                        propositions,
                        reason: "a cycle through negation".into(),
                    });
                }
            }
        }
        if self.limits.recursion == Recursion::Loop {
            // One round, reading the previous round's values from feedback leaves.
            let first = self.net.feedback.len() as u32;
            let mut leaves = Vec::with_capacity(scc.len());
            for i in 0..scc.len() as u32 {
                leaves.push(self.push(Node::Feedback(first + i))?);
                self.net.feedback.push(self.false_node);
            }
            for (i, &a) in scc.iter().enumerate() {
                let lookup = |b: AtomId| members.get(&b).map(|&j| leaves[j]);
                let node = self.build_atom(a, &lookup, false)?;
                self.net.feedback[first as usize + i] = node;
            }
            for (i, &a) in scc.iter().enumerate() {
                self.atom_node[a.index()] = Some(self.net.feedback[first as usize + i]);
            }
            self.net.loops.push(first..first + scc.len() as u32);
            return Ok(());
        }
        let mut current: Vec<NodeId> = vec![self.false_node; scc.len()];
        for _ in 0..scc.len() {
            let mut next = Vec::with_capacity(scc.len());
            for &a in scc {
                let lookup = |b: AtomId| members.get(&b).map(|&i| current[i]);
                next.push(self.build_atom(a, &lookup, true)?);
            }
            current = next;
        }
        for (&a, node) in scc.iter().zip(current) {
            self.atom_node[a.index()] = Some(node);
        }
        Ok(())
    }
}

/// The number of ground atoms from which [`build`] works on two threads: below it, starting
/// the second costs about what it saves.
const PARALLEL_ATOMS: usize = 1 << 16;

/// The outputs of the net by atom, before the atoms' nodes are known.
struct Outputs {
    /// The `next` atoms.
    nexts: Vec<AtomId>,
    /// The goal atoms, by role and value once sorted (atoms of the same role and value in atom
    /// order).
    goals: Vec<(RoleIdx, u32, AtomId)>,
    /// The last terminal atom, if any.
    terminal: Option<AtomId>,
    /// The view propositions' names in atom order, each with its place in that order.
    views: Vec<(String, u32)>,
    /// The view propositions' atoms in atom order.
    view_atoms: Vec<AtomId>,
}

impl Outputs {
    /// The outputs of `g`, in atom order.
    fn of(g: &Grounded) -> Outputs {
        let mut out = Outputs {
            nexts: Vec::new(),
            goals: Vec::new(),
            terminal: None,
            // At most one view per atom (chess: 945,440 of 1.1 million): reserved at once,
            // since growing the vector step by step copied it and faulted its pages in again.
            views: Vec::with_capacity(g.atoms.len()),
            view_atoms: Vec::with_capacity(g.atoms.len()),
        };
        for (i, atom) in g.atoms.iter().enumerate() {
            let id = AtomId::from_index(i);
            let name = match atom.kind {
                AtomKind::True | AtomKind::Does { .. } => continue,
                AtomKind::Next => {
                    out.nexts.push(id);
                    format!("(next {})", atom.text)
                }
                AtomKind::Legal { role } => {
                    format!("(legal {} {})", g.roles[role as usize], atom.text)
                }
                AtomKind::Goal { role, value } => {
                    out.goals.push((RoleIdx(role), value, id));
                    atom.text.clone()
                }
                AtomKind::Terminal => {
                    out.terminal = Some(id);
                    atom.text.clone()
                }
                AtomKind::View => atom.text.clone(),
                // Opaque atoms are leaves of the net, not views.
                AtomKind::Opaque => continue,
            };
            let k = u32::try_from(out.views.len()).expect("fewer than 2^32 views");
            out.views.push((name, k));
            out.view_atoms.push(id);
        }
        out
    }
}

/// Sorts the views' names (each with its view's place in atom order) and finds the runs of
/// equal names, whose views [`ViewNames::name`] orders by node.
fn sort_names(mut views: Vec<(String, u32)>) -> SortedNames {
    // A stable sort: the views come mostly in order already, which it takes as runs (an
    // unstable sort took 1.9 times the instructions here on alexChess). A sort compares
    // every two values that end up next to each other (were two such never compared, the
    // other order of the two would agree with every comparison made), so if it met no two
    // equal names, there are none.
    let mut tied = false;
    views.sort_by(|x, y| {
        let o = x.0.cmp(&y.0);
        tied |= o.is_eq();
        o
    });
    let mut ties = Vec::new();
    let mut i = 0;
    while tied && i < views.len() {
        let mut j = i + 1;
        while j < views.len() && views[j].0 == views[i].0 {
            j += 1;
        }
        if j - i > 1 {
            ties.push(i..j);
        }
        i = j;
    }
    SortedNames { names: views, ties }
}

/// The rules of each head atom `a`: `by_head[start[a]..start[a + 1]]`, one array for all atoms
/// rather than a vector each (chess has millions of atoms).
struct Heads {
    start: Vec<u32>,
    by_head: Vec<u32>,
}

impl Heads {
    /// A counting sort of the rules of `g` by head.
    fn of(g: &Grounded) -> Heads {
        let mut start = vec![0u32; g.atoms.len() + 1];
        for r in &g.rules {
            start[r.head.index() + 1] += 1;
        }
        for a in 0..g.atoms.len() {
            start[a + 1] += start[a];
        }
        let mut fill = start.clone();
        let mut by_head = vec![0u32; g.rules.len()];
        for (i, r) in g.rules.iter().enumerate() {
            let slot = &mut fill[r.head.index()];
            by_head[*slot as usize] = i as u32;
            *slot += 1;
        }
        Heads { start, by_head }
    }

    /// The numbers of the rules whose head is `a`.
    fn rules_of(&self, a: AtomId) -> &[u32] {
        &self.by_head[self.start[a.index()] as usize..self.start[a.index() + 1] as usize]
    }
}

/// Strongly connected components of view atoms in the order they are built, as the builder
/// receives them: a batch rather than one at a time, since most are a single atom (chess:
/// about a million).
#[derive(Default)]
struct Components {
    /// The components' atoms, one component after the other, each sorted.
    atoms: Vec<AtomId>,
    /// The end of each component in `atoms`.
    ends: Vec<u32>,
    /// Whether each component is recursive: more than one atom, or one that reads itself.
    cyclic: Vec<bool>,
}

/// The number of components in a batch that [`components`] hands over.
const BATCH: usize = 1024;

/// Finds the strongly connected components of the view atoms of `g` in dependency order and
/// hands them to `emit` in batches ([`Components`]), stopping at the first error it returns.
fn components<E>(
    g: &Grounded,
    heads: &Heads,
    mut emit: impl FnMut(Components) -> Result<(), E>,
) -> Result<(), E> {
    // Opaque atoms are leaves, built before the views like bases.
    let is_view = |a: AtomId| {
        !matches!(
            g.atoms[a.index()].kind,
            AtomKind::True | AtomKind::Does { .. } | AtomKind::Opaque
        )
    };
    // Edges from a head to the view atoms its bodies read.
    let roots: Vec<AtomId> = (0..g.atoms.len())
        .map(AtomId::from_index)
        .filter(|&a| is_view(a) && !heads.rules_of(a).is_empty())
        .collect();
    // Appends the view atoms that `a`'s bodies read to `out`, sorted and without repeats.
    let succ = |a: AtomId, out: &mut Vec<AtomId>| {
        let start = out.len();
        out.extend(
            heads
                .rules_of(a)
                .iter()
                .flat_map(|&r| g.rules.body(r as usize).iter().map(|l| l.atom()))
                .filter(|&b| is_view(b)),
        );
        out[start..].sort_unstable();
        let len = sorted_dedup(&mut out[start..]);
        out.truncate(start + len);
    };
    let mut batch = Components::default();
    crate::graph::components(g.atoms.len(), roots, succ, |scc| {
        let cyclic = scc.len() > 1 || {
            let a = scc[0];
            heads
                .rules_of(a)
                .iter()
                .any(|&r| g.rules.body(r as usize).iter().any(|l| l.atom() == a))
        };
        batch.atoms.extend_from_slice(scc);
        batch.ends.push(batch.atoms.len() as u32);
        batch.cyclic.push(cyclic);
        if batch.ends.len() >= BATCH {
            emit(std::mem::take(&mut batch))?;
        }
        Ok(())
    })?;
    emit(batch)
}

/// How many ands and ors the builder writes at most outside unrolled components: one and per
/// rule of two literals or more and one or per atom of two rules or more. The table of gates
/// is sized for that many at once: growing it rehashes every gate, each a read of its operands
/// somewhere in the arena (alexChess: about 100 ms of the build with a table sized for half
/// the rules, which grew once). Chess: about 1.45 million, of 4.5 million rules.
fn most_gates(g: &Grounded, head_start: &[u32]) -> usize {
    let ands = (0..g.rules.len()).filter(|&r| g.rules.body(r).len() >= 2).count();
    let ors = head_start.windows(2).filter(|w| w[1] - w[0] >= 2).count();
    ands + ors
}

/// The number of rules from which an atom's or is factored as it is built. comp2006_farmers
/// has an atom of 133,202 rules: factored by the pass, after merging (an and that another or
/// also reads is not taken), its net was 1,118,107 components after the passes, and factored
/// as built 864,770. Every other corpus game keeps its size with this bound, but chess grows
/// with a bound of 64 (555,283 components instead of 547,431).
const FACTOR_AS_BUILT: usize = 1000;

/// Moves the distinct values of the sorted `xs` to its front and returns how many there are.
fn sorted_dedup<T: PartialEq + Copy>(xs: &mut [T]) -> usize {
    let mut len = 0;
    for i in 0..xs.len() {
        if len == 0 || xs[len - 1] != xs[i] {
            xs[len] = xs[i];
            len += 1;
        }
    }
    len
}

/// Appends `node` to `nodes`, within the limit on nodes, or returns the gate already there with
/// the same content. The constant false is node 0 of every net as built, so that is the node
/// of `Node::Const(false)`.
///
/// Gates are hash-consed as the merge pass does it: the operands of an and or an or are sorted
/// and without repeats (an or of one operand stays an or, for the collapse pass), and a gate
/// equal to one already built is that gate. Chess's ground rules repeat the same bodies over
/// and over (the same test of a square written for many moves): built literally, its net
/// was 1,454,733 components, of which the merge pass of the first round removed half, after
/// building, counting and moving them. `not`s are shared by `Builder::negation` already.
fn push(
    nodes: &mut Vec<Node>,
    gates: &mut Interner,
    limits: &NetLimits,
    mut node: Node,
) -> Result<NodeId, NetError> {
    if node == Node::Const(false) {
        return Ok(NodeId(0));
    }
    let hash = match &mut node {
        Node::And(ops) | Node::Or(ops) => {
            ops.sort_unstable();
            ops.dedup();
            Some(gate_hash(&node))
        }
        _ => None,
    };
    if let Some(hash) = hash {
        let id = nodes.len() as u32;
        let found = gates.find_or_insert(
            hash,
            id,
            |g| nodes[g as usize] == node,
            |g| gate_hash(&nodes[g as usize]),
        );
        if let Some(found) = found {
            return Ok(NodeId(found));
        }
    }
    append(nodes, limits, node)
}

/// [`push`] of the and of `ops`, which are sorted and without repeats (as [`push`] makes
/// them): the and is looked up before its operands are copied into a vector of its own.
fn push_and(
    nodes: &mut Vec<Node>,
    gates: &mut Interner,
    limits: &NetLimits,
    ops: &[NodeId],
) -> Result<NodeId, NetError> {
    debug_assert!(ops.windows(2).all(|w| w[0] < w[1]), "sorted, without repeats");
    let id = nodes.len() as u32;
    let found = gates.find_or_insert(
        hash_of(AND, ops),
        id,
        |g| matches!(&nodes[g as usize], Node::And(x) if x[..] == *ops),
        |g| gate_hash(&nodes[g as usize]),
    );
    if let Some(found) = found {
        return Ok(NodeId(found));
    }
    append(nodes, limits, Node::And(super::Operands::from_slice(ops)))
}

/// Appends a node that is not there yet, within the limit on nodes.
fn append(nodes: &mut Vec<Node>, limits: &NetLimits, node: Node) -> Result<NodeId, NetError> {
    if nodes.len() >= limits.max_nodes {
        return Err(NetError::Limit {
            limit: "max_nodes",
            value: limits.max_nodes as u64,
            what: "the unoptimized net".into(),
        });
    }
    nodes.push(node);
    Ok(NodeId::from_index(nodes.len() - 1))
}

/// The hash of an and or an or by its kind and operands.
fn gate_hash(node: &Node) -> u64 {
    match node {
        Node::And(ops) => hash_of(AND, ops),
        Node::Or(ops) => hash_of(OR, ops),
        _ => unreachable!("only ands and ors are hash-consed"),
    }
}

const AND: u8 = 0;
const OR: u8 = 1;

fn hash_of(kind: u8, ops: &[NodeId]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
    let mut h = BuildHasherDefault::<rustc_hash::FxHasher>::default().build_hasher();
    kind.hash(&mut h);
    ops.hash(&mut h);
    // The table keeps the high half of the hash as a tag and indexes by the low half; the
    // multiplication spreads the hasher's last mix over both.
    h.finish().wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
