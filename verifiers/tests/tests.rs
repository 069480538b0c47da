//! Integration tests of `ponder-verifiers`: the grader acceptance set and property tests.

mod grader_acceptance;
mod properties;
