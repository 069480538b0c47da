//! The hidden-state verifier's reading on the real SmolLM2: a candidate's reading is the
//! model's hidden size, ends on the solution's last token, is the same vector when read again
//! (alone, or batched with its siblings), and comes back unchanged from the cache.

use ponder::learned_verifier::hidden::{HiddenFeatures, HiddenReader};
use ponder::learned_verifier::{CandidateGroup, LabelledCandidate, Split};

/// The same reading computed in another batch (other matmul shapes, a cached prefix).
const REREAD_TOL: f32 = 1e-4;

const QUESTION: &str = "Tom has 3 apples and buys 4 more. How many apples does he have?";
const RIGHT: &str = "Tom has 3 + 4 = 7 apples. The answer is 7.";
const WRONG: &str = "Tom has 3 * 4 = 12 apples. The answer is 12.";

fn reader() -> HiddenReader {
    HiddenReader::start(&crate::util::smollm2_path()).expect("reader")
}

#[test]
fn a_candidates_reading_is_the_same_vector_read_twice() {
    let reader = reader();
    let rt = crate::util::runtime(2);
    let tokens = reader.tokens(QUESTION, RIGHT).expect("tokens");
    let tokenizer = &crate::util::smollm2().tokenizer;
    let solution = tokenizer.encode(RIGHT).expect("encode");
    assert!(
        tokens.ends_with(&solution),
        "the reading is at the solution's last token"
    );
    let bar = indicatif::ProgressBar::hidden();
    let first = rt
        .block_on(reader.read(&[(QUESTION, RIGHT)], &bar))
        .expect("read");
    let again = rt
        .block_on(reader.read(&[(QUESTION, WRONG), (QUESTION, RIGHT)], &bar))
        .expect("read");
    assert_eq!(first[0].len(), reader.hidden_size());
    assert_eq!(reader.hidden_size(), 576, "SmolLM2-135M");
    let diff = crate::util::max_abs_diff(&first[0], &again[1]);
    assert!(
        diff <= REREAD_TOL,
        "read twice, the readings differ by {diff}"
    );
    let apart = crate::util::max_abs_diff(&again[0], &again[1]);
    assert!(
        apart > 10.0 * REREAD_TOL,
        "different solutions read apart ({apart})"
    );
}

#[test]
fn readings_come_back_unchanged_from_the_cache() {
    let candidate = |text: &str, correct| LabelledCandidate {
        text: text.into(),
        answer: None,
        correct,
        tokens: 16,
        finished: true,
        trace_confidence: None,
    };
    let groups = vec![CandidateGroup {
        problem_id: "p".into(),
        question: QUESTION.into(),
        gold: "7".into(),
        split: Split::Train,
        candidates: vec![candidate(RIGHT, true), candidate(WRONG, false)],
    }];
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = crate::util::runtime(2);
    let bar = indicatif::ProgressBar::hidden();
    let model = crate::util::smollm2_path();
    let mut features = HiddenFeatures::open(&model, dir.path()).expect("open");
    let read = rt
        .block_on(features.of_groups(&groups, &bar))
        .expect("read");
    assert_eq!(features.cache().len(), 2);
    drop(features);
    let mut cached = HiddenFeatures::open(&model, dir.path()).expect("open");
    assert_eq!(cached.cache().len(), 2, "the cache was written");
    let again = rt.block_on(cached.of_groups(&groups, &bar)).expect("read");
    assert_eq!(read, again);
}
