//! Optimization passes. Each is a forward sweep that rebuilds the arena, so operands stay
//! before their readers; each keeps the game's legal, goal, terminal and next functions as
//! they were (the differential test in `tests/interp.rs` runs nets before and after side by side).

use super::factor::{factor_groups, Bodies};
use super::intern::Interner;
use super::{NetStats, Node, NodeId, Propnet};
use rustc_hash::FxHashMap;
use std::convert::Infallible;
use std::fmt;
use std::time::{Duration, Instant};

/// One optimization pass.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Pass {
    /// Propagates constants through gates.
    ConstantFolding,
    /// Replaces single-operand and/or gates by their operand and double negations by the node.
    Collapse,
    /// Merges structurally identical gates (operands as a sorted set), so each function of
    /// the same operands is computed once.
    Merge,
    /// Factors an operand shared by several ands under an or: `(a ∧ b) ∨ (a ∧ c)` becomes
    /// `a ∧ (b ∨ c)`.
    Factor,
    /// Exactly one input of each role holds in every joint move, so an or over more than half
    /// of a role's inputs is the negation of the or over the others.
    ExclusiveInputs,
    /// Rewrites the net as ands over signed operands and back: gates equal up to De Morgan's
    /// laws (`¬a ∧ ¬b` and `¬(a ∨ b)`) become one, an and that only ands read hands them its
    /// operands where that saves a gate, and each gate is computed as itself or as its negation
    /// (the dual gate over the negated operands), whichever leaves fewer nodes read negated:
    /// each of those costs a `not`.
    Polarity,
    /// Removes inputs whose legal is constantly false and bases that can never change (their
    /// next is themselves, or the constant they start with).
    Propositions,
    /// Removes nodes that no output reads.
    DeadNodes,
    /// Once, after the rounds, on a large net: runs of operands that several wide ors share
    /// become ors of their own that those ors read, and pairs of operands that several ands
    /// share ands of their own (`src/net/extract.rs`).
    Extract,
    /// Once, last, on a large net: a gate that reads every operand of an earlier gate of its
    /// kind reads that gate instead (`src/net/subsets.rs`).
    Subsets,
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pass::ConstantFolding => "constant folding",
            Pass::Collapse => "collapse",
            Pass::Merge => "merge",
            Pass::Factor => "factor",
            Pass::ExclusiveInputs => "exclusive inputs",
            Pass::Polarity => "polarity",
            Pass::Propositions => "propositions",
            Pass::DeadNodes => "dead nodes",
            Pass::Extract => "extract",
            Pass::Subsets => "subsets",
        })
    }
}

/// The net's size after one pass.
#[derive(Clone, Debug)]
pub struct PassReport {
    /// The pass.
    pub pass: Pass,
    /// Which round of the pass pipeline (from 1).
    pub round: u32,
    /// Statistics after the pass, all but the depth ([`NetStats::counts`]).
    pub stats: NetStats,
    /// How long the pass took.
    pub time: Duration,
}

/// The passes of one round, in order.
/// Nets with at least this many nodes run polarity again in a later round only if the net has
/// changed by at least one component in [`POLARITY_AGAIN_SHARE`] since polarity last ran.
const POLARITY_AGAIN_NODES: usize = 100_000;
const POLARITY_AGAIN_SHARE: usize = 1_000;

const ROUND: [Pass; 8] = [
    // Dead nodes first: the builder leaves whole unrolled rounds that no output reads, and
    // every later pass is cheaper without them. Polarity rebuilds only what the outputs read,
    // so the round needs no dead-node pass after it.
    Pass::DeadNodes,
    Pass::ConstantFolding,
    Pass::Collapse,
    Pass::Merge,
    Pass::Factor,
    Pass::ExclusiveInputs,
    Pass::Propositions,
    Pass::Polarity,
];

impl Pass {
    /// Whether running the pass on its own result changes nothing: it completes its work in
    /// one sweep. Factoring can expose more factoring, and a base that becomes constant can
    /// make another one constant, so those two are not.
    fn idempotent(self) -> bool {
        !matches!(self, Pass::Factor | Pass::Propositions)
    }

    /// The other passes that find nothing to do on this pass's result, whatever the net it
    /// started from. Polarity writes only what the outputs read (dead nodes), drops constant
    /// operands and folds gates they decide (constant folding), writes a one-operand and as
    /// its operand and never negates a negation (collapse), and hash-conses its ands over
    /// sorted, distinct signed operands, so that two gates it writes with the same kind and
    /// operands come from the same and (merge).
    fn leaves_done(self) -> &'static [Pass] {
        match self {
            Pass::Polarity => &[
                Pass::DeadNodes,
                Pass::ConstantFolding,
                Pass::Collapse,
                Pass::Merge,
            ],
            _ => &[],
        }
    }

    /// The passes whose fixpoint this pass keeps: removing unread nodes makes no two gates
    /// equal and keeps operands in order, so a net with no gates to merge still has none.
    fn preserves(self) -> &'static [Pass] {
        match self {
            Pass::DeadNodes => &[Pass::Merge],
            _ => &[],
        }
    }
}

/// Runs the passes in rounds until a round changes nothing (at most `max_rounds`). A pass is
/// skipped when the net is as it left it: an idempotent pass that ran last round and after
/// which no pass changed the net would find nothing to do.
pub fn optimize(net: Propnet, max_rounds: u32) -> (Propnet, Vec<PassReport>) {
    let (net, reports) = rounds(net, max_rounds, false);
    (without_gone_views(net), reports)
}

/// As [`optimize`], for a net as [`super::build`] makes it, whose gates are hash-consed as they
/// are built (no two alike, operands sorted): the first round's merge, which would find
/// nothing, is skipped (chess: a rewrite of 785,000 components).
pub fn optimize_built(net: Propnet, max_rounds: u32) -> (Propnet, Vec<PassReport>) {
    let (net, reports) = rounds(net, max_rounds, true);
    (without_gone_views(net), reports)
}

/// As [`optimize_built`], for a net from [`super::build::build_unnamed`]: the views whose node
/// the passes removed keep their places ([`GONE_VIEW`]), so that
/// [`super::build::ViewNames::name`] finds every view where the builder put it.
pub(crate) fn optimize_unnamed(net: Propnet, max_rounds: u32) -> (Propnet, Vec<PassReport>) {
    rounds(net, max_rounds, true)
}

/// The rounds of passes and the extraction after them; the views the passes removed keep their
/// places ([`GONE_VIEW`]).
fn rounds(mut net: Propnet, max_rounds: u32, merged: bool) -> (Propnet, Vec<PassReport>) {
    let mut reports = Vec::new();
    // A pass changed the net when it changed a count; the depth is not computed.
    let mut stats = counts(&net);
    // How many pass runs have changed the net, and that number when each pass last left the
    // net at a fixpoint of its own.
    let mut changes = 0u32;
    // Whether every node of the net is read by some output, as a pass that writes only those
    // left it; then polarity need not look for the others.
    let mut all_live = false;
    let mut fixpoint_at: Vec<(Pass, u32)> = if merged {
        vec![(Pass::Merge, 0)]
    } else {
        Vec::new()
    };
    let mut last_round = 0;
    // The components the net had when polarity last left it.
    let mut polarity_left: Option<usize> = None;
    // How many readers each node of the net has, when the pass that wrote the net counted
    // them (polarity) and no pass has rewritten it since; the factor pass needs them.
    let mut known_readers: Option<Vec<u32>> = None;
    for round in 1..=max_rounds {
        last_round = round;
        let changes_before = changes;
        // Factoring trades gates for operands, so a later round can end with more components
        // than it began with; then the net as the round found it is the result. It is kept
        // as the first pass of the round that rewrites the net finds it: most later rounds
        // rewrite nothing, and a copy of the net is a million small vectors on the largest
        // games (linesOfAction: about 90 ms to copy and 120 ms to free, under load), so the
        // copy keeps the operands of all gates in one vector ([`Snapshot`]).
        let mut start_of_round: Option<Snapshot> = None;
        let stats_of_round = stats.clone();
        for pass in ROUND {
            if fixpoint_at.contains(&(pass, changes)) {
                continue;
            }
            // On a large net, polarity (a rebuild of every gate) is not run again for changes
            // that moved few components since it last ran: on chess, exclusive inputs rewrites
            // two ors again in round 2, and a second polarity took 147 ms to remove 256 of
            // 406,509 gates.
            if pass == Pass::Polarity && round > 1 && net.nodes.len() >= POLARITY_AGAIN_NODES {
                if let Some(last) = polarity_left {
                    if stats.components().abs_diff(last) * POLARITY_AGAIN_SHARE < last {
                        continue;
                    }
                }
            }
            let start = Instant::now();
            // Whether the pass rewrote the net; one that did not returned it as it was, and
            // its statistics are those it had.
            let mut rewrote = false;
            let copy = round > 1 && start_of_round.is_none();
            net = run_with(
                net,
                pass,
                copy,
                all_live,
                &mut known_readers,
                &mut |n: &Propnet, made: Option<Snapshot>| {
                    rewrote = true;
                    if copy {
                        start_of_round = Some(made.unwrap_or_else(|| Snapshot::of(n)));
                    }
                },
            );
            // The dead-node pass, factor (which ends with it) and polarity leave only nodes
            // that some output reads; any other pass that rewrote the net may have left others.
            if matches!(pass, Pass::DeadNodes | Pass::Factor | Pass::Polarity) {
                all_live = true;
            } else if rewrote {
                all_live = false;
            }
            let time = start.elapsed();
            let after = if rewrote { counts(&net) } else { stats.clone() };
            if pass == Pass::Polarity {
                polarity_left = Some(after.components());
            }
            let changed = after != stats;
            let kept: Vec<Pass> = pass
                .preserves()
                .iter()
                .copied()
                .filter(|&p| fixpoint_at.contains(&(p, changes)))
                .collect();
            if changed {
                changes += 1;
                stats = after.clone();
            }
            fixpoint_at.retain(|&(p, _)| p != pass && !pass.leaves_done().contains(&p));
            fixpoint_at.extend(kept.into_iter().map(|p| (p, changes)));
            if !changed || pass.idempotent() {
                fixpoint_at.push((pass, changes));
            }
            fixpoint_at.extend(pass.leaves_done().iter().map(|&p| (p, changes)));
            reports.push(PassReport {
                pass,
                round,
                stats: after,
                time,
            });
        }
        if changes == changes_before {
            break;
        }
        if let Some(kept) = start_of_round {
            if stats.components() > stats_of_round.components() {
                net = kept.restore(net);
                break;
            }
        }
    }
    // Extraction adds gates to take operands away, which the rounds would count as growth
    // and polarity would partly undo by flattening, so it runs once, after them. Then each
    // gate reads the gates whose operands it all reads: last, since it only changes operands,
    // which the rounds would take apart again (polarity flattens an and into the ands that
    // read it).
    for pass in [Pass::Extract, Pass::Subsets] {
        let start = Instant::now();
        let mut rewrote = false;
        net = run_with(net, pass, false, all_live, &mut known_readers, &mut |_, _| {
            rewrote = true
        });
        if rewrote {
            reports.push(PassReport {
                pass,
                round: last_round,
                stats: counts(&net),
                time: start.elapsed(),
            });
        }
    }
    (net, reports)
}

/// The node of a view that the passes have removed. Within [`optimize`] such a view keeps its
/// place in [`Propnet::views`], which the passes never reorder, so that the list keeps its
/// length and a round's copy ([`Snapshot`]) need not copy the views' names: chess has 945,440
/// of them, and cloning and freeing them took a tenth of its optimize phase (rounds 2 to 4).
/// They are dropped once, when the passes end, or when the views are named
/// ([`optimize_unnamed`]).
pub(super) const GONE_VIEW: NodeId = NodeId(u32::MAX);

/// [`NetStats::counts`] of `net`, counting only the views the passes have not removed
/// ([`GONE_VIEW`]). On a large net the views are counted on a second thread meanwhile.
fn counts(net: &Propnet) -> NetStats {
    let live_views = |net: &Propnet| net.views.iter().filter(|&&(_, id)| id != GONE_VIEW).count();
    let (mut stats, views) = if net.views.len() < COUNT_BESIDE {
        (NetStats::counts(net), live_views(net))
    } else {
        std::thread::scope(|s| {
            let views = s.spawn(|| live_views(net));
            let stats = NetStats::counts(net);
            // A panic of the helper is a bug of this function; it is passed on.
            (
                stats,
                views.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            )
        })
    };
    stats.views = views;
    stats
}

/// Below this many views, [`counts`] counts them on its own thread: starting a second costs
/// more than that.
const COUNT_BESIDE: usize = 1 << 16;

/// A copy of a net, kept in case a round must be undone. The gates' operands are in one
/// vector: a copy with one small vector per gate cost half a million allocations on
/// alexChess, for a copy that is nearly always dropped unused. The views' names are not
/// copied: the passes keep every view in its place ([`GONE_VIEW`]), so the net the round
/// ends with has the same names in the same order.
struct Snapshot {
    /// The net without its nodes and views.
    rest: Propnet,
    /// The node of each view.
    view_ids: Vec<NodeId>,
    /// The nodes, each and and or without its operands.
    shells: Vec<Node>,
    /// The operands of the ands and ors, in the order of the nodes.
    ops: Vec<NodeId>,
    /// How many operands each and and or has, in the order of the nodes.
    lens: Vec<u32>,
}

impl Snapshot {
    fn of(net: &Propnet) -> Snapshot {
        let mut nodes = NodesCopy::room_for(net);
        nodes.copy(net);
        Snapshot::with_nodes(net, nodes)
    }

    /// The copy of `net` whose nodes `nodes` holds.
    fn with_nodes(net: &Propnet, nodes: NodesCopy) -> Snapshot {
        let NodesCopy { shells, ops, lens } = nodes;
        let Propnet {
            roles,
            nodes: _,
            bases,
            constant_facts,
            inputs,
            goals,
            terminal,
            views,
            opaque,
            demand,
            feedback,
            loops,
        } = net;
        let rest = Propnet {
            roles: roles.clone(),
            nodes: Vec::new(),
            bases: bases.clone(),
            constant_facts: constant_facts.clone(),
            inputs: inputs.clone(),
            goals: goals.clone(),
            terminal: *terminal,
            views: Vec::new(),
            opaque: opaque.clone(),
            demand: demand.clone(),
            feedback: feedback.clone(),
            loops: loops.clone(),
        };
        Snapshot {
            rest,
            view_ids: views.iter().map(|&(_, id)| id).collect(),
            shells,
            ops,
            lens,
        }
    }

    /// The net as it was copied, with the views' names taken from `now`, the net it became,
    /// whose views are those of the copy, in the same order ([`GONE_VIEW`]).
    fn restore(self, now: Propnet) -> Propnet {
        let Snapshot {
            mut rest,
            view_ids,
            mut shells,
            ops,
            lens,
        } = self;
        assert_eq!(
            now.views.len(),
            view_ids.len(),
            "the passes keep every view in its place"
        );
        rest.views = now
            .views
            .into_iter()
            .zip(view_ids)
            .map(|((name, _), id)| (name, id))
            .collect();
        let (mut start, mut len) = (0, lens.into_iter());
        for node in &mut shells {
            if let Node::And(x) | Node::Or(x) = node {
                let end = start + len.next().expect("a length per gate") as usize;
                x.extend_from_slice(&ops[start..end]);
                start = end;
            }
        }
        rest.nodes = shells;
        rest
    }
}

/// The nodes of a [`Snapshot`].
struct NodesCopy {
    shells: Vec<Node>,
    ops: Vec<NodeId>,
    lens: Vec<u32>,
}

impl NodesCopy {
    /// Empty vectors that hold the nodes of `net` exactly. Made apart from [`NodesCopy::copy`]
    /// so that a second thread can copy the nodes into vectors the caller's thread allocated:
    /// what a thread allocates comes from a pool of the allocator's own for that thread, which
    /// the main thread's later allocations cannot reuse (alexChess: 25 MB more at the peak
    /// when the copying thread allocated them).
    fn room_for(net: &Propnet) -> NodesCopy {
        let (mut gates, mut edges) = (0, 0);
        for node in &net.nodes {
            if let Node::And(x) | Node::Or(x) = node {
                gates += 1;
                edges += x.len();
            }
        }
        NodesCopy {
            shells: Vec::with_capacity(net.nodes.len()),
            ops: Vec::with_capacity(edges),
            lens: Vec::with_capacity(gates),
        }
    }

    /// Copies the nodes of `net` into the vectors [`NodesCopy::room_for`] made for them, which
    /// need not grow: each and and or as a shell without operands, its operands and their count.
    fn copy(&mut self, net: &Propnet) {
        let NodesCopy { shells, ops, lens } = self;
        let mut keep = |x: &[NodeId]| {
            ops.extend_from_slice(x);
            lens.push(u32::try_from(x.len()).expect("fewer than 2^32 operands"));
            super::Operands::new()
        };
        shells.extend(net.nodes.iter().map(|node| match node {
            Node::And(x) => Node::And(keep(x)),
            Node::Or(x) => Node::Or(keep(x)),
            other => other.clone(),
        }));
    }
}

/// Frees `garbage` on a thread of its own when it holds many nodes, so that the pass goes on
/// meanwhile: a net of half a million gates is as many small vectors, and freeing them took
/// about a tenth of each polarity pass on alexChess. Nothing waits for the thread; a small
/// net is freed at once, since starting a thread costs more than that.
pub(super) fn free_aside(garbage: Vec<Node>) {
    if garbage.len() < 1 << 16 {
        return;
    }
    // If the thread cannot start, the closure, and the nodes with it, are dropped here.
    let _ = std::thread::Builder::new()
        .name("free nodes".into())
        .spawn(move || drop(garbage));
}

/// Runs one pass (the tests run passes one at a time).
#[cfg(test)]
pub(super) fn run(net: Propnet, pass: Pass) -> Propnet {
    without_gone_views(run_with(net, pass, false, false, &mut None, &mut |_, _| {}))
}

/// `net` without the views the passes removed ([`GONE_VIEW`]), as [`optimize`] returns it.
fn without_gone_views(mut net: Propnet) -> Propnet {
    net.views.retain(|&(_, id)| id != GONE_VIEW);
    net
}

/// Below this many nodes, the factor pass copies the net for the round (`run_with`'s
/// `copy`) after its scan rather than beside it: starting a thread costs more than that.
const COPY_BESIDE: usize = 1 << 16;

/// Runs one pass, calling `before_rewrite` with the net just before the pass starts to rewrite
/// it; a pass that finds nothing to do returns the net it was given without calling it. With
/// `copy` (the caller will copy the net it is given, [`Snapshot`]), the pass may make that
/// copy itself on a second thread while it reads the net, and then hands it over with the net.
/// `all_live` says that some output reads every node of `net`. `known` holds how
/// many readers each node of `net` has ([`readers`]) if the pass that wrote `net` counted them
/// (polarity, which sets it); every pass takes it, and the factor pass uses it.
fn run_with(
    net: Propnet,
    pass: Pass,
    copy: bool,
    all_live: bool,
    known: &mut Option<Vec<u32>>,
    before_rewrite: &mut dyn FnMut(&Propnet, Option<Snapshot>),
) -> Propnet {
    let known_readers = known.take();
    let flags = match pass {
        // On the large games the net as built has nothing to fold or collapse (alexChess:
        // about 80 ms of rewriting 800,000 gates as they were); a scan that writes nothing
        // tells.
        Pass::ConstantFolding if !rewrites_something(&net, Pass::ConstantFolding) => return net,
        Pass::ConstantFolding => Flags {
            fold: true,
            ..Flags::default()
        },
        Pass::Collapse if !rewrites_something(&net, Pass::Collapse) => return net,
        Pass::Collapse => Flags {
            collapse: true,
            ..Flags::default()
        },
        Pass::Merge => Flags {
            merge: true,
            ..Flags::default()
        },
        // A round after the first usually finds nothing to factor (racer4: 225 ms of
        // rewriting the net as it was); a scan that writes nothing tells, and tells the
        // rewriter where the first or to factor is.
        Pass::Factor => {
            // In a round after the first, the factor pass is the first to rewrite the net
            // (what polarity left is a fixpoint of the passes before it), so the round's copy
            // is made here: on a second thread while the scan reads the net (alexChess: about
            // 12 ms each for the copy and the scan in rounds 2 and 3, idle).
            let mut nodes = (copy && net.nodes.len() >= COPY_BESIDE).then(|| NodesCopy::room_for(&net));
            let (readers, first) = std::thread::scope(|s| {
                let net = &net;
                let copying = nodes.as_mut().map(|nodes| s.spawn(move || nodes.copy(net)));
                let readers = match known_readers {
                    Some(known) => {
                        debug_assert!(known == readers(net), "polarity counted other readers");
                        known
                    }
                    None => readers(net),
                };
                let first = first_to_factor(net, &readers);
                if let Some(h) = copying {
                    // A panic of the helper is a bug of `NodesCopy::copy`; it is passed on.
                    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
                }
                (readers, first)
            });
            // The rest of the copy (the views' names among it) is made on this thread, and
            // only if the pass rewrites the net.
            let mut made = nodes
                .filter(|_| first.is_some())
                .map(|nodes| Snapshot::with_nodes(&net, nodes));
            let Some(first) = first else {
                if all_live {
                    return net;
                }
                return dead_nodes(net, &mut |n| before_rewrite(n, made.take()));
            };
            before_rewrite(&net, made);
            let mut rewriter = Rewriter::new(
                &net,
                Flags {
                    factor: true,
                    ..Flags::default()
                },
            );
            rewriter.factor_from = Some(first);
            rewriter.keep_before = Some(first);
            rewriter.fanout = Some(readers);
            // The rewriter writes each and before it meets the or that reads it, so the ands
            // that factoring replaces stay behind with no reader: over a million of them on
            // the largest games (racer4: 642,000 components became 1.9 million, 668,000 of
            // them live), which made the size reported after this pass meaningless and every
            // later pass of the round slower.
            // When every node of `net` was needed, the pass knows which ones it left with no
            // reader (`Rewriter::killed`), and the sweep that would look for them is left out.
            // Then the dead ands are dropped before the outputs and views are moved to the new
            // arena, so that they are moved once, through both maps: chess has 945,440 views,
            // each a load at random from the map, and moving them twice per factor pass was
            // about a tenth of it.
            let (old, mut nodes, map, killed) = rewriter.run_unmapped(net);
            return match killed {
                Some(killed) if all_live => {
                    let mut live = vec![true; nodes.len()];
                    for k in killed {
                        live[k.index()] = false;
                    }
                    debug_assert!(
                        live == live_of(&nodes, old.outputs().map(|id| map[id.index()])),
                        "the factor pass killed other nodes"
                    );
                    match compact(&mut nodes, &live) {
                        Some(kept) => remap(old, nodes, |id| kept_at(&kept, map[id.index()])),
                        None => remap(old, nodes, |id| Some(map[id.index()])),
                    }
                }
                _ => dead_nodes(remap(old, nodes, |id| Some(map[id.index()])), &mut |_| {}),
            };
        }
        // Most rounds find no or to rewrite; then the pass is the net as it was, without the
        // cost of rebuilding it.
        Pass::ExclusiveInputs => {
            let Some(first) = first_exclusive(&net) else {
                return net;
            };
            before_rewrite(&net, None);
            let mut rewriter = Rewriter::new(
                &net,
                Flags {
                    exclusive: true,
                    ..Flags::default()
                },
            );
            rewriter.keep_before = Some(first);
            return rewriter.run(net);
        }
        Pass::Polarity => {
            before_rewrite(&net, None);
            let (net, readers) = super::signed::signs(net, all_live);
            *known = Some(readers);
            return net;
        }
        Pass::Propositions => return propositions(net, &mut |n| before_rewrite(n, None)),
        Pass::DeadNodes => return dead_nodes(net, &mut |n| before_rewrite(n, None)),
        Pass::Extract => {
            let (out, changed) = super::extract::extract(net, super::extract::MIN_NODES);
            if changed {
                before_rewrite(&out, None);
            }
            return out;
        }
        Pass::Subsets => {
            let (out, changed) =
                super::subsets::substitute(net, super::subsets::MIN_NODES, super::subsets::MIN_FANIN);
            if changed {
                before_rewrite(&out, None);
            }
            return out;
        }
    };
    before_rewrite(&net, None);
    Rewriter::new(&net, flags).run(net)
}

/// The net folded (`Pass::ConstantFolding`) or collapsed (`Pass::Collapse`) by the rewriter,
/// without the scan that returns the net as it is when there is nothing to do.
#[cfg(test)]
pub(super) fn rewrite_anyway(net: Propnet, pass: Pass) -> (bool, Propnet) {
    let flags = Flags {
        fold: pass == Pass::ConstantFolding,
        collapse: pass == Pass::Collapse,
        ..Flags::default()
    };
    (
        rewrites_something(&net, pass),
        without_gone_views(Rewriter::new(&net, flags).run(net)),
    )
}

/// The factor pass trying every or, without the scan's answer ([`first_to_factor`]).
#[cfg(test)]
pub(super) fn factor_every_or(net: Propnet) -> Propnet {
    let flags = Flags {
        factor: true,
        ..Flags::default()
    };
    without_gone_views(dead_nodes(Rewriter::new(&net, flags).run(net), &mut |_| {}))
}

/// The factor pass told that every node of `net` is needed, as the pipeline tells it after a
/// pass that leaves only those: it then removes the ands it took without looking for dead
/// nodes.
#[cfg(test)]
pub(super) fn factor_all_live(net: Propnet) -> Propnet {
    without_gone_views(run_with(
        net,
        Pass::Factor,
        false,
        true,
        &mut None,
        &mut |_, _| {},
    ))
}

/// The exclusive-inputs pass rewriting from the first node on, without its scan's answer
/// ([`first_exclusive`]); `net` as it is if the scan finds nothing.
#[cfg(test)]
pub(super) fn exclusive_every_or(net: Propnet) -> Propnet {
    if first_exclusive(&net).is_none() {
        return net;
    }
    let flags = Flags {
        exclusive: true,
        ..Flags::default()
    };
    without_gone_views(Rewriter::new(&net, flags).run(net))
}

/// Whether the rewriter, folding constants (`Pass::ConstantFolding`) or collapsing
/// (`Pass::Collapse`), would write anything but `net` as it is. It writes each node once, as
/// it was, unless the node is a leaf it has already written (it shares them), or a gate the
/// pass simplifies: for folding, a gate that reads a constant or an and or or of no operand;
/// for collapsing, an and or or of one operand or a negated negation.
fn rewrites_something(net: &Propnet, pass: Pass) -> bool {
    let mut leaves = rustc_hash::FxHashSet::default();
    let is_const = |x: &NodeId| matches!(net.nodes[x.index()], Node::Const(_));
    net.nodes.iter().any(|node| match node {
        Node::And(ops) | Node::Or(ops) => match pass {
            Pass::ConstantFolding => ops.is_empty() || ops.iter().any(is_const),
            _ => ops.len() == 1,
        },
        Node::Not(x) => match pass {
            Pass::ConstantFolding => is_const(x),
            _ => matches!(net.nodes[x.index()], Node::Not(_)),
        },
        leaf => !leaves.insert(leaf),
    })
}

/// The first node of `net` that is an or the factor pass would rewrite in `net` as it is:
/// an or of one operand (written as its operand), or one with a group of the ands it alone
/// reads that pays ([`factor_groups`]), `readers` counting the readers of each node
/// ([`readers`]); `None` if there is none. Until it meets that or, the rewriter writes every
/// node as it was, so it need not try the ors before it again (see [`Rewriter::run`]).
fn first_to_factor(net: &Propnet, readers: &[u32]) -> Option<usize> {
    let mut bodies = Bodies::default();
    net.nodes.iter().position(|node| {
        let Node::Or(ops) = node else { return false };
        // The pass writes an or of one operand as its operand.
        if ops.len() == 1 {
            return true;
        }
        bodies.ops.clear();
        bodies.ends.clear();
        for op in ops {
            if let (Node::And(inner), 0..=1) = (&net.nodes[op.index()], readers[op.index()]) {
                bodies.ops.extend_from_slice(inner);
                bodies.close();
            }
        }
        // A group whose residual is empty writes no node, only the shared operand. Fewer
        // than two ands make no group.
        bodies.len() >= 2
            && !matches!(factor_groups(&mut bodies, &mut |_| Err(())), Ok(groups) if groups.is_empty())
    })
}

/// The first or of `net` that reads more than half of one role's inputs, which is what
/// [`Rewriter::exclusive_inputs`] rewrites (counted as it counts them, repeats included);
/// `None` if there is none.
fn first_exclusive(net: &Propnet) -> Option<usize> {
    let mut role_size = vec![0usize; net.roles.len()];
    for i in &net.inputs {
        role_size[i.role.0 as usize] += 1;
    }
    let fewest = fewest_inputs(&role_size);
    let mut present = vec![0usize; net.roles.len()];
    net.nodes.iter().position(|node| {
        let Node::Or(ops) = node else { return false };
        // An or of fewer operands than that cannot read more than half of a role's inputs
        // (chess: every or but a few), and its operands need not be looked up, each a
        // node read at random.
        if ops.len() * 2 <= fewest.saturating_add(1) {
            return false;
        }
        present.fill(0);
        for op in ops {
            if let Node::Input(i) = net.nodes[op.index()] {
                present[net.inputs[i as usize].role.0 as usize] += 1;
            }
        }
        present.iter().zip(&role_size).any(|(&p, &all)| p * 2 > all + 1)
    })
}

/// The fewest inputs a role has, among the roles that have any (`sizes` gives each role's
/// count): an or of at most half as many operands reads at most half of every role's inputs.
/// `usize::MAX` when no role has an input.
fn fewest_inputs(sizes: &[usize]) -> usize {
    sizes
        .iter()
        .copied()
        .filter(|&n| n > 0)
        .min()
        .unwrap_or(usize::MAX)
}

#[derive(Copy, Clone, Default)]
struct Flags {
    fold: bool,
    collapse: bool,
    merge: bool,
    factor: bool,
    exclusive: bool,
}

/// Rebuilds a net node by node, simplifying as the flags say. The old nodes are moved, not
/// copied, into the new arena.
struct Rewriter {
    flags: Flags,
    nodes: Vec<Node>,
    /// Constants and propositions, always shared.
    leaves: FxHashMap<Node, NodeId>,
    /// Gates by their content, when merging: the table holds node ids, hashed by the content
    /// they point to.
    gates: Interner,
    /// What each old node became.
    map: Vec<NodeId>,
    /// What base and input propositions become, when not themselves.
    replace: FxHashMap<Node, Node>,
    /// The role of each input, and each role's inputs.
    input_role: Vec<u32>,
    role_inputs: Vec<Vec<u32>>,
    /// The fewest inputs of a role that has any ([`fewest_inputs`]).
    fewest_inputs: usize,
    /// How many readers (gates of the old net, and outputs) each new node has gained so far.
    /// Factoring rewrites an and only when the or being factored is its one reader, so the
    /// and dies and the net does not grow.
    uses: Vec<u32>,
    /// The factor pass's buffers: which operands of the or are ands it may take, and their
    /// operands.
    taken: Vec<usize>,
    bodies: Bodies,
    /// For the factor pass, the first old node that is an or it would rewrite in the net as
    /// it was ([`first_to_factor`]); `None` when every or is tried.
    factor_from: Option<usize>,
    /// Whether the or being written must be tried for factoring: it is `factor_from` or
    /// later, or it reads a node that the pass wrote otherwise than as it was.
    try_factor: bool,
    /// Whether the last or tried was written otherwise than as it was.
    factored: bool,
    /// The first old node the pass may write otherwise than as it was, as its scan found it
    /// (the first or to factor, or to rewrite for exclusive inputs); the nodes before it stay
    /// where they are (`keep_prefix`).
    keep_before: Option<usize>,
    /// The readers of each old node ([`readers`]), when the caller has counted them.
    fanout: Option<Vec<u32>>,
    /// The ands that factoring took into a group, which lost their one reader, the or; `None`
    /// once a group took an and of one operand (or none), after which other nodes may have
    /// lost their readers too (a group with an empty residual drops the other ands' operands).
    killed: Option<Vec<NodeId>>,
}

impl Rewriter {
    fn new(old: &Propnet, flags: Flags) -> Rewriter {
        let input_role: Vec<u32> = old.inputs.iter().map(|i| i.role.0).collect();
        let mut role_inputs = vec![Vec::new(); old.roles.len()];
        for (i, &r) in input_role.iter().enumerate() {
            role_inputs[r as usize].push(i as u32);
        }
        Rewriter {
            flags,
            nodes: Vec::with_capacity(with_room(old.nodes.len())),
            leaves: FxHashMap::default(),
            // Sized for the old net at once when merging: growing a table of millions of gates
            // step by step rehashes it several times.
            gates: Interner::with_capacity(if flags.merge { old.nodes.len() } else { 0 }),
            map: Vec::with_capacity(old.nodes.len()),
            replace: FxHashMap::default(),
            fewest_inputs: fewest_inputs(&role_inputs.iter().map(Vec::len).collect::<Vec<_>>()),
            input_role,
            role_inputs,
            uses: Vec::with_capacity(with_room(old.nodes.len())),
            taken: Vec::new(),
            bodies: Bodies::default(),
            factor_from: None,
            try_factor: true,
            factored: false,
            keep_before: None,
            fanout: None,
            killed: Some(Vec::new()),
        }
    }

    /// Adds a node. Constants and propositions are always shared; gates only when merging.
    fn add(&mut self, node: Node) -> NodeId {
        let id = NodeId::from_index(self.nodes.len());
        if !node.is_gate() {
            if let Some(&found) = self.leaves.get(&node) {
                return found;
            }
            self.leaves.insert(node.clone(), id);
        } else if self.flags.merge {
            let hash = gate_hash(&node);
            let nodes = &self.nodes;
            let found = self.gates.find_or_insert(
                hash,
                id.0,
                |g| nodes[g as usize] == node,
                |g| gate_hash(&nodes[g as usize]),
            );
            if let Some(found) = found {
                return NodeId(found);
            }
        }
        self.nodes.push(node);
        self.uses.push(0);
        id
    }

    fn constant(&mut self, b: bool) -> NodeId {
        self.add(Node::Const(b))
    }

    fn as_const(&self, id: NodeId) -> Option<bool> {
        match self.nodes[id.index()] {
            Node::Const(b) => Some(b),
            _ => None,
        }
    }

    fn simplify(&mut self, node: Node) -> NodeId {
        match node {
            Node::And(ops) => self.junction(ops, true),
            Node::Or(ops) => self.junction(ops, false),
            Node::Not(x) => {
                if self.flags.fold {
                    if let Some(b) = self.as_const(x) {
                        return self.constant(!b);
                    }
                }
                if self.flags.collapse {
                    if let Node::Not(y) = self.nodes[x.index()] {
                        return y;
                    }
                }
                self.add(Node::Not(x))
            }
            other => {
                let other = self.replace.get(&other).cloned().unwrap_or(other);
                self.add(other)
            }
        }
    }

    /// An and (`is_and`) or an or over `ops`.
    fn junction(&mut self, mut ops: super::Operands, is_and: bool) -> NodeId {
        // For an and, true operands are neutral and a false one decides; for an or, the reverse.
        if self.flags.fold {
            let mut decided = false;
            ops.retain(|x| match self.as_const(*x) {
                Some(b) if b == is_and => false,
                Some(_) => {
                    decided = true;
                    true
                }
                None => true,
            });
            if decided {
                return self.constant(!is_and);
            }
            if ops.is_empty() {
                return self.constant(is_and);
            }
        }
        if self.flags.merge {
            ops.sort_unstable();
            ops.dedup();
        }
        if !is_and && self.flags.exclusive {
            ops = self.exclusive_inputs(ops);
        }
        if !is_and && self.flags.factor {
            if !self.try_factor {
                // As the scan met it, and no group paid.
                return self.add(Node::Or(ops));
            }
            return self.factor(ops);
        }
        if self.flags.collapse && ops.len() == 1 {
            return ops[0];
        }
        self.add(if is_and { Node::And(ops) } else { Node::Or(ops) })
    }

    /// The or over `ops` with operands shared by several of its and operands factored out
    /// ([`factor_groups`]); only the ands that this or alone reads are taken, since others
    /// would stay for their other readers and the net would grow. The ands a group takes die
    /// with their one reader, and the dead-node sweep after the pass removes them.
    fn factor(&mut self, ops: super::Operands) -> NodeId {
        // Buffers kept from one or to the next: the pass meets up to a million ors, most of
        // which have fewer than two ands to take and are written as they are, in the vector
        // they came in.
        let mut taken = std::mem::take(&mut self.taken);
        let mut bodies = std::mem::take(&mut self.bodies);
        taken.clear();
        bodies.ops.clear();
        bodies.ends.clear();
        for (k, &op) in ops.iter().enumerate() {
            if self.uses[op.index()] > 1 {
                continue;
            }
            if let Node::And(inner) = &self.nodes[op.index()] {
                taken.push(k);
                bodies.ops.extend_from_slice(inner);
                bodies.close();
            }
        }
        let factored = if bodies.len() < 2 {
            None
        } else {
            match factor_groups(&mut bodies, &mut |node| Ok::<_, Infallible>(self.add(node))) {
                Ok(groups) => bodies.used().contains(&true).then_some(groups),
                Err(never) => match never {},
            }
        };
        self.factored = factored.is_some() || ops.len() == 1;
        let or = match factored {
            // No group: the or as it was.
            None if ops.len() == 1 => ops[0],
            None => self.add(Node::Or(ops)),
            Some(mut out) => {
                let mut took = vec![false; ops.len()];
                for (&k, &used) in taken.iter().zip(bodies.used()) {
                    took[k] = used;
                    if used {
                        let one = matches!(&self.nodes[ops[k].index()], Node::And(x) if x.len() <= 1);
                        match &mut self.killed {
                            Some(_) if one => self.killed = None,
                            Some(killed) => killed.push(ops[k]),
                            None => {}
                        }
                    }
                }
                out.extend(ops.iter().zip(&took).filter(|(_, &t)| !t).map(|(&op, _)| op));
                if out.len() == 1 {
                    out[0]
                } else {
                    self.add(Node::Or(out.into()))
                }
            }
        };
        self.taken = taken;
        self.bodies = bodies;
        or
    }

    /// Replaces the inputs of one role among `ops` by the negated or of that role's other
    /// inputs, where that is fewer operands.
    fn exclusive_inputs(&mut self, ops: super::Operands) -> super::Operands {
        if ops.len() * 2 <= self.fewest_inputs.saturating_add(1) {
            // Too few operands to read more than half of any role's inputs.
            return ops;
        }
        let mut by_role: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for &op in &ops {
            if let Node::Input(i) = self.nodes[op.index()] {
                by_role.entry(self.input_role[i as usize]).or_default().push(i);
            }
        }
        let mut out = ops;
        for (role, present) in by_role {
            let all = self.role_inputs[role as usize].clone();
            if present.len() * 2 <= all.len() + 1 {
                continue;
            }
            let present: rustc_hash::FxHashSet<u32> = present.into_iter().collect();
            out.retain(|x| !matches!(self.nodes[x.index()], Node::Input(i) if present.contains(&i)));
            let others: Vec<NodeId> = all
                .iter()
                .filter(|i| !present.contains(i))
                .map(|&i| self.add(Node::Input(i)))
                .collect();
            let or = match others.len() {
                0 => self.constant(false),
                1 => others[0],
                _ => self.add(Node::Or(others.into())),
            };
            let not = self.add(Node::Not(or));
            out.push(not);
        }
        out
    }

    fn run(self, old: Propnet) -> Propnet {
        let (old, nodes, map, _) = self.run_unmapped(old);
        remap(old, nodes, |id| Some(map[id.index()]))
    }

    /// [`Rewriter::run`] before the outputs and views are moved to the new arena: `old`
    /// without its nodes, the new nodes, what each old node became, and the nodes of the new
    /// net that the pass left without the reader they had in `old` ([`Rewriter::killed`]), if
    /// it knows them all.
    #[allow(clippy::type_complexity)]
    fn run_unmapped(mut self, mut old: Propnet) -> (Propnet, Vec<Node>, Vec<NodeId>, Option<Vec<NodeId>>) {
        let fanout = match self.fanout.take() {
            Some(fanout) => fanout,
            None => readers(&old),
        };
        let mut nodes = std::mem::take(&mut old.nodes);
        // Merging alone writes each gate over its mapped operands, sorted and without repeats
        // (`junction`); then the table slots of a batch of gates whose operands are all done
        // are loaded before the first of them is hash-consed ([`Interner::touch`]).
        let touch = self.flags.merge
            && !(self.flags.fold || self.flags.collapse || self.flags.factor || self.flags.exclusive);
        let mut scratch: Vec<NodeId> = Vec::new();
        let mut hashes: Vec<u64> = Vec::with_capacity(BATCH);
        // With the factor scan's first or: which old nodes the pass wrote otherwise than as
        // they were (an or factored or written as its one operand, a leaf met twice), or over
        // an operand so written. The others are written as they were, in the same order, so
        // an or before the first that reads none of those meets the ands the scan met, with
        // their operands renumbered in order (which keeps [`factor_groups`]' ties), each read
        // by as many nodes as the scan counted where that matters (an and that only the or
        // reads: what the pass writes as one of its operands reads it through the or or
        // through another reader); the scan found no group there, and it needs no second try.
        let from = self.factor_from.take();
        let len = nodes.len();
        let mut changed: Vec<bool> = if from.is_some() {
            vec![false; len]
        } else {
            Vec::new()
        };
        // The nodes before the first or to rewrite are written as they were, so they stay
        // where they are (`keep_prefix`), and the sweep starts at that or: it used to move
        // them one by one into a new arena, over half of the net in every round on the
        // large games, to write them unchanged.
        let (start, mut nodes) = match self.keep_before.take() {
            Some(keep) if self.replace.is_empty() => match self.keep_prefix(&mut nodes, keep, &fanout) {
                Some(rest) => (keep, rest),
                None => (0, nodes),
            },
            _ => (0, nodes),
        };
        for i in start..len {
            if touch && i % BATCH == 0 {
                hashes.clear();
                for node in &nodes[i - start..(i + BATCH).min(len) - start] {
                    let (kind, ops) = match node {
                        Node::And(ops) => (GateKind::And, &ops[..]),
                        Node::Or(ops) => (GateKind::Or, &ops[..]),
                        Node::Not(x) => (GateKind::Not, std::slice::from_ref(x)),
                        _ => continue,
                    };
                    if ops.iter().all(|o| o.index() < i) {
                        scratch.clear();
                        scratch.extend(ops.iter().map(|o| self.map[o.index()]));
                        scratch.sort_unstable();
                        scratch.dedup();
                        hashes.push(hash_of(kind, &scratch));
                    }
                }
                self.gates.touch(&hashes);
            }
            let mut node = std::mem::replace(&mut nodes[i - start], Node::Const(false));
            let reads_changed = from.is_some() && node.operands().iter().any(|o| changed[o.index()]);
            if let Some(from) = from {
                self.try_factor = i >= from || reads_changed;
                self.factored = false;
            }
            let written = self.nodes.len();
            match &mut node {
                Node::And(ops) | Node::Or(ops) => {
                    for o in ops.iter_mut() {
                        *o = self.map[o.index()];
                    }
                }
                Node::Not(x) => *x = self.map[x.index()],
                _ => {}
            }
            let id = self.simplify(node);
            if from.is_some() {
                changed[i] = reads_changed
                    || self.factored
                    || id.index() != written
                    || self.nodes.len() != written + 1;
            }
            self.uses[id.index()] = self.uses[id.index()].saturating_add(fanout[i]);
            self.map.push(id);
        }
        (old, self.nodes, self.map, self.killed)
    }

    /// Makes `nodes[..from]` the start of the new arena, each node written as it was, and
    /// returns the nodes after them, if the pass writes every one of them as it was. The
    /// factor pass tries no or before `from` (its scan found none there to rewrite, and none
    /// reads a node the pass changed, there being none before), the exclusive-inputs pass
    /// meets no or there that reads more than half of a role's inputs, and both write every
    /// other gate as it is, without merging, folding or collapsing; they share leaves, so
    /// that only a leaf met twice would be written otherwise. `None`, with nothing done, if
    /// one is.
    fn keep_prefix(&mut self, nodes: &mut Vec<Node>, from: usize, fanout: &[u32]) -> Option<Vec<Node>> {
        let f = self.flags;
        if f.fold || f.collapse || f.merge || !self.nodes.is_empty() {
            return None;
        }
        let mut leaves = FxHashMap::default();
        for (i, node) in nodes[..from].iter().enumerate() {
            if !node.is_gate() && leaves.insert(node.clone(), NodeId::from_index(i)).is_some() {
                return None;
            }
        }
        let rest = nodes.split_off(from);
        self.leaves = leaves;
        self.nodes = std::mem::take(nodes);
        self.map.extend((0..from).map(NodeId::from_index));
        // What `add` and the sweep would have counted: each node's readers in the old net.
        self.uses.extend_from_slice(&fanout[..from]);
        Some(rest)
    }
}

/// The capacity to allocate for an arena that is rewritten from one of `len` nodes. The factor
/// pass writes every old node and then the nodes of its groups, so its arena outgrows the
/// old one: grown by doubling, its nodes (32 bytes each) and their counts of readers were
/// copied once more (chess: about 5 % of the optimize phase, copies and page faults). The
/// room beyond what is written is never touched, so it costs address space, not memory.
pub(super) fn with_room(len: usize) -> usize {
    len + len / 2
}

/// How many readers each node of `net` has: gates and outputs (saturating).
fn readers(net: &Propnet) -> Vec<u32> {
    let mut readers = vec![0u32; net.nodes.len()];
    for node in &net.nodes {
        for op in node.operands() {
            readers[op.index()] = readers[op.index()].saturating_add(1);
        }
    }
    for id in net.outputs() {
        readers[id.index()] = readers[id.index()].saturating_add(1);
    }
    readers
}

/// How many gates the merge pass takes at a time when it loads their table slots ahead.
const BATCH: usize = 16;

#[derive(Copy, Clone)]
enum GateKind {
    And,
    Or,
    Not,
}

/// The hash of a gate by its kind and operands (a `not` has one), as the merge pass hashes it.
fn gate_hash(node: &Node) -> u64 {
    match node {
        Node::And(ops) => hash_of(GateKind::And, ops),
        Node::Or(ops) => hash_of(GateKind::Or, ops),
        Node::Not(x) => hash_of(GateKind::Not, std::slice::from_ref(x)),
        _ => unreachable!("only gates are hashed"),
    }
}

fn hash_of(kind: GateKind, ops: &[NodeId]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
    let mut h = BuildHasherDefault::<rustc_hash::FxHasher>::default().build_hasher();
    (kind as u8).hash(&mut h);
    ops.hash(&mut h);
    h.finish()
}

/// The net `old` (its nodes already taken) with the arena `nodes`, outputs and views moved
/// through `map`; a view whose node is gone keeps its place, with the node [`GONE_VIEW`].
fn remap(old: Propnet, nodes: Vec<Node>, map: impl Fn(NodeId) -> Option<NodeId>) -> Propnet {
    let must = |id: NodeId| map(id).expect("every output survives");
    let Propnet {
        roles,
        mut bases,
        constant_facts,
        mut inputs,
        mut goals,
        terminal,
        views,
        opaque,
        mut feedback,
        loops,
        ..
    } = old;
    for b in &mut bases {
        b.next = must(b.next);
    }
    for f in &mut feedback {
        *f = must(*f);
    }
    for i in &mut inputs {
        i.legal = must(i.legal);
    }
    for g in &mut goals {
        g.node = must(g.node);
    }
    Propnet {
        roles,
        nodes,
        bases,
        constant_facts,
        inputs,
        goals,
        terminal: must(terminal),
        views: views
            .into_iter()
            .map(|(name, id)| {
                let to = if id == GONE_VIEW { None } else { map(id) };
                (name, to.unwrap_or(GONE_VIEW))
            })
            .collect(),
        opaque,
        // The demand is added after the passes (`add_demand`).
        demand: Vec::new(),
        feedback,
        loops,
    }
}

/// Drops inputs that can never be legal and bases that never change, then renumbers.
fn propositions(net: Propnet, before_rewrite: &mut dyn FnMut(&Propnet)) -> Propnet {
    let is_const = |id: NodeId| match net.nodes[id.index()] {
        Node::Const(b) => Some(b),
        _ => None,
    };
    let keep_input: Vec<bool> = net
        .inputs
        .iter()
        .map(|i| is_const(i.legal) != Some(false))
        .collect();
    // A base keeps its initial value forever if its next is itself or that value.
    let fixed: Vec<Option<bool>> = net
        .bases
        .iter()
        .enumerate()
        .map(|(b, base)| {
            let stays = match net.nodes[base.next.index()] {
                Node::Base(x) => x as usize == b,
                Node::Const(v) => v == base.init,
                _ => false,
            };
            stays.then_some(base.init)
        })
        .collect();
    if keep_input.iter().all(|&k| k) && fixed.iter().all(|f| f.is_none()) {
        return net;
    }
    before_rewrite(&net);
    let mut rw = Rewriter::new(&net, Flags::default());
    let mut constant_facts = net.constant_facts.clone();
    let mut kept_bases = 0u32;
    for (b, base) in net.bases.iter().enumerate() {
        let to = match fixed[b] {
            Some(v) => {
                if v {
                    constant_facts.push(base.name.clone());
                }
                Node::Const(v)
            }
            None => {
                kept_bases += 1;
                Node::Base(kept_bases - 1)
            }
        };
        rw.replace.insert(Node::Base(b as u32), to);
    }
    let mut kept_inputs = 0u32;
    for (i, keep) in keep_input.iter().enumerate() {
        let to = if *keep {
            kept_inputs += 1;
            Node::Input(kept_inputs - 1)
        } else {
            Node::Const(false)
        };
        rw.replace.insert(Node::Input(i as u32), to);
    }
    constant_facts.sort();
    let mut out = rw.run(net);
    // `remap` kept every old base and input; keep only the survivors, with their new nodes.
    let mut b = 0;
    out.bases.retain(|_| {
        b += 1;
        fixed[b - 1].is_none()
    });
    let mut i = 0;
    out.inputs.retain(|_| {
        i += 1;
        keep_input[i - 1]
    });
    out.constant_facts = constant_facts;
    out
}

/// Which nodes some output reads, directly or not. Operands come before their readers, so
/// one sweep from the last node back finds them all.
pub(super) fn live_nodes(net: &Propnet) -> Vec<bool> {
    live_of(&net.nodes, net.outputs())
}

/// Which of `nodes` the `outputs` read, directly or not ([`live_nodes`]).
fn live_of(nodes: &[Node], outputs: impl Iterator<Item = NodeId>) -> Vec<bool> {
    let mut live = vec![false; nodes.len()];
    for id in outputs {
        live[id.index()] = true;
    }
    for i in (0..nodes.len()).rev() {
        if live[i] {
            for op in nodes[i].operands() {
                live[op.index()] = true;
            }
        }
    }
    live
}

/// Keeps only the nodes some output reads, directly or not.
fn dead_nodes(net: Propnet, before_rewrite: &mut dyn FnMut(&Propnet)) -> Propnet {
    let live = live_nodes(&net);
    dead_nodes_of(net, live, before_rewrite)
}

/// Keeps only the nodes `live` marks, which are those some output reads ([`live_nodes`]).
fn dead_nodes_of(mut net: Propnet, live: Vec<bool>, before_rewrite: &mut dyn FnMut(&Propnet)) -> Propnet {
    let Some(first_dead) = live.iter().position(|&l| !l) else {
        return net;
    };
    before_rewrite(&net);
    let mut nodes = std::mem::take(&mut net.nodes);
    let map = compact_from(&mut nodes, &live, first_dead);
    remap(net, nodes, |id| kept_at(&map, id))
}

/// What a node that [`compact`] dropped becomes.
const DROPPED: NodeId = NodeId(u32::MAX);

/// The node that `id` became in [`compact`]'s `map`, `None` if it was dropped.
fn kept_at(map: &[NodeId], id: NodeId) -> Option<NodeId> {
    Some(map[id.index()]).filter(|&n| n != DROPPED)
}

/// Keeps only the nodes `live` marks (those some output reads, [`live_nodes`]), in their
/// order, and returns what each node became ([`DROPPED`] for the others); `None`, with
/// nothing done, if every node is live.
fn compact(nodes: &mut Vec<Node>, live: &[bool]) -> Option<Vec<NodeId>> {
    let first_dead = live.iter().position(|&l| !l)?;
    Some(compact_from(nodes, live, first_dead))
}

/// [`compact`], `first_dead` being the first node that `live` does not mark.
fn compact_from(nodes: &mut Vec<Node>, live: &[bool], first_dead: usize) -> Vec<NodeId> {
    // The nodes before the first dead one stay as they are, where they are: after the factor
    // pass, which keeps the nodes before its first factored or in place, that is often half
    // of the net.
    let mut map: Vec<NodeId> = (0..first_dead).map(NodeId::from_index).collect();
    map.resize(nodes.len(), DROPPED);
    // The live nodes are moved to the front of the arena they are in, in their order; a new
    // arena for them was half a million fresh slots to fault in on the largest games.
    let mut kept = first_dead;
    for i in first_dead..nodes.len() {
        if !live[i] {
            continue;
        }
        match &mut nodes[i] {
            Node::And(ops) | Node::Or(ops) => {
                for o in ops.iter_mut() {
                    *o = map[o.index()];
                }
            }
            Node::Not(x) => *x = map[x.index()],
            _ => {}
        }
        map[i] = NodeId::from_index(kept);
        nodes.swap(kept, i);
        kept += 1;
    }
    // The dead nodes, freed aside: after factoring, the ands it replaced.
    free_aside(nodes.split_off(kept));
    map
}

#[cfg(test)]
mod tests {
    use super::{Node, NodeId, Propnet, Snapshot, GONE_VIEW};
    use crate::net::{BaseProp, GoalProp, InputProp};
    use propjet_runtime::RoleIdx;

    /// A net with every kind of node, gates of no, one and several operands among them.
    fn net() -> Propnet {
        let n = NodeId;
        Propnet {
            roles: vec!["a".into()],
            nodes: vec![
                Node::Const(true),
                Node::Base(0),
                Node::Input(0),
                Node::And(smallvec::smallvec![n(1), n(2)]),
                Node::Or(smallvec::smallvec![]),
                Node::Not(n(3)),
                Node::Or(smallvec::smallvec![n(0), n(3), n(5)]),
                Node::And(smallvec::smallvec![n(6)]),
            ],
            bases: vec![BaseProp {
                name: "p".into(),
                init: true,
                next: n(7),
            }],
            inputs: vec![InputProp {
                role: RoleIdx(0),
                name: "go".into(),
                legal: n(5),
            }],
            goals: vec![GoalProp {
                role: RoleIdx(0),
                value: 100,
                node: n(4),
            }],
            terminal: n(6),
            views: vec![("v".into(), n(3))],
            ..Propnet::default()
        }
    }

    #[test]
    fn a_snapshot_restores_the_net_it_copied() {
        let net = net();
        let restored = Snapshot::of(&net).restore(net.clone());
        assert_eq!(format!("{restored:?}"), format!("{net:?}"));
    }

    /// A round's copy keeps no names: it takes them from the net the round ended with, in
    /// which a view whose node the round removed keeps its place with no node.
    #[test]
    fn a_snapshot_restores_the_views_the_round_removed() {
        let mut net = net();
        net.views.push(("w".into(), NodeId(6)));
        let copy = Snapshot::of(&net);
        let mut now = net.clone();
        now.nodes.truncate(4);
        now.views[1].1 = GONE_VIEW;
        let restored = copy.restore(now);
        assert_eq!(format!("{restored:?}"), format!("{net:?}"));
    }
}
