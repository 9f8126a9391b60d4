//! The decode step's fused ops: SwiGLU GEMV, QKV → RoPE → KV append, and the pre-norm projections.

use super::*;

// The decode step's fused ops: SwiGLU gate/up GEMV, and QKV → (q/k norm) → RoPE → KV append.
op_test!(fused_decode_ops, |dev: &Device| {
    use gpukit_ops::kv_cache::KvCache;
    use gpukit_ops::rope::{RopeLayout, rope_kv_append};
    let s = seed();
    let cuda = matches!(dev, Device::Cuda(_));
    for dt in FLOATS {
        // linear_swiglu_into: (rows, k, n); CUDA takes one row with k a multiple of 16 bytes.
        for (m, k, n) in [
            (1usize, 64usize, 1usize),
            (1, 1000, 37),
            (1, 4104, 1000),
            (3, 24, 5),
        ] {
            if cuda && m != 1 {
                continue;
            }
            let (x, xv) = input(&[m, k], dt, -1.0, 1.0, s ^ k as u64, dev);
            let (w, wv) = input(&[2 * n, k], dt, -0.1, 0.1, s ^ 7 ^ n as u64, dev);
            let out = poisoned(&[m, n], dt, dev);
            ops::linear_swiglu_into(&x, &w, &out).unwrap();
            let (mut want, mut scale) = (vec![0f64; m * n], vec![0f64; m * n]);
            for r in 0..m {
                for j in 0..n {
                    let dot = |row: usize| -> f64 {
                        (0..k).map(|i| xv[r * k + i] * wv[row * k + i]).sum()
                    };
                    let mag = |row: usize| -> f64 {
                        (0..k)
                            .map(|i| (xv[r * k + i] * wv[row * k + i]).abs())
                            .sum()
                    };
                    let (g, u) = (dot(j), dot(n + j));
                    let silu = g / (1.0 + (-g).exp());
                    want[r * n + j] = silu * u;
                    // As for rms_norm_swiglu below: with n = 1 one cancelling dot product
                    // would otherwise decide the relative error.
                    scale[r * n + j] = 1.1 * u.abs() * mag(j) + silu.abs() * mag(n + j);
                }
            }
            let got = out.to_vec_f64().unwrap();
            let what = format!("linear_swiglu {dt} m{m} k{k} n{n}");
            assert_close_scaled(&what, &got, &want, &scale, tol(dt));
            also_cpu_scaled(
                dev,
                &got,
                || {
                    let (xc, wc) = (
                        x.to_device(&Device::Cpu).unwrap(),
                        w.to_device(&Device::Cpu).unwrap(),
                    );
                    let o = poisoned(&[m, n], dt, &Device::Cpu);
                    ops::linear_swiglu_into(&xc, &wc, &o).unwrap();
                    o.to_vec_f64().unwrap()
                },
                &scale,
                tol(dt),
                &what,
            );
        }
        // rope_kv_append: (q heads, kv heads, head_dim, rotary dim (0: none), layout, q/k norm,
        // tokens, position) into a cache of 9 rows poisoned with NaN.
        let cases = [
            (
                8usize,
                2usize,
                64usize,
                64usize,
                RopeLayout::RotateHalf,
                false,
                1usize,
                0i32,
            ),
            (14, 2, 64, 64, RopeLayout::RotateHalf, false, 1, 8),
            (16, 8, 128, 128, RopeLayout::RotateHalf, true, 1, 5),
            (4, 4, 80, 32, RopeLayout::AdjacentPairs, false, 3, 2),
            (3, 1, 256, 0, RopeLayout::RotateHalf, true, 2, 7),
        ];
        for (i, (nq, nkv, hd, rotary, layout, norm, tokens, pos)) in cases.into_iter().enumerate() {
            let max_len = 9usize;
            let kv_layout = [KvLayout::Swizzled, KvLayout::Linear][i % 2];
            let width = (nq + 2 * nkv) * hd;
            let seed = s ^ (hd * 31 + nq) as u64;
            let (qkv, qkvv) = input(&[tokens, width], dt, -1.0, 1.0, seed, dev);
            let (qw, qwv) = input(&[hd], dt, 0.5, 1.5, seed ^ 1, dev);
            let (kw, kwv) = input(&[hd], dt, 0.5, 1.5, seed ^ 2, dev);
            let (table, inv) = plain_rope(rotary, dev);
            let rope = (rotary > 0).then_some((&inv, table.attention_scale, layout));
            let eps = 1e-6f32;
            let qk_norm = norm.then_some((&qw, &kw, eps));
            let mut cache = poisoned_cache(nkv, max_len, hd, dt, kv_layout, dev);
            let q_out = poisoned(&[tokens, nq, hd], dt, dev);
            let position = Tensor::from_slice(&[pos], &[1], dev).unwrap();
            rope_kv_append(&qkv, &q_out, &mut cache, &position, rope, qk_norm).unwrap();
            // f64 reference: per head, the norm, then the rotation at pos + token.
            let head = |t: usize, h: usize, w: Option<&[f64]>| -> Vec<f64> {
                let mut v: Vec<f64> = qkvv[t * width + h * hd..][..hd].to_vec();
                if let Some(w) = w {
                    let ms = v.iter().map(|a| a * a).sum::<f64>() / hd as f64;
                    let inv_rms = 1.0 / (ms + f64::from(eps)).sqrt();
                    v.iter_mut().zip(w).for_each(|(a, w)| *a *= inv_rms * w);
                }
                let half = if rotary > 0 { table.inv_freq.len() } else { 0 };
                let p = f64::from(pos) + t as f64;
                let mut r = v.clone();
                for i in 0..half {
                    let angle = p * f64::from(table.inv_freq[i]);
                    let (c, sn) = (angle.cos(), angle.sin());
                    let (a, b) = match layout {
                        RopeLayout::RotateHalf => (i, i + half),
                        RopeLayout::AdjacentPairs => (2 * i, 2 * i + 1),
                    };
                    r[a] = v[a] * c - v[b] * sn;
                    r[b] = v[b] * c + v[a] * sn;
                }
                r
            };
            let (qn, kn) = (norm.then_some(&qwv[..]), norm.then_some(&kwv[..]));
            let mut want_q = Vec::new();
            for t in 0..tokens {
                for h in 0..nq {
                    want_q.extend(head(t, h, qn));
                }
            }
            let what = format!(
                "rope_kv_append {dt} q{nq} kv{nkv} d{hd} rot{rotary} {layout:?} norm {norm} \
                 t{tokens} {kv_layout:?}"
            );
            let got_q = q_out.to_vec_f64().unwrap();
            assert_close(&format!("{what}: q"), &got_q, &want_q, tol(dt));
            let rows = |t: &Tensor| kv_layout.linearize(t.to_vec_f64().unwrap(), max_len, hd, dt);
            let (kc, vc) = (rows(cache.key_storage()), rows(cache.value_storage()));
            let (mut got_kv, mut want_kv) = (Vec::new(), Vec::new());
            for h in 0..nkv {
                for row in 0..max_len {
                    let at = (h * max_len + row) * hd;
                    let t = row as i64 - i64::from(pos);
                    if t < 0 || t >= tokens as i64 {
                        assert!(
                            kc[at..at + hd]
                                .iter()
                                .chain(&vc[at..at + hd])
                                .all(|x| x.is_nan()),
                            "{what}: cache row {row} of head {h} was written"
                        );
                        continue;
                    }
                    let t = t as usize;
                    got_kv.extend(&kc[at..at + hd]);
                    want_kv.extend(head(t, nq + h, kn));
                    got_kv.extend(&vc[at..at + hd]);
                    want_kv.extend(&qkvv[t * width + (nq + nkv + h) * hd..][..hd]);
                }
            }
            assert_close(&format!("{what}: k/v"), &got_kv, &want_kv, tol(dt));
            also_cpu(
                dev,
                &got_q,
                || {
                    let c = |t: &Tensor| t.to_device(&Device::Cpu).unwrap();
                    let (qkv, qw, kw, inv) = (c(&qkv), c(&qw), c(&kw), c(&inv));
                    let mut cache =
                        KvCache::new(nkv, max_len, hd, dt, kv_layout, &Device::Cpu).unwrap();
                    let q = poisoned(&[tokens, nq, hd], dt, &Device::Cpu);
                    let position = c(&position);
                    let rope = (rotary > 0).then_some((&inv, table.attention_scale, layout));
                    let qk_norm = norm.then_some((&qw, &kw, eps));
                    rope_kv_append(&qkv, &q, &mut cache, &position, rope, qk_norm).unwrap();
                    q.to_vec_f64().unwrap()
                },
                tol(dt),
                &what,
            );
            // A position past the cache writes nothing and is an error.
            let past = Tensor::from_slice(&[(max_len - tokens + 1) as i32], &[1], dev).unwrap();
            let r = rope_kv_append(&qkv, &q_out, &mut cache, &past, rope, qk_norm);
            assert_past_cache_refused(dev, r, &what);
        }
    }
});

// The pre-norm projections of the decode step: residual add + RMSNorm fused into the GEMV after
// it (plain, SwiGLU, and the LM head with its greedy pick), against an f64 reference.
op_test!(pre_norm_projections, |dev: &Device| {
    use ops::PreNorm;
    let s = seed();
    let cuda = matches!(dev, Device::Cuda(_));
    let eps = 1e-5f32;
    for dt in FLOATS {
        // (k, n): rows of a multiple of 16 bytes; n large enough for the persistent grid to loop.
        for (k, n) in [
            (64usize, 1usize),
            (1000, 37),
            (2048, 300),
            (4104, 1000),
            (64, 20_001),
        ] {
            for pending in [false, true] {
                let seed = s ^ (k * 131 + n) as u64 ^ u64::from(pending);
                let (res, resv) = input(&[1, k], dt, -2.0, 2.0, seed, dev);
                let (y, yv) = input(&[1, k], dt, -2.0, 2.0, seed ^ 1, dev);
                let (g, gv) = input(&[k], dt, 0.5, 1.5, seed ^ 2, dev);
                let (w, wv) = input(&[2 * n, k], dt, -0.1, 0.1, seed ^ 3, dev);
                let (bias, bv) = input(&[2 * n], dt, -1.0, 1.0, seed ^ 4, dev);
                let sum_out = poisoned(&[1, k], dt, dev);
                let x = PreNorm {
                    residual: &res,
                    pending: pending.then_some((&y, &sum_out)),
                    weight: &g,
                    eps,
                };
                // f64 reference of the normalised row (the sum rounded as stored).
                let sum: Vec<f64> = (0..k)
                    .map(|i| resv[i] + if pending { yv[i] } else { 0.0 })
                    .collect();
                let sum32: Vec<f32> = sum.iter().map(|&v| v as f32).collect();
                let stored = Tensor::from_slice(&sum32, &[1, k], &Device::Cpu).unwrap();
                let stored = ops::to_dtype(&stored, dt).unwrap().to_vec_f64().unwrap();
                let ms = stored.iter().map(|a| a * a).sum::<f64>() / k as f64;
                let inv = 1.0 / (ms + f64::from(eps)).sqrt();
                // The kernels round the normalised row to the dtype (as the separate norm stores
                // it): so does the reference.
                let xr: Vec<f32> = (0..k).map(|i| (stored[i] * inv * gv[i]) as f32).collect();
                let xr = Tensor::from_slice(&xr, &[k], &Device::Cpu).unwrap();
                let xr = ops::to_dtype(&xr, dt).unwrap().to_vec_f64().unwrap();
                let dot = |row: usize| -> f64 { (0..k).map(|i| xr[i] * wv[row * k + i]).sum() };
                // Σ|terms| of a row's dot product: the scale its rounding error follows (with
                // n = 1 a single cancelling dot would otherwise decide the relative error).
                let mag =
                    |row: usize| -> f64 { (0..k).map(|i| (xr[i] * wv[row * k + i]).abs()).sum() };
                let what = format!("{dt} k{k} n{n} pending {pending}");

                // Plain projection with a bias: the first n rows of w.
                let (w1, b1) = (w.narrow(0, 0, n).unwrap(), bias.narrow(0, 0, n).unwrap());
                let out = poisoned(&[1, n], dt, dev);
                ops::rms_norm_linear_into(&x, &w1, Some(&b1), &out).unwrap();
                let want: Vec<f64> = (0..n).map(|j| dot(j) + bv[j]).collect();
                let scale: Vec<f64> = (0..n).map(|j| mag(j) + bv[j].abs()).collect();
                assert_close_scaled(
                    &format!("rms_norm_linear {what}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    &scale,
                    tol(dt),
                );
                if pending {
                    assert_close(
                        &format!("rms_norm_linear {what}: residual out"),
                        &sum_out.to_vec_f64().unwrap(),
                        &stored,
                        0.0,
                    );
                }

                // SwiGLU on w's 2n rows.
                let act = poisoned(&[1, n], dt, dev);
                ops::rms_norm_swiglu_into(&x, &w, &act).unwrap();
                let want: Vec<f64> = (0..n)
                    .map(|j| {
                        let (gt, u) = (dot(j), dot(n + j));
                        gt / (1.0 + (-gt).exp()) * u
                    })
                    .collect();
                // silu's slope is below 1.1: the product's error follows |u|·Σ|gate terms| +
                // |silu(gate)|·Σ|up terms|.
                let scale: Vec<f64> = (0..n)
                    .map(|j| {
                        let (gt, u) = (dot(j), dot(n + j));
                        1.1 * u.abs() * mag(j) + (gt / (1.0 + (-gt).exp())).abs() * mag(n + j)
                    })
                    .collect();
                assert_close_scaled(
                    &format!("rms_norm_swiglu {what}"),
                    &act.to_vec_f64().unwrap(),
                    &want,
                    &scale,
                    tol(dt),
                );

                // LM head + greedy: the logits, and the token is their first maximum exactly.
                let ws_len = ops::rms_norm_linear_greedy_workspace_len(n, k, dt);
                let ws = Tensor::zeros(&[ws_len], DType::F32, dev).unwrap();
                let token = Tensor::from_slice(&[-7i32], &[1], dev).unwrap();
                let logits = poisoned(&[1, n], dt, dev);
                ops::rms_norm_linear_greedy_into(&x, &w1, &logits, &ws, &token).unwrap();
                let lv = logits.to_vec_f64().unwrap();
                let want: Vec<f64> = (0..n).map(dot).collect();
                let scale: Vec<f64> = (0..n).map(mag).collect();
                assert_close_scaled(&format!("greedy head {what}"), &lv, &want, &scale, tol(dt));
                let first_max = (0..n).fold(0, |b, i| if lv[i] > lv[b] { i } else { b });
                assert_eq!(
                    token.to_vec::<i32>().unwrap(),
                    [first_max as i32],
                    "greedy head {what}: token"
                );
            }
        }
        // Ties go to the lowest id: equal rows at 3, 700 and 4000 above the rest; all-zero
        // weights make every logit 0 (id 0). A NaN logit counts as the maximum (like
        // torch.argmax): with NaN weights in rows 4001 and 2500, the first NaN (2500) wins,
        // whichever block of the GEMV sees it.
        let (k, n) = (256usize, 4099usize);
        let (res, _) = input(&[1, k], dt, -1.0, 1.0, s ^ 99, dev);
        let g = Tensor::ones(&[k], dt, dev).unwrap();
        let x = PreNorm {
            residual: &res,
            pending: None,
            weight: &g,
            eps,
        };
        let mut wv = Tensor::rand(&[n, k], -0.01, 0.01, dt, s ^ 98, &Device::Cpu)
            .unwrap()
            .to_vec_f64()
            .unwrap();
        let top: Vec<f64> = res.to_vec_f64().unwrap();
        for row in [4000usize, 700, 3] {
            wv[row * k..(row + 1) * k].copy_from_slice(&top);
        }
        let mut with_nan = wv.clone();
        with_nan[4001 * k + 5] = f64::NAN;
        with_nan[2500 * k] = f64::NAN;
        for (vals, want) in [(wv, 3i32), (with_nan, 2500), (vec![0.0; n * k], 0)] {
            let vals: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
            let w = Tensor::from_slice(&vals, &[n, k], &Device::Cpu).unwrap();
            let w = ops::to_dtype(&w, dt).unwrap().to_device(dev).unwrap();
            let ws_len = ops::rms_norm_linear_greedy_workspace_len(n, k, dt);
            let ws = Tensor::zeros(&[ws_len], DType::F32, dev).unwrap();
            let token = Tensor::from_slice(&[-7i32], &[1], dev).unwrap();
            let logits = poisoned(&[1, n], dt, dev);
            ops::rms_norm_linear_greedy_into(&x, &w, &logits, &ws, &token).unwrap();
            assert_eq!(token.to_vec::<i32>().unwrap(), [want], "{dt} ties");
        }
        // Rows the CUDA kernels cannot take (k·size not a multiple of 16 bytes) are refused
        // there with an error; the CPU takes them. Mismatched shapes are refused everywhere.
        let (res, _) = input(&[1, 7], dt, -1.0, 1.0, s ^ 5, dev);
        let g = Tensor::ones(&[7], dt, dev).unwrap();
        let w = Tensor::ones(&[3, 7], dt, dev).unwrap();
        let x = PreNorm {
            residual: &res,
            pending: None,
            weight: &g,
            eps,
        };
        let out = poisoned(&[1, 3], dt, dev);
        // 7 elements are 14 or 28 bytes: never a multiple of 16.
        assert_eq!(ops::rms_norm_linear_into(&x, &w, None, &out).is_err(), cuda);
        let wrong = poisoned(&[1, 4], dt, dev);
        assert!(ops::rms_norm_linear_into(&x, &w, None, &wrong).is_err());
        let short = Tensor::ones(&[6], dt, dev).unwrap();
        let bad = PreNorm {
            weight: &short,
            ..x
        };
        assert!(ops::rms_norm_linear_into(&bad, &w, None, &out).is_err());
    }
});

// The pre-norm QKV projection with RoPE and the KV append as its epilogue: exactly the
// separate ops (pre-norm GEMV, then rope_kv_append — each tested against an f64 reference
// above), bit for bit on the same device, and close to the CPU on CUDA.
op_test!(pre_norm_rope_kv, |dev: &Device| {
    use gpukit_ops::rope::{RopeLayout, rope_kv_append};
    use ops::PreNorm;
    let s = seed();
    let bits = |t: &Tensor| -> Vec<u64> {
        t.to_vec_f64()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    for dt in FLOATS {
        // (k, q heads, kv heads, head_dim, rotary dim (0: none), layout, bias, pending,
        // position): rows split over 1, 2, 4 and 8 warps; partial rotary; no RoPE; the largest
        // head (128 rotated pairs, the kernel's whole angle table).
        let cases = [
            (
                64usize,
                8usize,
                2usize,
                64usize,
                64usize,
                RopeLayout::RotateHalf,
                true,
                false,
                0i32,
            ),
            (2048, 14, 2, 64, 64, RopeLayout::RotateHalf, true, true, 8),
            (
                1024,
                4,
                4,
                80,
                32,
                RopeLayout::AdjacentPairs,
                false,
                true,
                3,
            ),
            (
                4096,
                16,
                8,
                128,
                128,
                RopeLayout::RotateHalf,
                false,
                false,
                5,
            ),
            (8192, 3, 1, 256, 0, RopeLayout::RotateHalf, true, true, 7),
            (
                512,
                2,
                1,
                256,
                256,
                RopeLayout::AdjacentPairs,
                false,
                false,
                6,
            ),
        ];
        for (i, (k, nq, nkv, hd, rotary, layout, with_bias, pending, pos)) in
            cases.into_iter().enumerate()
        {
            let max_len = 9usize;
            let kv_layout = [KvLayout::Swizzled, KvLayout::Linear][i % 2];
            let n = (nq + 2 * nkv) * hd;
            let seed = s ^ (k * 31 + hd) as u64;
            let (res, _) = input(&[1, k], dt, -2.0, 2.0, seed, dev);
            let (y, _) = input(&[1, k], dt, -2.0, 2.0, seed ^ 1, dev);
            let (g, _) = input(&[k], dt, 0.5, 1.5, seed ^ 2, dev);
            let (w, _) = input(&[n, k], dt, -0.1, 0.1, seed ^ 3, dev);
            let (bias, _) = input(&[n], dt, -1.0, 1.0, seed ^ 4, dev);
            let bias = with_bias.then_some(&bias);
            let (table, inv) = plain_rope(rotary, dev);
            let rope = (rotary > 0).then_some((&inv, table.attention_scale, layout));
            let position = Tensor::from_slice(&[pos], &[1], dev).unwrap();
            let nan_cache = |dev: &Device| poisoned_cache(nkv, max_len, hd, dt, kv_layout, dev);
            let what = format!(
                "{dt} k{k} q{nq} kv{nkv} d{hd} rot{rotary} {layout:?} bias {with_bias} pending \
                 {pending} {kv_layout:?}"
            );
            // Fused.
            let sum_f = poisoned(&[1, k], dt, dev);
            let x = PreNorm {
                residual: &res,
                pending: pending.then_some((&y, &sum_f)),
                weight: &g,
                eps: 1e-5,
            };
            let mut cache_f = nan_cache(dev);
            let q_f = poisoned(&[1, nq, hd], dt, dev);
            ops::rms_norm_linear_rope_kv_into(&x, &w, bias, &q_f, &mut cache_f, &position, rope)
                .unwrap();
            // Separate.
            let sum_s = poisoned(&[1, k], dt, dev);
            let x = PreNorm {
                pending: pending.then_some((&y, &sum_s)),
                ..x
            };
            let qkv = poisoned(&[1, n], dt, dev);
            ops::rms_norm_linear_into(&x, &w, bias, &qkv).unwrap();
            let mut cache_s = nan_cache(dev);
            let q_s = poisoned(&[1, nq, hd], dt, dev);
            rope_kv_append(&qkv, &q_s, &mut cache_s, &position, rope, None).unwrap();
            assert!(
                q_f.to_vec_f64().unwrap().iter().all(|v| !v.is_nan()),
                "{what}: q not all written"
            );
            assert_eq!(
                bits(&q_f),
                bits(&q_s),
                "{what}: q differs from the separate ops"
            );
            assert_eq!(
                bits(cache_f.key_storage()),
                bits(cache_s.key_storage()),
                "{what}: key cache differs"
            );
            assert_eq!(
                bits(cache_f.value_storage()),
                bits(cache_s.value_storage()),
                "{what}: value cache differs"
            );
            if pending {
                assert_eq!(bits(&sum_f), bits(&sum_s), "{what}: residual sum differs");
            }
            let cpu = |t: &Tensor| t.to_device(&Device::Cpu).unwrap();
            also_cpu(
                dev,
                &q_f.to_vec_f64().unwrap(),
                || {
                    let sum = poisoned(&[1, k], dt, &Device::Cpu);
                    let (res, y, g, w, inv) = (cpu(&res), cpu(&y), cpu(&g), cpu(&w), cpu(&inv));
                    let bias = bias.map(cpu);
                    let x = PreNorm {
                        residual: &res,
                        pending: pending.then_some((&y, &sum)),
                        weight: &g,
                        eps: 1e-5,
                    };
                    let mut cache = nan_cache(&Device::Cpu);
                    let q = poisoned(&[1, nq, hd], dt, &Device::Cpu);
                    let rope = (rotary > 0).then_some((&inv, table.attention_scale, layout));
                    let position = cpu(&position);
                    ops::rms_norm_linear_rope_kv_into(
                        &x,
                        &w,
                        bias.as_ref(),
                        &q,
                        &mut cache,
                        &position,
                        rope,
                    )
                    .unwrap();
                    q.to_vec_f64().unwrap()
                },
                tol(dt),
                &what,
            );
            // A position past the cache writes no cache row and is an error.
            let past = Tensor::from_slice(&[max_len as i32], &[1], dev).unwrap();
            let mut cache_p = nan_cache(dev);
            let r =
                ops::rms_norm_linear_rope_kv_into(&x, &w, bias, &q_f, &mut cache_p, &past, rope);
            assert_past_cache_refused(dev, r, &what);
            if matches!(dev, Device::Cuda(_)) {
                assert!(
                    cache_p
                        .key_storage()
                        .to_vec_f64()
                        .unwrap()
                        .iter()
                        .all(|v| v.is_nan()),
                    "{what}: a cache row was written past the cache"
                );
            }
            // A weight whose rows do not match the heads is refused.
            let short = w.narrow(0, 0, n - hd).unwrap();
            assert!(
                ops::rms_norm_linear_rope_kv_into(
                    &x,
                    &short,
                    None,
                    &q_f,
                    &mut cache_f,
                    &position,
                    rope
                )
                .is_err(),
                "{what}: mismatched QKV rows accepted"
            );
        }
        // On CUDA a head above 256 (more angles than the kernel's table) is refused.
        if matches!(dev, Device::Cuda(_)) {
            let (res, _) = input(&[1, 64], dt, -2.0, 2.0, s, dev);
            let (g, _) = input(&[64], dt, 0.5, 1.5, s ^ 2, dev);
            let (w, _) = input(&[3 * 512, 64], dt, -0.1, 0.1, s ^ 3, dev);
            let inv = Tensor::from_slice(&[1.0f32; 256], &[256], dev).unwrap();
            let position = Tensor::from_slice(&[0i32], &[1], dev).unwrap();
            let x = PreNorm {
                residual: &res,
                pending: None,
                weight: &g,
                eps: 1e-5,
            };
            let r = ops::rms_norm_linear_rope_kv_into(
                &x,
                &w,
                None,
                &poisoned(&[1, 1, 512], dt, dev),
                &mut poisoned_cache(1, 4, 512, dt, KvLayout::Linear, dev),
                &position,
                Some((&inv, 1.0, RopeLayout::RotateHalf)),
            );
            assert!(
                r.unwrap_err().to_string().contains("head_dim ≤ 256"),
                "{dt}: head_dim 512 accepted"
            );
        }
    }
});
