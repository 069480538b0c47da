//! `ponder-eval`: the evaluation harness's command line.
//!
//! Subcommands live in their own functions so new ones (`run`, …) slot in beside `grade`.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::io::{BufReader, Write};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "ponder-eval", version, about = "Ponder's evaluation harness")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Grade `{"gold": …, "pred": …}` JSONL lines: each line comes back on stdout with
    /// `equivalent`, `extracted`, `normalized_gold` and `normalized_pred` added.
    Grade {
        /// The JSONL file, or `-` for stdin.
        file: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Grade { file } => grade(&file),
    }
}

fn grade(file: &std::path::Path) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let out = std::io::BufWriter::new(stdout.lock());
    let summary = if file.as_os_str() == "-" {
        ponder_evals::grade_jsonl(std::io::stdin().lock(), out)
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        ponder_evals::grade_jsonl(BufReader::new(f), out)
    }
    .with_context(|| format!("grading {}", file.display()))?;
    writeln!(
        std::io::stderr(),
        "graded {} pairs: {} equivalent, {} without an answer",
        summary.graded,
        summary.equivalent,
        summary.no_answer
    )?;
    Ok(())
}
