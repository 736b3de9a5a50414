//! Random valid Programs of every shape, for differential tests of the executors.
//!
//! A [`Shape`] fixes the sizes (roles, inputs, bases, gates, fan-in, outputs) and a seed fixes
//! everything else, so a failing case is reproduced from its shape and seed alone, and proptest
//! shrinks the shape towards small nets.

use propjet_runtime::{Gate, Layout, Lit, Op, Program, Rng, RoleIdx};

/// The sizes of a random program.
#[derive(Clone, Debug)]
pub struct Shape {
    /// The number of inputs of each role; the number of roles is its length.
    pub inputs_per_role: Vec<usize>,
    /// The number of bases.
    pub bases: usize,
    /// The number of gates.
    pub gates: usize,
    /// The most operands of an ordinary gate (zero operands is allowed).
    pub max_fanin: usize,
    /// How many gates get a fan-in of hundreds instead.
    pub wide_gates: usize,
    /// The number of goal bits.
    pub goals: usize,
    /// The number of view bits.
    pub views: usize,
    /// Whether every output is a constant instead of a random literal.
    pub constant_outputs: bool,
    /// When not zero, every operand of a wide gate and half of those of the other gates come
    /// from the first `pool` bases and inputs (or bases alone, for gates that read only the
    /// state), so that gates share many operands and wide gates read no gate, as the wide
    /// gates of chess-like games do.
    pub pool: usize,
}

impl Shape {
    /// A shape with the given bases and gates, two roles of three inputs, fan-in up to four,
    /// four goals and five views.
    pub fn sized(bases: usize, gates: usize) -> Shape {
        Shape {
            inputs_per_role: vec![3, 3],
            bases,
            gates,
            max_fanin: 4,
            wide_gates: 0,
            goals: 4,
            views: 5,
            constant_outputs: false,
            pool: 0,
        }
    }
}

/// A random literal chooser over the slots built so far. Slots that depend on an input (inputs
/// themselves and gates reading one, directly or not) are kept apart, because legal, terminal
/// and goals may read only the state.
struct Pool {
    /// Every slot so far, and whether it depends on an input.
    slots: Vec<bool>,
    /// The slots that do not depend on an input.
    state_only: Vec<u32>,
}

impl Pool {
    fn push(&mut self, reads_input: bool) {
        if !reads_input {
            self.state_only.push(self.slots.len() as u32);
        }
        self.slots.push(reads_input);
    }

    /// A literal, random in sign, from the first `pool` bases and inputs (or bases alone when
    /// `state_only`), or `None` when there are none.
    fn pick_pooled(&self, rng: &mut Rng, state_only: bool, pool: usize, leaves: usize) -> Option<Lit> {
        let slot = if state_only {
            // The state-only slots start with the constants and then the bases.
            let bases = self
                .state_only
                .iter()
                .skip(2)
                .take(pool)
                .filter(|&&s| (s as usize) < leaves);
            let count = bases.clone().count();
            *bases.clone().nth(rng.below(count.max(1) as u32) as usize)?
        } else {
            let count = pool.min(leaves.saturating_sub(2));
            if count == 0 {
                return None;
            }
            2 + rng.below(count as u32)
        };
        Some(if rng.below(3) == 0 {
            Lit::neg(slot)
        } else {
            Lit::pos(slot)
        })
    }

    /// A literal, random in sign, from all slots or the state-only ones. Half of the time it is
    /// one of the last few slots, so that chains of gates reading gates are common.
    fn pick(&self, rng: &mut Rng, state_only: bool) -> Lit {
        let count = if state_only {
            self.state_only.len()
        } else {
            self.slots.len()
        };
        let index = if rng.below(2) == 0 {
            rng.below(count as u32) as usize
        } else {
            count - 1 - rng.below(count.min(4) as u32) as usize
        };
        let slot = if state_only {
            self.state_only[index]
        } else {
            index as u32
        };
        if rng.below(3) == 0 {
            Lit::neg(slot)
        } else {
            Lit::pos(slot)
        }
    }
}

/// A random valid program of `shape`, the same for the same seed.
pub fn random_program(shape: &Shape, seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let roles = shape.inputs_per_role.len();
    let mut layout = Layout {
        roles: (0..roles).map(|r| format!("role{r}")).collect(),
        bases: (0..shape.bases).map(|b| format!("(base {b})")).collect(),
        constant_facts: vec!["(fixed)".to_string()],
        inputs: Vec::new(),
        role_inputs: Vec::new(),
        goals: Vec::new(),
        views: (0..shape.views).map(|v| format!("(view {v})")).collect(),
    };
    for (r, &count) in shape.inputs_per_role.iter().enumerate() {
        let start = layout.inputs.len() as u32;
        for i in 0..count {
            layout.inputs.push((RoleIdx(r as u32), format!("(act {i})")));
        }
        layout.role_inputs.push(start..layout.inputs.len() as u32);
    }
    if roles > 0 {
        layout.goals = (0..shape.goals)
            .map(|_| (RoleIdx(rng.below(roles as u32)), rng.below(4) * 25))
            .collect();
    }

    let mut pool = Pool {
        slots: Vec::new(),
        state_only: Vec::new(),
    };
    // Constants and bases depend on no input; inputs do.
    for _ in 0..2 + shape.bases {
        pool.push(false);
    }
    for _ in 0..layout.inputs.len() {
        pool.push(true);
    }
    // Spread the wide gates over the net rather than bunching them at one end.
    let mut wide_at: Vec<usize> = (0..shape.wide_gates.min(shape.gates))
        .map(|_| rng.below(shape.gates as u32) as usize)
        .collect();
    wide_at.sort_unstable();
    let (mut gates, mut operands) = (Vec::new(), Vec::new());
    for g in 0..shape.gates {
        let wide = wide_at.binary_search(&g).is_ok();
        let len = if wide {
            100 + rng.below(400) as usize
        } else {
            rng.below(shape.max_fanin as u32 + 1) as usize
        };
        // A quarter of the gates read only the state, so that legal, terminal and goals have
        // gates to use besides the bases.
        let state_only = rng.below(4) == 0;
        let start = operands.len() as u32;
        let mut reads_input = false;
        let leaves = 2 + shape.bases + layout.inputs.len();
        for _ in 0..len {
            let pooled = if shape.pool > 0 && (wide || rng.below(2) == 0) {
                pool.pick_pooled(&mut rng, state_only, shape.pool, leaves)
            } else {
                None
            };
            let lit = match pooled {
                Some(lit) => lit,
                None => pool.pick(&mut rng, state_only),
            };
            reads_input |= pool.slots[lit.slot() as usize];
            operands.push(lit);
        }
        let op = if rng.below(2) == 0 { Op::And } else { Op::Or };
        gates.push(Gate {
            op,
            start,
            len: len as u32,
        });
        pool.push(reads_input);
    }

    let mut output = |state_only: bool| {
        if shape.constant_outputs {
            if rng.below(2) == 0 {
                Lit::TRUE
            } else {
                Lit::FALSE
            }
        } else {
            pool.pick(&mut rng, state_only)
        }
    };
    let legal = (0..layout.inputs.len()).map(|_| output(true)).collect();
    let terminal = output(true);
    let goals = (0..layout.goals.len()).map(|_| output(true)).collect();
    let next = (0..shape.bases).map(|_| output(false)).collect();
    let views = (0..shape.views).map(|_| output(false)).collect();
    let mut init = vec![0u64; Layout::words(shape.bases)];
    for b in 0..shape.bases {
        if rng.below(2) == 0 {
            init[b / 64] |= 1 << (b % 64);
        }
    }
    let mut program = Program {
        layout,
        gates,
        operands,
        init,
        legal,
        goals,
        terminal,
        next,
        views,
        entry_gates: Default::default(),
        opaque: Default::default(),
        loops: Default::default(),
    };
    program.compute_entry_gates();
    program
}

/// `program` (which has no opaque atoms) with `atoms` opaque atoms added, the same for the same
/// seed: the opaque slots are inserted after the inputs (every gate slot moves up by `atoms`),
/// about a quarter of the gates' operands are replaced by random opaque literals, and each
/// atom's demand is a random literal over the state alone (a constant, a base, or a gate that
/// reads neither an input nor an opaque slot), so that some atoms are demanded in some lanes
/// only. With [`HashedOpaque`] as evaluator it exercises the fill of every executor cheaply.
#[allow(dead_code)]
pub fn with_opaque(program: &Program, atoms: usize, seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let mut p = program.clone();
    let first_gate = program.first_gate_slot() as u32;
    let first_opaque = program.first_opaque_slot() as u32;
    let shift = |lit: Lit| {
        if lit.slot() >= first_gate {
            let moved = Lit::pos(lit.slot() + atoms as u32);
            if lit.is_negated() {
                moved.negate()
            } else {
                moved
            }
        } else {
            lit
        }
    };
    for lit in lits_mut(&mut p) {
        *lit = shift(*lit);
    }
    if atoms > 0 {
        for lit in p.operands.iter_mut() {
            if rng.below(4) == 0 {
                let slot = first_opaque + rng.below(atoms as u32);
                *lit = if rng.below(3) == 0 {
                    Lit::neg(slot)
                } else {
                    Lit::pos(slot)
                };
            }
        }
    }
    // The gates that read the state alone, through any chain: candidates for the demand.
    let new_first_gate = first_gate + atoms as u32;
    let mut pure = vec![false; p.gates.len()];
    for g in 0..p.gates.len() {
        let gate = p.gates[g];
        let ops = &p.operands[gate.start as usize..(gate.start + gate.len) as usize];
        pure[g] = ops.iter().all(|l| {
            let s = l.slot();
            if s >= new_first_gate {
                pure[(s - new_first_gate) as usize]
            } else {
                (s as usize) < 2 + p.num_bases()
            }
        });
    }
    let pure_gates: Vec<u32> = (0..p.gates.len() as u32).filter(|&g| pure[g as usize]).collect();
    p.opaque.names = (0..atoms).map(|i| format!("(opaque {i})")).collect();
    p.opaque.demand = (0..atoms)
        .map(|_| {
            let slot = match rng.below(4) {
                0 => Program::TRUE_SLOT,
                1 if !pure_gates.is_empty() => {
                    new_first_gate + pure_gates[rng.below(pure_gates.len() as u32) as usize]
                }
                _ if p.num_bases() > 0 => 2 + rng.below(p.num_bases() as u32),
                _ => Program::TRUE_SLOT,
            };
            if rng.below(3) == 0 {
                Lit::neg(slot)
            } else {
                Lit::pos(slot)
            }
        })
        .collect();
    p.compute_entry_gates();
    p
}

/// A deterministic evaluator of opaque atoms for random programs: atom `i` holds in a state
/// when a hash of the state's words and `i` is odd. It counts the atoms it is asked, and fails
/// on every call once `fail_after` atoms were asked, if set, to test the error paths.
#[allow(dead_code)]
#[derive(Debug, Default)]
pub struct HashedOpaque {
    pub asked: std::sync::atomic::AtomicU64,
    pub fail_after: Option<u64>,
}

impl propjet_runtime::Opaque for HashedOpaque {
    fn eval(
        &self,
        bases: &[u64],
        wanted: &[u32],
        out: &mut [bool],
    ) -> Result<(), propjet_runtime::OpaqueError> {
        use std::sync::atomic::Ordering;
        let before = self.asked.fetch_add(wanted.len() as u64, Ordering::Relaxed);
        if let (Some(limit), Some(&first)) = (self.fail_after, wanted.first()) {
            if before + wanted.len() as u64 > limit {
                return Err(propjet_runtime::OpaqueError {
                    atom: format!("(opaque {first})"),
                    reason: "the test evaluator fails on purpose".to_string(),
                });
            }
        }
        let mut h = 0x243F_6A88_85A3_08D3u64;
        for &w in bases {
            h = mix(h ^ w);
        }
        for (o, &i) in out.iter_mut().zip(wanted) {
            *o = mix(h ^ u64::from(i)) & 1 == 1;
        }
        Ok(())
    }
}

/// A 64-bit finalizer (the multiply-xorshift steps of a common hash), for [`HashedOpaque`].
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `program` (without loops or opaque atoms) with up to `loops` loops ([`propjet_runtime::Loops`]) made
/// of runs of its gates: each body reads its own feedback slots and its own gates only
/// positively (so the loop is monotone and every lane reaches its fixpoint), and may read
/// earlier loops' feedback slots with either sign; each feedback slot's literal is a gate of
/// the body. A run whose loop would make legal, terminal or goals read an input is skipped, so
/// the result may have fewer loops (none for a program of no gates).
#[allow(dead_code)]
pub fn with_loops(program: &Program, loops: usize, seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let gates = program.gates.len() as u32;
    for _attempt in 0..8 {
        // Runs of gates, ascending and disjoint, with one to three feedback slots each.
        let mut bodies: Vec<(std::ops::Range<u32>, u32)> = Vec::new();
        let mut at = 0u32;
        for _ in 0..loops {
            if at >= gates {
                break;
            }
            let start = at + rng.below((gates - at).min(8));
            let len = 1 + rng.below((gates - start).min(6));
            bodies.push((start..start + len, 1 + rng.below(3)));
            at = start + len;
        }
        if bodies.is_empty() {
            return program.clone();
        }
        let slots: u32 = bodies.iter().map(|b| b.1).sum();
        let mut p = program.clone();
        let first_gate = program.first_gate_slot() as u32;
        let shift = |lit: Lit| {
            if lit.slot() >= first_gate {
                Lit(lit.0 + (slots << 1))
            } else {
                lit
            }
        };
        for lit in lits_mut(&mut p) {
            *lit = shift(*lit);
        }
        p.loops.slots = slots;
        let first_fb = p.first_feedback_slot() as u32;
        let new_first_gate = first_gate + slots;
        let mut next_fb = 0u32;
        let mut earlier_fb: Vec<u32> = Vec::new();
        for (body, k) in &bodies {
            let own: Vec<u32> = (next_fb..next_fb + k).collect();
            next_fb += k;
            let body_slots = new_first_gate + body.start..new_first_gate + body.end;
            for g in body.clone() {
                let gate = p.gates[g as usize];
                for lit in &mut p.operands[gate.start as usize..(gate.start + gate.len) as usize] {
                    if body_slots.contains(&lit.slot()) {
                        *lit = Lit::pos(lit.slot());
                    } else if rng.below(3) == 0 {
                        *lit = Lit::pos(first_fb + own[rng.below(*k) as usize]);
                    } else if !earlier_fb.is_empty() && rng.below(6) == 0 {
                        let f = earlier_fb[rng.below(earlier_fb.len() as u32) as usize];
                        *lit = if rng.below(2) == 0 {
                            Lit::pos(first_fb + f)
                        } else {
                            Lit::neg(first_fb + f)
                        };
                    }
                }
            }
            let pairs = own
                .iter()
                .map(|&f| {
                    (
                        f,
                        Lit::pos(new_first_gate + body.start + rng.below(body.len() as u32)),
                    )
                })
                .collect();
            p.loops.loops.push(propjet_runtime::Loop {
                body: body.clone(),
                pairs,
            });
            earlier_fb.extend(own);
        }
        // Some outputs read a feedback slot directly.
        for lit in p.views.iter_mut().chain(&mut p.next) {
            if rng.below(8) == 0 {
                *lit = Lit::pos(first_fb + rng.below(slots));
            }
        }
        p.compute_entry_gates();
        if p.validate().is_ok() {
            return p;
        }
    }
    program.clone()
}

/// Every literal of `p` that names a slot: the gates' operands and the outputs.
fn lits_mut(p: &mut Program) -> impl Iterator<Item = &mut Lit> + '_ {
    p.operands
        .iter_mut()
        .chain(&mut p.legal)
        .chain(&mut p.goals)
        .chain(std::iter::once(&mut p.terminal))
        .chain(&mut p.next)
        .chain(&mut p.views)
}
