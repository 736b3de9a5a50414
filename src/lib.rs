//! propjet: GDL game descriptions to propositional nets and native bit-parallel code.
//!
//! The pipeline runs one way: [`gdl::parse`] reads and checks a description, and the
//! [`reference`] evaluator answers for it directly (the oracle every other engine is tested
//! against).

pub mod analysis;
pub mod compare;
pub mod compile;
pub mod gdl;
mod graph;
pub mod ground;
pub mod lower;
pub mod measure;
pub mod net;
pub mod opaque;
pub mod perft;
pub mod reference;
pub mod trace;
