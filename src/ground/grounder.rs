//! The grounder's phases: classify relations, evaluate the static ones exactly and the dynamic
//! ones as an over-approximation, then instantiate the dynamic rules (see `doc/grounding.md`).

use super::eliminate;
use super::join::{
    self, sort_dedup_by, sort_dedup_from, Bounds, Exec, HeadsFound, Mode, OutLit, Plan, Relation, Step, Stop,
    StoreRef, AUX,
};
use super::magic;
use super::normalize::{self, AtomPat, Conj, Item, Pat, RelId, RelTable};
use super::passed;
use super::project;
use super::terms::{TermId, TermStore, HOLDS, PENDING, UNBOUND};
use super::types::{
    AtomId, AtomKind, GroundAtom, GroundLimits, GroundLit, GroundOptions, GroundRules, Grounded,
};
use super::GroundError;
use crate::gdl::{Description, Term};
use rustc_hash::FxHashMap;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The relations GDL gives a meaning to.
#[derive(Copy, Clone)]
struct Keys {
    role: RelId,
    init: RelId,
    true_: RelId,
    does: RelId,
    next: RelId,
    legal: RelId,
    goal: RelId,
    terminal: RelId,
}

/// The deepest atom the grounder derives, counting the relation as one level. Deeper atoms mean
/// that a recursion builds ever larger terms (a list that grows every turn), which no finite
/// ground program can hold; the grounder stops with a `term_depth` limit rather than run into the
/// atom limit slowly.
pub const MAX_TERM_DEPTH: u16 = 64;

/// Statistics of one grounding, for benchmarks.
#[derive(Clone, Debug, Default)]
pub struct GroundStats {
    /// Atoms of static relations, in their exact models.
    pub static_atoms: usize,
    /// Atoms of dynamic relations, in their over-approximation.
    pub dynamic_atoms: usize,
    /// Ground terms interned, atoms included.
    pub terms: usize,
    /// Bytes held by terms, relations and indexes at the end, roughly.
    pub bytes: usize,
    /// Time spent normalizing and classifying.
    pub prepare: Duration,
    /// Time spent in the fixpoints.
    pub fixpoint: Duration,
    /// Rounds of the fixpoints whose joins ran on several threads (`Grounder::run_round`).
    pub parallel_rounds: usize,
    /// Joins of the fixpoint cut into parts on several threads (`Grounder::derive_in_parts`).
    pub split_variants: usize,
    /// Variants of the fixpoint whose heads were the atoms they copy under another name, taken
    /// without a join (`Grounder::copied_heads`).
    pub copied_variants: usize,
    /// Time spent instantiating.
    pub instantiate: Duration,
    /// The ten largest relations (`name/arity`) with their numbers of atoms, largest first.
    pub largest: Vec<(String, usize)>,
    /// The ten rules of the description that took longest, most expensive first.
    pub costliest: Vec<RuleCost>,
    /// The forty derivations of the fixpoints that took longest, one per conjunction of the
    /// normal form (magic rules on their own), most expensive first.
    pub derivations: Vec<DeriveCost>,
}

/// What deriving one conjunction of the normal form cost in the fixpoints, over all its runs
/// (round 0 and each semi-naive variant).
#[derive(Clone, Debug, Default)]
pub struct DeriveCost {
    /// The line of the rule it comes from (0 for the grounder's own rules).
    pub line: u32,
    /// The relation it defines (`name/arity`, `calls of name/arity` for a magic rule, `calls of
    /// name/arity at 0,2` for one whose calls are split into groups of positions).
    pub relation: String,
    /// Time spent.
    pub time: Duration,
    /// New atoms it derived.
    pub derived: usize,
    /// Solutions of its joins (heads found, new or not).
    pub solutions: usize,
    /// How many times it ran.
    pub runs: usize,
}

/// What one rule of the description cost to ground.
#[derive(Clone, Debug, Default)]
pub struct RuleCost {
    /// The rule's line in the source.
    pub line: u32,
    /// The relation it defines (`name/arity`).
    pub relation: String,
    /// Time spent deriving its atoms in the fixpoints, magic rules from it included.
    pub derive: Duration,
    /// Atoms it derived.
    pub derived: usize,
    /// Time spent instantiating it.
    pub instantiate: Duration,
    /// Ground rules it gave, auxiliary ones included (an atom identified with another counts one
    /// rule; before duplicates are removed).
    pub rules: usize,
}

pub(crate) struct Grounder<'d> {
    desc: &'d Description,
    limits: &'d GroundLimits,
    deadline: Instant,
    store: TermStore,
    rels: RelTable,
    relations: Vec<Relation>,
    conjs: Vec<Conj>,
    k: Keys,
    role_names: Vec<String>,
    role_index: FxHashMap<TermId, u32>,
    /// `name/arity` of every relation, for messages.
    rel_names: Vec<String>,
    /// How many relations `normalize` made of `or`s: their symbols follow the game's, and
    /// come before those of the magic relations and of variable elimination.
    or_relations: u32,
    dynamic: Vec<bool>,
    reached: Vec<bool>,
    /// The magic relations of the demand-driven transformation: joined, never output.
    guard: Vec<bool>,
    /// The relations whose atoms appear in the ground program: dynamic and not magic.
    output: Vec<bool>,
    atoms: usize,
    /// The cost of each rule of the description, by rule index.
    costs: Vec<RuleCost>,
    /// The relations already evaluated.
    evaluated: Vec<bool>,
    /// The opaque relations (see `doc/opaque.md`): their calls are atoms whose values come from
    /// outside the ground program.
    opaque: Vec<bool>,
    /// The relations whose atoms the fixpoint took from their calls (`calls_as_atoms`): an
    /// atom of theirs that no ground rule has is false, and a rule that negates one is
    /// instantiated after their rules are settled, without that literal.
    by_calls: Vec<bool>,
    /// The calls relations of those (`by_calls`): their magic rules run after the fixpoint of
    /// their component without them (`eval_scc`).
    deferred_calls: Vec<bool>,
    /// The most solutions one derivation may find (`eliminate` sets it).
    budget: usize,
    /// For a head relation and a relation read by a literal with exactly the head's arguments
    /// (a guard of all arguments, see `magic.rs`), the head atom known to hold at each
    /// position of the latter (`UNBOUND` where not known): see `Exec::head_at`. Kept for the
    /// fixpoint only.
    head_at: FxHashMap<(RelId, RelId), Vec<TermId>>,
    pub stats: GroundStats,
    /// What each conjunction cost to derive, by index in `conjs`.
    derive_costs: Vec<DeriveCost>,
    /// How many threads run the joins of instantiation (see `Grounder::instantiate`); the
    /// ground program does not depend on it.
    pub join_threads: usize,
    /// How many threads run the joins of a large round of the fixpoint (see
    /// `Grounder::run_round`); the ground program does not depend on it.
    pub derive_threads: usize,
    /// The least work (`first_scan_size`, summed) for which a round runs on several threads:
    /// `PARALLEL_ROUND`, or 0 in tests that have every round with several relations do so.
    pub parallel_round: usize,
    /// The fewest atoms (`first_scan_size`) a variant's first scan must read for the variant
    /// of a round of one chain to be cut into parts (`Grounder::derive_in_parts`):
    /// `SPLIT_VARIANT`, or 0 in tests.
    pub split_variant: usize,
    /// Whether the joins that read no settled identity are handed out at once rather than
    /// with their component (see `Grounder::instantiate`); the ground program does not
    /// depend on it. Off only in tests, which compare the two.
    pub run_ahead: bool,
}

/// The limit a derivation reports when it finds more solutions than `Grounder::budget`.
const OVER_BUDGET: &str = "elimination budget";

/// The most solutions the rule of a relation of `eliminate` may have.
const ELIM_MAX_SOLUTIONS: usize = 1_000_000;

fn limit(limit: &'static str, value: usize, relation: &str) -> GroundError {
    GroundError::Limit {
        limit,
        value: value as u64,
        relation: relation.to_string(),
    }
}

/// The error of a limit that [`Heads`] reported (`"term_depth"` or `"max_atoms"`) while adding
/// the heads of `relation`.
fn heads_limit(e: &'static str, max_atoms: usize, relation: &str) -> Stop {
    let value = if e == "term_depth" {
        MAX_TERM_DEPTH as usize
    } else {
        max_atoms
    };
    Stop::Error(limit(e, value, relation))
}

impl<'d> Grounder<'d> {
    pub fn new(
        desc: &'d Description,
        limits: &'d GroundLimits,
        options: &GroundOptions,
    ) -> Result<Self, GroundError> {
        let start = Instant::now();
        // A time limit too large to add to the clock is no limit.
        let deadline = start
            .checked_add(limits.max_time)
            .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 24 * 3600));
        let mut store = TermStore::default();
        let mut rels = RelTable::default();
        let kw = desc.keywords;
        let k = Keys {
            role: rels.id(kw.role, 1),
            init: rels.id(kw.init, 1),
            true_: rels.id(kw.true_, 1),
            does: rels.id(kw.does, 2),
            next: rels.id(kw.next, 1),
            legal: rels.id(kw.legal, 2),
            goal: rels.id(kw.goal, 2),
            terminal: rels.id(kw.terminal, 0),
        };
        let (mut conjs, mut or_relations) = normalize::normalize(desc, &mut store, &mut rels)?;
        let opaque = opaque_relations(desc, &options.opaque, &mut rels, &conjs)?;
        // GDL's relations keep their arguments: they are the game's interface; so do the
        // opaque relations, whose atoms are asked by name.
        let keep: Vec<RelId> = [kw.base, kw.input]
            .iter()
            .flat_map(|&sym| [rels.get(sym, 1), rels.get(sym, 2)])
            .flatten()
            .chain([
                k.role, k.init, k.true_, k.does, k.next, k.legal, k.goal, k.terminal,
            ])
            .collect();
        let kept = |r: RelId| keep.contains(&r) || opaque.get(r as usize).is_some_and(|&o| o);
        project::drop_irrelevant_arguments(&mut conjs, &mut rels, kept);
        // The relations split off take symbols after those of the `or`s, and print as they do.
        or_relations += project::split_partly_irrelevant(
            &mut conjs,
            &mut rels,
            kept,
            desc.symbols.len() as u32 + or_relations,
        );
        or_relations += passed::split_passed_arguments(
            &mut conjs,
            &mut rels,
            kept,
            desc.symbols.len() as u32 + or_relations,
        );

        // The grounder's own rules: the state holds what `init` and `next` give, and a role
        // may play what is legal for it.
        let atom = |rel: RelId, args: Vec<Pat>| AtomPat {
            rel,
            sym: rels.key(rel).0,
            args: args.into(),
        };
        let own = |head: AtomPat, body: Vec<Item>, nvars: usize| Conj {
            head,
            body,
            nvars,
            rule: None,
            var_names: vec![kw.true_; nvars],
            magic: false,
        };
        let from_init = own(
            atom(k.true_, vec![Pat::Var(0)]),
            vec![Item::Pos(atom(k.init, vec![Pat::Var(0)]))],
            1,
        );
        let from_next = own(
            atom(k.true_, vec![Pat::Var(0)]),
            vec![Item::Pos(atom(k.next, vec![Pat::Var(0)]))],
            1,
        );
        let from_legal = own(
            atom(k.does, vec![Pat::Var(0), Pat::Var(1)]),
            vec![
                Item::Pos(atom(k.legal, vec![Pat::Var(0), Pat::Var(1)])),
                Item::Pos(atom(k.role, vec![Pat::Var(0)])),
            ],
            2,
        );
        conjs.extend([from_init, from_next, from_legal]);

        // Roles in the order of the `role` facts.
        let mut role_terms = Vec::new();
        let mut role_names = Vec::new();
        let mut role_index = FxHashMap::default();
        for rule in &desc.rules {
            if rule.head.rel == kw.role && rule.head.args.len() == 1 && rule.body.is_empty() {
                if let Some(t) = intern_ground(&mut store, &rule.head.args[0]) {
                    if let std::collections::hash_map::Entry::Vacant(e) = role_index.entry(t) {
                        e.insert(role_terms.len() as u32);
                        role_terms.push(t);
                        role_names.push(desc.term_text(&rule.head.args[0]));
                    }
                }
            }
        }

        let n = rels.len();
        let rel_names = (0..n as RelId)
            .map(|r| {
                let (s, a) = rels.key(r);
                match (s.0 as usize).checked_sub(desc.symbols.len()) {
                    // A relation of an `or` (`normalize`).
                    Some(k) => format!(";or{k}/{a}"),
                    None => format!("{}/{a}", desc.symbols.name(s)),
                }
            })
            .collect();
        let mut g = Grounder {
            desc,
            limits,
            deadline,
            store,
            rels,
            relations: (0..n).map(|_| Relation::default()).collect(),
            conjs,
            k,
            role_names,
            role_index,
            rel_names,
            or_relations,
            dynamic: vec![false; n],
            reached: vec![false; n],
            guard: vec![false; n],
            output: vec![false; n],
            atoms: 0,
            costs: vec![RuleCost::default(); desc.rules.len()],
            evaluated: vec![false; n],
            opaque,
            budget: usize::MAX,
            stats: GroundStats::default(),
            derive_costs: Vec::new(),
            head_at: FxHashMap::default(),
            join_threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_JOIN_THREADS)),
            derive_threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_JOIN_THREADS)),
            parallel_round: PARALLEL_ROUND,
            split_variant: SPLIT_VARIANT,
            run_ahead: true,
            by_calls: vec![false; n],
            deferred_calls: vec![false; n],
        };
        g.opaque.resize(n, false);
        g.classify()?;
        // Classifying evaluates some static relations, which counts as fixpoint time.
        g.stats.prepare = start.elapsed().saturating_sub(g.stats.fixpoint);
        Ok(g)
    }

    fn check_time(&self, rel: RelId) -> Result<(), GroundError> {
        if Instant::now() > self.deadline {
            return Err(self.time_limit(rel));
        }
        Ok(())
    }

    fn time_limit(&self, rel: RelId) -> GroundError {
        limit(
            "max_time",
            self.limits.max_time.as_millis().min(u128::from(u64::MAX)) as u64 as usize,
            &self.rel_names[rel as usize],
        )
    }

    fn rule_span(&self, conj: &Conj) -> (u32, u32) {
        match conj.rule {
            Some(i) => {
                let s = self.desc.rules[i].span;
                (s.line, s.col)
            }
            None => (0, 0),
        }
    }

    /// The relations reached from the game master's questions through rule bodies.
    fn reach(&self) -> Vec<bool> {
        let k = self.k;
        let n = self.rels.len();
        let mut reached = vec![false; n];
        let mut heads_of: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, c) in self.conjs.iter().enumerate() {
            heads_of[c.head.rel as usize].push(i);
        }
        let mut work = vec![
            k.role, k.init, k.true_, k.does, k.next, k.legal, k.goal, k.terminal,
        ];
        for &r in &work {
            reached[r as usize] = true;
        }
        while let Some(r) = work.pop() {
            for &i in &heads_of[r as usize] {
                for item in &self.conjs[i].body {
                    if let Item::Pos(a) | Item::Neg(a) = item {
                        if !reached[a.rel as usize] {
                            reached[a.rel as usize] = true;
                            work.push(a.rel);
                        }
                    }
                }
            }
        }
        reached
    }

    /// The dynamic relations: the state, the moves, what the game master reads each turn, and
    /// whatever depends on any of them.
    fn dynamic_relations(&self) -> Vec<bool> {
        let k = self.k;
        let mut dynamic = vec![false; self.rels.len()];
        for r in [k.true_, k.does, k.next, k.legal, k.goal, k.terminal] {
            dynamic[r as usize] = true;
        }
        // An opaque relation depends on the state (`make_opaque` checks it), although the rule
        // that stands in for its rules does not say so.
        for (r, &o) in self.opaque.iter().enumerate() {
            dynamic[r] |= o;
        }
        loop {
            let mut changed = false;
            for c in &self.conjs {
                if dynamic[c.head.rel as usize] {
                    continue;
                }
                let dyn_body = c.body.iter().any(|item| match item {
                    Item::Pos(a) | Item::Neg(a) => dynamic[a.rel as usize],
                    _ => false,
                });
                if dyn_body {
                    dynamic[c.head.rel as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                return dynamic;
            }
        }
    }

    /// A variable of `c` that its positive literals leave unbound, with where it occurs.
    fn first_free(c: &Conj) -> Option<(u32, &'static str)> {
        let mut bound = vec![false; c.nvars];
        for item in &c.body {
            if let Item::Pos(a) = item {
                a.for_each_var(&mut |v| bound[v as usize] = true);
            }
        }
        let mut free = None;
        c.head.for_each_var(&mut |v| {
            if !bound[v as usize] {
                free = free.or(Some((v, "its head")));
            }
        });
        for item in &c.body {
            let what = match item {
                Item::Pos(_) => continue,
                Item::Neg(_) => "a negated literal",
                Item::Distinct(..) => "a 'distinct'",
                Item::Equal(..) => "a negated 'distinct'",
            };
            item.for_each_var(&mut |v| {
                if !bound[v as usize] {
                    free = free.or(Some((v, what)));
                }
            });
        }
        free
    }

    /// Finds the relations the game's questions reach and which of them are dynamic, binds
    /// role variables, makes relations called with bound arguments demand-driven (see
    /// `magic`), and rejects the rules that still leave a variable unbound.
    fn classify(&mut self) -> Result<(), GroundError> {
        let k = self.k;
        let opaque_lines = self.make_opaque()?;
        // Rules of relations nothing reaches are never grounded (they may even be unsafe).
        let reached = self.reach();
        self.conjs.retain(|c| reached[c.head.rel as usize]);
        let dynamic = self.dynamic_relations();
        for c in &self.conjs {
            if c.head.rel == k.init && dynamic[k.init as usize] {
                let (line, col) = self.rule_span(c);
                return Err(GroundError::Unsupported {
                    line,
                    col,
                    message: "'init' depends on the state or the moves".to_string(),
                });
            }
        }

        // A role variable of `legal` or `goal` that the body leaves free ranges over the roles,
        // since the game master asks for one role at a time.
        for c in &mut self.conjs {
            if c.head.rel != k.legal && c.head.rel != k.goal {
                continue;
            }
            let Pat::Var(v) = c.head.args[0] else { continue };
            let mut bound = false;
            for item in &c.body {
                if let Item::Pos(a) = item {
                    a.for_each_var(&mut |w| bound |= w == v);
                }
            }
            if !bound {
                let role = AtomPat {
                    rel: k.role,
                    sym: self.desc.keywords.role,
                    args: vec![Pat::Var(v)].into(),
                };
                c.body.insert(0, Item::Pos(role));
            }
        }

        // Demand-driven relations: the dynamic ones that are not asked about directly, and the
        // static ones with a rule that only the arguments of its calls can make safe.
        let n = self.rels.len();
        let mut candidates = vec![false; n];
        for r in 0..n {
            candidates[r] = reached[r] && dynamic[r];
        }
        for c in &self.conjs {
            if Self::first_free(c).is_some() {
                candidates[c.head.rel as usize] = true;
            }
        }
        for r in [
            k.role, k.init, k.true_, k.does, k.next, k.legal, k.goal, k.terminal,
        ] {
            candidates[r as usize] = false;
        }
        // The static relations that depend on no candidate are evaluated now, so that the
        // transformation knows which are small.
        let start = Instant::now();
        self.reached = reached.clone();
        self.dynamic = dynamic.clone();
        let mut early: Vec<bool> = (0..n).map(|r| !dynamic[r] && !candidates[r]).collect();
        loop {
            let mut changed = false;
            for c in &self.conjs {
                let h = c.head.rel as usize;
                if early[h]
                    && c.body.iter().any(|item| match item {
                        Item::Pos(a) | Item::Neg(a) => !early[a.rel as usize],
                        _ => false,
                    })
                {
                    early[h] = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.evaluate(&early)?;
        // The transformation renumbers the conjunctions: what they cost so far is set apart.
        self.stats.derivations = std::mem::take(&mut self.derive_costs);
        self.stats.fixpoint = start.elapsed();
        let small: Vec<bool> = (0..n)
            .map(|r| self.evaluated[r] && self.relations[r].rows.len() <= magic::SMALL)
            .collect();
        let symbols = self.desc.symbols.len() as u32 + self.or_relations;
        let magic_for = magic::transform(
            &mut self.conjs,
            &mut self.rels,
            &candidates,
            &small,
            &self.opaque,
            k.true_,
            symbols,
        );
        let n = self.rels.len();
        self.guard = (0..n)
            .map(|r| magic_for.get(r).is_some_and(|m| m.is_some()))
            .collect();
        self.rel_names = (0..n)
            .map(|r| match magic_for.get(r).and_then(|m| m.as_ref()) {
                Some(m) => match &m.positions {
                    None => format!("calls of {}", self.rel_names[m.of as usize]),
                    Some(ps) => {
                        let ps: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
                        format!("calls of {} at {}", self.rel_names[m.of as usize], ps.join(","))
                    }
                },
                None => self.rel_names[r].clone(),
            })
            .collect();
        self.relations.resize_with(n, Relation::default);
        self.opaque.resize(n, false);
        self.check_opaque_calls(&opaque_lines)?;
        self.reached = self.reach();
        self.dynamic = self.dynamic_relations();
        self.output = (0..n).map(|r| self.dynamic[r] && !self.guard[r]).collect();
        self.calls_as_atoms(k);

        // Any variable still unbound makes the rule one that only top-down evaluation with
        // other arguments given could answer.
        for c in &self.conjs {
            if let Some((v, what)) = Self::first_free(c) {
                let (line, col) = self.rule_span(c);
                let rule = c
                    .rule
                    .map(|i| self.desc.rule_text(&self.desc.rules[i]))
                    .unwrap_or_default();
                return Err(GroundError::Unsupported {
                    line,
                    col,
                    message: format!(
                        "cannot ground {rule}: variable {} of {what} is bound by no positive literal of \
                         the body nor by the calls of the rule, so the rule can only be answered \
                         top-down, which the grounder does not do",
                        self.desc.symbols.name(c.var_names[v as usize])
                    ),
                });
            }
        }
        Ok(())
    }

    /// Replaces the rules of each opaque relation `p/n` by the single rule `p(X1, …, Xn) ⇐`,
    /// which the demand-driven transformation then guards with the calls of `p`: in the
    /// over-approximation `p` holds for exactly the calls the game can make, and the rule itself
    /// is never instantiated (it is the grounder's own), so its atoms are heads of no ground
    /// rule. The relations only `p`'s rules reached are then no longer reached and are never
    /// grounded. Checks that `p` depends on `true` and not on `does`: its value must be a
    /// function of the state alone. Returns the line and column of each opaque relation's first
    /// rule, for the messages of `check_opaque_calls`.
    fn make_opaque(&mut self) -> Result<Vec<(RelId, u32, u32)>, GroundError> {
        let k = self.k;
        let n = self.rels.len();
        let mut heads_of: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, c) in self.conjs.iter().enumerate() {
            heads_of[c.head.rel as usize].push(i);
        }
        let mut out = Vec::new();
        for p in 0..n {
            if !self.opaque[p] {
                continue;
            }
            let name = &self.rel_names[p];
            let Some(&first) = heads_of[p].first() else {
                return Err(opaque_error(0, 0, format!("opaque relation {name} has no rule")));
            };
            let (line, col) = self.rule_span(&self.conjs[first]);
            // Everything the rules of `p` read, through any chain of rules.
            let mut seen = vec![false; n];
            let mut work: Vec<RelId> = vec![p as RelId];
            seen[p] = true;
            while let Some(r) = work.pop() {
                // `true` is the state itself: the grounder's own rules that derive it from
                // `init` and `next` say what states can be, not what one state holds.
                if r == k.true_ {
                    continue;
                }
                for &i in &heads_of[r as usize] {
                    for item in &self.conjs[i].body {
                        if let Item::Pos(a) | Item::Neg(a) = item {
                            if !seen[a.rel as usize] {
                                seen[a.rel as usize] = true;
                                work.push(a.rel);
                            }
                        }
                    }
                }
            }
            if seen[k.does as usize] {
                return Err(opaque_error(
                    line,
                    col,
                    format!(
                        "opaque relation {name} depends on 'does', so its value is not a function of \
                         the state"
                    ),
                ));
            }
            if !seen[k.true_ as usize] {
                return Err(opaque_error(
                    line,
                    col,
                    format!(
                        "opaque relation {name} does not depend on the state; the grounder evaluates \
                         such relations exactly"
                    ),
                ));
            }
            out.push((p as RelId, line, col));
        }
        if out.is_empty() {
            return Ok(out);
        }
        let opaque = &self.opaque;
        self.conjs.retain(|c| !opaque[c.head.rel as usize]);
        let true_sym = self.desc.keywords.true_;
        for &(p, _, _) in &out {
            let (sym, arity) = self.rels.key(p);
            self.conjs.push(Conj {
                head: AtomPat {
                    rel: p,
                    sym,
                    args: (0..arity as u32).map(Pat::Var).collect::<Vec<_>>().into(),
                },
                body: Vec::new(),
                nvars: arity,
                rule: None,
                var_names: vec![true_sym; arity],
                magic: false,
            });
        }
        Ok(out)
    }

    /// Gives each relation that only negated literals read, and whose every rule is guarded
    /// by the calls of all its arguments, a rule of the fixpoint's own, "every call holds":
    /// `p(X) ⇐ calls of p(X)`. Its rules are then left out of the fixpoint (that rule derives
    /// every atom they derive: `derived_rules`), which only asks whether each atom a negated
    /// literal names can hold; every atom that holds is a call, so the calls are an
    /// over-approximation. The relation's rules are instantiated as before; a call none of
    /// them derives is false, and the rules that negate it leave it out (`Out::ruleless`,
    /// `Exec::by_calls`). Chess's check test, `threatened_with_capture/7`, read under `not` by
    /// the `legal` rules, took about 400 ms of the fixpoint to derive its 313,096 atoms, one
    /// per call.
    fn calls_as_atoms(&mut self, k: Keys) {
        let n = self.rels.len();
        self.by_calls.resize(n, false);
        self.deferred_calls.resize(n, false);
        let mut read = vec![false; n];
        for c in &self.conjs {
            for item in &c.body {
                if let Item::Pos(a) = item {
                    read[a.rel as usize] = true;
                }
            }
        }
        // The guard of all arguments of each candidate, `None` once a rule lacks it.
        let mut guard_of: Vec<Option<Option<RelId>>> = vec![Some(None); n];
        for c in &self.conjs {
            let p = c.head.rel as usize;
            if c.rule.is_none() || c.magic {
                guard_of[p] = None;
                continue;
            }
            let g = c.body.iter().find_map(|item| match item {
                Item::Pos(a) if self.guard[a.rel as usize] && a.args == c.head.args => Some(a.rel),
                _ => None,
            });
            guard_of[p] = match (guard_of[p], g) {
                (Some(None), Some(g)) => Some(Some(g)),
                (Some(Some(h)), Some(g)) if h == g => Some(Some(g)),
                _ => None,
            };
        }
        let asked = [
            k.role, k.init, k.true_, k.does, k.next, k.legal, k.goal, k.terminal,
        ];
        for p in 0..n {
            let Some(Some(g)) = guard_of[p] else { continue };
            if read[p] || !self.output[p] || self.opaque[p] || asked.contains(&(p as RelId)) {
                continue;
            }
            let (sym, arity) = self.rels.key(p as RelId);
            let (gsym, garity) = self.rels.key(g);
            if garity != arity {
                continue;
            }
            self.by_calls[p] = true;
            self.deferred_calls[g as usize] = true;
            let vars: Box<[Pat]> = (0..arity as u32).map(Pat::Var).collect();
            self.conjs.push(Conj {
                head: AtomPat {
                    rel: p as RelId,
                    sym,
                    args: vars.clone(),
                },
                body: vec![Item::Pos(AtomPat {
                    rel: g,
                    sym: gsym,
                    args: vars,
                })],
                nvars: arity,
                rule: None,
                // As the stand-in of an opaque relation names them: every variable is bound
                // by the guard, so no message names one.
                var_names: vec![self.desc.keywords.true_; arity],
                magic: false,
            });
        }
    }

    /// After the demand-driven transformation, checks that every call of each opaque relation
    /// binds all its arguments: the rule standing in for its rules must be guarded by a magic
    /// relation of the full arity (a 0-ary relation needs no guard).
    fn check_opaque_calls(&self, opaque: &[(RelId, u32, u32)]) -> Result<(), GroundError> {
        for &(p, line, col) in opaque {
            let arity = self.rels.key(p).1;
            let stand_in = self
                .conjs
                .iter()
                .find(|c| c.head.rel == p && c.rule.is_none() && !c.magic);
            let guarded = match stand_in.and_then(|c| c.body.first()) {
                Some(Item::Pos(g)) => g.args.len() == arity,
                _ => arity == 0,
            };
            if !guarded {
                return Err(opaque_error(
                    line,
                    col,
                    format!(
                        "opaque relation {} is called with an argument left unbound at some call \
                         site; its value per state is only defined for fully bound calls",
                        self.rel_names[p as usize]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Evaluates every reached relation, strongly connected component by component,
    /// dependencies first.
    pub fn fixpoint(&mut self) -> Result<(), GroundError> {
        let start = Instant::now();
        let all = vec![true; self.rels.len()];
        self.evaluate(&all)?;
        self.head_at = FxHashMap::default();
        self.stats.fixpoint = start.elapsed() + self.stats.fixpoint;
        let mut costs = std::mem::take(&mut self.stats.derivations);
        costs.append(&mut self.derive_costs);
        costs.retain(|c| c.runs > 0);
        costs.sort_by_key(|c| std::cmp::Reverse(c.time));
        costs.truncate(40);
        self.stats.derivations = costs;
        Ok(())
    }

    /// Splits the rules where eliminating a variable into a relation of its own pays
    /// (`eliminate`), and evaluates the new relations, whose rules read only relations
    /// evaluated already (or new ones before them).
    pub fn eliminate(&mut self) -> Result<(), GroundError> {
        let start = Instant::now();
        let first_symbol = (0..self.rels.len() as RelId)
            .map(|r| self.rels.key(r).0 .0 + 1)
            .max()
            .unwrap_or(0)
            .max(self.desc.symbols.len() as u32);
        let output = &self.output;
        let dynamic = &self.dynamic;
        let relations = &self.relations;
        let split = eliminate::split_rules(
            &mut self.conjs,
            &mut self.rels,
            |c| c.rule.is_some() && !c.magic && output[c.head.rel as usize],
            |r| dynamic.get(r as usize).copied().unwrap_or(false),
            |r| relations.get(r as usize).map_or(&[][..], |rel| &rel.rows[..]),
            &self.store,
            first_symbol,
        );
        let n = self.rels.len();
        self.relations.resize_with(n, Relation::default);
        for v in [
            &mut self.dynamic,
            &mut self.reached,
            &mut self.guard,
            &mut self.output,
            &mut self.evaluated,
            &mut self.opaque,
            &mut self.by_calls,
            &mut self.deferred_calls,
        ] {
            v.resize(n, false);
        }
        let mut new = vec![false; n];
        for (k, nr) in split.relations.iter().enumerate() {
            let r = nr.rel as usize;
            new[r] = true;
            self.dynamic[r] = self.conjs[nr.rule].body.iter().any(|item| match item {
                Item::Pos(a) | Item::Neg(a) => self.dynamic[a.rel as usize],
                _ => false,
            });
            self.guard[r] = nr.guard;
            self.output[r] = self.dynamic[r] && !nr.guard;
            self.reached[r] = true;
            self.evaluated[r] = true;
            self.rel_names
                .push(format!(";elim{k}/{}", self.rels.key(nr.rel).1));
        }
        // The new relations are evaluated in order, each within a budget of solutions: the
        // estimate can be far off (a bucket that is a product the rest of the rule would have
        // cut), and a relation that overruns it is dropped, with the splits that use it.
        let mut failed = vec![false; n];
        let reads = |c: &Conj, set: &[bool]| {
            c.body.iter().any(|item| match item {
                Item::Pos(a) | Item::Neg(a) => set[a.rel as usize],
                _ => false,
            })
        };
        let in_scc = vec![false; n];
        for nr in &split.relations {
            if reads(&self.conjs[nr.rule], &failed) {
                failed[nr.rel as usize] = true;
                continue;
            }
            let lens: Vec<usize> = self.relations.iter().map(|r| r.rows.len()).collect();
            let bounds = Bounds {
                old: lens.clone(),
                all: lens,
            };
            let room = self.limits.max_atoms.saturating_sub(self.atoms) / 2;
            self.budget = ((8.0 * nr.estimate) as usize + 100_000)
                .min(ELIM_MAX_SOLUTIONS)
                .min(room);
            let result = self.derive(nr.rule, None, &in_scc, &bounds, &[]);
            self.budget = usize::MAX;
            match result {
                Ok(()) => {}
                Err(GroundError::Limit {
                    limit: OVER_BUDGET, ..
                }) => failed[nr.rel as usize] = true,
                Err(e) => return Err(e),
            }
        }
        for (ci, original) in split.originals {
            if reads(&self.conjs[ci], &failed) {
                self.conjs[ci] = original;
            }
        }
        // Only the new relations that a rule still reads are instantiated.
        let mut used = vec![false; n];
        for c in self.conjs.iter().filter(|c| !new[c.head.rel as usize]) {
            for item in &c.body {
                if let Item::Pos(a) = item {
                    used[a.rel as usize] = true;
                }
            }
        }
        for nr in split.relations.iter().rev() {
            if used[nr.rel as usize] && !failed[nr.rel as usize] {
                for item in &self.conjs[nr.rule].body {
                    if let Item::Pos(a) = item {
                        used[a.rel as usize] = true;
                    }
                }
            } else {
                self.output[nr.rel as usize] = false;
            }
        }
        self.head_at = FxHashMap::default();
        self.stats.fixpoint += start.elapsed();
        Ok(())
    }

    /// Evaluates, strongly connected component by component, dependencies first, every
    /// component of reached relations that are all in `select` and not evaluated yet.
    fn evaluate(&mut self, select: &[bool]) -> Result<(), GroundError> {
        let n = self.rels.len();
        // A negated literal over an output relation is assumed true while deriving, so the
        // relation it reads need not be complete, nor even evaluated, before the rule runs:
        // such an edge is left out. That takes a relation only negated literals read out of
        // the component of its readers, to be evaluated once after it rather than again in
        // every round of that component (chess's check test, read under `not` by the `legal`
        // rules, took a third of the fixpoint in the component of the whole game).
        let mut deps: Vec<Vec<RelId>> = vec![Vec::new(); n];
        for c in &self.conjs {
            for item in &c.body {
                match item {
                    Item::Pos(a) => deps[c.head.rel as usize].push(a.rel),
                    Item::Neg(a) if !self.output[a.rel as usize] => deps[c.head.rel as usize].push(a.rel),
                    _ => {}
                }
            }
        }
        let sccs = components(&deps);
        let mut rules_of: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, c) in self.conjs.iter().enumerate() {
            rules_of[c.head.rel as usize].push(i);
        }
        self.evaluated.resize(n, false);
        let mut in_scc = vec![false; n];
        for scc in &sccs {
            if !scc.iter().any(|&r| self.reached[r as usize])
                || !scc.iter().all(|&r| select[r as usize])
                || scc.iter().all(|&r| self.evaluated[r as usize])
            {
                continue;
            }
            for &r in scc {
                in_scc[r as usize] = true;
                self.evaluated[r as usize] = true;
            }
            let rules: Vec<usize> = scc
                .iter()
                .flat_map(|&r| rules_of[r as usize].iter().copied())
                .collect();
            let result = self.eval_scc(scc, &rules, &in_scc);
            for &r in scc {
                in_scc[r as usize] = false;
            }
            result?;
        }
        Ok(())
    }

    fn eval_scc(&mut self, scc: &[RelId], rules: &[usize], in_scc: &[bool]) -> Result<(), GroundError> {
        let dynamic = self.dynamic[scc[0] as usize];
        if !dynamic {
            // Exact evaluation needs every negated relation complete: in a lower component.
            for &ci in rules {
                for item in &self.conjs[ci].body {
                    if let Item::Neg(a) = item {
                        if in_scc[a.rel as usize] {
                            let (line, col) = self.rule_span(&self.conjs[ci]);
                            return Err(GroundError::Unsupported {
                                line,
                                col,
                                message: format!(
                                    "negation is not stratified: {} depends negatively on itself",
                                    self.rel_names[a.rel as usize]
                                ),
                            });
                        }
                    }
                }
            }
        }
        let n = self.rels.len();
        let lens: Vec<usize> = self.relations.iter().map(|r| r.rows.len()).collect();
        let mut bounds = Bounds {
            old: lens.clone(),
            all: lens,
        };
        debug_assert_eq!(bounds.all.len(), n);
        let rules = self.derived_rules(rules);
        // For each rule and delta literal with variables nothing else in the rule reads, the
        // values of its other variables that its atoms have given (see `delta_keep`).
        let mut projections: FxHashMap<(usize, usize), DeltaProjection> = FxHashMap::default();
        // The calls of the relations whose atoms are their calls (`calls_as_atoms`) are left
        // for after the component's fixpoint without them: derived in every round, chess's
        // check test's calls from three `legal` rules took 300 ms of one thread over some 60
        // rounds; once, after, they are one join each, and the rounds that follow only take
        // in what they add. The fixpoint is the same: the rules are monotone in what they
        // derive, so any order of rounds that ends when no rule adds an atom reaches it.
        let (later, first): (Vec<usize>, Vec<usize>) = rules
            .iter()
            .partition(|&&ci| self.conjs[ci].magic && self.deferred_calls[self.conjs[ci].head.rel as usize]);
        if later.is_empty() {
            return self.semi_naive(scc, &rules, &rules, in_scc, &mut bounds, &mut projections);
        }
        self.semi_naive(scc, &first, &first, in_scc, &mut bounds, &mut projections)?;
        // The deferred rules in full, against everything derived so far; then every rule
        // reads what they added.
        for &r in scc {
            bounds.old[r as usize] = self.relations[r as usize].rows.len();
            bounds.all[r as usize] = bounds.old[r as usize];
        }
        self.semi_naive(scc, &later, &rules, in_scc, &mut bounds, &mut projections)
    }

    /// The semi-naive fixpoint of `scc` from `bounds`: a first round that evaluates
    /// `full` in full, then rounds of the delta variants of `rules` until no relation of the
    /// component grows.
    fn semi_naive(
        &mut self,
        scc: &[RelId],
        full: &[usize],
        rules: &[usize],
        in_scc: &[bool],
        bounds: &mut Bounds,
        projections: &mut FxHashMap<(usize, usize), DeltaProjection>,
    ) -> Result<(), GroundError> {
        // Round 0 evaluates every rule in full.
        self.prepare_indexes(bounds);
        let mut round = Vec::with_capacity(rules.len());
        for &ci in full {
            round.push(self.plan_variant(ci, None, in_scc, bounds, Vec::new())?);
        }
        self.run_round(&round, bounds)?;
        let mut keep: Vec<bool> = Vec::new();
        loop {
            let mut any = false;
            for &r in scc {
                let r = r as usize;
                bounds.old[r] = bounds.all[r];
                bounds.all[r] = self.relations[r].rows.len();
                any |= bounds.all[r] > bounds.old[r];
            }
            if !any {
                return Ok(());
            }
            self.prepare_indexes(bounds);
            // Every variant of the round reads the relations through `bounds` and is planned
            // from them alone, so none depends on what another one adds: they are planned
            // first, then run (`run_round`).
            round.clear();
            for &ci in rules {
                for i in 0..self.conjs[ci].body.len() {
                    let Item::Pos(a) = &self.conjs[ci].body[i] else {
                        continue;
                    };
                    let r = a.rel as usize;
                    if !in_scc[r] || bounds.all[r] == bounds.old[r] {
                        continue;
                    }
                    // The literals before the delta one read the old atoms only: if one of
                    // them has none, this variant finds nothing.
                    let empty_before = self.conjs[ci].body[..i].iter().any(|item| {
                        matches!(item, Item::Pos(b) if in_scc[b.rel as usize] && bounds.old[b.rel as usize] == 0)
                    });
                    if empty_before || !join::delta_can_match(a, bounds, &mut self.relations, &self.store) {
                        continue;
                    }
                    let projection = projections
                        .entry((ci, i))
                        .or_insert_with(|| DeltaProjection::new(&self.conjs[ci], i, &self.output));
                    if !projection.keep(
                        &self.conjs[ci],
                        i,
                        bounds,
                        &self.relations,
                        &self.store,
                        &mut keep,
                    ) {
                        continue;
                    }
                    let keep = std::mem::take(&mut keep);
                    round.push(self.plan_variant(ci, Some(i), in_scc, bounds, keep)?);
                }
            }
            self.run_round(&round, bounds)?;
        }
    }

    /// Drops, before a round, the indexes planning made only to estimate on relations that
    /// have grown past the size where it makes them (`Relation::drop_unused`), and brings the
    /// others up to the round's bounds. Planning would drop them at its first estimate anyway;
    /// doing it before the round keeps the number of every index the same while the round's
    /// plans are made and run.
    fn prepare_indexes(&mut self, bounds: &Bounds) {
        for (rel, &n) in self.relations.iter_mut().zip(&bounds.all) {
            rel.drop_unused(n);
        }
        // Then every index left is brought up to the round's bounds, which planning would do
        // one index at a time on this thread (`Relation::index`): in chess that was most of
        // the planning, the relations of the component growing by up to 100,000 atoms a round.
        let behind: Vec<_> = self
            .relations
            .iter_mut()
            .zip(&bounds.all)
            .flat_map(|(rel, &n)| rel.behind(n))
            .collect();
        join::catch_up_all(behind, &self.store, self.derive_threads, CATCH_UP_ROWS);
    }

    /// The rules of `rules` that the fixpoint must run: a rule is left out when another rule
    /// of the list derives every atom it derives (see [`subsumes`]), and of two rules that do
    /// so for each other the later one is left out. By induction over the chain of rules that
    /// leave each other out, some rule that runs derives every atom a left-out rule would.
    /// In alexChess the `legal2` rules for a move that answers a check read what the rule for
    /// a move when not in check reads, and more: with their negations assumed true, they only
    /// find that rule's atoms again, and they took half the time of the fixpoint.
    fn derived_rules(&self, rules: &[usize]) -> Vec<usize> {
        let output = &self.output;
        let kept = |item: &Item| match item {
            Item::Neg(a) => !output[a.rel as usize],
            _ => true,
        };
        rules
            .iter()
            .enumerate()
            .filter(|&(j, &cj)| {
                let special = &self.conjs[cj];
                !rules.iter().enumerate().any(|(i, &ci)| {
                    let general = &self.conjs[ci];
                    i != j
                        && general.head.rel == special.head.rel
                        && subsumes(general, special, &kept)
                        && (i < j || !subsumes(special, general, &kept))
                })
            })
            .map(|(_, &c)| c)
            .collect()
    }

    /// Runs rule `ci` (with body literal `delta` reading the last round only) and adds the
    /// atoms it derives.
    fn derive(
        &mut self,
        ci: usize,
        delta: Option<usize>,
        in_scc: &[bool],
        bounds: &Bounds,
        delta_keep: &[bool],
    ) -> Result<(), GroundError> {
        let v = self.plan_variant(ci, delta, in_scc, bounds, delta_keep.to_vec())?;
        self.derive_planned(&v, bounds)
    }

    /// Plans rule `ci` with body literal `delta` reading the last round only (and, of that
    /// literal's atoms, those `keep` says: see `DeltaProjection`).
    fn plan_variant(
        &mut self,
        ci: usize,
        delta: Option<usize>,
        in_scc: &[bool],
        bounds: &Bounds,
        keep: Vec<bool>,
    ) -> Result<Variant, GroundError> {
        let conj = &self.conjs[ci];
        let head_rel = conj.head.rel;
        self.check_time(head_rel)?;
        let clock = Instant::now();
        let plan: Plan = join::plan(
            conj,
            delta,
            in_scc,
            &self.output,
            Mode::Derive,
            None,
            bounds,
            &mut self.relations,
            &self.store,
        );
        let head_item = head_literal(conj, &plan);
        let cache_key = head_item.map(|i| match &conj.body[i] {
            Item::Pos(a) => (head_rel, a.rel),
            _ => unreachable!("head_literal returns positive literals"),
        });
        let size = first_scan_size(&plan, bounds, &keep);
        Ok(Variant {
            ci,
            keep,
            plan,
            head_item,
            cache_key,
            size,
            plan_time: clock.elapsed(),
        })
    }

    /// Runs the planned variants of a round and adds the atoms they derive, in their order. A
    /// round with enough to do (`PARALLEL_ROUND`) runs its joins on `derive_threads` threads
    /// against the term store and relations as they were at the round's start, each join
    /// collecting its heads, and then takes the heads in the order the variants come in,
    /// as if each had run in turn (`merge_variant`): the atoms, their order and the terms'
    /// ids are the same on any number of threads.
    fn run_round(&mut self, round: &[Variant], bounds: &Bounds) -> Result<(), GroundError> {
        // The variants of one head relation form a chain, run in order on one thread: each
        // knows the heads the earlier ones found, as it would on this thread (where they
        // hold), and skips them (chess's check test has six rules, of which the later ones
        // find nearly every head of the first two again). Variants of different relations
        // cannot find each other's heads.
        let mut chains: Vec<Vec<usize>> = Vec::new();
        let mut chain_of: FxHashMap<RelId, usize> = FxHashMap::default();
        for (k, v) in round.iter().enumerate() {
            let next = chains.len();
            let c = *chain_of.entry(self.conjs[v.ci].head.rel).or_insert(next);
            if c == next {
                chains.push(Vec::new());
            }
            chains[c].push(k);
        }
        let total: usize = round.iter().map(|v| v.size).sum();
        let threads = self.derive_threads.min(chains.len());
        if threads <= 1 || total < self.parallel_round {
            // A round of one chain leaves the other threads idle: its large variants are each
            // cut into parts (chess's check test, six rules of one relation evaluated after the
            // component of the game, ran alone on one core for a tenth of the fixpoint).
            let lone = chains.len() == 1 && self.derive_threads > 1 && total >= self.parallel_round;
            for v in round {
                if lone && v.size >= self.split_variant {
                    self.derive_in_parts(v, bounds)?;
                } else {
                    self.derive_planned(v, bounds)?;
                }
            }
            return Ok(());
        }
        // Every cache of heads by position that a variant reads, as long as its relation is
        // at the round's start: the joins share them and only read them.
        for v in round {
            if let Some(key) = v.cache_key {
                let len = self.relations[key.1 as usize].rows.len();
                self.head_at.entry(key).or_default().resize(len, UNBOUND);
            }
        }
        self.stats.parallel_rounds += 1;
        // The largest first, so that no thread is left with a large one at the end.
        let size = |c: &Vec<usize>| c.iter().map(|&k| round[k].size).sum::<usize>();
        chains.sort_by_key(|c| std::cmp::Reverse(size(c)));
        let outs: Vec<std::sync::Mutex<Option<Collected>>> =
            round.iter().map(|_| Default::default()).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        {
            let cx = self.frozen(bounds);
            let work = || loop {
                let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(chain) = chains.get(j) else {
                    break;
                };
                let mut state = Chain::default();
                for &k in chain {
                    let collected = collect_heads(&cx, &round[k], &mut state, None);
                    *outs[k].lock().expect("no join thread panics holding its slot") = Some(collected);
                }
            };
            std::thread::scope(|s| {
                for _ in 1..threads {
                    s.spawn(work);
                }
                work();
            });
        }
        let collected: Vec<Collected> = outs
            .into_iter()
            .map(|out| {
                out.into_inner()
                    .expect("no join thread panics holding its slot")
                    .expect("every variant of the round has run")
            })
            .collect();
        // Nearly all the heads collected are new atoms, and so new terms (those that held are
        // mostly left out, see `drop_held`): if they would make the term table grow, the next
        // table is made on another thread while this one interns them.
        let heads: usize = collected.iter().map(|c| c.pos.len()).sum();
        self.store.prepare_growth(heads - heads / 8);
        for (v, c) in round.iter().zip(collected) {
            self.merge_variant(v, c)?;
        }
        Ok(())
    }

    /// What the join threads read while a round runs: the grounder's tables as they are at its
    /// start, which no thread changes until the round's heads are merged.
    fn frozen<'a>(&'a self, bounds: &'a Bounds) -> FrozenCx<'a> {
        FrozenCx {
            conjs: &self.conjs,
            store: &self.store,
            relations: &self.relations,
            bounds,
            head_at: &self.head_at,
            rel_names: &self.rel_names,
            deadline: self.deadline,
            room: self.limits.max_atoms.saturating_sub(self.atoms),
            max_atoms: self.limits.max_atoms,
            unshared: [self.k.legal, self.k.goal],
        }
    }

    /// Runs a planned variant whose first step is a scan without an index cut into parts,
    /// one range of that scan's positions each, on `derive_threads` threads against the term
    /// store and relations as they are (`collect_heads`), and adds the heads the parts
    /// collected, part by part in order, as `run_round` adds a round's variants
    /// (`merge_variant`). The serial join reads those positions in that order too, so it
    /// finds the same heads in the same order: a part does not know the heads the parts
    /// before it found, and collects them again, but the merge finds them pending and adds
    /// nothing; every head the serial join would make that a part did not collect held or was
    /// found before, so the new terms get the same ids. Other variants run on this thread.
    /// A variant that only copies the atoms it reads under another name runs no join at all
    /// (`copied_heads`).
    fn derive_in_parts(&mut self, v: &Variant, bounds: &Bounds) -> Result<(), GroundError> {
        let (rel, (lo, hi)) = match v.plan.steps.first() {
            Some(Step::Scan {
                rel,
                range,
                index: None,
                ..
            }) => (*rel, bounds.positions(*rel as usize, *range)),
            _ => return self.derive_planned(v, bounds),
        };
        if let Some(c) = self.copied_heads(v, rel, lo, hi) {
            self.stats.copied_variants += 1;
            let heads = c.pos.len();
            self.store.prepare_growth(heads - heads / 8);
            return self.merge_variant(v, c);
        }
        self.stats.split_variants += 1;
        let parts = self.derive_threads;
        if let Some(key) = v.cache_key {
            let len = self.relations[key.1 as usize].rows.len();
            self.head_at.entry(key).or_default().resize(len, UNBOUND);
        }
        let cx = self.frozen(bounds);
        let step = (hi - lo).div_ceil(parts).max(1);
        let part = |i: usize| {
            let from = lo + i * step;
            collect_heads(&cx, v, &mut Chain::default(), Some((from, (from + step).min(hi))))
        };
        let mut collected: Vec<Collected> = std::thread::scope(|s| {
            let others: Vec<_> = (1..parts).map(|i| s.spawn(move || part(i))).collect();
            let mut all = vec![part(0)];
            all.extend(
                others
                    .into_iter()
                    .map(|h| h.join().expect("no join thread panics")),
            );
            all
        });
        // The parts in order, up to the first that stopped with an error: the serial join
        // would have stopped there.
        if let Some(k) = collected.iter().position(|c| c.result.is_err()) {
            collected.truncate(k + 1);
        }
        let mut parts = collected.into_iter();
        let mut c = parts.next().expect("at least one part");
        for p in parts {
            c.vals.extend(p.vals);
            c.pos.extend(p.pos);
            c.found_at.extend(p.found_at);
            c.solutions += p.solutions;
            c.result = p.result;
            c.time += p.time;
        }
        let heads = c.pos.len();
        self.store.prepare_growth(heads - heads / 8);
        self.merge_variant(v, c)
    }

    /// The heads of variant `v`, whose first step scans positions `lo..hi` of relation `rel`
    /// without an index, without its join, when its rule only gives a relation's atoms
    /// another name: one literal whose arguments are distinct variables, in the head's order
    /// (`t(X, Y) :- calls_of_t(X, Y)`, how the calls of a relation become its atoms in
    /// `calls_as_atoms`, or `true(X) :- next(X)`). Each atom the scan would read is then one
    /// head, whose arguments are the atom's own: they are collected in the scan's order as the
    /// join would collect them, leaving those that held to the merge as `drop_held` does.
    /// Chess's check test has 313,096 such atoms, whose join took about 33 ms of both threads
    /// to unify each atom's seven arguments and keep each head in a set of the heads found.
    fn copied_heads(&self, v: &Variant, rel: RelId, lo: usize, hi: usize) -> Option<Collected> {
        let clock = Instant::now();
        let conj = &self.conjs[v.ci];
        let [Item::Pos(a)] = conj.body.as_slice() else {
            return None;
        };
        if a.args != conj.head.args {
            return None;
        }
        let mut seen = vec![false; conj.nvars];
        for p in a.args.iter() {
            match *p {
                Pat::Var(x) if !seen[x as usize] => seen[x as usize] = true,
                _ => return None,
            }
        }
        let rows = &self.relations[rel as usize].rows;
        let hi = hi.min(rows.len());
        let known = v.cache_key.and_then(|key| self.head_at.get(&key));
        let mut c = Collected {
            vals: Vec::with_capacity(hi.saturating_sub(lo) * a.args.len()),
            pos: Vec::with_capacity(hi.saturating_sub(lo)),
            found_at: Vec::new(),
            solutions: 0,
            result: Ok(()),
            time: Duration::ZERO,
        };
        for (p, &row) in rows.iter().enumerate().take(hi).skip(lo) {
            let skipped = !v.keep.is_empty() && !v.keep[p - lo];
            if skipped || known.is_some_and(|h| h.get(p).is_some_and(|&t| t != UNBOUND)) {
                continue;
            }
            c.vals.extend_from_slice(self.store.args(row));
            c.pos.push(p);
        }
        c.solutions = c.pos.len();
        c.time = clock.elapsed();
        Some(c)
    }

    /// Runs a planned variant on this thread and adds the atoms it derives.
    fn derive_planned(&mut self, v: &Variant, bounds: &Bounds) -> Result<(), GroundError> {
        let ci = v.ci;
        let conj = &self.conjs[ci];
        let head_rel = conj.head.rel;
        self.check_time(head_rel)?;
        let clock = Instant::now();
        let plan = &v.plan;
        let head_item = v.head_item;
        let cache_key = v.cache_key;
        let mut head_at = cache_key
            .and_then(|key| self.head_at.remove(&key))
            .unwrap_or_default();
        if let Some((_, r)) = cache_key {
            head_at.resize(self.relations[r as usize].rows.len(), UNBOUND);
        }
        let head = &conj.head;
        let mut heads = Heads::new(head, self.limits.max_atoms.saturating_sub(self.atoms));
        let mut solutions = 0usize;
        let result = {
            let mut exec = Exec::new(
                StoreRef::Mut(&mut self.store),
                &self.relations,
                bounds,
                Mode::Derive,
                self.deadline,
            );
            exec.delta_keep = &v.keep;
            if let Some(i) = head_item {
                exec.head_item = i;
                exec.head_at = std::borrow::Cow::Owned(std::mem::take(&mut head_at));
            }
            let name = &self.rel_names[head_rel as usize];
            let max_atoms = self.limits.max_atoms;
            let budget = self.budget;
            let to_stop = |e: &'static str| heads_limit(e, max_atoms, name);
            let r = exec.run(conj, plan, &mut |ex: &mut Exec| {
                solutions += 1;
                if solutions > budget {
                    return Err(Stop::Error(limit(OVER_BUDGET, budget, name)));
                }
                if heads.batched {
                    // A head of variables and constants is as deep as its deepest argument
                    // and one more: checked here, at the solution, as `build_atom` would,
                    // unless no term of the store is deep enough for that to pass the limit.
                    let shallow = ex.store.max_depth() < MAX_TERM_DEPTH;
                    let mut depth = 0;
                    for p in head.args.iter() {
                        let t = match p {
                            Pat::Var(v) => ex.binds[*v as usize],
                            Pat::Ground(g) => *g,
                            Pat::Func(..) => unreachable!("batched heads have no function terms"),
                        };
                        if !shallow {
                            depth = depth.max(ex.store.depth(t));
                        }
                        heads.args.push(t);
                    }
                    if depth.saturating_add(1) > MAX_TERM_DEPTH {
                        return Err(to_stop("term_depth"));
                    }
                    heads.at.push(ex.head_pos);
                    if heads.at.len() == HEAD_BATCH {
                        heads.flush(&mut ex.store).map_err(to_stop)?;
                    }
                    return Ok(());
                }
                let t = ex.build_atom(head);
                if ex.store.depth(t) > MAX_TERM_DEPTH {
                    return Err(to_stop("term_depth"));
                }
                heads.found(&mut ex.store, t, ex.head_pos).map_err(to_stop)
            });
            let r = match r {
                Ok(()) | Err(Stop::Found) => heads.flush(&mut exec.store).map_err(to_stop),
                r => r,
            };
            head_at = std::mem::take(&mut exec.head_at).into_owned();
            r
        };
        let time = v.plan_time + clock.elapsed();
        self.finish_variant(v, result, heads, head_at, solutions, time)
    }

    /// Takes the heads a variant's join collected on a join thread (`collect_heads`) in the
    /// order it found them, as `derive_planned` takes them from the join itself: each head is
    /// made (interned), and is new unless it holds (an earlier variant of the round added
    /// it). Every head the join on this thread would have found and the join thread did not
    /// collect held already or was found before in the round, so its term existed: the new
    /// terms are made in the same order, and get the same ids.
    fn merge_variant(&mut self, v: &Variant, c: Collected) -> Result<(), GroundError> {
        let conj = &self.conjs[v.ci];
        let head_rel = conj.head.rel;
        self.check_time(head_rel)?;
        let clock = Instant::now();
        let head = &conj.head;
        let mut head_at = v
            .cache_key
            .and_then(|key| self.head_at.remove(&key))
            .unwrap_or_default();
        if let Some((_, r)) = v.cache_key {
            head_at.resize(self.relations[r as usize].rows.len(), UNBOUND);
            for &(p, t) in &c.found_at {
                head_at[p] = t;
            }
        }
        let name = &self.rel_names[head_rel as usize];
        let max_atoms = self.limits.max_atoms;
        let to_error = |e: &'static str| heads_limit(e, max_atoms, name);
        let mut heads = Heads::new(head, max_atoms.saturating_sub(self.atoms));
        heads.note_held = v.cache_key.is_some();
        let vars = head_vars(head);
        let w = vars.len();
        let mut result = Ok(());
        if heads.batched {
            let from = ArgFrom::of(head, &vars);
            for (k, &pos) in c.pos.iter().enumerate() {
                let vals = &c.vals[k * w..(k + 1) * w];
                heads.args.extend(from.iter().map(|f| f.value(vals)));
                heads.at.push(pos);
                if heads.at.len() == HEAD_BATCH {
                    if let Err(e) = heads.flush(&mut self.store) {
                        result = Err(to_error(e));
                        break;
                    }
                }
            }
        } else {
            let mut binds = vec![UNBOUND; conj.nvars];
            let mut stack = Vec::new();
            for (k, &pos) in c.pos.iter().enumerate() {
                for (j, &x) in vars.iter().enumerate() {
                    binds[x as usize] = c.vals[k * w + j];
                }
                let t = join::build_atom(&mut self.store, head, &binds, &mut stack);
                if let Err(e) = heads.found(&mut self.store, t, pos) {
                    result = Err(to_error(e));
                    break;
                }
            }
        }
        if result.is_ok() {
            result = heads.flush(&mut self.store).map_err(to_error);
        }
        if result.is_ok() {
            result = c.result;
        }
        // The heads the join thread collected that held: what `HeadKnown` would have noted.
        for &(p, t) in &heads.held_at {
            head_at[p] = t;
        }
        let time = v.plan_time + c.time + clock.elapsed();
        self.finish_variant(v, result, heads, head_at, c.solutions, time)
    }

    /// Adds the new atoms a variant found (`heads.pending`), or reports the error its join
    /// stopped with, and keeps its costs.
    fn finish_variant(
        &mut self,
        v: &Variant,
        result: Result<(), Stop>,
        heads: Heads,
        mut head_at: Vec<TermId>,
        solutions: usize,
        time: Duration,
    ) -> Result<(), GroundError> {
        let ci = v.ci;
        let head_rel = self.conjs[ci].head.rel;
        let Heads {
            pending, pending_pos, ..
        } = heads;
        if result.is_err() {
            for &t in &pending {
                self.store.clear_flags(t, PENDING);
            }
        }
        match result {
            Ok(()) => {}
            Err(Stop::Found) => unreachable!("an existence test ends inside the join"),
            Err(Stop::Time) => return Err(self.time_limit(head_rel)),
            Err(Stop::Error(e)) => return Err(e),
        }
        if self.derive_costs.len() < self.conjs.len() {
            self.derive_costs
                .resize_with(self.conjs.len(), DeriveCost::default);
        }
        let (line, _) = self.rule_span(&self.conjs[ci]);
        let derived = pending.len();
        let cost = &mut self.derive_costs[ci];
        if cost.runs == 0 {
            cost.line = line;
            cost.relation.clone_from(&self.rel_names[head_rel as usize]);
        }
        cost.time += time;
        cost.derived += derived;
        cost.solutions += solutions;
        cost.runs += 1;
        // One pass over the new atoms, each read once (in chess a variant adds up to 100,000).
        for (k, (&t, &p)) in pending.iter().zip(&pending_pos).enumerate() {
            self.store.clear_flags(t, PENDING);
            match self.add(ci, t) {
                Ok(true) if v.cache_key.is_some() => head_at[p] = t,
                Ok(_) => {}
                Err(e) => {
                    for &u in &pending[k + 1..] {
                        self.store.clear_flags(u, PENDING);
                    }
                    return Err(e);
                }
            }
        }
        if let Some(key) = v.cache_key {
            self.head_at.insert(key, head_at);
        }
        if let Some(i) = self.conjs[ci].rule {
            let cost = &mut self.costs[i];
            cost.derive += time;
            cost.derived += derived;
        }
        Ok(())
    }

    /// Adds atom `t`, derived by rule `ci`, to its relation, and says whether it did. `legal`
    /// and `goal` atoms of something that is not a role are left out: nobody can ever ask for
    /// them.
    fn add(&mut self, ci: usize, t: TermId) -> Result<bool, GroundError> {
        let rel = self.conjs[ci].head.rel;
        if rel == self.k.legal || rel == self.k.goal {
            let args = self.store.args(t);
            if !self.role_index.contains_key(&args[0]) {
                return Ok(false);
            }
            if rel == self.k.goal && goal_value(&self.store, args[1], self.desc).is_none() {
                let (line, col) = self.rule_span(&self.conjs[ci]);
                return Err(GroundError::Unsupported {
                    line,
                    col,
                    message: format!(
                        "goal value {} is not a natural number",
                        self.store.text(args[1], &self.desc.symbols)
                    ),
                });
            }
        }
        self.store.set_flags(t, HOLDS);
        let rows = &mut self.relations[rel as usize].rows;
        self.store.set_position(t, rows.len());
        rows.push(t);
        self.atoms += 1;
        if self.atoms > self.limits.max_atoms {
            return Err(limit(
                "max_atoms",
                self.limits.max_atoms,
                &self.rel_names[rel as usize],
            ));
        }
        Ok(true)
    }

    /// Instantiates every rule of a dynamic relation and assembles the ground program.
    pub fn instantiate(mut self) -> Result<(Grounded, GroundStats), GroundError> {
        let start = Instant::now();
        let k = self.k;
        let n = self.rels.len();
        let lens: Vec<usize> = self.relations.iter().map(|r| r.rows.len()).collect();
        let bounds = Bounds {
            old: lens.clone(),
            all: lens,
        };
        let none = vec![false; n];
        let mut out = Out {
            atom_of: Vec::new(),
            aux_of: Vec::new(),
            atoms: Vec::new(),
            rules: GroundRules::new(),
            staged: GroundRules::new(),
            alias: Vec::new(),
            term_of: Vec::new(),
            known: FxHashMap::default(),
            settled: Vec::new(),
            settled_upto: 0,
            body: Vec::new(),
            scratch: Vec::new(),
            ranges: Vec::new(),
            local: Vec::new(),
            settled_by_calls: vec![false; n],
        };
        let cx = KindCx {
            k,
            role_index: &self.role_index,
            desc: self.desc,
            opaque: &self.opaque,
        };
        // Relations are instantiated dependencies first, so that when the rules of one are
        // settled (`Out::settle`), every atom their bodies read from other relations already has
        // its final identity.
        let instantiated = |c: &Conj| c.rule.is_some() && !c.magic && self.output[c.head.rel as usize];
        let mut deps: Vec<Vec<RelId>> = vec![Vec::new(); n];
        let mut rules_of: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (ci, c) in self.conjs.iter().enumerate() {
            if !instantiated(c) {
                continue;
            }
            rules_of[c.head.rel as usize].push(ci);
            for item in &c.body {
                if let Item::Pos(a) | Item::Neg(a) = item {
                    if self.output[a.rel as usize] {
                        deps[c.head.rel as usize].push(a.rel);
                    }
                }
            }
        }
        let order = rule_order(&deps, &rules_of);
        drop(rules_of);
        // Every rule is planned first, in order: planning builds the indexes the joins use,
        // and the joins only read them, so the plans are the ones made between the joins.
        let mut plans: Vec<(usize, Plan, Duration)> = Vec::new();
        for &ci in order.iter().flatten() {
            let conj = &self.conjs[ci];
            self.check_time(conj.head.rel)?;
            let clock = Instant::now();
            let plan = join::plan(
                conj,
                None,
                &none,
                &self.output,
                Mode::Instantiate,
                Some(self.k.does),
                &bounds,
                &mut self.relations,
                &self.store,
            );
            plans.push((ci, plan, clock.elapsed()));
        }
        // The joins of the rules run on worker threads, each rule in one, and hand their
        // instances over in batches; this thread writes them out (`Out::atom`, `add_rule`,
        // `add_aux_rules`) rule by rule in order, and settles each component. The joins of
        // instantiation only read the term store and the relations, so the threads share
        // them. Each rule's join numbers its auxiliary atoms from 0 and the output shifts them
        // past those of the rules before it, so the output sees the same instances, atoms and
        // numbers in the same order as one thread running the rules in turn would, whatever
        // the threads' timing, and makes the same ground program. A join whose sub-joins have
        // a family reads the identities settled before its component (`Exec::canon`), so it
        // is handed out when the component before it is settled; the others read nothing the
        // output decides and are handed out at once. A free thread takes the first rule in
        // order that it has been handed, so the joins run ahead of the output only where a
        // thread would otherwise wait: while a component is settled, or beside its last rule.
        let conjs = &self.conjs;
        let jc = JoinCx {
            conjs,
            store: &self.store,
            relations: &self.relations,
            rel_names: &self.rel_names,
            limits: self.limits,
            deadline: self.deadline,
            desc: self.desc,
            k,
            bounds: &bounds,
            by_calls: &self.by_calls,
        };
        let store = &self.store;
        let rel_names = &self.rel_names;
        let limits = self.limits;
        let workers = self.join_threads.max(1);
        let run_ahead = self.run_ahead;
        let mut spent: Vec<(usize, Duration, usize)> = Vec::with_capacity(plans.len());
        let jobs = Jobs::default();
        std::thread::scope(|scope| -> Result<(), GroundError> {
            // Closes the queue when this returns, early or not, so that the workers stop.
            let jobs = Closing(&jobs);
            for _ in 0..workers {
                let (jc, jobs) = (&jc, jobs.0);
                scope.spawn(move || join_worker(jc, jobs));
            }
            let mut canon: Arc<Vec<u32>> = Arc::new(Vec::new());
            // What the joins that read no settled identity are given: they never look.
            let unread: Arc<Vec<u32>> = Arc::new(Vec::new());
            let component_of: Vec<usize> = order
                .iter()
                .enumerate()
                .flat_map(|(c, cis)| std::iter::repeat_n(c, cis.len()))
                .collect();
            // Not bounded: a thread that runs a later rule than the one being written out must
            // not wait for it (a bound of 16 batches made chess's large rules run one after
            // another). The batches waiting are at most the output of the rules run ahead.
            let mut handed: Vec<Option<std::sync::mpsc::Receiver<Handed>>> =
                (0..plans.len()).map(|_| None).collect();
            // The heads by guard position of each component, guard relation and head relation.
            let mut guard_heads: FxHashMap<(usize, RelId, RelId), Arc<[AtomicU32]>> = FxHashMap::default();
            let mut hand = |j: usize, canon: &Arc<Vec<u32>>| {
                let (to_out, from_join) = std::sync::mpsc::channel();
                let (ci, plan) = (plans[j].0, &plans[j].1);
                let heads = head_guard(&conjs[ci], plan).map(|(_, rel)| {
                    let key = (component_of[j], rel, conjs[ci].head.rel);
                    let rows = jc.relations[rel as usize].rows.len();
                    Arc::clone(
                        guard_heads
                            .entry(key)
                            .or_insert_with(|| (0..rows).map(|_| AtomicU32::new(HEAD_UNKNOWN)).collect()),
                    )
                });
                jobs.0.push(Job {
                    order: j,
                    ci,
                    plan,
                    canon: Arc::clone(canon),
                    heads,
                    to_out,
                });
                Some(from_join)
            };
            let ahead: Vec<bool> = plans
                .iter()
                .map(|(_, plan, _)| run_ahead && !plan.reads_settled())
                .collect();
            for (j, slot) in handed.iter_mut().enumerate() {
                if ahead[j] {
                    *slot = hand(j, &unread);
                }
            }
            let mut next_aux = 0u32;
            let mut at = 0;
            for cis in &order {
                let first = at;
                let rules = &plans[at..at + cis.len()];
                at += cis.len();
                for (j, slot) in handed.iter_mut().enumerate().take(at).skip(first) {
                    if !ahead[j] {
                        *slot = hand(j, &canon);
                    }
                }
                for (j, (ci, _, plan_time)) in (first..).zip(rules) {
                    let Some(from_join) = handed[j].take() else {
                        return Err(GroundError::Internal(
                            "a rule was not handed to a join thread".into(),
                        ));
                    };
                    let head_rel = conjs[*ci].head.rel;
                    let name = &rel_names[head_rel as usize];
                    let rules_before = out.rules.len() + out.staged.len();
                    let mut out_time = Duration::ZERO;
                    let end = loop {
                        let mut batch = match from_join.recv() {
                            Ok(Handed::Batch(b)) => b,
                            Ok(Handed::Failed(e)) => return Err(e),
                            Err(_) => return Err(GroundError::Internal("a join thread stopped".into())),
                        };
                        let clock = Instant::now();
                        batch.shift_aux(next_aux);
                        let (mut lit_from, mut aux_from, mut aux_lit_from) = (0, 0, 0);
                        for &(head, lit_end, aux_end) in &batch.insts {
                            let (lit_end, aux_end) = (lit_end as usize, aux_end as usize);
                            if head != NO_HEAD {
                                let head = out.atom(head, head_rel, store, &cx)?;
                                out.add_rule(head, &batch.lits[lit_from..lit_end], store, &cx, limits, name)?;
                            }
                            if aux_end > aux_from {
                                let rules = &batch.aux_rules[aux_from..aux_end];
                                out.add_aux_rules(
                                    rules,
                                    &batch.aux_lits,
                                    aux_lit_from,
                                    store,
                                    &cx,
                                    limits,
                                    name,
                                )?;
                                aux_lit_from = rules[rules.len() - 1].1;
                            }
                            lit_from = lit_end;
                            aux_from = aux_end;
                        }
                        out_time += clock.elapsed();
                        if let Some(end) = batch.end {
                            break end;
                        }
                    };
                    next_aux = next_aux
                        .checked_add(end.aux_count)
                        .ok_or_else(|| limit("auxiliary atoms", u32::MAX as usize, name))?;
                    let made = out.rules.len() + out.staged.len() - rules_before;
                    spent.push((*ci, *plan_time + end.join_time + out_time, made));
                }
                // The joins have let go of their copies of the identities before their last
                // batch, so this takes the one left rather than copying it.
                out.settle(Arc::make_mut(&mut canon))?;
                for &ci in cis {
                    let r = conjs[ci].head.rel as usize;
                    out.settled_by_calls[r] = jc.by_calls[r];
                }
            }
            Ok(())
        })?;
        for (ci, time, made) in spent {
            if let Some(i) = self.conjs[ci].rule {
                let cost = &mut self.costs[i];
                cost.instantiate += time;
                cost.rules += made;
            }
        }
        // The twins the builder relies on: `does` for every `legal`, `true` for every `next`,
        // and the initial state.
        let mut twins = Vec::new();
        for (term, &id) in out.atom_of.iter().enumerate() {
            if id == u32::MAX {
                continue;
            }
            let kind = out.atoms[id as usize].kind;
            let args = self.store.args(term as TermId);
            match kind {
                AtomKind::Legal { .. } => twins.push((self.desc.keywords.does, args.to_vec(), k.does)),
                AtomKind::Next => twins.push((self.desc.keywords.true_, args.to_vec(), k.true_)),
                _ => {}
            }
        }
        // Sorting keeps the numbering independent of the hash map's order.
        twins.sort_unstable_by(|a, b| a.1.cmp(&b.1).then(a.2.cmp(&b.2)));
        for (sym, args, rel) in twins {
            let t = self.store.intern(sym, &args);
            out.atom(t, rel, &self.store, &cx)?;
        }
        let mut init = Vec::new();
        for &f in &self.relations[k.init as usize].rows {
            let fact = self.store.args(f)[0];
            let t = self.store.intern(self.desc.keywords.true_, &[fact]);
            init.push(out.atom(t, k.true_, &self.store, &cx)?);
        }
        init.sort_unstable();
        init.dedup();

        let mut stats = self.stats.clone();
        for (r, rel) in self.relations.iter().enumerate() {
            if self.dynamic[r] {
                stats.dynamic_atoms += rel.rows.len();
            } else {
                stats.static_atoms += rel.rows.len();
            }
        }
        let mut sizes: Vec<(String, usize)> = self
            .relations
            .iter()
            .enumerate()
            .map(|(r, rel)| (self.rel_names[r].clone(), rel.rows.len()))
            .collect();
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        sizes.truncate(10);
        stats.largest = sizes;
        for (i, c) in self.costs.iter_mut().enumerate() {
            c.line = self.desc.rules[i].span.line;
            let head = &self.desc.rules[i].head;
            c.relation = format!("{}/{}", self.desc.symbols.name(head.rel), head.args.len());
        }
        let mut costs = std::mem::take(&mut self.costs);
        costs.sort_by_key(|c| std::cmp::Reverse(c.derive + c.instantiate));
        costs.truncate(10);
        stats.costliest = costs;
        stats.terms = self.store.len();
        stats.bytes = self.store.bytes() + self.relations.iter().map(Relation::bytes).sum::<usize>();
        // What is left runs on the threads the joins had: the atoms' texts, on `workers`
        // threads by ranges of atoms, and the final sort of the rules beside them. The relations
        // and indexes are not needed any more and are freed on a thread of their own; the terms
        // (425 MB with them in chess) once the texts are written.
        let relations = std::mem::take(&mut self.relations);
        let store = std::mem::take(&mut self.store);
        drop(out.atom_of);
        let mut aux_num = vec![u32::MAX; out.atoms.len()];
        for (n, &id) in out.aux_of.iter().enumerate() {
            if id != u32::MAX {
                aux_num[id as usize] = n as u32;
            }
        }
        drop(out.aux_of);
        let mut rules = out.rules;
        let mut atoms = out.atoms;
        let symbols = &self.desc.symbols;
        std::thread::scope(|scope| {
            scope.spawn(move || drop(relations));
            let sort = scope.spawn(|| rules.sort_dedup());
            atom_texts(
                &mut atoms,
                &out.term_of,
                &aux_num,
                &store,
                symbols,
                self.or_relations,
                workers,
            );
            drop(store);
            // A panic of the sort is the sort's; it is passed on as it is.
            if let Err(p) = sort.join() {
                std::panic::resume_unwind(p);
            }
        });
        stats.instantiate = start.elapsed();
        Ok((
            Grounded {
                roles: self.role_names,
                atoms,
                rules,
                init,
            },
            stats,
        ))
    }
}

/// One rule variant of a round of the fixpoint, planned: rule `ci`, with the delta literal and
/// the atoms of it to read (`keep`) its plan was made for.
struct Variant {
    ci: usize,
    keep: Vec<bool>,
    plan: Plan,
    /// The literal whose position tells the head (`head_literal`), and the key of the heads
    /// known by its position (`Grounder::head_at`).
    head_item: Option<usize>,
    cache_key: Option<(RelId, RelId)>,
    /// How many atoms the plan's first scan reads: what `Grounder::run_round` goes by.
    size: usize,
    plan_time: Duration,
}

/// The least number of atoms the first scans of a round's variants read together (see
/// [`first_scan_size`]) for the round to run on several threads. Most rounds of a game's
/// component have little to do (a step counter's round finds a handful of atoms); for them a
/// thread would cost more than it saves. The choice changes nothing but the time.
const PARALLEL_ROUND: usize = 256;

/// The fewest atoms the first scan of a variant of a round of one chain must read for the
/// variant to be cut into parts on several threads (`Grounder::derive_in_parts`): below it,
/// the threads cost more than they save. The choice changes nothing but the time.
const SPLIT_VARIANT: usize = 4096;

/// The least number of atoms the indexes must take in all, before a round, for them to be
/// brought up to date on several threads (`join::catch_up_all`); below it a thread would
/// cost more than it saves. The choice changes nothing but the time.
const CATCH_UP_ROWS: usize = 20_000;

/// How many atoms the first scan of `plan` reads (in a sub-join, if the plan begins with one):
/// a cheap measure of a variant's work, read from the plan and the round's bounds alone.
fn first_scan_size(plan: &Plan, bounds: &Bounds, keep: &[bool]) -> usize {
    let mut steps = &plan.steps[..];
    loop {
        match steps
            .iter()
            .find(|s| matches!(s, Step::Scan { .. } | Step::Sub { .. }))
        {
            Some(Step::Scan { rel, range, .. }) => {
                let r = *rel as usize;
                return match range {
                    join::Range::Old => bounds.old[r],
                    join::Range::All => bounds.all[r],
                    join::Range::Delta if keep.is_empty() => bounds.all[r] - bounds.old[r],
                    join::Range::Delta => keep.iter().filter(|&&k| k).count(),
                };
            }
            Some(Step::Sub { sub }) => steps = &plan.subs[*sub].steps,
            _ => return 0,
        }
    }
}

/// The variables of `head`, in order of first occurrence.
fn head_vars(head: &AtomPat) -> Vec<u32> {
    let mut vars = Vec::new();
    head.for_each_var(&mut |v| {
        if !vars.contains(&v) {
            vars.push(v);
        }
    });
    vars
}

/// Where an argument of a head of variables and constants comes from, given the values of
/// the head's variables (`head_vars`) as a join thread collects them: worked out once per
/// variant rather than searched for at every argument of every head.
#[derive(Clone, Copy)]
enum ArgFrom {
    /// The value of the head's variable at this position of `head_vars`.
    Val(usize),
    /// A constant.
    Term(TermId),
}

impl ArgFrom {
    fn of(head: &AtomPat, vars: &[u32]) -> Vec<ArgFrom> {
        head.args
            .iter()
            .map(|p| match p {
                Pat::Var(x) => ArgFrom::Val(vars.iter().position(|y| y == x).expect("a head variable")),
                Pat::Ground(g) => ArgFrom::Term(*g),
                Pat::Func(..) => unreachable!("batched heads have no function terms"),
            })
            .collect()
    }

    #[inline]
    fn value(self, vals: &[TermId]) -> TermId {
        match self {
            ArgFrom::Val(i) => vals[i],
            ArgFrom::Term(t) => t,
        }
    }
}

/// What the join threads of a round of the fixpoint read (see `Grounder::run_round`): the
/// term store, relations and heads known by position as they were at the round's start.
struct FrozenCx<'a> {
    conjs: &'a [Conj],
    store: &'a TermStore,
    relations: &'a [Relation],
    bounds: &'a Bounds,
    head_at: &'a FxHashMap<(RelId, RelId), Vec<TermId>>,
    rel_names: &'a [String],
    deadline: Instant,
    /// How many new atoms the limit on atoms left room for at the round's start, and the limit.
    room: usize,
    max_atoms: usize,
    /// The relations whose heads a chain does not share (`Chain`): `legal` and `goal`, some of
    /// whose heads are never added (`Grounder::add`).
    unshared: [RelId; 2],
}

/// What a join thread hands from one variant of a chain (the variants of a round with one
/// head relation, see `Grounder::run_round`) to the next, so that each knows the heads the
/// earlier ones found, as it would if they had been added: the set of heads found, and its
/// own copy of each set of heads known by position, with the positions of those heads marked
/// `COLLECTED`. Only for heads of variables and constants, of a relation whose heads are all
/// added.
#[derive(Default)]
struct Chain {
    heads: Option<HeadsFound>,
    head_at: FxHashMap<(RelId, RelId), Vec<TermId>>,
    /// How many heads the earlier variants collected: atoms they add.
    collected: usize,
}

/// Marks, in a chain's copy of the heads known by position, a head an earlier variant found:
/// not a term id (it may have none yet), only not `UNBOUND`. Term ids stay far below it.
const COLLECTED: TermId = UNBOUND - 1;

/// The heads one variant's join found on a join thread, in the order found, each once, for
/// `Grounder::merge_variant`: those that did not hold at the round's start.
struct Collected {
    /// The values of the head's variables (`head_vars`) of each head, one after another.
    vals: Vec<TermId>,
    /// The position the variant's `head_item` scan matched for each head.
    pos: Vec<usize>,
    /// The heads `Step::HeadKnown` found to hold, by position (`Exec::head_at_found`).
    found_at: Vec<(usize, TermId)>,
    solutions: usize,
    /// How the join ended; an error comes after the heads collected before it.
    result: Result<(), Stop>,
    time: Duration,
}

/// Runs variant `v`'s join against the store and relations of `cx`, which it only reads, and
/// collects its heads. A head that held at the round's start is left out, as is one found
/// before in the same join or, in a chain that shares its heads, by an earlier variant of
/// the chain (`Exec::heads_found`, `Chain`): the join on the calling thread has those marked
/// in the store. A head another variant before `v` in the round added is not known here (in
/// a chain that shares no heads); `Grounder::merge_variant` finds it held.
fn collect_heads(cx: &FrozenCx, v: &Variant, chain: &mut Chain, part: Option<(usize, usize)>) -> Collected {
    let clock = Instant::now();
    let conj = &cx.conjs[v.ci];
    let head = &conj.head;
    let vars = head_vars(head);
    let mut c = Collected {
        vals: Vec::new(),
        pos: Vec::new(),
        found_at: Vec::new(),
        solutions: 0,
        result: Ok(()),
        time: Duration::ZERO,
    };
    let share = !cx.unshared.contains(&head.rel) && Heads::new(head, 0).batched;
    let mut exec = Exec::new(
        StoreRef::Shared(cx.store),
        cx.relations,
        cx.bounds,
        Mode::Derive,
        cx.deadline,
    );
    exec.delta_keep = &v.keep;
    exec.first_part = part;
    // `HeadKnown` stops looking the head up in the term table when its first lookups find
    // few heads that hold: in chess nearly every head that reaches it is a new atom, for
    // which the lookup was a cache miss that found nothing (a seventh of the join threads in
    // perf), while in racer4 many hold, and their existence tests cost more than the
    // lookups. A head that held at the round's start and was not looked up goes on to the
    // existence test and is collected; the merge finds it held, adds nothing, and notes it
    // by position as `HeadKnown` would have (`Heads::held_at`).
    exec.head_lookup_adaptive = true;
    if let (Some(i), Some(key)) = (v.head_item, v.cache_key) {
        exec.head_item = i;
        let round_start = cx.head_at.get(&key).map_or(&[][..], |h| &h[..]);
        exec.head_at = if share {
            exec.note_head_at = true;
            std::borrow::Cow::Owned(chain.head_at.remove(&key).unwrap_or_else(|| round_start.to_vec()))
        } else {
            std::borrow::Cow::Borrowed(round_start)
        };
    }
    exec.heads_found = Some(match chain.heads.take() {
        Some(h) if share => h.for_head(head.args.clone()),
        _ if share => HeadsFound::new(head.args.clone()),
        _ => HeadsFound::new(vars.iter().map(|&x| Pat::Var(x)).collect()),
    });
    let name = &cx.rel_names[conj.head.rel as usize];
    // Heads collected by the chain's earlier variants are atoms added before this one.
    let held = cx.bounds.all[head.rel as usize];
    let room = if share {
        cx.room.saturating_sub(chain.collected)
    } else {
        cx.room
    }
    .saturating_add(held);
    // The store does not change while the join runs: if its deepest term and the head's own
    // levels stay within the limit, no head can pass it, and the depth of each is not read.
    let shallow = cx.store.max_depth().saturating_add(head_levels(head)) <= MAX_TERM_DEPTH;
    let r = exec.run(conj, &v.plan, &mut |ex: &mut Exec| {
        c.solutions += 1;
        if !ex.new_head() {
            return Ok(());
        }
        if !shallow && join::atom_depth(&ex.store, head, &ex.binds) > MAX_TERM_DEPTH {
            return Err(Stop::Error(limit("term_depth", MAX_TERM_DEPTH as usize, name)));
        }
        c.vals.extend(vars.iter().map(|&x| ex.binds[x as usize]));
        c.pos.push(ex.head_pos);
        // A head collected here is new, or held at the round's start (at most `held` of
        // them, as they are different atoms of the relation), or (when the chain shares no
        // heads) was added by an earlier variant of the round. So more of them than the room
        // left at this variant's start and `held` means more new atoms than the room left
        // when its turn comes: `merge_variant` finds the limit passed among the heads
        // collected, and this error is the one it would report. (Looking each head up here
        // to leave out those that hold would cost a cache miss each, which the merge's
        // batched interning overlaps.)
        if c.pos.len() > room {
            return Err(Stop::Error(limit("max_atoms", cx.max_atoms, name)));
        }
        Ok(())
    });
    c.found_at = std::mem::take(&mut exec.head_at_found);
    // A plan with a `HeadKnown` step passes every solution through it: it looked the head
    // up and went no further where it held, or, once it stopped looking heads up (few held),
    // the heads that held are left to the merge, which finds them held. Either way they are
    // not looked up again here.
    let head_checked = v.plan.steps.iter().any(|s| matches!(s, Step::HeadKnown));
    if Heads::new(head, 0).batched && !head_checked {
        drop_held(cx.store, head, &vars, &mut c);
    }
    if share {
        chain.heads = exec.heads_found.take();
        chain.collected += c.pos.len();
        if let Some(key) = v.cache_key {
            let mut head_at = std::mem::take(&mut exec.head_at).into_owned();
            for &p in &c.pos {
                if let Some(h) = head_at.get_mut(p) {
                    *h = COLLECTED;
                }
            }
            chain.head_at.insert(key, head_at);
        }
    }
    c.result = match r {
        Ok(()) | Err(Stop::Found) => Ok(()),
        r => r,
    };
    c.time = clock.elapsed();
    c
}

/// How much deeper than the deepest of its arguments' values an atom of pattern `a` can be:
/// one level for the atom and one for each function term its arguments nest.
fn head_levels(a: &AtomPat) -> u16 {
    fn levels(p: &Pat) -> u16 {
        match p {
            Pat::Func(_, ps) => ps.iter().map(levels).max().unwrap_or(0).saturating_add(1),
            Pat::Var(_) | Pat::Ground(_) => 0,
        }
    }
    a.args.iter().map(levels).max().unwrap_or(0).saturating_add(1)
}

/// Leaves out of `c` the heads (of variables and constants) that held at the round's start:
/// the merge would only find them held, after a cache miss each on the main thread. They are
/// looked up here `HEAD_BATCH` at a time after `TermStore::touch`, whose loads overlap.
///
/// Where few of them hold, the lookups are a cache miss each for nothing, and the merge
/// looks the new heads up again when it interns them: in chess the magic rules of the rays
/// collect 262,144 heads each, nearly all new. So the batches are looked up while at least
/// an eighth of the heads looked up so far held (after the first `DROP_SAMPLE` batches, all
/// looked up); otherwise only every `DROP_RECHECK`th batch is, and one in which an eighth
/// held turns the lookups on again. A head left in `c` that held is found held by the merge,
/// which adds nothing and notes it by position as `HeadKnown` would (`Heads::held_at`), so
/// this changes only where the lookups are made.
fn drop_held(store: &TermStore, head: &AtomPat, vars: &[u32], c: &mut Collected) {
    let w = vars.len();
    let arity = head.args.len();
    let mut args: Vec<TermId> = Vec::with_capacity(HEAD_BATCH * arity);
    let mut hashes = Vec::with_capacity(HEAD_BATCH);
    let from = ArgFrom::of(head, vars);
    let mut kept = 0;
    let n = c.pos.len();
    let (mut looked, mut held) = (0usize, 0usize);
    for (batch, start) in (0..n).step_by(HEAD_BATCH).enumerate() {
        let end = (start + HEAD_BATCH).min(n);
        let look = batch < DROP_SAMPLE || held * 8 >= looked || batch % DROP_RECHECK == 0;
        if !look {
            let len = end - start;
            c.vals.copy_within(start * w..end * w, kept * w);
            c.pos.copy_within(start..end, kept);
            kept += len;
            continue;
        }
        if batch >= DROP_SAMPLE && held * 8 < looked {
            // A new sample: the heads looked up before tell nothing about this stretch.
            (looked, held) = (0, 0);
        }
        args.clear();
        for k in start..end {
            let vals = &c.vals[k * w..(k + 1) * w];
            args.extend(from.iter().map(|f| f.value(vals)));
        }
        for (k, (_, t)) in (start..end).zip(store.find_held(head.sym, arity, &args, &mut hashes)) {
            looked += 1;
            if t.is_some() {
                held += 1;
                continue;
            }
            c.vals.copy_within(k * w..(k + 1) * w, kept * w);
            c.pos[kept] = c.pos[k];
            kept += 1;
        }
    }
    c.vals.truncate(kept * w);
    c.pos.truncate(kept);
}

/// What the join threads of instantiation read (see `Grounder::instantiate`).
struct JoinCx<'a> {
    conjs: &'a [Conj],
    store: &'a TermStore,
    relations: &'a [Relation],
    rel_names: &'a [String],
    limits: &'a GroundLimits,
    deadline: Instant,
    desc: &'a Description,
    k: Keys,
    bounds: &'a Bounds,
    by_calls: &'a [bool],
}

/// The most threads that run the joins of instantiation. Each holds a join's tables (the
/// sub-joins' memos and families) while it runs, so more threads take more memory.
const MAX_JOIN_THREADS: usize = 4;

/// One rule for a join thread to run.
struct Job<'p> {
    /// The rule's place in the order of instantiation, its index in `conjs` and its plan.
    order: usize,
    ci: usize,
    plan: &'p Plan,
    /// The identities settled before the component (`Exec::canon`).
    canon: Arc<Vec<u32>>,
    /// For a rule with a guard of the head's arguments (`head_guard`), the head atom of each
    /// of the guard's atoms by its position, shared by the rules of the component with that
    /// guard and head relation whichever threads run them.
    heads: Option<Arc<[AtomicU32]>>,
    /// Where the rule's instances go.
    to_out: std::sync::mpsc::Sender<Handed>,
}

/// The rules handed to the join threads and not taken yet, the first in order taken first.
#[derive(Default)]
struct Jobs<'p> {
    queue: std::sync::Mutex<JobQueue<'p>>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct JobQueue<'p> {
    /// The rules waiting, by their place in the order of instantiation.
    waiting: std::collections::BTreeMap<usize, Job<'p>>,
    /// Set when no more rules will come.
    closed: bool,
}

impl<'p> Jobs<'p> {
    fn push(&self, job: Job<'p>) {
        if let Ok(mut q) = self.queue.lock() {
            q.waiting.insert(job.order, job);
            self.ready.notify_one();
        }
    }

    /// The first rule waiting, once there is one; `None` once the queue is closed.
    fn take(&self) -> Option<Job<'p>> {
        let mut q = self.queue.lock().ok()?;
        loop {
            if q.closed {
                return None;
            }
            if let Some((_, job)) = q.waiting.pop_first() {
                return Some(job);
            }
            q = self.ready.wait(q).ok()?;
        }
    }

    fn close(&self) {
        if let Ok(mut q) = self.queue.lock() {
            q.closed = true;
            q.waiting.clear();
        }
        self.ready.notify_all();
    }
}

/// Closes the queue of jobs when dropped.
struct Closing<'a, 'p>(&'a Jobs<'p>);

impl Drop for Closing<'_, '_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// What a join thread hands the output for a rule: a batch of instances, or the error that
/// stopped it (after the batch of the instances found before it).
enum Handed {
    Batch(Batch),
    Failed(GroundError),
}

/// Instances of one rule, in the order its join found them.
struct Batch {
    /// For each instance: its head atom's term (`NO_HEAD` for the auxiliary rules left at the
    /// end of the run), where its body ends in `lits`, and where the auxiliary rules made
    /// with it end in `aux_rules` (atom number and end of the body in `aux_lits`, as
    /// `Exec::aux_rules` holds them).
    insts: Vec<(TermId, u32, u32)>,
    lits: Vec<OutLit>,
    aux_rules: Vec<(u32, usize)>,
    aux_lits: Vec<OutLit>,
    /// Set on the last batch of the rule.
    end: Option<RuleEnd>,
}

/// What a join thread says at the end of a rule.
struct RuleEnd {
    /// The time the rule's join took.
    join_time: Duration,
    /// How many auxiliary atoms the rule's join made (numbered from 0).
    aux_count: u32,
}

/// In a batch, an instance that only carries auxiliary rules.
const NO_HEAD: TermId = TermId::MAX;
/// How many instances a batch holds at most: enough that handing batches over costs little,
/// few enough that the output starts early and the batches in flight take little memory.
const BATCH_INSTANCES: usize = 4096;
/// How many literals a batch holds at most, in bodies and auxiliary rules together.
const BATCH_LITERALS: usize = 1 << 16;

impl Batch {
    fn new() -> Self {
        Batch {
            insts: Vec::new(),
            lits: Vec::new(),
            aux_rules: Vec::new(),
            aux_lits: Vec::new(),
            end: None,
        }
    }

    /// An empty batch with room for what `full` holds. A rule's batches are much alike, and
    /// growing each from nothing moved its arrays several times over (a twentieth of the join
    /// threads' time in chess, in `realloc` and the page faults of the copies).
    fn like(full: &Batch) -> Self {
        Batch {
            insts: Vec::with_capacity(full.insts.len()),
            lits: Vec::with_capacity(full.lits.len()),
            aux_rules: Vec::with_capacity(full.aux_rules.len()),
            aux_lits: Vec::with_capacity(full.aux_lits.len()),
            end: None,
        }
    }

    /// Adds an instance with head `head` and body `lits`, and the auxiliary rules made since
    /// the last one, emptying `aux_rules` and `aux_lits`.
    fn push(
        &mut self,
        head: TermId,
        lits: &[OutLit],
        aux_rules: &mut Vec<(u32, usize)>,
        aux_lits: &mut Vec<OutLit>,
    ) {
        self.lits.extend_from_slice(lits);
        let base = self.aux_lits.len();
        self.aux_rules
            .extend(aux_rules.iter().map(|&(n, end)| (n, base + end)));
        self.aux_lits.extend_from_slice(aux_lits);
        aux_rules.clear();
        aux_lits.clear();
        self.insts
            .push((head, self.lits.len() as u32, self.aux_rules.len() as u32));
    }

    /// Keeps the first `n` instances and what they carry.
    fn truncate(&mut self, n: usize) {
        self.insts.truncate(n);
        let (lit_end, aux_end) = self
            .insts
            .last()
            .map_or((0, 0), |&(_, l, a)| (l as usize, a as usize));
        self.lits.truncate(lit_end);
        self.aux_rules.truncate(aux_end);
        self.aux_lits.truncate(self.aux_rules.last().map_or(0, |r| r.1));
    }

    fn full(&self) -> bool {
        self.insts.len() >= BATCH_INSTANCES || self.lits.len() + self.aux_lits.len() >= BATCH_LITERALS
    }

    /// Numbers the auxiliary atoms from `base` rather than from 0. The join compares them
    /// only with each other, so the order and equalities it saw are the same.
    fn shift_aux(&mut self, base: u32) {
        if base == 0 {
            return;
        }
        for l in self.lits.iter_mut().chain(self.aux_lits.iter_mut()) {
            if l.rel == AUX {
                l.atom += base;
            }
        }
        for r in &mut self.aux_rules {
            r.0 += base;
        }
    }
}

/// A join thread of instantiation: runs the rules it is handed until there are none.
fn join_worker(jc: &JoinCx, jobs: &Jobs) {
    while let Some(job) = jobs.take() {
        run_join(jc, job);
    }
}

/// Runs the join of one rule and hands its instances over, in the order found.
fn run_join(jc: &JoinCx, job: Job) {
    let Job {
        ci,
        plan,
        canon,
        heads,
        to_out,
        ..
    } = job;
    let k = jc.k;
    let conj = &jc.conjs[ci];
    let head_rel = conj.head.rel;
    let name = &jc.rel_names[head_rel as usize];
    let time_limit = || {
        limit(
            "max_time",
            jc.limits.max_time.as_millis().min(u128::from(u64::MAX)) as u64 as usize,
            name,
        )
    };
    if Instant::now() > jc.deadline {
        let _ = to_out.send(Handed::Failed(time_limit()));
        return;
    }
    let clock = Instant::now();
    let guard = head_guard(conj, plan);
    let mut exec = Exec::new(
        StoreRef::Shared(jc.store),
        jc.relations,
        jc.bounds,
        Mode::Instantiate,
        jc.deadline,
    );
    exec.canon = &canon;
    if plan.reads_settled() {
        // Handed out once the components before it are settled: an atom taken from the calls
        // that `canon` lacks has no rule.
        exec.by_calls = jc.by_calls;
    }
    exec.exclusive = Some(k.does);
    exec.head_item = guard.map_or(usize::MAX, |(item, _)| item);
    let mut batch = Batch::new();
    let mut gone = false;
    // Looking a head up in the term table is mostly a cache miss on its slot and record (a
    // 7-ary atom in chess's ray relations, about 900,000 of them), so heads of variables and
    // constants are looked up `LATER_HEADS` at a time once `TermStore::touch` has brought their
    // slots in together, just before their batch goes out. A head that does not hold is then
    // an instance that should not have been in the batch: only `legal` and `goal` heads may
    // fail to hold, so those are looked up at once, and any other is the error below.
    let later = !conj.head.args.is_empty()
        && conj.head.args.iter().all(|p| !matches!(p, Pat::Func(..)))
        && head_rel != k.legal
        && head_rel != k.goal;
    let mut pending = LaterHeads::default();
    let missed = |args: &[TermId]| {
        let symbols = &jc.desc.symbols;
        let head = match (conj.head.sym.0 as usize) < symbols.len() {
            true => symbols.name(conj.head.sym),
            false => name.as_str(),
        };
        let mut text = format!("({head}");
        for &a in args {
            text.push(' ');
            text.push_str(&jc.store.text(a, symbols));
        }
        text.push(')');
        missed_error(name, &text)
    };
    let result = exec.run(conj, plan, &mut |ex: &mut Exec| {
        // Two threads may both find a head not known yet; they store the same atom.
        let known = heads.as_deref().map(|by_pos| by_pos[ex.head_pos].load(Relaxed));
        let found = match known {
            Some(t) if t != HEAD_UNKNOWN => Some(t).filter(|&t| t != HEAD_NONE),
            _ if later => {
                let pos = if known.is_some() { ex.head_pos } else { usize::MAX };
                pending.at.push((batch.insts.len(), pos));
                pending.args.extend(conj.head.args.iter().map(|p| match p {
                    Pat::Var(v) => ex.binds[*v as usize],
                    Pat::Ground(g) => *g,
                    Pat::Func(..) => unreachable!("only heads of variables and constants wait"),
                }));
                // Written over when the head is looked up, before the batch goes out.
                Some(HEAD_UNKNOWN)
            }
            Some(_) => {
                let t = ex
                    .find_atom(&conj.head)
                    .filter(|&t| ex.store.holds(t))
                    .unwrap_or(HEAD_NONE);
                if let Some(by_pos) = heads.as_deref() {
                    by_pos[ex.head_pos].store(t, Relaxed);
                }
                Some(t).filter(|&t| t != HEAD_NONE)
            }
            None => ex.find_atom(&conj.head).filter(|&t| ex.store.holds(t)),
        };
        let Some(head) = found else {
            // Only `legal` and `goal` atoms of non-roles are left out of their relations.
            if head_rel == k.legal || head_rel == k.goal {
                return Ok(());
            }
            let mut text = String::new();
            atom_text(ex, &conj.head, &jc.desc.symbols, &mut text);
            return Err(Stop::Error(missed_error(name, &text)));
        };
        // The auxiliary atoms' rules go out as they are made rather than at the end of the
        // rule: chess's check test makes millions, which held hundreds of megabytes beside
        // the rules already out.
        batch.push(head, &ex.lits, &mut ex.aux_rules, &mut ex.aux_lits);
        if pending.at.len() == LATER_HEADS || batch.full() {
            pending
                .look_up(jc.store, &conj.head, heads.as_deref(), &mut batch, missed)
                .map_err(Stop::Error)?;
        }
        if batch.full() {
            let next = Batch::like(&batch);
            let full = std::mem::replace(&mut batch, next);
            if to_out.send(Handed::Batch(full)).is_err() {
                gone = true;
                return Err(Stop::Error(GroundError::Internal("the output stopped".into())));
            }
        }
        Ok(())
    });
    let mut aux_rules = std::mem::take(&mut exec.aux_rules);
    let mut aux_lits = std::mem::take(&mut exec.aux_lits);
    let aux_count = exec.aux_count;
    drop(exec);
    // Let go of the identities before the output settles the component with them.
    drop(canon);
    if gone {
        return;
    }
    // The instances still waiting for their heads were found before whatever stopped the
    // join, so a head among them that does not hold is the error to report.
    let looked_up = pending.look_up(jc.store, &conj.head, heads.as_deref(), &mut batch, missed);
    let failed = match (looked_up, result) {
        (Err(e), _) => Some(e),
        (Ok(()), Ok(()) | Err(Stop::Found)) => None,
        (Ok(()), Err(Stop::Time)) => Some(time_limit()),
        (Ok(()), Err(Stop::Error(e))) => Some(e),
    };
    if let Some(e) = failed {
        // The instances found before the error go out first, as they would have.
        if to_out.send(Handed::Batch(batch)).is_ok() {
            let _ = to_out.send(Handed::Failed(e));
        }
        return;
    }
    batch.push(NO_HEAD, &[], &mut aux_rules, &mut aux_lits);
    batch.end = Some(RuleEnd {
        join_time: clock.elapsed(),
        aux_count,
    });
    let _ = to_out.send(Handed::Batch(batch));
}

/// Writes the text of atom `a` under the bindings of `ex`, without adding it to the store.
fn atom_text(ex: &Exec, a: &AtomPat, symbols: &crate::gdl::Symbols, out: &mut String) {
    // A name, alone without arguments, else in parentheses with its arguments: the atom
    // itself, and every function term in it (which has arguments, `Pat::Func`).
    fn applied(
        ex: &Exec,
        f: crate::gdl::Symbol,
        args: &[Pat],
        symbols: &crate::gdl::Symbols,
        out: &mut String,
    ) {
        if args.is_empty() {
            out.push_str(symbols.name(f));
            return;
        }
        out.push('(');
        out.push_str(symbols.name(f));
        for p in args {
            out.push(' ');
            match p {
                Pat::Var(v) => out.push_str(&ex.store.text(ex.binds[*v as usize], symbols)),
                Pat::Ground(g) => out.push_str(&ex.store.text(*g, symbols)),
                Pat::Func(f, args) => applied(ex, *f, args, symbols, out),
            }
        }
        out.push(')');
    }
    applied(ex, a.sym, &a.args, symbols, out);
}

/// The error of an instance whose head `text` (of relation `name`) does not hold.
fn missed_error(name: &str, text: &str) -> GroundError {
    GroundError::Internal(format!(
        "an instance of a rule of {name} derives {text}, which the fixpoint missed"
    ))
}

/// How many instances of a batch wait for their heads at most (see `run_join`).
const LATER_HEADS: usize = 32;

/// The instances of a batch whose heads are looked up later (see `run_join`).
#[derive(Default)]
struct LaterHeads {
    /// For each: its place in the batch's `insts`, and the position of its guard's atom
    /// (`usize::MAX` for a rule without a guard).
    at: Vec<(usize, usize)>,
    /// The heads' arguments, one after another.
    args: Vec<TermId>,
    hashes: Vec<u64>,
}

impl LaterHeads {
    /// Looks the waiting heads up, all their table slots first, writes them into `batch` and
    /// into `by_pos` (the heads by guard position), and empties the list. A head that does
    /// not hold is the error `missed` gives for its arguments; the batch then keeps only the
    /// instances before it, as if the join had stopped there.
    fn look_up(
        &mut self,
        store: &TermStore,
        head: &AtomPat,
        by_pos: Option<&[AtomicU32]>,
        batch: &mut Batch,
        missed: impl Fn(&[TermId]) -> GroundError,
    ) -> Result<(), GroundError> {
        if self.at.is_empty() {
            return Ok(());
        }
        let arity = head.args.len();
        let mut result = Ok(());
        let found = store.find_held(head.sym, arity, &self.args, &mut self.hashes);
        for (&(i, pos), (args, t)) in self.at.iter().zip(found) {
            match t {
                Some(t) => {
                    batch.insts[i].0 = t;
                    if let Some(by_pos) = by_pos {
                        by_pos[pos].store(t, Relaxed);
                    }
                }
                None => {
                    batch.truncate(i);
                    result = Err(missed(args));
                    break;
                }
            }
        }
        self.at.clear();
        self.args.clear();
        result
    }
}

/// In `heads_by_guard`, a position whose head atom has not been looked up yet.
const HEAD_UNKNOWN: TermId = TermId::MAX;
/// In `heads_by_guard`, a position whose head atom does not hold.
const HEAD_NONE: TermId = TermId::MAX - 1;

/// How many heads of variables and constants a derivation gathers before interning them.
const HEAD_BATCH: usize = 32;

/// How many batches of heads `drop_held` looks up before it decides, from how many held,
/// whether to go on looking them up.
const DROP_SAMPLE: usize = 8;

/// While `drop_held` does not look heads up, it still looks up one batch in this many, to
/// notice where heads that hold come again.
const DROP_RECHECK: usize = 16;

/// The heads one derivation finds. Interning a head is mostly a cache miss on the term
/// table (two fifths of chess's fixpoint in `perf`), so heads of variables and constants are
/// gathered and interned `HEAD_BATCH` at a time after `TermStore::warm` has brought their
/// slots in. They are interned in the order found, so every term gets the id it would have
/// had; a head found again before its batch is interned is only found twice.
struct Heads {
    sym: crate::gdl::Symbol,
    arity: usize,
    /// Whether the heads are gathered (all arguments variables or constants, at least one).
    batched: bool,
    /// The arguments of the gathered heads, `arity` each, and for each the position the
    /// derivation's `head_item` scan matched.
    args: Vec<TermId>,
    at: Vec<usize>,
    /// The hashes of the gathered heads (`TermStore::warm`), computed once for both warming
    /// and interning.
    hashes: Vec<u64>,
    /// The new atoms, in the order found, and their positions as in `at`.
    pending: Vec<TermId>,
    pending_pos: Vec<usize>,
    /// How many new atoms the limit on atoms leaves room for.
    room: usize,
    /// The heads found to hold already, and their positions as in `at`, when `note_held`
    /// (heads a join thread collected without looking them up, see `collect_heads`).
    note_held: bool,
    held_at: Vec<(usize, TermId)>,
}

impl Heads {
    fn new(head: &AtomPat, room: usize) -> Heads {
        Heads {
            sym: head.sym,
            arity: head.args.len(),
            batched: !head.args.is_empty() && head.args.iter().all(|p| !matches!(p, Pat::Func(..))),
            args: Vec::new(),
            at: Vec::new(),
            hashes: Vec::new(),
            pending: Vec::new(),
            pending_pos: Vec::new(),
            room,
            note_held: false,
            held_at: Vec::new(),
        }
    }

    /// Takes note of head atom `t`, found where `head_item` matched position `pos`.
    fn found(&mut self, store: &mut TermStore, t: TermId, pos: usize) -> Result<(), &'static str> {
        let flags = store.flags(t);
        if flags == 0 {
            store.set_flags(t, PENDING);
            self.pending.push(t);
            self.pending_pos.push(pos);
            if self.pending.len() > self.room {
                return Err("max_atoms");
            }
        } else if self.note_held && flags & HOLDS != 0 {
            self.held_at.push((pos, t));
        }
        Ok(())
    }

    /// Interns the gathered heads, in order.
    fn flush(&mut self, store: &mut TermStore) -> Result<(), &'static str> {
        if self.at.is_empty() {
            return Ok(());
        }
        store.warm(self.sym, self.arity, &self.args, &mut self.hashes);
        let mut args = std::mem::take(&mut self.args);
        let mut at = std::mem::take(&mut self.at);
        let hashes = std::mem::take(&mut self.hashes);
        let mut result = Ok(());
        for ((one, &pos), &h) in args.chunks_exact(self.arity).zip(&at).zip(&hashes) {
            let t = store.intern_hashed(h, self.sym, one);
            result = self.found(store, t, pos);
            if result.is_err() {
                break;
            }
        }
        args.clear();
        at.clear();
        self.args = args;
        self.at = at;
        self.hashes = hashes;
        result
    }
}

/// The positive literal of `conj` with exactly the head's arguments that `plan` scans in its
/// own steps before its [`Step::HeadKnown`], if any: the position of the atom it matched then
/// determines the head atom, so whether the head holds can be remembered by position.
fn head_literal(conj: &Conj, plan: &Plan) -> Option<usize> {
    if conj.head.args.is_empty() {
        return None;
    }
    let known = plan.steps.iter().position(|s| matches!(s, Step::HeadKnown))?;
    scans_of_head_args(conj, &plan.steps[..known])
        .next()
        .map(|(item, _)| item)
}

/// The scans among `steps` of positive literals with exactly the head's arguments, in order:
/// each literal's item and relation.
fn scans_of_head_args<'a>(conj: &'a Conj, steps: &'a [Step]) -> impl Iterator<Item = (usize, RelId)> + 'a {
    steps.iter().filter_map(|s| match s {
        Step::Scan { item, .. } => match &conj.body[*item] {
            Item::Pos(a) if a.args == conj.head.args => Some((*item, a.rel)),
            _ => None,
        },
        _ => None,
    })
}

/// A positive literal of `conj` over another relation with exactly the head's arguments, which
/// `plan` scans in its own steps (not in a sub-join), and its relation: in every instance the
/// head atom has the arguments of the atom that literal matched. That is the guard of a
/// relation whose calls bind every argument (`magic.rs`): chess's check test,
/// `threatened_with_capture/7`, has six rules, each instantiated for all of its 313,000
/// calls, and looking up a 7-ary head atom in the term table (a cache miss) for every instance
/// was a tenth of chess's instantiation. By the guard atom's position, each head is looked up
/// once for all the rules.
fn head_guard(conj: &Conj, plan: &Plan) -> Option<(usize, RelId)> {
    scans_of_head_args(conj, &plan.steps).find(|&(_, rel)| rel != conj.head.rel)
}

/// What the output needs to name an atom.
struct KindCx<'a> {
    k: Keys,
    role_index: &'a FxHashMap<TermId, u32>,
    desc: &'a Description,
    opaque: &'a [bool],
}

/// The ground program being assembled.
struct Out {
    /// The atom id of each term, `u32::MAX` if it has none yet; grown as terms are added.
    atom_of: Vec<u32>,
    /// The atom of each auxiliary atom number (numbers are dense from 0), `u32::MAX` before
    /// its first use.
    aux_of: Vec<u32>,
    atoms: Vec<GroundAtom>,
    /// The rules settled so far, possibly with repeats (removed at the end).
    rules: GroundRules,
    /// The rules of the strongly connected component of relations being instantiated, whose
    /// heads do not have their final identity yet (see `Out::settle`).
    staged: GroundRules,
    /// For each atom, the atom it is identified with: itself, or an earlier view atom with the
    /// same ground definition.
    alias: Vec<AtomId>,
    /// For each atom, its term (`u32::MAX` for an auxiliary atom), to tell the joins the
    /// identities settled (`Exec::canon`).
    term_of: Vec<TermId>,
    /// The view atoms settled with an acyclic definition, by a hash of their rules' bodies:
    /// the atom and the range of its rules in `rules`.
    known: FxHashMap<u64, (AtomId, u32, u32)>,
    /// For each atom, whether its identity is final: inputs, the atoms of components settled
    /// already, and auxiliary atoms settled as they came (see `Out::add_aux_rules`).
    settled: Vec<bool>,
    /// The atoms below this number were all settled with a component.
    settled_upto: usize,
    /// The body of the rule being added, reused from rule to rule.
    body: Vec<GroundLit>,
    /// Scratch space for settling one atom: its bodies one after another, and where each is.
    scratch: Vec<GroundLit>,
    ranges: Vec<(usize, usize)>,
    /// For `settle`: each atom's local number among the heads of the component being settled,
    /// `u32::MAX` for the others. Kept from one component to the next with every entry
    /// `u32::MAX` in between, so that settling does not fill an array as long as all the atoms
    /// (chess: 63 components over 1.5 million atoms, about 190 million instructions of
    /// `memset` on the output thread).
    local: Vec<u32>,
    /// The relations whose atoms the fixpoint took from their calls (`Grounder::by_calls`) and
    /// whose components are settled: an atom of theirs without an identity has no rule.
    settled_by_calls: Vec<bool>,
}

impl Out {
    /// The id of auxiliary atom `n`, made on first use. Its text holds a `;`, which no symbol
    /// of a game can contain, so it never clashes with an atom of the game.
    fn aux(&mut self, n: u32) -> AtomId {
        if let Some(&id) = self.aux_of.get(n as usize).filter(|&&id| id != u32::MAX) {
            return AtomId(id);
        }
        let id = AtomId::from_index(self.atoms.len());
        // Its text, `(;aux n)`, is written at the end with the others (`atom_texts`).
        self.atoms.push(GroundAtom {
            kind: AtomKind::View,
            text: String::new(),
        });
        self.alias.push(id);
        self.term_of.push(u32::MAX);
        self.settled.push(false);
        if self.aux_of.len() <= n as usize {
            self.aux_of.resize(n as usize + 1, u32::MAX);
        }
        self.aux_of[n as usize] = id.0;
        id
    }

    /// Adds the rules of auxiliary atoms in `rules` (atom number and end of the body in
    /// `lits`, as `Exec::aux_rules` holds them), the first body starting at `start`.
    #[allow(clippy::too_many_arguments)]
    fn add_aux_rules(
        &mut self,
        rules: &[(u32, usize)],
        lits: &[OutLit],
        mut start: usize,
        store: &TermStore,
        cx: &KindCx,
        limits: &GroundLimits,
        name: &str,
    ) -> Result<(), GroundError> {
        // An auxiliary atom's rules come one after another, all at once. When every atom they
        // read is settled (in chess, the check test's rays, from components instantiated
        // before), the atom is settled at once rather than staged: most of chess's are
        // identified with an atom of another family, and never take room in `staged`.
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut ranges = std::mem::take(&mut self.ranges);
        let mut i = 0;
        while i < rules.len() {
            let n = rules[i].0;
            let head = self.aux(n);
            let j = i + rules[i..].iter().take_while(|&&(m, _)| m == n).count();
            let first = start;
            let mut ready = true;
            scratch.clear();
            ranges.clear();
            for &(_, end) in &rules[i..j] {
                let s = scratch.len();
                for l in &lits[start..end] {
                    if self.ruleless(l) {
                        continue;
                    }
                    let atom = self.lit_atom(l, store, cx, name)?;
                    ready &= self.settled[atom.index()];
                    scratch.push(GroundLit::new(self.alias[atom.index()], l.negated));
                }
                if normalize_body(&mut scratch, s) {
                    ranges.push((s, scratch.len()));
                }
                start = end;
            }
            if ready {
                self.settle_atom(head, &scratch, &mut ranges, true)?;
                self.settled[head.index()] = true;
                if self.rules.len() + self.staged.len() > limits.max_rules {
                    return Err(limit("max_rules", limits.max_rules, name));
                }
                if self.rules.literals() + self.staged.literals() > limits.max_literals {
                    return Err(limit("max_literals", limits.max_literals, name));
                }
            } else {
                let mut from = first;
                for &(_, end) in &rules[i..j] {
                    self.add_rule(head, &lits[from..end], store, cx, limits, name)?;
                    from = end;
                }
            }
            i = j;
        }
        self.scratch = scratch;
        self.ranges = ranges;
        Ok(())
    }

    /// Whether `l` negates an atom that has no rule and so is false, making the literal true:
    /// an atom of a relation whose atoms the fixpoint took from its calls, which is settled
    /// and never got an identity (no rule of it named it as its head).
    fn ruleless(&self, l: &OutLit) -> bool {
        l.negated
            && self.settled_by_calls.get(l.rel as usize).is_some_and(|&s| s)
            && self.atom_of.get(l.atom as usize).is_none_or(|&id| id == u32::MAX)
    }

    /// The atom a rule's literal names (an auxiliary atom or one of a relation), numbered
    /// within what a ground literal can hold.
    fn lit_atom(
        &mut self,
        l: &OutLit,
        store: &TermStore,
        cx: &KindCx,
        name: &str,
    ) -> Result<AtomId, GroundError> {
        let atom = if l.rel == AUX {
            self.aux(l.atom)
        } else {
            self.atom(l.atom, l.rel, store, cx)?
        };
        if atom.0 > GroundLit::MAX_ATOM {
            return Err(limit("atoms in a literal", GroundLit::MAX_ATOM as usize, name));
        }
        Ok(atom)
    }

    /// Adds `head ⇐ lits` after sorting the body and dropping repeats; a rule with both `x`
    /// and `(not x)` never fires and is left out.
    fn add_rule(
        &mut self,
        head: AtomId,
        lits: &[OutLit],
        store: &TermStore,
        cx: &KindCx,
        limits: &GroundLimits,
        name: &str,
    ) -> Result<(), GroundError> {
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        for l in lits {
            if self.ruleless(l) {
                continue;
            }
            let atom = self.lit_atom(l, store, cx, name)?;
            body.push(GroundLit::new(atom, l.negated));
        }
        body.sort_unstable();
        body.dedup();
        let contradictory = body.windows(2).any(|w| w[0].atom() == w[1].atom());
        // A body that does not fit the literals' array is reported as the limit on literals.
        let fits = contradictory || self.staged.push(head, &body).is_some();
        self.body = body;
        if !fits || self.rules.literals() + self.staged.literals() > limits.max_literals {
            return Err(limit("max_literals", limits.max_literals, name));
        }
        if self.rules.len() + self.staged.len() > limits.max_rules {
            return Err(limit("max_rules", limits.max_rules, name));
        }
        Ok(())
    }

    /// Moves the staged rules of one strongly connected component of relations to `rules`,
    /// identifying atoms with equal definitions on the way, as the merge pass does on the net
    /// but before the net is built: the heads are taken in dependency order, each body read
    /// through the identities already settled, and a view atom whose set of bodies then equals
    /// that of a view atom settled before becomes an alias of it. Later bodies read the earlier
    /// atom instead, so that equal definitions above it become equal in turn, and the alias
    /// keeps a single rule (it is still a named view). In chess the check test's rays carry an
    /// ignored square that matters only on the ray itself: the rays through other squares are
    /// identified, and so are the check tests built from them. Only acyclic definitions are
    /// identified: an atom on a cycle of the ground rules is settled as it is, so the
    /// identification holds by induction over the dependency order in every state.
    fn settle(&mut self, canon: &mut Vec<u32>) -> Result<(), GroundError> {
        let staged = std::mem::take(&mut self.staged);
        // The heads, numbered locally in order of first rule, and their rules by a counting sort.
        const NONE: u32 = u32::MAX;
        let mut local = std::mem::take(&mut self.local);
        local.resize(self.atoms.len(), NONE);
        let mut heads: Vec<AtomId> = Vec::new();
        let mut head_of: Vec<u32> = Vec::with_capacity(staged.len());
        for i in 0..staged.len() {
            let h = staged.head(i);
            if local[h.index()] == NONE {
                local[h.index()] = heads.len() as u32;
                heads.push(h);
            }
            head_of.push(local[h.index()]);
        }
        let m = heads.len();
        let mut start = vec![0u32; m + 1];
        for &l in &head_of {
            start[l as usize + 1] += 1;
        }
        for i in 0..m {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut by_head = vec![0u32; staged.len()];
        for (i, &l) in head_of.iter().enumerate() {
            by_head[fill[l as usize] as usize] = i as u32;
            fill[l as usize] += 1;
        }
        drop(fill);
        drop(head_of);
        let rules_of = |l: usize| &by_head[start[l] as usize..start[l + 1] as usize];
        // Each head's local dependencies, sorted without repeats, one after another in one
        // array (a vector per head was a tenth of settling chess's check test).
        let mut deps: Vec<u32> = Vec::new();
        let mut deps_end: Vec<u32> = Vec::with_capacity(m + 1);
        deps_end.push(0);
        for l in 0..m {
            let s = deps.len();
            deps.extend(
                rules_of(l)
                    .iter()
                    .flat_map(|&r| staged.body(r as usize).iter())
                    .map(|lit| local[lit.atom().index()])
                    .filter(|&x| x != NONE),
            );
            sort_dedup_from(&mut deps, s);
            deps_end.push(deps.len() as u32);
        }
        for h in &heads {
            local[h.index()] = NONE;
        }
        self.local = local;
        let deps_of = |l: usize| &deps[deps_end[l] as usize..deps_end[l + 1] as usize];
        let mut lits = std::mem::take(&mut self.scratch);
        let mut ranges = std::mem::take(&mut self.ranges);
        let mut settle_comp = |comp: &[u32]| -> Result<(), GroundError> {
            let acyclic = comp.len() == 1 && !deps_of(comp[0] as usize).contains(&comp[0]);
            for &l in comp.iter() {
                let head = heads[l as usize];
                lits.clear();
                ranges.clear();
                for &r in rules_of(l as usize) {
                    let s = lits.len();
                    lits.extend(
                        staged
                            .body(r as usize)
                            .iter()
                            .map(|lit| GroundLit::new(self.alias[lit.atom().index()], lit.negated())),
                    );
                    if normalize_body(&mut lits, s) {
                        ranges.push((s, lits.len()));
                    }
                }
                self.settle_atom(head, &lits, &mut ranges, acyclic)?;
            }
            Ok(())
        };
        if deps.is_empty() {
            // No head reads another (chess's check test: 313,000 heads whose rules read only
            // atoms settled before): each head is a component of its own, and Tarjan's
            // algorithm would hand them over one by one in the order of the roots, 0 to m.
            for l in 0..m as u32 {
                settle_comp(&[l])?;
            }
        } else {
            crate::graph::components(
                m,
                0..m as u32,
                |l, to| to.extend_from_slice(deps_of(l as usize)),
                |comp| settle_comp(comp),
            )?;
        }
        self.scratch = lits;
        self.ranges = ranges;
        // Every atom made so far has its final identity: later components only read them.
        for a in self.settled_upto..self.settled.len() {
            self.settled[a] = true;
            let t = self.term_of[a];
            if t != u32::MAX {
                if canon.len() <= t as usize {
                    canon.resize(t as usize + 1, u32::MAX);
                }
                canon[t as usize] = self.alias[a].0;
            }
        }
        self.settled_upto = self.settled.len();
        Ok(())
    }

    /// Settles `head`, whose bodies (read through the settled identities, each sorted without
    /// repeats) are `lits[s..e]` for each `(s, e)` of `ranges`: identifies it with an earlier
    /// view atom of the same bodies when `identify` and it is a view atom (one rule naming that
    /// atom), or adds its rules.
    fn settle_atom(
        &mut self,
        head: AtomId,
        lits: &[GroundLit],
        ranges: &mut Vec<(usize, usize)>,
        identify: bool,
    ) -> Result<(), GroundError> {
        // The bodies often come in order already (an auxiliary atom's solutions are sorted),
        // and checking costs a comparison a body where sorting costs several.
        sort_dedup_by(ranges, |a, b| lits[a.0..a.1].cmp(&lits[b.0..b.1]));
        let view = identify && self.atoms[head.index()].kind == AtomKind::View;
        let key = view.then(|| {
            let mut h = rustc_hash::FxHasher::default();
            h.write_usize(ranges.len());
            for &(s, e) in ranges.iter() {
                h.write_usize(e - s);
                for lit in &lits[s..e] {
                    h.write_u32(lit.atom().0 << 1 | lit.negated() as u32);
                }
            }
            h.finish()
        });
        if let Some(&(rep, first, end)) = key.and_then(|k| self.known.get(&k)) {
            let same = (end - first) as usize == ranges.len()
                && (first..end)
                    .zip(ranges.iter())
                    .all(|(r, &(s, e))| self.rules.body(r as usize) == &lits[s..e]);
            if same {
                self.alias[head.index()] = rep;
                return self.push_settled(head, &[GroundLit::new(rep, false)]);
            }
        }
        let first = self.rules.len() as u32;
        for &(s, e) in ranges.iter() {
            self.push_settled(head, &lits[s..e])?;
        }
        if let Some(k) = key {
            self.known
                .entry(k)
                .or_insert((head, first, self.rules.len() as u32));
        }
        Ok(())
    }

    /// Adds a settled rule to `rules`.
    fn push_settled(&mut self, head: AtomId, body: &[GroundLit]) -> Result<(), GroundError> {
        match self.rules.push(head, body) {
            Some(_) => Ok(()),
            None => Err(limit(
                "max_literals",
                GroundRules::MAX_LITERALS,
                "the ground program",
            )),
        }
    }

    /// The id of atom `t` of relation `rel`, made on first use.
    fn atom(&mut self, t: TermId, rel: RelId, store: &TermStore, cx: &KindCx) -> Result<AtomId, GroundError> {
        if let Some(&id) = self.atom_of.get(t as usize) {
            if id != u32::MAX {
                return Ok(AtomId(id));
            }
        }
        let k = cx.k;
        let symbols = &cx.desc.symbols;
        let args = store.args(t);
        let role = |r: TermId| {
            cx.role_index.get(&r).copied().ok_or_else(|| {
                GroundError::Internal(format!(
                    "{} names a role that is not declared",
                    store.text(t, symbols)
                ))
            })
        };
        // The text is written at the end (`atom_texts`), on the join threads and beside the
        // final sort of the rules, rather than here on the thread that writes the output.
        let kind = if rel == k.true_ {
            AtomKind::True
        } else if rel == k.next {
            AtomKind::Next
        } else if rel == k.does {
            AtomKind::Does { role: role(args[0])? }
        } else if rel == k.legal {
            AtomKind::Legal { role: role(args[0])? }
        } else if rel == k.goal {
            let value = goal_value(store, args[1], cx.desc).ok_or_else(|| {
                GroundError::Internal(format!("{} has no natural-number value", store.text(t, symbols)))
            })?;
            AtomKind::Goal {
                role: role(args[0])?,
                value,
            }
        } else if rel == k.terminal {
            AtomKind::Terminal
        } else if cx.opaque.get(rel as usize).copied().unwrap_or(false) {
            AtomKind::Opaque
        } else {
            AtomKind::View
        };
        let id = AtomId::from_index(self.atoms.len());
        // Inputs and opaque atoms are heads of no rule: what they are is settled at once.
        let input = matches!(kind, AtomKind::True | AtomKind::Does { .. } | AtomKind::Opaque);
        self.atoms.push(GroundAtom {
            kind,
            text: String::new(),
        });
        self.alias.push(id);
        self.term_of.push(t);
        self.settled.push(input);
        if self.atom_of.len() <= t as usize {
            self.atom_of.resize(store.len().max(t as usize + 1), u32::MAX);
        }
        self.atom_of[t as usize] = id.0;
        Ok(id)
    }
}

/// Writes the text of every atom of `atoms` (see [`AtomKind`]); `term_of` holds each atom's
/// term, `u32::MAX` for an auxiliary atom, whose number `aux_num` holds. The texts are
/// independent of each other, so this runs on `threads` threads, each on a range of atoms.
fn atom_texts(
    atoms: &mut [GroundAtom],
    term_of: &[TermId],
    aux_num: &[u32],
    store: &TermStore,
    symbols: &crate::gdl::Symbols,
    or_relations: u32,
    threads: usize,
) {
    // Each text is written into a reused buffer and then copied into a string of its own
    // length: one allocation an atom instead of one per doubling, and no spare capacity held
    // in 1.1 million strings (chess).
    let write = |atoms: &mut [GroundAtom], first: usize| {
        let mut buf = String::new();
        for (i, a) in atoms.iter_mut().enumerate() {
            let t = term_of[first + i];
            buf.clear();
            if t == u32::MAX {
                // `write!` into a `String` cannot fail.
                let _ = write!(buf, "(;aux {})", aux_num[first + i]);
            } else {
                match a.kind {
                    AtomKind::True | AtomKind::Next => store.write(store.args(t)[0], symbols, &mut buf),
                    AtomKind::Does { .. } | AtomKind::Legal { .. } => {
                        store.write(store.args(t)[1], symbols, &mut buf)
                    }
                    AtomKind::View if store.functor(t).0 as usize >= symbols.len() => {
                        // A relation of an `or` (`normalize`), or of variable elimination
                        // (`eliminate`), whose symbols come after those of the magic relations.
                        let k = store.functor(t).0 as usize - symbols.len();
                        let _ = match k.checked_sub(or_relations as usize) {
                            None => write!(buf, "(;or {k}"),
                            Some(e) => write!(buf, "(;elim {e}"),
                        };
                        for &arg in store.args(t) {
                            buf.push(' ');
                            store.write(arg, symbols, &mut buf);
                        }
                        buf.push(')');
                    }
                    _ => store.write(t, symbols, &mut buf),
                }
            }
            a.text = buf.as_str().to_owned();
        }
    };
    let chunk = atoms.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let mut parts = atoms.chunks_mut(chunk).enumerate();
        let first = parts.next();
        for (i, part) in parts {
            scope.spawn(move || write(part, i * chunk));
        }
        if let Some((_, part)) = first {
            write(part, 0);
        }
    });
}

/// Which atoms of the last round a rule's delta literal needs to read. When the literal has
/// variables that nothing else in the rule reads (the head, the other literals that deriving
/// reads), two atoms that agree on its other variables (its *projection*) give the rest of the
/// join the same bindings, so they derive the same atoms. An atom of the last round whose
/// projection an earlier atom of the round had, or an atom of an earlier round read as this
/// variant's delta, can then be left out: every binding of the rest of the body with that
/// earlier atom was joined, in an earlier round (all of them old), in this round's variant
/// whose delta literal is a later atom of the binding (where this literal reads the old
/// atoms), in the variant of an earlier one (where it reads all atoms), or, for an atom of
/// this round, in this very run. Every atom of a relation of the component is in the last
/// round of exactly one round, so the projections seen are those of old atoms. racer4's
/// `next` rules read `(does ?player (speed ?dx ?dy))` for one velocity: the moves of each
/// round bring new values of the other one and few new projections.
struct DeltaProjection {
    /// The literal's variables that something else reads, in order; `None` when that is all
    /// of them (the filter would keep every atom).
    live: Option<Box<[u32]>>,
    /// The projections seen, kept one after another in one array rather than boxed each.
    seen: join::Memo<()>,
    binds: Vec<TermId>,
    trail: Vec<u32>,
    /// Scratch space for a projection, so that only a new one is allocated.
    key: Vec<TermId>,
}

impl DeltaProjection {
    fn new(conj: &Conj, i: usize, output: &[bool]) -> Self {
        let mut elsewhere = vec![false; conj.nvars];
        conj.head.for_each_var(&mut |v| elsewhere[v as usize] = true);
        for (j, item) in conj.body.iter().enumerate() {
            let read = match item {
                Item::Neg(a) => !output[a.rel as usize],
                _ => true,
            };
            if j != i && read {
                item.for_each_var(&mut |v| elsewhere[v as usize] = true);
            }
        }
        let mut live = Vec::new();
        let mut dead = false;
        conj.body[i].for_each_var(&mut |v| {
            if !elsewhere[v as usize] {
                dead = true;
            } else if !live.contains(&v) {
                live.push(v);
            }
        });
        DeltaProjection {
            seen: join::Memo::new(live.len()),
            live: dead.then(|| live.into()),
            binds: vec![UNBOUND; conj.nvars],
            trail: Vec::new(),
            key: Vec::new(),
        }
    }

    /// Fills `keep` with, for each atom of the last round of literal `i`'s relation, whether
    /// the variant must read it (left empty: all of them); returns whether any is.
    fn keep(
        &mut self,
        conj: &Conj,
        i: usize,
        bounds: &Bounds,
        relations: &[Relation],
        store: &TermStore,
        keep: &mut Vec<bool>,
    ) -> bool {
        keep.clear();
        let Some(live) = &self.live else {
            return true;
        };
        let Item::Pos(a) = &conj.body[i] else {
            return true;
        };
        let r = a.rel as usize;
        let mut any = false;
        for &t in &relations[r].rows[bounds.old[r]..bounds.all[r]] {
            let args = store.args(t);
            let mut ok = args.len() == a.args.len();
            if ok {
                for (p, &u) in a.args.iter().zip(args) {
                    if !join::unify(store, p, u, &mut self.binds, &mut self.trail) {
                        ok = false;
                        break;
                    }
                }
            }
            // An atom that does not match the literal is never read: leaving it in costs
            // only the scan's own test.
            let new = ok && {
                self.key.clear();
                self.key.extend(live.iter().map(|&v| self.binds[v as usize]));
                self.seen.add(&self.key)
            };
            for v in self.trail.drain(..) {
                self.binds[v as usize] = UNBOUND;
            }
            keep.push(new);
            any |= new;
        }
        any
    }
}

/// Whether every atom `special` derives in the fixpoint, `general` derives too: some
/// substitution of `general`'s variables makes its head `special`'s and each of its body
/// literals that deriving reads (`kept`: negated literals over output relations are assumed
/// true) a literal of `special`'s body. Then every binding that satisfies `special`'s body
/// gives one that satisfies `general`'s, with the same head. The search gives up (answers
/// no) after a few thousand steps.
fn subsumes(general: &Conj, special: &Conj, kept: &dyn Fn(&Item) -> bool) -> bool {
    let mut theta: Vec<Option<&Pat>> = vec![None; general.nvars];
    let mut trail: Vec<u32> = Vec::new();
    if general.head.rel != special.head.rel
        || !match_pats(&general.head.args, &special.head.args, &mut theta, &mut trail)
    {
        return false;
    }
    let items: Vec<&Item> = general.body.iter().filter(|i| kept(i)).collect();
    let mut budget = 4096usize;
    cover(&items, special, &mut theta, &mut trail, &mut budget)
}

/// Maps each of `items` (of the general rule) to a literal of `special`, extending `theta`.
fn cover<'s>(
    items: &[&Item],
    special: &'s Conj,
    theta: &mut Vec<Option<&'s Pat>>,
    trail: &mut Vec<u32>,
    budget: &mut usize,
) -> bool {
    let Some((first, rest)) = items.split_first() else {
        return true;
    };
    for cand in &special.body {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let mark = trail.len();
        let ok = match (first, cand) {
            (Item::Pos(g), Item::Pos(s)) | (Item::Neg(g), Item::Neg(s)) => {
                g.rel == s.rel && match_pats(&g.args, &s.args, theta, trail)
            }
            (Item::Distinct(ga, gb), Item::Distinct(sa, sb)) | (Item::Equal(ga, gb), Item::Equal(sa, sb)) => {
                match_pat(ga, sa, theta, trail) && match_pat(gb, sb, theta, trail) || {
                    undo_theta(theta, trail, mark);
                    match_pat(ga, sb, theta, trail) && match_pat(gb, sa, theta, trail)
                }
            }
            _ => false,
        };
        if ok && cover(rest, special, theta, trail, budget) {
            return true;
        }
        undo_theta(theta, trail, mark);
    }
    false
}

fn undo_theta(theta: &mut [Option<&Pat>], trail: &mut Vec<u32>, mark: usize) {
    for v in trail.drain(mark..) {
        theta[v as usize] = None;
    }
}

fn match_pats<'s>(g: &[Pat], s: &'s [Pat], theta: &mut Vec<Option<&'s Pat>>, trail: &mut Vec<u32>) -> bool {
    g.len() == s.len() && g.iter().zip(s).all(|(g, s)| match_pat(g, s, theta, trail))
}

/// Extends `theta` so that it makes `g` (a pattern of the general rule) `s`.
fn match_pat<'s>(g: &Pat, s: &'s Pat, theta: &mut Vec<Option<&'s Pat>>, trail: &mut Vec<u32>) -> bool {
    match g {
        Pat::Var(v) => match theta[*v as usize] {
            Some(t) => t == s,
            None => {
                theta[*v as usize] = Some(s);
                trail.push(*v);
                true
            }
        },
        Pat::Ground(t) => matches!(s, Pat::Ground(u) if u == t),
        Pat::Func(f, args) => match s {
            Pat::Func(h, sargs) => f == h && match_pats(args, sargs, theta, trail),
            _ => false,
        },
    }
}

fn opaque_error(line: u32, col: u32, message: String) -> GroundError {
    GroundError::Unsupported { line, col, message }
}

/// The opaque relations named in `names` (`name/arity`), as flags by relation. A name that is
/// malformed, a keyword of GDL, or no relation of the game is an error.
fn opaque_relations(
    desc: &Description,
    names: &[String],
    rels: &mut RelTable,
    conjs: &[Conj],
) -> Result<Vec<bool>, GroundError> {
    let kw = desc.keywords;
    let mut flags = vec![false; rels.len()];
    for text in names {
        let bad = |why: &str| opaque_error(0, 0, format!("opaque relation '{text}': {why}"));
        let Some((name, arity)) = text.rsplit_once('/') else {
            return Err(bad("expected name/arity"));
        };
        let arity: usize = arity.parse().map_err(|_| bad("the arity is not a number"))?;
        let Some(sym) = desc.symbols.get(name) else {
            return Err(bad("the game has no such symbol"));
        };
        let keywords = [
            kw.role,
            kw.init,
            kw.true_,
            kw.does,
            kw.next,
            kw.legal,
            kw.goal,
            kw.terminal,
        ];
        if keywords.contains(&sym) {
            return Err(bad("a relation of GDL itself cannot be opaque"));
        }
        let r = rels.id(sym, arity);
        if !conjs.iter().any(|c| c.head.rel == r) {
            return Err(bad("no rule of the game defines it"));
        }
        flags.resize(rels.len(), false);
        flags[r as usize] = true;
    }
    Ok(flags)
}

/// The value of a goal term, if it is a natural number written as a constant.
fn goal_value(store: &TermStore, v: TermId, desc: &Description) -> Option<u32> {
    if !store.args(v).is_empty() {
        return None;
    }
    let name = desc.symbols.name(store.functor(v));
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// The term of a ground AST term, `None` if it has a variable.
fn intern_ground(store: &mut TermStore, t: &Term) -> Option<TermId> {
    match t {
        Term::Var(_) => None,
        Term::Const(c) => Some(store.intern(*c, &[])),
        Term::Func(f, args) => {
            let ids: Option<Vec<TermId>> = args.iter().map(|a| intern_ground(store, a)).collect();
            Some(store.intern(*f, &ids?))
        }
    }
}

/// Sorts the body `lits[s..]` and removes repeated literals; returns whether it can hold (a
/// body with both `x` and `(not x)` never does, and is removed too).
fn normalize_body(lits: &mut Vec<GroundLit>, s: usize) -> bool {
    sort_dedup_from(lits, s);
    if lits[s..].windows(2).any(|p| p[0].atom() == p[1].atom()) {
        lits.truncate(s);
        return false;
    }
    true
}

/// The rules to instantiate (`rules_of`, by relation), one group per strongly connected
/// component of the relations' graph `deps`, each group after the groups it depends on and,
/// among the groups free to go next, the one whose first rule comes first in the game (so that
/// where nothing depends on anything the rules go in the order of the game's text).
fn rule_order(deps: &[Vec<RelId>], rules_of: &[Vec<usize>]) -> Vec<Vec<usize>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let sccs = components(deps);
    let mut comp_of = vec![0usize; deps.len()];
    for (c, scc) in sccs.iter().enumerate() {
        for &r in scc {
            comp_of[r as usize] = c;
        }
    }
    let groups: Vec<Vec<usize>> = sccs
        .iter()
        .map(|scc| {
            let mut cis: Vec<usize> = scc
                .iter()
                .flat_map(|&r| rules_of[r as usize].iter().copied())
                .collect();
            cis.sort_unstable();
            cis
        })
        .collect();
    // Kahn's algorithm on the graph of components, smallest first rule first.
    let mut waiting = vec![0usize; sccs.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); sccs.len()];
    for (c, scc) in sccs.iter().enumerate() {
        let mut on: Vec<usize> = scc
            .iter()
            .flat_map(|&r| deps[r as usize].iter().map(|&d| comp_of[d as usize]))
            .filter(|&d| d != c)
            .collect();
        on.sort_unstable();
        on.dedup();
        waiting[c] = on.len();
        for d in on {
            users[d].push(c);
        }
    }
    let first = |c: usize| groups[c].first().copied().unwrap_or(usize::MAX);
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..sccs.len())
        .filter(|&c| waiting[c] == 0)
        .map(|c| Reverse((first(c), c)))
        .collect();
    let mut order = Vec::new();
    while let Some(Reverse((_, c))) = ready.pop() {
        for &u in &users[c] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(Reverse((first(u), u)));
            }
        }
        if !groups[c].is_empty() {
            order.push(groups[c].clone());
        }
    }
    order
}

/// Strongly connected components of the graph `deps` (node → what it depends on), each listed
/// after every component it depends on. Iterative, so a long chain of relations cannot
/// overflow the stack.
pub(crate) fn components(deps: &[Vec<u32>]) -> Vec<Vec<RelId>> {
    let mut out = Vec::new();
    crate::graph::components::<u32, std::convert::Infallible>(
        deps.len(),
        0..deps.len() as u32,
        |v, to| to.extend_from_slice(&deps[v as usize]),
        |comp| {
            out.push(comp.to_vec());
            Ok(())
        },
    )
    .unwrap_or_else(|never| match never {});
    out
}

#[cfg(test)]
mod tests {
    use super::{components, subsumes, Batch, Bounds, DeltaProjection, LaterHeads, Relation, HEAD_UNKNOWN};
    use crate::gdl::Symbol;
    use crate::ground::join::OutLit;
    use crate::ground::normalize::{normalize, AtomPat, Conj, Item, Pat, RelTable};
    use crate::ground::terms::{TermId, TermStore, HOLDS};
    use crate::ground::GroundError;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    /// Three instances whose heads `(h a)`, `(h b)` and `(h c)` wait in `later`, each with a
    /// body of one literal and an auxiliary rule; `(h b)` holds when `b_holds`.
    fn three_waiting(store: &mut TermStore, b_holds: bool) -> (AtomPat, Batch, LaterHeads, [TermId; 3]) {
        let head = AtomPat {
            rel: 0,
            sym: Symbol(9),
            args: vec![Pat::Var(0)].into(),
        };
        let args = [1, 2, 3].map(|c| store.intern(Symbol(c), &[]));
        let heads = args.map(|a| store.intern(Symbol(9), &[a]));
        for (i, &h) in heads.iter().enumerate() {
            if i != 1 || b_holds {
                store.set_flags(h, HOLDS);
            }
        }
        let (mut batch, mut later) = (Batch::new(), LaterHeads::default());
        for (i, &a) in args.iter().enumerate() {
            later.at.push((batch.insts.len(), i));
            later.args.push(a);
            let lit = OutLit {
                rel: 1,
                atom: a,
                negated: false,
            };
            let (mut aux_rules, mut aux_lits) = (vec![(i as u32, 1)], vec![lit]);
            batch.push(HEAD_UNKNOWN, &[lit], &mut aux_rules, &mut aux_lits);
        }
        (head, batch, later, heads)
    }

    #[test]
    fn heads_looked_up_later_are_the_atoms_a_lookup_finds() {
        let mut store = TermStore::default();
        let (head, mut batch, mut later, heads) = three_waiting(&mut store, true);
        let by_pos: Vec<AtomicU32> = (0..3).map(|_| AtomicU32::new(HEAD_UNKNOWN)).collect();
        let looked = later.look_up(&store, &head, Some(&by_pos), &mut batch, |_| {
            GroundError::Internal("missed".into())
        });
        assert!(looked.is_ok());
        assert_eq!(batch.insts.iter().map(|i| i.0).collect::<Vec<_>>(), heads);
        assert_eq!(by_pos.iter().map(|t| t.load(Relaxed)).collect::<Vec<_>>(), heads);
        assert!(later.at.is_empty() && later.args.is_empty());
    }

    #[test]
    fn a_head_looked_up_later_that_does_not_hold_cuts_the_batch_before_its_instance() {
        let mut store = TermStore::default();
        let (head, mut batch, mut later, heads) = three_waiting(&mut store, false);
        let looked = later.look_up(&store, &head, None, &mut batch, |args| {
            GroundError::Internal(format!("missed {args:?}"))
        });
        // The error names the arguments of `(h b)`.
        let b = store.find(Symbol(2), &[]);
        let expected = format!("missed {:?}", [b.unwrap_or(TermId::MAX)]);
        assert!(matches!(looked, Err(GroundError::Internal(m)) if m == expected));
        // The first instance, its body and its auxiliary rule stay; the rest is gone.
        assert_eq!(batch.insts, vec![(heads[0], 1, 1)]);
        assert_eq!(
            (batch.lits.len(), batch.aux_rules.len(), batch.aux_lits.len()),
            (1, 1, 1)
        );
    }

    /// Every relation's atoms after the fixpoint, in order, with their ids, the number of
    /// terms made, and how many variants were cut into parts.
    fn fixpoint_rows(
        desc: &crate::gdl::Description,
        threads: usize,
    ) -> (Vec<Vec<(TermId, String)>>, usize, usize) {
        let limits = crate::ground::GroundLimits::default();
        let mut g =
            super::Grounder::new(desc, &limits, &crate::ground::GroundOptions::default()).expect("prepares");
        g.derive_threads = threads;
        g.parallel_round = 0;
        g.split_variant = 0;
        g.fixpoint().expect("the fixpoint runs");
        let rows = g
            .relations
            .iter()
            .map(|r| {
                r.rows
                    .iter()
                    .map(|&t| (t, g.store.text(t, &desc.symbols)))
                    .collect()
            })
            .collect();
        (rows, g.store.len(), g.stats.split_variants)
    }

    #[test]
    fn a_variant_cut_into_parts_derives_the_atoms_of_the_whole_join_in_the_same_order() {
        // `q` and `r` are each a component of their own, after the one of the game, with one
        // rule: each round is a chain of one relation, whose variant is cut into parts. The
        // product of `q` has heads in every part, whose order the merge must keep.
        let mut src = String::from("(role a)\n(<= (legal a noop) (true (c 0)))\n");
        for k in 0..40 {
            src += &format!("(init (c {k}))\n(num {k})\n");
        }
        src += "(<= (next (c ?x)) (true (c ?x)))
            (<= (r ?x) (true (c ?x)))
            (<= (q ?x ?k) (r ?x) (num ?k) (distinct ?x ?k))
            (<= terminal (q ?x ?k))
            (<= (goal a 100) (r ?x))";
        let desc = crate::gdl::parse(&src).expect("the test game parses");
        let (one, terms, split) = fixpoint_rows(&desc, 1);
        assert_eq!(split, 0);
        for threads in [2, 3] {
            let (several, several_terms, split) = fixpoint_rows(&desc, threads);
            assert!(split > 0, "{threads} threads: no variant was cut into parts");
            assert_eq!(terms, several_terms, "{threads} threads");
            assert!(
                one == several,
                "{threads} threads: other atoms, or in another order"
            );
        }
        assert!(one.iter().any(|rows| rows.len() == 40 * 39), "q has every pair");
    }

    fn conjs(src: &str) -> Vec<Conj> {
        let desc = crate::gdl::parse_syntax(src).expect("the test text parses");
        let mut store = TermStore::default();
        let mut rels = RelTable::default();
        normalize(&desc, &mut store, &mut rels).expect("normalizes").0
    }

    #[test]
    fn a_delta_literal_reads_only_atoms_with_a_new_projection() {
        let mut desc = crate::gdl::parse_syntax(
            "(<= (next (pos ?p ?n)) (does ?p (speed ?dx ?dy)) (true (pos ?p ?y)) (add ?y ?dy ?n))",
        )
        .expect("the test text parses");
        let mut store = TermStore::default();
        let mut rels = RelTable::default();
        let c = normalize(&desc, &mut store, &mut rels)
            .expect("normalizes")
            .0
            .remove(0);
        let Item::Pos(does) = &c.body[0] else {
            panic!("the first literal is the move")
        };
        let mut sym = |name: &str| desc.symbols.intern(name);
        let (speed, r, one, two, three) = (sym("speed"), sym("r"), sym("1"), sym("2"), sym("3"));
        let mut atom = |dx, dy| {
            let (x, y) = (store.intern(dx, &[]), store.intern(dy, &[]));
            let m = store.intern(speed, &[x, y]);
            let p = store.intern(r, &[]);
            store.intern(does.sym, &[p, m])
        };
        let rows = vec![atom(one, one), atom(two, one), atom(one, two), atom(three, two)];
        let mut relations: Vec<Relation> = (0..=does.rel).map(|_| Relation::default()).collect();
        relations[does.rel as usize].rows = rows;
        let output = vec![true; relations.len().max(8)];
        let mut projection = DeltaProjection::new(&c, 0, &output);
        // ?dx is read by nothing else: the projection is (?p ?dy), variables 0 and 3.
        assert_eq!(projection.live.as_deref(), Some(&[0, 3][..]));
        let mut keep = Vec::new();
        let mut round = |old: usize, all: usize, keep: &mut Vec<bool>| {
            let mut bounds = Bounds {
                old: vec![0; relations.len()],
                all: vec![0; relations.len()],
            };
            bounds.old[does.rel as usize] = old;
            bounds.all[does.rel as usize] = all;
            projection.keep(&c, 0, &bounds, &relations, &store, keep)
        };
        // The second move repeats the first's (?p ?dy) within the round; the third brings a
        // new ?dy; the fourth repeats the third's from an earlier round: nothing to read.
        assert!(round(0, 2, &mut keep));
        assert_eq!(keep, [true, false]);
        assert!(round(2, 3, &mut keep));
        assert_eq!(keep, [true]);
        assert!(!round(3, 4, &mut keep));
        assert_eq!(keep, [false]);
        // Where every variable is read elsewhere, every atom is read.
        let c = conjs("(<= (next (v ?p ?dx ?dy)) (does ?p (speed ?dx ?dy)))").remove(0);
        assert!(DeltaProjection::new(&c, 0, &output).live.is_none());
    }

    /// Deriving reads every literal but the negated ones over `q` (as if `q` were an output
    /// relation).
    fn derive_reads(item: &Item) -> bool {
        !matches!(item, Item::Neg(_))
    }

    #[test]
    fn a_rule_that_reads_more_is_subsumed_by_one_that_reads_less() {
        let c = conjs(
            "(<= (p ?x ?y) (q ?x ?y) (distinct ?x ?y))
             (<= (p ?a ?b) (s ?b) (q ?a ?b) (distinct ?b ?a) (not (q ?b ?a)))
             (<= (p ?a ?a) (q ?a ?a))
             (<= (p ?a ?b) (q ?b ?a) (distinct ?a ?b))
             (<= (p ?a ?b) (q ?a ?c) (distinct ?a ?b))",
        );
        // The second reads the first's literals (`distinct` either way round) and more; its
        // negated literal is assumed true.
        assert!(subsumes(&c[0], &c[1], &derive_reads));
        assert!(!subsumes(&c[1], &c[0], &derive_reads));
        // A head more special than the general rule's: (p ?a ?a) is an instance of (p ?x ?y),
        // but the general rule's `distinct` has no counterpart.
        assert!(!subsumes(&c[0], &c[2], &derive_reads));
        // The same relation with the arguments the other way round, and a literal whose
        // variable is not the head's: different rules.
        assert!(!subsumes(&c[0], &c[3], &derive_reads));
        assert!(!subsumes(&c[0], &c[4], &derive_reads));
        // A negated literal that deriving reads must be in the special rule too.
        let neg_read = |_: &Item| true;
        let c = conjs(
            "(<= (p ?x) (q ?x) (not (r ?x)))
             (<= (p ?x) (q ?x) (s ?x))",
        );
        assert!(subsumes(&c[0], &c[1], &derive_reads));
        assert!(!subsumes(&c[0], &c[1], &neg_read));
    }

    #[test]
    fn components_come_after_what_they_depend_on() {
        // 0 → 1 → 2 → 1, 3 → 0.
        let deps = vec![vec![1], vec![2], vec![1], vec![0]];
        let sccs = components(&deps);
        assert_eq!(sccs, vec![vec![1, 2], vec![0], vec![3]]);
    }
}
