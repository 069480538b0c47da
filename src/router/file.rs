//! The router file (`router.json`, default `data/router/router.json`): the trained classifier,
//! the allocator's calibration table and knobs, and the held-out evaluation it was shipped
//! with. Versioned; loading checks the version and every shape and fails naming the file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::allocator::Allocator;
use super::classifier::Classifier;
use super::error::{Result, RouterError};
use super::train::Evaluation;

/// The file format version this build reads and writes.
pub const FORMAT: u32 = 1;

/// Where the shipped router file lives, relative to the checkout.
pub const DEFAULT_ROUTER: &str = "data/router/router.json";

/// `$PONDER_ROUTER`, else `./data/router/router.json` if present, else the checkout's.
pub fn default_router_path() -> PathBuf {
    crate::models::shipped_path("PONDER_ROUTER", DEFAULT_ROUTER)
}

/// Everything the router loads besides the encoder weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterFile {
    /// [`FORMAT`].
    pub format: u32,
    /// The sentence encoder the classifier was trained on.
    pub embedder: String,
    /// Its vector length.
    pub dim: usize,
    /// Category and difficulty heads.
    pub classifier: Classifier,
    /// Calibration table and knobs.
    pub allocator: Allocator,
    /// Held-out evaluation from training.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<Evaluation>,
}

impl RouterFile {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Self> {
        const WHAT: &str = "router file";
        let text = std::fs::read_to_string(path).map_err(|e| RouterError::read(path, e))?;
        let file: RouterFile =
            serde_json::from_str(&text).map_err(|e| RouterError::corrupt(path, WHAT, e))?;
        if file.format != FORMAT {
            return Err(RouterError::corrupt(
                path,
                WHAT,
                format!("format {} (this build reads {FORMAT})", file.format),
            ));
        }
        for (name, head) in [
            ("category", &file.classifier.category),
            ("difficulty", &file.classifier.difficulty),
        ] {
            head.validate(file.dim)
                .map_err(|e| RouterError::corrupt(path, WHAT, format!("{name} head: {e}")))?;
        }
        Ok(file)
    }

    /// Writes it as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<()> {
        save_pretty(self, path)
    }
}

/// Writes `value` to `path` as pretty JSON and a final newline (the router's fitted files).
pub(crate) fn save_pretty(value: &impl Serialize, path: &Path) -> Result<()> {
    let write = |e: &dyn std::fmt::Display| RouterError::Write {
        path: path.into(),
        reason: e.to_string(),
    };
    let text = serde_json::to_string_pretty(value).map_err(|e| write(&e))?;
    std::fs::write(path, text + "\n").map_err(|e| write(&e))
}
