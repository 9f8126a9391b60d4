//! gpukit-ops benchmark (GPU machine). Times our ops with CUDA events (median over many
//! repetitions after warm-up, inputs rotated across buffers larger than L2 where the op is
//! memory-bound), measures the device-to-device copy ceiling, and writes `bench-ops.json` to
//! `$GPUKIT_BENCH_OUT`. `bench/peer_ops.py` then times torch on the same cases in the same run
//! and prints the table (ours, torch, ratio, % of ceiling) with a PNG chart.

use gpukit_driver::Event;
use gpukit_ops::attention::{
    AttentionMask, attention_shape, sdpa_into, sdpa_kv_into, sdpa_workspace_len,
};
use gpukit_ops::kv_cache::KvLayout;
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::quant::{QuantFormat, qgemv_into, quantize, random_blocks};
use gpukit_ops::sampling::{SamplingParams, sample_tokens_into, sampler_workspace_len};
use gpukit_ops::{BinaryOp, DType, Device, Tensor};
use gpukit_sched::{LanePriority, Runtime};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Milliseconds per call of `f(i)`: `batch` calls (i = 0..batch, for rotating inputs) are
/// captured into one CUDA graph after `warm` eager calls, and the graph's replays are timed
/// between two events — GPU time only, no host launch cost — median over `trials` replays.
fn time_ms(
    dev: &Device,
    trials: usize,
    batch: usize,
    warm: usize,
    mut f: impl FnMut(usize) -> Res<()>,
) -> Res<f64> {
    let Device::Cuda(c) = dev else {
        return Err("CUDA device expected".into());
    };
    for i in 0..warm {
        f(i)?;
    }
    let mut failure: Option<Box<dyn std::error::Error>> = None;
    let graph = c.capture(|| {
        for i in 0..batch {
            if let Err(e) = f(i) {
                failure = Some(e);
                return Err(gpukit_ops::Error::Shape {
                    op: "bench",
                    detail: "a call failed during capture".into(),
                });
            }
        }
        Ok(())
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let graph = graph?;
    let d = c.stream().device();
    let (start, end) = (d.new_event(true)?, d.new_event(true)?);
    graph.launch(c.stream())?;
    let mut t = Vec::with_capacity(trials);
    for _ in 0..trials {
        c.stream().record(&start)?;
        graph.launch(c.stream())?;
        c.stream().record(&end)?;
        t.push(f64::from(Event::elapsed_ms(&start, &end)?) / batch as f64);
    }
    Ok(median(t))
}

/// Whether the case runs: all of them, or those whose name contains `GPUKIT_BENCH_FILTER`
/// (e.g. `GPUKIT_BENCH_FILTER="sdpa decode"` for profiling one family).
fn wanted(name: &str) -> bool {
    std::env::var("GPUKIT_BENCH_FILTER").map_or(true, |f| name.contains(&f))
}

/// Enough copies of a `bytes`-sized input to exceed the 60 MB L2 at least twice over.
fn rotation(bytes: usize) -> usize {
    (160usize << 20).div_ceil(bytes.max(1)).clamp(1, 16)
}

struct Case {
    name: String,
    kind: &'static str,
    params: String,
    ms: f64,
    bytes: f64,
    flops: f64,
}

fn main() -> Res<()> {
    let rt = Runtime::with_devices(&[0])?;
    let dr = rt.device(0)?;
    let lane = dr.default_tenant().lane(LanePriority::Normal)?;
    let dev = Device::cuda(&lane)?;
    let bf = DType::BF16;
    let mut cases: Vec<Case> = Vec::new();

    // bf16 GEMM: square products (torch.matmul) and LLM prefill shapes (linear, weights [n, k]).
    for (m, k, n) in [(4096usize, 4096usize, 4096usize), (8192, 8192, 8192)] {
        let name = format!("gemm bf16 {m}x{k}x{n}");
        if !wanted(&name) {
            continue;
        }
        let a = Tensor::rand(&[m, k], -1.0, 1.0, bf, 2, &dev)?;
        let b = Tensor::rand(&[k, n], -1.0, 1.0, bf, 3, &dev)?;
        let out = Tensor::empty(&[m, n], bf, &dev)?;
        let ms = time_ms(&dev, 10, 10, 5, |_| Ok(ops::matmul_into(&a, &b, &out)?))?;
        cases.push(Case {
            name,
            kind: "matmul",
            params: format!("{{\"m\":{m},\"k\":{k},\"n\":{n}}}"),
            ms,
            bytes: ((m * k + k * n + m * n) * 2) as f64,
            flops: 2.0 * (m * k * n) as f64,
        });
    }
    for (m, k, n) in [
        (512usize, 2048usize, 8192usize),
        (512, 8192, 2048),
        (2048, 4096, 14336),
        (2048, 14336, 4096),
    ] {
        let name = format!("linear bf16 prefill {m}x{k}->{n}");
        if !wanted(&name) {
            continue;
        }
        let x = Tensor::rand(&[m, k], -1.0, 1.0, bf, 4, &dev)?;
        let w = Tensor::rand(&[n, k], -1.0, 1.0, bf, 5, &dev)?;
        let out = Tensor::empty(&[m, n], bf, &dev)?;
        let ms = time_ms(&dev, 10, 10, 5, |_| {
            Ok(ops::linear_into(&x, &w, None, Activation::None, &out)?)
        })?;
        cases.push(Case {
            name,
            kind: "linear",
            params: format!("{{\"m\":{m},\"k\":{k},\"n\":{n}}}"),
            ms,
            bytes: ((m * k + k * n + m * n) * 2) as f64,
            flops: 2.0 * (m * k * n) as f64,
        });
    }

    // GEMV, M = 1, weights [n, k] rotated so they come from HBM.
    for (k, n) in [
        (2048usize, 8192usize),
        (8192, 2048),
        (4096, 14336),
        (14336, 4096),
        (896, 4864),
    ] {
        let name = format!("gemv bf16 M=1 k={k} n={n}");
        if !wanted(&name) {
            continue;
        }
        let wbytes = n * k * 2;
        let copies = rotation(wbytes);
        let ws = (0..copies)
            .map(|i| Tensor::rand(&[n, k], -1.0, 1.0, bf, 10 + i as u64, &dev))
            .collect::<Result<Vec<_>, _>>()?;
        let x = Tensor::rand(&[1, k], -1.0, 1.0, bf, 6, &dev)?;
        let out = Tensor::empty(&[1, n], bf, &dev)?;
        let ms = time_ms(&dev, 20, 50, 10, |i| {
            Ok(ops::linear_into(
                &x,
                &ws[i % copies],
                None,
                Activation::None,
                &out,
            )?)
        })?;
        cases.push(Case {
            name,
            kind: "gemv",
            params: format!("{{\"m\":1,\"k\":{k},\"n\":{n},\"copies\":{copies}}}"),
            ms,
            bytes: (wbytes + (k + n) * 2) as f64,
            flops: 2.0 * (k * n) as f64,
        });
    }

    // The serving engine's batch-invariant linear at Llama-3.1-8B's MLP shapes, M rows of x
    // (decode batches), weights rotated so they come from HBM; the peer is torch's F.linear.
    for m in [1usize, 8, 64, 256] {
        for (k, n) in [(4096usize, 14336usize), (14336, 4096)] {
            let name = format!("linear batch-invariant bf16 M={m} k={k} n={n}");
            if !wanted(&name) {
                continue;
            }
            let wbytes = n * k * 2;
            let copies = rotation(wbytes);
            let ws = (0..copies)
                .map(|i| Tensor::rand(&[n, k], -1.0, 1.0, bf, 30 + i as u64, &dev))
                .collect::<Result<Vec<_>, _>>()?;
            let x = Tensor::rand(&[m, k], -1.0, 1.0, bf, 6, &dev)?;
            let out = Tensor::empty(&[m, n], bf, &dev)?;
            let ms = time_ms(&dev, 20, 20, 5, |i| {
                Ok(ops::linear_batch_invariant_into(
                    &x,
                    &ws[i % copies],
                    None,
                    &out,
                )?)
            })?;
            cases.push(Case {
                name,
                kind: "linear_bi",
                params: format!("{{\"m\":{m},\"k\":{k},\"n\":{n},\"copies\":{copies}}}"),
                ms,
                bytes: (wbytes + (k + n) * m * 2) as f64,
                flops: 2.0 * (m * k * n) as f64,
            });
        }
    }

    // Paged decode attention (one query per sequence, Llama-3.1-8B's heads: 32 query, 8 KV,
    // head_dim 128) over `len` cached positions per sequence, blocks of 16; bytes = K and V read.
    for (seqs, len) in [(1usize, 512usize), (1, 4096), (64, 512), (256, 512)] {
        let name = format!("paged attention bf16 seqs={seqs} len={len}");
        if !wanted(&name) {
            continue;
        }
        let (heads, kv_heads, d, bs) = (32usize, 8usize, 128usize, 16usize);
        let per_seq = len.div_ceil(bs);
        let blocks = seqs * per_seq;
        let kc = Tensor::rand(&[blocks, bs, kv_heads, d], -1.0, 1.0, bf, 40, &dev)?;
        let vc = Tensor::rand(&[blocks, bs, kv_heads, d], -1.0, 1.0, bf, 41, &dev)?;
        // Sequence s owns blocks s, s + seqs, s + 2·seqs, …: interleaved, as a pool hands them out.
        let tables: Vec<i32> = (0..seqs)
            .flat_map(|s| (0..per_seq).map(move |b| (b * seqs + s) as i32))
            .collect();
        let tables = Tensor::from_slice(&tables, &[seqs, per_seq], &dev)?;
        let seq_ids: Vec<i32> = (0..seqs as i32).collect();
        let token_seq = Tensor::from_slice(&seq_ids, &[seqs], &dev)?;
        let token_pos = Tensor::from_slice(&vec![len as i32 - 1; seqs], &[seqs], &dev)?;
        let q = Tensor::rand(&[seqs, heads, d], -1.0, 1.0, bf, 42, &dev)?;
        let out = Tensor::empty(&[seqs, heads, d], bf, &dev)?;
        let batch = gpukit_ops::paged::PagedBatch {
            block_tables: &tables,
            token_seq: &token_seq,
            token_pos: &token_pos,
        };
        let scale = 1.0 / (d as f32).sqrt();
        let ms = time_ms(&dev, 20, 20, 5, |_| {
            Ok(gpukit_ops::paged::paged_attention_into(
                &q, &kc, &vc, &batch, scale, None, &out,
            )?)
        })?;
        cases.push(Case {
            name,
            kind: "paged_attention",
            params: format!(
                "{{\"seqs\":{seqs},\"len\":{len},\"heads\":{heads},\"kv_heads\":{kv_heads},\"d\":{d}}}"
            ),
            ms,
            bytes: (2 * seqs * len * kv_heads * d * 2) as f64,
            flops: 4.0 * (seqs * heads * len * d) as f64,
        });
    }

    // rms_norm and elementwise add, bf16, large enough to stream from HBM.
    for (rows, hidden) in [(16384usize, 4096usize), (8192, 2048)] {
        let name = format!("rms_norm bf16 {rows}x{hidden}");
        if !wanted(&name) {
            continue;
        }
        let x = Tensor::rand(&[rows, hidden], -1.0, 1.0, bf, 7, &dev)?;
        let w = Tensor::rand(&[hidden], 0.5, 1.5, bf, 8, &dev)?;
        let out = Tensor::empty(&[rows, hidden], bf, &dev)?;
        let ms = time_ms(&dev, 20, 20, 5, |_| {
            Ok(ops::rms_norm_into(&x, &w, 1e-5, &out)?)
        })?;
        cases.push(Case {
            name,
            kind: "rms_norm",
            params: format!("{{\"rows\":{rows},\"hidden\":{hidden}}}"),
            ms,
            bytes: (2 * rows * hidden * 2) as f64,
            flops: 0.0,
        });
    }
    for n in [1usize << 26, 1 << 24] {
        let name = format!("add bf16 n={n}");
        if !wanted(&name) {
            continue;
        }
        let a = Tensor::rand(&[n], -1.0, 1.0, bf, 9, &dev)?;
        let b = Tensor::rand(&[n], -1.0, 1.0, bf, 10, &dev)?;
        let out = Tensor::empty(&[n], bf, &dev)?;
        let ms = time_ms(&dev, 20, 20, 5, |_| {
            Ok(ops::binary_into(BinaryOp::Add, &a, &b, &out)?)
        })?;
        cases.push(Case {
            name,
            kind: "add",
            params: format!("{{\"n\":{n}}}"),
            ms,
            bytes: (3 * n * 2) as f64,
            flops: 0.0,
        });
    }

    attention_cases(&dev, &mut cases)?;
    quantized_gemv_cases(&dev, &mut cases)?;
    sampling_cases(&dev, &mut cases)?;

    println!("{:<44} {:>10} {:>10}", "case", "ms", "GB/s");
    let rows: Vec<String> = cases
        .iter()
        .map(|c| {
            println!("{:<44} {:>10.4} {:>10.1}", c.name, c.ms, c.bytes / (c.ms * 1e-3) / 1e9);
            format!(
                "{{\"name\":\"{}\",\"kind\":\"{}\",\"params\":{},\"ms\":{:.6},\"bytes\":{},\"flops\":{}}}",
                c.name, c.kind, c.params, c.ms, c.bytes, c.flops
            )
        })
        .collect();
    let out = std::env::var_os("GPUKIT_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&out)?;
    let name = dr.device().properties().name.clone();
    std::fs::write(
        out.join("bench-ops.json"),
        format!("{{\"device\":\"{name}\",\"cases\":[{}]}}\n", rows.join(",")),
    )?;
    Ok(())
}

/// Causal prefill attention (bf16; 16k tokens per call: batch × seq) and split-K decode over a
/// cache (one query per head, GQA 4 and 8, caches rotated past L2 when they are small).
fn attention_cases(dev: &Device, cases: &mut Vec<Case>) -> Res<()> {
    let bf = DType::BF16;
    let causal = AttentionMask {
        causal: true,
        ..Default::default()
    };
    for d in [64usize, 128] {
        let heads = 2048 / d;
        for seq in [1024usize, 4096, 16384] {
            let batch = 16384 / seq;
            let name = format!("sdpa prefill causal d={d} seq={seq} b={batch} h={heads}");
            if !wanted(&name) {
                continue;
            }
            let r = |seed| Tensor::rand(&[batch, heads, seq, d], -1.0, 1.0, bf, seed, dev);
            let (q, k, v) = (r(20)?, r(21)?, r(22)?);
            let out = Tensor::empty(q.shape(), bf, dev)?;
            let ws = Tensor::empty(&[0], DType::F32, dev)?;
            let scale = 1.0 / (d as f32).sqrt();
            let ms = time_ms(dev, 10, 5, 2, |_| {
                Ok(sdpa_into(&q, &k, &v, scale, causal, &out, &ws)?)
            })?;
            cases.push(Case {
                name,
                kind: "sdpa_prefill",
                params: format!("{{\"batch\":{batch},\"heads\":{heads},\"seq\":{seq},\"d\":{d}}}"),
                ms,
                bytes: (4 * batch * heads * seq * d * 2) as f64,
                // Causal: half of the 4·s²·d products of QKᵀ and PV.
                flops: 2.0 * (batch * heads * seq * seq * d) as f64,
            });
        }
    }
    // K/V in the KV cache's layout on CUDA (pre-swizzled), and as plain tensors. The random
    // K/V read as swizzled are a different (equally random) cache: these rows time the kernels,
    // the tests check them.
    for (layout, tag) in [(KvLayout::Swizzled, ""), (KvLayout::Linear, " linear")] {
        for (q_heads, kv_heads) in [(32usize, 8usize), (32, 4)] {
            for len in [1024usize, 2048, 4096, 8192, 32768] {
                let name = format!(
                    "sdpa decode{tag} GQA {} len={len} kv_heads={kv_heads}",
                    q_heads / kv_heads
                );
                if !wanted(&name) {
                    continue;
                }
                let d = 128;
                let bytes = 2 * kv_heads * len * d * 2;
                let copies = rotation(bytes);
                let q = Tensor::rand(&[1, q_heads, 1, d], -1.0, 1.0, bf, 30, dev)?;
                let cache = |seed| Tensor::rand(&[1, kv_heads, len, d], -1.0, 1.0, bf, seed, dev);
                let kvs = (0..copies as u64)
                    .map(|i| Ok((cache(31 + i)?, cache(61 + i)?)))
                    .collect::<Res<Vec<_>>>()?;
                let shape = attention_shape(&q, &kvs[0].0, &kvs[0].1)?;
                let ws = Tensor::empty(
                    &[sdpa_workspace_len(&shape, &causal).max(1)],
                    DType::F32,
                    dev,
                )?;
                let out = Tensor::empty(q.shape(), bf, dev)?;
                let ms = time_ms(dev, 20, 20, 5, |i| {
                    let (k, v) = &kvs[i % copies];
                    Ok(sdpa_kv_into(&q, k, v, layout, 0.088, causal, &out, &ws)?)
                })?;
                let params = format!(
                    "{{\"q_heads\":{q_heads},\"kv_heads\":{kv_heads},\"len\":{len},\"d\":{d},\
                     \"copies\":{copies},\"layout\":\"{layout:?}\"}}"
                );
                cases.push(Case {
                    name,
                    kind: "sdpa_decode",
                    params,
                    ms,
                    bytes: bytes as f64,
                    flops: 0.0,
                });
            }
        }
    }
    Ok(())
}

/// GEMV (M = 1) reading GGML blocks directly at (k, n) = (4096, 14336): Q4_0 and Q8_0 from the
/// reference quantizer, Q4_K, Q5_K and Q6_K (the bulk of Q4_K_M and Q5_K_M models) as random
/// super-blocks;
/// bandwidth counts the quantized bytes.
fn quantized_gemv_cases(dev: &Device, cases: &mut Vec<Case>) -> Res<()> {
    let (k, n) = (4096usize, 14336usize);
    let w: Vec<f32> = Tensor::rand(&[n * k], -1.0, 1.0, DType::F32, 40, &Device::Cpu)?.to_vec()?;
    // One row of x in every format; four (the multi-row kernels, which decode each block once
    // for all rows) in three.
    for (f, m) in [
        (QuantFormat::Q4_0, 1),
        (QuantFormat::Q8_0, 1),
        (QuantFormat::Q4K, 1),
        (QuantFormat::Q5K, 1),
        (QuantFormat::Q6K, 1),
        (QuantFormat::Q4_0, 4),
        (QuantFormat::Q8_0, 4),
        (QuantFormat::Q4K, 4),
    ] {
        let name = format!("qgemv {f:?} M={m} k={k} n={n}");
        if !wanted(&name) {
            continue;
        }
        let q = if f.block_values() == 32 {
            quantize(f, &w)?
        } else {
            random_blocks(f, n * k, 42, 0.01)?
        };
        let copies = rotation(q.len());
        let mats = (0..copies)
            .map(|_| Ok(Tensor::from_blocks(&q, f, &[n, k], dev)?))
            .collect::<Res<Vec<_>>>()?;
        let x = Tensor::rand(&[m, k], -1.0, 1.0, DType::BF16, 41, dev)?;
        let out = Tensor::empty(&[m, n], DType::BF16, dev)?;
        let ms = time_ms(dev, 20, 50, 10, |i| {
            Ok(qgemv_into(&x, &mats[i % copies], &out)?)
        })?;
        cases.push(Case {
            name,
            kind: "qgemv",
            params: format!("{{\"m\":{m},\"k\":{k},\"n\":{n},\"format\":\"{f:?}\"}}"),
            ms,
            bytes: (q.len() + m * (k + n) * 2) as f64,
            flops: 2.0 * (m * k * n) as f64,
        });
    }
    Ok(())
}

/// One token from bf16 logits [1, vocab]: greedy, temperature, top-k 50 + top-p 0.9, and
/// top-p 0.9 alone.
fn sampling_cases(dev: &Device, cases: &mut Vec<Case>) -> Res<()> {
    for vocab in [49_152usize, 128_256] {
        for (label, params) in [
            ("greedy", SamplingParams::default()),
            (
                "temperature",
                SamplingParams {
                    temperature: 0.8,
                    ..Default::default()
                },
            ),
            (
                "top-k+top-p",
                SamplingParams {
                    temperature: 0.8,
                    top_k: 50,
                    top_p: 0.9,
                    ..Default::default()
                },
            ),
            (
                "top-p",
                SamplingParams {
                    temperature: 0.8,
                    top_p: 0.9,
                    ..Default::default()
                },
            ),
        ] {
            let name = format!("sampling {label} vocab={vocab}");
            if !wanted(&name) {
                continue;
            }
            let logits = Tensor::rand(&[1, vocab], -8.0, 8.0, DType::BF16, 50, dev)?;
            let step = Tensor::from_slice(&[3i64], &[1], dev)?;
            let out = Tensor::empty(&[1], DType::I32, dev)?;
            let ws = Tensor::empty(&[sampler_workspace_len(1, vocab)], DType::U8, dev)?;
            let ms = time_ms(dev, 20, 20, 5, |_| {
                Ok(sample_tokens_into(
                    &logits, None, &params, &step, &ws, &out,
                )?)
            })?;
            cases.push(Case {
                name,
                kind: "sampling",
                params: format!(
                    "{{\"vocab\":{vocab},\"temperature\":{},\"top_k\":{},\"top_p\":{}}}",
                    params.temperature, params.top_k, params.top_p
                ),
                ms,
                bytes: (vocab * 2) as f64,
                flops: 0.0,
            });
        }
    }
    Ok(())
}
