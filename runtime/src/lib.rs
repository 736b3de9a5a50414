//! The runtime side of propjet: the API a playout engine embeds.
//!
//! Every engine (the GDL-level reference evaluator in the `propjet` crate, and the propnet
//! engines that come with it) implements [`Machine`]: roles, the initial state, legal moves,
//! next states, terminal and goals. Roles, moves and base facts are addressed by dense typed
//! indices ([`RoleIdx`], [`MoveIdx`], [`FactIdx`]) and readable by name in canonical KIF
//! (lowercase, single spaces, e.g. `(cell 1 1 x)`).
//!
//! A compiled game is a [`Program`]: an ordered netlist over lane words with its [`Layout`]
//! (which bit is which named proposition). [`Interpreter`] runs one on [`PackedState`]s and is the
//! oracle for native code.
//!
//! [`random_playout`] plays a seeded, reproducible random game on any machine:
//!
//! ```
//! use propjet_runtime::{random_playout, Machine, Rng};
//!
//! /// Plays `n` seeded random games from the initial state and returns each role's goal total.
//! fn goal_totals<M: Machine>(machine: &M, n: usize, seed: u64) -> Vec<u64> {
//!     let mut rng = Rng::new(seed);
//!     let mut totals = vec![0u64; machine.roles().len()];
//!     let start = machine.initial_state();
//!     for _ in 0..n {
//!         let playout = random_playout(machine, &start, &mut rng, 10_000).expect("a well-formed game");
//!         for (total, goal) in totals.iter_mut().zip(&playout.goals) {
//!             *total += u64::from(*goal);
//!         }
//!     }
//!     totals
//! }
//! # let _ = goal_totals::<propjet_runtime::doc_support::Countdown>;
//! # let totals = goal_totals(&propjet_runtime::doc_support::Countdown(5), 10, 7);
//! # assert_eq!(totals, vec![1000]);
//! ```
#![warn(missing_docs)]

mod engine;
mod ids;
mod interp;
mod machine;
mod native;
mod opaque;
mod playout;
mod program;
mod rng;
mod rollout;
mod state;

pub use engine::Engine;
pub use ids::{FactIdx, MoveIdx, RoleIdx};
pub use interp::{Interpreter, LaneError};
pub use machine::{Machine, MachineError};
pub use native::{ChunkLoop, EntryChunks, Lanes, Native, NativeError, Width};
pub use opaque::{Opaque, OpaqueError};
pub use playout::{random_playout, random_playout_with, Playout, PlayoutError, Stall};
pub use program::{
    Entry, Gate, Layout, Lit, Loop, Loops, Op, OpaqueSlots, Output, Program, ProgramError, Slot,
    ValidProgram, MAX_SLOTS,
};
pub use rng::Rng;
pub use rollout::{
    lane_rollouts, machine_rollouts, GoalRule, InputOrder, LaneEngine, Phases, Plan, RolloutError,
    RolloutSource, Totals,
};
pub use state::PackedState;

#[doc(hidden)]
pub mod doc_support;
