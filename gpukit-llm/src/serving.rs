//! The serving engine: continuous batching over a paged KV cache.
//!
//! Requests join and leave the running batch between steps (iteration-level scheduling: Yu et
//! al. 2022, "Orca: A Distributed Serving System for Transformer-Based Generative Models"). Each
//! step runs one [`Model::forward_paged`](crate::model::Model::forward_paged) over a flat batch:
//! one token of every decoding sequence, then chunks of prompts up to the step's token budget
//! (chunked prefill, so a long prompt does not stall the others' decode). KV-cache blocks come
//! from a [`BlockPool`] with prefix caching, so a repeated system prompt is computed once. When
//! blocks run out, the newest sequences are preempted: their blocks are released (full ones stay
//! in the prefix cache) and they are recomputed later — a running request never fails for lack
//! of memory. On CUDA a step of decode tokens only runs as a [`PagedStep`], replayed as a CUDA
//! graph of its size class (the same logits, one launch instead of several hundred); should its
//! buffers not fit in memory, the engine says so once and goes on with eager steps.
//!
//! Every op of the step is batch invariant, and a request's sampling depends only on its own
//! parameters, seed and step count, so a request's output is bit for bit the same whether it
//! runs alone or beside others, preempted or not, with its prompt in any chunks.
//!
//! The engine is single-threaded: [`BatchEngine::run`] owns it on a thread of its own and takes
//! [`Command`]s from a channel; results go back through each request's `sink`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gpukit_ops::sampling::{SamplingParams, sample_tokens_into, sampler_workspace_len};
use gpukit_ops::{DType, Device, Tensor, ops};
use gpukit_sched::SharedPacer;

use crate::batch::{PagedKvCache, PagedStep, StepBatch};
use crate::engine::{Engine, StopReason, TextOutput, penalty_window};
use crate::paged::{BlockPool, BlockTable};
use crate::profile::{Part, StepProfile, StepProfiler};
use crate::{Error, Result};

/// How the engine batches and how much it holds.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Most sequences in the running batch.
    pub max_batch: usize,
    /// Most positions one sequence holds, prompt and output together (at most the model's).
    pub max_seq_len: usize,
    /// KV-cache blocks (see [`ServeOptions::blocks_for_bytes`]).
    pub kv_blocks: usize,
    /// Positions per KV-cache block.
    pub block_size: usize,
    /// Most rows (tokens) one step runs: every decoding sequence's token, then prompt chunks.
    pub max_step_tokens: usize,
    /// Most requests waiting to start; more are refused ([`RequestError::Overloaded`]).
    pub max_waiting: usize,
    /// Profile one step in this many (0: none): its device time by kind of work goes to
    /// [`Metrics::profile`]. A profiled step costs the host about a microsecond per mark (a few
    /// hundred marks for a large model).
    pub profile_every: usize,
}

impl ServeOptions {
    /// Blocks of `block_size` positions that `bytes` of KV cache hold for `engine`'s model.
    pub fn blocks_for_bytes(engine: &Engine, bytes: usize, block_size: usize) -> usize {
        let per_block = PagedKvCache::bytes_per_position(engine.model()) * block_size.max(1);
        // The cache holds one block more than it hands out (its scratch block).
        (bytes / per_block.max(1)).saturating_sub(1)
    }

    fn check(&self, engine: &Engine) -> Result<()> {
        let ctx = engine.model().spec().max_positions;
        let bad = |detail: String| Error::Invalid {
            what: "serving options",
            detail,
        };
        if self.max_batch == 0 || self.block_size == 0 || self.max_waiting == 0 {
            return Err(bad(
                "the batch, the block size and the queue need room for at least one".into(),
            ));
        }
        if self.max_seq_len < 2 || self.max_seq_len > ctx {
            return Err(bad(format!(
                "max sequence length {}: it must be from 2 to the model's context of {ctx}",
                self.max_seq_len
            )));
        }
        if self.max_step_tokens < self.max_batch {
            return Err(bad(format!(
                "a step of {} tokens cannot hold one token of each of {} sequences",
                self.max_step_tokens, self.max_batch
            )));
        }
        let need = self.max_seq_len.div_ceil(self.block_size);
        if self.kv_blocks < need {
            return Err(bad(format!(
                "{} KV-cache blocks of {} positions cannot hold one sequence of {} positions \
                 ({need} blocks): give the cache more memory or lower the sequence length",
                self.kv_blocks, self.block_size, self.max_seq_len
            )));
        }
        Ok(())
    }
}

/// One generation request.
pub struct Request {
    /// The prompt's token ids (at least one).
    pub prompt: Vec<u32>,
    /// Most tokens to generate.
    pub max_new_tokens: usize,
    /// Temperature, top-k/p, min-p, repetition penalty and seed.
    pub sampling: SamplingParams,
    /// Previous tokens the repetition penalty looks at.
    pub repetition_window: usize,
    /// Generation ends before the first of these strings (which is not emitted).
    pub stop: Vec<String>,
    /// Report each generated token's log-probability.
    pub logprobs: bool,
    /// Keep generating past the end-of-sequence token (to `max_new_tokens`): benchmarks with
    /// fixed output lengths.
    pub ignore_eos: bool,
    /// Set by the caller (a client that went away) to end the request at the next step.
    pub cancel: Arc<AtomicBool>,
    /// Receives the request's events, in order; returning `false` (nobody listens any more)
    /// cancels the request.
    pub sink: Box<dyn FnMut(Event) -> bool + Send>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("prompt_tokens", &self.prompt.len())
            .field("max_new_tokens", &self.max_new_tokens)
            .finish()
    }
}

/// A generated token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenOut {
    /// Its id.
    pub id: u32,
    /// Its natural log-probability under the model (before temperature and filtering), when
    /// the request asked for log-probabilities.
    pub logprob: Option<f32>,
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finished {
    /// Why.
    pub reason: StopReason,
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated (an end-of-sequence token is not counted).
    pub completion_tokens: usize,
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub cached_tokens: usize,
}

/// Why a request was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The request cannot be served as given (an empty or too long prompt, invalid options).
    Invalid(String),
    /// The queue is full; try again later.
    Overloaded(String),
    /// The engine failed while running it (a device error).
    Internal(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (RequestError::Invalid(m) | RequestError::Overloaded(m) | RequestError::Internal(m)) =
            self;
        f.write_str(m)
    }
}

/// What a request's sink receives.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// New text (whole UTF-8 characters, possibly empty while a character or a possible stop
    /// string is incomplete) and the tokens generated since the last event.
    Text {
        /// The text.
        text: String,
        /// The tokens.
        tokens: Vec<TokenOut>,
    },
    /// The request finished (its last event).
    Done(Finished),
    /// The request was refused or failed (its last event).
    Failed(RequestError),
}

/// A message to [`BatchEngine::run`].
pub enum Command {
    /// Serve a request.
    Submit(Request),
    /// Finish the running requests, refuse the waiting ones, and return.
    Shutdown,
}

/// Cumulative counts of a histogram with fixed upper bounds (Prometheus style).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Upper bounds, ascending (seconds).
    pub bounds: Vec<f64>,
    /// Observations at most each bound (not cumulative; the last entry counts those above all).
    pub counts: Vec<u64>,
    /// Sum of the observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    fn new(bounds: &[f64]) -> Histogram {
        Histogram {
            bounds: bounds.to_vec(),
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }
}

/// What the engine has done, for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Requests accepted.
    pub requests_total: u64,
    /// Requests refused (invalid or the queue full).
    pub requests_rejected: u64,
    /// Requests finished, failed or cancelled.
    pub requests_finished: u64,
    /// Prompt tokens of accepted requests.
    pub prompt_tokens_total: u64,
    /// Prompt tokens taken from the prefix cache.
    pub cached_prompt_tokens_total: u64,
    /// Tokens generated.
    pub generated_tokens_total: u64,
    /// Sequences preempted for lack of KV-cache blocks.
    pub preemptions_total: u64,
    /// Steps run.
    pub steps_total: u64,
    /// Sequences running now.
    pub running: usize,
    /// Requests waiting now.
    pub waiting: usize,
    /// KV-cache blocks held by sequences now.
    pub kv_blocks_in_use: usize,
    /// KV-cache blocks.
    pub kv_blocks_total: usize,
    /// Sequences in the last step.
    pub last_batch_sequences: usize,
    /// Rows (tokens) in the last step.
    pub last_batch_tokens: usize,
    /// Host time spent choosing steps' rows (scheduling, preemption, block tables), seconds.
    pub schedule_seconds: f64,
    /// Host time spent enqueueing steps' forward passes, seconds (on CUDA the device runs them
    /// asynchronously; on the CPU this is the forward pass itself).
    pub forward_seconds: f64,
    /// Time from the end of enqueueing to the drawn ids on the host: the device finishing the
    /// forward pass, then sampling, seconds.
    pub sample_seconds: f64,
    /// Host time spent detokenizing and handing out results, seconds.
    pub output_seconds: f64,
    /// Time to first token (from submission), seconds.
    pub ttft: Histogram,
    /// Time per output token after the first, seconds (per request).
    pub tpot: Histogram,
    /// Steps profiled ([`ServeOptions::profile_every`]).
    pub profiled_steps: u64,
    /// The profiled steps' device time by kind of work, seconds.
    pub profile: StepProfile,
    /// Times a paced engine ([`Pacing::Follows`]) held a step back.
    pub paced_total: u64,
    /// Time a paced engine spent holding steps back, seconds.
    pub paced_seconds: f64,
}

/// How an engine takes part in pacing ([`gpukit_sched::Pacer`]), when several models share a
/// device: the engine of a model with a latency objective reports its steps; a best-effort
/// model's engine runs a step only when the pacer's budget allows, so that its work backs off
/// while the other model's steps are over their objective.
#[derive(Clone, Debug)]
pub enum Pacing {
    /// Reports the wall time of each step that only decodes (one row per sequence).
    Reports(SharedPacer),
    /// Asks the pacer before each step ([`BatchEngine::run`]).
    Follows(SharedPacer),
}

/// A request in the engine.
struct Seq {
    req: Request,
    /// Prompt, then generated tokens.
    tokens: Vec<u32>,
    prompt_len: usize,
    /// Positions whose keys and values are in the cache.
    computed: usize,
    table: Option<BlockTable>,
    generated: usize,
    /// Its budget: `max_new_tokens`, cut to the sequence length limit.
    budget: usize,
    text: TextOutput,
    pending: Vec<TokenOut>,
    /// Text not yet handed out (the last token's, when the sequence ends by its budget).
    held_text: String,
    cached_tokens: usize,
    /// Not yet started (its first admission counts its prefix-cache hits).
    first_start: bool,
    submitted: Instant,
    first_token: Option<Instant>,
    /// Submission order (the newest is preempted first).
    order: u64,
}

impl Seq {
    fn emit(&mut self, event: Event) -> bool {
        (self.req.sink)(event)
    }

    fn cancelled(&self) -> bool {
        self.req.cancel.load(Ordering::Relaxed)
    }
}

/// The continuous-batching engine over one model (module docs).
pub struct BatchEngine {
    engine: Arc<Engine>,
    opts: ServeOptions,
    cache: PagedKvCache,
    pool: BlockPool,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    next_order: u64,
    metrics: Arc<Mutex<Metrics>>,
    sampler_ws: Option<Tensor>,
    /// Host time the last step's forward pass took to enqueue.
    last_enqueue: f64,
    /// Steps run (which ones to profile).
    steps: u64,
    profiler: Option<StepProfiler>,
    pacing: Option<Pacing>,
    /// Decode steps as CUDA graphs (CUDA only; `None` once its buffers could not be had).
    step: Option<PagedStep>,
}

impl std::fmt::Debug for BatchEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchEngine")
            .field("opts", &self.opts)
            .field("running", &self.running.len())
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

const TTFT_BOUNDS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const TPOT_BOUNDS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0,
];

impl BatchEngine {
    /// An engine for `engine`'s model with a KV cache of `opts.kv_blocks` blocks.
    ///
    /// # Errors
    /// [`Error::Invalid`] for options that cannot serve a single sequence (the message says
    /// which); memory errors allocating the cache.
    pub fn new(engine: Arc<Engine>, opts: ServeOptions) -> Result<BatchEngine> {
        opts.check(&engine)?;
        let cache = PagedKvCache::new(engine.model(), opts.kv_blocks, opts.block_size)?;
        let pool = BlockPool::new(opts.kv_blocks, opts.block_size)?;
        let step = match engine.model().device() {
            Device::Cuda(_) => Some(PagedStep::new()),
            Device::Cpu => None,
        };
        let metrics = Metrics {
            kv_blocks_total: opts.kv_blocks,
            ttft: Histogram::new(&TTFT_BOUNDS),
            tpot: Histogram::new(&TPOT_BOUNDS),
            ..Metrics::default()
        };
        Ok(BatchEngine {
            engine,
            opts,
            cache,
            pool,
            waiting: VecDeque::new(),
            running: Vec::new(),
            next_order: 0,
            metrics: Arc::new(Mutex::new(metrics)),
            sampler_ws: None,
            last_enqueue: 0.0,
            steps: 0,
            profiler: None,
            pacing: None,
            step,
        })
    }

    /// The engine, paced as `pacing` says.
    pub fn with_pacing(mut self, pacing: Pacing) -> BatchEngine {
        self.pacing = Some(pacing);
        self
    }

    /// The options.
    pub fn options(&self) -> &ServeOptions {
        &self.opts
    }

    /// The metrics, shared (updated after every step).
    pub fn metrics(&self) -> Arc<Mutex<Metrics>> {
        self.metrics.clone()
    }

    /// Whether nothing is running or waiting.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    fn with_metrics(&self, f: impl FnOnce(&mut Metrics)) {
        f(&mut self.metrics.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Queues a request, or refuses it through its sink ([`Event::Failed`]) when it cannot be
    /// served: an empty prompt, a prompt and output longer than the sequence length, invalid
    /// sampling parameters, a full queue.
    pub fn submit(&mut self, mut req: Request) {
        let refuse = |req: &mut Request, e: RequestError| {
            (req.sink)(Event::Failed(e));
        };
        let n = req.prompt.len();
        let max = self.opts.max_seq_len;
        let vocab = self.engine.model().spec().vocab;
        let invalid = if n == 0 {
            Some("the prompt is empty".to_string())
        } else if n >= max {
            Some(format!(
                "the prompt has {n} tokens; this server's context is {max} tokens (prompt and \
                 output together)"
            ))
        } else if n + req.max_new_tokens > max {
            Some(format!(
                "this server's context is {max} tokens, but {} were requested ({n} in the \
                 prompt, {} in the completion): lower max_tokens",
                n + req.max_new_tokens,
                req.max_new_tokens
            ))
        } else if req.max_new_tokens == 0 {
            Some("max_tokens must be at least 1".to_string())
        } else if let Some(id) = req.prompt.iter().find(|&&i| i as usize >= vocab) {
            Some(format!("token id {id} outside the vocabulary of {vocab}"))
        } else {
            req.sampling.validate().err().map(|e| e.to_string())
        };
        if let Some(msg) = invalid {
            self.with_metrics(|m| m.requests_rejected += 1);
            return refuse(&mut req, RequestError::Invalid(msg));
        }
        if self.waiting.len() >= self.opts.max_waiting {
            self.with_metrics(|m| m.requests_rejected += 1);
            let msg = format!(
                "{} requests are waiting already; retry in a moment",
                self.waiting.len()
            );
            return refuse(&mut req, RequestError::Overloaded(msg));
        }
        self.with_metrics(|m| {
            m.requests_total += 1;
            m.prompt_tokens_total += n as u64;
        });
        let text = TextOutput::new(&req.stop);
        self.waiting.push_back(Seq {
            tokens: req.prompt.clone(),
            prompt_len: n,
            computed: 0,
            table: None,
            generated: 0,
            budget: req.max_new_tokens,
            text,
            pending: Vec::new(),
            held_text: String::new(),
            cached_tokens: 0,
            first_start: true,
            submitted: Instant::now(),
            first_token: None,
            order: self.next_order,
            req,
        });
        self.next_order += 1;
    }

    /// Takes commands and runs steps until [`Command::Shutdown`] (or every sender is gone) and
    /// the running requests have finished. A failed step fails the requests in it and the
    /// engine goes on. A paced engine ([`Pacing::Follows`]) holds each step until the pacer
    /// allows it.
    pub fn run(mut self, inbox: Receiver<Command>) {
        let mut open = true;
        loop {
            // Idle: wait for work. Busy: take what arrived, without waiting.
            loop {
                let cmd = if self.is_idle() && open {
                    match inbox.recv_timeout(Duration::from_millis(100)) {
                        Ok(c) => Some(c),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => {
                            open = false;
                            None
                        }
                    }
                } else if open {
                    inbox.try_recv().ok()
                } else {
                    None
                };
                match cmd {
                    Some(Command::Submit(r)) if open => self.submit(r),
                    Some(Command::Submit(mut r)) => {
                        (r.sink)(Event::Failed(RequestError::Overloaded(
                            "the server is shutting down".into(),
                        )));
                    }
                    Some(Command::Shutdown) => {
                        open = false;
                        for mut s in std::mem::take(&mut self.waiting) {
                            s.emit(Event::Failed(RequestError::Overloaded(
                                "the server is shutting down".into(),
                            )));
                        }
                    }
                    None => break,
                }
            }
            if !open && self.is_idle() {
                return;
            }
            if self.is_idle() {
                continue;
            }
            if let Some(Pacing::Follows(p)) = &self.pacing
                && let Err(wait) = p.try_launch()
            {
                // Short naps: commands and cancellations are still taken between them.
                let nap = wait.min(Duration::from_millis(2));
                std::thread::sleep(nap);
                self.with_metrics(|m| {
                    m.paced_total += 1;
                    m.paced_seconds += nap.as_secs_f64();
                });
                continue;
            }
            // A failed step has already failed its requests; the next one starts clean.
            let _ = self.step();
        }
    }

    /// Runs one step: drops cancelled requests, schedules (preempting when blocks run out),
    /// runs the model over the batch, samples and hands out the results. Returns the rows run
    /// (0 when there was nothing to run).
    ///
    /// # Errors
    /// A forward-pass or sampling error; the requests of the step are failed with it
    /// ([`RequestError::Internal`]) and released.
    pub fn step(&mut self) -> Result<usize> {
        let t0 = Instant::now();
        self.drop_cancelled();
        let plan = self.schedule();
        if plan.is_empty() {
            self.publish(0, 0);
            return Ok(0);
        }
        let mut batch = StepBatch::default();
        let bs = self.opts.block_size;
        let mut samples: Vec<usize> = Vec::new();
        for (si, &(i, n)) in plan.iter().enumerate() {
            let s = &self.running[i];
            let blocks: Vec<u32> = s.table.as_ref().map_or(Vec::new(), |t| t.blocks().to_vec());
            for p in s.computed..s.computed + n {
                batch.ids.push(s.tokens[p]);
                batch.seq.push(si as u32);
                batch.pos.push(p as u32);
                batch
                    .slots
                    .push(blocks[p / bs] * bs as u32 + (p % bs) as u32);
            }
            if s.computed + n == s.tokens.len() {
                batch.logits_rows.push(batch.ids.len() as u32 - 1);
                samples.push(i);
            }
            batch.block_tables.push(blocks);
        }
        let rows = batch.ids.len();
        let t1 = Instant::now();
        let result = self.run_batch(&batch, &samples);
        let t2 = Instant::now();
        let drawn = match result {
            Ok(d) => d,
            Err(e) => {
                let msg = format!("the engine failed: {e}");
                let mut failed: Vec<usize> = plan.iter().map(|&(i, _)| i).collect();
                failed.sort_unstable();
                for &i in failed.iter().rev() {
                    let mut s = self.running.swap_remove(i);
                    s.emit(Event::Failed(RequestError::Internal(msg.clone())));
                    self.release(s);
                }
                self.publish(plan.len(), rows);
                return Err(e);
            }
        };
        for &(i, n) in &plan {
            self.running[i].computed += n;
        }
        let mut done: Vec<(usize, Option<StopReason>)> = Vec::new();
        for (&i, (id, logprob)) in samples.iter().zip(drawn) {
            let end = self.accept(i, id, logprob);
            if end.is_some() {
                done.push((i, end));
            }
        }
        done.sort_unstable_by_key(|&(i, _)| i);
        for &(i, reason) in done.iter().rev() {
            let s = self.running.swap_remove(i);
            self.finish(s, reason);
        }
        let (schedule, step) = ((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64());
        let output = t2.elapsed().as_secs_f64();
        let enqueue = self.last_enqueue;
        self.with_metrics(|m| {
            m.schedule_seconds += schedule;
            m.forward_seconds += enqueue;
            m.sample_seconds += step - enqueue;
            m.output_seconds += output;
        });
        self.publish(plan.len(), rows);
        if let Some(Pacing::Reports(p)) = &self.pacing
            && rows == plan.len()
        {
            p.observe(t0.elapsed());
        }
        Ok(rows)
    }

    /// The forward pass and the draws: each sampled sequence's token and log-probability.
    fn run_batch(
        &mut self,
        batch: &StepBatch,
        samples: &[usize],
    ) -> Result<Vec<(u32, Option<f32>)>> {
        let engine = Arc::clone(&self.engine);
        let model = engine.model();
        let every = self.opts.profile_every as u64;
        self.steps += 1;
        let mut prof = match every > 0 && self.steps.is_multiple_of(every) {
            true => Some(
                self.profiler
                    .take()
                    .unwrap_or_else(|| StepProfiler::new(model.device())),
            ),
            false => None,
        };
        let t = Instant::now();
        let logits = match (prof.as_mut(), self.step.as_mut()) {
            (Some(p), _) => {
                p.start()?;
                model.forward_paged_profiled(&self.cache, batch, p)?
            }
            (None, Some(step)) if PagedStep::takes(batch) => {
                match model.forward_paged_step(&self.cache, batch, step) {
                    Ok(logits) => logits,
                    Err(Error::Ops(gpukit_ops::Error::Mem(e))) => {
                        eprintln!(
                            "gpukit serve: decode steps run eagerly from now on: their graph \
                             buffers do not fit ({e})"
                        );
                        self.step = None;
                        model.forward_paged(&self.cache, batch)?
                    }
                    Err(e) => return Err(e),
                }
            }
            (None, _) => model.forward_paged(&self.cache, batch)?,
        };
        self.last_enqueue = t.elapsed().as_secs_f64();
        let drawn = self.sample(&logits, samples, prof.as_mut())?;
        if let Some(mut p) = prof {
            let profile = p.finish()?;
            self.profiler = Some(p);
            self.with_metrics(|m| {
                m.profiled_steps += 1;
                m.profile.add(&profile);
            });
        }
        Ok(drawn)
    }

    /// Draws each sampled sequence's next token from `logits` (one row per entry of `samples`)
    /// and its log-probability where asked for.
    fn sample(
        &mut self,
        logits: &Tensor,
        samples: &[usize],
        prof: Option<&mut StepProfiler>,
    ) -> Result<Vec<(u32, Option<f32>)>> {
        let dev = &logits.device();
        let vocab = self.engine.model().spec().vocab;
        let n = samples.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let need = sampler_workspace_len(n, vocab);
        let ws = match self.sampler_ws.take() {
            Some(w) if w.numel() >= need => w,
            _ => Tensor::empty(&[need], DType::U8, dev)?,
        };
        // Greedy rows without a penalty draw nothing: one call for all of them. The others each
        // with their own parameters, seed and step (the Philox stream of row 0, as alone).
        let greedy: Vec<usize> = (0..n)
            .filter(|&r| {
                let q = &self.running[samples[r]].req;
                q.sampling.is_plain_greedy(q.repetition_window > 0)
            })
            .collect();
        let picked = Tensor::zeros(&[greedy.len().max(1)], DType::I32, dev)?;
        if !greedy.is_empty() {
            let at: Vec<i32> = greedy.iter().map(|&r| r as i32).collect();
            let rows = Tensor::from_slice(&at, &[at.len()], dev)?;
            let zero = Tensor::from_slice(&[0i64], &[1], dev)?;
            let sub = ops::index_select(logits, 0, &rows)?;
            let params = SamplingParams::default();
            sample_tokens_into(&sub, None, &params, &zero, &ws, &picked)?;
        }
        let others: Vec<usize> = (0..n).filter(|r| !greedy.contains(r)).collect();
        let drawn = Tensor::zeros(&[others.len().max(1)], DType::I32, dev)?;
        for (j, &r) in others.iter().enumerate() {
            let s = &self.running[samples[r]];
            let q = &s.req;
            let window = penalty_window(q.repetition_window, &q.sampling, &s.tokens);
            let recent = match window.is_empty() {
                true => None,
                false => Some(Tensor::from_slice(&window, &[1, window.len()], dev)?),
            };
            let step = Tensor::from_slice(&[s.generated as i64], &[1], dev)?;
            sample_tokens_into(
                &logits.narrow(0, r, 1)?,
                recent.as_ref(),
                &q.sampling,
                &step,
                &ws,
                &drawn.narrow(0, j, 1)?,
            )?;
        }
        if let Some(p) = prof {
            p.split(Part::Sampling)?;
        }
        let mut ids = vec![0i32; n];
        if !greedy.is_empty() {
            for (&r, id) in greedy.iter().zip(picked.to_vec::<i32>()?) {
                ids[r] = id;
            }
        }
        if !others.is_empty() {
            for (&r, id) in others.iter().zip(drawn.to_vec::<i32>()?) {
                ids[r] = id;
            }
        }
        self.sampler_ws = Some(ws);
        let mut drawn = Vec::with_capacity(n);
        for (r, &id) in ids.iter().enumerate() {
            let id = id.max(0) as u32;
            let logprob = match self.running[samples[r]].req.logprobs {
                true => {
                    let row = ops::to_dtype(&logits.narrow(0, r, 1)?, DType::F32)?;
                    Some(log_softmax_at(&row.to_vec::<f32>()?, id as usize))
                }
                false => None,
            };
            drawn.push((id, logprob));
        }
        Ok(drawn)
    }

    /// Takes sequence `i`'s drawn token: hands out its text, and returns why it ends if it does.
    fn accept(&mut self, i: usize, id: u32, logprob: Option<f32>) -> Option<StopReason> {
        let eos = !self.running[i].req.ignore_eos && self.engine.eos_ids().contains(&id);
        let tokenizer = self.engine.tokenizer();
        let s = &mut self.running[i];
        let now = Instant::now();
        if s.first_token.is_none() {
            s.first_token = Some(now);
            let ttft = (now - s.submitted).as_secs_f64();
            self.metrics
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ttft
                .observe(ttft);
        }
        if eos {
            return Some(StopReason::Eos);
        }
        s.generated += 1;
        s.tokens.push(id);
        s.pending.push(TokenOut { id, logprob });
        let (text, stopped) = match s.text.push(tokenizer, id) {
            Ok(r) => r,
            Err(e) => {
                s.emit(Event::Failed(RequestError::Internal(e.to_string())));
                return Some(StopReason::Cancelled);
            }
        };
        self.with_metrics(|m| m.generated_tokens_total += 1);
        let s = &mut self.running[i];
        if stopped {
            let tokens = std::mem::take(&mut s.pending);
            s.emit(Event::Text { text, tokens });
            return Some(StopReason::StopString);
        }
        let full = s.generated >= s.budget || s.tokens.len() >= self.opts.max_seq_len;
        if !full && (!text.is_empty() || s.req.logprobs) {
            let tokens = std::mem::take(&mut s.pending);
            if !s.emit(Event::Text { text, tokens }) {
                return Some(StopReason::Cancelled);
            }
        } else {
            s.held_text.push_str(&text);
        }
        full.then_some(StopReason::MaxTokens)
    }

    /// Ends a sequence: the rest of its text and [`Event::Done`] (nothing more for a cancelled
    /// one), then its blocks back to the pool.
    fn finish(&mut self, mut s: Seq, reason: Option<StopReason>) {
        let reason = reason.unwrap_or(StopReason::Cancelled);
        if reason != StopReason::Cancelled {
            if reason != StopReason::StopString {
                let mut text = std::mem::take(&mut s.held_text);
                match s.text.finish(self.engine.tokenizer()) {
                    Ok(rest) => text.push_str(&rest),
                    Err(e) => {
                        s.emit(Event::Failed(RequestError::Internal(e.to_string())));
                        return self.release(s);
                    }
                }
                let tokens = std::mem::take(&mut s.pending);
                if !text.is_empty() || !tokens.is_empty() {
                    s.emit(Event::Text { text, tokens });
                }
            }
            s.emit(Event::Done(Finished {
                reason,
                prompt_tokens: s.prompt_len,
                completion_tokens: s.generated,
                cached_tokens: s.cached_tokens,
            }));
            if let (Some(first), true) = (s.first_token, s.generated > 1) {
                let tpot = first.elapsed().as_secs_f64() / (s.generated - 1) as f64;
                self.with_metrics(|m| m.tpot.observe(tpot));
            }
        }
        self.release(s);
    }

    fn release(&mut self, mut s: Seq) {
        if let Some(t) = s.table.take() {
            self.pool.release(t);
        }
        self.with_metrics(|m| m.requests_finished += 1);
    }

    /// Removes requests whose caller cancelled them.
    fn drop_cancelled(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].cancelled() {
                let s = self.running.swap_remove(i);
                self.release(s);
            } else {
                i += 1;
            }
        }
        let (keep, gone): (VecDeque<Seq>, VecDeque<Seq>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|s| !s.cancelled());
        self.waiting = keep;
        for s in gone {
            self.release(s);
        }
    }

    /// Preempts the newest running sequence: its blocks go back to the pool (full ones stay in
    /// the prefix cache) and it waits at the front of the queue to be recomputed.
    fn preempt_newest(&mut self) -> bool {
        let Some(i) = (0..self.running.len()).max_by_key(|&i| self.running[i].order) else {
            return false;
        };
        let mut s = self.running.swap_remove(i);
        if let Some(t) = s.table.take() {
            self.pool.release(t);
        }
        s.computed = 0;
        self.waiting.push_front(s);
        self.with_metrics(|m| m.preemptions_total += 1);
        true
    }

    /// Positions `s` can still add: room in its last block and the pool's available blocks.
    fn room(&self, s: &Seq) -> usize {
        let bs = self.opts.block_size;
        let in_table = s
            .table
            .as_ref()
            .map_or(0, |t| t.blocks().len() * bs - t.len());
        in_table + self.pool.available() * bs
    }

    /// Chooses the step's rows: `(index in running, tokens)` per sequence, appending their
    /// positions to the block tables. Decoding sequences first (preempting the newest while
    /// their blocks do not fit), then the running prompts' chunks, then new requests in order.
    fn schedule(&mut self) -> Vec<(usize, usize)> {
        let bs = self.opts.block_size;
        loop {
            // A decoding sequence whose last block is full needs a fresh one.
            let need = self
                .running
                .iter()
                .filter(|s| s.computed + 1 == s.tokens.len() && s.computed.is_multiple_of(bs))
                .count();
            if need <= self.pool.available() || !self.preempt_newest() {
                break;
            }
        }
        let mut plan = Vec::new();
        let mut budget = self.opts.max_step_tokens;
        let mut order: Vec<usize> = (0..self.running.len()).collect();
        // Decoding sequences, then prompts, oldest first.
        order.sort_by_key(|&i| {
            let s = &self.running[i];
            (s.computed + 1 != s.tokens.len(), s.order)
        });
        for i in order {
            if let Some(n) = self.grow(i, budget) {
                plan.push((i, n));
                budget -= n;
            }
        }
        while budget > 0 && self.running.len() < self.opts.max_batch {
            let Some(mut s) = self.waiting.pop_front() else {
                break;
            };
            // Share the cached prefix, leaving at least the last token to compute (its logits
            // are the first draw's).
            let table = self.pool.share_prefix(&s.tokens[..s.tokens.len() - 1]);
            s.computed = table.len();
            s.table = Some(table);
            if self.room(&s) == 0 {
                if let Some(t) = s.table.take() {
                    self.pool.release(t);
                }
                s.computed = 0;
                self.waiting.push_front(s);
                break;
            }
            if s.first_start {
                s.first_start = false;
                s.cached_tokens = s.computed;
                let cached = s.computed as u64;
                self.with_metrics(|m| m.cached_prompt_tokens_total += cached);
            }
            self.running.push(s);
            let i = self.running.len() - 1;
            if let Some(n) = self.grow(i, budget) {
                plan.push((i, n));
                budget -= n;
            }
        }
        if plan.is_empty() && self.running.len() > 1 && self.preempt_newest() {
            // Every running prompt is stuck on blocks the others hold: free the newest's.
            return self.schedule();
        }
        plan
    }

    /// Appends the next positions of running sequence `i` (its decode token, or a chunk of
    /// its prompt within `budget` and the free blocks) to its block table; `None` when none fit.
    fn grow(&mut self, i: usize, budget: usize) -> Option<usize> {
        let room = self.room(&self.running[i]);
        let s = &mut self.running[i];
        let n = (s.tokens.len() - s.computed).min(budget).min(room);
        if n == 0 {
            return None;
        }
        let table = s.table.get_or_insert_with(BlockTable::default);
        self.pool
            .append(table, &s.tokens[s.computed..s.computed + n])
            .ok()?;
        Some(n)
    }

    fn publish(&self, seqs: usize, rows: usize) {
        let in_use = self.pool.in_use();
        self.with_metrics(|m| {
            m.steps_total += u64::from(seqs > 0);
            m.running = self.running.len();
            m.waiting = self.waiting.len();
            m.kv_blocks_in_use = in_use;
            m.last_batch_sequences = seqs;
            m.last_batch_tokens = rows;
        });
    }
}

/// `log softmax(logits)[id]`, in f64 then rounded.
fn log_softmax_at(logits: &[f32], id: usize) -> f32 {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f64 = logits.iter().map(|&x| f64::from(x - m).exp()).sum();
    let x = logits.get(id).copied().unwrap_or(f32::NEG_INFINITY);
    (f64::from(x - m) - z.ln()) as f32
}
