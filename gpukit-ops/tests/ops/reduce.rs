//! Reductions, argmax and softmax, along an axis and over whole tensors.

use super::*;

op_test!(reductions_and_softmax, |dev: &Device| {
    let s = seed();
    for dt in FLOATS {
        for (shape, axis) in [
            (vec![5, 1000], 1),
            (vec![4, 7, 33], 1),
            (vec![3, 257], 0),
            (vec![1, 1], 1),
            (vec![6, 5, 3], 2),
        ] {
            let (x, xv) = input(&shape, dt, -2.0, 2.0, s, dev);
            let outer: usize = shape[..axis].iter().product();
            let len = shape[axis];
            let inner: usize = shape[axis + 1..].iter().product();
            let at = |o: usize, j: usize, i: usize| xv[(o * len + j) * inner + i];
            let mut out_shape = shape.clone();
            out_shape.remove(axis);
            for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
                let out = poisoned(&out_shape, dt, dev);
                ops::reduce_into(op, &x, axis, &out).unwrap();
                let want: Vec<f64> = (0..outer * inner)
                    .map(|t| {
                        let it = (0..len).map(|j| at(t / inner, j, t % inner));
                        match op {
                            ReduceOp::Sum => it.sum(),
                            ReduceOp::Mean => it.sum::<f64>() / len as f64,
                            ReduceOp::Max => it.fold(f64::MIN, f64::max),
                            ReduceOp::Min => it.fold(f64::MAX, f64::min),
                        }
                    })
                    .collect();
                // Sums of many values accumulate rounding; allow a bit more than one op.
                assert_close(
                    &format!("{op:?} {dt} {shape:?} axis {axis}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    tol(dt) * 4.0,
                );
            }
            assert_eq!(ops::argmax(&x, axis).unwrap().dtype(), DType::I64);
            let am = Tensor::full(&out_shape, -1.0, DType::I64, dev).unwrap();
            ops::argmax_into(&x, axis, &am).unwrap();
            let got = am.to_vec_f64().unwrap();
            for t in 0..outer * inner {
                let (o, i) = (t / inner, t % inner);
                let best = (0..len).map(|j| at(o, j, i)).fold(f64::MIN, f64::max);
                let first = (0..len).find(|&j| at(o, j, i) == best).unwrap();
                assert_eq!(got[t] as usize, first, "argmax {dt} {shape:?} at {t}");
            }
            for log in [false, true] {
                let out = poisoned(&shape, dt, dev);
                ops::softmax_into(&x, axis, log, &out).unwrap();
                let mut want = vec![0f64; xv.len()];
                for t in 0..outer * inner {
                    let (o, i) = (t / inner, t % inner);
                    let m = (0..len).map(|j| at(o, j, i)).fold(f64::MIN, f64::max);
                    let z: f64 = (0..len).map(|j| (at(o, j, i) - m).exp()).sum();
                    for j in 0..len {
                        let d = at(o, j, i) - m;
                        want[(o * len + j) * inner + i] =
                            if log { d - z.ln() } else { d.exp() / z };
                    }
                }
                assert_close(
                    &format!("softmax(log={log}) {dt} {shape:?}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    tol(dt) * 2.0,
                );
            }
        }
    }
    // Whole-tensor forms: every element at once (up to 1M, one row for the row kernels).
    for dt in FLOATS {
        for shape in [vec![1], vec![37, 29], vec![1031, 1021]] {
            let (x, xv) = input(&shape, dt, -2.0, 2.0, s + 9, dev);
            let abs_sum: f64 = xv.iter().map(|v| v.abs()).sum();
            for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
                let out = poisoned(&[], dt, dev);
                ops::reduce_all_into(op, &x, &out).unwrap();
                let n = xv.len() as f64;
                let (want, scale) = match op {
                    ReduceOp::Sum => (xv.iter().sum(), abs_sum),
                    ReduceOp::Mean => (xv.iter().sum::<f64>() / n, abs_sum / n),
                    ReduceOp::Max => (xv.iter().copied().fold(f64::MIN, f64::max), 0.0),
                    ReduceOp::Min => (xv.iter().copied().fold(f64::MAX, f64::min), 0.0),
                };
                assert_eq!(out.shape(), &[] as &[usize]);
                assert_close_scaled(
                    &format!("reduce_all {op:?} {dt} {shape:?}"),
                    &out.to_vec_f64().unwrap(),
                    &[want],
                    &[scale],
                    tol(dt) * 4.0,
                );
            }
            let am = Tensor::full(&[], -1.0, DType::I64, dev).unwrap();
            ops::argmax_all_into(&x, &am).unwrap();
            let best = xv.iter().copied().fold(f64::MIN, f64::max);
            let first = xv.iter().position(|&v| v == best).unwrap();
            assert_eq!(
                am.to_vec_f64().unwrap(),
                vec![first as f64],
                "argmax_all {dt} {shape:?}"
            );
            for log in [false, true] {
                let out = poisoned(&shape, dt, dev);
                ops::softmax_all_into(&x, log, &out).unwrap();
                let m = xv.iter().copied().fold(f64::MIN, f64::max);
                let z: f64 = xv.iter().map(|v| (v - m).exp()).sum();
                let want: Vec<f64> = xv
                    .iter()
                    .map(|v| {
                        if log {
                            v - m - z.ln()
                        } else {
                            (v - m).exp() / z
                        }
                    })
                    .collect();
                // Over 1M elements the probabilities (~1e-6) are below f16's normal range
                // (2^-14), where it keeps an absolute step of 2^-24: weigh them as 2^-14.
                let scale = if dt == DType::F16 && !log {
                    vec![2f64.powi(-14); want.len()]
                } else {
                    Vec::new()
                };
                assert_close_scaled(
                    &format!("softmax_all(log={log}) {dt} {shape:?}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    &scale,
                    tol(dt) * 2.0,
                );
            }
        }
    }
    let all = ops::reduce_all(
        ReduceOp::Sum,
        &Tensor::ones(&[3, 5], DType::F32, dev).unwrap(),
    )
    .unwrap();
    assert_eq!(all.to_vec_f64().unwrap(), vec![15.0]);
    assert!(ops::sum(&all, 0).is_err());
    assert!(ops::argmax_all(&Tensor::zeros(&[0], DType::F32, dev).unwrap()).is_err());
    let (x, _) = input(&[4, 6], DType::F32, 0.0, 1.0, s, dev);
    let strided_out = Tensor::zeros(&[6, 4], DType::F32, dev)
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let e = ops::softmax_all_into(&x, false, &strided_out).unwrap_err();
    assert!(e.to_string().contains("softmax_all"), "{e}");
    // argmax with NaN (counted as the maximum, like torch.argmax) and many ties, along rows
    // (a block per row on CUDA) and columns (a thread per column).
    let (rows, cols) = (3usize, 1000usize);
    let mut v: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0)
        .collect();
    for (r, c) in [(0, 700), (0, 650), (2, 999), (1, 3), (2, 3)] {
        v[r * cols + c] = f32::NAN;
    }
    // The first NaN, else the first maximum.
    let first_max = |it: &mut dyn Iterator<Item = f64>| {
        let xs: Vec<f64> = it.collect();
        xs.iter().position(|x| x.is_nan()).unwrap_or_else(|| {
            let m = xs.iter().copied().fold(f64::MIN, f64::max);
            xs.iter().position(|&x| x == m).unwrap()
        }) as f64
    };
    for dt in [DType::F32, DType::BF16] {
        let x = ops::to_dtype(&Tensor::from_slice(&v, &[rows, cols], dev).unwrap(), dt).unwrap();
        let stored = x.to_vec_f64().unwrap();
        let by_row: Vec<f64> = (0..rows)
            .map(|r| first_max(&mut (0..cols).map(|c| stored[r * cols + c])))
            .collect();
        let by_col: Vec<f64> = (0..cols)
            .map(|c| first_max(&mut (0..rows).map(|r| stored[r * cols + c])))
            .collect();
        let got = ops::argmax(&x, 1).unwrap().to_vec_f64().unwrap();
        assert_eq!(got, by_row, "argmax with NaN {dt}, along rows");
        assert_eq!(by_row[..2], [650.0, 3.0]);
        let got = ops::argmax(&x, 0).unwrap().to_vec_f64().unwrap();
        assert_eq!(got, by_col, "argmax with NaN {dt}, along columns");
    }
});
