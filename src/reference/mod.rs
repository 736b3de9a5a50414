//! The reference GDL evaluator.
