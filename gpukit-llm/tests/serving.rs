//! The serving engine on the small Qwen2 of `common`: the paged forward pass against the
//! ordinary one, and batch invariance — each request's tokens and log-probabilities (greedy and
//! seeded sampling) bit for bit the same alone, in a batch with others in either order, with
//! its prompt in different chunks, with prefix-cache hits, and under a KV budget that forces
//! preemption. On the CPU and (GPU test) on CUDA.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use gpukit_llm::batch::{PagedKvCache, PagedStep, StepBatch};
use gpukit_llm::engine::{ComputeDevice, Engine, StopReason};
use gpukit_llm::model::LoadOptions;
use gpukit_llm::profile::Part;
use gpukit_llm::serving::{BatchEngine, Event, Metrics, Request, RequestError, ServeOptions};
use gpukit_ops::sampling::SamplingParams;
use gpukit_ops::{DType, Device, ops};

mod common;

fn load(device: &Device) -> (tempfile::TempDir, Arc<Engine>) {
    let dir = tempfile::tempdir().unwrap();
    common::write_model(dir.path());
    let engine = Engine::load(dir.path(), device, LoadOptions::default(), &mut |_, _| {}).unwrap();
    (dir, Arc::new(engine))
}

/// A prompt of `n` byte tokens (ids below 256), varied by `salt`.
fn prompt(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 7 + salt * 13 + 1) % 250)
        .collect()
}

/// What a request produced: its token ids with their log-probabilities' bits, and the end.
type Outcome = (Vec<(u32, u32)>, Option<StopReason>, Option<RequestError>);

fn request(
    prompt: Vec<u32>,
    max_new_tokens: usize,
    sampling: SamplingParams,
) -> (Request, Arc<Mutex<Outcome>>) {
    let out: Arc<Mutex<Outcome>> = Arc::new(Mutex::new((Vec::new(), None, None)));
    let sink_out = out.clone();
    let req = Request {
        prompt,
        max_new_tokens,
        sampling,
        repetition_window: 0,
        stop: Vec::new(),
        logprobs: true,
        ignore_eos: false,
        cancel: Arc::new(AtomicBool::new(false)),
        sink: Box::new(move |e| {
            let mut o = sink_out.lock().unwrap();
            match e {
                Event::Text { tokens, .. } => {
                    o.0.extend(tokens.iter().map(|t| (t.id, t.logprob.unwrap().to_bits())))
                }
                Event::Done(f) => o.1 = Some(f.reason),
                Event::Failed(e) => o.2 = Some(e),
            }
            true
        }),
    };
    (req, out)
}

fn options(step_tokens: usize, kv_blocks: usize, block_size: usize) -> ServeOptions {
    ServeOptions {
        max_batch: 8,
        max_seq_len: 128,
        kv_blocks,
        block_size,
        max_step_tokens: step_tokens,
        max_waiting: 64,
        profile_every: 0,
    }
}

/// The requests of the test: (prompt, max new tokens, sampling).
fn workload() -> Vec<(Vec<u32>, usize, SamplingParams)> {
    let seeded = |seed| SamplingParams {
        temperature: 0.9,
        top_p: 0.95,
        seed,
        ..Default::default()
    };
    vec![
        (prompt(41, 1), 12, SamplingParams::default()),
        (prompt(7, 2), 20, seeded(5)),
        (prompt(90, 3), 9, seeded(11)),
        // The first request's prompt again plus more: a prefix-cache hit.
        (
            [prompt(41, 1), prompt(6, 4)].concat(),
            10,
            SamplingParams::default(),
        ),
    ]
}

/// Runs `requests` (indices into the workload, submitted in this order) through one engine.
fn serve(engine: &Arc<Engine>, opts: ServeOptions, requests: &[usize]) -> (Vec<Outcome>, Metrics) {
    let work = workload();
    let mut e = BatchEngine::new(engine.clone(), opts).unwrap();
    let outs: Vec<_> = requests
        .iter()
        .map(|&i| {
            let (p, n, s) = work[i].clone();
            let (req, out) = request(p, n, s);
            e.submit(req);
            out
        })
        .collect();
    let mut steps = 0;
    while !e.is_idle() {
        e.step().unwrap();
        steps += 1;
        assert!(steps < 10_000, "the engine does not finish");
    }
    let mut back = vec![None; requests.len()];
    for (k, &i) in requests.iter().enumerate() {
        back[k] = Some((i, outs[k].lock().unwrap().clone()));
    }
    let mut back: Vec<(usize, Outcome)> = back.into_iter().map(Option::unwrap).collect();
    back.sort_by_key(|(i, _)| *i);
    let metrics = e.metrics().lock().unwrap().clone();
    (back.into_iter().map(|(_, o)| o).collect(), metrics)
}

fn invariance(device: &Device) {
    let (_dir, engine) = load(device);
    let n = workload().len();
    // Alone: one request per engine, whole prompts in one step.
    let alone: Vec<Outcome> = (0..n)
        .map(|i| serve(&engine, options(256, 64, 16), &[i]).0.remove(0))
        .collect();
    for (i, o) in alone.iter().enumerate() {
        assert!(o.2.is_none(), "request {i} failed: {:?}", o.2);
        assert_eq!(o.1, Some(StopReason::MaxTokens), "request {i}");
        assert_eq!(o.0.len(), workload()[i].1, "request {i}");
    }
    let all: Vec<usize> = (0..n).collect();
    let reversed: Vec<usize> = (0..n).rev().collect();
    // (what, options, order, prefix-cache hits expected, preemptions expected)
    let cases = [
        (
            "together, 256-token steps",
            options(256, 64, 16),
            all.clone(),
            false,
            false,
        ),
        // Every step profiled: marks between the kernels change nothing.
        (
            "reversed, 16-token steps, profiled",
            ServeOptions {
                profile_every: 1,
                ..options(16, 64, 16)
            },
            reversed.clone(),
            false,
            false,
        ),
        (
            "together, 13-token steps, blocks of 4",
            options(13, 256, 4),
            all.clone(),
            true,
            false,
        ),
        // 8 blocks of 16: one 128-position sequence fits, all four do not — preemption.
        (
            "reversed, tight KV budget",
            options(64, 8, 16),
            reversed,
            false,
            true,
        ),
    ];
    for (what, opts, order, hits, preempts) in cases {
        let profiled = opts.profile_every > 0;
        let (got, m) = serve(&engine, opts, &order);
        if profiled {
            assert_eq!(m.profiled_steps, m.steps_total, "{what}");
            for part in Part::ALL {
                assert!(
                    m.profile.get(part) > 0.0,
                    "{what}: no time in {}: {m:?}",
                    part.name()
                );
            }
        } else {
            assert_eq!(m.profiled_steps, 0, "{what}");
        }
        if hits {
            assert!(
                m.cached_prompt_tokens_total >= 40,
                "{what}: no prefix-cache hit: {m:?}"
            );
        }
        if preempts {
            assert!(
                m.preemptions_total > 0,
                "{what}: nothing was preempted: {m:?}"
            );
        }
        for (i, (g, a)) in got.iter().zip(&alone).enumerate() {
            assert_eq!(g, a, "{what}: request {i} differs from its run alone");
        }
    }
}

#[test]
fn batched_requests_match_their_runs_alone_on_the_cpu() {
    invariance(&Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_batched_requests_match_their_runs_alone_on_cuda() {
    let dev = ComputeDevice::open("cuda").unwrap();
    invariance(dev.device());
}

/// The paged forward pass (two chunks through a shuffled block table) against the ordinary
/// forward pass over a contiguous cache.
fn paged_matches_forward(device: &Device) {
    let (_dir, engine) = load(device);
    let model = engine.model();
    let ids = prompt(37, 9);
    let mut session = model.session(64).unwrap();
    let want = model.forward_logits(&mut session, &ids).unwrap();
    let bs = 8;
    let cache = PagedKvCache::new(model, 12, bs).unwrap();
    let table: Vec<u32> = vec![7, 2, 11, 0, 5];
    let chunk = |from: usize, to: usize| StepBatch {
        ids: ids[from..to].to_vec(),
        seq: vec![0; to - from],
        pos: (from as u32..to as u32).collect(),
        slots: (from..to)
            .map(|p| table[p / bs] * bs as u32 + (p % bs) as u32)
            .collect(),
        block_tables: vec![table.clone()],
        logits_rows: vec![(to - from - 1) as u32],
    };
    model.forward_paged(&cache, &chunk(0, 20)).unwrap();
    let logits = model.forward_paged(&cache, &chunk(20, 37)).unwrap();
    let got = ops::to_dtype(&logits, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let (mut num, mut den) = (0f64, 0f64);
    for (g, w) in got.iter().zip(&want) {
        num += f64::from(g - w).powi(2);
        den += f64::from(*w).powi(2);
    }
    let rel = (num / den).sqrt();
    assert!(
        rel < 2e-2,
        "paged vs contiguous forward: relative error {rel}"
    );
    // A batch that names a slot outside its block table is refused before anything runs.
    let mut bad = chunk(0, 4);
    bad.slots[2] += 1;
    assert!(model.forward_paged(&cache, &bad).is_err());
}

#[test]
fn paged_forward_matches_the_forward_pass_on_the_cpu() {
    paged_matches_forward(&Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_paged_forward_matches_the_forward_pass_on_cuda() {
    let dev = ComputeDevice::open("cuda").unwrap();
    paged_matches_forward(dev.device());
}

/// Decode batches through a [`PagedStep`] (eagerly, then captured, then replayed with other
/// inputs of the same size class; on the CPU eagerly each time) give bit for bit the logits of
/// the eager paged forward pass, and a batch the step does not take is refused.
fn step_matches_forward_paged(device: &Device) {
    let (_dir, engine) = load(device);
    let model = engine.model();
    let bs = 8;
    let cache = PagedKvCache::new(model, 24, bs).unwrap();
    // Four sequences of different lengths, prompts written through the eager pass.
    let lens = [5usize, 19, 9, 30];
    let tables: Vec<Vec<u32>> = vec![vec![3], vec![10, 1, 4], vec![7, 2], vec![20, 11, 0, 5]];
    let prompts: Vec<Vec<u32>> = lens
        .iter()
        .zip(0u32..)
        .map(|(&n, s)| prompt(n, s))
        .collect();
    for (i, p) in prompts.iter().enumerate() {
        let t = &tables[i];
        let batch = StepBatch {
            ids: p[..p.len() - 1].to_vec(),
            seq: vec![0; p.len() - 1],
            pos: (0..p.len() as u32 - 1).collect(),
            slots: (0..p.len() - 1)
                .map(|q| t[q / bs] * bs as u32 + (q % bs) as u32)
                .collect(),
            block_tables: vec![t.clone()],
            logits_rows: vec![],
        };
        model.forward_paged(&cache, &batch).unwrap();
    }
    // A decode batch of the sequences `which`: each one's last prompt token.
    let decode = |which: &[usize]| {
        let mut b = StepBatch::default();
        for (row, &i) in which.iter().enumerate() {
            let q = lens[i] - 1;
            b.ids.push(prompts[i][q]);
            b.seq.push(row as u32);
            b.pos.push(q as u32);
            b.slots
                .push(tables[i][q / bs] * bs as u32 + (q % bs) as u32);
            b.block_tables.push(tables[i].clone());
            b.logits_rows.push(row as u32);
        }
        b
    };
    let bits = |t: &gpukit_ops::Tensor| -> Vec<u64> {
        t.to_vec_f64()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let mut step = PagedStep::new();
    // Three rows and four share a class (rows padded to 4): warm, capture, replay.
    for which in [&[0usize, 1, 2][..], &[3, 1, 0, 2], &[2, 0, 1], &[1]] {
        let b = decode(which);
        let want = bits(&model.forward_paged(&cache, &b).unwrap());
        let got = bits(&model.forward_paged_step(&cache, &b, &mut step).unwrap());
        assert_eq!(
            got, want,
            "{which:?}: the step's logits differ from the eager pass"
        );
    }
    let captured = if matches!(device, Device::Cuda(_)) {
        1
    } else {
        0
    };
    assert_eq!(step.graphs(), captured, "graphs of the class of 4 rows");
    // A prompt chunk is not a decode batch.
    let mut chunk = decode(&[0, 1]);
    chunk.seq[1] = 0;
    chunk.block_tables.truncate(1);
    chunk.logits_rows = vec![1];
    assert!(!PagedStep::takes(&chunk));
    assert!(model.forward_paged_step(&cache, &chunk, &mut step).is_err());
}

#[test]
fn decode_steps_match_the_eager_paged_pass_on_the_cpu() {
    step_matches_forward_paged(&Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_decode_steps_replay_as_graphs_and_match_the_eager_paged_pass_on_cuda() {
    let dev = ComputeDevice::open("cuda").unwrap();
    step_matches_forward_paged(dev.device());
}

/// Requests the engine cannot serve are refused through their sinks, and the engine goes on.
#[test]
fn bad_requests_are_refused_and_the_engine_goes_on() {
    let (_dir, engine) = load(&Device::Cpu);
    let mut e = BatchEngine::new(engine.clone(), options(64, 64, 16)).unwrap();
    let cases = [
        (Vec::new(), 4, SamplingParams::default(), "empty"),
        (prompt(10, 1), 200, SamplingParams::default(), "context"),
        (prompt(130, 1), 1, SamplingParams::default(), "prompt has"),
        (vec![5, 100_000], 4, SamplingParams::default(), "vocabulary"),
        (
            prompt(10, 1),
            4,
            SamplingParams {
                top_p: 2.0,
                ..Default::default()
            },
            "top_p",
        ),
    ];
    for (p, n, s, needle) in cases {
        let (req, out) = request(p, n, s);
        e.submit(req);
        let err = out.lock().unwrap().2.clone();
        match err {
            Some(RequestError::Invalid(m)) => assert!(m.contains(needle), "{m:?} vs {needle}"),
            other => panic!("expected a refusal mentioning {needle}, got {other:?}"),
        }
    }
    let (req, out) = request(prompt(10, 1), 3, SamplingParams::default());
    e.submit(req);
    while !e.is_idle() {
        e.step().unwrap();
    }
    assert_eq!(out.lock().unwrap().0.len(), 3);
    // A full queue refuses with Overloaded (nothing runs between these submissions).
    let mut e = BatchEngine::new(
        engine.clone(),
        ServeOptions {
            max_waiting: 1,
            ..options(64, 64, 16)
        },
    )
    .unwrap();
    let (first, _) = request(prompt(10, 1), 3, SamplingParams::default());
    e.submit(first);
    let (second, out) = request(prompt(10, 2), 3, SamplingParams::default());
    e.submit(second);
    assert!(
        matches!(out.lock().unwrap().2, Some(RequestError::Overloaded(_))),
        "a second request beyond max_waiting 1 must be refused as overloaded"
    );
    // Options that cannot hold one sequence are refused with the reason.
    let err = BatchEngine::new(engine, options(64, 4, 16)).unwrap_err();
    assert!(
        err.to_string().contains("cannot hold one sequence"),
        "{err}"
    );
}

/// Two engines paced through one [`SharedPacer`], as `gpukit serve` runs a guaranteed and a
/// best-effort model: the guaranteed engine reports its decode steps (all over an objective of
/// a microsecond), the best-effort one asks before each step. The best-effort engine is held
/// back — at most the pacer's largest budget of steps per slice — the guaranteed one never is,
/// and pacing changes no token.
#[test]
fn a_paced_engine_waits_for_its_budget_and_its_tokens_do_not_change() {
    use gpukit_llm::serving::{Command, Pacing};
    use gpukit_sched::{Pacer, SharedPacer};
    use std::time::{Duration, Instant};

    let (_dir, engine) = load(&Device::Cpu);
    let opts = options(64, 64, 16);
    let alone = serve(&engine, opts.clone(), &[0, 1]).0;
    let slice = Duration::from_millis(20);
    let max_budget = 4;
    let pacer = SharedPacer::new(Pacer::new(Duration::from_micros(1), slice, 1, max_budget));
    let work = workload();
    let start = Instant::now();
    let runs: Vec<_> = [
        Pacing::Reports(pacer.clone()),
        Pacing::Follows(pacer.clone()),
    ]
    .into_iter()
    .zip([0usize, 1])
    .map(|(pacing, i)| {
        let e = BatchEngine::new(engine.clone(), opts.clone())
            .unwrap()
            .with_pacing(pacing);
        let metrics = e.metrics();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            e.run(rx);
            start.elapsed()
        });
        let (p, n, s) = work[i].clone();
        let (req, out) = request(p, n, s);
        // The engine ends once the request is done and the channel is closed.
        tx.send(Command::Submit(req)).unwrap();
        (thread, out, metrics)
    })
    .collect();
    let mut ran = Vec::new();
    for (k, (thread, out, metrics)) in runs.into_iter().enumerate() {
        let took = thread.join().unwrap();
        assert_eq!(
            *out.lock().unwrap(),
            alone[k],
            "request {k} changed under pacing"
        );
        ran.push((took, metrics.lock().unwrap().clone()));
    }
    let (g, be) = (&ran[0].1, &ran[1].1);
    assert_eq!(g.paced_total, 0, "the guaranteed engine was held back");
    assert!(be.paced_total > 0, "the best-effort engine was never held");
    // Its steps (prefill and one per token) fit at most `max_budget` per slice.
    let steps = work[1].1 as u32;
    let floor = slice * (steps / max_budget - 1);
    println!(
        "best-effort: {steps} steps in {:?} (at least {floor:?}), held {} times",
        ran[1].0, be.paced_total
    );
    assert!(ran[1].0 >= floor, "{:?} < {floor:?}", ran[1].0);
}
