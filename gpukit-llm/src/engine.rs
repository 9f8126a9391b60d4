//! The generation loop: a model, its tokenizer and chat template; prefill then decode with the
//! sampler of `gpukit_ops::sampling` run where the logits are (seeded Philox draws: the same
//! seed gives the same text on the CPU and on CUDA), stopping on EOS, a stop string or the token
//! budget, and handing out text as it is produced in whole UTF-8 characters.
//!
//! Models load from a GGUF file or an HF model directory (`config.json`, safetensors weights,
//! `tokenizer.json`, `tokenizer_config.json` / `chat_template.jinja`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpukit_ops::sampling::{SamplingParams, sample_tokens_into, sampler_workspace_len};
use gpukit_ops::{DType, Device, Tensor};
use gpukit_sched::{DeviceRuntime, LanePriority, Runtime, Tenant};

use crate::chat::{ChatTemplate, Message};
use crate::checkpoint::Checkpoint;
use crate::decode::{DecodeOptions, DecodeStep, Replay};
use crate::gguf::GgufFile;
use crate::model::{LoadOptions, Model, Session};
use crate::spec::ModelSpec;
use crate::tokenizer::{Tokenizer, read_json};
use crate::{Error, Result};

/// Where a model runs: the CPU, or a lane of a CUDA device's tenant (the device's default
/// tenant, or one a [`gpukit_sched::Scheduler`] admitted: its memory, class and SM partition).
pub struct ComputeDevice {
    device: Device,
    tenant: Option<Tenant>,
}

impl std::fmt::Debug for ComputeDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ComputeDevice({})", self.device.describe())
    }
}

impl ComputeDevice {
    /// Opens `name`: `cpu`, `cuda` (device 0), `cuda:N`, or `auto` (CUDA device 0 when the
    /// driver and a device are present, else the CPU). A CUDA device's model runs on a lane of
    /// its default tenant.
    ///
    /// # Errors
    /// As [`ComputeDevice::open_runtime`].
    pub fn open(name: &str) -> Result<ComputeDevice> {
        match Self::open_runtime(name)? {
            None => Ok(ComputeDevice::cpu()),
            Some(d) => {
                Self::tenant(&d.default_tenant(), LanePriority::Normal).map_err(|e| Error::Open {
                    device: format!("cuda:{}", d.device().ordinal()),
                    source: Box::new(e),
                })
            }
        }
    }

    /// The runtime of the CUDA device `name` stands for (as in [`ComputeDevice::open`]), or
    /// `None` for the CPU: to admit tenants on it through a [`gpukit_sched::Scheduler`].
    ///
    /// # Errors
    /// [`Error::Device`] for an unknown name, a missing driver or device (saying what to
    /// install or choose), or a GPU gpukit cannot run on.
    pub fn open_runtime(name: &str) -> Result<Option<DeviceRuntime>> {
        let ordinal = match name {
            "cpu" => return Ok(None),
            "auto" => {
                let present = gpukit_driver::driver_available()
                    && gpukit_driver::device_count().is_ok_and(|n| n > 0);
                if !present {
                    return Ok(None);
                }
                0
            }
            "cuda" => 0,
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    Error::Device(format!(
                        "device \"{other}\": expected auto, cpu, cuda or cuda:N"
                    ))
                })?,
        };
        if !gpukit_driver::driver_available() {
            return Err(Error::Device(format!(
                "cuda:{ordinal}: the NVIDIA driver (libcuda.so.1) is not installed; install it \
                 or use --device cpu"
            )));
        }
        let open = |e: Error| Error::Open {
            device: format!("cuda:{ordinal}"),
            source: Box::new(e),
        };
        let runtime = Runtime::with_devices(&[ordinal]).map_err(|e| open(e.into()))?;
        let device = runtime.device(0).map_err(|e| open(e.into()))?.clone();
        Ok(Some(device))
    }

    /// A new lane of `tenant` at `priority`: the model's memory comes from the tenant's pool
    /// and its kernels run with the tenant's stream priority, on its SM partition if it has one.
    ///
    /// # Errors
    /// [`Error::Ops`] for driver errors creating the lane's stream.
    pub fn tenant(tenant: &Tenant, priority: LanePriority) -> Result<ComputeDevice> {
        let lane = tenant.lane(priority).map_err(gpukit_ops::Error::from)?;
        Ok(ComputeDevice {
            device: Device::cuda(&lane)?,
            tenant: Some(tenant.clone()),
        })
    }

    /// The CPU.
    pub fn cpu() -> ComputeDevice {
        ComputeDevice {
            device: Device::Cpu,
            tenant: None,
        }
    }

    /// The device ops run on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The CUDA device's runtime (its pool), `None` on the CPU.
    fn cuda_runtime(&self) -> Option<&DeviceRuntime> {
        Some(self.tenant.as_ref()?.device())
    }

    /// The tenant the model runs as (`None` on the CPU).
    pub fn cuda_tenant(&self) -> Option<&Tenant> {
        self.tenant.as_ref()
    }

    /// The most device memory the pool has handed out so far, in bytes (`None` on the CPU).
    pub fn peak_device_bytes(&self) -> Option<usize> {
        let d = self.cuda_runtime()?;
        Some(d.pool().stats().allocator.peak_allocated_bytes)
    }

    /// The most device memory the pool has reserved from the driver so far (allocated blocks
    /// plus its cache of free ones), in bytes (`None` on the CPU).
    pub fn peak_reserved_bytes(&self) -> Option<usize> {
        let d = self.cuda_runtime()?;
        Some(d.pool().stats().allocator.peak_reserved_bytes)
    }

    /// The memory the model may still take and the most it may hold, in bytes: the CUDA
    /// device's free and total memory as the driver counts them (every process's allocations,
    /// this pool's reserve included), within the tenant's limit when it has one. `None` on the
    /// CPU or when the driver call fails.
    pub fn memory_info(&self) -> Option<(usize, usize)> {
        let info = self.cuda_runtime()?.device().memory_info().ok()?;
        let pool = self.tenant.as_ref()?.pool();
        match (pool.headroom(), pool.limit()) {
            (Some(room), Some(limit)) => Some((info.free.min(room), info.total.min(limit))),
            _ => Some((info.free, info.total)),
        }
    }

    /// Returns the pool's cached free memory to the driver (e.g. after dropping a model).
    /// Does nothing on the CPU.
    ///
    /// # Errors
    /// [`Error::Ops`] when the device fails while the pool waits for its streams.
    pub fn empty_cache(&self) -> Result<()> {
        if let Some(d) = self.cuda_runtime() {
            d.pool().empty_cache().map_err(gpukit_ops::Error::from)?;
        }
        Ok(())
    }

    /// Restarts both peaks at the bytes in use now (e.g. after loading the weights, to measure
    /// a generation). Does nothing on the CPU.
    pub fn reset_peaks(&self) {
        if let Some(d) = self.cuda_runtime() {
            d.pool().reset_peaks();
        }
    }
}

/// How to generate.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Most new tokens.
    pub max_new_tokens: usize,
    /// Temperature, top-k/p, min-p, repetition penalty, seed (the default is greedy).
    pub sampling: SamplingParams,
    /// Previous tokens the repetition penalty looks at.
    pub repetition_window: usize,
    /// Generation ends when the text contains one of these (which is not emitted).
    pub stop: Vec<String>,
    /// When set (by another thread: a Ctrl-C handler, a client that went away), generation
    /// ends before the next decode step with [`StopReason::Cancelled`]; the model stays usable.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_new_tokens: 256,
            sampling: SamplingParams::default(),
            repetition_window: 64,
            stop: Vec::new(),
            cancel: None,
        }
    }
}

impl GenerateOptions {
    /// The repetition penalty's window over `history` for the device sampler: the last
    /// `repetition_window` ids, oldest first, right-aligned (negative entries are empty slots);
    /// empty when the penalty is off.
    fn penalty_window(&self, history: &[u32]) -> Vec<i32> {
        penalty_window(self.repetition_window, &self.sampling, history)
    }
}

/// The repetition penalty's window over `history` for the device sampler: the last `window`
/// ids, oldest first, right-aligned (negative entries are empty slots); empty when the penalty
/// is off.
pub(crate) fn penalty_window(
    window: usize,
    sampling: &SamplingParams,
    history: &[u32],
) -> Vec<i32> {
    if window == 0 || sampling.repetition_penalty == 1.0 {
        return Vec::new();
    }
    let tail = &history[history.len().saturating_sub(window)..];
    let mut ids = vec![-1i32; window - tail.len()];
    ids.extend(tail.iter().map(|&i| i as i32));
    ids
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced its end-of-sequence token.
    Eos,
    /// A stop string appeared.
    StopString,
    /// `max_new_tokens` were produced.
    MaxTokens,
    /// [`GenerateOptions::cancel`] was set.
    Cancelled,
}

/// What a generation did.
#[derive(Clone, Debug)]
pub struct GenerateStats {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens produced.
    pub new_tokens: usize,
    /// Time of the prompt's forward pass (to the first token's logits).
    pub prefill: Duration,
    /// Time of the rest.
    pub decode: Duration,
    /// Why it ended.
    pub stop: StopReason,
}

impl GenerateStats {
    /// Decode speed in tokens per second.
    pub fn decode_tokens_per_s(&self) -> f64 {
        let s = self.decode.as_secs_f64();
        if s > 0.0 {
            self.new_tokens.saturating_sub(1) as f64 / s
        } else {
            0.0
        }
    }
}

/// What to continue.
#[derive(Clone, Copy, Debug)]
pub enum Prompt<'a> {
    /// Raw text (special tokens written in it are recognised; the model's BOS is added as its
    /// tokenizer asks).
    Text(&'a str),
    /// A conversation, rendered with the model's chat template and the assistant's turn opened.
    Chat(&'a [Message]),
    /// Token ids, as they are.
    Ids(&'a [u32]),
}

/// Turns token ids into text pieces made of whole UTF-8 characters: a token that ends inside a
/// multi-byte character is held back until the character is complete.
///
/// Each token decodes a short window — the ids from the one before the last piece on (the
/// incremental detokenization of HF's `TextStreamer` and vLLM): decoders that strip a leading
/// space or merge bytes across tokens see the same context as in a decode of everything, and a
/// long generation costs the same per token as a short one.
struct TextStream {
    ids: Vec<u32>,
    /// Start of the decode window: the first id of the last piece handed out.
    prefix: usize,
    /// End of what has been handed out.
    read: usize,
}

impl TextStream {
    fn new() -> Self {
        TextStream {
            ids: Vec::new(),
            prefix: 0,
            read: 0,
        }
    }

    /// The text not handed out yet, from the first character boundary after what was (a
    /// decoder whose text for more ids is not an extension of its text for fewer, a replacement
    /// across tokens, can leave that inside a character).
    fn unseen(&self, tokenizer: &Tokenizer) -> Result<String> {
        let before = tokenizer.decode(&self.ids[self.prefix..self.read])?;
        let now = tokenizer.decode(&self.ids[self.prefix..])?;
        let start = (before.len()..=now.len())
            .find(|&i| now.is_char_boundary(i))
            .unwrap_or(now.len());
        Ok(now.get(start..).unwrap_or_default().to_string())
    }

    /// Adds a token; returns the new complete text, if any.
    fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<Option<String>> {
        self.ids.push(id);
        let piece = self.unseen(tokenizer)?;
        if piece.is_empty() || piece.ends_with('\u{FFFD}') {
            return Ok(None);
        }
        self.prefix = self.read;
        self.read = self.ids.len();
        Ok(Some(piece))
    }
}

/// A generation's text as its tokens arrive: whole UTF-8 characters, cut before the first stop
/// string, and holding back what could still be the start of one.
pub(crate) struct TextOutput {
    stream: TextStream,
    held: String,
    stop: Vec<String>,
    longest_stop: usize,
}

impl TextOutput {
    pub(crate) fn new(stop: &[String]) -> Self {
        TextOutput {
            stream: TextStream::new(),
            held: String::new(),
            stop: stop.to_vec(),
            longest_stop: stop.iter().map(String::len).max().unwrap_or(0),
        }
    }

    /// Adds a token. Returns the text that can be handed out now and whether a stop string
    /// appeared (the text then ends before it, and the generation is over).
    pub(crate) fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<(String, bool)> {
        let Some(piece) = self.stream.push(tokenizer, id)? else {
            return Ok((String::new(), false));
        };
        self.held.push_str(&piece);
        if let Some(at) = self
            .stop
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            let out = self.held[..at].to_string();
            self.held.clear();
            return Ok((out, true));
        }
        let keep = self.longest_stop.saturating_sub(1).min(self.held.len());
        let mut cut = self.held.len() - keep;
        while !self.held.is_char_boundary(cut) {
            cut -= 1;
        }
        Ok((self.held.drain(..cut).collect(), false))
    }

    /// The rest, when generation ends other than by a stop string: the held-back text and any
    /// incomplete character.
    pub(crate) fn finish(&mut self, tokenizer: &Tokenizer) -> Result<String> {
        let mut out = std::mem::take(&mut self.held);
        out.push_str(&self.stream.unseen(tokenizer)?);
        self.stream.prefix = self.stream.read;
        self.stream.read = self.stream.ids.len();
        Ok(out)
    }
}

/// A model ready to generate.
pub struct Engine {
    model: Model,
    tokenizer: Tokenizer,
    chat: Option<ChatTemplate>,
    /// Ids that end generation (a model may have several, e.g. Llama 3's `<|eot_id|>`).
    eos: Vec<u32>,
    path: PathBuf,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("path", &self.path).finish()
    }
}

/// `eos_token_id` of an HF config: an id or a list of ids.
fn eos_ids(config: Option<&serde_json::Value>) -> Vec<u32> {
    match config.and_then(|c| c.get("eos_token_id")) {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect(),
        Some(v) => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .into_iter()
            .collect(),
        None => Vec::new(),
    }
}

impl Engine {
    /// Loads a model onto `device`: a GGUF file, or an HF model directory (`config.json`,
    /// `model.safetensors` or a sharded index, `tokenizer.json`, and optionally
    /// `tokenizer_config.json`, `chat_template.jinja`, `generation_config.json`).
    /// `on_layer(i, n)` is called before each of the `n` layers loads (for a progress bar).
    ///
    /// # Errors
    /// Errors of the readers, the tokenizer and the model loader, each naming the file.
    pub fn load(
        path: &Path,
        device: &Device,
        opts: LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Engine> {
        if path.is_dir() {
            return Self::load_hf(path, device, opts, on_layer);
        }
        if path.extension().is_none_or(|e| e != "gguf") {
            return Err(Error::Format {
                file: path.to_path_buf(),
                detail: "not a model: give a .gguf file or an HF model directory (with \
                         config.json and safetensors weights)"
                    .into(),
            });
        }
        let f = GgufFile::open(path)?;
        let tokenizer = Tokenizer::from_gguf(f.header(), path)?;
        let chat = ChatTemplate::from_gguf(f.header(), &tokenizer, path).ok();
        let model = Model::from_gguf(&f, device, opts, on_layer)?;
        Ok(Engine {
            eos: tokenizer.eos_id().into_iter().collect(),
            model,
            tokenizer,
            chat,
            path: path.to_path_buf(),
        })
    }

    fn load_hf(
        dir: &Path,
        device: &Device,
        opts: LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Engine> {
        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path).map_err(|source| Error::Io {
            path: config_path.clone(),
            source,
        })?;
        let spec = ModelSpec::from_config_json(&config_text, &config_path)?;
        let tokenizer = Tokenizer::from_hf_dir(dir)?;
        let chat = ChatTemplate::from_hf_dir(dir).ok();
        let ck = Checkpoint::open(dir)?;
        let model = Model::from_safetensors(spec, &ck, dir, device, opts, on_layer)?;
        let config: Option<serde_json::Value> = serde_json::from_str(&config_text).ok();
        let generation = read_json(&dir.join("generation_config.json"))?;
        let mut eos = eos_ids(generation.as_ref());
        eos.extend(eos_ids(config.as_ref()));
        eos.extend(tokenizer.eos_id());
        eos.sort_unstable();
        eos.dedup();
        Ok(Engine {
            model,
            tokenizer,
            chat,
            eos,
            path: dir.to_path_buf(),
        })
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The prompt of a conversation through the model's chat template, the assistant's turn
    /// opened.
    ///
    /// # Errors
    /// [`Error::Missing`] if the model has no chat template; template errors.
    pub fn chat_prompt(&self, messages: &[Message]) -> Result<String> {
        let chat = self.chat.as_ref().ok_or_else(|| Error::Missing {
            file: self.path.clone(),
            what: "chat template (run without --chat to complete raw text)".into(),
        })?;
        chat.render(messages, true)
    }

    /// The token ids of a prompt: text encoded (BOS added as the tokenizer asks), a
    /// conversation rendered with the chat template and encoded, ids as they are.
    ///
    /// # Errors
    /// Tokenizer errors; a chat prompt for a model without a chat template.
    pub fn encode_prompt(&self, prompt: Prompt<'_>) -> Result<Vec<u32>> {
        match prompt {
            Prompt::Text(text) => self.tokenizer.encode(text),
            Prompt::Chat(messages) => self.tokenizer.encode_rendered(&self.chat_prompt(messages)?),
            Prompt::Ids(ids) => Ok(ids.to_vec()),
        }
    }

    /// The ids that end generation (EOS, and e.g. Llama 3's `<|eot_id|>`).
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Whether the model has a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.chat.is_some()
    }

    /// Generates a continuation of `prompt`, calling `on_text` with each new piece of text as
    /// soon as it is complete. Sampling runs where the model runs (on CUDA, only the chosen id
    /// comes back to the host each step).
    ///
    /// # Errors
    /// Tokenizer and forward-pass errors; an empty prompt; a prompt longer than the model's
    /// context; a chat prompt for a model without a chat template.
    pub fn generate(
        &self,
        prompt: Prompt<'_>,
        opts: &GenerateOptions,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<GenerateStats> {
        opts.sampling.validate().map_err(|e| Error::Invalid {
            what: "generation options",
            detail: e.to_string(),
        })?;
        let ids = self.encode_prompt(prompt)?;
        let ctx = self.model.spec().max_positions;
        if ids.is_empty() || ids.len() >= ctx {
            return Err(Error::Invalid {
                what: "prompt",
                detail: format!(
                    "{} tokens; a prompt needs 1 to {} (the model's context)",
                    ids.len(),
                    ctx.saturating_sub(1)
                ),
            });
        }
        let budget = opts.max_new_tokens.min(ctx - ids.len());
        let mut session = self.model.session(ids.len() + budget)?;
        let mut sampler = Sampler::new(self.model.device(), opts)?;
        let t0 = Instant::now();
        let logits = self.model.forward(&mut session, &ids)?;
        // The first id comes with the prefill (its logits are ready only when it ends).
        let mut history: Vec<u32> = ids.clone();
        let mut next = sampler.sample(&logits, &history, 0)?;
        // Decode steps: one preallocated step (a CUDA graph after its first run) consumes each
        // token and draws the next on the device; the general forward pass for models it does
        // not take.
        let mut decoder = if budget > 1 && self.model.supports_decode_step() {
            let mut seen = history.clone();
            seen.push(next);
            let recent = opts.penalty_window(&seen);
            let step_opts = DecodeOptions {
                sampling: &opts.sampling,
                recent: &recent,
                first_step: 1,
                replay: Replay::Graph,
            };
            Decoder::Step(Box::new(self.model.decode_step(
                &mut session,
                next,
                step_opts,
            )?))
        } else {
            Decoder::Forward(&mut session)
        };
        let prefill = t0.elapsed();
        let t1 = Instant::now();
        let mut text = TextOutput::new(&opts.stop);
        let mut stop = StopReason::MaxTokens;
        let mut produced = 0;
        for step in 0..budget {
            if opts
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                stop = StopReason::Cancelled;
                break;
            }
            let id = next;
            if self.eos.contains(&id) {
                stop = StopReason::Eos;
                break;
            }
            produced += 1;
            history.push(id);
            let (piece, stopped) = text.push(&self.tokenizer, id)?;
            if !piece.is_empty() || stopped {
                on_text(&piece);
            }
            if stopped {
                stop = StopReason::StopString;
                break;
            }
            if step + 1 < budget {
                next = match &mut decoder {
                    Decoder::Step(d) => d.run()?,
                    Decoder::Forward(session) => {
                        let logits = self.model.forward(session, &[id])?;
                        sampler.sample(&logits, &history, step as i64 + 1)?
                    }
                };
            }
        }
        if stop != StopReason::StopString {
            on_text(&text.finish(&self.tokenizer)?);
        }
        Ok(GenerateStats {
            prompt_tokens: ids.len(),
            new_tokens: produced,
            prefill,
            decode: t1.elapsed(),
            stop,
        })
    }
}

/// How [`Engine::generate`] runs decode steps.
enum Decoder<'a> {
    /// The preallocated step, replayed as a CUDA graph.
    Step(Box<DecodeStep<'a>>),
    /// The general forward pass, then the sampler.
    Forward(&'a mut Session),
}

/// The sampler's device buffers: the chosen id and the workspace (made for the first logits).
struct Sampler<'a> {
    opts: &'a GenerateOptions,
    device: Device,
    out: Tensor,
    workspace: Option<Tensor>,
}

impl<'a> Sampler<'a> {
    fn new(device: &Device, opts: &'a GenerateOptions) -> Result<Self> {
        Ok(Sampler {
            opts,
            device: device.clone(),
            out: Tensor::zeros(&[1], DType::I32, device)?,
            workspace: None,
        })
    }

    /// The id drawn from `logits [1, vocab]` at `step`, the penalty looking at the end of
    /// `history`.
    fn sample(&mut self, logits: &Tensor, history: &[u32], step: i64) -> Result<u32> {
        let window = self.opts.penalty_window(history);
        let recent = if window.is_empty() {
            None
        } else {
            Some(Tensor::from_slice(
                &window,
                &[1, window.len()],
                &self.device,
            )?)
        };
        let step = Tensor::from_slice(&[step], &[1], &self.device)?;
        let need = sampler_workspace_len(1, logits.shape().last().copied().unwrap_or(1));
        let workspace = match self.workspace.take() {
            Some(w) if w.numel() >= need => w,
            _ => Tensor::empty(&[need], DType::U8, &self.device)?,
        };
        let drawn = sample_tokens_into(
            logits,
            recent.as_ref(),
            &self.opts.sampling,
            &step,
            &workspace,
            &self.out,
        );
        self.workspace = Some(workspace);
        drawn?;
        let id = self.out.to_vec::<i32>()?;
        Ok(id.first().map_or(0, |&i| i.max(0) as u32))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A decoder whose text for more ids is not an extension of its text for fewer ("a", then
    /// "ab" → "é") must not make the stream cut inside a character.
    #[test]
    fn text_stream_survives_a_decoder_that_rewrites_earlier_text() {
        let dir = std::env::temp_dir().join(format!("gpukit-text-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
            "normalizer":null,"pre_tokenizer":null,"post_processor":null,
            "decoder":{"type":"Sequence","decoders":[{"type":"Fuse"},
                {"type":"Replace","pattern":{"String":"ab"},"content":"é"}]},
            "model":{"type":"WordLevel","vocab":{"a":0,"b":1},"unk_token":"a"}}"#;
        std::fs::write(dir.join("tokenizer.json"), json).unwrap();
        let tokenizer = Tokenizer::from_hf_dir(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let mut stream = TextStream::new();
        let t = &tokenizer;
        assert_eq!(stream.push(t, 0).unwrap().as_deref(), Some("a"));
        // "é" is two bytes; one was emitted (as "a"): nothing new at a character boundary.
        assert_eq!(stream.push(t, 1).unwrap(), None);
        assert_eq!(stream.push(t, 0).unwrap().as_deref(), Some("a"));
        assert_eq!(stream.unseen(t).unwrap(), "");
    }
}
