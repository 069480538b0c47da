//! The labelled query set (`data/router/labelled.jsonl`: one `{"query", "category",
//! "difficulty"}` per line) and its deterministic, stratified train / held-out split.

use std::path::Path;

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
