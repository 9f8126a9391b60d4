//! Elementwise ops: binary with broadcasting, unary math, scalar ops, clamp, where, casts, copies and concat.

use super::*;

op_test!(binary_broadcasting, |dev: &Device| {
    let s = seed();
    for dt in FLOATS {
        for (sa, sb) in [
            (vec![7, 13], vec![7, 13]),
            (vec![3, 1, 5], vec![4, 1]),
            (vec![1], vec![1001]),
            (vec![2, 3, 65], vec![65]),
        ] {
            let (a, av) = input(&sa, dt, -3.0, 3.0, s, dev);
            let (b, bv) = input(&sb, dt, 0.5, 3.0, s + 1, dev);
            let out_shape = gpukit_ops::broadcast_shapes("t", &sa, &sb).unwrap();
            for op in [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Maximum,
                BinaryOp::Atan2,
                BinaryOp::Lt,
            ] {
                let out = poisoned(&out_shape, dt, dev);
                ops::binary_into(op, &a, &b, &out).unwrap();
                let n: usize = out_shape.iter().product();
                let want: Vec<f64> = (0..n)
                    .map(|i| {
                        let x = av[bcast_index(&out_shape, &sa, i)] as f32;
                        let y = bv[bcast_index(&out_shape, &sb, i)] as f32;
                        f64::from(op.apply(x, y))
                    })
                    .collect();
                let got = out.to_vec_f64().unwrap();
                assert_close(&format!("{op:?} {dt} {sa:?}x{sb:?}"), &got, &want, tol(dt));
                also_cpu(
                    dev,
                    &got,
                    || {
                        let (a, b) = (
                            a.to_device(&Device::Cpu).unwrap(),
                            b.to_device(&Device::Cpu).unwrap(),
                        );
                        ops::binary(op, &a, &b).unwrap().to_vec_f64().unwrap()
                    },
                    // atan2f is within a few ulp of the correctly rounded value; the rest are
                    // exact.
                    if op == BinaryOp::Atan2 { tol(dt) } else { 0.0 },
                    &format!("{op:?} {dt}"),
                );
            }
        }
    }
    // Errors name the op and the shapes.
    let (a, _) = input(&[2, 3], DType::F32, 0.0, 1.0, s, dev);
    let (b, _) = input(&[4], DType::F32, 0.0, 1.0, s, dev);
    let e = ops::add(&a, &b).unwrap_err().to_string();
    assert!(
        e.contains("binary") && e.contains("[2, 3]") && e.contains("[4]"),
        "{e}"
    );
    let (h, _) = input(&[2, 3], DType::F16, 0.0, 1.0, s, dev);
    let e = ops::add(&a, &h).unwrap_err().to_string();
    assert!(
        e.contains("binary") && e.contains("f32 [2, 3]") && e.contains("f16 [2, 3]"),
        "{e}"
    );
    let out = poisoned(&[2, 3], DType::F16, dev);
    let e = ops::binary_into(BinaryOp::Add, &a, &a, &out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("binary") && e.contains("[2, 3]") && e.contains("f16"),
        "{e}"
    );
    if matches!(dev, Device::Cuda(_)) {
        let (c, _) = input(&[2, 3], DType::F32, 0.0, 1.0, s, &Device::Cpu);
        let e = ops::add(&a, &c).unwrap_err().to_string();
        assert!(
            e.contains("binary: operands on different devices")
                && e.contains("cuda:0 [2, 3]")
                && e.contains("cpu [2, 3]"),
            "{e}"
        );
        let host_out = poisoned(&[2, 3], DType::F32, &Device::Cpu);
        let e = ops::binary_into(BinaryOp::Add, &a, &a, &host_out)
            .unwrap_err()
            .to_string();
        assert!(e.contains("different devices") && e.contains("cpu"), "{e}");
    }
});

op_test!(unary_math, |dev: &Device| {
    let s = seed();
    let all = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Relu2,
        UnaryOp::GeluErf,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Square,
        UnaryOp::Round,
    ];
    let positive = [UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Recip];
    for dt in FLOATS {
        for shape in [vec![1], vec![17, 31], vec![2, 3, 1031]] {
            let (x, xv) = input(&shape, dt, -4.0, 4.0, s, dev);
            let (p, pv) = input(&shape, dt, 0.1, 8.0, s + 7, dev);
            for (ops_list, t, tv) in [(&all[..], &x, &xv), (&positive[..], &p, &pv)] {
                for &op in ops_list {
                    let out = poisoned(&shape, dt, dev);
                    ops::unary_into(op, t, &out).unwrap();
                    let want: Vec<f64> =
                        tv.iter().map(|&v| f64::from(op.apply(v as f32))).collect();
                    // Kernels use f32 intrinsics (a few ulp); f32 tolerance is relative 1e-5.
                    assert_close(
                        &format!("{op:?} {dt} {shape:?}"),
                        &out.to_vec_f64().unwrap(),
                        &want,
                        tol(dt),
                    );
                }
            }
        }
    }
    // Views: a transposed input goes through the strided kernel.
    let (x, xv) = input(&[5, 7], DType::F32, -2.0, 2.0, s, dev);
    let t = x.transpose(0, 1).unwrap();
    let got = ops::exp(&t).unwrap().to_vec_f64().unwrap();
    let want: Vec<f64> = (0..35).map(|i| (xv[(i % 5) * 7 + i / 5]).exp()).collect();
    assert_close("exp of a transpose", &got, &want, 1e-5);
    assert!(ops::exp(&Tensor::zeros(&[3], DType::I32, dev).unwrap()).is_err());
});

op_test!(scalar_clamp_where_cast, |dev: &Device| {
    let s = seed();
    for dt in FLOATS {
        for shape in [vec![1], vec![9, 37], vec![3, 1, 129]] {
            let (x, xv) = input(&shape, dt, -3.0, 3.0, s, dev);
            // s / x and x ^ s on a positive input (no pole, no NaN from a negative base).
            let (p, pv) = input(&shape, dt, 0.25, 3.0, s + 5, dev);
            for op in [
                ScalarOp::Add,
                ScalarOp::Mul,
                ScalarOp::Sub,
                ScalarOp::RSub,
                ScalarOp::Div,
                ScalarOp::RDiv,
                ScalarOp::Pow,
                ScalarOp::Maximum,
                ScalarOp::Minimum,
            ] {
                let (t, tv) = if matches!(op, ScalarOp::RDiv | ScalarOp::Pow) {
                    (&p, &pv)
                } else {
                    (&x, &xv)
                };
                let out = poisoned(&shape, dt, dev);
                ops::scalar_into(op, t, 1.75, &out).unwrap();
                let want: Vec<f64> = tv
                    .iter()
                    .map(|&v| f64::from(op.apply(v as f32, 1.75)))
                    .collect();
                assert_close(
                    &format!("{op:?} {dt} {shape:?}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    tol(dt),
                );
            }
            let out = poisoned(&shape, dt, dev);
            ops::clamp_into(&x, -1.0, 0.5, &out).unwrap();
            let want: Vec<f64> = xv.iter().map(|&v| v.clamp(-1.0, 0.5)).collect();
            assert_close(
                &format!("clamp {dt} {shape:?}"),
                &out.to_vec_f64().unwrap(),
                &want,
                0.0,
            );
            let (y, yv) = input(&shape, dt, -3.0, 3.0, s + 3, dev);
            let cond_v: Vec<u8> = xv.iter().map(|&v| u8::from(v > 0.0)).collect();
            let cond = Tensor::from_slice(&cond_v, &shape, dev).unwrap();
            let out = poisoned(&shape, dt, dev);
            ops::where_into(&cond, &x, &y, &out).unwrap();
            let want: Vec<f64> = (0..xv.len())
                .map(|i| if cond_v[i] != 0 { xv[i] } else { yv[i] })
                .collect();
            assert_close(
                &format!("where {dt} {shape:?}"),
                &out.to_vec_f64().unwrap(),
                &want,
                0.0,
            );
            for to in FLOATS {
                let got = poisoned(&shape, to, dev);
                ops::cast_into(&x, &got).unwrap();
                let want: Vec<f64> = Tensor::from_slice(
                    &xv.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                    &shape,
                    &Device::Cpu,
                )
                .unwrap()
                .to_vec_f64()
                .unwrap();
                // Casting up is exact; casting down rounds once.
                assert_close(
                    &format!("cast {dt}->{to} {shape:?}"),
                    &got.to_vec_f64().unwrap(),
                    &want,
                    tol(to),
                );
                assert_eq!(ops::to_dtype(&x, to).unwrap().dtype(), to);
            }
        }
        // where with every operand broadcast: cond [9, 1], a [9, 37], b [37].
        let (a, av) = input(&[9, 37], dt, -3.0, 3.0, s + 11, dev);
        let (b, bv) = input(&[37], dt, -3.0, 3.0, s + 12, dev);
        let cond_v: Vec<u8> = (0..9).map(|i| u8::from(i % 3 == 1)).collect();
        let cond = Tensor::from_slice(&cond_v, &[9, 1], dev).unwrap();
        let out = poisoned(&[9, 37], dt, dev);
        ops::where_into(&cond, &a, &b, &out).unwrap();
        let want: Vec<f64> = (0..9 * 37)
            .map(|i| {
                if cond_v[i / 37] != 0 {
                    av[i]
                } else {
                    bv[i % 37]
                }
            })
            .collect();
        assert_close(
            &format!("where broadcast {dt}"),
            &out.to_vec_f64().unwrap(),
            &want,
            0.0,
        );
        // Scalar ops and clamp on a transposed (strided) input.
        let (x, xv) = input(&[5, 7], dt, -3.0, 3.0, s + 13, dev);
        let out = poisoned(&[7, 5], dt, dev);
        ops::clamp_into(&x.transpose(0, 1).unwrap(), -1.0, 0.5, &out).unwrap();
        let want: Vec<f64> = (0..35)
            .map(|i| xv[(i % 5) * 7 + i / 5].clamp(-1.0, 0.5))
            .collect();
        assert_close(
            &format!("clamp of a transpose {dt}"),
            &out.to_vec_f64().unwrap(),
            &want,
            0.0,
        );
    }
});

// Elementwise kernels past one pass of their grid: `grid::elementwise` caps it at 16 blocks
// of 256 threads per multiprocessor (~540k threads on an H100), and the contiguous kernels take
// 16 bytes a thread, so 4.5M elements loop 2–8 times per thread (strided: 8).
op_test!(elementwise_large, |dev: &Device| {
    let s = seed();
    let n = 4_500_007;
    for dt in [DType::F32, DType::BF16] {
        let (a, av) = input(&[n], dt, -3.0, 3.0, s, dev);
        let (b, bv) = input(&[n], dt, 0.5, 3.0, s + 1, dev);
        let out = poisoned(&[n], dt, dev);
        ops::binary_into(BinaryOp::Mul, &a, &b, &out).unwrap();
        let want: Vec<f64> = (0..n)
            .map(|i| f64::from(av[i] as f32 * bv[i] as f32))
            .collect();
        assert_close(
            &format!("mul {dt} [{n}]"),
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
        let out = poisoned(&[n], dt, dev);
        ops::unary_into(UnaryOp::Silu, &a, &out).unwrap();
        let want: Vec<f64> = av
            .iter()
            .map(|&v| f64::from(UnaryOp::Silu.apply(v as f32)))
            .collect();
        assert_close(
            &format!("silu {dt} [{n}]"),
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
        let out = poisoned(&[n], dt, dev);
        ops::scalar_into(ScalarOp::Add, &a, 0.5, &out).unwrap();
        let want: Vec<f64> = av.iter().map(|&v| f64::from(v as f32 + 0.5)).collect();
        assert_close(
            &format!("scalar add {dt} [{n}]"),
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
        // Strided: a transposed [1733, 2593] (4.5M) view through the broadcasting kernel.
        let (r, c) = (1733, 2593);
        let m = a.narrow(0, 0, r * c).unwrap().reshape(&[r, c]).unwrap();
        let t = m.transpose(0, 1).unwrap();
        let (row, rv) = input(&[r], dt, 0.5, 3.0, s + 2, dev);
        let out = poisoned(&[c, r], dt, dev);
        ops::binary_into(BinaryOp::Add, &t, &row, &out).unwrap();
        let want: Vec<f64> = (0..r * c)
            .map(|i| {
                let (j, k) = (i / r, i % r);
                f64::from(av[k * c + j] as f32 + rv[k] as f32)
            })
            .collect();
        assert_close(
            &format!("add of a transpose {dt} [{c}, {r}]"),
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
    }
});

op_test!(copies_views_concat, |dev: &Device| {
    let s = seed();
    for dt in DType::ALL {
        let (x, xv) = input(&[3, 4, 5], dt, 0.0, 100.0, s, dev);
        let p = x.permute(&[2, 0, 1]).unwrap();
        let c = p.contiguous().unwrap();
        assert!(c.is_contiguous());
        let into = poisoned_any(&[5, 3, 4], dt, dev);
        ops::copy_into(&p, &into).unwrap();
        assert_eq!(into.to_vec_f64().unwrap(), c.to_vec_f64().unwrap());
        let got = c.to_vec_f64().unwrap();
        let want: Vec<f64> = (0..60)
            .map(|i| {
                let (k, r) = (i / 12, i % 12);
                let (ii, jj) = (r / 4, r % 4);
                xv[(ii * 4 + jj) * 5 + k]
            })
            .collect();
        assert_eq!(got, want, "permute copy {dt}");
        let (y, yv) = input(&[3, 2, 5], dt, 0.0, 100.0, s + 1, dev);
        let cat = ops::concat(&[&x, &y], 1).unwrap();
        assert_eq!(cat.shape(), &[3, 6, 5]);
        let into = poisoned_any(&[3, 6, 5], dt, dev);
        ops::concat_into(&[&x, &y], 1, &into).unwrap();
        assert_eq!(into.to_vec_f64().unwrap(), cat.to_vec_f64().unwrap());
        let got = cat.to_vec_f64().unwrap();
        for i in 0..3 {
            for j in 0..6 {
                for k in 0..5 {
                    let w = if j < 4 {
                        xv[(i * 4 + j) * 5 + k]
                    } else {
                        yv[(i * 2 + j - 4) * 5 + k]
                    };
                    assert_eq!(got[(i * 6 + j) * 5 + k], w, "concat {dt}");
                }
            }
        }
        let n = x.narrow(2, 1, 3).unwrap();
        assert_eq!(n.to_vec_f64().unwrap().len(), 36);
    }
    let (x, _) = input(&[2, 3], DType::F32, 0.0, 1.0, s, dev);
    let (y, _) = input(&[3, 3], DType::F32, 0.0, 1.0, s, dev);
    assert!(ops::concat(&[&x, &y], 1).is_err());
    assert!(x.reshape(&[4]).is_err());
});
