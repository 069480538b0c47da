//! Reading a GGUF file: header, hyper-parameters, quantized tensors and the tokenizer metadata.
//!
//! Follows llama.cpp's metadata keys (`{arch}.block_count`, …); tensor names and the
//! architecture's defaults come from its description in `models/` (`general.architecture` is
//! looked up in the registry). Owns every check that turns a bad file into a clear
//! [`EngineError`]: missing file, corrupt or truncated data, unsupported architecture,
//! unsupported tensor type. It does not run the model.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::Device;

use super::config::ModelConfig;
use super::error::{EngineError, Result};
use super::loader::MatmulImpl;
use super::models::Architecture;
use super::weights::{read_weights, ModelWeights, Projection, TensorSource};
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
    architecture: &'static Architecture,
    /// `general.architecture`: the prefix of the hyper-parameter keys.
    arch_key: String,
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
                arch: arch_name.clone(),
                path: path.to_path_buf(),
                supported: Architecture::supported(),
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
            arch_key: arch_name,
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

    fn arch_key(&self) -> &str {
        &self.arch_key
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
        let embed = format!("{}.weight", self.architecture.gguf.names.embed);
        let vocab_size = self
            .content
            .tensor_infos
            .get(&embed)
            .ok_or_else(|| self.missing(&format!("tensor {embed}")))?
            .shape
            .dims()
            .first()
            .copied()
            .ok_or_else(|| EngineError::CorruptModel {
                path: self.path.clone(),
                reason: format!("tensor {embed} has no dimensions"),
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
                .unwrap_or(self.architecture.gguf.rope_theta),
            rope_style: self.architecture.gguf.rope_style,
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

    /// Reads every tensor of the decoder onto `device`; without an `output` tensor the head is
    /// the (quantized) embedding table.
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
        let names = &config.architecture.gguf.names;
        let head = if self
            .content
            .tensor_infos
            .contains_key(&format!("{}.weight", names.lm_head))
        {
            names.lm_head
        } else {
            names.embed // tied embeddings
        };
        let mut reader = GgufTensors {
            file: self,
            reader: BufReader::new(file),
            device,
            matmul,
        };
        read_weights(
            &mut reader,
            config.architecture,
            names,
            config.num_layers,
            Some(head),
        )
    }
}

/// The tensors of an open GGUF file, read one at a time from its data section.
struct GgufTensors<'a> {
    file: &'a GgufFile,
    reader: BufReader<File>,
    device: &'a Device,
    matmul: MatmulImpl,
}

impl GgufTensors<'_> {
    fn tensor(&mut self, name: &str) -> Result<QTensor> {
        let file = self.file;
        if !file.content.tensor_infos.contains_key(name) {
            return Err(file.missing(&format!("tensor {name}")));
        }
        file.content
            .tensor(&mut self.reader, name, self.device)
            .map_err(|e| EngineError::CorruptModel {
                path: file.path.clone(),
                reason: format!("tensor {name}: {e} (is the file truncated?)"),
            })
    }
}

impl TensorSource for GgufTensors<'_> {
    fn dense(&mut self, name: &str) -> Result<candle_core::Tensor> {
        Ok(self.tensor(name)?.dequantize(self.device)?)
    }

    fn projection(&mut self, name: &str) -> Result<Projection> {
        projection(self.tensor(name)?, self.matmul)
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
