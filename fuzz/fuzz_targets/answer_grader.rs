//! Any model output and reference answer (split at the first NUL byte): extraction,
//! normalisation, the LaTeX parser, grading, equivalence and voting return, never panic.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks {
    include!("../checks.rs");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::answer_grader(data));
