//! The public benchmark sets' role lists: `ponder::roles`'s rule written out as one file of
//! ids per role (`data/roles/<role>.txt`), so a reader — or a test — can see which problems a
//! fitted file could have seen without recomputing a hash.
//!
//! This module only lists; the rule itself is `ponder::roles::role_of`, and nothing here may
//! assign a role by any other means.

use std::collections::BTreeMap;
use std::path::Path;

use ponder::roles::{role_of, PublicSet, Role, PUBLIC_SETS};

use crate::dataset::{load, DatasetOptions};
use crate::error::{EvalError, Result};

/// The ids of every public set's problems under `datasets`, per role, each list in the order
/// of the sets ([`PUBLIC_SETS`]) and of their files. Fails naming a missing file or an id
/// the rule does not recognise as its set's.
pub fn role_lists(datasets: &Path) -> Result<BTreeMap<Role, Vec<String>>> {
    let mut lists: BTreeMap<Role, Vec<String>> = Role::ALL.iter().map(|r| (*r, vec![])).collect();
    for set in PUBLIC_SETS {
        for file in set.file() {
            let path = datasets.join(file);
            let problems = load(&path, &DatasetOptions::default())?.problems;
            for p in problems {
                let role = match (PublicSet::of(&p.id), role_of(&p.id)) {
                    (Some(s), Some(role)) if s == set => role,
                    _ => {
                        return Err(EvalError::Dataset {
                            path: path.display().to_string(),
                            reason: format!("id {:?} is not an id of {set:?}", p.id),
                        })
                    }
                };
                lists.entry(role).or_default().push(p.id);
            }
        }
    }
    Ok(lists)
}

/// Writes `lists` as `<dir>/<role>.txt`, one id per line.
pub fn write_role_lists(lists: &BTreeMap<Role, Vec<String>>, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for (role, ids) in lists {
        let mut text = ids.join("\n");
        text.push('\n');
        std::fs::write(dir.join(format!("{role}.txt")), text)?;
    }
    Ok(())
}

/// Reads `<dir>/<role>.txt` for every role.
pub fn read_role_lists(dir: &Path) -> Result<BTreeMap<Role, Vec<String>>> {
    let mut lists = BTreeMap::new();
    for role in Role::ALL {
        let text = std::fs::read_to_string(dir.join(format!("{role}.txt")))?;
        lists.insert(
            role,
            text.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
        );
    }
    Ok(lists)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(ponder::roles::ROLES_DIR)
    }

    #[test]
    fn the_committed_lists_follow_the_rule() -> Result<()> {
        let lists = read_role_lists(&committed())?;
        let mut seen = std::collections::HashSet::new();
        for (role, ids) in &lists {
            for id in ids {
                assert_eq!(role_of(id), Some(*role), "{id} is listed as {role}");
                assert!(seen.insert(id.clone()), "{id} is listed twice");
            }
        }
        // Sizes of the public files (SOURCES.md): every problem has exactly one role.
        assert_eq!(seen.len(), 7473 + 1319 + 2155 + 500 + 40 + 60);
        let report = lists.get(&Role::Report).map_or(0, Vec::len);
        assert!(report >= 300 + 500, "{report}");
        Ok(())
    }

    #[test]
    fn the_committed_lists_are_what_the_files_give_where_they_are_present() -> Result<()> {
        let dir = ponder::roles::datasets_dir();
        if !dir.join("gsm8k_train.jsonl").exists() {
            eprintln!("skipped: no benchmark files in {}", dir.display());
            return Ok(());
        }
        assert_eq!(role_lists(&dir)?, read_role_lists(&committed())?);
        Ok(())
    }
}
