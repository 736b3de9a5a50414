//! Unit tests of the analysis on small nets.
