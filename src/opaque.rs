//! Opaque relations (`doc/opaque.md`) on the compiler's side: choosing which relation to leave
//! opaque when grounding fails, and the evaluator that computes the opaque atoms of a compiled
//! game per state, top down.

use crate::gdl::deps::DepGraph;
use crate::gdl::{Description, Literal};
use crate::ground::{self, GroundError, GroundLimits, GroundOptions, GroundStats, Grounded};
use crate::reference::Reference;
use propjet_runtime::{Opaque, OpaqueError, Program};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;

/// Grounds `desc`; if that fails on a rule the grounder cannot handle (`Unsupported`), tries
/// again with relations left opaque, chosen as `doc/opaque.md` §3 says: the relations nearest
/// the GDL relations, on a path of calls to the relation that failed. Returns the ground program and the opaque relations used (`name/arity`,
/// empty when plain grounding worked), or the first error if no choice works. A game that
/// grounds is grounded exactly once, as without this fallback.
pub fn ground_auto(
    desc: &Description,
    limits: &GroundLimits,
) -> Result<(Grounded, GroundStats, Vec<String>), GroundError> {
    // Only a rule the grounder cannot handle triggers the retry: a game that runs into a limit
    // grounds in principle, and retrying it would spend the budget a second time and change
    // what the slow games of the corpus do.
    let first = match ground::ground_with_stats(desc, limits) {
        Ok((g, stats)) => return Ok((g, stats, Vec::new())),
        Err(e @ GroundError::Unsupported { .. }) => e,
        Err(e) => return Err(e),
    };
    let Some(failed) = failed_relation(desc, &first) else {
        return Err(first);
    };
    let graph = DepGraph::build(desc);
    let arity = arities(desc);
    // The relations whose rules reach the one that failed (it included).
    let n = graph.out.len();
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (from, edges) in graph.out.iter().enumerate() {
        for e in edges {
            callers[e.to.0 as usize].push(from);
        }
    }
    let mut bad = vec![false; n];
    let mut queue = VecDeque::from([failed]);
    bad[failed] = true;
    while let Some(r) = queue.pop_front() {
        for &c in &callers[r] {
            if !bad[c] {
                bad[c] = true;
                queue.push_back(c);
            }
        }
    }
    let k = &desc.keywords;
    let gdl = [
        k.role, k.init, k.true_, k.does, k.next, k.legal, k.goal, k.terminal, k.base, k.input,
    ];
    let is_gdl = |r: usize| gdl.iter().any(|s| s.0 as usize == r);
    let name = |r: usize| format!("{}/{}", desc.symbols.name(crate::gdl::Symbol(r as u32)), arity[r]);
    // The frontier: the first bad relations below the GDL relations.
    let mut marked: Vec<usize> = Vec::new();
    let mut visited = vec![false; n];
    let mut walk: VecDeque<usize> = gdl.iter().map(|s| s.0 as usize).collect();
    let descend = |r: usize, walk: &mut VecDeque<usize>, visited: &mut Vec<bool>| {
        for e in &graph.out[r] {
            let t = e.to.0 as usize;
            if bad[t] && !visited[t] {
                visited[t] = true;
                walk.push_back(t);
            }
        }
    };
    while let Some(r) = walk.pop_front() {
        if is_gdl(r) {
            descend(r, &mut walk, &mut visited);
        } else {
            marked.push(r);
        }
    }
    // Each refused relation is replaced by the bad relations its rules call; at most as many
    // rounds as there are relations.
    for _ in 0..n {
        if marked.is_empty() {
            break;
        }
        marked.sort_unstable();
        marked.dedup();
        let options = GroundOptions {
            opaque: marked.iter().map(|&r| name(r)).collect(),
        };
        match ground::ground_with_options(desc, limits, &options) {
            Ok((g, stats)) => return Ok((g, stats, options.opaque)),
            Err(GroundError::Unsupported { message, .. }) => {
                let refused = marked.iter().position(|&r| {
                    let text = name(r);
                    message.contains(&format!("opaque relation {text}"))
                        || message.contains(&format!("'{text}'"))
                });
                let Some(i) = refused else {
                    return Err(first);
                };
                let r = marked.remove(i);
                let mut next = VecDeque::new();
                descend(r, &mut next, &mut visited);
                marked.extend(next.into_iter().filter(|&t| !is_gdl(t)));
            }
            Err(_) => return Err(first),
        }
    }
    Err(first)
}

/// The relation (symbol number) an error of plain grounding names: the relation of a limit, or
/// the head of the rule at the position of an `Unsupported`.
fn failed_relation(desc: &Description, e: &GroundError) -> Option<usize> {
    match e {
        GroundError::Limit { relation, .. } => {
            let text = relation.trim_start_matches("calls of ");
            let name = text.rsplit_once('/').map_or(text, |(n, _)| n);
            desc.rules
                .iter()
                .find(|r| desc.symbols.name(r.head.rel) == name)
                .map(|r| r.head.rel.0 as usize)
        }
        GroundError::Unsupported { line, .. } => desc
            .rules
            .iter()
            .rfind(|r| r.span.line <= *line && *line > 0)
            .map(|r| r.head.rel.0 as usize),
        GroundError::Internal(_) => None,
    }
}

/// The arity of each relation (symbol number), from the heads and body atoms that use it.
fn arities(desc: &Description) -> Vec<usize> {
    let mut arity = vec![0; desc.symbols.len()];
    fn lit(l: &Literal, arity: &mut [usize]) {
        match l {
            Literal::Atom(a) => arity[a.rel.0 as usize] = a.args.len(),
            Literal::Not(l, _) => lit(l, arity),
            Literal::Or(ls, _) | Literal::And(ls, _) => ls.iter().for_each(|l| lit(l, arity)),
            Literal::Distinct(..) => {}
        }
    }
    for r in &desc.rules {
        arity[r.head.rel.0 as usize] = r.head.args.len();
        r.body.iter().for_each(|l| lit(l, &mut arity));
    }
    arity
}

/// The opaque atoms of a compiled game, evaluated top down by the reference evaluator over the
/// state's facts: the same semantics as the oracle the engines are tested against.
///
/// Answers are cached by state (its base words): the engines ask once per state, but a playout
/// compared across engines, or rollouts returning to a state, ask again.
///
/// Memory stays bounded: the cache starts over after [`CACHE_STATES`] states, and the
/// evaluator drops the terms its searches built (corridor's build new lists in every state,
/// about 10 MB of terms a state) once it holds [`MAX_TERMS`] of them.
pub struct TopDown {
    /// The base facts in layout order, and the constant facts that hold in every state.
    bases: Vec<String>,
    constant_facts: Vec<String>,
    names: Vec<String>,
    inner: Mutex<Inner>,
}

struct Inner {
    reference: Reference,
    cache: HashMap<Vec<u64>, HashMap<u32, bool>>,
}

/// The most states [`TopDown`] keeps answers for before it starts over.
const CACHE_STATES: usize = 4096;

impl fmt::Debug for TopDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TopDown({} opaque atoms)", self.names.len())
    }
}

impl TopDown {
    /// The evaluator of `program`'s opaque atoms, for the game `desc` it was compiled from.
    pub fn new(desc: &Description, program: &Program) -> Result<TopDown, String> {
        let reference = Reference::new(desc).map_err(|e| e.to_string())?;
        Ok(TopDown {
            bases: program.layout.bases.clone(),
            constant_facts: program.layout.constant_facts.clone(),
            names: program.opaque.names.clone(),
            inner: Mutex::new(Inner {
                reference,
                cache: HashMap::new(),
            }),
        })
    }
}

impl TopDown {
    /// The same evaluator, dropping the terms it built once its table holds more than
    /// `max_terms` of them (instead of [`MAX_TERMS`]).
    pub fn with_max_terms(self, max_terms: usize) -> TopDown {
        let inner = self.inner.into_inner().unwrap_or_else(|e| e.into_inner());
        TopDown {
            inner: Mutex::new(Inner {
                reference: inner.reference.with_max_terms(max_terms),
                cache: inner.cache,
            }),
            ..self
        }
    }
}

impl Opaque for TopDown {
    fn eval(&self, bases: &[u64], wanted: &[u32], out: &mut [bool]) -> Result<(), OpaqueError> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Inner { reference, cache } = &mut *inner;
        if cache.len() > CACHE_STATES {
            cache.clear();
        }
        let known = cache.entry(bases.to_vec()).or_default();
        let mut facts: Option<Vec<&str>> = None;
        for (o, &i) in out.iter_mut().zip(wanted) {
            if let Some(&v) = known.get(&i) {
                *o = v;
                continue;
            }
            let facts = facts.get_or_insert_with(|| {
                let set = (0..self.bases.len())
                    .filter(|&b| bases.get(b / 64).is_some_and(|w| w >> (b % 64) & 1 == 1));
                set.map(|b| self.bases[b].as_str())
                    .chain(self.constant_facts.iter().map(String::as_str))
                    .collect()
            });
            let atom = self.names.get(i as usize).ok_or_else(|| OpaqueError {
                atom: format!("#{i}"),
                reason: format!("there are only {} opaque atoms", self.names.len()),
            })?;
            let v = reference.holds_in(facts, atom).map_err(|reason| OpaqueError {
                atom: atom.clone(),
                reason,
            })?;
            known.insert(i, v);
            *o = v;
        }
        Ok(())
    }
}
