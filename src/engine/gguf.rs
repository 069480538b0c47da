//! Reading a GGUF file: header, hyper-parameters, quantized tensors and the tokenizer metadata.
//!
//! Follows llama.cpp's key names (`{arch}.block_count`, `blk.N.attn_q.weight`, …). Owns every
//! check that turns a bad file into a clear [`EngineError`]: missing file, corrupt or truncated
//! data, unsupported architecture, unsupported tensor type. It does not run the model.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::Device;

use super::config::{Architecture, ModelConfig, RopeStyle};
use super::error::{EngineError, Result};
use super::loader::MatmulImpl;
use super::weights::{LayerWeights, Linear, ModelWeights, Projection};
use ponder_kernels::{QuantFormat, QuantMatrix};

/// Tensor storage types the engine computes with.
const SUPPORTED_TYPES: &[GgmlDType] = &[
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// An opened GGUF file: its parsed header, ready to yield config, weights and tokenizer data.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    content: Content,
    architecture: Architecture,
}

impl GgufFile {
    /// Opens and validates the header of a GGUF file (reads no tensor data).
    pub fn open(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(EngineError::ModelNotFound {
                path: path.to_path_buf(),
                hint: "pass --model PATH, or run `bash scripts/setup-models.sh` to install the default model".into(),
            });
        }
        let file = File::open(path).map_err(|source| EngineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut reader = BufReader::new(file);
        // candle's reader bounds every length by the file size, but divides by the file's
        // `general.alignment` unchecked: a crafted 0 panics inside it. That panic is caught here
        // and reported as a corrupt file (the one justified `catch_unwind` on a file path).
        let read =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Content::read(&mut reader)));
        let read = read.unwrap_or_else(|_| {
            Err(candle_core::Error::Msg(
                "malformed header (general.alignment must be positive)".into(),
            ))
        });
        let content = read.map_err(|e| {
            let reason = e.to_string();
            if reason.contains("unknown dtype") {
                EngineError::UnsupportedQuant {
                    path: path.to_path_buf(),
                    detail: reason,
                }
            } else {
                EngineError::CorruptModel {
                    path: path.to_path_buf(),
                    reason: format!("not a valid GGUF file: {reason}"),
                }
            }
        })?;
        let arch_name = match content.metadata.get("general.architecture") {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(EngineError::MissingField {
                    path: path.to_path_buf(),
                    what: "general.architecture".into(),
                })
            }
        };
        let architecture = Architecture::from_name(&arch_name).ok_or_else(|| {
            EngineError::UnsupportedArchitecture {
                arch: arch_name,
                path: path.to_path_buf(),
            }
        })?;
        let mut names: Vec<&String> = content.tensor_infos.keys().collect();
        names.sort();
        for name in names {
            let info = &content.tensor_infos[name];
            if !SUPPORTED_TYPES.contains(&info.ggml_dtype) {
                return Err(EngineError::UnsupportedQuant {
                    path: path.to_path_buf(),
                    detail: format!(
                        "tensor {name} has type {:?}; supported: {SUPPORTED_TYPES:?}",
                        info.ggml_dtype
                    ),
                });
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            content,
            architecture,
        })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw metadata table.
    pub fn metadata(&self) -> &HashMap<String, Value> {
        &self.content.metadata
    }

    /// A metadata string, if present.
    pub fn metadata_str(&self, key: &str) -> Option<&str> {
        match self.content.metadata.get(key) {
            Some(Value::String(s)) => Some(s.as_str()),
            _ => None,
        }
    }

    fn missing(&self, what: &str) -> EngineError {
        EngineError::MissingField {
            path: self.path.clone(),
            what: what.to_string(),
        }
    }

    fn arch_key(&self) -> &'static str {
        match self.architecture {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
        }
    }

    fn usize_key(&self, suffix: &str) -> Result<Option<usize>> {
        let key = format!("{}.{suffix}", self.arch_key());
        match self.content.metadata.get(&key) {
            None => Ok(None),
            Some(v) => v
                .to_u64()
                .or_else(|_| v.to_u32().map(u64::from))
                .map(|n| Some(n as usize))
                .map_err(|_| EngineError::CorruptModel {
                    path: self.path.clone(),
                    reason: format!("{key} is not an integer"),
                }),
        }
    }

    fn f64_key(&self, suffix: &str) -> Option<f64> {
        let key = format!("{}.{suffix}", self.arch_key());
        self.content
            .metadata
            .get(&key)
            .and_then(|v| v.to_f32().map(f64::from).or_else(|_| v.to_f64()).ok())
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> Result<ModelConfig> {
        let required = |suffix: &str| -> Result<usize> {
            self.usize_key(suffix)?
                .ok_or_else(|| self.missing(&format!("{}.{suffix}", self.arch_key())))
        };
        let hidden_size = required("embedding_length")?;
        let num_heads = required("attention.head_count")?;
        let num_kv_heads = self
            .usize_key("attention.head_count_kv")?
            .unwrap_or(num_heads);
        let vocab_size = self
            .content
            .tensor_infos
            .get("token_embd.weight")
            .ok_or_else(|| self.missing("tensor token_embd.weight"))?
            .shape
            .dims()
            .first()
            .copied()
            .ok_or_else(|| EngineError::CorruptModel {
                path: self.path.clone(),
                reason: "tensor token_embd.weight has no dimensions".into(),
            })?;
        let head_dim = self
            .usize_key("attention.key_length")?
            .unwrap_or(hidden_size / num_heads.max(1));
        let config = ModelConfig {
            architecture: self.architecture,
            vocab_size,
            hidden_size,
            intermediate_size: required("feed_forward_length")?,
            num_layers: required("block_count")?,
            num_heads,
            num_kv_heads,
            head_dim,
            rope_theta: self
                .f64_key("rope.freq_base")
                .unwrap_or(match self.architecture {
                    Architecture::Llama => 10_000.0,
                    Architecture::Qwen2 => 1_000_000.0,
                }),
            // llama.cpp permutes llama q/k rows for interleaved RoPE; qwen2 is stored as-is.
            rope_style: match self.architecture {
                Architecture::Llama => RopeStyle::Interleaved,
                Architecture::Qwen2 => RopeStyle::Halves,
            },
            rms_norm_eps: self
                .f64_key("attention.layer_norm_rms_epsilon")
                .unwrap_or(1e-5),
            context_length: self.usize_key("context_length")?.unwrap_or(4096),
        };
        config
            .validate()
            .map_err(|reason| EngineError::CorruptModel {
                path: self.path.clone(),
                reason,
            })?;
        Ok(config)
    }

    /// Reads every tensor of the decoder onto `device`.
    pub(crate) fn weights(
        &self,
        config: &ModelConfig,
        device: &Device,
        matmul: MatmulImpl,
    ) -> Result<ModelWeights> {
        let file = File::open(&self.path).map_err(|source| EngineError::Io {
            path: self.path.clone(),
            source,
        })?;
        let mut reader = BufReader::new(file);
        let mut tensor = |name: &str| -> Result<QTensor> {
            if !self.content.tensor_infos.contains_key(name) {
                return Err(self.missing(&format!("tensor {name}")));
            }
            self.content
                .tensor(&mut reader, name, device)
                .map_err(|e| EngineError::CorruptModel {
                    path: self.path.clone(),
                    reason: format!("tensor {name}: {e} (is the file truncated?)"),
                })
        };
        let embed_q = tensor("token_embd.weight")?;
        let embed = embed_q.dequantize(device)?;
        let final_norm = tensor("output_norm.weight")?.dequantize(device)?;
        let lm_head = if self.content.tensor_infos.contains_key("output.weight") {
            tensor("output.weight")?
        } else {
            embed_q // tied embeddings
        };
        let mut layers = Vec::with_capacity(config.num_layers);
        for i in 0..config.num_layers {
            let mut linear = |name: &str, with_bias: bool| -> Result<Linear> {
                let weight = projection(tensor(&format!("blk.{i}.{name}.weight"))?, matmul)?;
                let bias = if with_bias {
                    Some(tensor(&format!("blk.{i}.{name}.bias"))?.dequantize(device)?)
                } else {
                    None
                };
                Ok(Linear::new(weight, bias))
            };
            let qkv_bias = config.architecture.has_qkv_bias();
            let q_proj = linear("attn_q", qkv_bias)?;
            let k_proj = linear("attn_k", qkv_bias)?;
            let v_proj = linear("attn_v", qkv_bias)?;
            let o_proj = linear("attn_output", false)?;
            let gate_proj = linear("ffn_gate", false)?;
            let up_proj = linear("ffn_up", false)?;
            let down_proj = linear("ffn_down", false)?;
            layers.push(
                LayerWeights {
                    attn_norm: tensor(&format!("blk.{i}.attn_norm.weight"))?.dequantize(device)?,
                    ffn_norm: tensor(&format!("blk.{i}.ffn_norm.weight"))?.dequantize(device)?,
                    q_proj,
                    k_proj,
                    v_proj,
                    o_proj,
                    gate_proj,
                    up_proj,
                    down_proj,
                    qkv: None,
                    gate_up: None,
                }
                .with_stacks(),
            );
        }
        Ok(ModelWeights {
            embed,
            layers,
            final_norm,
            lm_head: Some(Linear::new(projection(lm_head, matmul)?, None)),
        })
    }
}

/// Our SIMD kernel for CPU Q4_1 / Q8_0 matrices, candle's q-matmul for everything else.
fn projection(q: QTensor, matmul: MatmulImpl) -> Result<Projection> {
    let format = match (matmul, q.dtype()) {
        (MatmulImpl::Ponder, GgmlDType::Q4_1) => Some(QuantFormat::Q4_1),
        (MatmulImpl::Ponder, GgmlDType::Q8_0) => Some(QuantFormat::Q8_0),
        _ => None,
    };
    match (format, q.device().is_cpu(), q.shape().dims()) {
        (Some(format), true, &[rows, cols]) => {
            let bytes = q.data()?.into_owned();
            Ok(Projection::Kernel(QuantMatrix::from_ggml_bytes(
                format, rows, cols, bytes,
            )?))
        }
        _ => Ok(Projection::Candle(QMatMul::from_qtensor(q)?)),
    }
}
