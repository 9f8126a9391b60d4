//! Isolation benchmark of the scheduler (GPU machine): a latency-critical tenant beside a
//! throughput tenant on one GPU.
//!
//! The guaranteed tenant decodes Llama-3.2-1B at batch 1 (one CUDA graph replay per token, each
//! id read back). The best-effort tenant runs Llama-3.1-8B, one of two loads (both by default,
//! `$GPUKIT_SCHED_LOADS=prefill,decode`; empty for the guaranteed tenant's rows alone):
//! - **prefill**: 4,096-token prompts back to back, in chunks of `$GPUKIT_SCHED_CHUNK` (default
//!   512) tokens;
//! - **decode**: batched decode of 64 sequences through the serving engine
//!   ([`BatchEngine`], CUDA-graph steps), each after a 128-token prompt.
//!
//! Both are random-weight bf16 models at real shapes from `bench/decode_models.py` in
//! `$GPUKIT_DECODE_MODELS`. Setups, for each load, in one run:
//! - **alone**: each tenant by itself, and the guaranteed one alone on each partition size;
//! - **shared**: both on lanes of the default tenant at the same priority (no isolation);
//! - **priorities**: a scheduler without partitions (guaranteed lanes most urgent);
//! - **partitions**: the scheduler with green-context partitions, the guaranteed share swept
//!   over `$GPUKIT_SCHED_SHARES` (default `0.25,0.5,0.75`), with and without pacing (the
//!   best-effort tenant asks the [`Pacer`] before each chunk or step; the objective is 1.1× the
//!   solo p50 step);
//! - **processes**: the two tenants in two processes, time-sliced by the driver.
//!
//! For each: the guaranteed tenant's time per output token (p50, p99, max over
//! `$GPUKIT_SCHED_TOKENS`, default 1,000) and the best-effort tenant's tokens/s (prompt tokens
//! prefilled, or output tokens decoded). `$GPUKIT_SCHED_ONLY=<substring>` keeps, besides the
//! solo baselines, the setups whose name contains it. Writes `bench-sched.json` to `$GPUKIT_BENCH_OUT` (default `target/bench`);
//! `bench/peer_sched.py` prints the table and draws the plot.

mod common;

use common::{GreedyPick, prompt_ids, sync, write_report};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use gpukit_llm::decode::{DecodeOptions, Replay};
use gpukit_llm::engine::Engine;
use gpukit_llm::model::{LoadOptions, Model};
use gpukit_llm::serving::{BatchEngine, Command, Event, Pacing, Request, ServeOptions};
use gpukit_ops::Device;
use gpukit_ops::sampling::SamplingParams;
use gpukit_sched::{
    LanePriority, Pacer, QosClass, Runtime, SchedulerOptions, SharedPacer, Tenant, TenantSpec,
};
use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const PROMPT: usize = 4096;
/// Sequences of the best-effort batched decode, and each one's prompt and context.
const BATCH: usize = 64;
const BATCH_PROMPT: usize = 128;
const BATCH_CONTEXT: usize = 1024;
const GIB: usize = 1 << 30;

fn env_usize(name: &str, default: usize) -> Res<usize> {
    match std::env::var(name) {
        Ok(v) => Ok(v.trim().parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

fn load_model(dir: &Path, dev: &Device) -> Res<Model> {
    let m = Model::from_hf_dir(dir, dev, LoadOptions::default(), &mut |_, _| {})?;
    sync(dev)?;
    Ok(m)
}

/// Decodes `tokens` tokens after a 128-token prompt; returns each step's start (since `start`)
/// and wall time. Steps are fed to `pacer` when there is one.
fn decode(
    model: &Model,
    tokens: usize,
    pacer: Option<&SharedPacer>,
    start: Instant,
) -> Res<Vec<(Duration, Duration)>> {
    let prompt = prompt_ids(128, model.spec().vocab, 11);
    let mut session = model.session(prompt.len() + tokens + 4)?;
    let greedy = GreedyPick::new(model)?;
    let logits = model.forward(&mut session, &prompt)?;
    let id = greedy.pick(&logits)?;
    drop(logits);
    let opts = DecodeOptions {
        sampling: greedy.params(),
        recent: &[],
        first_step: 1,
        replay: Replay::Graph,
    };
    let mut step = model.decode_step(&mut session, id, opts)?;
    // The first steps capture the graph: not timed.
    for _ in 0..3 {
        step.run()?;
    }
    let mut times = Vec::with_capacity(tokens);
    for _ in 0..tokens {
        let t = Instant::now();
        step.run()?;
        let d = t.elapsed();
        let at = t.duration_since(start);
        if let Some(p) = pacer {
            p.observe(d);
        }
        times.push((at, d));
    }
    Ok(times)
}

/// What the best-effort tenant did.
struct Worked {
    /// Prompt tokens prefilled, or output tokens decoded.
    tokens: usize,
    seconds: f64,
    /// Times the pacer held a chunk or a step back.
    held: usize,
    /// When each chunk and each prompt ended (since `start`).
    chunk_ends: Vec<Duration>,
    prompt_ends: Vec<Duration>,
}

/// Prefills 4,096-token prompts in chunks until `stop`.
fn prefill_loop(
    model: &Model,
    chunk: usize,
    stop: &AtomicBool,
    pacer: Option<&SharedPacer>,
    start: Instant,
) -> Res<Worked> {
    let prompt = prompt_ids(PROMPT, model.spec().vocab, 5);
    let t = Instant::now();
    let (mut done, mut held) = (0, 0);
    let (mut chunk_ends, mut prompt_ends) = (Vec::new(), Vec::new());
    'outer: while !stop.load(Ordering::Relaxed) {
        let mut session = model.session(PROMPT)?;
        for part in prompt.chunks(chunk) {
            if let Some(p) = pacer {
                while let Err(wait) = p.try_launch() {
                    if stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    held += 1;
                    std::thread::sleep(wait.max(Duration::from_micros(50)));
                }
            }
            drop(model.forward(&mut session, part)?);
            // A chunk's kernels finish before the pacer is asked about the next.
            sync(model.device())?;
            chunk_ends.push(start.elapsed());
        }
        done += PROMPT;
        prompt_ends.push(start.elapsed());
    }
    Ok(Worked {
        tokens: done,
        seconds: t.elapsed().as_secs_f64(),
        held,
        chunk_ends,
        prompt_ends,
    })
}

/// The best-effort batched decode: a serving engine with [`BATCH`] sequences decoding, and
/// the count of tokens they have produced.
struct BatchDecode {
    engine: BatchEngine,
    produced: Arc<AtomicUsize>,
    /// The first failure a sequence reported.
    failed: Arc<Mutex<Option<String>>>,
    cancel: Vec<Arc<AtomicBool>>,
}

impl BatchDecode {
    /// Loads the model on `dev` and brings [`BATCH`] greedy sequences past their prompts and
    /// first decode steps (the steps' graphs captured), so that what follows is decode only.
    fn new(dir: &Path, dev: &Device) -> Res<BatchDecode> {
        let engine = Arc::new(Engine::load(
            dir,
            dev,
            LoadOptions::default(),
            &mut |_, _| {},
        )?);
        let vocab = engine.model().spec().vocab;
        let block_size = 16;
        let opts = ServeOptions {
            max_batch: BATCH,
            max_seq_len: BATCH_CONTEXT,
            kv_blocks: BATCH * BATCH_CONTEXT / block_size,
            block_size,
            max_step_tokens: 4096,
            max_waiting: BATCH,
            profile_every: 0,
        };
        let mut engine = BatchEngine::new(engine, opts)?;
        let produced = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(Mutex::new(None));
        let mut cancel = Vec::with_capacity(BATCH);
        for i in 0..BATCH {
            let (count, flag) = (produced.clone(), Arc::new(AtomicBool::new(false)));
            let failure = failed.clone();
            cancel.push(flag.clone());
            engine.submit(Request {
                prompt: prompt_ids(BATCH_PROMPT, vocab, 100 + i as u64),
                max_new_tokens: BATCH_CONTEXT - BATCH_PROMPT,
                sampling: SamplingParams::default(),
                repetition_window: 0,
                stop: Vec::new(),
                logprobs: false,
                ignore_eos: true,
                cancel: flag,
                sink: Box::new(move |e| {
                    match e {
                        Event::Text { tokens, .. } => {
                            count.fetch_add(tokens.len(), Ordering::Relaxed);
                        }
                        Event::Failed(e) => {
                            let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
                            f.get_or_insert(e.to_string());
                        }
                        Event::Done(_) => {}
                    }
                    true
                }),
            });
        }
        while produced.load(Ordering::Relaxed) < 4 * BATCH {
            engine.step()?;
            BatchDecode::check(&failed)?;
        }
        sync(dev)?;
        Ok(BatchDecode {
            engine,
            produced,
            failed,
            cancel,
        })
    }

    /// The first failure of a sequence, as an error.
    fn check(failed: &Mutex<Option<String>>) -> Res<()> {
        match &*failed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(format!("a sequence of the batch failed: {e}").into()),
            None => Ok(()),
        }
    }

    /// Runs the engine on its own thread ([`BatchEngine::run`], asking `pacer` before each step
    /// when there is one) until `stop`; then cancels the sequences.
    fn run(self, stop: &AtomicBool, pacer: Option<&SharedPacer>) -> Res<Worked> {
        let engine = match pacer {
            Some(p) => self.engine.with_pacing(Pacing::Follows(p.clone())),
            None => self.engine,
        };
        let metrics = engine.metrics();
        let (tx, rx) = mpsc::channel::<Command>();
        let t = Instant::now();
        let before = self.produced.load(Ordering::Relaxed);
        let thread = std::thread::spawn(move || engine.run(rx));
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let tokens = self.produced.load(Ordering::Relaxed) - before;
        let seconds = t.elapsed().as_secs_f64();
        for c in &self.cancel {
            c.store(true, Ordering::Relaxed);
        }
        drop(tx);
        thread.join().map_err(|_| "the engine thread panicked")?;
        BatchDecode::check(&self.failed)?;
        let held = metrics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .paced_total;
        Ok(Worked {
            tokens,
            seconds,
            held: held as usize,
            chunk_ends: Vec::new(),
            prompt_ends: Vec::new(),
        })
    }
}

/// What the best-effort tenant runs: a model to prefill with, or a decoding batch.
enum Work {
    Prefill(Model),
    Decode(BatchDecode),
}

impl Work {
    fn load(load: Load, models: &Models, dev: &Device) -> Res<Work> {
        Ok(match load {
            Load::Prefill => Work::Prefill(load_model(&models.large, dev)?),
            Load::Decode => Work::Decode(BatchDecode::new(&models.large, dev)?),
        })
    }

    /// Warms the prefill's kernels (the batch is warm once made).
    fn warm(&self, chunk: usize) -> Res<()> {
        if let Work::Prefill(m) = self {
            let mut s = m.session(PROMPT)?;
            drop(m.forward(&mut s, &prompt_ids(chunk, m.spec().vocab, 3))?);
            sync(m.device())?;
        }
        Ok(())
    }

    /// Works until `stop`.
    fn run(
        self,
        chunk: usize,
        stop: &AtomicBool,
        pacer: Option<&SharedPacer>,
        start: Instant,
    ) -> Res<Worked> {
        match self {
            Work::Prefill(m) => prefill_loop(&m, chunk, stop, pacer, start),
            Work::Decode(b) => b.run(stop, pacer),
        }
    }
}

/// The best-effort tenant's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    Prefill,
    Decode,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Prefill => "prefill",
            Load::Decode => "decode",
        }
    }

    fn parse(s: &str) -> Res<Load> {
        match s.trim() {
            "prefill" => Ok(Load::Prefill),
            "decode" => Ok(Load::Decode),
            other => Err(format!("GPUKIT_SCHED_LOADS: `{other}` is not prefill or decode").into()),
        }
    }
}

/// Step-time quantiles and the stalls: steps over 3× the median, the kind of event that sets
/// the p99.
fn stats(steps: &[(Duration, Duration)]) -> Value {
    let mut ms: Vec<f64> = steps.iter().map(|(_, d)| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let q = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
    let stalls = ms.iter().filter(|&&m| m > 3.0 * q(0.5)).count();
    json!({"p50_ms": q(0.5), "p90_ms": q(0.9), "p99_ms": q(0.99), "max_ms": q(1.0),
           "tokens": ms.len(), "stalls": stalls})
}

/// How many of `ends` fall inside the decode's timed window (to set beside its stalls: one
/// stall per chunk, or per prompt, points at what the decode waits for).
fn during(ends: &[Duration], steps: &[(Duration, Duration)]) -> usize {
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
        return 0;
    };
    let window = first.0..last.0 + last.1;
    ends.iter().filter(|e| window.contains(e)).count()
}

/// Where each tenant's model lives.
struct Placement {
    guaranteed: Tenant,
    best_effort: Tenant,
    /// The guaranteed lane's priority (`Normal` for the same priority as the other).
    urgent: LanePriority,
    pacing: bool,
}

struct Models {
    small: PathBuf,
    large: PathBuf,
}

/// What the best-effort tenant did, as the report gives it.
fn worked(load: Load, w: &Worked, g: Option<&[(Duration, Duration)]>) -> Value {
    let mut out = json!({
        "load": load.name(),
        "tokens_per_s": w.tokens as f64 / w.seconds,
        "held": w.held,
    });
    if load == Load::Prefill {
        out["prompts"] = json!(w.tokens / PROMPT);
        if let Some(g) = g {
            out["chunks_during_decode"] = json!(during(&w.chunk_ends, g));
            out["prompts_during_decode"] = json!(during(&w.prompt_ends, g));
        }
    }
    out
}

/// One setup: the guaranteed decode beside the best-effort load (either may be absent).
fn run_together(
    models: &Models,
    place: &Placement,
    with_g: bool,
    be: Option<Load>,
    tokens: usize,
    chunk: usize,
    objective: Option<Duration>,
) -> Res<Value> {
    let g_lane = place.guaranteed.lane(place.urgent)?;
    // What earlier setups freed goes back to the driver: each setup starts from the same pool.
    g_lane.device().pool().empty_cache()?;
    let be_lane = place.best_effort.lane(LanePriority::Normal)?;
    let g_dev = Device::cuda(&g_lane)?;
    let be_dev = Device::cuda(&be_lane)?;
    let small = if with_g {
        Some(load_model(&models.small, &g_dev)?)
    } else {
        None
    };
    let work = match be {
        Some(load) => Some(Work::load(load, models, &be_dev)?),
        None => None,
    };
    let pacer = match (place.pacing, objective) {
        // Slices long enough for a few chunks (a 512-token chunk of the 8B model takes ~10 ms):
        // the budget then really bounds the best-effort duty cycle.
        (true, Some(o)) => Some(SharedPacer::new(Pacer::new(
            o,
            Duration::from_millis(50),
            1,
            16,
        ))),
        _ => None,
    };
    // Warm-up: kernel modules, GEMM plans and graphs of both.
    if let Some(m) = &small {
        decode(m, 8, None, Instant::now())?;
    }
    if let Some(w) = &work {
        w.warm(chunk)?;
    }
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let (g, done) = std::thread::scope(|scope| -> Res<_> {
        let done = work.map(|w| {
            let (stop, pacer) = (&stop, pacer.as_ref());
            scope.spawn(move || w.run(chunk, stop, pacer, start))
        });
        let g = match &small {
            Some(m) => {
                // Let the best-effort work get going first.
                if done.is_some() {
                    std::thread::sleep(Duration::from_millis(300));
                }
                Some(decode(m, tokens, pacer.as_ref(), start))
            }
            None => {
                std::thread::sleep(Duration::from_secs(3));
                None
            }
        };
        stop.store(true, Ordering::Relaxed);
        let done = done.map(|h| h.join().map_err(|_| "the best-effort thread panicked"));
        Ok((g, done))
    })?;
    let mut out = json!({});
    let g = g.transpose()?;
    if let Some(g) = &g {
        out["guaranteed"] = stats(g);
    }
    if let (Some(load), Some(done)) = (be, done) {
        out["best_effort"] = worked(load, &done??, g.as_deref());
    }
    Ok(out)
}

/// The role of a child process in the time-sliced setup: runs one tenant alone, prints JSON.
/// The best-effort child prints `running` once its load runs, and goes on until its standard
/// input closes.
fn child(role: &str, load: Load, models: &Models, tokens: usize, chunk: usize) -> Res<()> {
    let rt = Runtime::with_devices(&[0])?;
    let dev = rt.device(0)?;
    let lane = dev.default_tenant().lane(LanePriority::Normal)?;
    let d = Device::cuda(&lane)?;
    let out = if role == "guaranteed" {
        let m = load_model(&models.small, &d)?;
        decode(&m, 8, None, Instant::now())?;
        json!({"guaranteed": stats(&decode(&m, tokens, None, Instant::now())?)})
    } else {
        let work = Work::load(load, models, &d)?;
        work.warm(chunk)?;
        let stop = AtomicBool::new(false);
        let w = std::thread::scope(|scope| {
            let h = scope.spawn(|| work.run(chunk, &stop, None, Instant::now()));
            println!("running");
            let _ = std::io::Write::flush(&mut std::io::stdout());
            // Until the parent closes our input: the other process has finished.
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            stop.store(true, Ordering::Relaxed);
            h.join().map_err(|_| "the best-effort thread panicked")
        })??;
        json!({"best_effort": worked(load, &w, None)})
    };
    println!("{out}");
    Ok(())
}

/// The two tenants in two processes: the guaranteed one starts once the best-effort one is
/// running, which goes on until the guaranteed one is done.
fn processes(load: Load) -> Res<Value> {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe()?;
    let mut be = Command::new(&exe)
        .env("GPUKIT_SCHED_ROLE", "best-effort")
        .env("GPUKIT_SCHED_LOADS", load.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = std::io::BufReader::new(be.stdout.take().ok_or("no child stdout")?).lines();
    if !lines.any(|l| l.is_ok_and(|l| l == "running")) {
        return Err("the best-effort process ended before running".into());
    }
    let g = Command::new(&exe)
        .env("GPUKIT_SCHED_ROLE", "guaranteed")
        .output()?;
    drop(be.stdin.take());
    let be_last = lines.map_while(Result::ok).last().unwrap_or_default();
    let status = be.wait()?;
    if !g.status.success() || !status.success() {
        return Err(format!("a child process failed: {} / {status}", g.status).into());
    }
    let g_text = String::from_utf8_lossy(&g.stdout);
    let g: Value = serde_json::from_str(g_text.lines().last().unwrap_or_default())?;
    let be: Value = serde_json::from_str(&be_last)?;
    Ok(json!({"guaranteed": g["guaranteed"], "best_effort": be["best_effort"]}))
}

fn main() -> Res<()> {
    let root = PathBuf::from(
        std::env::var("GPUKIT_DECODE_MODELS")
            .unwrap_or_else(|_| "/tmp/gpukit-decode-models".into()),
    );
    let models = Models {
        small: root.join("llama3.2-1b"),
        large: root.join("llama3.1-8b"),
    };
    for m in [&models.small, &models.large] {
        if !m.join(".complete").is_file() {
            return Err(format!(
                "{} is missing: python3 bench/decode_models.py {} --models llama3.2-1b,llama3.1-8b",
                m.display(),
                root.display()
            )
            .into());
        }
    }
    let tokens = env_usize("GPUKIT_SCHED_TOKENS", 1000)?;
    let chunk = env_usize("GPUKIT_SCHED_CHUNK", 512)?;
    let loads: Vec<Load> = std::env::var("GPUKIT_SCHED_LOADS")
        .unwrap_or_else(|_| "prefill,decode".into())
        .split(',')
        .filter(|l| !l.trim().is_empty())
        .map(Load::parse)
        .collect::<Res<_>>()?;
    if let Ok(role) = std::env::var("GPUKIT_SCHED_ROLE") {
        let load = *loads.first().ok_or("GPUKIT_SCHED_LOADS names no load")?;
        return child(&role, load, &models, tokens, chunk);
    }
    let shares: Vec<f64> = std::env::var("GPUKIT_SCHED_SHARES")
        .unwrap_or_else(|_| "0.25,0.5,0.75".into())
        .split(',')
        .map(|s| s.trim().parse::<f64>().map_err(|e| format!("{s}: {e}")))
        .collect::<Result<_, _>>()?;
    let rt = Runtime::with_devices(&[0])?;
    let dev = rt.device(0)?;
    println!(
        "CUDA_DEVICE_MAX_CONNECTIONS={}",
        std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").unwrap_or_else(|_| "unset (8)".into())
    );
    let mut rows: Vec<Value> = Vec::new();
    let record =
        |rows: &mut Vec<Value>, setup: &str, load: Option<Load>, mut r: Value| -> Res<()> {
            r["setup"] = json!(setup);
            r["load"] = json!(load.map(Load::name));
            println!("{r}");
            rows.push(r);
            let report = json!({
                "device": dev.device().properties().name,
                "tokens": tokens,
                "chunk": chunk,
                "prompt": PROMPT,
                "batch": BATCH,
                "batch_prompt": BATCH_PROMPT,
                "rows": rows,
            });
            write_report("bench-sched.json", &report)
        };
    let only = std::env::var("GPUKIT_SCHED_ONLY").ok();
    let keep = |name: &str| only.as_ref().is_none_or(|o| name.contains(o.as_str()));
    let plain = || Placement {
        guaranteed: dev.default_tenant(),
        best_effort: dev.default_tenant(),
        urgent: LanePriority::Normal,
        pacing: false,
    };
    let solo_g = run_together(&models, &plain(), true, None, tokens, chunk, None)?;
    let objective =
        Duration::from_secs_f64(solo_g["guaranteed"]["p50_ms"].as_f64().unwrap_or(1.0) * 1.1e-3);
    record(&mut rows, "alone: guaranteed", None, solo_g)?;
    let admit = |opts: SchedulerOptions, share: Option<f64>, pacing: bool| -> Res<Placement> {
        let sched = dev.scheduler(opts)?;
        let mut g = TenantSpec::new("decode", QosClass::Guaranteed).memory(8 * GIB);
        g.sm_share = share;
        Ok(Placement {
            guaranteed: sched.admit(&g)?,
            best_effort: sched.admit(&TenantSpec::new("batch", QosClass::BestEffort))?,
            urgent: LanePriority::High,
            pacing,
        })
    };
    // What a partition costs the decode by itself: fewer SMs draw less memory bandwidth.
    for &share in &shares {
        let name = format!("alone: guaranteed, partition {share:.2}");
        if keep(&name) {
            let place = admit(SchedulerOptions::default(), Some(share), false)?;
            let r = run_together(&models, &place, true, None, tokens, chunk, None)?;
            record(&mut rows, &name, None, r)?;
        }
    }
    for &load in &loads {
        let be = Some(load);
        let solo_be = run_together(&models, &plain(), false, be, tokens, chunk, None)?;
        record(&mut rows, "alone: best-effort", be, solo_be)?;
        if keep("shared, same priority") {
            let shared = run_together(&models, &plain(), true, be, tokens, chunk, None)?;
            record(&mut rows, "shared, same priority", be, shared)?;
        }
        if keep("stream priorities") {
            let prio = admit(
                SchedulerOptions {
                    no_partitions: true,
                    ..Default::default()
                },
                None,
                false,
            )?;
            let r = run_together(&models, &prio, true, be, tokens, chunk, Some(objective))?;
            record(&mut rows, "stream priorities", be, r)?;
        }
        for &share in &shares {
            for pacing in [false, true] {
                let name = format!(
                    "partitions {share:.2}{}",
                    if pacing { " + pacing" } else { "" }
                );
                if !keep(&name) {
                    continue;
                }
                let place = admit(SchedulerOptions::default(), Some(share), pacing)?;
                let r = run_together(&models, &place, true, be, tokens, chunk, Some(objective))?;
                record(&mut rows, &name, be, r)?;
            }
        }
        if keep("two processes") {
            dev.pool().empty_cache()?;
            let r = processes(load)?;
            record(&mut rows, "two processes", be, r)?;
        }
    }
    Ok(())
}
