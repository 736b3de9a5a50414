//! [`Engine`]: a compiled game on native code, or on the interpreter where native code cannot
//! be had, saying which it is.

use crate::interp::Interpreter;
use crate::native::Native;
use crate::state::PackedState;
use crate::{FactIdx, Machine, MachineError, MoveIdx, RoleIdx};

/// The engine a compiled game runs on.
///
/// Native code is preferred; the interpreter computes the same function everywhere and is
/// used when the host has no supported code generator, or when the net exceeds the configured
/// limit of the lowering. [`Machine::engine_name`] says which one this is, and
/// [`Engine::fallback_reason`] why the interpreter was chosen.
#[derive(Debug)]
pub enum Engine {
    /// Native code.
    Native(Native),
    /// The interpreter, with the reason native code was not used.
    Interp {
        /// The interpreter.
        interp: Interpreter,
        /// Why native code was not used.
        reason: String,
    },
}

impl Engine {
    /// Why the interpreter was chosen, or `None` for native code.
    pub fn fallback_reason(&self) -> Option<&str> {
        match self {
            Engine::Native(_) => None,
            Engine::Interp { reason, .. } => Some(reason),
        }
    }

    /// The first error of the opaque evaluator met by a [`Machine`] call that has no error
    /// value of its own (see [`Interpreter::opaque_error`] and [`Native::opaque_error`]).
    pub fn opaque_error(&self) -> Option<crate::OpaqueError> {
        match self {
            Engine::Native(native) => native.opaque_error(),
            Engine::Interp { interp, .. } => interp.opaque_error(),
        }
    }

    /// The native code, if this is native.
    pub fn as_native(&self) -> Option<&Native> {
        match self {
            Engine::Native(native) => Some(native),
            Engine::Interp { .. } => None,
        }
    }

    fn machine(&self) -> &dyn Machine<State = PackedState> {
        match self {
            Engine::Native(native) => native,
            Engine::Interp { interp, .. } => interp,
        }
    }
}

impl Machine for Engine {
    type State = PackedState;

    fn engine_name(&self) -> &'static str {
        self.machine().engine_name()
    }

    fn roles(&self) -> &[String] {
        self.machine().roles()
    }

    fn initial_state(&self) -> PackedState {
        self.machine().initial_state()
    }

    fn state_facts(&self, state: &PackedState) -> Vec<FactIdx> {
        self.machine().state_facts(state)
    }

    fn fact_name(&self, fact: FactIdx) -> String {
        self.machine().fact_name(fact)
    }

    fn legal_moves(&self, state: &PackedState, role: RoleIdx) -> Vec<MoveIdx> {
        self.machine().legal_moves(state, role)
    }

    fn move_name(&self, mv: MoveIdx) -> String {
        self.machine().move_name(mv)
    }

    fn find_move(&self, role: RoleIdx, name: &str) -> Option<MoveIdx> {
        self.machine().find_move(role, name)
    }

    fn next_state_unchecked(
        &self,
        state: &PackedState,
        joint: &[MoveIdx],
    ) -> Result<PackedState, MachineError> {
        self.machine().next_state_unchecked(state, joint)
    }

    fn is_terminal(&self, state: &PackedState) -> bool {
        self.machine().is_terminal(state)
    }

    fn goal_values(&self, state: &PackedState, role: RoleIdx) -> Vec<u32> {
        self.machine().goal_values(state, role)
    }
}
