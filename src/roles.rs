//! The role of every problem of the public benchmark sets: what may be fitted on it, what may
//! choose between fitted things, and what may only be reported — decided by the problem's id
//! alone, so the same problems play the same role on every machine and in every version.
//!
//! The sets are those of the project's shared benchmark directory (GSM8K, ASDiv, MATH-500,
//! AMC 2023, AIME 2024/2025; ids as written there: `gsm8k-train-0000`, `asdiv-0000`,
//! `test/algebra/1265.json`, `amc23-01`, `aime2024-I-01`). With `b = fnv1a64(id) mod 100`
//! ([`crate::split::fnv1a64`]):
//!
//! | set | [`Role::Fit`] | [`Role::Validation`] | [`Role::Report`] | [`Role::Reserve`] |
//! |---|---|---|---|---|
//! | GSM8K train | `b ≥ 15` | `b < 15` | — | — |
//! | ASDiv | `10 ≤ b < 50` | `b < 10` | `b ≥ 50` | — |
//! | GSM8K test | — | — | `b < 25` (a fixed sample of ≈ 330) | the rest |
//! | MATH-500, AMC 2023, AIME 2024/2025 | — | — | all | — |
//!
//! *Fit* problems are what anything is fitted on (worked examples, verifier weights, the
//! router's labelled queries and difficulty bins, calibration rows); *validation* problems, a
//! slice of the same sets, are where every choice between fitted things is made (which verifier
//! ships, which configurations `auto` may run, whether examples are shown, the default);
//! *report* problems are only ever reported on; *reserve* problems are neither (the part of
//! GSM8K test outside the report sample, kept untouched). The committed id lists in
//! `data/roles/` are this rule written out (`ponder-eval roles` writes them; a test checks
//! them against the rule), so a reader can see which problems a fitted file could have seen.
//!
//! An id of no public set (Ponder's own generated problems, a user's file) has no role here:
//! [`may_fit`] falls back to the train / held-out split of [`crate::split`].

use serde::{Deserialize, Serialize};

use crate::split::{fnv1a64, split_of, Split};

/// What a public benchmark problem may be used for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Anything may be fitted on it.
    Fit,
    /// Choices between fitted things are made on it; nothing is fitted on it.
    Validation,
    /// Only reported on.
    Report,
    /// Neither fitted nor reported (kept untouched).
    Reserve,
}

impl Role {
    /// Every role, in the order the id lists are written.
    pub const ALL: [Role; 4] = [Role::Fit, Role::Validation, Role::Report, Role::Reserve];

    /// The role's name as written in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Role::Fit => "fit",
            Role::Validation => "validation",
            Role::Report => "report",
            Role::Reserve => "reserve",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The public benchmark sets, as their ids name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PublicSet {
    /// GSM8K's training set (7,473 problems with worked solutions).
    Gsm8kTrain,
    /// GSM8K's test set (1,319).
    Gsm8kTest,
    /// ASDiv (2,155 one- and two-step word problems).
    Asdiv,
    /// MATH-500 (the PRM800K test split of MATH).
    Math500,
    /// AMC 2023.
    Amc23,
    /// AIME 2024 and 2025.
    Aime,
}

impl PublicSet {
    /// The set a problem id belongs to, or `None` for an id of no public set.
    pub fn of(id: &str) -> Option<PublicSet> {
        if id.starts_with("gsm8k-train-") {
            Some(PublicSet::Gsm8kTrain)
        } else if id.starts_with("gsm8k-test-") {
            Some(PublicSet::Gsm8kTest)
        } else if id.starts_with("asdiv-") {
            Some(PublicSet::Asdiv)
        } else if id.starts_with("test/") && id.ends_with(".json") {
            Some(PublicSet::Math500)
        } else if id.starts_with("amc23-") {
            Some(PublicSet::Amc23)
        } else if id.starts_with("aime2024-") || id.starts_with("aime2025-") {
            Some(PublicSet::Aime)
        } else {
            None
        }
    }

    /// The file of the shared benchmark directory that holds the set.
    pub fn file(self) -> &'static [&'static str] {
        match self {
            PublicSet::Gsm8kTrain => &["gsm8k_train.jsonl"],
            PublicSet::Gsm8kTest => &["gsm8k_test.jsonl"],
            PublicSet::Asdiv => &["asdiv.jsonl"],
            PublicSet::Math500 => &["math500.jsonl"],
            PublicSet::Amc23 => &["amc23.jsonl"],
            PublicSet::Aime => &["aime24.jsonl", "aime25.jsonl"],
        }
    }
}

/// Every public set.
pub const PUBLIC_SETS: [PublicSet; 6] = [
    PublicSet::Gsm8kTrain,
    PublicSet::Gsm8kTest,
    PublicSet::Asdiv,
    PublicSet::Math500,
    PublicSet::Amc23,
    PublicSet::Aime,
];

/// The role of the public problem with this id (the table in the module doc), or `None` for
/// an id of no public set.
///
/// ```
/// use ponder::roles::{role_of, Role};
///
/// assert_eq!(role_of("test/algebra/1265.json"), Some(Role::Report));
/// assert_eq!(role_of("my-own-problem-7"), None);
/// let fit = (0..7473)
///     .filter(|i| role_of(&format!("gsm8k-train-{i:04}")) == Some(Role::Fit))
///     .count();
/// assert!((6000..6700).contains(&fit), "{fit}");
/// ```
pub fn role_of(id: &str) -> Option<Role> {
    let b = fnv1a64(id.as_bytes()) % 100;
    Some(match PublicSet::of(id)? {
        PublicSet::Gsm8kTrain if b < 15 => Role::Validation,
        PublicSet::Gsm8kTrain => Role::Fit,
        PublicSet::Asdiv if b < 10 => Role::Validation,
        PublicSet::Asdiv if b < 50 => Role::Fit,
        PublicSet::Asdiv => Role::Report,
        PublicSet::Gsm8kTest if b < 25 => Role::Report,
        PublicSet::Gsm8kTest => Role::Reserve,
        PublicSet::Math500 | PublicSet::Amc23 | PublicSet::Aime => Role::Report,
    })
}

/// Whether anything may be fitted on the problem with this id: a public problem in the
/// [`Role::Fit`] role, or a problem of no public set in the train split ([`crate::split`]).
pub fn may_fit(id: &str) -> bool {
    match role_of(id) {
        Some(role) => role == Role::Fit,
        None => split_of(id) == Split::Train,
    }
}

/// Where the committed id lists live, relative to the checkout: `data/roles/<role>.txt`, one
/// id per line, in the order of the sets' files.
pub const ROLES_DIR: &str = "data/roles";

/// Where the public sets' files are read from: `$PONDER_DATASETS`, else `../shared/datasets`
/// from the working directory if it exists there, else beside the checkout this binary was
/// built from.
pub fn datasets_dir() -> std::path::PathBuf {
    crate::models::shipped_path("PONDER_DATASETS", "../shared/datasets")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_public_id_shape_has_its_set_and_other_ids_none() {
        for (id, set) in [
            ("gsm8k-train-0000", PublicSet::Gsm8kTrain),
            ("gsm8k-test-1318", PublicSet::Gsm8kTest),
            ("asdiv-0000", PublicSet::Asdiv),
            ("test/precalculus/807.json", PublicSet::Math500),
            ("amc23-01", PublicSet::Amc23),
            ("aime2024-I-01", PublicSet::Aime),
            ("aime2025-II-15", PublicSet::Aime),
        ] {
            assert_eq!(PublicSet::of(id), Some(set), "{id}");
            assert!(role_of(id).is_some());
        }
        for id in ["gen-0-0000-distance", "easy-01", "p17", "test/x"] {
            assert_eq!(PublicSet::of(id), None, "{id}");
            assert_eq!(role_of(id), None);
        }
    }

    #[test]
    fn nothing_reported_is_fitted_and_report_sets_are_never_fit() {
        // The invariant the roles exist for, over ids of every shape.
        let ids = (0..3000).flat_map(|i| {
            [
                format!("gsm8k-train-{i:04}"),
                format!("gsm8k-test-{i:04}"),
                format!("asdiv-{i:04}"),
                format!("test/algebra/{i}.json"),
            ]
        });
        for id in ids {
            let role = role_of(&id);
            assert_eq!(may_fit(&id), role == Some(Role::Fit), "{id}");
            match PublicSet::of(&id) {
                Some(PublicSet::Gsm8kTest | PublicSet::Math500) => {
                    assert!(matches!(role, Some(Role::Report | Role::Reserve)), "{id}")
                }
                Some(PublicSet::Gsm8kTrain) => {
                    assert!(matches!(role, Some(Role::Fit | Role::Validation)), "{id}")
                }
                _ => {}
            }
        }
    }

    #[test]
    fn the_shares_are_what_the_table_says() {
        let count = |prefix: &str, n: usize, role: Role| {
            (0..n)
                .filter(|i| role_of(&format!("{prefix}{i:04}")) == Some(role))
                .count()
        };
        // GSM8K test's report sample: ≥ 300 of 1,319, as Step 17 asks.
        let report = count("gsm8k-test-", 1319, Role::Report);
        assert!((300..380).contains(&report), "{report}");
        let asdiv_report = count("asdiv-", 2215, Role::Report);
        assert!((1000..1200).contains(&asdiv_report), "{asdiv_report}");
        let asdiv_val = count("asdiv-", 2215, Role::Validation);
        assert!((170..280).contains(&asdiv_val), "{asdiv_val}");
    }

    #[test]
    fn ids_outside_the_public_sets_fall_back_to_the_split() {
        for id in ["gen-0-0000-distance", "gen-0-0001-machine", "easy-01"] {
            assert_eq!(may_fit(id), split_of(id) == Split::Train, "{id}");
        }
    }
}
