//! Loading a Hugging Face checkpoint directory: `config.json` plus one or more `*.safetensors`.
//!
//! Weights may be f32, f16 or bf16 on disk; they are converted to f32 for the CPU forward pass.
//! Tensor names come from the architecture's description in `models/` (`model_type` is looked
//! up in the registry); a reward model
//! (`Qwen2ForProcessRewardModel`) loads without an `lm_head` and hands its extra tensors (the
//! score head) to the caller. This module reads
//! files only; it never fetches from a hub.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use super::config::{ModelConfig, RopeStyle};
use super::error::{EngineError, Result};
use super::models::Architecture;
use super::weights::{read_weights, ModelWeights, Projection, TensorSource};

/// The subset of `config.json` the engine reads.
#[derive(Debug, Deserialize)]
struct HfConfig {
    model_type: String,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    rope_theta: Option<f64>,
    rms_norm_eps: Option<f64>,
    max_position_embeddings: Option<usize>,
    #[serde(default)]
    tie_word_embeddings: bool,
    /// transformers class names, e.g. `Qwen2ForProcessRewardModel`.
    #[serde(default)]
    architectures: Vec<String>,
}

/// Whether a transformers class is a scoring model whose checkpoint has no `lm_head` (a process
/// or outcome reward model, a classifier): its decoder loads without one.
fn is_scoring_class(name: &str) -> bool {
    [
        "RewardModel",
        "ForSequenceClassification",
        "ForTokenClassification",
    ]
    .iter()
    .any(|suffix| name.ends_with(suffix))
}

/// A checkpoint directory, its config parsed, tensors not yet read.
#[derive(Debug)]
pub struct SafetensorsModel {
    dir: PathBuf,
    config: ModelConfig,
    tie_word_embeddings: bool,
    scoring_model: bool,
}

impl SafetensorsModel {
    /// Reads and validates `dir/config.json`.
    pub fn open(dir: &Path) -> Result<Self> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => EngineError::ModelNotFound {
                path: config_path.clone(),
                hint: "a safetensors model is a directory with config.json and *.safetensors"
                    .into(),
            },
            _ => EngineError::Io {
                path: config_path.clone(),
                source: e,
            },
        })?;
        let hf: HfConfig = serde_json::from_str(&text).map_err(|e| EngineError::CorruptModel {
            path: config_path.clone(),
            reason: e.to_string(),
        })?;
        let architecture = Architecture::from_name(&hf.model_type).ok_or_else(|| {
            EngineError::UnsupportedArchitecture {
                arch: hf.model_type.clone(),
                path: config_path.clone(),
                supported: Architecture::supported(),
            }
        })?;
        let num_kv_heads = hf.num_key_value_heads.unwrap_or(hf.num_attention_heads);
        let config = ModelConfig {
            architecture,
            vocab_size: hf.vocab_size,
            hidden_size: hf.hidden_size,
            intermediate_size: hf.intermediate_size,
            num_layers: hf.num_hidden_layers,
            num_heads: hf.num_attention_heads,
            num_kv_heads,
            head_dim: hf
                .head_dim
                .unwrap_or(hf.hidden_size / hf.num_attention_heads.max(1)),
            rope_theta: hf.rope_theta.unwrap_or(10_000.0),
            rope_style: RopeStyle::Halves,
            rms_norm_eps: hf.rms_norm_eps.unwrap_or(1e-6),
            context_length: hf.max_position_embeddings.unwrap_or(4096),
        };
        config
            .validate()
            .map_err(|reason| EngineError::CorruptModel {
                path: config_path,
                reason,
            })?;
        let scoring_model = hf.architectures.iter().any(|a| is_scoring_class(a));
        Ok(Self {
            dir: dir.to_path_buf(),
            config,
            tie_word_embeddings: hf.tie_word_embeddings,
            scoring_model,
        })
    }

    /// The parsed hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn read_tensors(&self, device: &Device) -> Result<HashMap<String, Tensor>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map_err(|source| EngineError::Io {
                path: self.dir.clone(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(EngineError::ModelNotFound {
                path: self.dir.clone(),
                hint: "no *.safetensors file in the directory".into(),
            });
        }
        let mut all = HashMap::new();
        for file in files {
            let tensors = candle_core::safetensors::load(&file, device).map_err(|e| {
                EngineError::CorruptModel {
                    path: file.clone(),
                    reason: e.to_string(),
                }
            })?;
            all.extend(tensors);
        }
        Ok(all)
    }

    /// Reads every tensor onto `device` as f32.
    pub(crate) fn weights(&self, device: &Device) -> Result<ModelWeights> {
        Ok(self.weights_and_extras(device, |_| false)?.0)
    }

    /// Reads the decoder's tensors onto `device` as f32, and also returns (as f32) the tensors
    /// the decoder does not use whose names `keep` accepts (a reward model's `score.*` head).
    ///
    /// A checkpoint whose `architectures` names a reward model or classifier may lack
    /// `lm_head.weight`; the model then has no language-model head.
    pub(crate) fn weights_and_extras(
        &self,
        device: &Device,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(ModelWeights, HashMap<String, Tensor>)> {
        let mut tensors = self.read_tensors(device)?;
        let weights = self.decoder_weights(&mut tensors)?;
        let mut extras = HashMap::new();
        for (name, t) in tensors.into_iter().filter(|(name, _)| keep(name)) {
            let t = self.to_f32(&name, t)?;
            extras.insert(name, t);
        }
        Ok((weights, extras))
    }

    fn to_f32(&self, name: &str, t: Tensor) -> Result<Tensor> {
        match t.dtype() {
            DType::F32 => Ok(t),
            DType::F16 | DType::BF16 => Ok(t.to_dtype(DType::F32)?),
            other => Err(EngineError::UnsupportedQuant {
                path: self.dir.clone(),
                detail: format!("tensor {name} has dtype {other:?}; supported: f32, f16, bf16"),
            }),
        }
    }

    fn decoder_weights(&self, tensors: &mut HashMap<String, Tensor>) -> Result<ModelWeights> {
        let arch = self.config.architecture;
        let names = &arch.hf;
        let own_head = format!("{}.weight", names.lm_head);
        let head = if self.tie_word_embeddings {
            Some(names.embed)
        } else if self.scoring_model && !tensors.contains_key(&own_head) {
            None
        } else {
            Some(names.lm_head)
        };
        let mut source = CheckpointTensors {
            model: self,
            tensors,
            read: HashMap::new(),
        };
        let weights = read_weights(&mut source, arch, names, self.config.num_layers, head)?;
        for name in source.read.keys() {
            tensors.remove(name);
        }
        Ok(weights)
    }
}

/// A checkpoint's tensors, read by name. Remembers what it read (as f32), so a tensor read
/// twice (a tied head) is converted once and shared, and the rest can be handed out as extras.
struct CheckpointTensors<'a> {
    model: &'a SafetensorsModel,
    tensors: &'a HashMap<String, Tensor>,
    read: HashMap<String, Tensor>,
}

impl TensorSource for CheckpointTensors<'_> {
    fn dense(&mut self, name: &str) -> Result<Tensor> {
        if let Some(t) = self.read.get(name) {
            return Ok(t.clone());
        }
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| EngineError::MissingField {
                path: self.model.dir.clone(),
                what: format!("tensor {name}"),
            })?;
        let t = self.model.to_f32(name, t.clone())?;
        self.read.insert(name.to_string(), t.clone());
        Ok(t)
    }

    fn projection(&mut self, name: &str) -> Result<Projection> {
        Ok(Projection::Candle(QMatMul::Tensor(self.dense(name)?)))
    }
}
