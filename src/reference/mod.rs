//! The reference GDL evaluator: a deliberately simple bottom-up evaluator that answers for a
//! description directly, without grounding it into a net. It is the oracle every other engine
//! is tested against.
//!
//! For a state it computes the stratified model of the rules over the facts `(true f)` of the
//! state, and for a joint move the model over `(does r m)` too. Relations are split into three
//! layers by what they depend on: the static ones (neither `true` nor `does`) are computed once,
//! the state ones once per state (the last state's model is cached, so asking for the legal moves
//! of every role, terminal and goals costs one evaluation), the move ones once per joint move.
//! Within a layer, strata (strongly connected components of the dependency graph) are evaluated
//! dependencies first, recursive ones by semi-naive iteration; joins use hash indexes on argument
//! terms (and their first-level sub-terms), choosing the smallest bucket at run time.

mod eval;
mod program;
mod terms;
mod topdown;

use crate::gdl::{Description, Symbols};
use eval::Db;

/// Marks a free argument of a query.
const UNBOUND: TermId = TermId::MAX;
use program::{compile, Program};
use propjet_runtime::{FactIdx, Machine, MachineError, MoveIdx, RoleIdx};
use rustc_hash::FxHashSet;
use std::sync::{Mutex, MutexGuard};
use terms::{Interner, TermId};
use topdown::{CallSizes, Tables, TopDown};

/// Why a description cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// A rule cannot be evaluated bottom-up (an unbound variable, too large an `or`).
    #[error("rule {rule}: {reason}")]
    Rule {
        /// The rule in canonical KIF.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A relation depends negatively on itself.
    #[error("negation is not stratified among the relations {0}")]
    Unstratified(String),
    /// The description declares no role.
    #[error("the description has no role")]
    NoRoles,
    /// A goal value is not a natural number.
    #[error("goal value {0} is not a natural number")]
    BadGoalValue(String),
}

/// The most terms the evaluator's table holds by default before it drops those no caller holds
/// (tens of MB with the answers remembered for them).
pub const MAX_TERMS: usize = 2_000_000;

/// The most calls of static relations the evaluator remembers the answers of before it
/// forgets them all (a few hundred MB).
const MAX_STATIC_CALLS: usize = 1_000_000;

/// A state of the reference evaluator: the sorted ids of the base facts that hold.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ReferenceState(Vec<u32>);

/// The reference evaluator as a [`Machine`].
pub struct Reference {
    symbols: Symbols,
    roles: Vec<String>,
    role_terms: Vec<TermId>,
    program: Program,
    initial: ReferenceState,
    inner: Mutex<Inner>,
}

struct Inner {
    interner: Interner,
    /// The terms made while preparing the description (its constants, the static relations,
    /// the initial state) are the ids below this; they are kept forever.
    permanent: TermId,
    /// Every other term a caller was given (the facts of the states and the moves handed out):
    /// kept forever too, since the caller names them by id.
    handed_out: FxHashSet<TermId>,
    /// When the table of terms holds more than this many, the terms of neither kind are
    /// dropped before the next query.
    max_terms: usize,
    /// The stored static relations.
    static_db: Db,
    /// The answers to calls on relations that depend on neither `true` nor `does`: valid forever.
    static_tables: Tables,
    /// The answer counts of the calls made so far, which order the literals of later ones.
    sizes: CallSizes,
    /// The last state asked about: its `true` facts and the answers found for it so far.
    cache: Option<Cached>,
}

struct Cached {
    state: ReferenceState,
    facts: Db,
    tables: Tables,
}

impl Reference {
    /// Prepares `desc` for evaluation and computes its static relations and initial state.
    pub fn new(desc: &Description) -> Result<Reference, ReferenceError> {
        let mut interner = Interner::default();
        let program = compile(desc, &mut interner)?;

        // Roles in the order of the `role` facts of the text.
        let mut roles = Vec::new();
        let mut role_terms = Vec::new();
        for rule in &desc.rules {
            if rule.head.rel == desc.keywords.role && rule.head.args.len() == 1 && rule.body.is_empty() {
                if let crate::gdl::Term::Const(c) = &rule.head.args[0] {
                    let t = interner.intern(*c, &[]);
                    if !role_terms.contains(&t) {
                        role_terms.push(t);
                        roles.push(desc.symbols.name(*c).to_string());
                    }
                }
            }
        }
        if roles.is_empty() {
            return Err(ReferenceError::NoRoles);
        }
        let reference = Reference {
            symbols: desc.symbols.clone(),
            roles,
            role_terms,
            program,
            initial: ReferenceState(Vec::new()),
            inner: Mutex::new(Inner {
                interner,
                permanent: 0,
                handed_out: FxHashSet::default(),
                max_terms: MAX_TERMS,
                static_db: Db::default(),
                static_tables: Tables::default(),
                sizes: CallSizes::default(),
                cache: None,
            }),
        };
        reference.store_static();
        // `init` depends on no state, so asking in the empty state gives the initial facts.
        let mut initial: Vec<u32> = reference
            .query(
                &ReferenceState(Vec::new()),
                None,
                reference.program.rel_init,
                &[UNBOUND],
                false,
            )
            .iter()
            .map(|t| t[0])
            .collect();
        initial.sort_unstable();
        initial.dedup();
        let mut reference = reference;
        reference.initial = ReferenceState(initial);
        reference.check_goal_values(desc)?;
        let inner = reference.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        inner.permanent = inner.interner.end();
        Ok(reference)
    }

    /// The same evaluator, dropping the terms no caller holds once its table of terms holds
    /// more than `max_terms` (instead of [`MAX_TERMS`]); 0 drops them before every query.
    pub fn with_max_terms(self, max_terms: usize) -> Reference {
        self.lock().max_terms = max_terms;
        self
    }

    /// Goal values written in the rules must be numbers.
    fn check_goal_values(&self, desc: &Description) -> Result<(), ReferenceError> {
        for rule in &desc.rules {
            if rule.head.rel == desc.keywords.goal && rule.head.args.len() == 2 {
                if let crate::gdl::Term::Const(v) = &rule.head.args[1] {
                    let text = desc.symbols.name(*v);
                    if text.parse::<u32>().is_err() {
                        return Err(ReferenceError::BadGoalValue(text.to_string()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Computes every stored static relation in full (top-down, with all arguments free) and
    /// keeps it, indexed, for every later query.
    fn store_static(&self) {
        let mut db = Db::new(&self.program);
        let empty = ReferenceState(Vec::new());
        for r in 0..self.program.stored.len() {
            if self.program.stored[r] {
                let arity = self.program.rel_key[r].1;
                let tuples = self.query(&empty, None, r as program::RelId, &vec![UNBOUND; arity], false);
                let inner = self.lock();
                for t in &tuples {
                    db.insert(r as program::RelId, t, &inner.interner);
                }
            }
        }
        let mut inner = self.lock();
        db.mark_ready();
        inner.static_db = db;
        // The tables built on the way are superseded by the stored relations.
        inner.static_tables = Tables::default();
        inner.cache = None;
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the interner or databases half-written in
        // a way that matters: the cache is rebuilt from scratch when the state differs.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers the call `rel(key)` in `state` (with `joint` as the joint move, for `next`);
    /// `UNBOUND` in `key` marks a free argument.
    /// With `hand_out`, the terms of the answers are kept for as long as the evaluator lives
    /// (they go to the caller as facts or moves).
    fn query(
        &self,
        state: &ReferenceState,
        joint: Option<&[MoveIdx]>,
        rel: program::RelId,
        key: &[TermId],
        hand_out: bool,
    ) -> Vec<Vec<TermId>> {
        self.query_in(&mut self.lock(), state, joint, rel, key, hand_out)
    }

    /// [`Reference::query`] with the lock held by the caller, who may read or make terms
    /// before or after it without another thread's query dropping them in between.
    fn query_in(
        &self,
        inner: &mut Inner,
        state: &ReferenceState,
        joint: Option<&[MoveIdx]>,
        rel: program::RelId,
        key: &[TermId],
        hand_out: bool,
    ) -> Vec<Vec<TermId>> {
        let Inner {
            interner,
            permanent,
            handed_out,
            max_terms,
            static_db,
            static_tables,
            sizes,
            cache,
        } = inner;
        if interner.len() > *max_terms {
            // Everything a query builds on the way (the lists of a search, say) stays in the
            // table, which would grow by megabytes a state. Keep what callers hold and what
            // this query is given; the answers remembered name dropped terms, so they go too
            // (the stored static relations are permanent terms and stay).
            let given = state.0.iter().chain(key).copied();
            let moves = joint.into_iter().flatten().map(|m| m.0);
            interner.retain(*permanent, handed_out.iter().copied().chain(given).chain(moves));
            static_tables.clear();
            *cache = None;
        } else if static_tables.len() > (*max_terms).min(MAX_STATIC_CALLS) {
            // The calls of static relations are remembered across states, each a table of a
            // few hundred bytes; a search over lists calls them with new lists in every state
            // (dresden_corridor: 60,000 calls of list membership a state, 5.9 million
            // remembered after 150 states, 1.4 GB). Past the bound they start over.
            static_tables.clear();
        }
        let static_ready = static_db.is_ready();
        if cache.as_ref().is_none_or(|c| c.state != *state) {
            let mut facts = Db::new(&self.program);
            for &t in &state.0 {
                facts.insert(self.program.rel_true, &[t], interner);
            }
            // The previous state's tables keep their memory: a state makes as many calls as the
            // one before it, and growing the map again from nothing was a tenth of the time.
            let mut tables = cache.take().map(|c| c.tables).unwrap_or_default();
            tables.clear();
            *cache = Some(Cached {
                state: state.clone(),
                facts,
                tables,
            });
        }
        let cached = cache.as_mut().expect("the cache was just filled");
        let mut moves = Db::new(&self.program);
        if let Some(joint) = joint {
            for (r, mv) in joint.iter().enumerate() {
                moves.insert(self.program.rel_does, &[self.role_terms[r], mv.0], interner);
            }
        }
        let mut move_tables = Tables::default();
        let answers = TopDown::new(
            &self.program,
            interner,
            static_db,
            static_ready,
            &cached.facts,
            &moves,
            [static_tables, &mut cached.tables, &mut move_tables],
            sizes,
        )
        .answers(rel, key);
        if hand_out {
            handed_out.extend(answers.iter().flatten().filter(|&&t| t >= *permanent));
        }
        answers
    }
}

impl Reference {
    /// How many distinct ground terms the evaluator's table holds. Past its bound
    /// ([`Reference::with_max_terms`]) the next query drops those that were neither made while
    /// preparing the description nor handed to a caller as a fact or a move, so a game that
    /// builds new terms in every state (lists, say) does not grow it without end.
    pub fn terms(&self) -> usize {
        self.lock().interner.len()
    }

    /// Whether the ground atom `atom` holds in the state whose `true` facts are `facts`, both
    /// written in KIF. Moves are not given, so this is the value of a relation that depends on
    /// the state alone: what an opaque atom of the grounder is (`doc/opaque.md`).
    pub fn holds_in(&self, facts: &[&str], atom: &str) -> Result<bool, String> {
        let mut inner = self.lock();
        let (state, rel, args) = {
            let mut ids = Vec::with_capacity(facts.len());
            for f in facts {
                let t = inner
                    .interner
                    .parse_intern(f, &self.symbols)
                    .ok_or_else(|| format!("fact {f} is not a term of the game"))?;
                ids.push(t);
            }
            ids.sort_unstable();
            ids.dedup();
            let t = inner
                .interner
                .parse_intern(atom, &self.symbols)
                .ok_or_else(|| format!("atom {atom} is not a term of the game"))?;
            let key = (inner.interner.functor(t), inner.interner.args(t).len());
            let rel = self
                .program
                .rel_key
                .iter()
                .position(|&k| k == key)
                .ok_or_else(|| format!("atom {atom} names no relation of the game"))?;
            (
                ReferenceState(ids),
                rel as program::RelId,
                inner.interner.args(t).to_vec(),
            )
        };
        Ok(!self
            .query_in(&mut inner, &state, None, rel, &args, false)
            .is_empty())
    }
}

impl crate::ground::OpaqueOracle for Reference {
    fn holds(&self, facts: &[&str], atom: &str) -> Result<bool, String> {
        self.holds_in(facts, atom)
    }
}

impl Machine for Reference {
    type State = ReferenceState;

    fn engine_name(&self) -> &'static str {
        "reference"
    }

    fn roles(&self) -> &[String] {
        &self.roles
    }

    fn initial_state(&self) -> ReferenceState {
        self.initial.clone()
    }

    fn state_facts(&self, state: &ReferenceState) -> Vec<FactIdx> {
        state.0.iter().map(|&t| FactIdx(t)).collect()
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        let inner = self.lock();
        if !inner.interner.contains(fact.0) {
            return format!("<unknown fact {}>", fact.0);
        }
        inner.interner.text(fact.0, &self.symbols)
    }

    fn legal_moves(&self, state: &ReferenceState, role: RoleIdx) -> Vec<MoveIdx> {
        let Some(&rt) = self.role_terms.get(role.index()) else {
            return Vec::new();
        };
        let mut moves: Vec<MoveIdx> = self
            .query(state, None, self.program.rel_legal, &[rt, UNBOUND], true)
            .iter()
            .map(|t| MoveIdx(t[1]))
            .collect();
        moves.sort_unstable();
        moves.dedup();
        moves
    }

    fn move_name(&self, mv: MoveIdx) -> String {
        let inner = self.lock();
        if !inner.interner.contains(mv.0) {
            return format!("<unknown move {}>", mv.0);
        }
        inner.interner.text(mv.0, &self.symbols)
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        if role.index() >= self.roles.len() {
            return None;
        }
        let mut inner = self.lock();
        let mv = inner.interner.parse(name, &self.symbols)?;
        // The caller will name the move by this id.
        if mv >= inner.permanent {
            inner.handed_out.insert(mv);
        }
        Some(MoveIdx(mv))
    }

    fn next_state_unchecked(
        &self,
        state: &ReferenceState,
        joint: &[MoveIdx],
    ) -> Result<ReferenceState, MachineError> {
        if joint.len() != self.roles.len() {
            return Err(MachineError::WrongMoveCount {
                expected: self.roles.len(),
                got: joint.len(),
            });
        }
        {
            let inner = self.lock();
            for (r, mv) in joint.iter().enumerate() {
                if !inner.interner.contains(mv.0) {
                    return Err(MachineError::UnknownMove {
                        role: self.roles[r].clone(),
                        mv: *mv,
                    });
                }
            }
        }
        let mut next: Vec<u32> = self
            .query(state, Some(joint), self.program.rel_next, &[UNBOUND], true)
            .iter()
            .map(|t| t[0])
            .collect();
        next.sort_unstable();
        next.dedup();
        Ok(ReferenceState(next))
    }

    fn is_terminal(&self, state: &ReferenceState) -> bool {
        !self
            .query(state, None, self.program.rel_terminal, &[], false)
            .is_empty()
    }

    fn goal_values(&self, state: &ReferenceState, role: RoleIdx) -> Vec<u32> {
        let Some(&rt) = self.role_terms.get(role.index()) else {
            return Vec::new();
        };
        let mut inner = self.lock();
        let answers = self.query_in(
            &mut inner,
            state,
            None,
            self.program.rel_goal,
            &[rt, UNBOUND],
            false,
        );
        // Goal values are checked to be numbers where the rules write them; a value computed
        // through a variable that is not a number is not a goal value and is left out.
        let mut values: Vec<u32> = answers
            .iter()
            .filter_map(|t| inner.interner.text(t[1], &self.symbols).parse().ok())
            .collect();
        values.sort_unstable();
        values.dedup();
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gdl;

    /// A search over lists in the style of real games: `walk`'s base case is a bodiless rule
    /// that holds only for a bound stack, and `app` (append) likewise. In the recursive rule the
    /// call `(walk ?new …)` has more arguments bound than `(app ?kids ?rest ?new)` once `kids`
    /// has run, yet it must wait for `app` to bind `?new`: made first, it finds no answer and
    /// the walk from 1 to 3 would fail.
    #[test]
    fn a_call_to_an_unsafe_relation_waits_for_its_bindings() {
        let text = "
            (role r)
            (init (at 1))
            (kids 1 (cons 2 nil))
            (kids 2 (cons 3 nil))
            (<= (app nil ?l ?l))
            (<= (app (cons ?x ?a) ?b (cons ?x ?c)) (app ?a ?b ?c))
            (<= (walk (cons ?goal ?l) ?goal ?visited ?tag))
            (<= (walk (cons ?top ?rest) ?goal ?visited ?tag)
                (kids ?top ?kids)
                (app ?kids ?rest ?new)
                (walk ?new ?goal (cons ?top ?visited) ?tag))
            (<= (reaches ?goal) (true (at ?s)) (walk (cons ?s nil) ?goal nil a))
            (<= (legal r stay) (true (at ?s)))
            (<= (next (at ?s)) (true (at ?s)))
            (<= terminal (reaches 3))
            (<= (goal r 100) (reaches 3))
            (<= (goal r 0) (not (reaches 3)))
        ";
        let desc = gdl::parse(text).expect("the game parses");
        let reference = Reference::new(&desc).expect("the reference takes the game");
        let start = reference.initial_state();
        assert!(reference.is_terminal(&start), "3 is reached from 1 through 2");
        assert_eq!(reference.goal_values(&start, RoleIdx::from_index(0)), vec![100]);
    }

    /// A game whose rules search paths as lists of visited nodes over edges that the moves open
    /// and close, so every state builds lists that no other state may need.
    const PATHS: &str = "
        (role r)
        (init (at 1)) (init (open 1 2)) (init (open 3 4)) (init (step 0))
        (edge 1 2) (edge 2 3) (edge 3 4) (edge 1 3) (edge 2 4) (edge 4 1)
        (succ 0 1) (succ 1 2) (succ 2 3) (succ 3 4) (succ 4 5) (succ 5 6)
        (<= (legal r (toggle ?a ?b)) (edge ?a ?b))
        (<= (legal r wait) (true (step ?n)))
        (<= (next (open ?a ?b)) (true (open ?a ?b)) (not (does r (toggle ?a ?b))))
        (<= (next (open ?a ?b)) (edge ?a ?b) (not (true (open ?a ?b))) (does r (toggle ?a ?b)))
        (<= (next (at ?s)) (true (at ?s)))
        (<= (next (step ?m)) (true (step ?n)) (succ ?n ?m))
        (<= (member ?x (cons ?x ?l)))
        (<= (member ?x (cons ?y ?l)) (member ?x ?l))
        (<= (path ?x ?x ?visited))
        (<= (path ?x ?z ?visited)
            (true (open ?x ?y)) (not (member ?y ?visited)) (path ?y ?z (cons ?y ?visited)))
        (<= (reaches ?g) (true (at ?s)) (edge ?a ?g) (path ?s ?g (cons ?s nil)))
        (<= terminal (true (step 6)))
        (<= (goal r 100) (reaches 4))
        (<= (goal r 0) (not (reaches 4)))
    ";

    /// Dropping the terms no caller holds before every query changes no answer, and keeps
    /// the table smaller than keeping every term made.
    #[test]
    fn dropping_terms_changes_no_answer() {
        let desc = gdl::parse(PATHS).expect("the game parses");
        let keeping = Reference::new(&desc).expect("the reference takes the game");
        let dropping = Reference::new(&desc)
            .expect("the reference takes the game")
            .with_max_terms(0);
        let mut engines = vec![
            crate::compare::cursor(&keeping),
            crate::compare::cursor(&dropping),
        ];
        let report = crate::compare::lockstep(&mut engines, 30, 3, 20).expect("the playouts run");
        assert!(report.is_clean(), "{report}");
        assert!(report.states > 100, "too few states compared: {report}");
        assert!(
            dropping.terms() < keeping.terms(),
            "{} terms kept against {}",
            dropping.terms(),
            keeping.terms()
        );
        // Facts and moves handed out keep their names while later queries drop other terms
        // and give their ids to new ones: a whole playout's states and moves, named as they
        // were handed out and again at the end.
        let names = |m: &Reference, s: &ReferenceState| -> Vec<String> {
            m.state_facts(s).into_iter().map(|f| m.fact_name(f)).collect()
        };
        let role = RoleIdx::from_index(0);
        let mut state = dropping.initial_state();
        let mut seen = Vec::new();
        for step in 0..6 {
            let moves = dropping.legal_moves(&state, role);
            let mv = moves[(step * 5) % moves.len()];
            let next = dropping
                .next_state_unchecked(&state, &[mv])
                .expect("a legal move");
            dropping.is_terminal(&next);
            dropping.goal_values(&next, role);
            seen.push((
                state.clone(),
                names(&dropping, &state),
                mv,
                dropping.move_name(mv),
            ));
            state = next;
        }
        let mut kept = keeping.initial_state();
        for (state, facts, mv, name) in &seen {
            assert_eq!(&names(&dropping, state), facts);
            assert_eq!(&names(&keeping, &kept), facts);
            assert_eq!(&dropping.move_name(*mv), name);
            let same = keeping.find_move(role, name).expect("the move exists");
            kept = keeping
                .next_state_unchecked(&kept, &[same])
                .expect("a legal move");
        }
    }
}
