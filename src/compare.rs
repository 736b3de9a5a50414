//! Differential checks: an engine against a reference trace, and engines against each other.
//!
//! Engines are compared only through names in canonical KIF (facts by
//! [`Machine::fact_name`], moves by [`Machine::move_name`]), byte-order sorted like the traces,
//! because indices are private to each machine. At every state the check compares the base facts,
//! the terminal flag, every role's goal values and, in a non-terminal state, every role's legal
//! moves; then it plays the same joint move everywhere.
//!
//! A playout is abandoned after the first state that shows a difference: every later state
//! descends from a disagreement, so comparing it would only repeat the first finding. The count
//! of mismatches is therefore the number of differing items in the states that disagree, and the
//! first one is kept in full for the report.

use crate::trace::{Trace, TracePlayout};
use propjet_runtime::{Machine, MoveIdx, Rng, RoleIdx};
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

/// The default bound on the length of a random playout, in joint moves.
pub const DEFAULT_MAX_STEPS: u32 = 1000;

/// One engine positioned at a state, seen through names only, so that engines of different
/// types can be driven side by side. Build one for any machine with [`cursor`].
pub trait Cursor {
    /// The engine's short name, such as `reference`.
    fn engine_name(&self) -> &str;
    /// The roles in the order of the game's `role` facts.
    fn roles(&self) -> &[String];
    /// Goes back to the initial state.
    fn reset(&mut self);
    /// The base facts of the current state, byte-order sorted.
    fn facts(&self) -> Vec<String>;
    /// Whether the current state is terminal.
    fn terminal(&self) -> bool;
    /// Every goal value of role `role` (a position in [`Cursor::roles`]) in the current state,
    /// sorted ascending.
    fn goals(&self, role: usize) -> Vec<u32>;
    /// The legal moves of role `role` in the current state, byte-order sorted.
    fn legal(&self, role: usize) -> Vec<String>;
    /// Plays a joint move given by name, one per role in role order. The state is unchanged on
    /// error.
    fn play(&mut self, joint: &[String]) -> Result<(), String>;
}

/// A [`Cursor`] over `machine`, at its initial state.
pub fn cursor<M: Machine>(machine: &M) -> Box<dyn Cursor + '_> {
    Box::new(MachineCursor {
        state: machine.initial_state(),
        machine,
    })
}

struct MachineCursor<'m, M: Machine> {
    machine: &'m M,
    state: M::State,
}

impl<M: Machine> Cursor for MachineCursor<'_, M> {
    fn engine_name(&self) -> &str {
        self.machine.engine_name()
    }

    fn roles(&self) -> &[String] {
        self.machine.roles()
    }

    fn reset(&mut self) {
        self.state = self.machine.initial_state();
    }

    fn facts(&self) -> Vec<String> {
        sorted(
            self.machine
                .state_facts(&self.state)
                .into_iter()
                .map(|f| self.machine.fact_name(f)),
        )
    }

    fn terminal(&self) -> bool {
        self.machine.is_terminal(&self.state)
    }

    fn goals(&self, role: usize) -> Vec<u32> {
        let mut values = self.machine.goal_values(&self.state, RoleIdx::from_index(role));
        values.sort_unstable();
        values
    }

    fn legal(&self, role: usize) -> Vec<String> {
        sorted(
            self.machine
                .legal_moves(&self.state, RoleIdx::from_index(role))
                .into_iter()
                .map(|m| self.machine.move_name(m)),
        )
    }

    fn play(&mut self, joint: &[String]) -> Result<(), String> {
        let roles = self.machine.roles();
        if joint.len() != roles.len() {
            return Err(format!(
                "a joint move of {} moves for {} roles",
                joint.len(),
                roles.len()
            ));
        }
        let moves = joint
            .iter()
            .enumerate()
            .map(|(r, name)| {
                self.machine
                    .find_move(RoleIdx::from_index(r), name)
                    .ok_or_else(|| format!("role {} has no move named {name}", roles[r]))
            })
            .collect::<Result<Vec<MoveIdx>, String>>()?;
        self.state = self
            .machine
            .next_state(&self.state, &moves)
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = names.collect();
    v.sort_unstable();
    v
}

/// What one side said about a compared item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// A sorted list of names (facts or moves).
    Names(Vec<String>),
    /// A sorted list of goal values.
    Values(Vec<u32>),
    /// A yes/no answer (terminal).
    Flag(bool),
    /// A free-form answer, such as an error message.
    Text(String),
}

/// Which item of a state two sides disagree on, or which internal problem a side has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Aspect {
    /// The role lists differ; nothing else can be compared.
    Roles,
    /// The base facts of the state.
    State,
    /// The terminal flag.
    Terminal,
    /// The goal values of a role.
    Goals(String),
    /// The legal moves of a role.
    Legal(String),
    /// A side could not play the joint move the others played.
    Play,
    /// A side says the state is not terminal, yet a role has no legal move.
    NoLegalMove(String),
    /// A side says the state is terminal, yet a role has no goal value or several.
    GoalNotUnique(String),
}

impl fmt::Display for Aspect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Aspect::Roles => write!(f, "the roles differ"),
            Aspect::State => write!(f, "the state's base facts differ"),
            Aspect::Terminal => write!(f, "terminal differs"),
            Aspect::Goals(role) => write!(f, "the goal values of {role} differ"),
            Aspect::Legal(role) => write!(f, "the legal moves of {role} differ"),
            Aspect::Play => write!(f, "the joint move could not be played"),
            Aspect::NoLegalMove(role) => write!(f, "{role} has no legal move in a non-terminal state"),
            Aspect::GoalNotUnique(role) => {
                write!(
                    f,
                    "{role} does not have exactly one goal value in a terminal state"
                )
            }
        }
    }
}

/// One difference found, with where it was found and what each side said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The position of the playout in the run, from 0.
    pub playout: usize,
    /// How to find or reproduce the playout (its seed, or its place in the trace file).
    pub origin: String,
    /// The number of joint moves played before the state.
    pub step: u32,
    /// The state's base facts as the trace (or the first engine) has them.
    pub state: Vec<String>,
    /// What differs.
    pub aspect: Aspect,
    /// Each side by name (`trace` or an engine name) with what it said.
    pub sides: Vec<(String, Said)>,
}

/// The result of a comparison run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// How many playouts were run.
    pub playouts: usize,
    /// How many states were compared (each counted once, however many engines saw it).
    pub states: u64,
    /// How many differences were found.
    pub mismatches: u64,
    /// How many of them are a problem of the game itself that every engine reported alike (a
    /// non-terminal state with no legal move for a role, a terminal state without exactly one
    /// goal per role), not a difference between engines.
    pub flaws: u64,
    /// The first difference, in full.
    pub first: Option<Mismatch>,
}

impl Report {
    /// Whether no difference was found.
    pub fn is_clean(&self) -> bool {
        self.mismatches == 0
    }

    /// The mismatches that are differences between engines (or with the trace), not flaws of
    /// the game that every engine saw alike.
    pub fn disagreements(&self) -> u64 {
        self.mismatches - self.flaws
    }

    fn record(&mut self, found: Vec<Mismatch>) -> bool {
        let any = !found.is_empty();
        self.mismatches += found.len() as u64;
        if self.first.is_none() {
            self.first = found.into_iter().next();
        }
        any
    }
}

/// Why a comparison could not run to its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// No engine was given.
    #[error("no engine to compare")]
    NoEngines,
    /// A random playout did not reach a terminal state within the step bound.
    #[error("playout {playout} (seed {seed}) reached no terminal state within {limit} steps")]
    StepLimit {
        /// The playout's position in the run.
        playout: usize,
        /// The seed that reproduces it.
        seed: u64,
        /// The bound.
        limit: u32,
    },
}

/// What one side says about one state.
struct View {
    facts: Vec<String>,
    terminal: bool,
    goals: Vec<Vec<u32>>,
    /// Legal moves per role; `None` where they are not compared (terminal states).
    legal: Option<Vec<Vec<String>>>,
}

fn observe(c: &dyn Cursor, with_legal: bool) -> View {
    let roles = c.roles().len();
    View {
        facts: c.facts(),
        terminal: c.terminal(),
        goals: (0..roles).map(|r| c.goals(r)).collect(),
        legal: with_legal.then(|| (0..roles).map(|r| c.legal(r)).collect()),
    }
}

/// Where a state was met, to build mismatches with.
struct Place<'a> {
    playout: usize,
    origin: &'a str,
    step: u32,
    state: &'a [String],
}

impl Place<'_> {
    fn mismatch(&self, aspect: Aspect, sides: Vec<(String, Said)>) -> Mismatch {
        Mismatch {
            playout: self.playout,
            origin: self.origin.to_string(),
            step: self.step,
            state: self.state.to_vec(),
            aspect,
            sides,
        }
    }
}

/// Compares two views of one state item by item.
fn compare_views(
    place: &Place,
    roles: &[String],
    (a_name, a): (&str, &View),
    (b_name, b): (&str, &View),
) -> Vec<Mismatch> {
    let mut found = Vec::new();
    let mut differ = |aspect: Aspect, x: Said, y: Said| {
        found.push(place.mismatch(aspect, vec![(a_name.to_string(), x), (b_name.to_string(), y)]));
    };
    if a.facts != b.facts {
        differ(
            Aspect::State,
            Said::Names(a.facts.clone()),
            Said::Names(b.facts.clone()),
        );
    }
    if a.terminal != b.terminal {
        differ(Aspect::Terminal, Said::Flag(a.terminal), Said::Flag(b.terminal));
    }
    for (r, role) in roles.iter().enumerate() {
        if a.goals[r] != b.goals[r] {
            differ(
                Aspect::Goals(role.clone()),
                Said::Values(a.goals[r].clone()),
                Said::Values(b.goals[r].clone()),
            );
        }
    }
    if let (Some(la), Some(lb)) = (&a.legal, &b.legal) {
        for (r, role) in roles.iter().enumerate() {
            if la[r] != lb[r] {
                differ(
                    Aspect::Legal(role.clone()),
                    Said::Names(la[r].clone()),
                    Said::Names(lb[r].clone()),
                );
            }
        }
    }
    found
}

/// Replays every playout of `trace` on `machine` and compares each state with the trace.
pub fn replay_trace<M: Machine>(machine: &M, trace: &Trace) -> Report {
    replay_trace_on(cursor(machine).as_mut(), trace)
}

/// [`replay_trace`] on an engine already wrapped as a [`Cursor`].
pub fn replay_trace_on(engine: &mut dyn Cursor, trace: &Trace) -> Report {
    let mut report = Report::default();
    for (i, playout) in trace.playouts.iter().enumerate() {
        report.playouts += 1;
        replay_playout(engine, &trace.source, i, playout, &mut report);
    }
    report
}

fn replay_playout(
    engine: &mut dyn Cursor,
    source: &Path,
    index: usize,
    playout: &TracePlayout,
    report: &mut Report,
) {
    let origin = format!(
        "seed {}, playout {}, {}:{}",
        playout.header.seed,
        playout.header.playout,
        source.display(),
        playout.line
    );
    let name = engine.engine_name().to_string();
    let roles = playout.header.roles.clone();
    if engine.roles() != roles.as_slice() {
        let place = Place {
            playout: index,
            origin: &origin,
            step: 0,
            state: &[],
        };
        report.record(vec![place.mismatch(
            Aspect::Roles,
            vec![
                ("trace".to_string(), Said::Names(roles)),
                (name, Said::Names(engine.roles().to_vec())),
            ],
        )]);
        return;
    }
    engine.reset();
    for step in &playout.steps {
        let place = Place {
            playout: index,
            origin: &origin,
            step: step.t,
            state: &step.state,
        };
        let expected = View {
            facts: step.state.clone(),
            terminal: step.terminal,
            goals: step.goals.clone(),
            legal: Some(step.legal.clone()),
        };
        let got = observe(engine, true);
        report.states += 1;
        if report.record(compare_views(&place, &roles, ("trace", &expected), (&name, &got))) {
            return;
        }
        if let Err(e) = engine.play(&step.joint) {
            report.record(vec![place.mismatch(
                Aspect::Play,
                vec![
                    ("trace".to_string(), Said::Names(step.joint.clone())),
                    (name, Said::Text(e)),
                ],
            )]);
            return;
        }
    }
    let end = &playout.end;
    let place = Place {
        playout: index,
        origin: &origin,
        step: end.t,
        state: &end.state,
    };
    let expected = View {
        facts: end.state.clone(),
        terminal: end.terminal,
        goals: end.goals.clone(),
        legal: None,
    };
    let got = observe(engine, false);
    report.states += 1;
    report.record(compare_views(&place, &roles, ("trace", &expected), (&name, &got)));
}

/// Plays `playouts` seeded random games with every engine in lockstep and compares every engine
/// with the first at each state. Playout `i` uses seed `seed + i` (wrapping), so any playout can
/// be rerun alone.
///
/// The joint move is drawn from the first engine's legal moves sorted by name, one
/// [`Rng::below`] draw per role in role order: the games played depend only on the seed and the
/// game's rules, not on any engine's internal numbering. Besides differences, each engine's own
/// problems are reported as mismatches: a non-terminal state where a role has no legal move, and
/// a terminal state where a role does not have exactly one goal value.
pub fn lockstep(
    engines: &mut [Box<dyn Cursor + '_>],
    playouts: usize,
    seed: u64,
    max_steps: u32,
) -> Result<Report, CompareError> {
    lockstep_with(engines, playouts, seed, max_steps, false)
}

/// As [`lockstep`], but a playout that reaches `max_steps` ends there without an error: the
/// engines are compared on the first `max_steps` joint moves of each playout. For games whose
/// states are too costly to play to the end in a test.
pub fn lockstep_prefix(
    engines: &mut [Box<dyn Cursor + '_>],
    playouts: usize,
    seed: u64,
    max_steps: u32,
) -> Result<Report, CompareError> {
    lockstep_with(engines, playouts, seed, max_steps, true)
}

fn lockstep_with(
    engines: &mut [Box<dyn Cursor + '_>],
    playouts: usize,
    seed: u64,
    max_steps: u32,
    prefix: bool,
) -> Result<Report, CompareError> {
    let Some(first) = engines.first() else {
        return Err(CompareError::NoEngines);
    };
    let roles = first.roles().to_vec();
    let mut report = Report::default();
    for other in &engines[1..] {
        if other.roles() != roles.as_slice() {
            let origin = "the role lists".to_string();
            let place = Place {
                playout: 0,
                origin: &origin,
                step: 0,
                state: &[],
            };
            report.record(vec![place.mismatch(
                Aspect::Roles,
                vec![
                    (first.engine_name().to_string(), Said::Names(roles.clone())),
                    (
                        other.engine_name().to_string(),
                        Said::Names(other.roles().to_vec()),
                    ),
                ],
            )]);
            return Ok(report);
        }
    }
    for i in 0..playouts {
        report.playouts += 1;
        lockstep_playout(
            engines,
            &roles,
            i,
            seed.wrapping_add(i as u64),
            max_steps,
            prefix,
            &mut report,
        )?;
    }
    Ok(report)
}

fn lockstep_playout(
    engines: &mut [Box<dyn Cursor + '_>],
    roles: &[String],
    index: usize,
    seed: u64,
    max_steps: u32,
    prefix: bool,
    report: &mut Report,
) -> Result<(), CompareError> {
    let origin = format!("seed {seed}");
    let mut rng = Rng::new(seed);
    for e in engines.iter_mut() {
        e.reset();
    }
    let names: Vec<String> = engines.iter().map(|e| e.engine_name().to_string()).collect();
    let mut step = 0u32;
    loop {
        let first_terminal = engines[0].terminal();
        let views: Vec<View> = engines
            .iter()
            .map(|e| observe(e.as_ref(), !first_terminal))
            .collect();
        let place = Place {
            playout: index,
            origin: &origin,
            step,
            state: &views[0].facts,
        };
        report.states += 1;
        let mut found = Vec::new();
        let mut problems: Vec<Vec<Mismatch>> = Vec::new();
        for (k, view) in views.iter().enumerate() {
            let own = internal_problems(&place, roles, &names[k], view);
            problems.push(own.clone());
            found.extend(own);
            if k > 0 {
                found.extend(compare_views(
                    &place,
                    roles,
                    (&names[0], &views[0]),
                    (&names[k], view),
                ));
            }
        }
        // A flaw of the game is a problem every engine has alike, with the same aspects.
        let aspects = |ms: &Vec<Mismatch>| ms.iter().map(|m| m.aspect.clone()).collect::<Vec<_>>();
        if problems.iter().all(|p| aspects(p) == aspects(&problems[0]))
            && found.len() == problems.iter().map(Vec::len).sum::<usize>()
        {
            report.flaws += found.len() as u64;
        }
        if report.record(found) || first_terminal {
            return Ok(());
        }
        if step == max_steps && prefix {
            return Ok(());
        }
        if step == max_steps {
            return Err(CompareError::StepLimit {
                playout: index,
                seed,
                limit: max_steps,
            });
        }
        // Every role has a move here: an empty list was reported above and ended the playout.
        let legal = views[0]
            .legal
            .as_ref()
            .expect("legal moves are observed in non-terminal states");
        let joint: Vec<String> = legal
            .iter()
            .map(|moves| moves[rng.below(moves.len() as u32) as usize].clone())
            .collect();
        let mut failed = Vec::new();
        for (k, e) in engines.iter_mut().enumerate() {
            if let Err(msg) = e.play(&joint) {
                failed.push(place.mismatch(
                    Aspect::Play,
                    vec![
                        ("joint move".to_string(), Said::Names(joint.clone())),
                        (names[k].clone(), Said::Text(msg)),
                    ],
                ));
            }
        }
        if report.record(failed) {
            return Ok(());
        }
        step += 1;
    }
}

/// The problems one engine has in a state by itself, whatever the others say.
fn internal_problems(place: &Place, roles: &[String], name: &str, view: &View) -> Vec<Mismatch> {
    let mut found = Vec::new();
    for (r, role) in roles.iter().enumerate() {
        if view.terminal {
            if view.goals[r].len() != 1 {
                found.push(place.mismatch(
                    Aspect::GoalNotUnique(role.clone()),
                    vec![(name.to_string(), Said::Values(view.goals[r].clone()))],
                ));
            }
        } else if let Some(legal) = &view.legal {
            if legal[r].is_empty() {
                found.push(place.mismatch(
                    Aspect::NoLegalMove(role.clone()),
                    vec![(name.to_string(), Said::Names(Vec::new()))],
                ));
            }
        }
    }
    found
}

impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Said::Names(v) if v.is_empty() => write!(f, "(none)"),
            Said::Names(v) => write!(f, "{}", v.join(" ")),
            Said::Values(v) if v.is_empty() => write!(f, "(none)"),
            Said::Values(v) => {
                let texts: Vec<String> = v.iter().map(u32::to_string).collect();
                write!(f, "{}", texts.join(" "))
            }
            Said::Flag(b) => write!(f, "{b}"),
            Said::Text(t) => write!(f, "{t}"),
        }
    }
}

impl fmt::Display for Mismatch {
    /// Prints where, the state, what each side said and, for two lists of names, what only one
    /// side has, since long lists that differ by one entry are hard to compare by eye.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "playout {} ({}), step {}: {}",
            self.playout, self.origin, self.step, self.aspect
        )?;
        // A role mismatch is found before any state exists.
        if self.aspect != Aspect::Roles {
            write!(
                f,
                "\n  state ({} facts): {}",
                self.state.len(),
                self.state.join(" ")
            )?;
        }
        let width = self.sides.iter().map(|(n, _)| n.len()).max().unwrap_or(0) + 1;
        for (name, said) in &self.sides {
            write!(f, "\n  {:width$}  {said}", format!("{name}:"))?;
        }
        if let [(a, Said::Names(x)), (b, Said::Names(y))] = self.sides.as_slice() {
            let xs: BTreeSet<&String> = x.iter().collect();
            let ys: BTreeSet<&String> = y.iter().collect();
            let only = |p: &BTreeSet<&String>, q: &BTreeSet<&String>| {
                p.difference(q).map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
            };
            let (only_a, only_b) = (only(&xs, &ys), only(&ys, &xs));
            if !only_a.is_empty() {
                write!(f, "\n  only {a}: {only_a}")?;
            }
            if !only_b.is_empty() {
                write!(f, "\n  only {b}: {only_b}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} states compared, {} mismatches",
            self.states, self.mismatches
        )?;
        if self.flaws > 0 {
            write!(
                f,
                " ({} of them flaws of the game that every engine shares)",
                self.flaws
            )?;
        }
        if let Some(m) = &self.first {
            write!(f, "\nfirst mismatch: {m}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_trace;
    use propjet_runtime::doc_support::Countdown;
    use propjet_runtime::{FactIdx, MachineError};

    /// Two roles race to 3; each turn both say `step` or `wait` (a simultaneous-move game).
    /// The flaws switch on deliberate bugs so that every kind of mismatch can be provoked.
    #[derive(Default)]
    struct Race {
        roles: Vec<String>,
        /// `wait` is missing from the legal moves of role 1 once it has reached 1.
        drop_wait: bool,
        /// Role 0 gets two goal values at the end.
        double_goal: bool,
        /// The game never ends.
        endless: bool,
        /// Role 1 has no legal move at position 2.
        stuck: bool,
        /// A second wait move that `find_move` does not know.
        unknown_move: bool,
    }

    impl Race {
        fn new() -> Race {
            Race {
                roles: vec!["left".into(), "right".into()],
                ..Race::default()
            }
        }
    }

    impl Machine for Race {
        type State = (u32, u32);
        fn engine_name(&self) -> &'static str {
            "race"
        }
        fn roles(&self) -> &[String] {
            &self.roles
        }
        fn initial_state(&self) -> (u32, u32) {
            (0, 0)
        }
        fn state_facts(&self, s: &(u32, u32)) -> Vec<FactIdx> {
            vec![FactIdx(s.0), FactIdx(10 + s.1)]
        }
        fn fact_name(&self, f: FactIdx) -> String {
            if f.0 < 10 {
                format!("(at left {})", f.0)
            } else {
                format!("(at right {})", f.0 - 10)
            }
        }
        fn legal_moves(&self, s: &(u32, u32), role: RoleIdx) -> Vec<MoveIdx> {
            let pos = if role.0 == 0 { s.0 } else { s.1 };
            if self.stuck && role.0 == 1 && pos == 2 {
                return vec![];
            }
            let mut moves = vec![MoveIdx(0)];
            if !(self.drop_wait && role.0 == 1 && pos >= 1) {
                moves.push(MoveIdx(1));
            }
            if self.unknown_move {
                moves.push(MoveIdx(2));
            }
            moves
        }
        fn move_name(&self, m: MoveIdx) -> String {
            ["step", "wait", "zzz"][m.index()].to_string()
        }
        fn find_move(&self, _role: RoleIdx, name: &str) -> Option<MoveIdx> {
            match name {
                "step" => Some(MoveIdx(0)),
                "wait" => Some(MoveIdx(1)),
                _ => None,
            }
        }
        fn next_state_unchecked(
            &self,
            s: &(u32, u32),
            joint: &[MoveIdx],
        ) -> Result<(u32, u32), MachineError> {
            if joint.len() != 2 {
                return Err(MachineError::WrongMoveCount {
                    expected: 2,
                    got: joint.len(),
                });
            }
            let adv = |m: MoveIdx| u32::from(m.0 == 0);
            Ok(((s.0 + adv(joint[0])).min(3), (s.1 + adv(joint[1])).min(3)))
        }
        fn is_terminal(&self, s: &(u32, u32)) -> bool {
            !self.endless && (s.0 == 3 || s.1 == 3)
        }
        fn goal_values(&self, s: &(u32, u32), role: RoleIdx) -> Vec<u32> {
            if !self.is_terminal(s) {
                return vec![];
            }
            let mine = if role.0 == 0 { s.0 } else { s.1 };
            let mut v = vec![if mine == 3 { 100 } else { 0 }];
            if self.double_goal && role.0 == 0 {
                v.insert(0, 50);
            }
            v
        }
    }

    fn trace_of(lines: &[String]) -> Trace {
        parse_trace(&lines.join("\n"), Path::new("race.jsonl")).unwrap()
    }

    /// A trace of Race written by hand: right steps three times while left waits.
    fn race_trace() -> Vec<String> {
        let mut lines = vec![
            r#"{"type":"header","game":"race","roles":["left","right"],"seed":1,"playout":0}"#.to_string(),
        ];
        for t in 0..3 {
            lines.push(format!(
                r#"{{"type":"step","t":{t},"state":["(at left 0)","(at right {t})"],"terminal":false,"goals":[[],[]],"legal":[["step","wait"],["step","wait"]],"joint":["wait","step"]}}"#
            ));
        }
        lines.push(
            r#"{"type":"end","t":3,"state":["(at left 0)","(at right 3)"],"terminal":true,"goals":[[0],[100]],"capped":false}"#
                .to_string(),
        );
        lines
    }

    #[test]
    fn a_correct_machine_replays_a_trace_cleanly() {
        let report = replay_trace(&Race::new(), &trace_of(&race_trace()));
        assert_eq!(report.states, 4);
        assert_eq!(report.playouts, 1);
        assert!(report.is_clean(), "{report}");
    }

    #[test]
    fn a_wrong_legal_set_is_reported_with_both_sides() {
        let machine = Race {
            drop_wait: true,
            ..Race::new()
        };
        let report = replay_trace(&machine, &trace_of(&race_trace()));
        // Step 0 agrees; at step 1 right has reached 1 and lost its wait move.
        assert_eq!(report.states, 2);
        assert_eq!(report.mismatches, 1);
        let m = report.first.as_ref().unwrap();
        assert_eq!(m.step, 1);
        assert_eq!(m.aspect, Aspect::Legal("right".into()));
        assert_eq!(m.state, ["(at left 0)", "(at right 1)"]);
        let text = m.to_string();
        assert!(text.contains("only trace: wait"), "{text}");
        assert!(text.contains("race.jsonl"), "{text}");
    }

    #[test]
    fn a_wrong_state_terminal_and_goal_are_all_counted() {
        let mut lines = race_trace();
        lines[4] = lines[4]
            .replace("(at right 3)", "(at right 4)")
            .replace("[[0],[100]]", "[[0],[50]]")
            .replace("\"terminal\":true", "\"terminal\":false")
            .replace("\"capped\":false", "\"capped\":true");
        let report = replay_trace(&Race::new(), &trace_of(&lines));
        assert_eq!(report.mismatches, 3);
        let m = report.first.unwrap();
        assert_eq!((m.step, m.aspect), (3, Aspect::State));
    }

    #[test]
    fn a_trace_move_the_machine_cannot_find_is_a_mismatch() {
        // The machine lists zzz as legal but cannot find it by name; the trace plays it.
        let lines: Vec<String> = race_trace()
            .iter()
            .map(|l| l.replace("[\"step\",\"wait\"]", "[\"step\",\"wait\",\"zzz\"]"))
            .map(|l| l.replace("\"joint\":[\"wait\",\"step\"]", "\"joint\":[\"wait\",\"zzz\"]"))
            .collect();
        let machine = Race {
            unknown_move: true,
            ..Race::new()
        };
        let report = replay_trace(&machine, &trace_of(&lines));
        assert_eq!((report.states, report.mismatches), (1, 1));
        let m = report.first.unwrap();
        assert_eq!(m.aspect, Aspect::Play);
        assert!(m.to_string().contains("right has no move named zzz"), "{m}");
    }

    #[test]
    fn different_roles_in_the_trace_are_a_mismatch() {
        let lines: Vec<String> = race_trace()
            .iter()
            .map(|l| l.replace("\"right\"]", "\"middle\"]"))
            .collect();
        let report = replay_trace(&Race::new(), &trace_of(&lines));
        assert_eq!(report.states, 0);
        assert_eq!(report.first.unwrap().aspect, Aspect::Roles);
    }

    #[test]
    fn an_unplayable_joint_move_is_a_mismatch() {
        let mut lines = race_trace();
        lines[1] = lines[1].replace(
            "\"legal\":[[\"step\",\"wait\"],[\"step\",\"wait\"]],\"joint\":[\"wait\",\"step\"]",
            "\"legal\":[[\"step\",\"wait\"],[\"step\",\"wait\"]],\"joint\":[\"wait\",\"wait\"]",
        );
        // The machine plays wait/wait and stays at (0, 0), while the trace expects right at 1.
        let report = replay_trace(&Race::new(), &trace_of(&lines));
        assert_eq!(report.first.unwrap().aspect, Aspect::State);

        let race = Race::new();
        let mut engine = cursor(&race);
        let err = engine.play(&["wait".into(), "fly".into()]).unwrap_err();
        assert!(err.contains("right has no move named fly"), "{err}");
        assert_eq!(engine.facts(), ["(at left 0)", "(at right 0)"]);
    }

    #[test]
    fn identical_engines_agree_and_playouts_depend_only_on_the_seed() {
        let (a, b) = (Race::new(), Race::new());
        let mut engines = vec![cursor(&a), cursor(&b)];
        let report = lockstep(&mut engines, 20, 7, 100).unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(report.playouts, 20);
        // Every playout takes at least 3 steps, so at least 4 states each.
        assert!(report.states >= 80, "{}", report.states);
        let again = lockstep(&mut engines, 20, 7, 100).unwrap();
        assert_eq!(again.states, report.states);
        let other = lockstep(&mut engines, 20, 8, 100).unwrap();
        assert_ne!(other.states, report.states, "seeds 7 and 8 played the same games");
    }

    #[test]
    fn lockstep_reports_a_difference_between_engines() {
        let (a, b) = (
            Race::new(),
            Race {
                drop_wait: true,
                ..Race::new()
            },
        );
        let mut engines = vec![cursor(&a), cursor(&b)];
        let report = lockstep(&mut engines, 10, 0, 100).unwrap();
        assert!(!report.is_clean());
        let m = report.first.unwrap();
        assert_eq!(m.aspect, Aspect::Legal("right".into()));
        assert_eq!(m.sides[0].0, "race");
        assert!(m.to_string().contains("only race: wait"), "{m}");
    }

    #[test]
    fn lockstep_reports_internal_problems_and_the_step_bound() {
        let stuck = Race {
            stuck: true,
            ..Race::new()
        };
        let report = lockstep(&mut [cursor(&stuck)], 30, 0, 100).unwrap();
        let m = report.first.expect("some playout reaches right at 2");
        assert_eq!(m.aspect, Aspect::NoLegalMove("right".into()));

        let double = Race {
            double_goal: true,
            ..Race::new()
        };
        let report = lockstep(&mut [cursor(&double)], 1, 0, 100).unwrap();
        let m = report.first.unwrap();
        assert_eq!(m.aspect, Aspect::GoalNotUnique("left".into()));
        // Left won or lost; either way the cursor sorts the machine's two values.
        let both = [Said::Values(vec![0, 50]), Said::Values(vec![50, 100])];
        assert!(both.contains(&m.sides[0].1), "{m}");

        let endless = Race {
            endless: true,
            ..Race::new()
        };
        let err = lockstep(&mut [cursor(&endless)], 3, 5, 40).unwrap_err();
        assert_eq!(
            err,
            CompareError::StepLimit {
                playout: 0,
                seed: 5,
                limit: 40
            }
        );
        assert!(err.to_string().contains("within 40 steps"));

        assert_eq!(lockstep(&mut [], 1, 0, 10).unwrap_err(), CompareError::NoEngines);
    }

    #[test]
    fn lockstep_reports_a_move_one_engine_cannot_play() {
        let (a, b) = (
            Race {
                unknown_move: true,
                ..Race::new()
            },
            Race::new(),
        );
        let mut engines = vec![cursor(&a), cursor(&b)];
        let report = lockstep(&mut engines, 5, 0, 100).unwrap();
        // The legal sets differ at the first state already (zzz is only in the first engine).
        assert_eq!(report.first.unwrap().aspect, Aspect::Legal("left".into()));

        // Alone, the engine with a move it cannot find fails as soon as zzz is drawn.
        let report = lockstep(&mut [cursor(&a)], 5, 0, 100).unwrap();
        let m = report.first.expect("zzz is drawn in some playout");
        assert_eq!(m.aspect, Aspect::Play);
        assert!(m.to_string().contains("no move named zzz"), "{m}");
    }

    #[test]
    fn different_role_lists_stop_a_lockstep_run() {
        let (a, b) = (Race::new(), Countdown(3));
        let mut engines = vec![cursor(&a), cursor(&b)];
        let report = lockstep(&mut engines, 5, 0, 100).unwrap();
        assert_eq!(report.states, 0);
        assert_eq!(report.first.unwrap().aspect, Aspect::Roles);
    }
}
