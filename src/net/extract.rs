//! Extraction of operand runs that several wide gates share (`doc/propnet.md`, "Extraction").
//!
//! After the passes, the largest nets have many wide ors that read nearly the same operands:
//! chess's check tests are ors over the attack atoms of one square, one for every pair of the
//! square a piece leaves and the square it captures on, each missing or adding a few operands.
//! Every operand is an instruction of the native code and a step of the interpreter, so an
//! operand set computed once as a gate of its own and read by each of those ors is cheaper to
//! compile and to run.
//!
//! The pass finds the shared parts by content-defined chunking: each gate's operands, in the
//! order of their node numbers, are cut after every operand whose hash falls in one bucket of
//! [`CUT`], so that a run of operands that two gates both read is cut into the same chunks in
//! both, wherever it starts, and a gate that misses or adds an operand changes only the chunk
//! around it. A chunk that several gates of the same kind read becomes one symbol, and the
//! same is done again on the gates' lists of symbols with another hash ([`LEVELS`] times), so
//! that longer shared runs become chunks of chunks. At the end a symbol read once, or one that
//! saves too little for the gate it costs, is written back into its readers, and each symbol
//! left is a new gate (or, when its operands are all of some gate's, that gate itself), written
//! just before its first reader. It is linear in the operands, up to the hash tables.
//!
//! The ands are too narrow for chunks (most have two to four operands), but many share pairs:
//! the same piece on one square and the same empty square are asked by many moves. After the
//! chunking levels, every pair of operands of every and of up to [`PAIR_MAX_LEN`] operands is
//! counted, and each and takes disjoint pairs that enough ands share, the most shared first,
//! each a symbol like a chunk's (Re-Pair's replacement of frequent pairs, one round of it).
//!
//! Each gate keeps its function: a gate is the same and (or) of the same operands, some of
//! which are now read through an and (or) of a part of them.

use super::intern::Interner;
use super::{Node, NodeId, Propnet};

/// Nets with fewer nodes are left as they are: extraction adds gates, and the small games'
/// component counts are compared with published ones (`doc/propnet.md`, "Counting
/// components"), while the time it saves is in the large nets.
pub(super) const MIN_NODES: usize = 100_000;

/// Gates with fewer operands take no part.
const MIN_FANIN: usize = 4;

/// How many times the gates' lists are chunked.
const LEVELS: u32 = 4;

/// One symbol in `CUT` (by its hash; a power of two) ends a chunk.
const CUT: u64 = 4;

/// A symbol is kept as a gate when its readers would otherwise read more than this many
/// operands more: `(readers - 1) * (operands - 1) > GATE_COST`. A gate costs more than an
/// operand in the native code (its value is stored and loaded again); on chess 2 rather than 1
/// keeps 17,000 gates fewer for 40,000 operands more.
const GATE_COST: usize = 2;

/// A pair of symbols becomes a gate of its own only if this many lists choose it (a gate of
/// two operands read by `r` gates saves `r - 1` operands: `(r - 1) * 1 > GATE_COST`).
const PAIR_MIN: usize = GATE_COST + 2;

/// Ands of more operands take no part in the pairs: an and of `l` operands has `l(l - 1) / 2`
/// pairs, and on chess all but four ands have eight or fewer.
const PAIR_MAX_LEN: usize = 8;

/// The pass goes on only if the first level takes away one in `MIN_SAVED` of the operands.
/// Chess's first level takes away 24 % since its check test's pawn, knight and king parts are
/// one gate per call (`ground::project::split_partly_irrelevant`), and the levels after it
/// still take the program from 426,623 to 399,800 gates and 1,763,169 to 1,374,261 operands.
const MIN_SAVED: usize = 5;

const NONE: u32 = u32::MAX;

/// The net with the shared chunks of its wide ors and the shared pairs of its ands extracted,
/// and whether it changed. A net under `min_nodes` nodes ([`MIN_NODES`] in the pipeline) is
/// returned as it is.
pub(super) fn extract(net: Propnet, min_nodes: usize) -> (Propnet, bool) {
    if net.nodes.len() < min_nodes {
        return (net, false);
    }
    let n = net.nodes.len();
    assert!(n < (NONE / 2) as usize, "too many nodes to extract");
    // The nets that gain are those whose operands are mostly in wide ors (chess 72 %,
    // comp2006_argentina 74 %); in the others (alexChess 31 %, racer4 36 %) the first level
    // finds little, and a count of operands costs less than the lists it would build.
    let (mut wide, mut all) = (0, 0);
    for node in &net.nodes {
        match node {
            Node::Or(ops) if ops.len() >= MIN_FANIN => wide += ops.len(),
            _ => all += node.operands().len(),
        }
    }
    if wide < all {
        return (net, false);
    }
    let mut lists = Lists::of(&net);
    if lists.gates.is_empty() {
        return (net, false);
    }
    let mut made = Made::default();
    for level in 0..LEVELS {
        let before = lists.syms.len();
        if !chunk_level(&mut lists, &mut made, n as u32, level) {
            break;
        }
        // Where the first level takes away few operands, the others take fewer still, and the
        // pass would cost more than it saves (alexChess: 1 % of its wide ors' operands).
        if level == 0 && (before - lists.syms.len()) * MIN_SAVED < before {
            return (net, false);
        }
    }
    and_pairs(&net, &mut lists, &mut made);
    if made.kinds.is_empty() && !lists.aliased {
        return (net, false);
    }
    let net = finish(net, &lists, &made);
    (net, true)
}

/// The net with the lists' symbols that pay written as gates, and the candidates over their
/// lists.
fn finish(net: Propnet, lists: &Lists, made: &Made) -> Propnet {
    let n = net.nodes.len();
    // Which candidate gate, if any, each node is, among those whose lists changed: a list
    // that took a symbol is shorter than the gate's operands, and the others (on chess 32,000
    // of the 342,000 candidates, wide ors that took no chunk) are written as the nodes they
    // are, in their own vectors.
    let mut candidate = vec![NONE; n];
    for (c, &g) in lists.gates.iter().enumerate() {
        if lists.list(c).len() != net.nodes[g as usize].operands().len() {
            candidate[g as usize] = c as u32;
        }
    }
    let inlined = choose_inlined(lists, made, n as u32);
    emit(net, lists, made, &inlined, &candidate)
}

/// The net with only the ands' shared pairs extracted, whatever its size and its ors, and
/// whether it changed: the tests check that step alone.
#[cfg(test)]
pub(super) fn and_pairs_only(net: Propnet) -> (Propnet, bool) {
    let mut lists = Lists::empty();
    let mut made = Made::default();
    if !and_pairs(&net, &mut lists, &mut made) {
        return (net, false);
    }
    (finish(net, &lists, &made), true)
}

/// The candidate gates and their current lists of symbols, all in one vector. A symbol below
/// the net's node count is a node; one above is `n + i` for made symbol `i`.
struct Lists {
    /// The node of each candidate gate: the ors in arena order, then the ands that took a
    /// pair ([`and_pairs`]) in arena order.
    gates: Vec<u32>,
    /// Whether each is an or.
    is_or: Vec<bool>,
    /// Candidate `c`'s list is `syms[starts[c]..starts[c + 1]]`.
    starts: Vec<u32>,
    syms: Vec<u32>,
    /// Whether some chunk was found to be the whole list of a gate and read by others.
    aliased: bool,
}

impl Lists {
    /// No candidates yet.
    fn empty() -> Lists {
        Lists {
            gates: Vec::new(),
            is_or: Vec::new(),
            starts: vec![0],
            syms: Vec::new(),
            aliased: false,
        }
    }

    fn of(net: &Propnet) -> Lists {
        let mut lists = Lists::empty();
        for (i, node) in net.nodes.iter().enumerate() {
            // Only ors are chunked: on chess the ands' shared runs saved 27,000 operands more
            // for 8,000 gates more, and took a third of the pass's time. Ands, most of two to
            // four operands, share pairs instead ([`and_pairs`]), and join the lists after the
            // chunking if they take one.
            let (ops, or) = match node {
                Node::Or(ops) => (ops, true),
                _ => continue,
            };
            if ops.len() < MIN_FANIN {
                continue;
            }
            lists.gates.push(i as u32);
            lists.is_or.push(or);
            // The passes leave operands sorted and distinct; chunking needs them in one order
            // in every gate.
            let at = lists.syms.len();
            lists.syms.extend(ops.iter().map(|o| o.0));
            lists.syms[at..].sort_unstable();
            lists.starts.push(lists.syms.len() as u32);
        }
        lists
    }

    fn list(&self, c: usize) -> &[u32] {
        &self.syms[self.starts[c] as usize..self.starts[c + 1] as usize]
    }
}

/// The symbols made for shared chunks: kind and list, in the order they were made (a symbol's
/// list holds only symbols made before it).
#[derive(Default)]
struct Made {
    kinds: Vec<bool>,
    starts: Vec<u32>,
    syms: Vec<u32>,
}

impl Made {
    fn list(&self, i: usize) -> &[u32] {
        &self.syms[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

fn mix(x: u64) -> u64 {
    // A 64-bit finalizer: every input bit reaches every output bit.
    let mut x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

fn hash_chunk(or: bool, chunk: &[u32]) -> u64 {
    let mut h = or as u64 + 1;
    for &s in chunk {
        h = mix(h ^ (s as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    }
    h
}

/// A chunk met while counting: its kind, where it was first met and how often.
struct Chunk {
    or: bool,
    start: u32,
    len: u32,
    count: u32,
    /// The candidate whose whole list the chunk is, or `NONE`.
    whole: u32,
}

/// Calls `f(from, to)` for each chunk `list[from..to]` of `list`, in order: a chunk ends after
/// each symbol `ends` picks and at the end of the list. Counting the chunks and replacing them
/// go through this one function, so that both see the same chunks (the replacement reads the
/// counting's findings in order).
#[inline(always)]
fn for_each_chunk(list: &[u32], ends: impl Fn(u32) -> bool, mut f: impl FnMut(usize, usize)) {
    let mut from = 0;
    for (i, &s) in list.iter().enumerate() {
        if ends(s) || i + 1 == list.len() {
            f(from, i + 1);
            from = i + 1;
        }
    }
}

/// One level of chunking: counts the chunks of every list and replaces each chunk that two or
/// more lists share by its symbol. Whether any was replaced.
fn chunk_level(lists: &mut Lists, made: &mut Made, n: u32, level: u32) -> bool {
    let seed = mix(0x5eed + level as u64);
    let ends = |s: u32| mix(s as u64 ^ seed) & (CUT - 1) == 0;
    let mut chunks: Vec<Chunk> = Vec::new();
    // For each chunk of two or more symbols met, in order, the index of its `Chunk`, or `NONE`
    // when another chunk had the same hash.
    let mut met: Vec<u32> = Vec::new();
    let mut table = Interner::with_capacity(lists.syms.len() / (2 * CUT as usize));
    let mut hashes: Vec<u64> = Vec::new();
    // The chunks of a batch of gates (gate, start, end in `lists.syms`, hash): their slots of
    // the table are loaded together before they are looked up, so that the waits for memory
    // overlap (the table is larger than the cache on the large nets).
    let mut batch: Vec<(u32, u32, u32, u64)> = Vec::new();
    let mut batch_hashes: Vec<u64> = Vec::new();
    let gates = lists.gates.len();
    let mut c = 0;
    while c < gates {
        batch.clear();
        batch_hashes.clear();
        while c < gates && batch.len() < 32 {
            let base = lists.starts[c] as usize;
            let list = lists.list(c);
            let or = lists.is_or[c];
            for_each_chunk(list, ends, |from, to| {
                if to - from >= 2 {
                    let h = hash_chunk(or, &list[from..to]);
                    batch.push((c as u32, (base + from) as u32, (base + to) as u32, h));
                    batch_hashes.push(h);
                }
            });
            c += 1;
        }
        table.touch(&batch_hashes);
        for &(c, start, end, h) in &batch {
            let c = c as usize;
            let or = lists.is_or[c];
            let syms = &lists.syms;
            let chunk = &syms[start as usize..end as usize];
            let next = chunks.len() as u32;
            let found = table.find_or_insert(
                h,
                next,
                |k| {
                    let k = &chunks[k as usize];
                    k.or == or && &syms[k.start as usize..(k.start + k.len) as usize] == chunk
                },
                |k| hashes[k as usize],
            );
            let whole = if start == lists.starts[c] && end == lists.starts[c + 1] {
                c as u32
            } else {
                NONE
            };
            match found {
                Some(k) => {
                    let k_chunk = &mut chunks[k as usize];
                    k_chunk.count += 1;
                    if k_chunk.whole == NONE {
                        k_chunk.whole = whole;
                    }
                    met.push(k);
                }
                None => {
                    chunks.push(Chunk {
                        or,
                        start,
                        len: end - start,
                        count: 1,
                        whole,
                    });
                    hashes.push(h);
                    met.push(next);
                }
            }
        }
    }
    // The symbol of each shared chunk, made in the order the chunks were first met (a small
    // table read in the sweep below, where the chunks themselves are scattered).
    let mut sym_of = vec![NONE; chunks.len()];
    let mut aliased = false;
    for (k, kc) in chunks.iter().enumerate() {
        if kc.count < 2 {
            continue;
        }
        sym_of[k] = if kc.whole != NONE {
            aliased = true;
            lists.gates[kc.whole as usize]
        } else {
            made.kinds.push(kc.or);
            if made.starts.is_empty() {
                made.starts.push(0);
            }
            let from = kc.start as usize;
            made.syms
                .extend_from_slice(&lists.syms[from..from + kc.len as usize]);
            made.starts.push(made.syms.len() as u32);
            n + made.kinds.len() as u32 - 1
        };
    }
    if sym_of.iter().all(|&s| s == NONE) {
        return false;
    }
    drop(chunks);
    // The lists again, each shared chunk replaced by its symbol, but in the gate whose whole
    // list it is.
    let mut syms = Vec::with_capacity(lists.syms.len());
    let mut starts = Vec::with_capacity(lists.starts.len());
    starts.push(0u32);
    let mut met = met.into_iter();
    for c in 0..lists.gates.len() {
        let list = lists.list(c);
        let gate = lists.gates[c];
        for_each_chunk(list, ends, |from, to| {
            let chunk = &list[from..to];
            if chunk.len() < 2 {
                syms.extend_from_slice(chunk);
                return;
            }
            let sym = sym_of[met.next().expect("a chunk met when counting") as usize];
            if sym == NONE || sym == gate {
                syms.extend_from_slice(chunk);
            } else {
                syms.push(sym);
            }
        });
        starts.push(syms.len() as u32);
    }
    lists.syms = syms;
    lists.starts = starts;
    lists.aliased |= aliased;
    true
}

/// The ands' shared pairs: counts the pairs of operands of every and of two to
/// [`PAIR_MAX_LEN`] operands, and in each and of three or more replaces disjoint pairs that
/// [`PAIR_MIN`] or more ands share, the most shared first, by the pair's symbol: a new and of
/// the two, or the and whose whole list the pair is. Each and that takes a pair joins `lists`
/// (after the ors, in arena order). Whether any did.
///
/// The ands are narrow (on chess 187,000 of three operands, 47,000 of four, 118,000 of two),
/// too narrow for chunks, but a move's conditions recur: the same piece on the same square
/// and the same empty square are asked together by many moves. The ands' operands are read
/// where they are, in the net, and only the ands that take a pair are copied into the lists
/// (on chess 228,000 of the 360,000 ands).
fn and_pairs(net: &Propnet, lists: &mut Lists, made: &mut Made) -> bool {
    let n = net.nodes.len() as u32;
    // The ands taken, and where each one's pairs start in `met`, the pairs being met and by
    // and, `(i, j)` with `i < j` in order.
    let mut ands: Vec<u32> = Vec::new();
    let mut first_met: Vec<u32> = Vec::new();
    let mut total = 0u32;
    for (g, node) in net.nodes.iter().enumerate() {
        if let Node::And(ops) = node {
            if (2..=PAIR_MAX_LEN).contains(&ops.len()) {
                ands.push(g as u32);
                first_met.push(total);
                let l = ops.len() as u32;
                total += l * (l - 1) / 2;
            }
        }
    }
    first_met.push(total);
    if total == 0 {
        return false;
    }
    let ops_of = |a: usize| net.nodes[ands[a] as usize].operands();
    let hash_pair = |a: u32, b: u32| mix(0x9a17 ^ (u64::from(a) << 32 | u64::from(b)));
    // The pairs met and how many ands have each, side by side so that a hit reads one place.
    let mut pairs: Vec<[u32; 3]> = Vec::new();
    let mut met: Vec<u32> = Vec::with_capacity(total as usize);
    // Most pairs are met once or twice (chess: 1.06 million met, 417,000 distinct).
    let mut table = Interner::with_capacity(total as usize / 2);
    let mut batch: Vec<(u32, u32, u64)> = Vec::new();
    let mut batch_hashes: Vec<u64> = Vec::new();
    let mut a = 0;
    while a < ands.len() {
        batch.clear();
        batch_hashes.clear();
        while a < ands.len() && batch.len() < 64 {
            // The passes leave operands sorted and distinct.
            let ops = ops_of(a);
            for i in 0..ops.len() {
                for j in i + 1..ops.len() {
                    let h = hash_pair(ops[i].0, ops[j].0);
                    batch.push((ops[i].0, ops[j].0, h));
                    batch_hashes.push(h);
                }
            }
            a += 1;
        }
        table.touch(&batch_hashes);
        for &(x, y, h) in &batch {
            let next = pairs.len() as u32;
            let found = table.find_or_insert(
                h,
                next,
                |k| {
                    let p = &pairs[k as usize];
                    p[0] == x && p[1] == y
                },
                |k| hash_pair(pairs[k as usize][0], pairs[k as usize][1]),
            );
            match found {
                Some(k) => {
                    pairs[k as usize][2] += 1;
                    met.push(k);
                }
                None => {
                    pairs.push([x, y, 1]);
                    met.push(next);
                }
            }
        }
    }
    drop(table);
    let count = |k: usize| pairs[k][2];
    // The and whose whole list each pair is, if any (the passes leave no two ands alike).
    let mut whole = vec![NONE; pairs.len()];
    for (a, &g) in ands.iter().enumerate() {
        if ops_of(a).len() == 2 {
            whole[met[first_met[a] as usize] as usize] = g;
        }
    }
    // Each and's choice: disjoint pairs, the most shared first, among those that could pay
    // for their gate (or are a gate already), as (and, pair, i, j).
    let mut banned = vec![false; pairs.len()];
    let mut chosen: Vec<(u32, u32, u32, u32)> = Vec::new();
    let mut cand: Vec<(u32, u32, u32, u32)> = Vec::new();
    let mut taken: Vec<bool> = Vec::new();
    let choose = |a: usize,
                  banned: &[bool],
                  chosen: &mut Vec<(u32, u32, u32, u32)>,
                  cand: &mut Vec<(u32, u32, u32, u32)>,
                  taken: &mut Vec<bool>| {
        let len = ops_of(a).len();
        let met = &met[first_met[a] as usize..first_met[a + 1] as usize];
        cand.clear();
        let mut m = 0;
        for i in 0..len {
            for j in i + 1..len {
                let k = met[m] as usize;
                m += 1;
                if !banned[k] && (whole[k] != NONE || count(k) as usize >= PAIR_MIN) {
                    cand.push((count(k), k as u32, i as u32, j as u32));
                }
            }
        }
        let most_shared =
            |x: &(u32, u32, u32, u32), y: &(u32, u32, u32, u32)| y.0.cmp(&x.0).then(x.1.cmp(&y.1));
        if len == 3 {
            // Any two pairs of three operands overlap: the most shared is the one taken.
            if let Some(&(_, k, i, j)) = cand.iter().min_by(|x, y| most_shared(x, y)) {
                chosen.push((a as u32, k, i, j));
            }
            return;
        }
        cand.sort_unstable_by(most_shared);
        taken.clear();
        taken.resize(len, false);
        for &(_, k, i, j) in cand.iter() {
            if !taken[i as usize] && !taken[j as usize] {
                taken[i as usize] = true;
                taken[j as usize] = true;
                chosen.push((a as u32, k, i, j));
            }
        }
    };
    for a in 0..ands.len() {
        if ops_of(a).len() >= 3 {
            choose(a, &banned, &mut chosen, &mut cand, &mut taken);
        }
    }
    // A pair that fewer ands chose than would pay for its gate is left out, and the ands that
    // chose it choose again without it.
    let mut uses = vec![0u32; pairs.len()];
    for &(_, k, _, _) in &chosen {
        uses[k as usize] += 1;
    }
    let mut again = false;
    for k in 0..pairs.len() {
        if uses[k] > 0 && whole[k] == NONE && (uses[k] as usize) < PAIR_MIN {
            banned[k] = true;
            again = true;
        }
    }
    if again {
        let old = std::mem::take(&mut chosen);
        let mut at = 0;
        while at < old.len() {
            let a = old[at].0 as usize;
            let mut end = at;
            while end < old.len() && old[end].0 as usize == a {
                end += 1;
            }
            if old[at..end].iter().any(|&(_, k, _, _)| banned[k as usize]) {
                choose(a, &banned, &mut chosen, &mut cand, &mut taken);
            } else {
                chosen.extend_from_slice(&old[at..end]);
            }
            at = end;
        }
        uses.fill(0);
        for &(_, k, _, _) in &chosen {
            uses[k as usize] += 1;
        }
    }
    // The symbol of each pair chosen by two or more ands, or chosen and some and's whole list,
    // in the order the pairs were first met.
    let mut sym_of = vec![NONE; pairs.len()];
    for k in 0..pairs.len() {
        if whole[k] != NONE && uses[k] >= 1 {
            sym_of[k] = whole[k];
            lists.aliased = true;
        } else if uses[k] >= 2 {
            if made.starts.is_empty() {
                made.starts.push(0);
            }
            made.kinds.push(false);
            made.syms.push(pairs[k][0]);
            made.syms.push(pairs[k][1]);
            made.starts.push(made.syms.len() as u32);
            sym_of[k] = n + made.kinds.len() as u32 - 1;
        }
    }
    // Each and that took a symbol, as a list: its symbols, then the operands it reads alone.
    let mut any = false;
    let mut at = 0;
    while at < chosen.len() {
        let a = chosen[at].0 as usize;
        let ops = ops_of(a);
        taken.clear();
        taken.resize(ops.len(), false);
        let from = lists.syms.len();
        while at < chosen.len() && chosen[at].0 as usize == a {
            let (_, k, i, j) = chosen[at];
            at += 1;
            let sym = sym_of[k as usize];
            if sym != NONE {
                taken[i as usize] = true;
                taken[j as usize] = true;
                lists.syms.push(sym);
            }
        }
        if lists.syms.len() == from {
            continue;
        }
        lists
            .syms
            .extend(ops.iter().zip(&taken).filter(|&(_, &t)| !t).map(|(o, _)| o.0));
        lists.gates.push(ands[a]);
        lists.is_or.push(false);
        lists.starts.push(lists.syms.len() as u32);
        any = true;
    }
    any
}

/// Which made symbols are written back into their readers: those read once, and those whose
/// gate would save too few operands. Decided from the last made down, since writing a symbol
/// back gives the symbols in its list more readers.
fn choose_inlined(lists: &Lists, made: &Made, n: u32) -> Vec<bool> {
    let m = made.kinds.len();
    let mut readers = vec![0usize; m];
    let count = |s: u32, times: usize, readers: &mut Vec<usize>| {
        if s >= n {
            readers[(s - n) as usize] += times;
        }
    };
    for &s in &lists.syms {
        count(s, 1, &mut readers);
    }
    for &s in &made.syms {
        count(s, 1, &mut readers);
    }
    let mut inlined = vec![false; m];
    for i in (0..m).rev() {
        let r = readers[i];
        let k = made.list(i).len();
        if r <= 1 || (r - 1) * (k - 1) <= GATE_COST {
            inlined[i] = true;
            for &s in made.list(i) {
                count(s, r.saturating_sub(1), &mut readers);
            }
        }
    }
    inlined
}

/// The new arena: every node as before, the candidates over their lists, and each kept made
/// symbol as a gate, written just before its first reader (and a gate that is some chunk's
/// symbol moved there too, if that reader comes before it).
fn emit(net: Propnet, lists: &Lists, made: &Made, inlined: &[bool], candidate: &[u32]) -> Propnet {
    let n = net.nodes.len() as u32;
    let mut e = Emitter {
        n,
        lists,
        made,
        inlined,
        candidate,
        map: vec![NONE; n as usize + made.kinds.len()],
        nodes: Vec::with_capacity(net.nodes.len() + made.kinds.len()),
        old: net.nodes,
        buf: Vec::new(),
    };
    for i in 0..n {
        if e.map[i as usize] == NONE {
            e.emit(i);
        }
    }
    let Emitter { map, nodes, .. } = e;
    let at = |id: NodeId| NodeId(map[id.index()]);
    let mut net = Propnet { nodes, ..net };
    for b in &mut net.bases {
        b.next = at(b.next);
    }
    for i in &mut net.inputs {
        i.legal = at(i.legal);
    }
    for g in &mut net.goals {
        g.node = at(g.node);
    }
    net.terminal = at(net.terminal);
    for f in &mut net.feedback {
        *f = at(*f);
    }
    for d in &mut net.demand {
        *d = at(*d);
    }
    for v in &mut net.views {
        if v.1 != super::passes::GONE_VIEW {
            v.1 = at(v.1);
        }
    }
    net
}

struct Emitter<'a> {
    n: u32,
    lists: &'a Lists,
    made: &'a Made,
    inlined: &'a [bool],
    candidate: &'a [u32],
    /// The new number of each node and made symbol, `NONE` until it is written.
    map: Vec<u32>,
    nodes: Vec<Node>,
    old: Vec<Node>,
    buf: Vec<u32>,
}

impl Emitter<'_> {
    /// The symbols `list` stands for, with the made symbols written back expanded.
    fn expand(&self, list: &[u32], out: &mut Vec<u32>) {
        for &s in list {
            if s >= self.n && self.inlined[(s - self.n) as usize] {
                self.expand(self.made.list((s - self.n) as usize), out);
            } else {
                out.push(s);
            }
        }
    }

    /// Writes symbol `s` after the symbols it reads that are not written yet.
    fn emit(&mut self, s: u32) {
        let (or, ops) = if s >= self.n {
            let i = (s - self.n) as usize;
            let mut ops = std::mem::take(&mut self.buf);
            ops.clear();
            self.expand(self.made.list(i), &mut ops);
            (self.made.kinds[i], ops)
        } else {
            let c = self.candidate[s as usize];
            if c == NONE {
                // The operands of a node that was not a candidate come before it and are
                // written, unless a reader written early needed this node.
                let pending: Vec<u32> = self.old[s as usize]
                    .operands()
                    .iter()
                    .map(|o| o.0)
                    .filter(|&o| self.map[o as usize] == NONE)
                    .collect();
                for o in pending {
                    self.emit(o);
                }
                let node = std::mem::replace(&mut self.old[s as usize], Node::Const(false));
                let node = match node {
                    Node::And(ops) => Node::And(self.renumbered(ops)),
                    Node::Or(ops) => Node::Or(self.renumbered(ops)),
                    Node::Not(x) => Node::Not(NodeId(self.map[x.index()])),
                    leaf => leaf,
                };
                self.map[s as usize] = self.nodes.len() as u32;
                self.nodes.push(node);
                return;
            }
            let mut ops = std::mem::take(&mut self.buf);
            ops.clear();
            self.expand(self.lists.list(c as usize), &mut ops);
            (self.lists.is_or[c as usize], ops)
        };
        for &o in &ops {
            if self.map[o as usize] == NONE {
                self.emit(o);
            }
        }
        // A candidate's operands, its list written out, are never more than it had, so they go
        // into its old vector: no vector to allocate and none to free for each of them (on
        // chess 310,000). A made symbol is a new vector.
        let mut new = match self
            .old
            .get_mut(s as usize)
            .map(|node| std::mem::replace(node, Node::Const(false)))
        {
            Some(Node::And(v)) | Some(Node::Or(v)) => v,
            _ => super::Operands::new(),
        };
        new.clear();
        new.extend(ops.iter().map(|&o| NodeId(self.map[o as usize])));
        new.sort_unstable();
        self.buf = ops;
        self.map[s as usize] = self.nodes.len() as u32;
        self.nodes.push(if or { Node::Or(new) } else { Node::And(new) });
    }

    fn renumbered(&self, mut ops: super::Operands) -> super::Operands {
        for o in &mut ops {
            *o = NodeId(self.map[o.index()]);
        }
        ops.sort_unstable();
        ops
    }
}
