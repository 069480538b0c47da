//! Any model output and reference answer (split at the first NUL byte): extraction,
//! normalisation, the LaTeX parser, grading, equivalence and voting return, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ponder_verifiers::{equivalent, extract_answer, grade, latex, majority_vote, normalize_answer};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (output, reference) = text.split_once('\0').unwrap_or((&text, "1"));
    let extracted = extract_answer(output);
    let normalized = normalize_answer(output);
    let _ = latex::parse(&normalized);
    let _ = latex::parse(output);
    let _ = grade(reference, output);
    let _ = equivalent(output, reference);
    let _ = majority_vote([output, reference]);
    drop(extracted);
});
