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
            )
            .iter()
            .map(|t| t[0])
            .collect();
        initial.sort_unstable();
        initial.dedup();
        let mut reference = reference;
        reference.initial = ReferenceState(initial);
        reference.check_goal_values(desc)?;
        Ok(reference)
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
                let tuples = self.query(&empty, None, r as program::RelId, &vec![UNBOUND; arity]);
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
    fn query(
        &self,
        state: &ReferenceState,
        joint: Option<&[MoveIdx]>,
        rel: program::RelId,
        key: &[TermId],
    ) -> Vec<Vec<TermId>> {
        let mut inner = self.lock();
        let Inner {
            interner,
            static_db,
            static_tables,
            sizes,
            cache,
        } = &mut *inner;
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
        TopDown::new(
            &self.program,
            interner,
            static_db,
            static_ready,
            &cached.facts,
            &moves,
            [static_tables, &mut cached.tables, &mut move_tables],
            sizes,
        )
        .answers(rel, key)
    }
}

impl Reference {
    /// How many distinct ground terms the evaluator has met so far. They are never freed (a
    /// state handed out names its facts by them), so a caller that evaluates many states of a
    /// game that builds new terms in every state (lists, say) can watch this and start afresh.
    pub fn terms(&self) -> usize {
        self.lock().interner.len()
    }

    /// Whether the ground atom `atom` holds in the state whose `true` facts are `facts`, both
    /// written in KIF. Moves are not given, so this is the value of a relation that depends on
    /// the state alone: what an opaque atom of the grounder is (`doc/opaque.md`).
    pub fn holds_in(&self, facts: &[&str], atom: &str) -> Result<bool, String> {
        let (state, rel, args) = {
            let mut inner = self.lock();
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
        Ok(!self.query(&state, None, rel, &args).is_empty())
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
            .query(state, None, self.program.rel_legal, &[rt, UNBOUND])
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
        self.lock().interner.parse(name, &self.symbols).map(MoveIdx)
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
            .query(state, Some(joint), self.program.rel_next, &[UNBOUND])
            .iter()
            .map(|t| t[0])
            .collect();
        next.sort_unstable();
        next.dedup();
        Ok(ReferenceState(next))
    }

    fn is_terminal(&self, state: &ReferenceState) -> bool {
        !self.query(state, None, self.program.rel_terminal, &[]).is_empty()
    }

    fn goal_values(&self, state: &ReferenceState, role: RoleIdx) -> Vec<u32> {
        let Some(&rt) = self.role_terms.get(role.index()) else {
            return Vec::new();
        };
        let answers = self.query(state, None, self.program.rel_goal, &[rt, UNBOUND]);
        let inner = self.lock();
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
}
