//! A naive evaluator of ground programs, as a [`Machine`]: the oracle that tests the grounder
//! against the independent traces, not an engine.
//!
//! The atoms are split into strongly connected components of the rule graph (head → body
//! atoms) and evaluated in dependency order, each component by iterating its rules until
//! nothing changes. A stratified game has no negation inside a component, so every negated atom
//! is final when it is read. The values of the atoms that do not depend on `does` are computed
//! once per state and kept for the next state's computation.

use super::grounder::components;
use super::types::{AtomKind, Grounded};
use propjet_runtime::{FactIdx, Machine, MachineError, MoveIdx, RoleIdx};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Computes the values of the `Opaque` atoms of a ground program, one state at a time (see
/// `doc/opaque.md`): the grounder left their relation's rules out, so something that evaluates
/// those rules top down must answer.
pub trait OpaqueOracle: Send + Sync {
    /// Whether the opaque atom `atom` (its text) holds in the state whose `true` facts are
    /// `facts` (their texts, as `GroundAtom::text` writes them).
    fn holds(&self, facts: &[&str], atom: &str) -> Result<bool, String>;
}

/// A state: one bit per `True` atom, in [`FactIdx`] order.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct GroundState(Vec<u64>);

impl GroundState {
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }

    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
}

/// One component of the rule graph, with the rules of its atoms.
struct Component {
    rules: Vec<u32>,
    /// Whether a rule of it has a body atom in the same component.
    recursive: bool,
    /// Whether it depends on a `does` atom, directly or through other atoms.
    needs_does: bool,
    /// Whether it depends on an opaque atom, directly or through other atoms.
    needs_opaque: bool,
}

/// A [`Grounded`] program evaluated naively (engine name `ground`).
pub struct GroundMachine {
    g: Grounded,
    /// The `True` atoms by fact index.
    facts: Vec<u32>,
    /// The `Does` atoms by move index, with their roles.
    moves: Vec<(u32, u32)>,
    find: FxHashMap<(u32, String), u32>,
    /// For each `Legal` atom, its move; for each `Next` atom, its fact.
    legal_move: Vec<(u32, u32, u32)>,
    next_fact: Vec<(u32, u32)>,
    goals: Vec<(u32, u32, u32)>,
    terminal: Vec<u32>,
    order: Vec<Component>,
    initial: GroundState,
    cache: Mutex<Option<(GroundState, Values)>>,
    /// Whether each atom is of kind `Opaque`.
    is_opaque: Vec<bool>,
    /// Whether each atom depends on an opaque atom, and on a `does` atom.
    on_opaque: Vec<bool>,
    on_does: Vec<bool>,
    /// The atoms whose values the game master reads: where demand starts.
    demanded_outputs: Vec<bool>,
    oracle: Option<Arc<dyn OpaqueOracle>>,
    /// The first error of the oracle, and how many opaque atoms it was asked about.
    opaque_log: Mutex<(Option<String>, u64)>,
}

/// The values of the atoms in one state, and which opaque atoms have been asked about (an
/// opaque atom is only computed when the other literals of a rule reading it hold).
#[derive(Clone)]
struct Values {
    values: Vec<bool>,
    known: Vec<bool>,
}

/// Canonical KIF of a move written with any case and spacing.
fn canonical(text: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            if !out.is_empty() && !out.ends_with('(') {
                out.push(' ');
            }
            out.push_str(&word.to_ascii_lowercase());
            word.clear();
        }
    };
    for c in text.chars() {
        match c {
            '(' => {
                flush(&mut word, &mut out);
                if !out.is_empty() && !out.ends_with('(') {
                    out.push(' ');
                }
                out.push('(');
            }
            ')' => {
                flush(&mut word, &mut out);
                out.push(')');
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

impl GroundMachine {
    /// Prepares `g` for evaluation. Fails if the program has negation inside a recursive
    /// component (which a stratified game never gives) or breaks an invariant of [`Grounded`].
    pub fn new(g: Grounded) -> Result<GroundMachine, String> {
        if let Some(a) = g.atoms.iter().find(|a| a.kind == AtomKind::Opaque) {
            return Err(format!(
                "the program has opaque atoms ({} among them), which need an oracle: use with_opaque",
                a.text
            ));
        }
        Self::build(g, None)
    }

    /// Prepares `g`, whose opaque atoms `oracle` computes, for evaluation.
    pub fn with_opaque(g: Grounded, oracle: Arc<dyn OpaqueOracle>) -> Result<GroundMachine, String> {
        Self::build(g, Some(oracle))
    }

    /// The first error the oracle reported, if any (the evaluation went on with the atom
    /// false), and how many opaque atoms it has been asked about.
    pub fn opaque_log(&self) -> (Option<String>, u64) {
        self.opaque_log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn build(g: Grounded, oracle: Option<Arc<dyn OpaqueOracle>>) -> Result<GroundMachine, String> {
        let n = g.atoms.len();
        let mut facts = Vec::new();
        let mut fact_of = vec![u32::MAX; n];
        let mut moves = Vec::new();
        let mut move_of = vec![u32::MAX; n];
        let mut find = FxHashMap::default();
        let mut by_text: FxHashMap<(u8, u32, &str), u32> = FxHashMap::default();
        for (i, a) in g.atoms.iter().enumerate() {
            match a.kind {
                AtomKind::True => {
                    fact_of[i] = facts.len() as u32;
                    facts.push(i as u32);
                    by_text.insert((0, 0, &a.text), i as u32);
                }
                AtomKind::Does { role } => {
                    move_of[i] = moves.len() as u32;
                    find.insert((role, canonical(&a.text)), moves.len() as u32);
                    moves.push((role, i as u32));
                    by_text.insert((1, role, &a.text), i as u32);
                }
                _ => {}
            }
        }
        let mut legal_move = Vec::new();
        let mut next_fact = Vec::new();
        let mut goals = Vec::new();
        let mut terminal = Vec::new();
        for (i, a) in g.atoms.iter().enumerate() {
            match a.kind {
                AtomKind::Legal { role } => {
                    let d = by_text
                        .get(&(1, role, a.text.as_str()))
                        .ok_or_else(|| format!("legal atom {} has no does twin", a.text))?;
                    legal_move.push((i as u32, role, move_of[*d as usize]));
                }
                AtomKind::Next => {
                    let t = by_text
                        .get(&(0, 0, a.text.as_str()))
                        .ok_or_else(|| format!("next atom {} has no true twin", a.text))?;
                    next_fact.push((i as u32, fact_of[*t as usize]));
                }
                AtomKind::Goal { role, value } => goals.push((i as u32, role, value)),
                AtomKind::Terminal => terminal.push(i as u32),
                _ => {}
            }
        }

        let mut deps: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut rules_of: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (r, rule) in g.rules.iter().enumerate() {
            if rule.head.index() >= n || rule.body.iter().any(|l| l.atom().index() >= n) {
                return Err(format!("rule {r} names an atom that does not exist"));
            }
            rules_of[rule.head.index()].push(r as u32);
            deps[rule.head.index()].extend(rule.body.iter().map(|l| l.atom().0));
        }
        let sccs = components(&deps);
        let mut comp_of = vec![0usize; n];
        for (c, atoms) in sccs.iter().enumerate() {
            for &a in atoms {
                comp_of[a as usize] = c;
            }
        }
        let mut order = Vec::with_capacity(sccs.len());
        for (c, atoms) in sccs.iter().enumerate() {
            let mut rules = Vec::new();
            let mut recursive = false;
            let mut needs_does = false;
            for &a in atoms {
                for &r in &rules_of[a as usize] {
                    rules.push(r);
                    for l in g.rules.body(r as usize) {
                        let b = l.atom().index();
                        if comp_of[b] == c {
                            if l.negated() {
                                return Err(format!("atom {} depends negatively on itself", g.atoms[b].text));
                            }
                            recursive = true;
                        } else if matches!(g.atoms[b].kind, AtomKind::Does { .. })
                            || order.get(comp_of[b]).is_some_and(|d: &Component| d.needs_does)
                        {
                            needs_does = true;
                        }
                    }
                }
            }
            order.push(Component {
                rules,
                recursive,
                needs_does,
                needs_opaque: false,
            });
        }
        // Which atoms depend on an opaque atom or on a move, for the demand of opaque atoms.
        let mut on_opaque: Vec<bool> = g.atoms.iter().map(|a| a.kind == AtomKind::Opaque).collect();
        let mut on_does: Vec<bool> = g
            .atoms
            .iter()
            .map(|a| matches!(a.kind, AtomKind::Does { .. }))
            .collect();
        for comp in &mut order {
            loop {
                let mut changed = false;
                for &r in &comp.rules {
                    let rule = g.rules.get(r as usize);
                    let h = rule.head.index();
                    let o = rule.body.iter().any(|l| on_opaque[l.atom().index()]);
                    let d = rule.body.iter().any(|l| on_does[l.atom().index()]);
                    if (o && !on_opaque[h]) || (d && !on_does[h]) {
                        on_opaque[h] |= o;
                        on_does[h] |= d;
                        changed = true;
                    }
                }
                if !changed {
                    break;
                }
            }
            comp.needs_opaque = comp
                .rules
                .iter()
                .any(|&r| on_opaque[g.rules.head(r as usize).index()]);
        }
        let demanded_outputs = g
            .atoms
            .iter()
            .map(|a| {
                matches!(
                    a.kind,
                    AtomKind::Legal { .. } | AtomKind::Goal { .. } | AtomKind::Terminal | AtomKind::Next
                )
            })
            .collect();

        let mut initial = GroundState(vec![0; facts.len().div_ceil(64)]);
        for a in &g.init {
            let f = *fact_of
                .get(a.index())
                .filter(|&&f| f != u32::MAX)
                .ok_or_else(|| format!("initial atom {a} is not a true atom"))?;
            initial.set(f as usize);
        }
        let is_opaque = g.atoms.iter().map(|a| a.kind == AtomKind::Opaque).collect();
        Ok(GroundMachine {
            is_opaque,
            on_opaque,
            on_does,
            demanded_outputs,
            oracle,
            opaque_log: Mutex::new((None, 0)),
            g,
            facts,
            moves,
            find,
            legal_move,
            next_fact,
            goals,
            terminal,
            order,
            initial,
            cache: Mutex::new(None),
        })
    }

    /// The ground program.
    pub fn program(&self) -> &Grounded {
        &self.g
    }

    fn lock(&self) -> MutexGuard<'_, Option<(GroundState, Values)>> {
        // The cache is replaced whole, so a panic elsewhere cannot leave it half-written.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evaluates the components that `with_does` selects (those needing `does` or the others)
    /// over `v`. Without `does`, the components that do not read opaque atoms come first; then
    /// the demand of each opaque atom is propagated down from the outputs (`doc/opaque.md` §4),
    /// the demanded opaque atoms are asked for, the others left false, and the remaining
    /// components evaluated.
    fn evaluate(&self, state: &GroundState, v: &mut Values, with_does: bool) {
        if with_does {
            self.run(v, |c| c.needs_does);
            return;
        }
        self.run(v, |c| !c.needs_does && !c.needs_opaque);
        if !self.is_opaque.iter().any(|&o| o) {
            return;
        }
        let mut demand = self.demanded_outputs.clone();
        for comp in self.order.iter().rev() {
            if !comp.needs_opaque {
                continue;
            }
            loop {
                let mut changed = false;
                for &r in &comp.rules {
                    let rule = self.g.rules.get(r as usize);
                    if !demand[rule.head.index()] {
                        continue;
                    }
                    // The literals known now: those reading neither opaque atoms nor moves.
                    let known = |i: usize| !self.on_opaque[i] && !self.on_does[i];
                    if rule
                        .body
                        .iter()
                        .any(|l| known(l.atom().index()) && v.values[l.atom().index()] == l.negated())
                    {
                        continue;
                    }
                    for l in rule.body {
                        let i = l.atom().index();
                        if self.on_opaque[i] && !demand[i] {
                            demand[i] = true;
                            changed = true;
                        }
                    }
                }
                if !comp.recursive || !changed {
                    break;
                }
            }
        }
        for (a, &wanted) in demand.iter().enumerate() {
            if wanted && self.is_opaque[a] {
                self.opaque(state, v, a);
            }
        }
        self.run(v, |c| !c.needs_does && c.needs_opaque);
    }

    /// Evaluates the components `select` picks, in dependency order, over `v`.
    fn run(&self, v: &mut Values, select: impl Fn(&Component) -> bool) {
        for comp in &self.order {
            if !select(comp) {
                continue;
            }
            loop {
                let mut changed = false;
                for &r in &comp.rules {
                    let rule = self.g.rules.get(r as usize);
                    let h = rule.head.index();
                    if !v.values[h]
                        && rule
                            .body
                            .iter()
                            .all(|l| v.values[l.atom().index()] != l.negated())
                    {
                        v.values[h] = true;
                        changed = true;
                    }
                }
                if !comp.recursive || !changed {
                    break;
                }
            }
        }
    }

    /// The value of opaque atom `a` in `state`, asking the oracle the first time.
    fn opaque(&self, state: &GroundState, v: &mut Values, a: usize) -> bool {
        if !v.known[a] {
            let facts: Vec<&str> = (0..self.facts.len())
                .filter(|&f| state.get(f))
                .map(|f| self.g.atoms[self.facts[f] as usize].text.as_str())
                .collect();
            let answer = match &self.oracle {
                Some(o) => o.holds(&facts, &self.g.atoms[a].text),
                None => Err(format!("no oracle for opaque atom {}", self.g.atoms[a].text)),
            };
            let mut log = self.opaque_log.lock().unwrap_or_else(|e| e.into_inner());
            log.1 += 1;
            v.values[a] = match answer {
                Ok(b) => b,
                Err(e) => {
                    log.0.get_or_insert(e);
                    false
                }
            };
            v.known[a] = true;
        }
        v.values[a]
    }

    /// The values of every atom that does not depend on `does`, in `state`.
    fn state_values(&self, state: &GroundState) -> Values {
        if let Some((s, v)) = self.lock().as_ref() {
            if s == state {
                return v.clone();
            }
        }
        let n = self.g.atoms.len();
        let mut v = Values {
            values: vec![false; n],
            known: vec![false; n],
        };
        for (f, &a) in self.facts.iter().enumerate() {
            v.values[a as usize] = state.get(f);
        }
        self.evaluate(state, &mut v, false);
        *self.lock() = Some((state.clone(), v.clone()));
        v
    }

    fn check_state(&self, state: &GroundState) -> bool {
        state.0.len() == self.facts.len().div_ceil(64)
    }
}

impl Machine for GroundMachine {
    type State = GroundState;

    fn engine_name(&self) -> &'static str {
        "ground"
    }

    fn roles(&self) -> &[String] {
        &self.g.roles
    }

    fn initial_state(&self) -> GroundState {
        self.initial.clone()
    }

    fn state_facts(&self, state: &GroundState) -> Vec<FactIdx> {
        (0..self.facts.len())
            .filter(|&f| self.check_state(state) && state.get(f))
            .map(FactIdx::from_index)
            .collect()
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        match self.facts.get(fact.index()) {
            Some(&a) => self.g.atoms[a as usize].text.clone(),
            None => format!("<unknown fact {fact}>"),
        }
    }

    fn legal_moves(&self, state: &GroundState, role: RoleIdx) -> Vec<MoveIdx> {
        if !self.check_state(state) {
            return Vec::new();
        }
        let values = self.state_values(state).values;
        let mut moves: Vec<MoveIdx> = self
            .legal_move
            .iter()
            .filter(|&&(a, r, _)| r as usize == role.index() && values[a as usize])
            .map(|&(_, _, m)| MoveIdx(m))
            .collect();
        moves.sort_unstable();
        moves.dedup();
        moves
    }

    fn move_name(&self, mv: MoveIdx) -> String {
        match self.moves.get(mv.index()) {
            Some(&(_, a)) => self.g.atoms[a as usize].text.clone(),
            None => format!("<unknown move {mv}>"),
        }
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        self.find.get(&(role.0, canonical(name))).map(|&m| MoveIdx(m))
    }

    fn next_state_unchecked(
        &self,
        state: &GroundState,
        joint: &[MoveIdx],
    ) -> Result<GroundState, MachineError> {
        let roles = &self.g.roles;
        if joint.len() != roles.len() {
            return Err(MachineError::WrongMoveCount {
                expected: roles.len(),
                got: joint.len(),
            });
        }
        let mut values = if self.check_state(state) {
            self.state_values(state)
        } else {
            let n = self.g.atoms.len();
            Values {
                values: vec![false; n],
                known: vec![false; n],
            }
        };
        for (r, mv) in joint.iter().enumerate() {
            match self.moves.get(mv.index()) {
                Some(&(role, a)) if role as usize == r => values.values[a as usize] = true,
                _ => {
                    return Err(MachineError::UnknownMove {
                        role: roles[r].clone(),
                        mv: *mv,
                    })
                }
            }
        }
        self.evaluate(state, &mut values, true);
        let mut next = GroundState(vec![0; self.facts.len().div_ceil(64)]);
        for &(a, f) in &self.next_fact {
            if values.values[a as usize] {
                next.set(f as usize);
            }
        }
        Ok(next)
    }

    fn is_terminal(&self, state: &GroundState) -> bool {
        if !self.check_state(state) {
            return false;
        }
        let values = self.state_values(state).values;
        self.terminal.iter().any(|&a| values[a as usize])
    }

    fn goal_values(&self, state: &GroundState, role: RoleIdx) -> Vec<u32> {
        if !self.check_state(state) {
            return Vec::new();
        }
        let values = self.state_values(state).values;
        let mut out: Vec<u32> = self
            .goals
            .iter()
            .filter(|&&(a, r, _)| r as usize == role.index() && values[a as usize])
            .map(|&(_, _, v)| v)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn move_names_are_canonicalized() {
        assert_eq!(canonical("( MARK  1 1 )"), "(mark 1 1)");
        assert_eq!(canonical("noop"), "noop");
        assert_eq!(canonical("(add (ten))"), "(add (ten))");
        assert_eq!(canonical("(f (g a) b)"), "(f (g a) b)");
    }
}
