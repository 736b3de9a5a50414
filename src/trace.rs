//! Reading the reference traces.
