//! The labelled query set (`data/router/labelled.jsonl`: one `{"query", "category",
//! "difficulty"}` per line) and its deterministic, stratified train / held-out split; and
//! difficulty-only examples read from a levelled dataset: by default GSM8K train's public
//! problems, levelled by the calculations their worked solutions make, trained on the fit role
//! and evaluated on the validation role ([`crate::roles`]) — report problems are never read.
//! A dataset of no public set (a `level` field per problem) splits by [`crate::split`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{Result, RouterError};

/// One labelled query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelledQuery {
    /// The query text.
    pub query: String,
    /// Its category (`math`, `code`, `knowledge`, `reasoning`, `writing`, `chat`).
    pub category: String,
    /// Its difficulty (`easy`, `medium`, `hard`).
    pub difficulty: String,
}

/// Reads a JSONL file of labelled queries; errors name the file and line.
pub fn load_labelled(path: &Path) -> Result<Vec<LabelledQuery>> {
    let text = std::fs::read_to_string(path).map_err(|e| RouterError::read(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let q: LabelledQuery = serde_json::from_str(line).map_err(|e| {
            RouterError::corrupt(path, "labelled query set", format!("line {}: {e}", i + 1))
        })?;
        if q.query.trim().is_empty() || q.category.is_empty() || q.difficulty.is_empty() {
            return Err(RouterError::corrupt(
                path,
                "labelled query set",
                format!("line {}: empty query or label", i + 1),
            ));
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(RouterError::corrupt(
            path,
            "labelled query set",
            "no examples",
        ));
    }
    Ok(out)
}

/// The levelled dataset `ponder router train` uses by default, a file of the public benchmark
/// directory ([`default_levelled_path`]): GSM8K train, each problem's level the number of
/// calculations (`<<…>>` annotations) its worked solution makes.
pub const DEFAULT_LEVELLED: &str = "gsm8k_train.jsonl";

/// [`DEFAULT_LEVELLED`] in the public benchmark directory ([`crate::roles::datasets_dir`]).
pub fn default_levelled_path() -> PathBuf {
    crate::roles::datasets_dir().join(DEFAULT_LEVELLED)
}

/// GSM8K train's levels as easy (one or two calculations), medium (three or four) and hard
/// (five or more): roughly a third, a half and a sixth of its fit problems.
pub const DEFAULT_LEVEL_BINS: LevelBins = LevelBins {
    easy_max: 2,
    hard_min: 5,
};

/// Fit problems of each level taken by default (the first in file order).
pub const DEFAULT_PER_LEVEL: usize = 60;

/// Held-out problems evaluated on by default (the first in file order): enough for the
/// difficulty head's accuracy to within about ±0.05, few enough that `router train` and its
/// test embed about a thousand questions in all.
pub const DEFAULT_HELD_OUT: usize = 400;

/// Which levels of a harness dataset are which difficulty (levels up to `easy_max` easy, from
/// `hard_min` hard, between them medium: [`super::calibrate::difficulty_of_level`], the rule
/// `ponder-eval calibrate` bins the calibration table by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelBins {
    /// Highest easy level.
    pub easy_max: u32,
    /// Lowest hard level.
    pub hard_min: u32,
}

/// A dataset's problems as difficulty examples (category `math`): a public set's by role
/// ([`crate::roles`]: fit problems train, validation problems are held out, report and reserve
/// problems are left out), any other by the project's fixed split ([`crate::split`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Levelled {
    /// Problems that may be fitted on, at most `per_level` of each level (the first in file
    /// order).
    pub train: Vec<LabelledQuery>,
    /// Held-out (validation) problems, at most `held_out` of them (the first in file order).
    pub held_out: Vec<LabelledQuery>,
}

/// Reads a dataset's problems (JSONL with `id`, `problem` and either a `level` or a worked
/// `solution` whose `<<…>>` calculations are counted; other fields ignored) as difficulty
/// examples: at most `per_level` fit problems of each level and `held_out` held-out ones. A
/// solution with no annotated calculation gives no level and its problem is left out; a line
/// with neither, or a bad line, is an error naming the file and line.
pub fn load_levelled(
    path: &Path,
    bins: LevelBins,
    per_level: usize,
    held_out: usize,
) -> Result<Levelled> {
    #[derive(Deserialize)]
    struct Problem {
        id: String,
        problem: String,
        level: Option<u32>,
        solution: Option<String>,
    }
    let text = std::fs::read_to_string(path).map_err(|e| RouterError::read(path, e))?;
    let mut out = Levelled::default();
    let mut taken: std::collections::BTreeMap<u32, usize> = Default::default();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad = |why: String| {
            RouterError::corrupt(path, "levelled dataset", format!("line {}: {why}", i + 1))
        };
        let p: Problem = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let level = match (p.level, &p.solution) {
            (Some(level), _) => level,
            (None, Some(solution)) => match solution.matches("<<").count() {
                0 => continue,
                n => n as u32,
            },
            (None, None) => {
                return Err(bad(
                    "no `level` and no worked `solution` to count calculations in".into(),
                ))
            }
        };
        if p.problem.trim().is_empty() {
            return Err(bad("empty `problem`".into()));
        }
        let query = LabelledQuery {
            query: p.problem,
            category: "math".into(),
            difficulty: super::calibrate::difficulty_of_level(level, bins.easy_max, bins.hard_min)
                .into(),
        };
        let is_held_out = match crate::roles::role_of(&p.id) {
            Some(crate::roles::Role::Fit) => false,
            Some(crate::roles::Role::Validation) => true,
            Some(crate::roles::Role::Report | crate::roles::Role::Reserve) => continue,
            None => crate::split::split_of(&p.id) == crate::split::Split::HeldOut,
        };
        if is_held_out {
            if out.held_out.len() < held_out {
                out.held_out.push(query);
            }
        } else {
            let n = taken.entry(level).or_default();
            if *n < per_level {
                *n += 1;
                out.train.push(query);
            }
        }
    }
    if out.train.is_empty() {
        return Err(RouterError::corrupt(
            path,
            "levelled dataset",
            "no problems that may be fitted on",
        ));
    }
    Ok(out)
}

/// FNV-1a: a stable hash (the split must not change between runs or Rust versions).
fn fnv(text: &str, seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Splits `examples` into (train, held out): within each (category, difficulty) cell, ordered
/// by a seeded hash of the query, every `1/holdout`-th example is held out (at least one per
/// cell of two or more).
pub fn split(
    examples: &[LabelledQuery],
    holdout: f64,
    seed: u64,
) -> (Vec<LabelledQuery>, Vec<LabelledQuery>) {
    let mut cells: std::collections::BTreeMap<(&str, &str), Vec<&LabelledQuery>> =
        Default::default();
    for e in examples {
        cells
            .entry((&e.category, &e.difficulty))
            .or_default()
            .push(e);
    }
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (_, mut cell) in cells {
        cell.sort_by_key(|e| fnv(&e.query, seed));
        let held = if cell.len() < 2 {
            0
        } else {
            ((cell.len() as f64 * holdout).round() as usize).max(1)
        };
        for (i, e) in cell.into_iter().enumerate() {
            if i < held {
                test.push(e.clone());
            } else {
                train.push(e.clone());
            }
        }
    }
    (train, test)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(query: &str, category: &str, difficulty: &str) -> LabelledQuery {
        LabelledQuery {
            query: query.into(),
            category: category.into(),
            difficulty: difficulty.into(),
        }
    }

    #[test]
    fn split_is_deterministic_stratified_and_disjoint() {
        let mut all = Vec::new();
        for i in 0..20 {
            all.push(q(&format!("math {i}"), "math", "easy"));
            all.push(q(&format!("chat {i}"), "chat", "hard"));
        }
        all.push(q("lonely", "code", "medium"));
        let (train, test) = split(&all, 0.2, 7);
        assert_eq!(train.len() + test.len(), all.len());
        assert_eq!(test.iter().filter(|e| e.category == "math").count(), 4);
        assert_eq!(test.iter().filter(|e| e.category == "chat").count(), 4);
        assert!(
            train.iter().any(|e| e.query == "lonely"),
            "a cell of one stays in training"
        );
        assert!(test.iter().all(|t| !train.contains(t)));
        assert_eq!(split(&all, 0.2, 7), (train, test));
        assert_ne!(split(&all, 0.2, 8).1, split(&all, 0.2, 7).1);
    }

    #[test]
    fn levelled_problems_split_by_id_and_bin_by_level() {
        use crate::split::{split_of, Split};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("set.jsonl");
        let mut text = String::new();
        for i in 0..60 {
            let level = 1 + i % 3;
            text.push_str(&format!(
                "{{\"id\":\"p{i}\",\"problem\":\"q{i}\",\"level\":{level},\"answer\":\"1\"}}\n"
            ));
        }
        std::fs::write(&path, &text).expect("write");
        let bins = LevelBins {
            easy_max: 1,
            hard_min: 3,
        };
        let all = load_levelled(&path, bins, 1000, 1000).expect("loads");
        let held = (0..60)
            .filter(|i| split_of(&format!("p{i}")) == Split::HeldOut)
            .count();
        assert_eq!(all.held_out.len(), held);
        assert_eq!(all.train.len(), 60 - held);
        // Nothing held out is trained on; levels map 1 → easy, 2 → medium, 3 → hard.
        for q in &all.train {
            let i: usize = q.query[1..].parse().expect("index");
            assert_eq!(split_of(&format!("p{i}")), Split::Train);
            let want = ["easy", "medium", "hard"][i % 3];
            assert_eq!((q.category.as_str(), q.difficulty.as_str()), ("math", want));
        }
        let capped = load_levelled(&path, bins, 2, 1000).expect("loads");
        assert_eq!(capped.train.len(), 6, "two of each level");
        assert_eq!(
            capped.held_out, all.held_out,
            "the per-level cap leaves the held-out part whole"
        );
        let few = load_levelled(&path, bins, 1000, 3).expect("loads");
        assert_eq!(few.held_out, all.held_out[..3], "the first three held out");
        assert_eq!(
            few.train, all.train,
            "the held-out cap leaves training whole"
        );

        std::fs::write(&path, "{\"id\":\"x\",\"problem\":\"q\"}\n").expect("write");
        let msg = load_levelled(&path, bins, 10, 10)
            .expect_err("no level")
            .to_string();
        assert!(
            msg.contains("line 1") && msg.contains("level") && msg.contains("solution"),
            "{msg}"
        );
    }

    #[test]
    fn public_problems_split_by_role_and_level_by_their_solutions_calculations() {
        use crate::roles::{role_of, Role};
        // Public ids of each role: GSM8K train has fit and validation problems, ASDiv report
        // ones too.
        let first = |set: &str, role: Role| {
            (0..1000)
                .map(|i| format!("{set}-{i:04}"))
                .find(|id| role_of(id) == Some(role))
                .expect("an id of the role")
        };
        let fit = first("gsm8k-train", Role::Fit);
        let validation = first("gsm8k-train", Role::Validation);
        let report = first("asdiv", Role::Report);
        let line = |id: &str, solution: &str| {
            format!(
                "{}\n",
                serde_json::json!({"id": id, "problem": format!("q {id}"), "solution": solution})
            )
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gsm8k_train.jsonl");
        let text = [
            line(&fit, "a <<1+1=2>>2 b <<2*3=6>>6 c <<6-1=5>>5"),
            line(&validation, "<<1+1=2>>2"),
            line(
                &report,
                "<<1+1=2>>2 <<2+2=4>>4 <<4+4=8>>8 <<8+8=16>>16 <<1+1=2>>2",
            ),
            line("gsm8k-train-9999x", "no calculation written out"),
        ]
        .concat();
        std::fs::write(&path, text).expect("write");
        let got = load_levelled(&path, DEFAULT_LEVEL_BINS, 10, 10).expect("loads");
        // Three calculations are medium; the validation problem is held out; the report
        // problem is never read; a solution without calculations gives no level.
        assert_eq!(got.train, vec![q(&format!("q {fit}"), "math", "medium")]);
        assert_eq!(
            got.held_out,
            vec![q(&format!("q {validation}"), "math", "easy")]
        );
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("set.jsonl");
        std::fs::write(
            &path,
            "{\"query\":\"hi\",\"category\":\"chat\",\"difficulty\":\"easy\"}\n{\"query\": 3}\n",
        )
        .expect("write");
        let msg = load_labelled(&path).expect_err("bad line").to_string();
        assert!(msg.contains("set.jsonl") && msg.contains("line 2"), "{msg}");
    }
}
