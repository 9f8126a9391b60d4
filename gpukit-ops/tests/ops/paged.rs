//! The paged KV cache (slot writes, attention through block tables) and the batch-invariant
//! linear: against f64 references, and bitwise batch invariance — a token's (a row's) result
//! alone equals its result inside a larger batch at another index.

use gpukit_ops::paged::{
    PagedBatch, paged_attention_into, paged_attention_with_workspace_into,
    paged_attention_workspace_len, paged_kv_write_into,
};
use gpukit_ops::quant::{QuantFormat, random_blocks};

use super::*;

fn bits_of(t: &Tensor) -> Vec<u64> {
    t.to_vec_f64()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn i32s(v: &[i32], dev: &Device) -> Tensor {
    Tensor::from_slice(v, &[v.len()], dev).unwrap()
}

/// A deterministic shuffle of 0..n (xorshift), so sequences get scattered blocks.
fn shuffled(n: usize, seed: u64) -> Vec<i32> {
    let mut v: Vec<i32> = (0..n as i32).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// One token's attention in f64, added into `out` (`[heads, d]`): its queries `q` (`[heads, d]`)
/// over the key and value rows `keys` of `k` and `v` (`[positions, kv_heads, d]`), query head
/// `h` reading KV head `h / (heads / kv_heads)`.
fn attend_f64(
    out: &mut [f64],
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (heads, kvh, d): (usize, usize, usize),
    keys: std::ops::RangeInclusive<usize>,
    scale: f32,
) {
    for h in 0..heads {
        let g = h / (heads / kvh);
        let qrow = &q[h * d..][..d];
        let sc: Vec<f64> = keys
            .clone()
            .map(|j| {
                let kr = &k[(j * kvh + g) * d..][..d];
                qrow.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>() * f64::from(scale)
            })
            .collect();
        let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        for (jj, j) in keys.clone().enumerate() {
            let vr = &v[(j * kvh + g) * d..][..d];
            for c in 0..d {
                out[h * d + c] += e[jj] / z * vr[c];
            }
        }
    }
}

op_test!(paged_attention, |dev: &Device| {
    let s = seed();
    // (heads, kv_heads, head_dim, block_size, sequence lengths, window)
    let cases = [
        (4, 2, 64, 16, vec![37usize, 5, 16], None),
        (3, 1, 40, 8, vec![70, 1], Some(9)),
        (2, 2, 128, 4, vec![33], None),
    ];
    for (ci, (heads, kvh, d, bs, lens, window)) in cases.into_iter().enumerate() {
        for dt in FLOATS {
            let what = format!("case {ci} {dt}");
            let max_blocks = lens.iter().map(|l| l.div_ceil(bs)).max().unwrap();
            let num_blocks = lens.iter().map(|l| l.div_ceil(bs)).sum::<usize>() + 3;
            let order = shuffled(num_blocks, s + ci as u64);
            // Block tables: each sequence takes the next blocks of the shuffled order.
            let mut tables = vec![-1i32; lens.len() * max_blocks];
            let mut next = 0;
            for (q, &l) in lens.iter().enumerate() {
                for b in 0..l.div_ceil(bs) {
                    tables[q * max_blocks + b] = order[next];
                    next += 1;
                }
            }
            let total: usize = lens.iter().sum();
            let (kn, kv) = input(&[total, kvh, d], dt, -1.0, 1.0, s + 10, dev);
            let (vn, vv) = input(&[total, kvh, d], dt, -1.0, 1.0, s + 11, dev);
            let (qt, qv) = input(&[total, heads, d], dt, -1.0, 1.0, s + 12, dev);
            // Every token of every sequence, in order: its slot, sequence and position.
            let (mut slots, mut seq, mut pos) = (vec![], vec![], vec![]);
            for (q, &l) in lens.iter().enumerate() {
                for p in 0..l {
                    let b = tables[q * max_blocks + p / bs];
                    slots.push(b * bs as i32 + (p % bs) as i32);
                    seq.push(q as i32);
                    pos.push(p as i32);
                }
            }
            let k_cache = poisoned(&[num_blocks, bs, kvh, d], dt, dev);
            let v_cache = poisoned(&[num_blocks, bs, kvh, d], dt, dev);
            paged_kv_write_into(&kn, &vn, &k_cache, &v_cache, &i32s(&slots, dev)).unwrap();
            let tables_t = Tensor::from_slice(&tables, &[lens.len(), max_blocks], dev).unwrap();
            let (seq_t, pos_t) = (i32s(&seq, dev), i32s(&pos, dev));
            let batch = PagedBatch {
                block_tables: &tables_t,
                token_seq: &seq_t,
                token_pos: &pos_t,
            };
            let scale = 1.0 / (d as f32).sqrt();
            let out = poisoned(&[total, heads, d], dt, dev);
            paged_attention_into(&qt, &k_cache, &v_cache, &batch, scale, window, &out).unwrap();
            // f64 reference over each sequence's own rows (token index = start + position).
            let mut want = vec![0f64; total * heads * d];
            let mut start = 0;
            for &l in &lens {
                for p in 0..l {
                    let t = start + p;
                    let lo = window.map_or(0, |w: usize| (p + 1).saturating_sub(w));
                    let row = &mut want[t * heads * d..][..heads * d];
                    let q = &qv[t * heads * d..][..heads * d];
                    let (k, v) = (&kv[start * kvh * d..], &vv[start * kvh * d..]);
                    attend_f64(row, q, k, v, (heads, kvh, d), lo..=p, scale);
                }
                start += l;
            }
            let got = out.to_vec_f64().unwrap();
            assert_close(&what, &got, &want, tol(dt).max(2e-5));
            // Batch invariance: the last token of the first sequence, and a middle one, alone.
            let all = bits_of(&out);
            for t in [lens[0] - 1, lens[0] / 2] {
                let (q1, o1) = (
                    qt.narrow(0, t, 1).unwrap(),
                    poisoned(&[1, heads, d], dt, dev),
                );
                let (s1, p1) = (i32s(&seq[t..=t], dev), i32s(&pos[t..=t], dev));
                let one = PagedBatch {
                    block_tables: &tables_t,
                    token_seq: &s1,
                    token_pos: &p1,
                };
                paged_attention_into(&q1, &k_cache, &v_cache, &one, scale, window, &o1).unwrap();
                let row = heads * d;
                assert_eq!(
                    bits_of(&o1),
                    all[t * row..(t + 1) * row],
                    "{what}: token {t} alone differs from the batch"
                );
            }
        }
    }
    // A slot outside the cache and a block id outside the cache are refused.
    let dt = DType::F32;
    let k_cache = Tensor::zeros(&[2, 4, 1, 32], dt, dev).unwrap();
    let v_cache = Tensor::zeros(&[2, 4, 1, 32], dt, dev).unwrap();
    let fresh = Tensor::zeros(&[1, 1, 32], dt, dev).unwrap();
    let r = paged_kv_write_into(&fresh, &fresh, &k_cache, &v_cache, &i32s(&[8], dev));
    assert_past_cache_refused(dev, r, "paged_kv_write slot 8 of 8");
    let tables = Tensor::from_slice(&[0i32, 5], &[1, 2], dev).unwrap();
    let (seq_t, pos_t) = (i32s(&[0], dev), i32s(&[6], dev));
    let batch = PagedBatch {
        block_tables: &tables,
        token_seq: &seq_t,
        token_pos: &pos_t,
    };
    let q = Tensor::zeros(&[1, 1, 32], dt, dev).unwrap();
    let out = Tensor::zeros(&[1, 1, 32], dt, dev).unwrap();
    let r = paged_attention_into(&q, &k_cache, &v_cache, &batch, 1.0, None, &out);
    assert_past_cache_refused(dev, r, "paged_attention block id 5 of 2");
});

// Long sequences: a token's keys span several partitions of the CUDA kernel (1,024 positions
// each), merged afterwards; query heads share a KV head in groups of 4 and 7. A few tokens of
// one long sequence against f64, and each alone against its place in the batch.
op_test!(paged_attention_long, |dev: &Device| {
    let s = seed();
    let (len, bs, d) = (2100usize, 16usize, 64usize);
    // (heads, kv_heads, window)
    for (ci, (heads, kvh, window)) in [(4usize, 1usize, None), (14, 2, Some(1100usize))]
        .into_iter()
        .enumerate()
    {
        for dt in FLOATS {
            let what = format!("long case {ci} {dt}");
            let blocks = len.div_ceil(bs);
            let order = shuffled(blocks, s + 7 + ci as u64);
            let slots: Vec<i32> = (0..len)
                .map(|p| order[p / bs] * bs as i32 + (p % bs) as i32)
                .collect();
            let (kn, kv) = input(&[len, kvh, d], dt, -1.0, 1.0, s + 20, dev);
            let (vn, vv) = input(&[len, kvh, d], dt, -1.0, 1.0, s + 21, dev);
            let k_cache = poisoned(&[blocks, bs, kvh, d], dt, dev);
            let v_cache = poisoned(&[blocks, bs, kvh, d], dt, dev);
            paged_kv_write_into(&kn, &vn, &k_cache, &v_cache, &i32s(&slots, dev)).unwrap();
            let tables = Tensor::from_slice(&order, &[1, blocks], dev).unwrap();
            let pos = [0i32, 1023, 1024, 1099, 2047, 2048, 2099];
            let n = pos.len();
            let (qt, qv) = input(&[n, heads, d], dt, -1.0, 1.0, s + 22, dev);
            let seq_t = i32s(&vec![0; n], dev);
            let pos_t = i32s(&pos, dev);
            let batch = PagedBatch {
                block_tables: &tables,
                token_seq: &seq_t,
                token_pos: &pos_t,
            };
            let scale = 1.0 / (d as f32).sqrt();
            let out = poisoned(&[n, heads, d], dt, dev);
            paged_attention_into(&qt, &k_cache, &v_cache, &batch, scale, window, &out).unwrap();
            let mut want = vec![0f64; n * heads * d];
            for (t, &p) in pos.iter().enumerate() {
                let p = p as usize;
                let lo = window.map_or(0, |w| (p + 1).saturating_sub(w));
                let row = &mut want[t * heads * d..][..heads * d];
                let q = &qv[t * heads * d..][..heads * d];
                attend_f64(row, q, &kv, &vv, (heads, kvh, d), lo..=p, scale);
            }
            assert_close(&what, &out.to_vec_f64().unwrap(), &want, tol(dt).max(2e-5));
            let all = bits_of(&out);
            // The partitions' workspace given (as a CUDA graph of a step does): the same bits;
            // one too small is refused.
            let need = paged_attention_workspace_len(n, heads, d, blocks, bs);
            assert!(need > 0, "{what}: several partitions need a workspace");
            let ws = Tensor::zeros(&[need], DType::F32, dev).unwrap();
            let given = poisoned(&[n, heads, d], dt, dev);
            paged_attention_with_workspace_into(
                &qt,
                &k_cache,
                &v_cache,
                &batch,
                scale,
                window,
                Some(&ws),
                &given,
            )
            .unwrap();
            assert_eq!(bits_of(&given), all, "{what}: with a given workspace");
            if let Device::Cuda(_) = dev {
                let small = ws.narrow(0, 0, need - 1).unwrap();
                let r = paged_attention_with_workspace_into(
                    &qt,
                    &k_cache,
                    &v_cache,
                    &batch,
                    scale,
                    window,
                    Some(&small),
                    &given,
                );
                assert!(r.is_err(), "{what}: a workspace one value short");
            }
            let row = heads * d;
            for t in [1, 3, n - 1] {
                let (q1, o1) = (
                    qt.narrow(0, t, 1).unwrap(),
                    poisoned(&[1, heads, d], dt, dev),
                );
                let (s1, p1) = (i32s(&[0], dev), i32s(&pos[t..=t], dev));
                let one = PagedBatch {
                    block_tables: &tables,
                    token_seq: &s1,
                    token_pos: &p1,
                };
                paged_attention_into(&q1, &k_cache, &v_cache, &one, scale, window, &o1).unwrap();
                assert_eq!(
                    bits_of(&o1),
                    all[t * row..(t + 1) * row],
                    "{what}: token at {} alone differs from the batch",
                    pos[t]
                );
            }
        }
    }
});

op_test!(linear_batch_invariant, |dev: &Device| {
    let s = seed();
    for dt in FLOATS {
        // k = 200: not a multiple of the 16-byte width in f32 on CUDA (the scalar kernel).
        // (70, 520, 300): two row tiles and three output tiles of the tiled kernel, a partial
        // last stage over k (520 = 16 · 32 + 8).
        for (m, k, n, bias) in [
            (13, 256, 72, true),
            (9, 200, 33, false),
            (1, 64, 17, true),
            (70, 520, 300, true),
        ] {
            let what = format!("{dt} [{m}, {k}] · [{n}, {k}]ᵀ");
            let (x, xv) = input(&[m, k], dt, -1.0, 1.0, s, dev);
            let (w, wv) = input(&[n, k], dt, -1.0, 1.0, s + 1, dev);
            let (b, bv) = input(&[n], dt, -1.0, 1.0, s + 2, dev);
            let bias = bias.then_some(&b);
            let out = poisoned(&[m, n], dt, dev);
            ops::linear_batch_invariant_into(&x, &w, bias, &out).unwrap();
            let mut want = vec![0f64; m * n];
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k).map(|c| xv[i * k + c] * wv[j * k + c]).sum();
                    want[i * n + j] = dot + if bias.is_some() { bv[j] } else { 0.0 };
                }
            }
            let got = out.to_vec_f64().unwrap();
            assert_close(&what, &got, &want, tol(dt).max(1e-5));
            let all = bits_of(&out);
            for r in [0, m / 2, m - 1] {
                let one = poisoned(&[1, n], dt, dev);
                let xr = x.narrow(0, r, 1).unwrap().contiguous().unwrap();
                ops::linear_batch_invariant_into(&xr, &w, bias, &one).unwrap();
                assert_eq!(
                    bits_of(&one),
                    all[r * n..(r + 1) * n],
                    "{what}: row {r} alone differs from the batch"
                );
            }
        }
    }
    // K segments (k = 2056: two of them, the second 8 deep) on CUDA, through every tiling of
    // the kernels: a row alone, 30, 50 and 100 rows (one tiling each, one block per segment),
    // 300 rows (too few blocks for the fused tiling: split) and 1024 (fused: 256 tiles). The
    // same bits each way.
    if let Device::Cuda(_) = dev {
        let (m, k, n) = (1024usize, 2056usize, 4096usize);
        let batches = [1024usize, 300, 100, 50, 30];
        let rows = [0usize, 17, 29];
        for dt in [DType::F16, DType::BF16] {
            let what = format!("{dt} [{m}, {k}] · [{n}, {k}]ᵀ in K segments");
            let (x, xv) = input(&[m, k], dt, -1.0, 1.0, s + 5, dev);
            let (w, wv) = input(&[n, k], dt, -1.0, 1.0, s + 6, dev);
            let (b, bv) = input(&[n], dt, -1.0, 1.0, s + 7, dev);
            let outs: Vec<Vec<u64>> = batches
                .iter()
                .map(|&rows| {
                    let out = poisoned(&[rows, n], dt, dev);
                    let xb = x.narrow(0, 0, rows).unwrap();
                    ops::linear_batch_invariant_into(&xb, &w, Some(&b), &out).unwrap();
                    bits_of(&out)
                })
                .collect();
            // The split workspace given (as a CUDA graph of a step does): the same bits; one
            // too small is refused.
            let need = ops::linear_batch_invariant_workspace_len(dt, 100, n, k);
            assert_eq!(need, 2 * 100 * n, "{what}: two segments of 100 × {n}");
            let ws = Tensor::zeros(&[need], DType::F32, dev).unwrap();
            let given = poisoned(&[100, n], dt, dev);
            let x100 = x.narrow(0, 0, 100).unwrap();
            ops::linear_batch_invariant_with_workspace_into(&x100, &w, Some(&b), Some(&ws), &given)
                .unwrap();
            assert_eq!(
                bits_of(&given),
                outs[2],
                "{what}: 100 rows with a given workspace"
            );
            let small = ws.narrow(0, 0, need - 1).unwrap();
            let r = ops::linear_batch_invariant_with_workspace_into(
                &x100,
                &w,
                Some(&b),
                Some(&small),
                &given,
            );
            assert!(r.is_err(), "{what}: a workspace one value short");
            for r in rows {
                let one = poisoned(&[1, n], dt, dev);
                let xr = x.narrow(0, r, 1).unwrap().contiguous().unwrap();
                ops::linear_batch_invariant_into(&xr, &w, Some(&b), &one).unwrap();
                let one_bits = bits_of(&one);
                for (batch, bits) in batches.iter().zip(&outs) {
                    assert_eq!(
                        one_bits,
                        bits[r * n..(r + 1) * n],
                        "{what}: row {r} alone vs in {batch} rows"
                    );
                }
                let want: Vec<f64> = (0..n)
                    .map(|j| (0..k).map(|c| xv[r * k + c] * wv[j * k + c]).sum::<f64>() + bv[j])
                    .collect();
                let got = one.to_vec_f64().unwrap();
                assert_close(&what, &got, &want, tol(dt));
            }
        }
    }
    // Quantized weights: the quantized GEMV's result, row by row, whatever the batch.
    let (m, k, n) = (11, 256, 40);
    let q = random_blocks(QuantFormat::Q4_1, n * k, s + 3, 0.5).unwrap();
    let w = Tensor::from_blocks(&q, QuantFormat::Q4_1, &[n, k], dev).unwrap();
    let wd = gpukit_ops::quant::dequantize_tensor(&w, DType::F32).unwrap();
    let (x, _) = input(&[m, k], DType::F32, -1.0, 1.0, s + 4, dev);
    let out = poisoned(&[m, n], DType::F32, dev);
    ops::linear_batch_invariant_into(&x, &w, None, &out).unwrap();
    let want = ops::linear(&x, &wd, None, Activation::None).unwrap();
    assert_close(
        "Q4_1 linear",
        &out.to_vec_f64().unwrap(),
        &want.to_vec_f64().unwrap(),
        1e-4,
    );
    let all = bits_of(&out);
    let one = poisoned(&[1, n], DType::F32, dev);
    let xr = x.narrow(0, m - 1, 1).unwrap().contiguous().unwrap();
    ops::linear_batch_invariant_into(&xr, &w, None, &one).unwrap();
    assert_eq!(bits_of(&one), all[(m - 1) * n..], "Q4_1: last row alone");
});
