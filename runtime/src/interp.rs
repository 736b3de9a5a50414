//! The interpreter: forward evaluation of a [`Program`] on lane words.
//!
//! It is the engine that runs anywhere and the oracle for native code, so it does exactly what
//! the Program says and nothing clever: one pass over an entry's gates in order, each gate
//! writing `op(operands)` into its slot. Each value is a lane word, so one pass evaluates up to
//! 64 states; the [`Machine`] implementation runs a single state in lane 0.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::opaque::{Opaque, OpaqueError};
use crate::program::{Entry, Lit, Op, Program, ProgramError};
use crate::state::PackedState;
use crate::{FactIdx, Layout, Machine, MachineError, MoveIdx, RoleIdx};

/// Why a lane operation refused its arguments.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaneError {
    /// The value array is shorter than the program's slots.
    #[error("the value array has {got} words, but the program has {needed} slots")]
    ValuesTooShort {
        /// The program's number of slots.
        needed: usize,
        /// The length given.
        got: usize,
    },
    /// A lane beyond the 64 bits of a lane word.
    #[error("lane {0} does not exist; a lane word has lanes 0 to 63")]
    LaneOutOfRange(u32),
    /// A packed bitmask of the wrong size for the program.
    #[error("the packed {what} has {got} words, but the program needs {expected}")]
    MaskSize {
        /// What the bitmask holds (bases or inputs).
        what: &'static str,
        /// The words the program needs.
        expected: usize,
        /// The words given.
        got: usize,
    },
    /// The evaluator of the opaque atoms failed.
    #[error("{0}")]
    Opaque(#[from] OpaqueError),
    /// A literal reads a slot beyond the value array.
    #[error("literal {lit:?} reads slot {}, beyond the {len} words of the value array", lit.slot())]
    LitOutOfRange {
        /// The literal.
        lit: Lit,
        /// The length of the value array.
        len: usize,
    },
}

/// One gate as the interpreter runs it. Disjunctions are stored as negated conjunctions of
/// negated operands, so every gate is the same loop: `out = AND(operands) ^ invert`.
#[derive(Copy, Clone, Debug)]
struct Step {
    /// The slot written.
    out: u32,
    /// The end of this gate's run in `Code::operands`; it starts where the previous one ended.
    end: u32,
    /// All ones for a disjunction, zero for a conjunction.
    invert: u64,
}

/// The gates of one entry, laid out contiguously in the order they run.
#[derive(Clone, Debug, Default)]
struct Code {
    steps: Vec<Step>,
    /// Operand literals (`slot << 1 | negated`), already flipped for disjunctions.
    operands: Vec<u32>,
    /// The loops the entry runs, by position: each repeats a run of `steps`.
    loops: Vec<CodeLoop>,
}

/// A loop of the program as an entry's code runs it ([`crate::Loops`]).
#[derive(Clone, Debug)]
struct CodeLoop {
    /// The steps of its body.
    steps: Range<usize>,
    /// Each feedback slot with the literal of its next value.
    pairs: Vec<(u32, u32)>,
    /// The most rounds to run.
    max_rounds: usize,
}

/// The pairs of `lp` as slots and literal bits, for [`feedback_round`].
pub(crate) fn loop_pairs(program: &Program, lp: &crate::Loop) -> Vec<(u32, u32)> {
    let first = program.first_feedback_slot() as u32;
    lp.pairs.iter().map(|&(f, lit)| (first + f, lit.0)).collect()
}

/// Runs a loop on a value array of `W` words per slot (slot `s` is `words[s * W .. (s + 1) *
/// W]`): sets the feedback slots of `pairs` to 0, then repeats `round` and copies each pair's
/// literal into its feedback slot until nothing changed, at most `max_rounds` times.
/// Returns the number of rounds run.
pub(crate) fn run_loop<const W: usize>(
    pairs: &[(u32, u32)],
    max_rounds: usize,
    words: &mut [u64],
    mut round: impl FnMut(&mut [u64]),
) -> usize {
    for &(fb, _) in pairs {
        words[fb as usize * W..(fb as usize + 1) * W].fill(0);
    }
    for k in 1..=max_rounds {
        round(words);
        let mut changed = 0u64;
        for &(fb, lit) in pairs {
            for half in 0..W {
                let new = words[(lit >> 1) as usize * W + half] ^ neg_mask(lit);
                let old = &mut words[fb as usize * W + half];
                changed |= new ^ *old;
                *old = new;
            }
        }
        if changed == 0 {
            return k;
        }
    }
    max_rounds
}

/// Scratch memory for the [`Machine`] methods, so that a call does not allocate a value array.
#[derive(Debug)]
struct Scratch {
    values: Vec<u64>,
    /// The state whose legal bitmask is in `legal`, if `legal_valid`. A playout asks for the
    /// legal moves of every role in the same state, so the bitmask is computed once per state.
    legal_key: Vec<u64>,
    legal: Vec<u64>,
    legal_valid: bool,
}

impl Scratch {
    fn new(slots: usize) -> Scratch {
        let mut values = vec![0; slots];
        values[Program::TRUE_SLOT as usize] = !0;
        Scratch {
            values,
            legal_key: Vec::new(),
            legal: Vec::new(),
            legal_valid: false,
        }
    }
}

/// Evaluates a validated [`Program`]; implements [`Machine`] with [`PackedState`] states.
///
/// Shareable across threads: the program is behind an [`Arc`] and the scratch memory behind a
/// mutex that a call only tries to take, allocating its own value array when another thread
/// holds it.
#[derive(Debug)]
pub struct Interpreter {
    program: Arc<Program>,
    code: [Code; 5],
    /// The opaque atoms' evaluator, their demand gates, and which entries read them.
    opaque: Option<OpaqueFill>,
    /// The first error of the opaque evaluator in a [`Machine`] call, which has no error
    /// value of its own; later calls that can fail report it.
    opaque_error: Mutex<Option<OpaqueError>>,
    /// For each role, its moves by normalized action text.
    moves: Vec<HashMap<String, MoveIdx>>,
    scratch: Mutex<Scratch>,
}

/// What an executor needs to fill the opaque slots of a program (`doc/opaque.md` §6): the
/// evaluator, the demand gates laid out as the interpreter runs them, and which entries read
/// opaque slots. The interpreter and native code both fill through it, so they ask the
/// evaluator the same questions and write the same bits.
#[derive(Debug)]
pub(crate) struct OpaqueFill {
    evaluator: Arc<dyn Opaque>,
    /// The gates of the demand literals.
    demand: Code,
    /// For each entry, whether it reads an opaque slot.
    reads: [bool; 5],
}

impl OpaqueFill {
    /// The fill of `program`'s opaque slots by `evaluator`; `program` is valid.
    pub(crate) fn new(program: &Program, evaluator: Arc<dyn Opaque>) -> OpaqueFill {
        OpaqueFill {
            evaluator,
            demand: compile_gates(program, &program.opaque.demand_gates),
            reads: Entry::ALL.map(|e| program.entry_reads_opaque(e)),
        }
    }

    /// Whether `entry` reads opaque slots, so that they must be filled before it runs.
    #[inline]
    pub(crate) fn reads(&self, entry: Entry) -> bool {
        self.reads[entry.index()]
    }

    /// Fills the opaque slots of the lanes set in `lanes` in a value array of `W` words per
    /// slot (slot `s` is `words[s * W .. (s + 1) * W]`, lane `k` bit `k % 64` of word `k / 64`):
    /// runs the demand gates on every word, then asks the evaluator, once per distinct state
    /// and demand among those lanes, for the demanded atoms. Undemanded atoms, and every atom of
    /// the other lanes, are 0. On an error the remaining atoms stay 0 and the error is returned.
    /// `words` holds at least `num_slots * W` words of `program`, the program this was made for.
    pub(crate) fn fill<const W: usize>(
        &self,
        program: &Program,
        words: &mut [u64],
        lanes: [u64; W],
    ) -> Result<(), OpaqueError> {
        for half in 0..W {
            run_code_at::<W>(&self.demand, words, half);
        }
        let p = program;
        let first = p.first_opaque_slot();
        words[first * W..p.first_feedback_slot() * W].fill(0);
        let demand: Vec<[u64; W]> = p
            .opaque
            .demand
            .iter()
            .map(|&l| std::array::from_fn(|half| words[l.slot() as usize * W + half] ^ neg_mask(l.0)))
            .collect();
        let bases = p.num_bases();
        // Lanes in equal states with equal demand share one evaluation (rollouts start together).
        let mut seen: HashMap<(Vec<u64>, Vec<u32>), Vec<bool>> = HashMap::new();
        for half in 0..W {
            let any = demand.iter().fold(0, |a, d| a | d[half]) & lanes[half];
            for lane in (0..64).filter(|&l| any >> l & 1 == 1) {
                let wanted: Vec<u32> = (0..demand.len() as u32)
                    .filter(|&i| demand[i as usize][half] >> lane & 1 == 1)
                    .collect();
                let mut state = vec![0u64; Layout::words(bases)];
                for i in 0..bases {
                    state[i / 64] |= (words[(2 + i) * W + half] >> lane & 1) << (i % 64);
                }
                let key = (state, wanted);
                let answers = match seen.get(&key) {
                    Some(a) => a.clone(),
                    None => {
                        let mut out = vec![false; key.1.len()];
                        self.evaluator.eval(&key.0, &key.1, &mut out)?;
                        seen.insert(key.clone(), out.clone());
                        out
                    }
                };
                for (&i, &on) in key.1.iter().zip(&answers) {
                    words[(first + i as usize) * W + half] |= u64::from(on) << lane;
                }
            }
        }
        Ok(())
    }
}

impl Interpreter {
    /// An interpreter for `program`, which must pass [`Program::validate`] and have no opaque
    /// atoms (see [`Interpreter::with_opaque`]).
    pub fn new(program: impl Into<Arc<Program>>) -> Result<Interpreter, ProgramError> {
        Interpreter::build(program.into(), None)
    }

    /// An interpreter for `program` whose opaque atoms `evaluator` computes.
    pub fn with_opaque(
        program: impl Into<Arc<Program>>,
        evaluator: Arc<dyn Opaque>,
    ) -> Result<Interpreter, ProgramError> {
        Interpreter::build(program.into(), Some(evaluator))
    }

    fn build(program: Arc<Program>, evaluator: Option<Arc<dyn Opaque>>) -> Result<Interpreter, ProgramError> {
        program.validate()?;
        let opaque = match evaluator {
            _ if program.num_opaque() == 0 => None,
            None => {
                return Err(ProgramError::NoOpaqueEvaluator {
                    atoms: program.num_opaque(),
                })
            }
            Some(evaluator) => Some(OpaqueFill::new(&program, evaluator)),
        };
        let code = Entry::ALL.map(|entry| compile_entry(&program, entry));
        let layout = &program.layout;
        let mut moves = vec![HashMap::new(); layout.roles.len()];
        for (i, (role, action)) in layout.inputs.iter().enumerate() {
            // Validation checked that every input's role exists. The first of two inputs with the
            // same action wins, so the lookup is deterministic even on a strange layout.
            moves[role.index()]
                .entry(normalize_kif(action))
                .or_insert(MoveIdx::from_index(i));
        }
        let scratch = Mutex::new(Scratch::new(program.num_slots()));
        Ok(Interpreter {
            program,
            code,
            opaque,
            opaque_error: Mutex::new(None),
            moves,
            scratch,
        })
    }

    /// The first error of the opaque evaluator met by a [`Machine`] call, if any. Such a call
    /// (`legal_moves`, say) has no error value, so it answers as if the failed atoms were false
    /// and records the error here; `next_state` then refuses with it.
    pub fn opaque_error(&self) -> Option<OpaqueError> {
        self.opaque_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The program run.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// A value array for this program: every slot zero except constant true, all ones.
    pub fn new_values(&self) -> Vec<u64> {
        Scratch::new(self.program.num_slots()).values
    }

    /// Runs `entry` on `values`: sets the two constant slots, then computes each of the entry's
    /// gates in order. The caller sets the base slots (and, for next and view, the input
    /// slots) beforehand and reads the outputs with [`Interpreter::read`] afterwards. Slots of
    /// gates outside the entry are left as they were and never read.
    ///
    /// If the entry reads opaque slots, they are filled first for all 64 lanes (see
    /// [`Interpreter::eval_lanes`] to name the lanes in use).
    pub fn eval(&self, entry: Entry, values: &mut [u64]) -> Result<(), LaneError> {
        self.eval_lanes(entry, values, !0)
    }

    /// As [`Interpreter::eval`], filling opaque slots only for the lanes set in `lanes` (the
    /// others read their opaque atoms as 0, so their outputs are meaningless).
    pub fn eval_lanes(&self, entry: Entry, values: &mut [u64], lanes: u64) -> Result<(), LaneError> {
        self.check_values(values)?;
        self.run(entry, values, lanes)?;
        Ok(())
    }

    /// The lane word of `lit` in `values`.
    pub fn read(values: &[u64], lit: Lit) -> Result<u64, LaneError> {
        match values.get(lit.slot() as usize) {
            Some(&v) => Ok(v ^ neg_mask(lit.0)),
            None => Err(LaneError::LitOutOfRange {
                lit,
                len: values.len(),
            }),
        }
    }

    /// Puts `state` into lane `lane` of the base slots, leaving the other lanes as they are.
    pub fn spread_state(&self, state: &PackedState, lane: u32, values: &mut [u64]) -> Result<(), LaneError> {
        self.check_values(values)?;
        check_lane(lane)?;
        let bases = self.program.num_bases();
        check_mask("bases", Layout::words(bases), state.words().len())?;
        spread_bits(state.words(), bases, 2, lane, values);
        Ok(())
    }

    /// Puts a packed input bitmask (bit `i` for input `i`) into lane `lane` of the input slots,
    /// leaving the other lanes as they are.
    pub fn spread_inputs(&self, inputs: &[u64], lane: u32, values: &mut [u64]) -> Result<(), LaneError> {
        self.check_values(values)?;
        check_lane(lane)?;
        let count = self.program.num_inputs();
        check_mask("inputs", Layout::words(count), inputs.len())?;
        spread_bits(inputs, count, self.program.first_input_slot(), lane, values);
        Ok(())
    }

    /// The outputs of `entry` in lane `lane` as a packed bitmask, bit `i` for output `i`: the
    /// legal bits (one per input), the terminal bit, the goal bits, the next-state bits (one
    /// per base) or the view bits.
    pub fn pack(&self, entry: Entry, values: &[u64], lane: u32) -> Result<Vec<u64>, LaneError> {
        self.check_values(values)?;
        check_lane(lane)?;
        let lits = self.program.outputs(entry);
        let mut out = vec![0; Layout::words(lits.len())];
        pack_bits(lits, values, lane, &mut out);
        Ok(out)
    }

    /// The next state in lane `lane`, after [`Entry::Next`] ran.
    pub fn pack_state(&self, values: &[u64], lane: u32) -> Result<PackedState, LaneError> {
        self.pack(Entry::Next, values, lane).map(PackedState::from_words)
    }

    fn check_values(&self, values: &[u64]) -> Result<(), LaneError> {
        let needed = self.program.num_slots();
        if values.len() < needed {
            return Err(LaneError::ValuesTooShort {
                needed,
                got: values.len(),
            });
        }
        Ok(())
    }

    /// The evaluation loop. `values` has at least `num_slots` words and the program is valid,
    /// so every index is in bounds.
    fn run(&self, entry: Entry, values: &mut [u64], lanes: u64) -> Result<(), OpaqueError> {
        values[Program::FALSE_SLOT as usize] = 0;
        values[Program::TRUE_SLOT as usize] = !0;
        let mut filled = Ok(());
        if let Some(fill) = &self.opaque {
            if fill.reads(entry) {
                filled = fill.fill::<1>(&self.program, values, [lanes]);
            }
        }
        run_code(&self.code[entry.index()], values);
        filled
    }

    /// Records the first opaque error of a [`Machine`] call.
    fn note(&self, result: Result<(), OpaqueError>) {
        if let Err(e) = result {
            let mut slot = self.opaque_error.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(e);
        }
    }
}

/// Runs one compiled gate list on `values`.
fn run_code(code: &Code, values: &mut [u64]) {
    if code.loops.is_empty() {
        run_steps(code, 0..code.steps.len(), values);
        return;
    }
    let mut pos = 0;
    for lp in &code.loops {
        run_steps(code, pos..lp.steps.start, values);
        run_loop::<1>(&lp.pairs, lp.max_rounds, values, |v| {
            run_steps(code, lp.steps.clone(), v)
        });
        pos = lp.steps.end;
    }
    run_steps(code, pos..code.steps.len(), values);
}

/// Runs the steps `range` of `code` on `values`.
fn run_steps(code: &Code, range: Range<usize>, values: &mut [u64]) {
    let mut start = match range.start {
        0 => 0,
        i => code.steps[i - 1].end as usize,
    };
    for step in &code.steps[range] {
        let end = step.end as usize;
        let mut acc = !0u64;
        for &lit in &code.operands[start..end] {
            acc &= values[(lit >> 1) as usize] ^ neg_mask(lit);
        }
        values[step.out as usize] = acc ^ step.invert;
        start = end;
    }
}

/// Runs one compiled gate list on word `half` of a value array of `W` words per slot (slot `s`
/// is `words[s * W .. (s + 1) * W]`), for the demand gates of the opaque fill at either width.
/// With `W = 1` it computes what [`run_code`] does; the entries keep their own loop, which is
/// the interpreter's hot path, so that games without opaque atoms run exactly the code they
/// ran before the fill was shared.
fn run_code_at<const W: usize>(code: &Code, words: &mut [u64], half: usize) {
    let mut start = 0;
    for step in &code.steps {
        let end = step.end as usize;
        let mut acc = !0u64;
        for &lit in &code.operands[start..end] {
            acc &= words[(lit >> 1) as usize * W + half] ^ neg_mask(lit);
        }
        words[step.out as usize * W + half] = acc ^ step.invert;
        start = end;
    }
}

impl Interpreter {
    fn scratch(&self) -> Option<MutexGuard<'_, Scratch>> {
        match self.scratch.try_lock() {
            Ok(guard) => Some(guard),
            // The scratch holds nothing that a panic could leave half-written in a harmful way:
            // every call rewrites the slots it reads, and the legal cache is marked valid only
            // after it is complete.
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Runs `f` on the shared scratch, or on a fresh one when another thread holds it.
    fn with_scratch<R>(&self, f: impl FnOnce(&mut Scratch) -> R) -> R {
        match self.scratch() {
            Some(mut guard) => f(&mut guard),
            None => f(&mut Scratch::new(self.program.num_slots())),
        }
    }

    /// Puts a state into lane 0 of the base slots, clearing the other lanes. Missing words
    /// read as zero and extra words are ignored, so a state of another machine gives a
    /// meaningless answer, never a panic.
    fn load_state(&self, state: &PackedState, values: &mut [u64]) {
        let bases = self.program.num_bases();
        for (i, v) in values[2..2 + bases].iter_mut().enumerate() {
            *v = state.words().get(i / 64).map_or(0, |w| w >> (i % 64) & 1);
        }
    }

    /// Runs one entry on a single state in lane 0 of the scratch values.
    fn run_single(&self, scratch: &mut Scratch, state: &PackedState, entry: Entry) {
        self.load_state(state, &mut scratch.values);
        let result = self.run(entry, &mut scratch.values, 1);
        self.note(result);
    }

    fn role_name(&self, r: usize) -> String {
        self.program.layout.roles[r].clone()
    }
}

/// The mask that negates a lane word when the literal's negation bit is set.
#[inline(always)]
pub(crate) fn neg_mask(lit: u32) -> u64 {
    u64::from(lit & 1).wrapping_neg()
}

fn check_lane(lane: u32) -> Result<(), LaneError> {
    if lane < 64 {
        Ok(())
    } else {
        Err(LaneError::LaneOutOfRange(lane))
    }
}

fn check_mask(what: &'static str, expected: usize, got: usize) -> Result<(), LaneError> {
    if expected == got {
        Ok(())
    } else {
        Err(LaneError::MaskSize { what, expected, got })
    }
}

/// Writes bit `i` of `mask` into lane `lane` of `values[first + i]` for `i < count`.
fn spread_bits(mask: &[u64], count: usize, first: usize, lane: u32, values: &mut [u64]) {
    let bit = 1u64 << lane;
    for (i, v) in values[first..first + count].iter_mut().enumerate() {
        let on = mask[i / 64] >> (i % 64) & 1;
        *v = *v & !bit | on << lane;
    }
}

/// Sets bit `i` of `out` to lane `lane` of literal `lits[i]`; `out` starts cleared.
pub(crate) fn pack_bits(lits: &[Lit], values: &[u64], lane: u32, out: &mut [u64]) {
    for (i, lit) in lits.iter().enumerate() {
        let on = (values[lit.slot() as usize] ^ neg_mask(lit.0)) >> lane & 1;
        out[i / 64] |= on << (i % 64);
    }
}

/// Lays out the gates of `entry` for [`Interpreter::run`].
fn compile_entry(program: &Program, entry: Entry) -> Code {
    let gates = program.gates_of(entry);
    let mut code = compile_gates(program, gates);
    for &l in program.loops_of(entry) {
        let lp = &program.loops.loops[l as usize];
        // Validation checked that the entry holds the whole body.
        let start = gates.partition_point(|&g| g < lp.body.start);
        code.loops.push(CodeLoop {
            steps: start..start + lp.body.len(),
            pairs: loop_pairs(program, lp),
            max_rounds: lp.max_rounds(),
        });
    }
    code
}

/// Lays out `gates` (ascending) for [`run_code`].
fn compile_gates(program: &Program, gates: &[u32]) -> Code {
    let mut code = Code::default();
    for &g in gates {
        let g = g as usize;
        let gate = program.gates[g];
        // Validation checked the run, so the operands are there.
        let operands = program.gate_operands(g).unwrap_or(&[]);
        // OR(a, b, ...) = !AND(!a, !b, ...): flip every operand and the result.
        let flip = u32::from(gate.op == Op::Or);
        code.operands.extend(operands.iter().map(|lit| lit.0 ^ flip));
        code.steps.push(Step {
            out: program.gate_slot(g),
            end: code.operands.len() as u32,
            invert: u64::from(flip).wrapping_neg(),
        });
    }
    code
}

/// Canonical spacing and case of a KIF term: lowercase, no space after `(` or before `)`, one
/// space between other tokens. `( MARK  1 1 )` becomes `(mark 1 1)`.
pub(crate) fn normalize_kif(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Whether a space separates the next word from what came before.
    let mut gap = false;
    for c in text.chars() {
        if c.is_whitespace() {
            gap = true;
            continue;
        }
        let after_open = out.ends_with('(');
        if c == ')' {
            out.push(')');
        } else {
            if (gap || out.ends_with(')')) && !out.is_empty() && !after_open {
                out.push(' ');
            }
            out.push(c.to_ascii_lowercase());
        }
        gap = false;
    }
    out
}

impl Machine for Interpreter {
    type State = PackedState;

    fn engine_name(&self) -> &'static str {
        "interp"
    }

    fn roles(&self) -> &[String] {
        &self.program.layout.roles
    }

    fn initial_state(&self) -> PackedState {
        PackedState::from_words(self.program.init.clone())
    }

    fn state_facts(&self, state: &PackedState) -> Vec<FactIdx> {
        let bases = self.program.num_bases();
        let constants = self.program.layout.constant_facts.len();
        state
            .iter_ones()
            .take_while(|&b| b < bases)
            .chain(bases..bases + constants)
            .map(FactIdx::from_index)
            .collect()
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        let layout = &self.program.layout;
        let i = fact.index();
        match i.checked_sub(layout.bases.len()) {
            None => layout.bases[i].clone(),
            Some(c) => match layout.constant_facts.get(c) {
                Some(name) => name.clone(),
                None => format!("<unknown fact {}>", fact.0),
            },
        }
    }

    fn legal_moves(&self, state: &PackedState, role: RoleIdx) -> Vec<MoveIdx> {
        let Some(range) = self.program.layout.role_inputs.get(role.index()) else {
            return Vec::new();
        };
        self.with_scratch(|s| {
            if !(s.legal_valid && s.legal_key == state.words()) {
                s.legal_valid = false;
                self.run_single(s, state, Entry::Legal);
                s.legal.clear();
                s.legal.resize(Layout::words(self.program.legal.len()), 0);
                pack_bits(&self.program.legal, &s.values, 0, &mut s.legal);
                s.legal_key.clear();
                s.legal_key.extend_from_slice(state.words());
                s.legal_valid = true;
            }
            (range.start as usize..range.end as usize)
                .filter(|&i| s.legal[i / 64] >> (i % 64) & 1 == 1)
                .map(MoveIdx::from_index)
                .collect()
        })
    }

    fn move_name(&self, mv: MoveIdx) -> String {
        match self.program.layout.inputs.get(mv.index()) {
            Some((_, action)) => action.clone(),
            None => format!("<unknown move {}>", mv.0),
        }
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        self.moves.get(role.index())?.get(&normalize_kif(name)).copied()
    }

    fn next_state_unchecked(
        &self,
        state: &PackedState,
        joint: &[MoveIdx],
    ) -> Result<PackedState, MachineError> {
        let layout = &self.program.layout;
        if joint.len() != layout.roles.len() {
            return Err(MachineError::WrongMoveCount {
                expected: layout.roles.len(),
                got: joint.len(),
            });
        }
        for (r, (mv, range)) in joint.iter().zip(&layout.role_inputs).enumerate() {
            if !range.contains(&mv.0) {
                return Err(MachineError::UnknownMove {
                    role: self.role_name(r),
                    mv: *mv,
                });
            }
        }
        if let Some(e) = self.opaque_error() {
            return Err(MachineError::Opaque(e.to_string()));
        }
        Ok(self.with_scratch(|s| {
            let first_input = self.program.first_input_slot();
            s.values[first_input..self.program.first_opaque_slot()].fill(0);
            for mv in joint {
                s.values[first_input + mv.index()] = 1;
            }
            self.run_single(s, state, Entry::Next);
            let mut next = vec![0; Layout::words(self.program.num_bases())];
            pack_bits(&self.program.next, &s.values, 0, &mut next);
            PackedState::from_words(next)
        }))
    }

    fn is_terminal(&self, state: &PackedState) -> bool {
        self.with_scratch(|s| {
            self.run_single(s, state, Entry::Terminal);
            let lit = self.program.terminal;
            (s.values[lit.slot() as usize] ^ neg_mask(lit.0)) & 1 == 1
        })
    }

    fn goal_values(&self, state: &PackedState, role: RoleIdx) -> Vec<u32> {
        if role.index() >= self.program.layout.roles.len() {
            return Vec::new();
        }
        let mut values: Vec<u32> = self.with_scratch(|s| {
            self.run_single(s, state, Entry::Goals);
            self.program
                .goals
                .iter()
                .zip(&self.program.layout.goals)
                .filter(|&(lit, &(r, _))| {
                    r == role && (s.values[lit.slot() as usize] ^ neg_mask(lit.0)) & 1 == 1
                })
                .map(|(_, &(_, value))| value)
                .collect()
        });
        values.sort_unstable();
        values.dedup();
        values
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_kif;

    #[test]
    fn normalize_spacing_and_case() {
        assert_eq!(normalize_kif("( MARK  1 1 )"), "(mark 1 1)");
        assert_eq!(normalize_kif("noop"), "noop");
        assert_eq!(normalize_kif("  Noop\t"), "noop");
        assert_eq!(normalize_kif("(move (a b)(c d) e )"), "(move (a b) (c d) e)");
        assert_eq!(normalize_kif("( f )"), "(f)");
        assert_eq!(normalize_kif("((x))"), "((x))");
        assert_eq!(normalize_kif(""), "");
    }
}
