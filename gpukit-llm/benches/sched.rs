//! Isolation benchmark of the scheduler (GPU machine): a latency-critical tenant beside a
//! throughput tenant on one GPU.
//!
//! The guaranteed tenant decodes Llama-3.2-1B at batch 1 (one CUDA graph replay per token, each
//! id read back); the best-effort tenant prefills Llama-3.1-8B with 4,096-token prompts back to
//! back, in chunks of `$GPUKIT_SCHED_CHUNK` (default 512) tokens. Both are random-weight bf16
//! models at real shapes from `bench/decode_models.py` in `$GPUKIT_DECODE_MODELS`. Setups, in
//! one run:
//! - **alone**: each tenant by itself;
//! - **shared**: both on lanes of the default tenant at the same priority (no isolation);
//! - **priorities**: a scheduler without partitions (guaranteed lanes most urgent);
//! - **partitions**: the scheduler with green-context partitions, the guaranteed share swept
//!   over `$GPUKIT_SCHED_SHARES` (default `0.25,0.5,0.75`), with and without pacing (the
//!   best-effort tenant asks the [`Pacer`] before each chunk; the objective is 1.1× the solo
//!   p50 step);
//! - **processes**: the two tenants in two processes, time-sliced by the driver.
//!
//! For each: the guaranteed tenant's time per output token (p50, p99, max over
//! `$GPUKIT_SCHED_TOKENS`, default 1,000) and the best-effort tenant's prefill tokens/s.
//! `$GPUKIT_SCHED_ONLY=<substring>` keeps, besides the two solo baselines, the setups whose
//! name contains it. Writes `bench-sched.json` to `$GPUKIT_BENCH_OUT` (default `target/bench`);
//! `bench/peer_sched.py` prints the table and draws the plot.

mod common;

use common::{GreedyPick, prompt_ids, sync, write_report};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpukit_llm::decode::{DecodeOptions, Replay};
use gpukit_llm::model::{LoadOptions, Model};
use gpukit_ops::Device;
use gpukit_sched::{
    LanePriority, Pacer, QosClass, Runtime, SchedulerOptions, SharedPacer, Tenant, TenantSpec,
};
use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const PROMPT: usize = 4096;
const GIB: usize = 1 << 30;

fn env_usize(name: &str, default: usize) -> Res<usize> {
    match std::env::var(name) {
        Ok(v) => Ok(v.trim().parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

fn load(dir: &Path, dev: &Device) -> Res<Model> {
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

/// What the best-effort prefill did.
struct Prefilled {
    tokens: usize,
    seconds: f64,
    /// Chunks the pacer held back.
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
) -> Res<Prefilled> {
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
    Ok(Prefilled {
        tokens: done,
        seconds: t.elapsed().as_secs_f64(),
        held,
        chunk_ends,
        prompt_ends,
    })
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

/// One setup: the guaranteed decode beside the best-effort prefill (either may be absent).
fn run_together(
    models: &Models,
    place: &Placement,
    with_g: bool,
    with_be: bool,
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
        Some(load(&models.small, &g_dev)?)
    } else {
        None
    };
    let large = if with_be {
        Some(load(&models.large, &be_dev)?)
    } else {
        None
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
    // Warm-up: kernel modules and GEMM plans of both shapes.
    if let Some(m) = &small {
        decode(m, 8, None, Instant::now())?;
    }
    if let Some(m) = &large {
        let mut s = m.session(PROMPT)?;
        drop(m.forward(&mut s, &prompt_ids(chunk, m.spec().vocab, 3))?);
        sync(m.device())?;
    }
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let (g, be) = std::thread::scope(|scope| -> Res<_> {
        let be = large.as_ref().map(|m| {
            let (stop, pacer) = (&stop, pacer.as_ref());
            scope.spawn(move || prefill_loop(m, chunk, stop, pacer, start))
        });
        let g = match &small {
            Some(m) => {
                // Let the best-effort work get going first.
                if be.is_some() {
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
        let be = be.map(|h| h.join().map_err(|_| "the prefill thread panicked"));
        Ok((g, be))
    })?;
    let mut out = json!({});
    let g = g.transpose()?;
    if let Some(g) = &g {
        out["guaranteed"] = stats(g);
    }
    if let Some(be) = be {
        let p = be??;
        out["best_effort"] = json!({
            "prefill_tokens_per_s": p.tokens as f64 / p.seconds,
            "prompts": p.tokens / PROMPT,
            "chunks_held": p.held,
        });
        if let Some(g) = &g {
            out["best_effort"]["chunks_during_decode"] = json!(during(&p.chunk_ends, g));
            out["best_effort"]["prompts_during_decode"] = json!(during(&p.prompt_ends, g));
        }
    }
    Ok(out)
}

/// The role of a child process in the time-sliced setup: runs one tenant alone, prints JSON.
/// The best-effort child prints `prefilling` once its loop runs, and prefills until its
/// standard input closes.
fn child(role: &str, models: &Models, tokens: usize, chunk: usize) -> Res<()> {
    let rt = Runtime::with_devices(&[0])?;
    let dev = rt.device(0)?;
    let lane = dev.default_tenant().lane(LanePriority::Normal)?;
    let d = Device::cuda(&lane)?;
    let out = if role == "guaranteed" {
        let m = load(&models.small, &d)?;
        decode(&m, 8, None, Instant::now())?;
        json!({"guaranteed": stats(&decode(&m, tokens, None, Instant::now())?)})
    } else {
        let m = load(&models.large, &d)?;
        let stop = AtomicBool::new(false);
        let p = std::thread::scope(|scope| {
            let h = scope.spawn(|| prefill_loop(&m, chunk, &stop, None, Instant::now()));
            println!("prefilling");
            let _ = std::io::Write::flush(&mut std::io::stdout());
            // Until the parent closes our input: the other process has finished.
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            stop.store(true, Ordering::Relaxed);
            h.join().map_err(|_| "the prefill thread panicked")
        })??;
        json!({"best_effort": {"prefill_tokens_per_s": p.tokens as f64 / p.seconds,
                               "prompts": p.tokens / PROMPT}})
    };
    println!("{out}");
    Ok(())
}

/// The two tenants in two processes: the guaranteed one starts once the best-effort one is
/// prefilling, which goes on until the guaranteed one is done.
fn processes() -> Res<Value> {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe()?;
    let mut be = Command::new(&exe)
        .env("GPUKIT_SCHED_ROLE", "best-effort")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = std::io::BufReader::new(be.stdout.take().ok_or("no child stdout")?).lines();
    if !lines.any(|l| l.is_ok_and(|l| l == "prefilling")) {
        return Err("the best-effort process ended before prefilling".into());
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
    if let Ok(role) = std::env::var("GPUKIT_SCHED_ROLE") {
        return child(&role, &models, tokens, chunk);
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
    let record = |rows: &mut Vec<Value>, setup: String, mut r: Value| -> Res<()> {
        r["setup"] = json!(setup);
        println!("{r}");
        rows.push(r);
        let report = json!({
            "device": dev.device().properties().name,
            "tokens": tokens,
            "chunk": chunk,
            "prompt": PROMPT,
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
    let solo_g = run_together(&models, &plain(), true, false, tokens, chunk, None)?;
    let objective =
        Duration::from_secs_f64(solo_g["guaranteed"]["p50_ms"].as_f64().unwrap_or(1.0) * 1.1e-3);
    record(&mut rows, "alone: guaranteed".into(), solo_g)?;
    let solo_be = run_together(&models, &plain(), false, true, tokens, chunk, None)?;
    record(&mut rows, "alone: best-effort".into(), solo_be)?;
    if keep("shared, same priority") {
        let shared = run_together(&models, &plain(), true, true, tokens, chunk, None)?;
        record(&mut rows, "shared, same priority".into(), shared)?;
    }

    let admit = |opts: SchedulerOptions, share: Option<f64>, pacing: bool| -> Res<Placement> {
        let sched = dev.scheduler(opts)?;
        let mut g = TenantSpec::new("decode", QosClass::Guaranteed).memory(8 * GIB);
        g.sm_share = share;
        Ok(Placement {
            guaranteed: sched.admit(&g)?,
            best_effort: sched.admit(&TenantSpec::new("prefill", QosClass::BestEffort))?,
            urgent: LanePriority::High,
            pacing,
        })
    };
    if keep("stream priorities") {
        let prio = admit(
            SchedulerOptions {
                no_partitions: true,
                ..Default::default()
            },
            None,
            false,
        )?;
        let r = run_together(&models, &prio, true, true, tokens, chunk, Some(objective))?;
        record(&mut rows, "stream priorities".into(), r)?;
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
            let r = run_together(&models, &place, true, true, tokens, chunk, Some(objective))?;
            record(&mut rows, name, r)?;
        }
    }
    if keep("two processes") {
        dev.pool().empty_cache()?;
        let r = processes()?;
        record(&mut rows, "two processes".into(), r)?;
    }
    Ok(())
}
