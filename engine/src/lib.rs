//! `ponder-engine`: Ponder's model runtime. Loading (GGUF, safetensors), tokenizer and chat
//! template, our own batched forward pass over a paged KV store, sampling, the executor actor
//! and its continuous-batching scheduler, and [`LocalGenerator`], the local implementation of
//! the strategies' `Generator` port.
//!
//! The forward pass runs on the CPU (the default, `cpu.rs`) or, in a build with feature `cuda`,
//! on a CUDA device (`cuda/`: weights, activations and KV blocks in device memory, our attention
//! and KV kernels, cuBLAS projections), chosen when the model loads; the bookkeeping,
//! scheduling and sampling are shared. Architectures are data (`models/`, one file each).
//!
//! The service sees the root: a [`Runtime`] (load a model, start its executor, hand out
//! generators), its options, the device, the typed error and the few request types the API
//! validates into. [`forward`] (one model's forward pass, without the executor) and
//! [`batching`] (the executor and scheduler driven directly) are for the process reward
//! models, the benches and the parity tests. It knows nothing of HTTP, routing or verifiers.

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
mod local;
mod model;
mod models;
mod paged_kv;
mod rope;
mod runtime;
mod safetensors;
mod sampling;
mod scheduler;
mod tokenizer;
mod weights;

/// The CUDA backend, or its stub in a build without feature `cuda` (chosen in `device.rs`).
use device::cuda;

// The crate's root surface: what the service needs to run a model and reach it through the
// strategies' port (listed in ARCHITECTURE.md; keep it this small).
pub use device::ComputeDevice;
pub use error::{EngineError, Result};
pub use local::{InterToken, LocalGenerator};
pub use runtime::{Runtime, RuntimeOptions};
pub use sampling::MAX_TOP_LOGPROBS;
pub use scheduler::SchedulerCounters;

/// A model's forward pass without the executor: loading (GGUF, safetensors), the tokenizer and
/// chat template, KV stores, logits and readouts, and single-sequence generation — for the
/// process reward models, the parity tests and `ponder generate`.
pub mod forward {
    pub use crate::attention::AttentionShape;
    pub use crate::chat_template::ChatTemplate;
    pub use crate::config::{ModelConfig, RopeStyle};
    pub use crate::device::WeightDtype;
    pub use crate::generate::{encode_prompt, generate, Generation, TextStream};
    pub use crate::gguf::GgufFile;
    pub use crate::kv::{ContiguousKvStore, KvStore, LayerChunk, SeqId};
    pub use crate::loader::{load_model, LoadOptions, LoadedModel, MatmulImpl};
    pub use crate::model::{LogitsFor, Model, Readout, SeqChunk};
    pub use crate::models::{Activation, Architecture, GgufLayout, LayerOptions, TensorNames};
    pub use crate::paged_kv::{bytes_per_block, PagedKvStore};
    pub use crate::safetensors::SafetensorsModel;
    pub use crate::sampling::{argmax, log_softmax, SampledToken, Sampler, SamplingParams};
    pub use crate::tokenizer::TextTokenizer;
}

/// The executor actor and its scheduler driven directly (continuous batching of sequence
/// groups, scoring requests, their events) — for the benches and the executor's own tests; the
/// service reaches them through [`Runtime`] and [`LocalGenerator`].
pub mod batching {
    pub use crate::executor::{Executor, GroupHandle, ScoreHandle};
    pub use crate::local::StopStrings;
    pub use crate::scheduler::{
        Event, GroupRequest, NextTokenLogprob, Scheduler, SchedulerConfig, ScoreOutput,
        ScoreRequest, Scored, SeqFinish, StopCondition,
    };
}

// Inside the crate every module names these from the root.
pub(crate) use batching::*;
pub(crate) use forward::*;
