//! matmul and linear: cuBLASLt GEMM, the GEMV family and its Hopper rings.

use super::*;

op_test!(matmul_and_linear, |dev: &Device| {
    let s = seed();
    for dt in FLOATS {
        let t = match dt {
            DType::F32 => 1e-5,
            DType::F16 => 2e-3,
            _ => 1e-2,
        };
        // Batched with its own B, and with a shared B; odd sizes.
        for (sa, sb) in [
            (vec![2, 33, 70], vec![2, 70, 17]),
            (vec![3, 5, 64], vec![64, 129]),
            (vec![1, 1], vec![1, 1]),
            (vec![65, 300], vec![300, 127]),
        ] {
            let (a, av) = input(&sa, dt, -1.0, 1.0, s, dev);
            let (b, bv) = input(&sb, dt, -1.0, 1.0, s + 1, dev);
            let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
            let n = sb[sb.len() - 1];
            let batch: usize = sa[..sa.len() - 2].iter().product();
            let shared = sb.len() == 2;
            let mut out_shape = sa[..sa.len() - 2].to_vec();
            out_shape.extend([m, n]);
            let out = poisoned(&out_shape, dt, dev);
            ops::matmul_into(&a, &b, &out).unwrap();
            let mut want = vec![0.0; batch * m * n];
            for bi in 0..batch {
                let boff = if shared { 0 } else { bi * k * n };
                for i in 0..m {
                    for j in 0..n {
                        want[(bi * m + i) * n + j] = (0..k)
                            .map(|p| av[(bi * m + i) * k + p] * bv[boff + p * n + j])
                            .sum();
                    }
                }
            }
            assert_close(
                &format!("matmul {dt} {sa:?}x{sb:?}"),
                &out.to_vec_f64().unwrap(),
                &want,
                t,
            );
        }
        // f32 with TF32 asked for: within TF32's error (10-bit mantissas: ~1e-3 relative);
        // on CUDA its error must exceed full precision's, so the knob reaches cuBLASLt (and the
        // default above, held to 1e-5, is not TF32).
        if dt == DType::F32 {
            let (a, av) = input(&[65, 300], dt, -1.0, 1.0, s + 8, dev);
            let (b, bv) = input(&[300, 127], dt, -1.0, 1.0, s + 9, dev);
            let want: Vec<f64> = (0..65 * 127)
                .map(|t| {
                    let (i, j) = (t / 127, t % 127);
                    (0..300).map(|p| av[i * 300 + p] * bv[p * 127 + j]).sum()
                })
                .collect();
            let rel = |out: &Tensor| {
                let got = out.to_vec_f64().unwrap();
                let num: f64 = got.iter().zip(&want).map(|(g, w)| (g - w).powi(2)).sum();
                let den: f64 = want.iter().map(|w| w * w).sum();
                (num / den).sqrt()
            };
            let out = poisoned(&[65, 127], dt, dev);
            ops::matmul_into_with(&a, &b, &out, gpukit_ops::F32Precision::Tf32).unwrap();
            let tf32 = rel(&out);
            assert!(
                tf32 <= 2e-3,
                "matmul f32 with TF32: relative error {tf32:e}"
            );
            let out = poisoned(&[65, 127], dt, dev);
            ops::matmul_into(&a, &b, &out).unwrap();
            let full = rel(&out);
            assert!(full <= 1e-5, "matmul f32 full: relative error {full:e}");
            // The plan of a product is built once: the same product again adds none, another
            // shape one.
            if let Device::Cuda(c) = dev {
                let plans = c.gemm_plans();
                assert!(plans >= 2, "{plans} plans after two products");
                ops::matmul_into(&a, &b, &out).unwrap();
                assert_eq!(c.gemm_plans(), plans, "the same product planned again");
                let narrower = poisoned(&[65, 126], dt, dev);
                ops::matmul_into(&a, &b.narrow(1, 0, 126).unwrap(), &narrower).unwrap();
                assert_eq!(c.gemm_plans(), plans + 1, "a new shape, no new plan");
            }
            if matches!(dev, Device::Cuda(_)) {
                assert!(
                    tf32 > full * 4.0,
                    "TF32 ({tf32:e}) no less precise than full f32 ({full:e})"
                );
            }
        }
        // linear: GEMV rows (1, 3, 8) and GEMM rows (9, 40), with and without bias/activation.
        for (m, k, n) in [
            (1, 576, 1536),
            (3, 100, 33),
            (8, 1024, 77),
            (9, 64, 40),
            (40, 256, 300),
        ] {
            let (x, xv) = input(&[m, k], dt, -1.0, 1.0, s + 2, dev);
            let (w, wv) = input(&[n, k], dt, -1.0, 1.0, s + 3, dev);
            let (b, bv) = input(&[n], dt, -1.0, 1.0, s + 4, dev);
            for (bias, act) in [
                (false, Activation::None),
                (true, Activation::None),
                (false, Activation::Relu),
                (true, Activation::Relu),
                (false, Activation::GeluTanh),
                (true, Activation::GeluTanh),
            ] {
                let out = poisoned(&[m, n], dt, dev);
                ops::linear_into(&x, &w, bias.then_some(&b), act, &out).unwrap();
                let want: Vec<f64> = (0..m * n)
                    .map(|t| {
                        let (i, j) = (t / n, t % n);
                        let y = (0..k).map(|p| xv[i * k + p] * wv[j * k + p]).sum::<f64>()
                            + if bias { bv[j] } else { 0.0 };
                        match act {
                            Activation::None => y,
                            Activation::Relu => y.max(0.0),
                            Activation::GeluTanh => {
                                0.5 * y
                                    * (1.0
                                        + ((2.0 / std::f64::consts::PI).sqrt()
                                            * (y + 0.044715 * y * y * y))
                                            .tanh())
                            }
                        }
                    })
                    .collect();
                assert_close(
                    &format!("linear {dt} {m}x{k}x{n} bias={bias} {act:?}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    t * 2.0,
                );
            }
        }
        // One row against matrices above gemv::RING_MIN_BYTES (the Hopper ring GEMV on
        // sm_90a): partial last stages (4099 rows in stages of 8 rows, or 4 and 2 with k not a
        // multiple of a group's pass), and 28 KiB rows (stages of one row; f32 rows exceed a
        // stage and take the persistent kernel). (1032, 2051), 4.2 MB in f16 / bf16 and 8.5 MB in
        // f32, takes the small-matrix ring: 2051 rows in 4-row stages; so does (1536, 1400): in
        // f16 / bf16 4-row stages, 3 a block, a ring of one stage a group; in f32 2-row stages
        // with 2 warps a group, a ring of the 6 stages a block has (5 for some blocks: not a
        // multiple of the 4 groups, each slot filled once); and (2048, 1536) in f16 / bf16: 4-row
        // stages, a ring of the 3 a block has for 2 groups, each lane's two packs of x in
        // registers. (1000, 2503), 5 MB in f16 / bf16: 4-row stages with x in registers, one
        // pack for the last lanes of a group and two for the others, and a last stage of 3 rows
        // (which reads x from shared memory). (512, 2101), 4.3 MB in f32: the same in f32, two
        // packs a lane and a last stage of one row (f16 / bf16: the persistent kernel).
        for (k, n) in [
            (2048, 4099),
            (2056, 4099),
            (14336, 600),
            (1032, 2051),
            (1536, 1400),
            (2048, 1536),
            (1000, 2503),
            (512, 2101),
        ] {
            let (x, xv) = input(&[1, k], dt, -1.0, 1.0, s + 5, dev);
            let (w, wv) = input(&[n, k], dt, -1.0, 1.0, s + 6, dev);
            let (b, bv) = input(&[n], dt, -1.0, 1.0, s + 7, dev);
            for bias in [false, true] {
                let out = poisoned(&[1, n], dt, dev);
                ops::linear_into(&x, &w, bias.then_some(&b), Activation::None, &out).unwrap();
                let want: Vec<f64> = (0..n)
                    .map(|j| {
                        (0..k).map(|p| xv[p] * wv[j * k + p]).sum::<f64>()
                            + if bias { bv[j] } else { 0.0 }
                    })
                    .collect();
                assert_close(
                    &format!("linear {dt} 1x{k}x{n} bias={bias}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    t * 2.0,
                );
            }
        }
    }
    let (a, _) = input(&[3, 4], DType::F32, 0.0, 1.0, s, dev);
    let e = ops::matmul(&a, &a).unwrap_err().to_string();
    assert!(e.contains("matmul") && e.contains("[3, 4]"), "{e}");
});
