//! Seeded batches of random rollouts: on any [`Machine`] one state at a time, and on the lanes
//! of the [`Interpreter`] (64) or of [`Native`] code (64 or 128) many games at once.
//!
//! # Which rollouts a seed means
//!
//! A batch is a seed, a list of start states and a number of rollouts (or a deadline). Rollout
//! `i` starts from `starts[i % starts.len()]` and draws from [`Rng::for_rollout`]`(seed, i)`
//! exactly as [`random_playout`](crate::random_playout) does: at every non-terminal state, one [`Rng::below`] draw per
//! role in role order, choosing among the role's legal moves in ascending [`MoveIdx`] order.
//! A rollout's moves therefore depend on its index alone, never on the lane or thread that
//! plays it or on the order in which rollouts finish, and the *set* of rollouts `0..n` is the
//! same on every engine. Goal totals, depth totals and the order-independent
//! [`Totals::fingerprint`] are then equal on every engine that computes the game correctly:
//! that is the differential check of the drivers.
//!
//! A rollout that reaches a dead end (a non-terminal state where a role has no legal move)
//! ends there or fails the batch, as [`Plan::stall`] says, alike on every driver.
//!
//! The propnet engines number moves alike (the [`Layout`]'s input order). An engine with its
//! own numbering, such as the GDL-level reference evaluator, is put in that order by
//! [`InputOrder`] to replay the same rollouts.
//!
//! # Lanes
//!
//! [`lane_rollouts`] keeps up to 64 or 128 games in the lanes of one value array. Each step runs
//! the terminal entry on all lanes; lanes that ended record their goals (one goals call) and
//! restart with the next rollout index, or go idle when none is left. Then the legal entry runs,
//! every live lane draws its joint move, the chosen input bits are set, the next entry runs and
//! the next-state outputs are copied into the base slots.
//!
//! The move choice turns per-input legal words into per-lane choices. Lanes with a single
//! legal move get it word by word for all lanes at once. The others either transpose each block
//! of 64 inputs × 64 lanes of legal bits into per-lane bitsets and select the `below(count)`-th
//! set bit (cost per block), or walk the set bits of every legal word appending the input to
//! per-lane lists stored column-wise (`list[k * lanes + lane]`; cost per legal move). A running
//! count of the legal moves picks the cheaper; both choose the same move. `doc/playouts.md`
//! has the measurements.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::interp::neg_mask;
use crate::playout::{random_walk, Stall};
use crate::rng::mix64;
use crate::{
    Entry, FactIdx, Interpreter, LaneError, Layout, Machine, MachineError, MoveIdx, Native, NativeError,
    PackedState, PlayoutError, Program, Rng, RoleIdx, Width,
};

/// How many claims of a [`RolloutSource`] with a deadline share one reading of the clock.
pub const DEADLINE_CHECK_CLAIMS: u64 = 16;

/// Hands out rollout indices to the drivers of a batch, possibly on several threads: `0, 1, 2…`
/// up to a count, or until a deadline passes.
#[derive(Debug)]
pub struct RolloutSource {
    next: AtomicU64,
    /// Set once the deadline has passed.
    closed: AtomicBool,
    limit: u64,
    deadline: Option<Instant>,
    /// The clock is read on claims that are a multiple of this.
    check_every: u64,
}

impl RolloutSource {
    /// Rollouts `0..count`.
    pub fn count(count: u64) -> RolloutSource {
        RolloutSource {
            next: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            limit: count,
            deadline: None,
            check_every: DEADLINE_CHECK_CLAIMS,
        }
    }

    /// Rollouts `0, 1, 2…` started before `deadline` (give or take the claims between two
    /// readings of the clock). Rollouts under way at the deadline are played to their end.
    pub fn until(deadline: Instant) -> RolloutSource {
        RolloutSource {
            next: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            limit: u64::MAX,
            deadline: Some(deadline),
            check_every: DEADLINE_CHECK_CLAIMS,
        }
    }

    /// Rollouts `0, 1, 2…` started before `deadline`, the clock read on every claim: for
    /// drivers that play one state at a time, whose rollouts may each take longer than
    /// reading the clock by far (the reference evaluator on a large game takes seconds per
    /// rollout, and [`RolloutSource::until`] would start [`DEADLINE_CHECK_CLAIMS`] of them
    /// whatever the deadline).
    pub fn until_each(deadline: Instant) -> RolloutSource {
        RolloutSource {
            check_every: 1,
            ..RolloutSource::until(deadline)
        }
    }

    /// The next rollout index to play, or `None` when the batch is complete. The clock is read
    /// on every [`DEADLINE_CHECK_CLAIMS`]th claim only: reading it costs as much as a short
    /// rollout step.
    #[inline]
    pub fn claim(&self) -> Option<u64> {
        if self.closed.load(Ordering::Relaxed) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if i >= self.limit {
            return None;
        }
        if let Some(deadline) = self.deadline {
            if i.is_multiple_of(self.check_every) && Instant::now() >= deadline {
                self.closed.store(true, Ordering::Relaxed);
                return None;
            }
        }
        Some(i)
    }

    /// How many rollouts have been handed out so far (for a progress display).
    pub fn claimed(&self) -> u64 {
        self.next.load(Ordering::Relaxed).min(self.limit)
    }
}

/// What a batch of rollouts plays: from which states, with which seed, and the longest rollout
/// allowed.
#[derive(Clone, Debug)]
pub struct Plan<'a, S> {
    /// Rollout `i` starts from `starts[i % starts.len()]`; must not be empty.
    pub starts: &'a [S],
    /// The seed of the batch: rollout `i` draws from [`Rng::for_rollout`]`(seed, i)`.
    pub seed: u64,
    /// The most joint moves of a rollout; a longer one is an error.
    pub max_depth: u32,
    /// What a terminal state without exactly one goal value for a role counts as.
    pub goals: GoalRule,
    /// What a non-terminal state where a role has no legal move does: end the rollout there
    /// (counted as stalled) or fail the batch.
    pub stall: Stall,
}

/// What a rollout's goal is when a role has no goal value or several at its terminal state,
/// a flaw of the game that some corpus games have (pentago gives one role both 0 and 100).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum GoalRule {
    /// The rollout fails with [`MachineError::GoalNotUnique`], as [`Machine::goals`] does.
    #[default]
    Exact,
    /// The highest of the values, or 0 with none: for throughput benchmarks, which must run
    /// such games to the end and only count rollouts.
    HighestOrZero,
}

/// The sums over the rollouts of a batch. Two engines that played the same seeded batch
/// correctly have equal totals, whatever their lanes and threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Totals {
    /// The number of rollouts played to the end.
    pub rollouts: u64,
    /// Joint moves played (next-state computations), summed over the rollouts.
    pub state_changes: u64,
    /// How many of the rollouts ended in a dead end (a non-terminal state where a role had no
    /// legal move, with [`Stall::End`]) rather than in a terminal state.
    pub stalled: u64,
    /// Each role's goal at the end, summed over the rollouts.
    pub goals: Vec<u64>,
    /// The wrapping sum over rollouts of a hash of (index, depth, goals): equal fingerprints
    /// mean, with overwhelming probability, that every rollout had the same depth and goals.
    pub fingerprint: u64,
}

impl Totals {
    /// The totals of no rollout, for `roles` roles.
    pub fn new(roles: usize) -> Totals {
        Totals {
            rollouts: 0,
            state_changes: 0,
            stalled: 0,
            goals: vec![0; roles],
            fingerprint: 0,
        }
    }

    /// Adds rollout `index`, which ended after `depth` joint moves with `goals`, in a terminal
    /// state or, when `stalled`, in a dead end.
    pub fn add(&mut self, index: u64, goals: &[u32], depth: u32, stalled: bool) {
        self.rollouts += 1;
        self.state_changes += u64::from(depth);
        self.stalled += u64::from(stalled);
        let mut h = mix64(index ^ 0xD6E8_FEB8_6659_FD93);
        h = mix64(h ^ u64::from(depth));
        if stalled {
            // A rollout that stalled differs from one that ended alike in a terminal state.
            h = mix64(h ^ 0x5157_A11E_D000_0001);
        }
        for (total, &g) in self.goals.iter_mut().zip(goals) {
            *total += u64::from(g);
            h = mix64(h ^ u64::from(g));
        }
        self.fingerprint = self.fingerprint.wrapping_add(h);
    }

    /// Adds the totals of another part of the same batch (another thread's).
    pub fn merge(&mut self, other: &Totals) {
        self.rollouts += other.rollouts;
        self.state_changes += other.state_changes;
        self.stalled += other.stalled;
        for (a, b) in self.goals.iter_mut().zip(&other.goals) {
            *a += b;
        }
        self.fingerprint = self.fingerprint.wrapping_add(other.fingerprint);
    }
}

/// Where a lane driver spent its time, when asked to measure it (the clock is read around
/// each phase of each step, which costs a little).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    /// Batch steps taken (each runs legal and next once on all lanes).
    pub steps: u64,
    /// Running the terminal entry and reading it, restarts included.
    pub terminal: Duration,
    /// Running the goals entry, reading the goals of finished lanes and restarting them.
    pub goals: Duration,
    /// Running the legal entry.
    pub legal: Duration,
    /// Turning legal words into each lane's joint move and setting the input bits.
    pub choose: Duration,
    /// Running the next entry and copying the next state into the base slots.
    pub next: Duration,
}

impl Phases {
    /// Adds another driver's phases.
    pub fn merge(&mut self, other: &Phases) {
        self.steps += other.steps;
        self.terminal += other.terminal;
        self.goals += other.goals;
        self.legal += other.legal;
        self.choose += other.choose;
        self.next += other.next;
    }

    /// The time of all phases together.
    pub fn total(&self) -> Duration {
        self.terminal + self.goals + self.legal + self.choose + self.next
    }
}

/// Why a batch of rollouts stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    /// A rollout could not be played to a terminal state with well-defined goals.
    #[error("rollout {index}: {error}")]
    Playout {
        /// The rollout's index in the batch.
        index: u64,
        /// What went wrong.
        error: PlayoutError,
    },
    /// The plan has no start state.
    #[error("a batch of rollouts needs at least one start state")]
    NoStart,
    /// A start state has the wrong number of words for the program.
    #[error("start state {index} has {got} words, but the program's states have {expected}")]
    StartSize {
        /// The start state's position in the plan.
        index: usize,
        /// The words of the program's states.
        expected: usize,
        /// The words given.
        got: usize,
    },
    /// More lanes asked for than the width has, or none.
    #[error("{asked} lanes asked for; this width has 1 to {max}")]
    Lanes {
        /// The lanes asked for.
        asked: u32,
        /// The width's lanes.
        max: u32,
    },
    /// Native code refused the batch.
    #[error(transparent)]
    Native(#[from] NativeError),
    /// The interpreter refused the batch.
    #[error(transparent)]
    Interp(#[from] LaneError),
}

/// Plays rollouts from `source` one at a time with [`random_playout`](crate::random_playout) on any machine (its moves;
/// the goals as the plan's [`GoalRule`] says), and sums them. On a machine whose move numbering differs from the propnet's, wrap it in
/// [`InputOrder`] first to play the same rollouts as the propnet engines.
pub fn machine_rollouts<M: Machine + ?Sized>(
    machine: &M,
    plan: &Plan<'_, M::State>,
    source: &RolloutSource,
) -> Result<Totals, RolloutError> {
    if plan.starts.is_empty() {
        return Err(RolloutError::NoStart);
    }
    let mut totals = Totals::new(machine.roles().len());
    let mut goals = Vec::with_capacity(machine.roles().len());
    while let Some(index) = source.claim() {
        let start = &plan.starts[(index % plan.starts.len() as u64) as usize];
        let mut rng = Rng::for_rollout(plan.seed, index);
        let fail = |error| RolloutError::Playout { index, error };
        let walk = random_walk(machine, start, &mut rng, plan.max_depth, plan.stall).map_err(fail)?;
        goals.clear();
        for r in 0..machine.roles().len() {
            let values = machine.goal_values(&walk.state, RoleIdx::from_index(r));
            let goal = match (values.as_slice(), plan.goals) {
                ([v], _) => *v,
                // A dead end need not define goals: a role without one scores 0.
                ([], _) if walk.stalled => 0,
                (_, GoalRule::HighestOrZero) => values.iter().copied().max().unwrap_or(0),
                (_, GoalRule::Exact) => {
                    return Err(fail(PlayoutError::Machine(MachineError::GoalNotUnique {
                        role: machine.roles()[r].clone(),
                        values,
                    })))
                }
            };
            goals.push(goal);
        }
        totals.add(index, &goals, walk.depth, walk.stalled);
    }
    Ok(totals)
}

/// A lane engine: the interpreter (64 lanes) or native code of one width.
#[derive(Copy, Clone, Debug)]
pub enum LaneEngine<'a> {
    /// The interpreter on 64-lane words.
    Interp(&'a Interpreter),
    /// Native code at the given width.
    Native(&'a Native, Width),
}

impl LaneEngine<'_> {
    /// The number of lanes of one value array.
    pub fn max_lanes(&self) -> u32 {
        match self {
            LaneEngine::Interp(_) => 64,
            LaneEngine::Native(_, width) => width.lanes(),
        }
    }
}

/// Plays rollouts from `source` on `lanes` lanes of `engine` (1 to its width: one lane is the
/// single-state driver on the same code), and sums them. With `profile`, also measures where
/// the time goes; otherwise the returned phases are zero except `steps`.
pub fn lane_rollouts(
    engine: LaneEngine<'_>,
    plan: &Plan<'_, PackedState>,
    source: &RolloutSource,
    lanes: u32,
    profile: bool,
) -> Result<(Totals, Phases), RolloutError> {
    let max = engine.max_lanes();
    if lanes == 0 || lanes > max {
        return Err(RolloutError::Lanes { asked: lanes, max });
    }
    match engine {
        LaneEngine::Interp(interp) => {
            let mut batch = InterpBatch {
                interp,
                values: interp.new_values(),
            };
            drive::<1, _>(
                &mut batch,
                interp.program(),
                plan,
                source,
                lanes as usize,
                profile,
            )
        }
        LaneEngine::Native(native, width) => {
            let mut batch = NativeBatch {
                native,
                lanes: native.lanes(width)?,
            };
            match width {
                Width::X64 => drive::<1, _>(
                    &mut batch,
                    native.program(),
                    plan,
                    source,
                    lanes as usize,
                    profile,
                ),
                Width::X128 => drive::<2, _>(
                    &mut batch,
                    native.program(),
                    plan,
                    source,
                    lanes as usize,
                    profile,
                ),
            }
        }
    }
}

/// A value array of lanes and the code that runs entries on it.
trait Batch {
    fn eval(&mut self, entry: Entry) -> Result<(), RolloutError>;
    /// Slot `s` is words `s * W .. (s + 1) * W`.
    fn words(&mut self) -> &mut [u64];
}

struct InterpBatch<'a> {
    interp: &'a Interpreter,
    values: Vec<u64>,
}

impl Batch for InterpBatch<'_> {
    #[inline]
    fn eval(&mut self, entry: Entry) -> Result<(), RolloutError> {
        Ok(self.interp.eval(entry, &mut self.values)?)
    }

    #[inline]
    fn words(&mut self) -> &mut [u64] {
        &mut self.values
    }
}

struct NativeBatch<'a> {
    native: &'a Native,
    lanes: crate::Lanes,
}

impl Batch for NativeBatch<'_> {
    #[inline]
    fn eval(&mut self, entry: Entry) -> Result<(), RolloutError> {
        Ok(self.native.eval_lanes(entry, &mut self.lanes)?)
    }

    #[inline]
    fn words(&mut self) -> &mut [u64] {
        self.lanes.words_mut()
    }
}

/// A clock that reads the time only when profiling.
struct Clock {
    on: bool,
    last: Option<Instant>,
}

impl Clock {
    #[inline]
    fn new(on: bool) -> Clock {
        Clock {
            on,
            last: on.then(Instant::now),
        }
    }

    /// Adds the time since the last lap to `into`.
    #[inline]
    fn lap(&mut self, into: &mut Duration) {
        if self.on {
            let now = Instant::now();
            if let Some(last) = self.last {
                *into += now - last;
            }
            self.last = Some(now);
        }
    }
}

/// What is known of whether a start state is terminal, so that lanes restarting from a state
/// known not to be terminal need no second terminal evaluation.
#[derive(Copy, Clone, PartialEq, Eq)]
enum StartKind {
    Unknown,
    Playable,
    Terminal,
}

/// How often (in steps) live lanes are scanned for a rollout beyond the depth limit. A rollout
/// that ends is checked when it ends; the scan only stops one that would never end.
const DEPTH_SCAN_STEPS: u64 = 64;

/// The bits of `mask`, as lane numbers, with `j` the word: `64 * j + bit`.
#[inline]
fn for_each_lane<const W: usize>(mask: &[u64; W], mut f: impl FnMut(usize, usize)) {
    for (j, &word) in mask.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            let bit = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            f(j, bit);
        }
    }
}

#[inline]
fn any<const W: usize>(mask: &[u64; W]) -> bool {
    mask.iter().any(|&w| w != 0)
}

/// The rollouts the lanes play, one entry per lane (structure of arrays).
struct LaneTable {
    /// The rollout index.
    index: Vec<u64>,
    /// The step at which the rollout started: its depth is the current step minus this.
    started: Vec<u64>,
    /// The position of its start state in the plan.
    start_of: Vec<usize>,
    /// Its generator.
    rngs: Vec<Rng>,
}

impl LaneTable {
    /// Starts rollout `i` in lane `lane` at `step`: a fresh generator and, with several
    /// start states, the rollout's own start state into the base slots (a single start state is
    /// written for all restarted lanes at once by the caller).
    fn start<const W: usize>(
        &mut self,
        plan: &Plan<'_, PackedState>,
        words: &mut [u64],
        lane: usize,
        i: u64,
        step: u64,
        bases: usize,
    ) {
        let (j, bit) = (lane / 64, lane % 64);
        let s = (i % plan.starts.len() as u64) as usize;
        self.index[lane] = i;
        self.started[lane] = step;
        self.start_of[lane] = s;
        self.rngs[lane] = Rng::for_rollout(plan.seed, i);
        if plan.starts.len() > 1 {
            let state = &plan.starts[s];
            let mask = 1u64 << bit;
            for b in 0..bases {
                let on = u64::from(state.get(b));
                let w = &mut words[(2 + b) * W + j];
                *w = *w & !mask | on << bit;
            }
        }
    }
}

/// The lane driver over `W` words per slot (64·W lanes), of which the first `used` play.
fn drive<const W: usize, B: Batch>(
    batch: &mut B,
    program: &Program,
    plan: &Plan<'_, PackedState>,
    source: &RolloutSource,
    used: usize,
    profile: bool,
) -> Result<(Totals, Phases), RolloutError> {
    if plan.starts.is_empty() {
        return Err(RolloutError::NoStart);
    }
    let bases = program.num_bases();
    let state_words = Layout::words(bases);
    for (index, s) in plan.starts.iter().enumerate() {
        if s.words().len() != state_words {
            return Err(RolloutError::StartSize {
                index,
                expected: state_words,
                got: s.words().len(),
            });
        }
    }
    let layout = &program.layout;
    let roles = layout.roles.len();
    let width_lanes = 64 * W;
    let first_input = program.first_input_slot();
    let widest_role = layout
        .role_inputs
        .iter()
        .map(|r| (r.end - r.start) as usize)
        .max()
        .unwrap_or(0);
    let single_start = plan.starts.len() == 1;
    // With one start state, restarting lanes is one masked write per base for all of them.
    let start_mask: Vec<u64> = (0..bases)
        .map(|b| u64::from(plan.starts[0].get(b)).wrapping_neg())
        .collect();

    let mut totals = Totals::new(roles);
    let mut phases = Phases::default();
    let mut t = LaneTable {
        index: vec![0; width_lanes],
        started: vec![0; width_lanes],
        start_of: vec![0; width_lanes],
        rngs: vec![Rng::new(0); width_lanes],
    };
    let mut kinds = vec![StartKind::Unknown; plan.starts.len()];
    // Each lane's legal moves of the role being chosen, column-wise: `lists[k * width_lanes + lane]`.
    let mut lists = vec![0u32; widest_role * width_lanes];
    let mut counts = vec![0u32; width_lanes];
    // Each lane's legal inputs of the role being chosen as bitsets, block `b` of lane `l` at
    // `b * 64 + l` (for roles of at most `TRANSPOSE_MAX_INPUTS` inputs).
    let mut sets = vec![0u64; TRANSPOSE_MAX_INPUTS];
    // The transposed blocks of `found` for `choose_from_found`.
    let mut found_sets: Vec<u64> = Vec::new();
    // Per role, the legal moves of the lanes that had several, per word, over recent steps.
    let mut mean_legal = vec![0f32; roles];
    let mut next_values = vec![0u64; bases * W];
    // Per role, the lanes with at least one legal move and those with at least two.
    let mut movers = vec![([0u64; W], [0u64; W]); roles];
    // Per role, whether it chooses by transposing this step (otherwise by lists).
    let mut transposing = vec![false; roles];
    // Per role that chooses by lists, the inputs legal in some live lane this step, ascending,
    // with their legal words masked to the live lanes (the first `found_len[r]` entries of a
    // buffer as long as the role): the pass that finds the movers collects them, so that the
    // lists, and the clearing of the inputs after the step, visit only these (a few hundred of
    // speedChess's 3,522 inputs, one of the non-mover's) instead of every input again.
    let mut found: Vec<Vec<(u32, [u64; W])>> = layout
        .role_inputs
        .iter()
        .map(|r| vec![(0, [0u64; W]); (r.end - r.start) as usize])
        .collect();
    let mut found_len = vec![0usize; roles];
    let mut goals = vec![0u32; roles];
    let mut goal_seen = vec![0u8; roles];
    let mut step = 0u64;

    let restart_all = |words: &mut [u64], restarted: &[u64; W]| {
        if single_start && any(restarted) {
            for (b, &on) in start_mask.iter().enumerate() {
                for j in 0..W {
                    let w = &mut words[(2 + b) * W + j];
                    *w = *w & !restarted[j] | on & restarted[j];
                }
            }
        }
    };

    // Lanes started since the last terminal evaluation.
    let mut fresh = [0u64; W];
    {
        let words = batch.words();
        'fill: for lane in 0..used {
            match source.claim() {
                Some(i) => {
                    let (j, bit) = (lane / 64, lane % 64);
                    t.start::<W>(plan, words, lane, i, 0, bases);
                    fresh[j] |= 1 << bit;
                }
                None => break 'fill,
            }
        }
        restart_all(words, &fresh);
    }
    let mut active = fresh;

    // The choice sets input bits into cleared inputs; each step clears again what it set.
    batch.words()[first_input * W..program.first_opaque_slot() * W].fill(0);
    let terminal = program.terminal;
    let mut clock = Clock::new(profile);
    while any(&active) {
        // Lanes at a terminal state record their goals and restart, until no live lane is
        // terminal (a start state may itself be terminal).
        loop {
            batch.eval(Entry::Terminal)?;
            let words = batch.words();
            let mut ended = [0u64; W];
            for j in 0..W {
                ended[j] = (words[terminal.slot() as usize * W + j] ^ neg_mask(terminal.0)) & active[j];
            }
            for_each_lane(&fresh, |j, bit| {
                let kind = &mut kinds[t.start_of[j * 64 + bit]];
                if *kind == StartKind::Unknown {
                    *kind = if ended[j] >> bit & 1 == 1 {
                        StartKind::Terminal
                    } else {
                        StartKind::Playable
                    };
                }
            });
            fresh = [0; W];
            clock.lap(&mut phases.terminal);
            if !any(&ended) {
                break;
            }
            batch.eval(Entry::Goals)?;
            let words = batch.words();
            let mut failure = None;
            for_each_lane(&ended, |j, bit| {
                if failure.is_some() {
                    return;
                }
                let lane = j * 64 + bit;
                let depth = step - t.started[lane];
                if depth > u64::from(plan.max_depth) {
                    failure = Some(RolloutError::Playout {
                        index: t.index[lane],
                        error: PlayoutError::DepthLimit(plan.max_depth),
                    });
                    return;
                }
                if let Err(error) = read_goals::<W>(
                    program,
                    plan.goals,
                    false,
                    words,
                    j,
                    bit,
                    &mut goals,
                    &mut goal_seen,
                ) {
                    failure = Some(RolloutError::Playout {
                        index: t.index[lane],
                        error,
                    });
                    return;
                }
                totals.add(t.index[lane], &goals, depth as u32, false);
                match source.claim() {
                    Some(i) => {
                        t.start::<W>(plan, words, lane, i, step, bases);
                        fresh[j] |= 1 << bit;
                    }
                    None => active[j] &= !(1u64 << bit),
                }
            });
            if let Some(failure) = failure {
                return Err(failure);
            }
            restart_all(words, &fresh);
            let mut recheck = false;
            for_each_lane(&fresh, |j, bit| {
                recheck |= kinds[t.start_of[j * 64 + bit]] != StartKind::Playable;
            });
            clock.lap(&mut phases.goals);
            if !recheck {
                fresh = [0; W];
                break;
            }
        }
        if !any(&active) {
            break;
        }
        if step.is_multiple_of(DEPTH_SCAN_STEPS) {
            let mut failure = None;
            for_each_lane(&active, |j, bit| {
                let lane = j * 64 + bit;
                if step - t.started[lane] > u64::from(plan.max_depth) {
                    failure.get_or_insert(RolloutError::Playout {
                        index: t.index[lane],
                        error: PlayoutError::DepthLimit(plan.max_depth),
                    });
                }
            });
            if let Some(failure) = failure {
                return Err(failure);
            }
        }

        batch.eval(Entry::Legal)?;
        clock.lap(&mut phases.legal);

        let words = batch.words();
        // Which lanes have at least one legal move, and which at least two, per role.
        let mut stuck = [0u64; W];
        for (r, (range, (one, two))) in layout.role_inputs.iter().zip(movers.iter_mut()).enumerate() {
            (*one, *two) = ([0u64; W], [0u64; W]);
            // Transposing costs about the same per block of 64 inputs whatever is legal; the
            // lists cost per legal move. The legal moves of the lanes choosing, per word,
            // followed over the steps, pick the cheaper; both choose the same moves.
            let inputs = (range.end - range.start) as usize;
            let blocks = inputs.div_ceil(64) as f32;
            transposing[r] =
                inputs <= TRANSPOSE_MAX_INPUTS && mean_legal[r] > TRANSPOSE_MOVES_PER_BLOCK * blocks;
            let legal = &program.legal[range.start as usize..range.end as usize];
            if transposing[r] {
                for lit in legal {
                    let (slot, neg) = (lit.slot() as usize * W, neg_mask(lit.0));
                    for j in 0..W {
                        let w = (words[slot + j] ^ neg) & active[j];
                        two[j] |= one[j] & w;
                        one[j] |= w;
                    }
                }
            } else {
                // Whether each input is legal in some live lane decides whether it is kept.
                // Where nearly none is (a non-mover's inputs) or nearly all are, a branch on it
                // is nearly always guessed right and costs less than a store per input at a
                // place that moves on only past a kept input (each input then waits for the
                // one before it: breakthrough's lanes were 5–15% slower). Where many are and
                // many are not, the branch is guessed wrong about as often as right: with
                // speedChess's inputs in the order the next-state entry reads them (grouped by
                // square, the pieces mixed) that took a sixth of the step. The share kept in
                // the role's last step decides.
                let (found, last) = (&mut found[r], found_len[r]);
                let mixed = last * 8 > inputs && last * 8 < inputs * 7;
                let n = if mixed {
                    collect_legal::<W, true>(words, legal, range.start, &active, one, two, found)
                } else {
                    collect_legal::<W, false>(words, legal, range.start, &active, one, two, found)
                };
                found_len[r] = n;
            }
            for j in 0..W {
                stuck[j] |= active[j] & !one[j];
            }
        }
        if any(&stuck) {
            // Dead ends: a role of these lanes has no legal move in a non-terminal state.
            match plan.stall {
                Stall::Error => {
                    for (r, (one, _)) in movers.iter().enumerate() {
                        let mut missing = [0u64; W];
                        for j in 0..W {
                            missing[j] = active[j] & !one[j];
                        }
                        let mut first = None;
                        for_each_lane(&missing, |j, bit| {
                            first.get_or_insert(j * 64 + bit);
                        });
                        if let Some(lane) = first {
                            return Err(RolloutError::Playout {
                                index: t.index[lane],
                                error: PlayoutError::NoLegalMove {
                                    role: layout.roles[r].clone(),
                                    depth: (step - t.started[lane]) as u32,
                                },
                            });
                        }
                    }
                }
                Stall::End => {
                    // The stuck lanes end their rollouts here, with the goals of this state,
                    // and restart; then the step begins again (terminal and legal of the
                    // restarted lanes), which the other lanes, whose state has not changed and
                    // who have drawn nothing yet, go through unchanged. Dead ends are rare, so
                    // the repeated entries cost little.
                    clock.lap(&mut phases.choose);
                    batch.eval(Entry::Goals)?;
                    let words = batch.words();
                    let mut failure = None;
                    for_each_lane(&stuck, |j, bit| {
                        if failure.is_some() {
                            return;
                        }
                        let lane = j * 64 + bit;
                        let depth = step - t.started[lane];
                        // One state at a time, a rollout at the depth limit fails before its
                        // legal moves are looked at.
                        let outcome = if depth >= u64::from(plan.max_depth) {
                            Err(PlayoutError::DepthLimit(plan.max_depth))
                        } else {
                            read_goals::<W>(
                                program,
                                plan.goals,
                                true,
                                words,
                                j,
                                bit,
                                &mut goals,
                                &mut goal_seen,
                            )
                        };
                        if let Err(error) = outcome {
                            failure = Some(RolloutError::Playout {
                                index: t.index[lane],
                                error,
                            });
                            return;
                        }
                        totals.add(t.index[lane], &goals, depth as u32, true);
                        match source.claim() {
                            Some(i) => {
                                t.start::<W>(plan, words, lane, i, step, bases);
                                fresh[j] |= 1 << bit;
                            }
                            None => active[j] &= !(1u64 << bit),
                        }
                    });
                    if let Some(failure) = failure {
                        return Err(failure);
                    }
                    restart_all(words, &fresh);
                    clock.lap(&mut phases.goals);
                    continue;
                }
            }
        }
        for ((r, range), &(one, two)) in layout.role_inputs.iter().enumerate().zip(movers.iter()) {
            // Lanes with a single legal move play it, set for all of them at once; their
            // generators still make the one draw that `below(1)` makes.
            let mut single = [0u64; W];
            for j in 0..W {
                single[j] = one[j] & !two[j];
            }
            if transposing[r] {
                let (lanes, moves) = choose_by_transposing::<W>(
                    program,
                    words,
                    range.clone(),
                    &single,
                    &two,
                    &mut t.rngs,
                    &mut sets,
                );
                mean_legal[r] = follow(mean_legal[r], lanes, moves, W);
                continue;
            }
            // Many inputs legal somewhere: their words transposed in blocks of 64, as a small
            // role's are, cost less than a list entry per legal move.
            if found_len[r] >= FOUND_TRANSPOSE_MIN {
                let (lanes, moves) = choose_from_found::<W>(
                    first_input,
                    words,
                    &found[r][..found_len[r]],
                    &single,
                    &two,
                    &mut t.rngs,
                    &mut found_sets,
                );
                mean_legal[r] = follow(mean_legal[r], lanes, moves, W);
                continue;
            }
            for_each_lane(&two, |j, bit| counts[j * 64 + bit] = 0);
            for &(i, w) in &found[r][..found_len[r]] {
                let input = (first_input + i as usize) * W;
                for j in 0..W {
                    let w = w[j];
                    words[input + j] |= w & single[j];
                    let mut rest = w & two[j];
                    while rest != 0 {
                        let lane = j * 64 + rest.trailing_zeros() as usize;
                        rest &= rest - 1;
                        let k = counts[lane] as usize;
                        lists[k * width_lanes + lane] = i;
                        counts[lane] = k as u32 + 1;
                    }
                }
            }
            for_each_lane(&single, |j, bit| {
                t.rngs[j * 64 + bit].next_u64();
            });
            let (mut lanes, mut moves) = (0u32, 0u32);
            for_each_lane(&two, |j, bit| {
                let lane = j * 64 + bit;
                lanes += 1;
                moves += counts[lane];
                let k = t.rngs[lane].below(counts[lane]) as usize;
                let input = lists[k * width_lanes + lane] as usize;
                words[(first_input + input) * W + j] |= 1u64 << bit;
            });
            mean_legal[r] = follow(mean_legal[r], lanes, moves, W);
        }
        clock.lap(&mut phases.choose);

        batch.eval(Entry::Next)?;
        let words = batch.words();
        for (b, lit) in program.next.iter().enumerate() {
            let (slot, neg) = (lit.slot() as usize * W, neg_mask(lit.0));
            for j in 0..W {
                next_values[b * W + j] = words[slot + j] ^ neg;
            }
        }
        words[2 * W..(2 + bases) * W].copy_from_slice(&next_values);
        // Clear the inputs this step's choice may have set: a transposing role's every input,
        // a listing role's inputs legal somewhere.
        for (r, range) in layout.role_inputs.iter().enumerate() {
            if transposing[r] {
                let inputs = first_input + range.start as usize..first_input + range.end as usize;
                words[inputs.start * W..inputs.end * W].fill(0);
            } else {
                for &(i, _) in &found[r][..found_len[r]] {
                    words[(first_input + i as usize) * W..][..W].fill(0);
                }
            }
        }
        step += 1;
        phases.steps += 1;
        clock.lap(&mut phases.next);
    }
    Ok((totals, phases))
}

/// Roles with at most this many inputs choose by transposing their legal words; roles with more
/// append each legal move to per-lane lists, which does not touch inputs legal nowhere.
const TRANSPOSE_MAX_INPUTS: usize = 256;

/// One pass over a role's legal literals (the role's inputs from `first` on): adds each input's
/// live legal lanes to `one` (lanes with a legal move) and to `two` (with a second one), and
/// keeps the inputs legal in some live lane, in input order, with their words, at the front of
/// `found` (as long as the role); returns how many. `STORE_ALWAYS` writes every input's entry
/// and moves on past the kept ones, without a branch; otherwise a branch skips the others.
#[inline(always)]
fn collect_legal<const W: usize, const STORE_ALWAYS: bool>(
    words: &[u64],
    legal: &[crate::Lit],
    first: u32,
    active: &[u64; W],
    one: &mut [u64; W],
    two: &mut [u64; W],
    found: &mut [(u32, [u64; W])],
) -> usize {
    let mut n = 0;
    for (i, lit) in (first..).zip(legal) {
        let (slot, neg) = (lit.slot() as usize * W, neg_mask(lit.0));
        let (mut w, mut seen) = ([0u64; W], 0);
        for j in 0..W {
            w[j] = (words[slot + j] ^ neg) & active[j];
            two[j] |= one[j] & w[j];
            one[j] |= w[j];
            seen |= w[j];
        }
        if STORE_ALWAYS {
            found[n] = (i, w);
            n += usize::from(seen != 0);
        } else if seen != 0 {
            found[n] = (i, w);
            n += 1;
        }
    }
    n
}

/// Transposes a 64×64 bit matrix in place: bit `c` of row `r` becomes bit `r` of row `c`. The
/// recursive block swap: at block size `j`, the block right of the diagonal (rows with bit `j`
/// clear, columns with it set) trades places with the block below it. Each level is written
/// with its block size known at compile time and over paired row slices, so that the compiler
/// can run it on two rows at a time in vector registers.
fn transpose64(m: &mut [u64; 64]) {
    swap_level::<32>(m, 0x0000_0000_FFFF_FFFF);
    swap_level::<16>(m, 0x0000_FFFF_0000_FFFF);
    swap_level::<8>(m, 0x00FF_00FF_00FF_00FF);
    swap_level::<4>(m, 0x0F0F_0F0F_0F0F_0F0F);
    swap_level::<2>(m, 0x3333_3333_3333_3333);
    swap_level::<1>(m, 0x5555_5555_5555_5555);
}

/// One level of [`transpose64`]: in every group of `2J` rows, the high `J`-bit half of each
/// `2J`-bit field of the first `J` rows trades places with the low half of the same field in
/// the row `J` below.
#[inline(always)]
fn swap_level<const J: usize>(m: &mut [u64; 64], mask: u64) {
    for group in m.chunks_exact_mut(2 * J) {
        let (top, bottom) = group.split_at_mut(J);
        for (a, b) in top.iter_mut().zip(bottom.iter_mut()) {
            let t = ((*a >> J) ^ *b) & mask;
            *a ^= t << J;
            *b ^= t;
        }
    }
}

/// The move choice of one role for lanes with several legal moves (`two`), by transposition:
/// each block of 64 inputs × 64 lanes of legal bits becomes one bitset of legal inputs per lane,
/// and each lane takes the `below(count)`-th set bit. Lanes with one legal move (`single`) get
/// it set directly and make their one draw. `sets` holds a block per 64 inputs of the role.
/// Returns the lanes that chose among several moves and their legal moves in all.
/// Transposing a block costs the same for 1 or 64 lanes, listing costs per lane and move: it
/// pays when the choosing lanes of a word of 64 have more than this many legal moves in all per
/// block of 64 inputs (so one lane alone never transposes). Measured, 64 lanes a word, the
/// mover in about half of them: tic-tac-toe (about 160 moves a word in one block) chooses
/// faster by lists, breakthrough (about 800 in three blocks) and pentago (about 900 in one)
/// faster by transposing.
const TRANSPOSE_MOVES_PER_BLOCK: f32 = 200.0;

/// A running mean of the legal moves of the choosing lanes per word of 64 lanes, given this
/// step's choosing lanes and their moves over `words` words.
fn follow(mean: f32, lanes: u32, moves: u32, words: usize) -> f32 {
    if lanes == 0 {
        return mean;
    }
    let sample = moves as f32 / words as f32;
    if mean == 0.0 {
        sample
    } else {
        0.9 * mean + 0.1 * sample
    }
}

fn choose_by_transposing<const W: usize>(
    program: &Program,
    words: &mut [u64],
    range: std::ops::Range<u32>,
    single: &[u64; W],
    two: &[u64; W],
    rngs: &mut [Rng],
    sets: &mut [u64],
) -> (u32, u32) {
    let (mut lanes, mut moves) = (0u32, 0u32);
    let first_input = program.first_input_slot();
    let n = (range.end - range.start) as usize;
    let blocks = n.div_ceil(64);
    for j in 0..W {
        let mut matrix = [0u64; 64];
        for b in 0..blocks {
            let mut any = 0;
            for (r, row) in matrix.iter_mut().enumerate() {
                let i = b * 64 + r;
                *row = if i < n {
                    let lit = program.legal[range.start as usize + i];
                    let w = words[lit.slot() as usize * W + j] ^ neg_mask(lit.0);
                    words[(first_input + range.start as usize + i) * W + j] |= w & single[j];
                    w & two[j]
                } else {
                    0
                };
                any |= *row;
            }
            if any != 0 {
                transpose64(&mut matrix);
            }
            // An all-zero block is its own transpose.
            sets[b * 64..b * 64 + 64].copy_from_slice(&matrix);
        }
        for_each_lane(&[single[j]], |_, bit| {
            rngs[j * 64 + bit].next_u64();
        });
        for_each_lane(&[two[j]], |_, bit| {
            // The byte-wise running counts of each block give the lane's count and then the
            // chosen bit without a loop over set bits.
            let mut prefixes = [0u64; TRANSPOSE_MAX_INPUTS / 64];
            let mut count = 0;
            for (b, prefix) in prefixes.iter_mut().enumerate().take(blocks) {
                *prefix = byte_prefix_counts(sets[b * 64 + bit]);
                count += (*prefix >> 56) as u32;
            }
            lanes += 1;
            moves += count;
            let mut k = rngs[j * 64 + bit].below(count);
            for (b, &prefix) in prefixes.iter().enumerate().take(blocks) {
                let here = (prefix >> 56) as u32;
                if k >= here {
                    k -= here;
                    continue;
                }
                let position = select_bit(sets[b * 64 + bit], prefix, k);
                let input = range.start as usize + b * 64 + position as usize;
                words[(first_input + input) * W + j] |= 1u64 << bit;
                break;
            }
        });
    }
    (lanes, moves)
}

/// A listing role keeps choosing by lists when fewer of its inputs are legal in some live lane
/// (connectFour's seven columns: one block of 64 to transpose for a handful of inputs).
const FOUND_TRANSPOSE_MIN: usize = 32;

/// Chooses the moves of a listing role from `found` (the role's inputs legal in some live lane,
/// in input order, with their masked legal words), as [`choose_by_transposing`] does from all
/// of a small role's inputs: each block of 64 found inputs × 64 lanes is transposed into one
/// bitset per lane, each lane counts its bitsets, draws `k = below(count)` and takes its
/// `k`-th found input, which is its `k`-th legal input, as the lists would. Lanes with a
/// single legal move get it set and make their one draw. Returns the lanes that chose and
/// their legal moves, for [`follow`].
fn choose_from_found<const W: usize>(
    first_input: usize,
    words: &mut [u64],
    found: &[(u32, [u64; W])],
    single: &[u64; W],
    two: &[u64; W],
    rngs: &mut [Rng],
    sets: &mut Vec<u64>,
) -> (u32, u32) {
    let (mut lanes, mut moves) = (0u32, 0u32);
    let m = found.len();
    let blocks = m.div_ceil(64);
    sets.resize(blocks * 64, 0);
    for j in 0..W {
        for &(i, w) in found {
            words[(first_input + i as usize) * W + j] |= w[j] & single[j];
        }
        for_each_lane(&[single[j]], |_, bit| {
            rngs[j * 64 + bit].next_u64();
        });
        if two[j] == 0 {
            continue;
        }
        for b in 0..blocks {
            let mut matrix = [0u64; 64];
            let mut any = 0;
            for (r, row) in matrix.iter_mut().enumerate() {
                let f = b * 64 + r;
                *row = if f < m { found[f].1[j] & two[j] } else { 0 };
                any |= *row;
            }
            if any != 0 {
                transpose64(&mut matrix);
            }
            sets[b * 64..b * 64 + 64].copy_from_slice(&matrix);
        }
        for_each_lane(&[two[j]], |_, bit| {
            let count: u32 = (0..blocks).map(|b| sets[b * 64 + bit].count_ones()).sum();
            lanes += 1;
            moves += count;
            let mut k = rngs[j * 64 + bit].below(count);
            for b in 0..blocks {
                let x = sets[b * 64 + bit];
                let here = x.count_ones();
                if k >= here {
                    k -= here;
                    continue;
                }
                let position = select_bit(x, byte_prefix_counts(x), k);
                let input = found[b * 64 + position as usize].0 as usize;
                words[(first_input + input) * W + j] |= 1u64 << bit;
                break;
            }
        });
    }
    (lanes, moves)
}

/// Every byte of a word holding 1.
const BYTES_ONE: u64 = 0x0101_0101_0101_0101;
/// Every byte of a word holding its top bit.
const BYTES_HIGH: u64 = 0x8080_8080_8080_8080;

/// The running counts of set bits of `x` by bytes: byte `i` holds the set bits of bytes `0..=i`
/// (so the top byte is the popcount). The per-byte counts by the usual halving sums, then a
/// multiplication by `0x0101…` adds each byte into all bytes above it.
#[inline]
fn byte_prefix_counts(x: u64) -> u64 {
    let a = x - ((x >> 1) & 0x5555_5555_5555_5555);
    let b = (a & 0x3333_3333_3333_3333) + ((a >> 2) & 0x3333_3333_3333_3333);
    let c = (b + (b >> 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    c.wrapping_mul(BYTES_ONE)
}

/// For each `k < 8` and byte value, the position of the byte's `k`-th set bit (from 0), or 8.
static SELECT_IN_BYTE: [[u8; 256]; 8] = select_in_byte_table();

const fn select_in_byte_table() -> [[u8; 256]; 8] {
    let mut table = [[8u8; 256]; 8];
    let mut byte = 0;
    while byte < 256 {
        let (mut k, mut bit) = (0, 0);
        while bit < 8 {
            if byte >> bit & 1 == 1 {
                table[k][byte] = bit as u8;
                k += 1;
            }
            bit += 1;
        }
        byte += 1;
    }
    table
}

/// The position of the `k`-th set bit (from 0) of `x`, given `prefix = byte_prefix_counts(x)`
/// and `k` below its popcount, without a loop: the bytes whose running count is at most `k`
/// come before the chosen bit, counted by a bytewise comparison (`(0x80 | k) - count` keeps
/// its top bit exactly when `count <= k`, and no byte borrows since counts are at most 64);
/// within the byte found, a table gives the bit.
#[inline]
fn select_bit(x: u64, prefix: u64, k: u32) -> u32 {
    let at_most_k = (((u64::from(k) * BYTES_ONE) | BYTES_HIGH) - prefix) & BYTES_HIGH;
    let n = ((at_most_k >> 7).wrapping_mul(BYTES_ONE) >> 56) as u32;
    // The running count before byte `n` (0 for the first byte).
    let before = ((prefix << 8) >> (8 * n) & 0xFF) as u32;
    let byte = (x >> (8 * n) & 0xFF) as usize;
    8 * n + u32::from(SELECT_IN_BYTE[(k - before) as usize][byte])
}

/// Reads the goal of every role in lane `64 * j + bit` after the goals entry ran: exactly one
/// value per role, as [`Machine::goals`] demands, or as `rule` says otherwise. In a dead end
/// (`stalled`), a role without a goal value scores 0.
#[allow(clippy::too_many_arguments)]
fn read_goals<const W: usize>(
    program: &Program,
    rule: GoalRule,
    stalled: bool,
    words: &[u64],
    j: usize,
    bit: usize,
    goals: &mut [u32],
    seen: &mut [u8],
) -> Result<(), PlayoutError> {
    seen.fill(0);
    let mut conflict = None;
    for (lit, &(role, value)) in program.goals.iter().zip(&program.layout.goals) {
        if (words[lit.slot() as usize * W + j] ^ neg_mask(lit.0)) >> bit & 1 == 0 {
            continue;
        }
        let r = role.index();
        if seen[r] == 0 {
            seen[r] = 1;
            goals[r] = value;
        } else if goals[r] != value {
            conflict.get_or_insert(r);
            goals[r] = goals[r].max(value);
        }
    }
    if rule == GoalRule::HighestOrZero || stalled {
        // A role without a goal value scores 0: by the rule, or because a dead end need not
        // define goals.
        for (goal, &s) in goals.iter_mut().zip(seen.iter()) {
            if s == 0 {
                *goal = 0;
            }
        }
    }
    let missing = if rule == GoalRule::HighestOrZero || stalled {
        None
    } else {
        seen.iter().position(|&s| s == 0)
    };
    if rule == GoalRule::HighestOrZero {
        return Ok(());
    }
    let role = match (conflict, missing) {
        (Some(r), _) | (None, Some(r)) => r,
        (None, None) => return Ok(()),
    };
    let mut values: Vec<u32> = program
        .goals
        .iter()
        .zip(&program.layout.goals)
        .filter(|&(lit, &(r, _))| {
            r.index() == role && (words[lit.slot() as usize * W + j] ^ neg_mask(lit.0)) >> bit & 1 == 1
        })
        .map(|(_, &(_, v))| v)
        .collect();
    values.sort_unstable();
    values.dedup();
    Err(PlayoutError::Machine(MachineError::GoalNotUnique {
        role: program.layout.roles[role].clone(),
        values,
    }))
}

/// A machine whose legal moves are listed in the order of a propnet's inputs (the [`Layout`]),
/// so that [`random_playout`](crate::random_playout) on it makes the same choices as on the propnet engines. Moves
/// the layout does not know come after the known ones, in the machine's own order (a game
/// where that happens differs between the engines anyway).
pub struct InputOrder<'a, M: Machine + ?Sized> {
    machine: &'a M,
    /// For each role, the input position of each action name.
    positions: Vec<HashMap<String, u32>>,
    /// The position of each (role, move) of the machine seen so far: a move index may be shared
    /// by roles (the reference numbers actions, and `noop` is every role's).
    cache: Mutex<HashMap<(RoleIdx, MoveIdx), u32>>,
}

impl<'a, M: Machine + ?Sized> InputOrder<'a, M> {
    /// `machine` with its legal moves in the order of `layout`'s inputs.
    pub fn new(machine: &'a M, layout: &Layout) -> InputOrder<'a, M> {
        let mut positions = vec![HashMap::new(); layout.roles.len()];
        for (i, (role, action)) in layout.inputs.iter().enumerate() {
            if let Some(p) = positions.get_mut(role.index()) {
                p.entry(crate::interp::normalize_kif(action)).or_insert(i as u32);
            }
        }
        InputOrder {
            machine,
            positions,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn position(&self, role: RoleIdx, mv: MoveIdx) -> u32 {
        let mut cache = match self.cache.lock() {
            Ok(guard) => guard,
            // The cache holds only finished entries, so a panic elsewhere cannot spoil it.
            Err(poisoned) => poisoned.into_inner(),
        };
        *cache.entry((role, mv)).or_insert_with(|| {
            let name = crate::interp::normalize_kif(&self.machine.move_name(mv));
            self.positions
                .get(role.index())
                .and_then(|p| p.get(&name))
                .copied()
                .unwrap_or(u32::MAX)
        })
    }
}

impl<M: Machine + ?Sized> Machine for InputOrder<'_, M> {
    type State = M::State;

    fn engine_name(&self) -> &'static str {
        self.machine.engine_name()
    }

    fn roles(&self) -> &[String] {
        self.machine.roles()
    }

    fn initial_state(&self) -> M::State {
        self.machine.initial_state()
    }

    fn state_facts(&self, state: &M::State) -> Vec<FactIdx> {
        self.machine.state_facts(state)
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        self.machine.fact_name(fact)
    }

    fn legal_moves(&self, state: &M::State, role: RoleIdx) -> Vec<MoveIdx> {
        let mut moves = self.machine.legal_moves(state, role);
        // Stable: moves the layout does not know keep the machine's order among themselves.
        moves.sort_by_key(|&mv| self.position(role, mv));
        moves
    }

    fn move_name(&self, mv: MoveIdx) -> String {
        self.machine.move_name(mv)
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        self.machine.find_move(role, name)
    }

    fn next_state_unchecked(&self, state: &M::State, joint: &[MoveIdx]) -> Result<M::State, MachineError> {
        self.machine.next_state_unchecked(state, joint)
    }

    fn is_terminal(&self, state: &M::State) -> bool {
        self.machine.is_terminal(state)
    }

    fn goal_values(&self, state: &M::State, role: RoleIdx) -> Vec<u32> {
        self.machine.goal_values(state, role)
    }
}

#[cfg(test)]
mod tests {
    use super::{byte_prefix_counts, select_bit, transpose64};
    use crate::Rng;

    #[test]
    fn a_source_that_checks_every_claim_stops_at_the_first_claim_past_its_deadline() {
        use super::RolloutSource;
        use std::time::{Duration, Instant};
        let deadline = Instant::now() + Duration::from_millis(20);
        let (each, batched) = (
            RolloutSource::until_each(deadline),
            RolloutSource::until(deadline),
        );
        assert_eq!((each.claim(), batched.claim()), (Some(0), Some(0)));
        std::thread::sleep(Duration::from_millis(30));
        // Past the deadline: the claim that reads the clock is refused; the batched source
        // reads it again only at claim 16.
        assert_eq!(each.claim(), None);
        assert_eq!(batched.claim(), Some(1));
    }

    #[test]
    fn select_bit_finds_the_kth_set_bit() {
        let mut rng = Rng::new(8);
        let mut words: Vec<u64> = vec![1, 1 << 63, u64::MAX, 0x8000_0000_0000_0001, 0xFF00];
        words.extend((0..300).map(|i| match i % 3 {
            0 => rng.next_u64(),
            1 => rng.next_u64() & rng.next_u64() & rng.next_u64(),
            _ => rng.next_u64() | rng.next_u64(),
        }));
        for x in words {
            let prefix = byte_prefix_counts(x);
            assert_eq!(prefix >> 56, u64::from(x.count_ones()), "{x:#x}");
            // The set bits in ascending order, found the slow way.
            let bits: Vec<u32> = (0..64).filter(|&b| x >> b & 1 == 1).collect();
            for (k, &bit) in bits.iter().enumerate() {
                assert_eq!(select_bit(x, prefix, k as u32), bit, "{x:#x}, k = {k}");
            }
        }
    }

    #[test]
    fn transpose64_moves_every_bit_across_the_diagonal() {
        let mut rng = Rng::new(4);
        for _ in 0..20 {
            let original: [u64; 64] = std::array::from_fn(|_| rng.next_u64() & rng.next_u64());
            let mut m = original;
            transpose64(&mut m);
            for (r, row) in original.iter().enumerate() {
                for (c, column) in m.iter().enumerate() {
                    assert_eq!(row >> c & 1, column >> r & 1, "row {r}, column {c}");
                }
            }
            transpose64(&mut m);
            assert_eq!(m, original, "transposing twice gives the matrix back");
        }
    }
}
