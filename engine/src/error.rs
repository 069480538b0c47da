//! The engine's error type: every way loading a model, tokenizing, templating or running a
//! forward pass can fail, with the fields a person needs to fix it.
//!
//! Nothing here panics on bad input; callers get one of these variants instead.

use std::path::PathBuf;

use ponder_kvcache::SeqId;

/// Errors raised by the model runtime.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A model file or directory does not exist.
    #[error("model file not found: {path} ({hint})")]
    ModelNotFound {
        /// The path that was looked up.
        path: PathBuf,
        /// What to do about it.
        hint: String,
    },
    /// The file exists but is not a readable GGUF / safetensors model.
    #[error("cannot read model {path}: {reason}")]
    CorruptModel {
        /// The model file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// The model's architecture is not one the engine implements.
    #[error("unsupported model architecture {arch:?} in {path} (supported: {supported})")]
    UnsupportedArchitecture {
        /// The architecture named by the model.
        arch: String,
        /// The model file.
        path: PathBuf,
        /// The names the engine knows, comma-separated (`models/`' registry).
        supported: String,
    },
    /// A tensor uses a storage type the engine cannot compute with.
    #[error("unsupported tensor type in {path}: {detail}")]
    UnsupportedQuant {
        /// The model file.
        path: PathBuf,
        /// Which tensor and which type.
        detail: String,
    },
    /// A required hyper-parameter or tensor is absent from the model.
    #[error("model {path} is missing {what}")]
    MissingField {
        /// The model file.
        path: PathBuf,
        /// The metadata key or tensor name.
        what: String,
    },
    /// The tokenizer failed to build, encode or decode.
    #[error("tokenizer error: {0}")]
    Tokenizer(#[source] tokenizers::Error),
    /// A `tokenizer.json` could not be loaded.
    #[error("tokenizer {path}: {source}")]
    TokenizerFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: tokenizers::Error,
    },
    /// A GGUF's tokenizer metadata is missing or not what the tokenizer needs.
    #[error("GGUF tokenizer metadata {key}: {problem}")]
    GgufTokenizer {
        /// The metadata key.
        key: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The GGUF's tokenizer is not byte-level BPE, the one kind rebuilt from metadata.
    #[error(
        "GGUF tokenizer model {model:?} is not byte-level BPE (\"gpt2\"); pass --tokenizer \
         tokenizer.json"
    )]
    UnsupportedTokenizer {
        /// `tokenizer.ggml.model` as the file states it.
        model: String,
    },
    /// The chat template failed to compile or render.
    #[error("chat template error: {0}")]
    ChatTemplate(#[source] minijinja::Error),
    /// A request argument is out of range.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending parameter.
        field: &'static str,
        /// Why it was rejected, including the limit.
        reason: String,
    },
    /// A request needs more KV blocks than the whole pool has, so it could never run.
    #[error("{what} needs {needed} KV blocks but the pool has {total}; ask for fewer samples or tokens, or raise --kv-memory")]
    ExceedsKvPool {
        /// What was refused ("request", "scoring").
        what: &'static str,
        /// Blocks it needs at once.
        needed: usize,
        /// Blocks in the whole pool.
        total: usize,
    },
    /// The prompt does not fit the model's context window.
    #[error("prompt is {tokens} tokens but the model's context is {context} tokens")]
    PromptTooLong {
        /// Tokens in the prompt.
        tokens: usize,
        /// The model's context length.
        context: usize,
    },
    /// The executor's thread has stopped (shut down, or its model failed): nothing more runs.
    #[error("the executor has stopped")]
    ExecutorStopped,
    /// The executor's thread could not be started.
    #[error("cannot start the executor thread: {0}")]
    ExecutorStart(#[source] std::io::Error),
    /// A scoring request ended without its result: it was cancelled.
    #[error("scoring request {0} was cancelled")]
    ScoreCancelled(SeqId),
    /// The KV pool cannot hold one step even with every other sequence preempted.
    #[error("the KV pool cannot hold one step: {needed} blocks needed, {available} available")]
    OutOfBlocks {
        /// Blocks the step needs.
        needed: usize,
        /// Blocks free after preempting everything else.
        available: usize,
    },
    /// The KV-cache bookkeeping refused an operation (unknown or duplicate sequence, out of
    /// blocks, an inconsistency it found), kept as the source.
    #[error(transparent)]
    KvCache(#[from] ponder_kvcache::KvCacheError),
    /// A sequence's chunk does not start where its KV ends (a caller bug, reported not panicked).
    #[error("sequence {seq} starts at position {start} but the store holds {held} positions")]
    PositionMismatch {
        /// The sequence.
        seq: SeqId,
        /// Where the chunk starts.
        start: usize,
        /// Positions the store holds for it.
        held: usize,
    },
    /// A layer index past the layers a model or KV store has.
    #[error("layer {layer} out of range ({layers} layers)")]
    LayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// Layers there are.
        layers: usize,
    },
    /// The KV store keeps its blocks on another device than the one the model computes on.
    #[error("the KV store's blocks are on the {store}, not where the model computes; build the store with PagedKvStore::for_model")]
    StoreOnOtherDevice {
        /// Where the store's blocks are (`host`, `CUDA device`).
        store: &'static str,
    },
    /// Something a step computes for a sequence was not there when read (an engine bug,
    /// reported instead of panicking).
    #[error("the engine has no {what}{} (an engine bug)", for_sequence(*.seq))]
    MissingOutput {
        /// What was missing (`logits`, `reserved slots`, `attention plan`).
        what: &'static str,
        /// The sequence it was for, if one.
        seq: Option<SeqId>,
    },
    /// Two sizes that must agree do not (rows for the reserved slots, a head's width, readings
    /// per step).
    #[error("{what}: expected {expected}, got {got}")]
    SizeMismatch {
        /// What was measured.
        what: &'static str,
        /// The size it must have.
        expected: usize,
        /// The size it had.
        got: usize,
    },
    /// `--device cuda` in a build without the `cuda` feature.
    #[error("device {device} needs a build with the `cuda` feature (cargo build --release --features cuda)")]
    CudaNotBuilt {
        /// The device asked for.
        device: String,
    },
    /// The CUDA device could not be opened or a CUDA call failed.
    #[error("cuda: {op}: {source}")]
    Cuda {
        /// What was being done (opening the device, a launch, a copy).
        op: &'static str,
        /// The driver's, cuBLAS's or a launcher's error (`ponder_kernels::cuda::CudaError`,
        /// cudarc's `DriverError` or `CublasError`), or the message of a CUDA library that
        /// could not be loaded; boxed so this type does not depend on the `cuda` feature.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A CPU kernel rejected its arguments.
    #[error(transparent)]
    Kernel(#[from] ponder_kernels::KernelError),
    /// The paged attention kernel refused its arguments (a size or block id the engine passed).
    #[error(transparent)]
    Attention(#[from] ponder_kernels::attention::AttentionError),
    /// A tensor operation failed.
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// An I/O error on a model file.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn for_sequence(seq: Option<SeqId>) -> String {
    seq.map(|s| format!(" for sequence {s}"))
        .unwrap_or_default()
}

/// Result alias for the engine.
pub type Result<T> = std::result::Result<T, EngineError>;
