//! Differential checks of native code against the interpreter on one program, shared by the
//! random-program and the corpus tests. Each returns the first disagreement, described.

use propjet_runtime::{
    Entry, Interpreter, Layout, Machine, MoveIdx, Native, NativeError, PackedState, Program, Rng, RoleIdx,
    Width,
};

/// Which slots of the value array an entry must leave as the interpreter does: every slot but
/// those of the entry's gates that are not its outputs, which native code need not write
/// (`doc/native.md`). So each entry's outputs are compared, the view entry's being every view
/// proposition, and every slot outside the entry must be left alone.
pub fn compared_slots(program: &Program, entry: Entry) -> Vec<bool> {
    let mut compared = vec![true; program.num_slots()];
    for &g in program.gates_of(entry) {
        if let Some(c) = compared.get_mut(program.gate_slot(g as usize) as usize) {
            *c = false;
        }
    }
    for lit in program.outputs(entry) {
        if let Some(c) = compared.get_mut(lit.slot() as usize) {
            *c = true;
        }
    }
    compared
}

/// The first slot where two value arrays differ among the slots `entry` must leave as the
/// interpreter does ([`compared_slots`]), described.
pub fn first_difference(
    program: &Program,
    entry: Entry,
    what: &str,
    want: &[u64],
    got: &[u64],
) -> Result<(), String> {
    let compared = compared_slots(program, entry);
    let differs =
        |(slot, (a, b)): (usize, (&u64, &u64))| a != b && compared.get(slot).copied().unwrap_or(true);
    match want.iter().zip(got).enumerate().position(differs) {
        None => Ok(()),
        Some(slot) => Err(format!(
            "{what}, entry {entry:?}: slot {slot} ({}) is {:#018x} natively but {:#018x} in the interpreter",
            program.slot_kind(slot as u32),
            got[slot],
            want[slot]
        )),
    }
}

pub fn random_words(rng: &mut Rng, n: usize) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64()).collect()
}

/// A random packed bitmask of `bits` bits, padding bits clear.
pub fn random_mask(rng: &mut Rng, bits: usize) -> Vec<u64> {
    let mut words = random_words(rng, Layout::words(bits));
    if !bits.is_multiple_of(64) {
        if let Some(last) = words.last_mut() {
            *last &= (1 << (bits % 64)) - 1;
        }
    }
    words
}

/// A random state of `bases` bases.
pub fn random_state(rng: &mut Rng, bases: usize) -> PackedState {
    PackedState::from_words(random_mask(rng, bases))
}

/// A random joint move (any move of each role, legal or not), or `None` if a role has none.
pub fn random_joint(rng: &mut Rng, program: &Program) -> Option<Vec<MoveIdx>> {
    program
        .layout
        .role_inputs
        .iter()
        .map(|range| {
            let count = range.end - range.start;
            (count > 0).then(|| MoveIdx(range.start + rng.below(count)))
        })
        .collect()
}

/// Whole value arrays after each entry, at 64 lanes and (where there is code) at 128.
pub fn arrays_agree(
    program: &Program,
    interp: &Interpreter,
    native: &Native,
    rng: &mut Rng,
) -> Result<(), String> {
    let slots = program.num_slots();
    for entry in Entry::ALL {
        for _ in 0..3 {
            // Random words in every slot, gate slots too: an entry must overwrite its outputs
            // and leave the slots outside it alone.
            let start = random_words(rng, slots);
            let (mut want, mut got) = (start.clone(), start);
            interp.eval(entry, &mut want).map_err(|e| e.to_string())?;
            native.eval(entry, &mut got).map_err(|e| e.to_string())?;
            first_difference(program, entry, "64 lanes", &want, &got)?;
        }
        if !native.has_width(Width::X128) {
            continue;
        }
        let mut lanes = native.lanes(Width::X128).map_err(|e| e.to_string())?;
        let (mut low, mut high) = (random_words(rng, slots), random_words(rng, slots));
        for slot in 0..slots {
            let words = lanes.slot_mut(slot as u32).ok_or("a lane slot is missing")?;
            words.copy_from_slice(&[low[slot], high[slot]]);
        }
        native.eval_lanes(entry, &mut lanes).map_err(|e| e.to_string())?;
        interp.eval(entry, &mut low).map_err(|e| e.to_string())?;
        interp.eval(entry, &mut high).map_err(|e| e.to_string())?;
        let words = |half: usize| -> Vec<u64> {
            (0..slots)
                .map(|s| lanes.slot(s as u32).map_or(0, |w| w[half]))
                .collect()
        };
        first_difference(program, entry, "128 lanes, low half", &low, &words(0))?;
        first_difference(program, entry, "128 lanes, high half", &high, &words(1))?;
    }
    Ok(())
}

/// The lane API at both widths, lane `k` holding `states[k % len]` and `inputs[k % len]`, each
/// lane checked against a single-state interpreter run.
pub fn lanes_agree(
    program: &Program,
    interp: &Interpreter,
    native: &Native,
    states: &[PackedState],
    inputs: &[Vec<u64>],
) -> Result<(), String> {
    if states.is_empty() || inputs.is_empty() {
        return Err("lanes_agree needs at least one state and one input mask".to_string());
    }
    let err = |e: NativeError| e.to_string();
    for width in Width::ALL {
        if !native.has_width(width) {
            continue;
        }
        let mut lanes = native.lanes(width).map_err(err)?;
        let count = width.lanes();
        let state = |lane: u32| &states[lane as usize % states.len()];
        let input = |lane: u32| &inputs[lane as usize % inputs.len()];
        for lane in 0..count {
            native.set_state(&mut lanes, lane, state(lane)).map_err(err)?;
            native.set_inputs(&mut lanes, lane, input(lane)).map_err(err)?;
        }
        for entry in Entry::ALL {
            native.eval_lanes(entry, &mut lanes).map_err(err)?;
            for lane in 0..count {
                let mut values = interp.new_values();
                let single = |e: propjet_runtime::LaneError| e.to_string();
                interp.spread_state(state(lane), 0, &mut values).map_err(single)?;
                interp
                    .spread_inputs(input(lane), 0, &mut values)
                    .map_err(single)?;
                interp.eval(entry, &mut values).map_err(single)?;
                let want = interp.pack(entry, &values, 0).map_err(single)?;
                let got = native.pack(entry, &lanes, lane).map_err(err)?;
                if want != got {
                    return Err(format!(
                        "{} lanes, lane {lane}, entry {entry:?}: outputs {got:x?} natively, {want:x?} in the interpreter",
                        width.lanes()
                    ));
                }
            }
        }
        let lane = count - 1;
        let next = native.pack_state(&lanes, lane).map_err(err)?;
        if next.words().len() != Layout::words(program.num_bases()) {
            return Err(format!("pack_state gave {} words", next.words().len()));
        }
    }
    Ok(())
}

/// The single-state Machine methods on the initial state and `states`, with random joint
/// moves (legal or not).
pub fn machines_agree(
    program: &Program,
    interp: &Interpreter,
    native: &Native,
    states: &[PackedState],
    rng: &mut Rng,
) -> Result<(), String> {
    if native.engine_name() != "native" {
        return Err(format!("the engine is named {}", native.engine_name()));
    }
    let initial = [interp.initial_state(), native.initial_state()];
    for state in initial.iter().chain(states) {
        for r in 0..program.layout.roles.len() {
            let role = RoleIdx(r as u32);
            let (want, got) = (interp.legal_moves(state, role), native.legal_moves(state, role));
            if want != got {
                return Err(format!(
                    "legal moves of role {r} in {state:?}: {got:?} natively, {want:?}"
                ));
            }
            let (want, got) = (interp.goal_values(state, role), native.goal_values(state, role));
            if want != got {
                return Err(format!(
                    "goals of role {r} in {state:?}: {got:?} natively, {want:?}"
                ));
            }
        }
        if interp.is_terminal(state) != native.is_terminal(state) {
            return Err(format!("terminal disagrees in {state:?}"));
        }
        if interp.state_facts(state) != native.state_facts(state) {
            return Err(format!("state facts disagree in {state:?}"));
        }
        if let Some(joint) = random_joint(rng, program) {
            let want = interp
                .next_state_unchecked(state, &joint)
                .map_err(|e| e.to_string())?;
            let got = native
                .next_state_unchecked(state, &joint)
                .map_err(|e| e.to_string())?;
            if want != got {
                return Err(format!(
                    "next of {state:?} under {joint:?}: {got:?} natively, {want:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Reachable states with a random joint move each (legal for every role), from seeded random
/// playouts of the interpreter, until `count` are collected or the playouts run out.
pub fn reachable(
    interp: &Interpreter,
    program: &Program,
    rng: &mut Rng,
    count: usize,
) -> Vec<(PackedState, Vec<u64>)> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let mut state = interp.initial_state();
        for _ in 0..200 {
            if out.len() == count || interp.is_terminal(&state) {
                break;
            }
            let mut joint = Vec::new();
            for r in 0..program.layout.roles.len() {
                let legal = interp.legal_moves(&state, RoleIdx(r as u32));
                if legal.is_empty() {
                    break;
                }
                joint.push(legal[rng.below(legal.len() as u32) as usize]);
            }
            if joint.len() != program.layout.roles.len() {
                break;
            }
            let mut inputs = vec![0u64; Layout::words(program.num_inputs())];
            for &MoveIdx(m) in &joint {
                inputs[m as usize / 64] |= 1 << (m % 64);
            }
            out.push((state.clone(), inputs));
            match interp.next_state_unchecked(&state, &joint) {
                Ok(next) => state = next,
                Err(_) => break,
            }
        }
    }
    out
}
