//! The embedded runtime: a loaded model, the executor actor that owns it and its paged KV
//! store, and the strategies' `Generator` port over them. The CLI, the tests and (later) the
//! server start one and share it across requests.

use std::path::PathBuf;
use std::sync::Arc;

use crate::local::LocalGenerator;
use crate::{
    ComputeDevice, EngineError, Executor, LoadOptions, LoadedModel, PagedKvStore, Result,
    Scheduler, SchedulerConfig, SchedulerCounters,
};

/// How to start a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// A `.gguf` file or a safetensors directory.
    pub model: PathBuf,
    /// KV cache memory in bytes.
    pub kv_memory: u64,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Most tokens per forward pass.
    pub max_step_tokens: usize,
    /// Where the model runs; `None`: `$PONDER_DEVICE` if set (`cpu`, `cuda`, `cuda:N`), else
    /// the CPU (how `ponder serve` picks a device).
    pub device: Option<ComputeDevice>,
    /// A tokenizer.json to use instead of the model's own (e.g. for a SentencePiece GGUF).
    pub tokenizer: Option<PathBuf>,
}

impl RuntimeOptions {
    /// The device to run on: `device`, else `$PONDER_DEVICE`, else the CPU.
    pub fn resolved_device(&self) -> Result<ComputeDevice> {
        if let Some(d) = self.device {
            return Ok(d);
        }
        match std::env::var("PONDER_DEVICE") {
            Ok(v) if !v.trim().is_empty() => v.parse().map_err(|e: EngineError| match e {
                EngineError::InvalidInput { reason, .. } => EngineError::InvalidInput {
                    field: "PONDER_DEVICE",
                    reason,
                },
                other => other,
            }),
            _ => Ok(ComputeDevice::Cpu),
        }
    }
}

impl RuntimeOptions {
    /// `model` with 512 MiB of KV blocks of 16 tokens, at most 512 tokens a forward pass, on the
    /// device [`RuntimeOptions::resolved_device`] picks.
    pub fn for_model(model: PathBuf) -> Self {
        Self {
            model,
            kv_memory: 512 << 20,
            block_size: 16,
            max_step_tokens: 512,
            device: None,
            tokenizer: None,
        }
    }
}

/// A model served by an executor.
#[derive(Debug)]
pub struct Runtime {
    /// The model (tokenizer, chat template, weights).
    pub model: Arc<LoadedModel>,
    /// The actor running every sequence.
    pub executor: Arc<Executor>,
    block_size: usize,
}

impl Runtime {
    /// Loads the model and starts the executor thread.
    pub fn start(opts: &RuntimeOptions) -> Result<Self> {
        let device = opts.resolved_device()?;
        let model = Arc::new(LoadedModel::load(&LoadOptions {
            tokenizer: opts.tokenizer.clone(),
            ..LoadOptions::on(opts.model.clone(), device)
        })?);
        let store = PagedKvStore::for_model(&model.model, opts.kv_memory, opts.block_size)?;
        let scheduler = Scheduler::new(
            Arc::clone(&model.model),
            store,
            SchedulerConfig {
                max_step_tokens: opts.max_step_tokens,
                ..SchedulerConfig::default()
            },
        );
        let executor = Arc::new(Executor::spawn(scheduler)?);
        Ok(Self {
            model,
            executor,
            block_size: opts.block_size,
        })
    }

    /// A generator over this runtime (cheap; one per request keeps handles apart).
    pub fn generator(&self) -> Arc<LocalGenerator> {
        Arc::new(self.local_generator())
    }

    /// [`Runtime::generator`] before it is shared, to configure it further.
    pub fn local_generator(&self) -> LocalGenerator {
        LocalGenerator::new(
            Arc::clone(&self.model),
            Arc::clone(&self.executor),
            self.block_size,
        )
    }

    /// The executor's counters.
    pub async fn counters(&self) -> Result<SchedulerCounters> {
        self.executor.counters().await
    }
}
