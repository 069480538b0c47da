//! Reading the generator's own hidden state at the end of a candidate, and the cache of those
//! readings.
//!
//! A candidate is laid out as the generator would have seen it had it answered the question
//! alone: the model's chat template with the question as the user's turn and the generation
//! prompt, then the solution's tokens (tokenised on their own, as the generator emitted them
//! after that prompt). The executor's scoring path ([`ScoreOutput::Hidden`], the path the
//! reward-head PRMs use) returns the final-normed hidden state at the solution's last token.
//! A problem's candidates share the prompt, which the engine's prefix index computes once.
//!
//! Readings are cached per generator (a safetensors file named after the weights file and its
//! SHA-256, keyed by a hash of the layout version, the question and the solution), so a refit
//! does not rerun the model.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use indicatif::ProgressBar;
use ponder_engine::batching::{ScoreHandle, ScoreOutput, ScoreRequest};
use ponder_engine::forward::encode_prompt;
use ponder_engine::{EngineError, Runtime, RuntimeOptions};
use ponder_strategies::Turn;

use crate::learned_verifier::data::CandidateGroup;
use crate::learned_verifier::error::{LearnedVerifierError, Result};
use crate::models::{sha256_hex, FittedModel};

/// Bumped when the layout of a reading changes, so old cache entries stop matching.
const LAYOUT_VERSION: &str = "ponder-hidden-reading-v1";
/// Readings submitted before any is awaited (the executor batches them).
const SUBMIT_AT_ONCE: usize = 64;
/// New readings between cache writes (an interrupted extraction keeps most of its work).
const SAVE_EVERY: usize = 512;

/// The cache key of a candidate's reading.
pub fn reading_key(question: &str, solution: &str) -> u64 {
    let text = format!("{LAYOUT_VERSION}\u{0}{question}\u{0}{solution}");
    let hex = sha256_hex(text.as_bytes());
    u64::from_str_radix(hex.get(..16).unwrap_or("0"), 16).unwrap_or(0)
}

/// The generator loaded on an executor, reading hidden states.
#[derive(Debug)]
pub struct HiddenReader {
    runtime: Runtime,
}

impl HiddenReader {
    /// Loads `model` (a GGUF or safetensors directory) and starts its executor, on the device
    /// `$PONDER_DEVICE` names (the CPU by default).
    pub fn start(model: &Path) -> Result<Self> {
        let runtime = Runtime::start(&RuntimeOptions::for_model(model.to_path_buf()))?;
        Ok(Self { runtime })
    }

    /// Floats per reading.
    pub fn hidden_size(&self) -> usize {
        self.runtime.model.model.config().hidden_size
    }

    /// The token ids of `question` and `solution` laid out as a chat; the reading is at the
    /// last one. A layout past the model's context keeps its first `context` tokens.
    pub fn tokens(&self, question: &str, solution: &str) -> Result<Vec<u32>> {
        let model = &self.runtime.model;
        let prompt = model.render_chat(&[Turn::new("user", question)])?;
        let mut tokens = encode_prompt(model, &prompt)?;
        if !solution.is_empty() {
            tokens.extend(model.tokenizer.encode(solution)?);
        }
        tokens.truncate(model.model.config().context_length);
        Ok(tokens)
    }

    fn submit(&self, question: &str, solution: &str) -> Result<ScoreHandle> {
        let tokens = self.tokens(question, solution)?;
        let last = tokens.len().saturating_sub(1);
        Ok(self.runtime.executor.submit_score(ScoreRequest {
            tokens,
            positions: vec![last],
            output: ScoreOutput::Hidden,
            priority: 0,
        })?)
    }

    /// The reading of every `(question, solution)`, in order; `progress` advances by one per
    /// reading.
    pub async fn read(
        &self,
        items: &[(&str, &str)],
        progress: &ProgressBar,
    ) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(SUBMIT_AT_ONCE) {
            let handles = chunk
                .iter()
                .map(|(q, s)| self.submit(q, s))
                .collect::<Result<Vec<_>>>()?;
            for handle in handles {
                let reading = handle.wait().await?.values.into_iter().next();
                let reading = reading.filter(|v| v.len() == self.hidden_size());
                out.push(reading.ok_or(EngineError::SizeMismatch {
                    what: "hidden-state floats at the end of a candidate",
                    expected: self.hidden_size(),
                    got: 0,
                })?);
                progress.inc(1);
            }
        }
        Ok(out)
    }
}

/// Readings already computed for one generator, on disk.
#[derive(Debug)]
pub struct HiddenCache {
    path: PathBuf,
    entries: HashMap<u64, Vec<f32>>,
}

impl HiddenCache {
    /// The cache file of `generator` under `dir`.
    pub fn path_for(dir: &Path, generator: &FittedModel) -> PathBuf {
        let sha = generator.sha256.as_deref().unwrap_or("nosha");
        let stem = format!("{}-{}", generator.name, sha.get(..16).unwrap_or(sha));
        dir.join(format!("{stem}.hidden.safetensors"))
    }

    /// Opens the cache at `path` (empty when the file does not exist yet).
    pub fn open(path: &Path) -> Result<Self> {
        let mut entries = HashMap::new();
        if path.is_file() {
            let corrupt = |reason: String| LearnedVerifierError::Corrupt {
                path: path.to_path_buf(),
                what: "hidden-state cache",
                reason,
            };
            let tensors = candle_core::safetensors::load(path, &Device::Cpu)
                .map_err(|e| corrupt(e.to_string()))?;
            let (Some(keys), Some(hidden)) = (tensors.get("keys"), tensors.get("hidden")) else {
                return Err(corrupt("needs the tensors `keys` and `hidden`".into()));
            };
            let keys = keys.to_vec1::<i64>().map_err(|e| corrupt(e.to_string()))?;
            let hidden = hidden
                .to_vec2::<f32>()
                .map_err(|e| corrupt(e.to_string()))?;
            if keys.len() != hidden.len() {
                return Err(corrupt(format!(
                    "{} keys for {} readings",
                    keys.len(),
                    hidden.len()
                )));
            }
            entries = keys.into_iter().map(|k| k as u64).zip(hidden).collect();
        }
        Ok(Self {
            path: path.to_path_buf(),
            entries,
        })
    }

    /// The cached reading under `key`.
    pub fn get(&self, key: u64) -> Option<&[f32]> {
        self.entries.get(&key).map(Vec::as_slice)
    }

    /// Readings cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn insert(&mut self, key: u64, reading: Vec<f32>) {
        self.entries.insert(key, reading);
    }

    /// Writes the cache file (keys in order, so the file is the same for the same readings).
    pub fn save(&self) -> Result<()> {
        let write = |e: &dyn std::fmt::Display| LearnedVerifierError::write(&self.path, e);
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| LearnedVerifierError::write(dir, e))?;
        }
        let mut keys: Vec<u64> = self.entries.keys().copied().collect();
        keys.sort_unstable();
        let d = self.entries.values().next().map_or(0, Vec::len);
        let mut flat = Vec::with_capacity(keys.len() * d);
        for k in &keys {
            let reading = self.entries.get(k).map(Vec::as_slice).unwrap_or_default();
            if reading.len() != d {
                return Err(write(&"readings of different sizes in one cache"));
            }
            flat.extend_from_slice(reading);
        }
        let n = keys.len();
        let keys: Vec<i64> = keys.into_iter().map(|k| k as i64).collect();
        let tensors = HashMap::from([
            (
                "keys".to_string(),
                Tensor::from_vec(keys, n, &Device::Cpu).map_err(|e| write(&e))?,
            ),
            (
                "hidden".to_string(),
                Tensor::from_vec(flat, (n, d), &Device::Cpu).map_err(|e| write(&e))?,
            ),
        ]);
        candle_core::safetensors::save(&tensors, &self.path).map_err(|e| write(&e))
    }
}

/// Hidden-state readings of candidate sets for one generator: from the cache, the rest read
/// by the generator (loaded only when something is missing) and added to the cache.
#[derive(Debug)]
pub struct HiddenFeatures {
    model: PathBuf,
    generator: FittedModel,
    cache: HiddenCache,
    reader: Option<HiddenReader>,
}

impl HiddenFeatures {
    /// Readings of the generator at `model`, cached under `cache_dir`.
    pub fn open(model: &Path, cache_dir: &Path) -> Result<Self> {
        let generator =
            FittedModel::of_file(model).map_err(|e| LearnedVerifierError::read(model, e))?;
        let cache = HiddenCache::open(&HiddenCache::path_for(cache_dir, &generator))?;
        Ok(Self {
            model: model.to_path_buf(),
            generator,
            cache,
            reader: None,
        })
    }

    /// The generator read.
    pub fn generator(&self) -> &FittedModel {
        &self.generator
    }

    /// The cache.
    pub fn cache(&self) -> &HiddenCache {
        &self.cache
    }

    /// The reading of every candidate of `groups`, group by group; `progress` counts the
    /// candidates (its length is set here).
    pub async fn of_groups(
        &mut self,
        groups: &[CandidateGroup],
        progress: &ProgressBar,
    ) -> Result<Vec<Vec<Vec<f32>>>> {
        let items: Vec<(u64, &str, &str)> = groups
            .iter()
            .flat_map(|g| {
                g.candidates.iter().map(|c| {
                    (
                        reading_key(&g.question, &c.text),
                        g.question.as_str(),
                        c.text.as_str(),
                    )
                })
            })
            .collect();
        progress.set_length(items.len() as u64);
        let mut seen = std::collections::HashSet::new();
        let missing: Vec<(u64, &str, &str)> = items
            .iter()
            .filter(|m| self.cache.get(m.0).is_none() && seen.insert(m.0))
            .copied()
            .collect();
        progress.inc((items.len() - missing.len()) as u64);
        if !missing.is_empty() {
            if self.reader.is_none() {
                self.reader = Some(HiddenReader::start(&self.model)?);
            }
            if let Some(reader) = &self.reader {
                for chunk in missing.chunks(SAVE_EVERY) {
                    let asked: Vec<(&str, &str)> = chunk.iter().map(|m| (m.1, m.2)).collect();
                    let readings = reader.read(&asked, progress).await?;
                    for (m, reading) in chunk.iter().zip(readings) {
                        self.cache.insert(m.0, reading);
                    }
                    self.cache.save()?;
                }
            }
        }
        let mut out = Vec::with_capacity(groups.len());
        let mut keys = items.iter().map(|m| m.0);
        for g in groups {
            let mut readings = Vec::with_capacity(g.candidates.len());
            for key in keys.by_ref().take(g.candidates.len()) {
                let reading = self.cache.get(key).ok_or_else(|| {
                    LearnedVerifierError::Training(format!(
                        "the reading of a candidate of problem {} is missing",
                        g.problem_id
                    ))
                })?;
                readings.push(reading.to_vec());
            }
            out.push(readings);
        }
        Ok(out)
    }
}
