//! The model runtime: loading (GGUF, safetensors), tokenizer and chat template, our own batched
//! forward pass over an external KV store, sampling, and the single-sequence generation loop.
//!
//! The forward pass runs on the CPU (the default, `cpu.rs`) or, in a build with feature `cuda`,
//! on a CUDA device (`cuda/`: weights, activations and KV blocks in device memory, our attention
//! and KV kernels, cuBLAS projections), chosen when the model loads; the bookkeeping,
//! scheduling and sampling are shared. Architectures are data (`models/`, one file each).
//!
//! It knows nothing of HTTP or strategies; the scheduler drives the forward pass for many
//! requests at once through the paged KV store — sampling for generation, and reading chosen
//! positions for scoring (process reward models).

mod attention;
mod chat_template;
mod config;
mod cpu;
mod device;
mod error;
mod executor;
mod generate;
mod gguf;
mod kv;
mod loader;
mod model;
mod models;
mod paged_kv;
mod rope;
mod safetensors;
mod sampling;
mod scheduler;
mod tokenizer;
mod weights;

/// The CUDA backend, or its stub in a build without feature `cuda` (chosen in `device.rs`).
use device::cuda;

pub use attention::AttentionShape;
pub use chat_template::{ChatMessage, ChatTemplate};
pub use config::{ModelConfig, RopeStyle};
pub use device::{ComputeDevice, WeightDtype};
pub use error::{EngineError, Result};
pub use executor::{Executor, GroupHandle, ScoreHandle};
pub use generate::{encode_prompt, generate, Generation, TextStream};
pub use gguf::GgufFile;
pub use kv::{ContiguousKvStore, KvStore, LayerChunk, SeqId};
pub use loader::{load_model, LoadOptions, LoadedModel, MatmulImpl};
pub use model::{LogitsFor, Model, Readout, SeqChunk};
pub use models::{Activation, Architecture, GgufLayout, LayerOptions, TensorNames};
pub use paged_kv::{bytes_per_block, PagedKvStore};
pub use safetensors::SafetensorsModel;
pub use sampling::{argmax, log_softmax, SampledToken, Sampler, SamplingParams, MAX_TOP_LOGPROBS};
pub use scheduler::{
    Event, GroupRequest, NextTokenLogprob, Scheduler, SchedulerConfig, SchedulerCounters,
    ScoreOutput, ScoreRequest, Scored, SeqFinish, StopCondition,
};
pub use tokenizer::TextTokenizer;
