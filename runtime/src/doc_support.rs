//! A toy machine for the crate's examples. Not part of the API.

use crate::{FactIdx, Machine, MachineError, MoveIdx, RoleIdx};

/// One role counts down from `n` to zero, one step per move, and gets 100 at zero.
pub struct Countdown(pub u32);

impl Machine for Countdown {
    type State = u32;

    fn engine_name(&self) -> &'static str {
        "countdown"
    }

    fn roles(&self) -> &[String] {
        static ROLES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        ROLES.get_or_init(|| vec!["counter".to_string()])
    }

    fn initial_state(&self) -> u32 {
        self.0
    }

    fn state_facts(&self, state: &u32) -> Vec<FactIdx> {
        vec![FactIdx(*state)]
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        format!("(count {})", fact.0)
    }

    fn legal_moves(&self, state: &u32, role: RoleIdx) -> Vec<MoveIdx> {
        if role.0 == 0 && *state > 0 {
            vec![MoveIdx(0)]
        } else {
            Vec::new()
        }
    }

    fn move_name(&self, _mv: MoveIdx) -> String {
        "tick".to_string()
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        (role.0 == 0 && name == "tick").then_some(MoveIdx(0))
    }

    fn next_state_unchecked(&self, state: &u32, joint: &[MoveIdx]) -> Result<u32, MachineError> {
        if joint.len() != 1 {
            return Err(MachineError::WrongMoveCount {
                expected: 1,
                got: joint.len(),
            });
        }
        Ok(state.saturating_sub(1))
    }

    fn is_terminal(&self, state: &u32) -> bool {
        *state == 0
    }

    fn goal_values(&self, state: &u32, _role: RoleIdx) -> Vec<u32> {
        if *state == 0 {
            vec![100]
        } else {
            vec![0]
        }
    }
}
