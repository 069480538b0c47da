//! The vectors of a worked-example pool's questions: embedded ([`Embedder::embed_many`]) and
//! cached on disk keyed by the pool file's and the encoder weights' SHA-256, so each file is
//! embedded once per machine. It must not choose examples (the parent module does).

use std::path::{Path, PathBuf};

use super::Shot;
use crate::router::embed::Embedder;
use crate::router::error::Result;

/// Cached pool vectors: `count` rows of `dim` little-endian f32s, or `None` when the file is
/// missing or of another shape (then the pool is embedded again).
fn read_vectors(path: &Path, count: usize, dim: usize) -> Option<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() != count * dim * 4 || dim == 0 {
        return None;
    }
    let floats: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    Some(floats.chunks(dim).map(<[f32]>::to_vec).collect())
}

/// Writes pool vectors for [`read_vectors`] (through a temporary file, so a reader never
/// sees half a cache).
fn write_vectors(path: &Path, vectors: &[Vec<f32>]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes: Vec<u8> = vectors
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    // A name of this process's own: two servers starting on one cold cache both embed, and
    // each renames a whole file into place.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

/// Where the vectors of the pool file with SHA-256 `file_sha` embedded by the encoder whose
/// weights have SHA-256 `embedder_sha` are cached.
pub(super) fn vector_cache(cache_dir: &Path, file_sha: &str, embedder_sha: &str) -> PathBuf {
    cache_dir.join(format!(
        "exemplars-{}-{}.f32",
        file_sha.get(..16).unwrap_or(file_sha),
        embedder_sha.get(..16).unwrap_or(embedder_sha)
    ))
}

/// The vectors of `pool`'s questions: read from `cache`, else embedded (and cached).
pub(super) fn cached_vectors(
    cache: &Path,
    pool: &[Shot],
    embedder: &Embedder,
) -> Result<Vec<Vec<f32>>> {
    if let Some(v) = read_vectors(cache, pool.len(), embedder.dim()) {
        return Ok(v);
    }
    tracing::info!(
        examples = pool.len(),
        cache = %cache.display(),
        "embedding the worked examples once (minutes on a small CPU for thousands; cached after)"
    );
    let v = embedder.embed_many(&pool.iter().map(|s| s.problem.as_str()).collect::<Vec<_>>())?;
    // A cache that cannot be written only costs the next start the same time.
    if let Err(e) = write_vectors(cache, &v) {
        tracing::warn!(path = %cache.display(), error = %e, "worked-example vectors not cached");
    }
    Ok(v)
}
