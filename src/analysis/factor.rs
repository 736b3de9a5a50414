//! Factoring: the conditions of conjunctive factorability checked on the net, and the factors
//! built as programs of their own (see `doc/analysis.md`).

use super::deps::{reach, Cones, Reach, UnionFind};
use super::{Atom, Factor, FactorInput, Factoring, Obstacle, Relation};
use crate::net::{self, BaseProp, GoalProp, InputProp, Node, NodeId, Propnet};
use std::collections::HashMap;

/// The most obstacles reported: the last joins made.
const MAX_NOTES: usize = 8;

/// The most work (pairs of factors times inputs) of the pairwise independence test for one
/// class of a role's inputs; beyond it the single product test over all factors decides.
const MAX_PAIRWISE_WORK: usize = 20_000_000;

/// The most nodes of a terminal or goal relation.
const MAX_RELATION_NODES: usize = 100_000;

/// Which moves make a move-level node true, assuming (as every joint move ensures) that each
/// role makes exactly one move. Each constrained role has a set of its moves (a bitset over
/// the role's inputs); the node is true when some role's move lies in its set (`all` false), or
/// when every constrained role's move does (`all` true). One constrained role reads either way.
#[derive(Clone, Debug)]
struct MoveSet {
    all: bool,
    sets: Vec<Option<Vec<u64>>>,
}

impl MoveSet {
    /// The one role whose moves matter, if only one does.
    fn single_role(&self) -> Option<usize> {
        let mut roles = self.sets.iter().enumerate().filter(|(_, s)| s.is_some());
        let (r, _) = roles.next()?;
        roles.next().is_none().then_some(r)
    }

    /// Whether the node is a disjunction over roles (or reads one role).
    fn is_any(&self) -> bool {
        !self.all || self.single_role().is_some()
    }

    /// Whether the node is a conjunction over roles (or reads one role).
    fn is_all(&self) -> bool {
        self.all || self.single_role().is_some()
    }
}

/// The and (`is_and`) or the or of two move sets, when it is again a move set.
fn combine(mut a: MoveSet, set: MoveSet, is_and: bool) -> Result<MoveSet, String> {
    let same_role = match (a.single_role(), set.single_role()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    };
    let fits = same_role || (is_and && a.is_all() && set.is_all()) || (!is_and && a.is_any() && set.is_any());
    if !fits {
        return Err(format!(
            "is {} over moves of several roles that is not one of per-role sets",
            if is_and { "a conjunction" } else { "a disjunction" }
        ));
    }
    for (r, s) in set.sets.into_iter().enumerate() {
        let Some(s) = s else { continue };
        match &mut a.sets[r] {
            None => a.sets[r] = Some(s),
            Some(bits) => {
                for (w, v) in bits.iter_mut().zip(&s) {
                    if is_and {
                        *w &= v;
                    } else {
                        *w |= v;
                    }
                }
            }
        }
    }
    a.all = is_and;
    if a.single_role().is_some() {
        a.all = false;
    }
    Ok(a)
}

/// The move sets a state-level gate reads: its move-level operands combined into one set
/// under the gate's own operator where that is a move set, else each on its own. Only the
/// gate's value matters, so inputs that agree on the combined set are alike for it.
fn gate_boundary(
    node: &Node,
    cones: &Cones,
    sets: &[Option<Result<MoveSet, String>>],
) -> Result<Vec<MoveSet>, (NodeId, String)> {
    let mut singles = Vec::new();
    for op in node.operands() {
        if !cones.is_move_level(op.index()) {
            continue;
        }
        match &sets[op.index()] {
            Some(Ok(set)) => singles.push(set.clone()),
            Some(Err(why)) => return Err((*op, why.clone())),
            None => {}
        }
    }
    if singles.len() < 2 {
        return Ok(singles);
    }
    let is_and = matches!(node, Node::And(_));
    let mut acc: Option<MoveSet> = None;
    for set in &singles {
        acc = Some(match acc {
            None => set.clone(),
            Some(a) => match combine(a, set.clone(), is_and) {
                Ok(c) => c,
                Err(_) => return Ok(singles),
            },
        });
    }
    Ok(acc.into_iter().collect())
}

/// Computes the move set of every move-level node, or why a node has none.
fn move_sets(net: &Propnet, cones: &Cones) -> Vec<Option<Result<MoveSet, String>>> {
    let roles = net.roles.len();
    let range: Vec<(usize, usize)> = (0..roles)
        .map(|r| {
            let rg = net.role_inputs(r);
            (rg.start, rg.end)
        })
        .collect();
    let words = |r: usize| (range[r].1 - range[r].0).div_ceil(64);
    let mut out: Vec<Option<Result<MoveSet, String>>> = Vec::with_capacity(net.nodes.len());
    for (i, node) in net.nodes.iter().enumerate() {
        if !cones.is_move_level(i) {
            out.push(None);
            continue;
        }
        let set = (|| -> Result<MoveSet, String> {
            match node {
                Node::Input(x) => {
                    let role = net.inputs[*x as usize].role.index();
                    let mut sets = vec![None; roles];
                    let mut bits = vec![0u64; words(role)];
                    let k = *x as usize - range[role].0;
                    bits[k / 64] |= 1 << (k % 64);
                    sets[role] = Some(bits);
                    Ok(MoveSet { all: false, sets })
                }
                Node::Not(x) => {
                    let mut inner = out[x.index()].clone().expect("a move-level operand")?;
                    inner.all = !inner.all && inner.single_role().is_none();
                    for (r, set) in inner.sets.iter_mut().enumerate() {
                        let Some(bits) = set else { continue };
                        let len = range[r].1 - range[r].0;
                        for w in bits.iter_mut() {
                            *w = !*w;
                        }
                        if !len.is_multiple_of(64) {
                            if let Some(last) = bits.last_mut() {
                                *last &= (1u64 << (len % 64)) - 1;
                            }
                        }
                    }
                    Ok(inner)
                }
                Node::And(ops) | Node::Or(ops) => {
                    let is_and = matches!(node, Node::And(_));
                    let mut acc: Option<MoveSet> = None;
                    for op in ops {
                        let o = op.index();
                        if let Node::Const(c) = net.nodes[o] {
                            if c == is_and {
                                continue;
                            }
                            return Err("has a constant operand that decides it".into());
                        }
                        let Some(set) = &out[o] else {
                            return Err("combines moves with the action-independent state".into());
                        };
                        let set = set.clone()?;
                        acc = Some(match acc {
                            None => set,
                            Some(a) => combine(a, set, is_and)?,
                        });
                    }
                    acc.ok_or_else(|| "has no move operand".to_string())
                }
                Node::Const(_) | Node::Base(_) | Node::Opaque(_) | Node::Feedback(_) => {
                    Err("is not a function of moves".into())
                }
            }
        })();
        out.push(Some(set));
    }
    out
}

/// The whole-game inputs in the set of each role a move set constrains, by role.
fn role_inputs(net: &Propnet, set: &MoveSet) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for (r, bits) in set.sets.iter().enumerate() {
        let Some(bits) = bits else { continue };
        let start = net.role_inputs(r).start;
        let mut xs = Vec::new();
        for (w, word) in bits.iter().enumerate() {
            let mut word = *word;
            while word != 0 {
                xs.push(start + w * 64 + word.trailing_zeros() as usize);
                word &= word - 1;
            }
        }
        out.push(xs);
    }
    out
}

/// The whole-game inputs in a move set, of every role.
fn set_inputs(net: &Propnet, set: &MoveSet) -> Vec<usize> {
    role_inputs(net, set).concat()
}

/// A move set as a hash key: its `all` flag and its per-role bitsets.
type SetKey = (bool, Vec<Option<Vec<u64>>>);

/// Distinct move sets, numbered.
#[derive(Default)]
struct Contents {
    ids: HashMap<SetKey, u32>,
    sets: Vec<MoveSet>,
}

impl Contents {
    fn intern(&mut self, set: MoveSet) -> u32 {
        let key = (set.all, set.sets.clone());
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.ids.insert(key, id);
        self.sets.push(set);
        id
    }
}

/// The conjuncts of a legal node: its and-operands, split further while they read more than
/// one factor; `Err(node)` for a part that reads several factors and is not an and.
fn conjuncts(net: &Propnet, reach: &[Reach], root: NodeId) -> Result<Vec<NodeId>, NodeId> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        match (reach[id.index()], net.node(id)) {
            (Reach::Local(_), Node::Const(true)) => {}
            (Reach::Local(_), _) => out.push(id),
            (Reach::Mixed, Node::And(ops)) => stack.extend(ops.iter().copied()),
            (Reach::Mixed, _) => return Err(id),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A factor's view of one input: the boundary nodes it makes true, the legal conjuncts of the
/// factor and the shared legal conjuncts.
type Key = (Vec<u32>, Vec<NodeId>, Vec<NodeId>);

/// Everything the grouping found for one round.
struct Round {
    groups: usize,
    group_of_base: Vec<Option<u32>>,
    reach: Vec<Reach>,
    /// Per input, the factor key ids (dense, `groups` per input); shared inputs have none.
    keys: Vec<Vec<u32>>,
    /// Per group, its keys in id order.
    key_list: Vec<Vec<Key>>,
    shared_input: Vec<bool>,
}

/// A short name for a group: its first few bases.
fn group_name(net: &Propnet, group_of_base: &[Option<u32>], g: u32) -> String {
    let names: Vec<&str> = net
        .bases
        .iter()
        .zip(group_of_base)
        .filter(|(_, f)| **f == Some(g))
        .map(|(b, _)| b.name.as_str())
        .take(3)
        .collect();
    let total = group_of_base.iter().filter(|f| **f == Some(g)).count();
    if total > names.len() {
        format!("{{{}, … ({total} bases)}}", names.join(", "))
    } else {
        format!("{{{}}}", names.join(", "))
    }
}

/// The most nodes a walk for an obstacle's message visits.
const MAX_NOTE_WALK: usize = 20_000;

/// Some factors whose bases lie in the cone of `root` (all of them unless the cone is larger
/// than [`MAX_NOTE_WALK`] nodes), sorted, for a message: a walk that stops at nodes of one
/// factor.
fn factors_in_cone(net: &Propnet, reach: &[Reach], root: NodeId) -> Vec<u32> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        if seen.len() >= MAX_NOTE_WALK || !seen.insert(id) {
            continue;
        }
        match reach[id.index()] {
            Reach::Local(Some(f)) => found.push(f),
            Reach::Local(None) => {}
            Reach::Mixed => stack.extend(net.node(id).operands().iter().copied()),
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Names for groups: the first four by their bases, then how many more.
fn group_names(net: &Propnet, group_of_base: &[Option<u32>], gs: &[u32]) -> Vec<String> {
    let mut out: Vec<String> = gs
        .iter()
        .take(4)
        .map(|&g| group_name(net, group_of_base, g))
        .collect();
    if gs.len() > 4 {
        out.push(format!("{} more", gs.len() - 4));
    }
    out
}

/// Checks the conditions on `net`, joining components that a condition couples, and builds the
/// factors when at least two remain. `comp` is the component of each base; `inert` says, for
/// each base, whether it keeps its initial value in every reachable state, and is asked for
/// only when the conditions hold for two candidates or more (a proof over the whole net, which
/// games of one component never need).
pub fn factor(
    net: &Propnet,
    cones: &Cones,
    comp: &[Option<usize>],
    ncomp: usize,
    inert: &dyn Fn() -> Vec<bool>,
) -> Result<Factoring, Vec<Obstacle>> {
    if !net.opaque.is_empty() {
        return Err(vec![Obstacle::Opaque(net.opaque.len())]);
    }
    if !net.loops.is_empty() {
        return Err(vec![Obstacle::Loops(net.loops.len())]);
    }
    if ncomp == 0 {
        return Err(vec![Obstacle::NoActionDependentState]);
    }
    let mut notes: Vec<Obstacle> = Vec::new();
    if ncomp == 1 {
        notes.push(Obstacle::OneComponent {
            bases: comp.iter().filter(|c| c.is_some()).count(),
        });
        return Err(notes);
    }
    let sets = move_sets(net, cones);
    let mut contents = Contents::default();
    let mut uf = UnionFind::new(ncomp);
    let mut inert_bases: Option<Vec<bool>> = None;
    let round = loop {
        let mut number = vec![None; ncomp];
        let mut groups = 0u32;
        for c in 0..ncomp {
            let root = uf.find(c);
            if number[root].is_none() {
                number[root] = Some(groups);
                groups += 1;
            }
        }
        let mut rep = vec![0usize; groups as usize];
        for (c, n) in number.iter().enumerate() {
            if let Some(g) = n {
                rep[*g as usize] = c;
            }
        }
        if groups < 2 {
            // The last joins are the ones that left a single factor.
            let cut = notes.len().saturating_sub(MAX_NOTES);
            return Err(notes.split_off(cut));
        }
        let group_of_base: Vec<Option<u32>> = comp
            .iter()
            .map(|c| c.map(|c| number[uf.find(c)].expect("numbered")))
            .collect();
        let reach = reach(net, &group_of_base);
        let groups = groups as usize;

        // Legal partitionability: each legal is a conjunction of parts of one factor each.
        // The parts that read several factors are marked, and one sweep joins, for each marked
        // node, every factor of its cone (through the marked nodes below it).
        let mut merged = false;
        let mut legal_parts: Vec<Vec<NodeId>> = Vec::with_capacity(net.inputs.len());
        let mut bad = vec![false; net.nodes.len()];
        for input in &net.inputs {
            match conjuncts(net, &reach, input.legal) {
                Ok(parts) => legal_parts.push(parts),
                Err(node) => {
                    if !bad[node.index()] && notes.len() < 4 * MAX_NOTES {
                        let direct = factors_in_cone(net, &reach, node);
                        notes.push(Obstacle::LegalCouples {
                            role: net.roles[input.role.index()].clone(),
                            input: input.name.clone(),
                            factors: group_names(net, &group_of_base, &direct),
                        });
                    }
                    bad[node.index()] = true;
                    legal_parts.push(Vec::new());
                }
            }
        }
        for i in (0..net.nodes.len()).rev() {
            if bad[i] {
                for op in net.nodes[i].operands() {
                    if reach[op.index()] == Reach::Mixed {
                        bad[op.index()] = true;
                    }
                }
            }
        }
        let mut first_group: Vec<Option<u32>> = vec![None; net.nodes.len()];
        for i in 0..net.nodes.len() {
            if !bad[i] {
                continue;
            }
            let mut acc: Option<u32> = None;
            for op in net.nodes[i].operands() {
                let g = match reach[op.index()] {
                    Reach::Local(Some(g)) => Some(g),
                    Reach::Mixed => first_group[op.index()],
                    Reach::Local(None) => None,
                };
                if let Some(g) = g {
                    match acc {
                        None => acc = Some(g),
                        Some(a) => merged |= uf.union(rep[a as usize], rep[g as usize]),
                    }
                }
            }
            first_group[i] = acc;
        }
        if merged {
            continue;
        }

        // The boundary of each factor: the move sets its transitions read, each identified by
        // its content so that equal functions of the moves count once.
        let mut boundary: Vec<Vec<u32>> = vec![Vec::new(); groups];
        for (i, node) in net.nodes.iter().enumerate() {
            let g = match reach[i] {
                Reach::Local(Some(g)) if cones.in_next_cone[i] && cones.has_state[i] => g,
                _ => continue,
            };
            match gate_boundary(node, cones, &sets) {
                Ok(found) => {
                    for set in found {
                        boundary[g as usize].push(contents.intern(set));
                    }
                }
                Err((op, why)) => {
                    notes.push(Obstacle::MoveNode {
                        node: node_name(net, op),
                        why,
                    });
                    return Err(notes);
                }
            }
        }
        for (b, base) in net.bases.iter().enumerate() {
            let Some(g) = group_of_base[b] else { continue };
            let m = base.next.index();
            match &sets[m] {
                Some(Ok(set)) => boundary[g as usize].push(contents.intern(set.clone())),
                Some(Err(why)) => {
                    notes.push(Obstacle::MoveNode {
                        node: node_name(net, base.next),
                        why: why.clone(),
                    });
                    return Err(notes);
                }
                None => {}
            }
        }
        // The signature of each input: the boundary sets that hold it, by group.
        let mut sig: Vec<Vec<(u32, u32)>> = vec![Vec::new(); net.inputs.len()];
        for (g, ids) in boundary.iter_mut().enumerate() {
            ids.sort_unstable();
            ids.dedup();
            for &m in ids.iter() {
                for x in set_inputs(net, &contents.sets[m as usize]) {
                    sig[x].push((g as u32, m));
                }
            }
        }
        // Keys: for each input and group, the group's view of the input.
        let mut key_ids: Vec<HashMap<Key, u32>> = vec![HashMap::new(); groups];
        let mut key_list: Vec<Vec<Key>> = vec![Vec::new(); groups];
        let mut keys: Vec<Vec<u32>> = vec![Vec::new(); net.inputs.len()];
        let mut shared_input = vec![false; net.inputs.len()];
        let mut shared_ids: HashMap<Vec<NodeId>, usize> = HashMap::new();
        let mut idle_rows: Vec<Vec<u32>> = Vec::new();
        for x in 0..net.inputs.len() {
            let parts = &legal_parts[x];
            let local = |g: u32| -> Vec<NodeId> {
                parts
                    .iter()
                    .copied()
                    .filter(|p| reach[p.index()] == Reach::Local(Some(g)))
                    .collect()
            };
            let shared: Vec<NodeId> = parts
                .iter()
                .copied()
                .filter(|p| reach[p.index()] == Reach::Local(None))
                .collect();
            if sig[x].is_empty() && shared.len() == parts.len() {
                shared_input[x] = true;
                continue;
            }
            // Most groups see neither the input's moves nor its legal: their key is the idle
            // key of its shared conditions, made once per distinct shared conditions.
            let next_shared = idle_rows.len();
            let sid = *shared_ids.entry(shared.clone()).or_insert(next_shared);
            if sid == idle_rows.len() {
                let row: Vec<u32> = (0..groups)
                    .map(|g| {
                        let key: Key = (Vec::new(), Vec::new(), shared.clone());
                        let next = key_list[g].len() as u32;
                        *key_ids[g].entry(key.clone()).or_insert_with(|| {
                            key_list[g].push(key);
                            next
                        })
                    })
                    .collect();
                idle_rows.push(row);
            }
            let mut row = idle_rows[sid].clone();
            let mut touched: Vec<u32> = sig[x].iter().map(|&(g, _)| g).collect();
            touched.extend(parts.iter().filter_map(|p| match reach[p.index()] {
                Reach::Local(Some(g)) => Some(g),
                _ => None,
            }));
            touched.sort_unstable();
            touched.dedup();
            for g in touched {
                let s: Vec<u32> = sig[x].iter().filter(|(h, _)| *h == g).map(|&(_, m)| m).collect();
                let key: Key = (s, local(g), shared.clone());
                let next = key_list[g as usize].len() as u32;
                let id = *key_ids[g as usize].entry(key.clone()).or_insert_with(|| {
                    key_list[g as usize].push(key);
                    next
                });
                row[g as usize] = id;
            }
            keys[x] = row;
        }

        // The moves of each role must be the product of its moves in the factors: factors that
        // are not independent for some role are joined.
        // Inputs whose shared legal conditions differ are never combined with each other by a
        // player who follows the shared part, so each class of them is checked on its own.
        let mut classes: Vec<(usize, Vec<usize>)> = Vec::new();
        for r in 0..net.roles.len() {
            let mut by_shared: HashMap<&[NodeId], usize> = HashMap::new();
            for x in 0..net.inputs.len() {
                if net.inputs[x].role.index() != r || shared_input[x] {
                    continue;
                }
                let shared = key_list[0][keys[x][0] as usize].2.as_slice();
                let c = *by_shared.entry(shared).or_insert_with(|| {
                    classes.push((r, Vec::new()));
                    classes.len() - 1
                });
                classes[c].1.push(x);
            }
        }
        let mut has_choice = vec![false; groups];
        for (r, xs) in &classes {
            let r = *r;
            let count = |g: usize| -> usize {
                let mut ids: Vec<u32> = xs.iter().map(|&x| keys[x][g]).collect();
                ids.sort_unstable();
                ids.dedup();
                ids.len()
            };
            let active: Vec<(usize, usize)> = (0..groups)
                .map(|g| (g, count(g)))
                .filter(|&(_, k)| k > 1)
                .collect();
            for &(g, _) in &active {
                has_choice[g] = true;
            }
            if active.len() < 2 {
                continue;
            }
            if active.len() * active.len() * xs.len() <= MAX_PAIRWISE_WORK {
                for (ai, &(a, ka)) in active.iter().enumerate() {
                    for &(b, kb) in &active[ai + 1..] {
                        let mut pairs: Vec<(u32, u32)> =
                            xs.iter().map(|&x| (keys[x][a], keys[x][b])).collect();
                        pairs.sort_unstable();
                        pairs.dedup();
                        if pairs.len() != ka * kb && uf.union(rep[a], rep[b]) {
                            merged = true;
                            {
                                notes.push(Obstacle::MovesCouple {
                                    role: net.roles[r].clone(),
                                    factors: group_names(net, &group_of_base, &[a as u32, b as u32]),
                                    combinations: pairs.len(),
                                    product: ka * kb,
                                });
                            }
                        }
                    }
                }
            }
            if merged {
                continue;
            }
            let mut tuples: Vec<Vec<u32>> = xs
                .iter()
                .map(|&x| active.iter().map(|&(g, _)| keys[x][g]).collect())
                .collect();
            tuples.sort_unstable();
            tuples.dedup();
            let product = active
                .iter()
                .try_fold(1usize, |acc, &(_, k)| acc.checked_mul(k))
                .unwrap_or(usize::MAX);
            if tuples.len() != product {
                {
                    notes.push(Obstacle::MovesCouple {
                        role: net.roles[r].clone(),
                        factors: group_names(
                            net,
                            &group_of_base,
                            &active.iter().map(|&(g, _)| g as u32).collect::<Vec<_>>(),
                        ),
                        combinations: tuples.len(),
                        product,
                    });
                }
                for w in active.windows(2) {
                    merged |= uf.union(rep[w[0].0], rep[w[1].0]);
                }
            }
        }
        if merged {
            continue;
        }
        // A candidate in which no role ever has a choice (one move per class of its inputs), or
        // whose bases all keep their initial values forever (proven inductively), is no
        // sub-game: it joins the first one that is. Joining keeps every condition.
        let mut changes = vec![false; groups];
        let inert = inert_bases.get_or_insert_with(inert);
        for (b, g) in group_of_base.iter().enumerate() {
            if let Some(g) = g {
                changes[*g as usize] |= !inert[b];
            }
        }
        let live: Vec<bool> = (0..groups).map(|g| changes[g] && has_choice[g]).collect();
        if let Some(first) = live.iter().position(|&l| l) {
            let dead: Vec<u32> = (0..groups as u32).filter(|&g| !live[g as usize]).collect();
            if !dead.is_empty() {
                notes.push(Obstacle::Inert {
                    factors: group_names(net, &group_of_base, &dead),
                });
                for g in dead {
                    uf.union(rep[first], rep[g as usize]);
                }
                continue;
            }
        } else {
            notes.push(Obstacle::Inert {
                factors: group_names(net, &group_of_base, &(0..groups as u32).collect::<Vec<_>>()),
            });
            let cut = notes.len().saturating_sub(MAX_NOTES);
            return Err(notes.split_off(cut));
        }
        break Round {
            groups,
            group_of_base,
            reach,
            keys,
            key_list,
            shared_input,
        };
    };
    build(net, cones, &sets, round).map_err(|o| {
        notes.push(o);
        notes
    })
}

/// A name for a node: the view that names it, the proposition it is, or its number.
fn node_name(net: &Propnet, id: NodeId) -> String {
    if let Some((name, _)) = net.views.iter().find(|(_, v)| *v == id) {
        return name.clone();
    }
    match *net.node(id) {
        Node::Base(b) => net.bases[b as usize].name.clone(),
        Node::Input(x) => {
            let i = &net.inputs[x as usize];
            format!("(does {} {})", net.roles[i.role.index()], i.name)
        }
        _ => id.to_string(),
    }
}

/// The relation of a terminal or goal node to the factors: gates that read several factors,
/// down to atoms that read one factor at most.
fn relation(
    net: &Propnet,
    reach: &[Reach],
    id: NodeId,
    atoms: &mut Vec<Atom>,
    atom_of: &mut HashMap<NodeId, usize>,
    budget: &mut usize,
) -> Result<Relation, Obstacle> {
    if *budget == 0 {
        return Err(Obstacle::RelationTooLarge {
            limit: MAX_RELATION_NODES,
        });
    }
    *budget -= 1;
    match (reach[id.index()], net.node(id)) {
        (_, Node::Const(c)) => Ok(Relation::Const(*c)),
        (Reach::Local(f), _) => {
            let next = atoms.len();
            let a = *atom_of.entry(id).or_insert_with(|| {
                atoms.push(Atom {
                    factor: f.map(|f| f as usize),
                    node: id,
                    name: node_name(net, id),
                    views: Vec::new(),
                });
                next
            });
            Ok(Relation::Atom(a))
        }
        (Reach::Mixed, Node::Not(x)) => Ok(Relation::Not(Box::new(relation(
            net, reach, *x, atoms, atom_of, budget,
        )?))),
        (Reach::Mixed, Node::And(ops)) | (Reach::Mixed, Node::Or(ops)) => {
            let parts = ops
                .iter()
                .map(|o| relation(net, reach, *o, atoms, atom_of, budget))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if matches!(net.node(id), Node::And(_)) {
                Relation::And(parts)
            } else {
                Relation::Or(parts)
            })
        }
        (Reach::Mixed, _) => unreachable!("propositions read one factor at most"),
    }
}

/// Builds a factor net node by node from the whole net.
struct Copier<'a> {
    net: &'a Propnet,
    cones: &'a Cones,
    nodes: Vec<Node>,
    /// The copy of each whole-net node copied so far (`u32::MAX` for none): a dense table,
    /// since a factor copies a good part of a net that may have a million nodes.
    memo: Vec<u32>,
    /// The node made for each move set, so that a set read by many gates is built once.
    replaced: HashMap<SetKey, NodeId>,
    base_index: HashMap<u32, u32>,
    /// The factor input of each whole input, for this factor (none for inputs of other roles'
    /// keys it has no view of).
    input_of: Vec<Option<u32>>,
    sets: &'a [Option<Result<MoveSet, String>>],
    input_node: Vec<Option<NodeId>>,
}

impl Copier<'_> {
    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        NodeId(self.nodes.len() as u32 - 1)
    }

    fn copied(&self, id: NodeId) -> Option<NodeId> {
        let c = self.memo[id.index()];
        (c != u32::MAX).then_some(NodeId(c))
    }

    fn input(&mut self, k: u32) -> NodeId {
        if let Some(id) = self.input_node[k as usize] {
            return id;
        }
        let id = self.push(Node::Input(k));
        self.input_node[k as usize] = Some(id);
        id
    }

    /// The copy of `root`, with move-level nodes replaced by the or of the factor inputs that
    /// make them true.
    fn copy(&mut self, root: NodeId) -> NodeId {
        let mut stack = vec![(root, false)];
        while let Some((id, expanded)) = stack.pop() {
            if self.copied(id).is_some() {
                continue;
            }
            let i = id.index();
            if self.cones.is_move_level(i) {
                let Some(Ok(set)) = &self.sets[i] else {
                    unreachable!("boundary nodes have move sets");
                };
                let new = self.replace(&set.clone());
                self.memo[i] = new.0;
                continue;
            }
            let node = &self.net.nodes[i];
            if !expanded && node.is_gate() {
                stack.push((id, true));
                for op in node.operands() {
                    if self.copied(*op).is_none() && !self.cones.is_move_level(op.index()) {
                        stack.push((*op, false));
                    }
                }
                continue;
            }
            let new = match node {
                Node::Const(c) => Node::Const(*c),
                Node::Base(b) => Node::Base(self.base_index[b]),
                Node::Input(_) => unreachable!("inputs are move-level"),
                Node::Opaque(_) => unreachable!("factor refuses nets with opaque atoms"),
                Node::Feedback(_) => unreachable!("factor refuses nets with loops"),
                Node::Not(x) => Node::Not(NodeId(self.memo[x.index()])),
                Node::And(ops) | Node::Or(ops) => {
                    // The move-level operands are replaced as the analysis saw them: combined
                    // under the gate's operator where that is a move set, else one by one.
                    let found = gate_boundary(node, self.cones, self.sets).expect("checked by the analysis");
                    let mut new_ops: Vec<NodeId> = ops
                        .iter()
                        .filter(|o| !self.cones.is_move_level(o.index()))
                        .map(|o| NodeId(self.memo[o.index()]))
                        .collect();
                    for set in found {
                        new_ops.push(self.replace(&set));
                    }
                    if matches!(node, Node::And(_)) {
                        Node::And(new_ops.into())
                    } else {
                        Node::Or(new_ops.into())
                    }
                }
            };
            let new = self.push(new);
            self.memo[i] = new.0;
        }
        NodeId(self.memo[root.index()])
    }

    /// A node computing move set `set` from the factor's inputs: per constrained role the or of
    /// the factor inputs standing for its moves in the set, then the or (or the and) of those.
    fn replace(&mut self, set: &MoveSet) -> NodeId {
        let key: SetKey = (set.all, set.sets.clone());
        if let Some(&id) = self.replaced.get(&key) {
            return id;
        }
        let mut per_role: Vec<NodeId> = Vec::new();
        for xs in role_inputs(self.net, set) {
            let mut ks: Vec<u32> = xs.into_iter().filter_map(|x| self.input_of[x]).collect();
            ks.sort_unstable();
            ks.dedup();
            let ops: Vec<NodeId> = ks.into_iter().map(|k| self.input(k)).collect();
            per_role.push(self.push(Node::Or(ops.into())));
        }
        let id = if set.all {
            self.push(Node::And(per_role.into()))
        } else {
            self.push(Node::Or(per_role.into()))
        };
        self.replaced.insert(key, id);
        id
    }

    fn and(&mut self, parts: &[NodeId]) -> NodeId {
        let ops: Vec<NodeId> = parts.iter().map(|p| self.copy(*p)).collect();
        self.push(Node::And(ops.into()))
    }

    /// The node of a relation projected on this factor.
    fn relation(&mut self, rel: &Relation, atoms: &[Atom]) -> NodeId {
        match rel {
            Relation::Const(c) => self.push(Node::Const(*c)),
            Relation::Atom(a) => self.copy(atoms[*a].node),
            Relation::Not(x) => {
                let x = self.relation(x, atoms);
                self.push(Node::Not(x))
            }
            Relation::And(xs) | Relation::Or(xs) => {
                let ops: Vec<NodeId> = xs.iter().map(|x| self.relation(x, atoms)).collect();
                self.push(if matches!(rel, Relation::And(_)) {
                    Node::And(ops.into())
                } else {
                    Node::Or(ops.into())
                })
            }
        }
    }
}

/// A KIF term, for naming factor moves.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Sx {
    Atom(String),
    List(Vec<Sx>),
}

impl Sx {
    /// Parses canonical KIF text (single spaces); `None` if it is not one term.
    fn parse(text: &str) -> Option<Sx> {
        let mut stack: Vec<Vec<Sx>> = vec![Vec::new()];
        let mut word = String::new();
        for c in text.chars() {
            if c == '(' || c == ')' || c == ' ' {
                if !word.is_empty() {
                    stack.last_mut()?.push(Sx::Atom(std::mem::take(&mut word)));
                }
                if c == '(' {
                    stack.push(Vec::new());
                } else if c == ')' {
                    let list = stack.pop()?;
                    stack.last_mut()?.push(Sx::List(list));
                }
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            stack.last_mut()?.push(Sx::Atom(word));
        }
        match (stack.pop(), stack.is_empty()) {
            (Some(mut top), true) if top.len() == 1 => top.pop(),
            _ => None,
        }
    }

    /// The common shape of two terms: equal parts kept, differing parts `_`.
    fn merge(&self, other: &Sx) -> Sx {
        match (self, other) {
            (a, b) if a == b => a.clone(),
            (Sx::List(a), Sx::List(b)) if a.len() == b.len() => {
                Sx::List(a.iter().zip(b).map(|(x, y)| x.merge(y)).collect())
            }
            _ => Sx::Atom("_".into()),
        }
    }

    fn text(&self) -> String {
        match self {
            Sx::Atom(a) => a.clone(),
            Sx::List(xs) => format!("({})", xs.iter().map(Sx::text).collect::<Vec<_>>().join(" ")),
        }
    }
}

/// A name for a factor move: the common shape of the whole inputs it stands for, with `_`
/// where they differ (the parts that concern other factors), such as `(mark 1 1 _ _)`.
/// `parsed` holds each whole input's name as a term, parsed once for all factors.
fn key_name(net: &Propnet, parsed: &[Option<Sx>], whole: &[usize]) -> String {
    let mut shape: Option<Sx> = None;
    for &x in whole {
        let Some(t) = &parsed[x] else {
            return net.inputs[x].name.clone();
        };
        shape = Some(match shape {
            None => t.clone(),
            Some(s) => s.merge(t),
        });
    }
    shape.map_or_else(|| "idle".to_string(), |s| s.text())
}

fn build(
    net: &Propnet,
    cones: &Cones,
    sets: &[Option<Result<MoveSet, String>>],
    round: Round,
) -> Result<Factoring, Obstacle> {
    let Round {
        groups,
        group_of_base,
        reach,
        keys,
        key_list,
        shared_input,
    } = round;
    let mut atoms: Vec<Atom> = Vec::new();
    let mut atom_of = HashMap::new();
    let mut budget = MAX_RELATION_NODES;
    let terminal = relation(net, &reach, net.terminal, &mut atoms, &mut atom_of, &mut budget)?;
    let goals = net
        .goals
        .iter()
        .map(|g| relation(net, &reach, g.node, &mut atoms, &mut atom_of, &mut budget))
        .collect::<Result<Vec<_>, _>>()?;

    let parsed: Vec<Option<Sx>> = net.inputs.iter().map(|i| Sx::parse(&i.name)).collect();
    let mut factors = Vec::with_capacity(groups);
    let mut move_map: Vec<Vec<u32>> = vec![Vec::with_capacity(groups); net.inputs.len()];
    for g in 0..groups {
        let bases: Vec<u32> = (0..net.bases.len() as u32)
            .filter(|&b| group_of_base[b as usize].is_none_or(|f| f as usize == g))
            .collect();
        let base_index: HashMap<u32, u32> = bases.iter().enumerate().map(|(k, &b)| (b, k as u32)).collect();
        // The factor's inputs: per role, its distinct keys, then the role's shared inputs.
        let mut inputs: Vec<FactorInput> = Vec::new();
        let mut input_of: Vec<Option<u32>> = vec![None; net.inputs.len()];
        let mut key_input: HashMap<u32, u32> = HashMap::new();
        let mut factor_inputs: Vec<(usize, String, Vec<NodeId>)> = Vec::new();
        for r in 0..net.roles.len() {
            key_input.clear();
            // The whole inputs of each key of this role, for naming.
            let mut by_key: HashMap<u32, Vec<usize>> = HashMap::new();
            for x in 0..net.inputs.len() {
                if net.inputs[x].role.index() == r && !shared_input[x] {
                    by_key.entry(keys[x][g]).or_default().push(x);
                }
            }
            let mut names: HashMap<String, usize> = HashMap::new();
            for x in 0..net.inputs.len() {
                if net.inputs[x].role.index() != r || shared_input[x] {
                    continue;
                }
                let k = keys[x][g];
                let f = *key_input.entry(k).or_insert_with(|| {
                    let key = &key_list[g][k as usize];
                    let mut name = key_name(net, &parsed, &by_key[&k]);
                    let seen = names.entry(name.clone()).or_insert(0);
                    *seen += 1;
                    if *seen > 1 {
                        name = format!("({name} {})", *seen);
                    }
                    let legal: Vec<NodeId> = key.2.iter().chain(&key.1).copied().collect();
                    factor_inputs.push((r, name, legal));
                    inputs.push(FactorInput::Projection {
                        role: r,
                        whole: Vec::new(),
                    });
                    inputs.len() as u32 - 1
                });
                if let FactorInput::Projection { whole, .. } = &mut inputs[f as usize] {
                    whole.push(x as u32);
                }
                input_of[x] = Some(f);
            }
            for x in 0..net.inputs.len() {
                if net.inputs[x].role.index() == r && shared_input[x] {
                    factor_inputs.push((r, net.inputs[x].name.clone(), vec![net.inputs[x].legal]));
                    inputs.push(FactorInput::Shared { whole: x as u32 });
                    input_of[x] = Some(inputs.len() as u32 - 1);
                }
            }
        }
        for x in 0..net.inputs.len() {
            move_map[x].push(input_of[x].expect("every input has a factor input"));
        }
        let mut c = Copier {
            net,
            cones,
            nodes: Vec::new(),
            memo: vec![u32::MAX; net.nodes.len()],
            replaced: HashMap::new(),
            base_index,
            input_of: input_of.clone(),
            sets,
            input_node: vec![None; factor_inputs.len()],
        };
        let mut fnet_bases = Vec::with_capacity(bases.len());
        for &b in &bases {
            let base = &net.bases[b as usize];
            let next = c.copy(base.next);
            fnet_bases.push(BaseProp {
                name: base.name.clone(),
                init: base.init,
                next,
            });
        }
        let mut fnet_inputs = Vec::with_capacity(factor_inputs.len());
        for (r, name, legal) in &factor_inputs {
            let legal = if let [single] = legal.as_slice() {
                c.copy(*single)
            } else {
                c.and(legal)
            };
            fnet_inputs.push(InputProp {
                role: net
                    .inputs
                    .iter()
                    .find(|i| i.role.index() == *r)
                    .map(|i| i.role)
                    .expect("a role with inputs"),
                name: name.clone(),
                legal,
            });
        }
        let project = |rel: &Relation| rel.project(g, &atoms).unwrap_or(Relation::Const(false));
        let terminal_rel = project(&terminal);
        let fterminal = c.relation(&terminal_rel, &atoms);
        let mut fgoals = Vec::with_capacity(net.goals.len());
        for (goal, rel) in net.goals.iter().zip(&goals) {
            let node = c.relation(&project(rel), &atoms);
            fgoals.push(GoalProp {
                role: goal.role,
                value: goal.value,
                node,
            });
        }
        let mut views = Vec::new();
        for (a, atom) in atoms.iter_mut().enumerate() {
            if atom.factor.is_none_or(|f| f == g) {
                let node = c.copy(atom.node);
                atom.views.push(Some(views.len() as u32));
                views.push((format!("(atom {a})"), node));
            } else {
                atom.views.push(None);
            }
        }
        let fnet = Propnet {
            roles: net.roles.clone(),
            nodes: c.nodes,
            bases: fnet_bases,
            constant_facts: net.constant_facts.clone(),
            inputs: fnet_inputs,
            goals: fgoals,
            terminal: fterminal,
            views,
            ..Propnet::default()
        };
        fnet.verify().map_err(|e| Obstacle::Internal(e.to_string()))?;
        let program = net::order(&fnet);
        program
            .validate()
            .map_err(|e| Obstacle::Internal(format!("factor {g}: {e}")))?;
        factors.push(Factor {
            own_bases: bases
                .iter()
                .filter(|&&b| group_of_base[b as usize].is_some())
                .count(),
            bases,
            inputs,
            program,
        });
    }
    Ok(Factoring {
        factors,
        shared_bases: (0..net.bases.len() as u32)
            .filter(|&b| group_of_base[b as usize].is_none())
            .collect(),
        atoms,
        terminal,
        goals,
        move_map,
        shared_inputs: shared_input,
    })
}
