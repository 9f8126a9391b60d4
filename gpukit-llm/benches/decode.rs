//! Batch-1 decode benchmark (GPU machine): random-weight bf16 models at real shapes, built by
//! `bench/decode_models.py` into `$GPUKIT_DECODE_MODELS` (default `/tmp/gpukit-decode-models`;
//! `run.sh bench` and `cargo xtask bench` build them first).
//!
//! For each model and prompt length (`$GPUKIT_DECODE_PROMPTS`, default `128,512,2048` random
//! ids), after a 4-token warm-up generation at that length (kernel modules, GEMM plans), it
//! measures what a user of the engine sees:
//! - **TTFT**: the prompt's forward pass (GEMMs + flash attention) and the first greedy id on the
//!   device, read back to the host;
//! - **decode**: `$GPUKIT_DECODE_TOKENS − 1` (default 255) further tokens through
//!   [`gpukit_llm::decode::DecodeStep`] — the first step eager, then one CUDA graph replay per
//!   token, each id read back to the host — in ms/token over all of them (`ms_per_token`) and
//!   over the replays only (`ms_per_token_graph`);
//! - **peak device memory** of the generation: the pool's peaks, restarted after loading
//!   (allocated blocks, and reserved = allocated + the pool's cache), beside the weights and the
//!   KV cache it needs.
//!
//! Writes `bench-decode.json` to `$GPUKIT_BENCH_OUT` (default `target/bench`);
//! `bench/peer_decode.py` then times HF transformers on the same models and prompts in the same
//! run and prints the table (ms/token, tokens/s, % of roofline, ratio, TTFT, memory) with a PNG
//! chart. `GPUKIT_BENCH_FILTER=<substring>` keeps the models whose name contains it;
//! `GPUKIT_DECODE_GRAPH=0` keeps every step eager (for per-kernel profiles under `ncu`).

mod common;

use common::{GreedyPick, prompt_ids, sync, write_report};
use std::path::PathBuf;
use std::time::Instant;

use gpukit_llm::decode::{DecodeOptions, Replay};
use gpukit_llm::engine::ComputeDevice;
use gpukit_llm::model::{LoadOptions, Model};
use gpukit_ops::Device;
use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn env_list(name: &str, default: &str) -> Res<Vec<usize>> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    text.split(',')
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|e| format!("{name}={text}: {e}").into())
        })
        .collect()
}

/// One generation: TTFT, decode times, peaks.
fn generate(
    compute: &ComputeDevice,
    model: &Model,
    prompt: &[u32],
    new_tokens: usize,
    replay: Replay,
) -> Res<Value> {
    let dev = compute.device();
    compute.empty_cache()?;
    compute.reset_peaks();
    let mut session = model.session(prompt.len() + new_tokens)?;
    let greedy = GreedyPick::new(model)?;
    sync(dev)?;
    let t = Instant::now();
    let logits = model.forward(&mut session, prompt)?;
    let id = greedy.pick(&logits)?;
    let ttft = t.elapsed().as_secs_f64();
    drop(logits);
    let steps = new_tokens - 1;
    let opts = DecodeOptions {
        sampling: greedy.params(),
        recent: &[],
        first_step: 1,
        replay,
    };
    let mut step = model.decode_step(&mut session, id, opts)?;
    let t = Instant::now();
    let mut replay_start = None;
    for i in 0..steps {
        if i == 2 {
            replay_start = Some(Instant::now());
        }
        step.run()?;
    }
    let total = t.elapsed().as_secs_f64();
    let replays = replay_start.map(|r| (r.elapsed().as_secs_f64(), steps - 2));
    drop(step);
    let s = model.spec();
    let kv_bytes = 2
        * s.n_layers
        * s.n_kv_heads
        * s.head_dim
        * session.capacity()
        * model.dtype().size_in_bytes();
    Ok(json!({
        "prompt": prompt.len(),
        "new_tokens": new_tokens,
        "ttft_ms": ttft * 1e3,
        "ms_per_token": total * 1e3 / steps as f64,
        "ms_per_token_graph": replays.map(|(t, n)| t * 1e3 / n as f64),
        "kv_cache_bytes": kv_bytes,
        "peak_allocated_bytes": compute.peak_device_bytes(),
        "peak_reserved_bytes": compute.peak_reserved_bytes(),
    }))
}

fn main() -> Res<()> {
    let root = PathBuf::from(
        std::env::var("GPUKIT_DECODE_MODELS")
            .unwrap_or_else(|_| "/tmp/gpukit-decode-models".into()),
    );
    let prompts = env_list("GPUKIT_DECODE_PROMPTS", "128,512,2048")?;
    let new_tokens = env_list("GPUKIT_DECODE_TOKENS", "256")?
        .first()
        .copied()
        .unwrap_or(256)
        .max(4);
    let use_graph = std::env::var("GPUKIT_DECODE_GRAPH").map_or(true, |v| v != "0");
    let replay = if use_graph {
        Replay::Graph
    } else {
        Replay::Eager
    };
    let filter = std::env::var("GPUKIT_BENCH_FILTER").ok();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map_err(|e| {
            format!(
                "{}: {e}; build the models first: python3 bench/decode_models.py {}",
                root.display(),
                root.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(".complete").is_file())
        .filter(|p| {
            filter
                .as_ref()
                .is_none_or(|f| p.to_string_lossy().contains(f.as_str()))
        })
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "no complete models under {}: python3 bench/decode_models.py {}",
            root.display(),
            root.display()
        )
        .into());
    }
    let compute = ComputeDevice::open("cuda")?;
    let dev = compute.device().clone();
    println!(
        "{:<16} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "model", "prompt", "TTFT ms", "ms/token", "graph ms", "peak MiB", "need MiB"
    );
    let mut models = Vec::new();
    for dir in dirs {
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        // The previous model's freed segments go back to the driver first: otherwise this
        // model's weights are carved out of them and the rest stays reserved (a fresh process
        // loading one model has no such cache).
        compute.empty_cache()?;
        let t = Instant::now();
        let model = Model::from_hf_dir(&dir, &dev, LoadOptions::default(), &mut |_, _| {})?;
        sync(&dev)?;
        let load_s = t.elapsed().as_secs_f64();
        let mut runs = Vec::new();
        for (i, &p) in prompts.iter().enumerate() {
            let ids = prompt_ids(p, model.spec().vocab, 1000 + i as u64);
            // Warm-up at this prompt length: kernel modules, GEMM plans for the prompt's shapes.
            generate(&compute, &model, &ids, 4, replay)?;
            let r = generate(&compute, &model, &ids, new_tokens, replay)?;
            let mib = |k: &str| r[k].as_f64().unwrap_or(f64::NAN) / (1u64 << 20) as f64;
            println!(
                "{:<16} {:>7} {:>10.2} {:>10.3} {:>10.3} {:>10.0} {:>10.0}",
                name,
                p,
                r["ttft_ms"].as_f64().unwrap_or(f64::NAN),
                r["ms_per_token"].as_f64().unwrap_or(f64::NAN),
                r["ms_per_token_graph"].as_f64().unwrap_or(f64::NAN),
                mib("peak_reserved_bytes"),
                (model.weight_bytes() as f64) / (1u64 << 20) as f64 + mib("kv_cache_bytes"),
            );
            runs.push(r);
        }
        models.push(json!({
            "name": name,
            "dir": dir,
            "weight_bytes": model.weight_bytes(),
            "load_s": load_s,
            "runs": runs,
        }));
    }
    let Device::Cuda(c) = &dev else {
        return Err("not a CUDA device".into());
    };
    let report = json!({
        "device": c.stream().device().properties().name,
        "graph": use_graph,
        "models": models,
    });
    write_report("bench-decode.json", &report).map_err(|e| e.to_string())?;
    Ok(())
}
