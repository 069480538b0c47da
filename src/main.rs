//! The `ponder` command line.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ponder::engine::{generate, ChatMessage, LoadOptions, LoadedModel, SamplingParams};

#[derive(Parser)]
#[command(name = "ponder", version, about = "Test-time-scaling reasoning server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a reply to one prompt, streaming it to stdout.
    Generate(GenerateArgs),
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// The user message.
    #[arg(long)]
    prompt: String,
    /// An optional system message.
    #[arg(long)]
    system: Option<String>,
    /// Send the prompt as is, without the chat template.
    #[arg(long)]
    raw: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.7)]
    temperature: f64,
    /// Keep the k most likely tokens (0: off).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Nucleus sampling mass (1: off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// Min-p threshold relative to the best token (0: off).
    #[arg(long, default_value_t = 0.0)]
    min_p: f64,
    /// Repetition penalty (1: off).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f64,
    /// RNG seed: the same seed replays the same text.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// A .gguf file or a safetensors checkpoint directory [default: the installed SmolLM2].
    #[arg(long, env = "PONDER_MODEL")]
    model: Option<PathBuf>,
    /// A tokenizer.json to use instead of the model's own.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Generate(args) => run_generate(args),
    }
}

fn run_generate(args: GenerateArgs) -> anyhow::Result<()> {
    let model_path = args.model.unwrap_or_else(ponder::models::default_llm_path);
    let opts = LoadOptions { model: model_path.clone(), tokenizer: args.tokenizer, device: candle_core::Device::Cpu };
    let model = LoadedModel::load(&opts).with_context(|| format!("loading {}", model_path.display()))?;
    let prompt = if args.raw {
        args.prompt
    } else {
        if args.prompt.trim().is_empty() {
            anyhow::bail!("invalid prompt: is empty");
        }
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(ChatMessage::new("system", system));
        }
        messages.push(ChatMessage::new("user", &args.prompt));
        model.render_chat(&messages)?
    };
    let params = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repetition_penalty: args.repetition_penalty,
        seed: args.seed,
        top_logprobs: 0,
    };
    let mut stdout = std::io::stdout().lock();
    let out = generate(&model, &prompt, args.max_tokens, params, |piece| {
        // A closed stdout (e.g. `| head`) must not abort generation with a panic.
        let _ = stdout.write_all(piece.as_bytes());
        let _ = stdout.flush();
    })?;
    writeln!(stdout)?;
    eprintln!(
        "[usage] prompt_tokens={} generated_tokens={} finish={:?} prefill={:.2}s decode={:.2}s tokens/s={:.1}",
        out.prompt_tokens,
        out.tokens.len(),
        out.finish_reason,
        out.prefill_secs,
        out.decode_secs,
        out.tokens_per_sec()
    );
    Ok(())
}
