//! Loading a model by path: a `.gguf` file or a safetensors checkpoint directory, with its
//! tokenizer and chat template, onto a device. Files are always read on the CPU; a model for a
//! CUDA device is then uploaded (GGUF matrices dequantized first) and its host copy dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::Device;
use ponder_strategies::ChatTemplateKwargs;

use super::chat_template::ChatTemplate;
use super::device::{ComputeDevice, WeightDtype};
use super::error::{EngineError, Result};
use super::gguf::GgufFile;
use super::model::Model;
use super::safetensors::SafetensorsModel;
use super::tokenizer::TextTokenizer;
use ponder_strategies::Turn;

/// Tokens that end an assistant turn in the chat formats we know, besides the model's eos id.
const END_OF_TURN_TOKENS: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
];

/// How to load a model: its files, device and weight kernels (not a dataset's `DatasetOptions` in
/// ponder-evals, nor a load test's `LoadTestOptions`).
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// A `.gguf` file or a directory with `config.json` and `*.safetensors`.
    pub model: PathBuf,
    /// A `tokenizer.json` to use instead of the one the model carries.
    pub tokenizer: Option<PathBuf>,
    /// Where to run.
    pub device: ComputeDevice,
    /// Which implementation multiplies quantized weights (on CPU).
    pub matmul: MatmulImpl,
    /// How matrices are stored on a CUDA device (ignored on CPU).
    pub weight_dtype: WeightDtype,
}

/// Who multiplies GGUF Q4_1 / Q8_0 weights on CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MatmulImpl {
    /// Our batch-invariant SIMD kernel (the default; needed for batch-independent sampling).
    #[default]
    Ponder,
    /// candle's q-matmul everywhere (for A/B comparisons against candle-transformers).
    Candle,
}

impl LoadOptions {
    /// CPU, the model's own tokenizer.
    pub fn cpu(model: impl Into<PathBuf>) -> Self {
        Self::on(model, ComputeDevice::Cpu)
    }

    /// On `device`, the model's own tokenizer, f32 matrices.
    pub fn on(model: impl Into<PathBuf>, device: ComputeDevice) -> Self {
        Self {
            model: model.into(),
            tokenizer: None,
            device,
            matmul: MatmulImpl::default(),
            weight_dtype: WeightDtype::default(),
        }
    }

    /// The matmul implementation to read GGUF matrices with: a CUDA model uploads candle's
    /// (dequantizable) tensors, not our CPU kernel's packed ones.
    fn host_matmul(&self) -> MatmulImpl {
        if self.device.is_cuda() {
            MatmulImpl::Candle
        } else {
            self.matmul
        }
    }
}

/// A model ready to run: weights, tokenizer, chat template.
#[derive(Debug)]
pub struct LoadedModel {
    /// The forward pass (shared with schedulers and benchmarks).
    pub model: Arc<Model>,
    /// Text ↔ ids.
    pub tokenizer: TextTokenizer,
    /// The model's chat template, if it has one.
    pub chat_template: Option<ChatTemplate>,
}

impl LoadedModel {
    /// Loads weights, tokenizer and template.
    pub fn load(opts: &LoadOptions) -> Result<Self> {
        let path = &opts.model;
        if path.is_dir() {
            Self::load_safetensors(path, opts)
        } else {
            Self::load_gguf(path, opts)
        }
    }

    fn load_gguf(path: &Path, opts: &LoadOptions) -> Result<Self> {
        let gguf = GgufFile::open(path)?;
        let config = gguf.config()?;
        let mut tokenizer = match &opts.tokenizer {
            Some(t) => TextTokenizer::from_file(t, &[])?,
            None => TextTokenizer::from_gguf(&gguf)?,
        };
        for t in END_OF_TURN_TOKENS {
            tokenizer.add_eos(t);
        }
        let token_text = |id: Option<u32>| id.and_then(|i| tokenizer.token(i)).unwrap_or_default();
        let chat_template = match gguf.metadata_str("tokenizer.chat_template") {
            Some(src) => Some(ChatTemplate::new(
                src,
                &token_text(tokenizer.bos()),
                &token_text(tokenizer.eos().first().copied()),
            )?),
            None => None,
        };
        opts.device.check_built()?;
        let weights = gguf.weights(&config, &Device::Cpu, opts.host_matmul())?;
        let model = Arc::new(Model::on_device(
            config,
            weights,
            opts.device,
            opts.weight_dtype,
        )?);
        Ok(Self {
            model,
            tokenizer,
            chat_template,
        })
    }

    fn load_safetensors(dir: &Path, opts: &LoadOptions) -> Result<Self> {
        Ok(Self::load_safetensors_with(dir, opts, |_| false)?.0)
    }

    /// Loads a safetensors checkpoint directory like [`LoadedModel::load`], and also returns the
    /// tensors the decoder does not use whose names `keep` accepts, as f32 on the CPU (a
    /// reward model's score head, applied to read-out rows, which are host tensors on any device). A GGUF file is refused: heads live in checkpoints.
    pub fn load_with_extras(
        opts: &LoadOptions,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(Self, std::collections::HashMap<String, candle_core::Tensor>)> {
        if !opts.model.is_dir() {
            return Err(EngineError::ModelNotFound {
                path: opts.model.clone(),
                hint: "a reward model is a safetensors directory with config.json, *.safetensors and tokenizer.json".into(),
            });
        }
        Self::load_safetensors_with(&opts.model, opts, keep)
    }

    fn load_safetensors_with(
        dir: &Path,
        opts: &LoadOptions,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(Self, std::collections::HashMap<String, candle_core::Tensor>)> {
        let st = SafetensorsModel::open(dir)?;
        let tokenizer_path = opts
            .tokenizer
            .clone()
            .unwrap_or_else(|| dir.join("tokenizer.json"));
        let tokenizer = TextTokenizer::from_file(&tokenizer_path, END_OF_TURN_TOKENS)?;
        let chat_template = read_hf_chat_template(&dir.join("tokenizer_config.json"))?;
        opts.device.check_built()?;
        let (weights, extras) = st.weights_and_extras(&Device::Cpu, keep)?;
        let model = Arc::new(Model::on_device(
            st.config().clone(),
            weights,
            opts.device,
            opts.weight_dtype,
        )?);
        Ok((
            Self {
                model,
                tokenizer,
                chat_template,
            },
            extras,
        ))
    }

    /// Renders `messages` with the model's template, ending where the assistant speaks. Models
    /// without a template get the messages' contents joined by blank lines.
    pub fn render_chat(&self, messages: &[Turn]) -> Result<String> {
        self.render_chat_with(messages, &ChatTemplateKwargs::default())
    }

    /// [`LoadedModel::render_chat`] with a request's template variables (without a template
    /// they have nothing to reach).
    pub fn render_chat_with(&self, messages: &[Turn], vars: &ChatTemplateKwargs) -> Result<String> {
        match &self.chat_template {
            Some(t) => t.render_with(messages, true, vars),
            None => Ok(messages
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n\n")),
        }
    }
}

fn read_hf_chat_template(path: &Path) -> Result<Option<ChatTemplate>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let cfg: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| EngineError::CorruptModel {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    let token = |k: &str| match &cfg[k] {
        serde_json::Value::String(s) => s.clone(),
        v => v["content"].as_str().unwrap_or_default().to_string(),
    };
    match cfg["chat_template"].as_str() {
        Some(src) => Ok(Some(ChatTemplate::new(
            src,
            &token("bos_token"),
            &token("eos_token"),
        )?)),
        None => Ok(None),
    }
}

/// Loads only the forward pass of a `.gguf` file or safetensors directory (no tokenizer needed).
pub fn load_model(path: &Path, device: &Device, matmul: MatmulImpl) -> Result<Model> {
    if path.is_dir() {
        let st = SafetensorsModel::open(path)?;
        let weights = st.weights(device)?;
        Model::new(st.config().clone(), weights, device.clone())
    } else {
        let gguf = GgufFile::open(path)?;
        let config = gguf.config()?;
        let weights = gguf.weights(&config, device, matmul)?;
        Model::new(config, weights, device.clone())
    }
}
