//! Scaled dot-product attention: prefill and decode kernels, KV layouts, masks, ALiBi, the device position.

use super::*;

op_test!(sdpa_attention, |dev: &Device| {
    use gpukit_ops::attention::{
        AttentionMask, attention_shape, sdpa, sdpa_into, sdpa_kv_into, sdpa_reference,
        sdpa_workspace_len,
    };
    let s = seed();
    let on_gpu = matches!(dev, Device::Cuda(_));
    let causal = AttentionMask {
        causal: true,
        ..Default::default()
    };
    // (batch, group, kv_heads, q_len, kv_len, mask): prefill (64-query tiles, causal offset,
    // window, ALiBi, non-causal) and decode (≤ 16 rows per KV head, split-K over the keys).
    let mut cases = vec![
        (1, 1, 2, 17, 17, causal),
        (2, 4, 1, 1, 17, causal),
        (1, 7, 1, 2, 128, causal),
        (1, 8, 1, 1, 1, causal),
        (
            2,
            1,
            2,
            17,
            128,
            AttentionMask {
                alibi: true,
                ..Default::default()
            },
        ),
        // 6 query heads: ALiBi's slopes for a head count that is not a power of two (the
        // second series after the first 4).
        (
            1,
            3,
            2,
            17,
            128,
            AttentionMask {
                causal: true,
                alibi: true,
                ..Default::default()
            },
        ),
    ];
    if on_gpu {
        cases.extend([
            (1, 4, 2, 128, 128, causal),
            (1, 8, 1, 17, 4097, causal),
            (1, 4, 2, 1, 4097, causal),
            (1, 7, 1, 1, 4097, causal),
            (
                1,
                2,
                2,
                128,
                300,
                AttentionMask {
                    causal: true,
                    sliding_window: Some(100),
                    alibi: true,
                },
            ),
            (
                1,
                8,
                1,
                1,
                4097,
                AttentionMask {
                    causal: true,
                    sliding_window: Some(1000),
                    alibi: false,
                },
            ),
            // Prefill over several query and key tiles without ALiBi (on Hopper the
            // warpgroup-MMA kernel): a sliding window that skips whole key tiles, and no mask.
            (
                1,
                2,
                2,
                300,
                700,
                AttentionMask {
                    causal: true,
                    sliding_window: Some(150),
                    alibi: false,
                },
            ),
            (1, 3, 1, 200, 333, AttentionMask::default()),
            // Longer caches: decode with ALiBi; 132 and 150 (batch × KV heads) units of one
            // split each (Hopper's decode ring's blocks then take one unit, or go round for a
            // second).
            (
                1,
                4,
                2,
                1,
                4100,
                AttentionMask {
                    causal: true,
                    sliding_window: None,
                    alibi: true,
                },
            ),
            // 12 query heads (8, then 4 of the second series), split-K decode with ALiBi.
            (
                1,
                3,
                4,
                1,
                4100,
                AttentionMask {
                    causal: true,
                    sliding_window: None,
                    alibi: true,
                },
            ),
            (2, 4, 66, 1, 4100, causal),
            (3, 2, 50, 1, 4099, causal),
            // 16 splits, 15 of 1088 keys (17 tiles) and the last of 128: the ring's first-tile
            // L2 requests for splits of 16 tiles or more, bounded by the last split's two (what
            // memcheck on this test checks; the requests change no result).
            (1, 4, 8, 1, 16_448, causal),
        ]);
    }
    let dtypes: &[DType] = if on_gpu {
        &[DType::F16, DType::BF16]
    } else {
        &[DType::BF16]
    };
    let head_dims: &[usize] = if on_gpu {
        &[64, 80, 96, 128, 256]
    } else {
        &[64]
    };
    let mut n = 0;
    for (di, &dt) in dtypes.iter().enumerate() {
        for (hi, &d) in head_dims.iter().enumerate() {
            for (ci, &(b, group, kvh, ql, kl, mask)) in cases.iter().enumerate() {
                if d == 256 && ((6..11).contains(&ci) || kl > 8192) {
                    continue; // the long cases at 256 add time, not coverage
                }
                let qh = group * kvh;
                let sd = s + (hi * 100 + ci) as u64;
                let (q, qv) = input(&[b, qh, ql, d], dt, -1.0, 1.0, sd, dev);
                // K/V as views of a longer cache: strided batch/head, like KvCache::keys().
                let (kf, _) = input(&[b, kvh, kl + 8, d], dt, -1.0, 1.0, sd + 1, dev);
                let (vf, _) = input(&[b, kvh, kl + 8, d], dt, -1.0, 1.0, sd + 2, dev);
                let (k, v) = (kf.narrow(2, 0, kl).unwrap(), vf.narrow(2, 0, kl).unwrap());
                let kv = k.to_vec_f64().unwrap();
                let vv = v.to_vec_f64().unwrap();
                // Half the calls read K and V as a pre-swizzled cache holds them (each case,
                // both dtypes: both layouts).
                let layout = [KvLayout::Linear, KvLayout::Swizzled][(di + hi + ci) % 2];
                let (kf, vf) = (in_layout(&kf, layout), in_layout(&vf, layout));
                let (k, v) = (kf.narrow(2, 0, kl).unwrap(), vf.narrow(2, 0, kl).unwrap());
                let f = |x: &[f64]| x.iter().map(|&a| a as f32).collect::<Vec<_>>();
                let scale = 1.0 / (d as f32).sqrt();
                let shape = attention_shape(&q, &k, &v).unwrap();
                let want: Vec<f64> = sdpa_reference(&f(&qv), &f(&kv), &f(&vv), shape, scale, mask)
                    .unwrap()
                    .into_iter()
                    .map(f64::from)
                    .collect();
                let out = poisoned(&[b, qh, ql, d], dt, dev);
                let ws = Tensor::full(
                    &[sdpa_workspace_len(&shape, &mask)],
                    f64::NAN,
                    DType::F32,
                    dev,
                )
                .unwrap();
                sdpa_kv_into(&q, &k, &v, layout, scale, mask, &out, &ws).unwrap();
                let what = format!("sdpa {dt} d={d} {shape:?} {mask:?} {layout:?}");
                assert_close(&what, &out.to_vec_f64().unwrap(), &want, tol(dt));
                n += 1;
            }
        }
        // Output written through a transposed view ([b, q_len, heads, d] memory, the layout
        // the output projection reads), with the allocating form as the comparison.
        let (q, _) = input(&[1, 8, 33, 64], dt, -1.0, 1.0, s + 7, dev);
        let (k, _) = input(&[1, 2, 40, 64], dt, -1.0, 1.0, s + 8, dev);
        let (v, _) = input(&[1, 2, 40, 64], dt, -1.0, 1.0, s + 9, dev);
        let dense = sdpa(&q, &k, &v, 0.125, causal).unwrap();
        let tokens_major = poisoned(&[1, 33, 8, 64], dt, dev);
        let view = tokens_major.transpose(1, 2).unwrap();
        let ws = Tensor::empty(&[0], DType::F32, dev).unwrap();
        sdpa_into(&q, &k, &v, 0.125, causal, &view, &ws).unwrap();
        assert_eq!(
            view.to_vec_f64().unwrap(),
            dense.to_vec_f64().unwrap(),
            "sdpa into a strided output {dt}"
        );
        // Swizzled K/V whose rows are not back to back (views of a padded buffer): on Hopper not
        // the ring's 1-d copies but the portable decode kernel, which reads the layout as well.
        let (kl, d) = (4100, 64 * (1 + usize::from(on_gpu)));
        let (q, qv) = input(&[1, 8, 1, d], dt, -1.0, 1.0, s + 10, dev);
        let (k, kv) = input(&[1, 2, kl, d], dt, -1.0, 1.0, s + 11, dev);
        let (v, vv) = input(&[1, 2, kl, d], dt, -1.0, 1.0, s + 12, dev);
        let padded = |t: &Tensor| {
            let buffer = poisoned(&[1, 2, kl, d + 8], dt, dev);
            let view = buffer.narrow(3, 0, d).unwrap();
            ops::copy_into(&in_layout(t, KvLayout::Swizzled), &view).unwrap();
            view
        };
        let (kp, vp) = (padded(&k), padded(&v));
        let shape = attention_shape(&q, &kp, &vp).unwrap();
        let f = |x: &[f64]| x.iter().map(|&a| a as f32).collect::<Vec<_>>();
        let want: Vec<f64> = sdpa_reference(&f(&qv), &f(&kv), &f(&vv), shape, 0.125, causal)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        let out = poisoned(&[1, 8, 1, d], dt, dev);
        let ws_len = sdpa_workspace_len(&shape, &causal).max(1);
        let ws = Tensor::zeros(&[ws_len], DType::F32, dev).unwrap();
        sdpa_kv_into(&q, &kp, &vp, KvLayout::Swizzled, 0.125, causal, &out, &ws).unwrap();
        assert_close(
            &format!("sdpa {dt} on swizzled K/V with padded rows"),
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
    }
    println!("[{}] sdpa: {n} cases within tolerance", dev.describe());
    // A view into swizzled K/V counts its keys from its own first row: one that starts at a
    // multiple of 8 keys reads as the rows it covers (4096 of them: on Hopper the ring's 1-d
    // copies); one that starts elsewhere is refused, also after a reshape has reset its size-1
    // head dimension's stride.
    {
        let (dt, d, s, n) = (DType::BF16, 64, seed(), 4096);
        let (q, qv) = input(&[1, 4, 1, d], dt, -1.0, 1.0, s, dev);
        let (k, kv) = input(&[1, 1, n + 8, d], dt, -1.0, 1.0, s + 1, dev);
        let (v, vv) = input(&[1, 1, n + 8, d], dt, -1.0, 1.0, s + 2, dev);
        let (ks, vs) = (
            in_layout(&k, KvLayout::Swizzled),
            in_layout(&v, KvLayout::Swizzled),
        );
        let (kw, vw) = (ks.narrow(2, 8, n).unwrap(), vs.narrow(2, 8, n).unwrap());
        let shape = attention_shape(&q, &kw, &vw).unwrap();
        let f = |x: &[f64]| x[8 * d..].iter().map(|&a| a as f32).collect::<Vec<_>>();
        let qf: Vec<f32> = qv.iter().map(|&a| a as f32).collect();
        let want: Vec<f64> = sdpa_reference(&qf, &f(&kv), &f(&vv), shape, 0.125, causal)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        let out = poisoned(&[1, 4, 1, d], dt, dev);
        let ws_len = sdpa_workspace_len(&shape, &causal).max(1);
        let ws = Tensor::zeros(&[ws_len], DType::F32, dev).unwrap();
        sdpa_kv_into(&q, &kw, &vw, KvLayout::Swizzled, 0.125, causal, &out, &ws).unwrap();
        assert_close(
            "sdpa on a swizzled view from key 8",
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
        let (kb, vb) = (ks.narrow(2, 3, n).unwrap(), vs.narrow(2, 3, n).unwrap());
        let reshaped = |t: &Tensor| t.reshape(&[1, 1, n, d]).unwrap();
        for (kb, vb, what) in [
            (kb.clone(), vb.clone(), "a view"),
            (reshaped(&kb), reshaped(&vb), "a reshaped view"),
        ] {
            let e = sdpa_kv_into(&q, &kb, &vb, KvLayout::Swizzled, 0.125, causal, &out, &ws);
            assert!(
                matches!(&e, Err(gpukit_ops::Error::Shape { detail, .. }) if detail.contains("multiple of 8")),
                "{what} of swizzled K/V from key 3: {e:?}"
            );
        }
        // The same view read as linear rows is not a swizzled view: no refusal.
        sdpa_kv_into(&q, &kb, &vb, KvLayout::Linear, 0.125, causal, &out, &ws).unwrap();
    }
    // Errors: mismatched heads, too many queries for a causal mask, and on CUDA an unsupported
    // dtype / head_dim and a short workspace.
    let t = |shape: &[usize], dt| Tensor::zeros(shape, dt, dev).unwrap();
    let bf = DType::BF16;
    assert!(
        sdpa(
            &t(&[1, 3, 1, 64], bf),
            &t(&[1, 2, 1, 64], bf),
            &t(&[1, 2, 1, 64], bf),
            1.0,
            causal
        )
        .is_err()
    );
    assert!(
        sdpa(
            &t(&[1, 2, 5, 64], bf),
            &t(&[1, 2, 4, 64], bf),
            &t(&[1, 2, 4, 64], bf),
            1.0,
            causal
        )
        .is_err()
    );
    if on_gpu {
        let f32s = DType::F32;
        let e = sdpa(
            &t(&[1, 2, 1, 64], f32s),
            &t(&[1, 2, 4, 64], f32s),
            &t(&[1, 2, 4, 64], f32s),
            1.0,
            causal,
        );
        assert!(e.unwrap_err().to_string().contains("f16 or bf16"));
        let e = sdpa(
            &t(&[1, 2, 1, 32], bf),
            &t(&[1, 2, 4, 32], bf),
            &t(&[1, 2, 4, 32], bf),
            1.0,
            causal,
        );
        assert!(e.unwrap_err().to_string().contains("head_dim"));
        let (q, k) = (t(&[1, 8, 1, 64], bf), t(&[1, 1, 5000, 64], bf));
        let out = t(&[1, 8, 1, 64], bf);
        let short = t(&[1], DType::F32);
        assert!(sdpa_into(&q, &k, &k, 1.0, causal, &out, &short).is_err());
    }
});

op_test!(sdpa_at_device_position_and_decode_state, |dev: &Device| {
    use gpukit_ops::attention::{
        AttentionMask, attention_shape, sdpa_decode_at_into, sdpa_decode_at_workspace_len,
        sdpa_reference,
    };
    use gpukit_ops::sampling::advance_decode_state;
    let s = seed();
    let dts: &[DType] = if matches!(dev, Device::Cuda(_)) {
        &[DType::BF16, DType::F16]
    } else {
        &[DType::F32]
    };
    // (group, kv_heads, q_len, head_dim, capacity, position, window): the keys attended are
    // 0 .. position + q_len of a cache of `capacity`; the rest of the cache is NaN, which must
    // not reach the output (a kernel may copy those rows, but never multiply by them).
    let cases = [
        (1, 2, 1, 64, 300, 0, None),
        (4, 2, 1, 128, 300, 17, None),
        (7, 1, 1, 64, 4097, 4000, None),
        (8, 1, 2, 128, 130, 127, None),
        (2, 2, 1, 64, 500, 300, Some(64)),
        // Long caches: splits past the position see no keys.
        (4, 2, 1, 128, 4500, 17, None),
        (2, 2, 1, 64, 4200, 4100, Some(64)),
    ];
    for (di, &dt) in dts.iter().enumerate() {
        for (i, &(group, kvh, q_len, d, cap, pos, window)) in cases.iter().enumerate() {
            // Caches of both layouts (each case, both dtypes on CUDA: both).
            let layout = [KvLayout::Swizzled, KvLayout::Linear][(i + di) % 2];
            let qh = group * kvh;
            let seed = s + 10 * i as u64;
            let (q, qv) = input(&[1, qh, q_len, d], dt, -1.0, 1.0, seed, dev);
            let (k, kv) = input(&[1, kvh, cap, d], dt, -1.0, 1.0, seed + 1, dev);
            let (v, vv) = input(&[1, kvh, cap, d], dt, -1.0, 1.0, seed + 2, dev);
            let mask = AttentionMask {
                causal: true,
                sliding_window: window,
                alibi: false,
            };
            let keys = pos + q_len;
            let nan_past = |t: &Tensor| {
                let c = poisoned(t.shape(), dt, dev);
                let filled = t.narrow(2, 0, keys).unwrap();
                ops::copy_into(&filled, &c.narrow(2, 0, keys).unwrap()).unwrap();
                c
            };
            let (k, v) = (
                nan_past(&in_layout(&k, layout)),
                nan_past(&in_layout(&v, layout)),
            );
            let narrow = |x: &[f64]| -> Vec<f32> {
                (0..kvh)
                    .flat_map(|h| x[h * cap * d..][..keys * d].iter().map(|&a| a as f32))
                    .collect()
            };
            let qf: Vec<f32> = qv.iter().map(|&a| a as f32).collect();
            let mut shape = attention_shape(&q, &k, &v).unwrap();
            shape.kv_len = keys;
            let want: Vec<f64> =
                sdpa_reference(&qf, &narrow(&kv), &narrow(&vv), shape, 0.125, mask)
                    .unwrap()
                    .into_iter()
                    .map(f64::from)
                    .collect();
            let position = Tensor::from_slice(&[pos as i32], &[1], dev).unwrap();
            let full = attention_shape(&q, &k, &v).unwrap();
            let ws = Tensor::zeros(
                &[sdpa_decode_at_workspace_len(&full).max(1)],
                DType::F32,
                dev,
            )
            .unwrap();
            let out = poisoned(&[1, qh, q_len, d], dt, dev);
            sdpa_decode_at_into(&q, &k, &v, layout, &position, 0.125, mask, &out, &ws).unwrap();
            let got = out.to_vec_f64().unwrap();
            assert_close(
                &format!("sdpa at position, case {i} {dt} {layout:?}"),
                &got,
                &want,
                tol(dt),
            );
            // Run twice: bitwise the same.
            let again = poisoned(&[1, qh, q_len, d], dt, dev);
            sdpa_decode_at_into(&q, &k, &v, layout, &position, 0.125, mask, &again, &ws).unwrap();
            assert_eq!(
                again.to_vec_f64().unwrap(),
                got,
                "case {i} {dt}: run to run"
            );
        }
    }
    // A position past the cache: an error on the CPU; on CUDA the keys are clamped to the
    // capacity (never read out of bounds).
    let (q, _) = input(&[1, 2, 1, 64], DType::BF16, -1.0, 1.0, s, dev);
    let (k, _) = input(&[1, 1, 64, 64], DType::BF16, -1.0, 1.0, s, dev);
    let ws = Tensor::zeros(&[1 << 16], DType::F32, dev).unwrap();
    let out = poisoned(&[1, 2, 1, 64], DType::BF16, dev);
    let far = Tensor::from_slice(&[64i32], &[1], dev).unwrap();
    let mask = AttentionMask {
        causal: true,
        ..Default::default()
    };
    let r = sdpa_decode_at_into(&q, &k, &k, KvLayout::Swizzled, &far, 0.125, mask, &out, &ws);
    if matches!(dev, Device::Cpu) {
        assert!(r.unwrap_err().to_string().contains("does not fit"));
    } else {
        r.unwrap();
        assert!(out.to_vec_f64().unwrap().iter().all(|x| x.is_finite()));
    }
    let bad_pos = Tensor::from_slice(&[0i64], &[1], dev).unwrap();
    let r = sdpa_decode_at_into(
        &q,
        &k,
        &k,
        KvLayout::Linear,
        &bad_pos,
        0.125,
        mask,
        &out,
        &ws,
    );
    assert!(r.is_err());

    // The decode state moves on by one token.
    let position = Tensor::from_slice(&[5i32], &[1], dev).unwrap();
    let step = Tensor::from_slice(&[9i64], &[1], dev).unwrap();
    let recent = Tensor::from_slice(&[-1i32, 3, 4], &[1, 3], dev).unwrap();
    let token = Tensor::from_slice(&[7i32], &[1], dev).unwrap();
    advance_decode_state(&position, &step, Some(&recent), &token).unwrap();
    assert_eq!(position.to_vec::<i32>().unwrap(), [6]);
    assert_eq!(step.to_vec::<i64>().unwrap(), [10]);
    assert_eq!(recent.to_vec::<i32>().unwrap(), [3, 4, 7]);
    advance_decode_state(&position, &step, None, &token).unwrap();
    assert_eq!(position.to_vec::<i32>().unwrap(), [7]);
    assert!(advance_decode_state(&step, &step, None, &token).is_err());
});
