//! RMSNorm, add + RMSNorm and LayerNorm.

use super::*;

op_test!(norms, |dev: &Device| {
    let s = seed();
    for dt in FLOATS {
        for (rows, hidden) in [
            (1, 1),
            (3, 576),
            (5, 4097),
            (17, 64),
            (37, 1024),
            (2, 8192),
            (2, 9000),
            (3, 20000),
        ] {
            let (x, xv) = input(&[rows, hidden], dt, -2.0, 2.0, s, dev);
            let (r, rv) = input(&[rows, hidden], dt, -2.0, 2.0, s + 1, dev);
            let (w, wv) = input(&[hidden], dt, 0.5, 1.5, s + 2, dev);
            let (b, bv) = input(&[hidden], dt, -0.5, 0.5, s + 3, dev);
            let eps = 1e-5f32;
            let rms = |v: &[f64]| -> Vec<f64> {
                let mut o = vec![0.0; v.len()];
                for row in 0..rows {
                    let xs = &v[row * hidden..][..hidden];
                    let inv = 1.0
                        / (xs.iter().map(|a| a * a).sum::<f64>() / hidden as f64 + f64::from(eps))
                            .sqrt();
                    for j in 0..hidden {
                        o[row * hidden + j] = xs[j] * inv * wv[j];
                    }
                }
                o
            };
            let out = poisoned(&[rows, hidden], dt, dev);
            ops::rms_norm_into(&x, &w, eps, &out).unwrap();
            let got = out.to_vec_f64().unwrap();
            assert_close(
                &format!("rms_norm {dt} {rows}x{hidden}"),
                &got,
                &rms(&xv),
                tol(dt),
            );
            also_cpu(
                dev,
                &got,
                || {
                    ops::rms_norm(
                        &x.to_device(&Device::Cpu).unwrap(),
                        &w.to_device(&Device::Cpu).unwrap(),
                        eps,
                    )
                    .unwrap()
                    .to_vec_f64()
                    .unwrap()
                },
                tol(dt),
                "rms_norm",
            );

            // Fused residual add: h rounded to the dtype, then normalised.
            let h: Vec<f64> = {
                let hv: Vec<f32> = xv
                    .iter()
                    .zip(&rv)
                    .map(|(a, b)| *a as f32 + *b as f32)
                    .collect();
                Tensor::from_slice(&hv, &[rows, hidden], &Device::Cpu)
                    .and_then(|t| ops::to_dtype(&t, dt))
                    .unwrap()
                    .to_vec_f64()
                    .unwrap()
            };
            let (o, ro) = (
                poisoned(&[rows, hidden], dt, dev),
                poisoned(&[rows, hidden], dt, dev),
            );
            ops::add_rms_norm_into(&x, &r, &w, eps, &o, &ro).unwrap();
            assert_eq!(ro.to_vec_f64().unwrap(), h, "add_rms_norm residual {dt}");
            assert_close(
                &format!("add_rms_norm {dt}"),
                &o.to_vec_f64().unwrap(),
                &rms(&h),
                tol(dt),
            );

            for bias in [false, true] {
                let out = poisoned(&[rows, hidden], dt, dev);
                ops::layer_norm_into(&x, &w, bias.then_some(&b), eps, &out).unwrap();
                let mut want = vec![0.0; xv.len()];
                for row in 0..rows {
                    let xs = &xv[row * hidden..][..hidden];
                    let mean = xs.iter().sum::<f64>() / hidden as f64;
                    let var =
                        xs.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / hidden as f64;
                    for j in 0..hidden {
                        want[row * hidden + j] = (xs[j] - mean) / (var + f64::from(eps)).sqrt()
                            * wv[j]
                            + if bias { bv[j] } else { 0.0 };
                    }
                }
                // A single element normalises to 0 (+bias): compare absolutely there.
                let t = if hidden == 1 { tol(dt) * 10.0 } else { tol(dt) };
                assert_close(
                    &format!("layer_norm {dt} bias={bias} {rows}x{hidden}"),
                    &out.to_vec_f64().unwrap(),
                    &want,
                    t,
                );
            }
        }
    }
    let (x, _) = input(&[2, 8], DType::F32, 0.0, 1.0, s, dev);
    let (w, _) = input(&[7], DType::F32, 0.0, 1.0, s, dev);
    let e = ops::rms_norm(&x, &w, 1e-5).unwrap_err().to_string();
    assert!(e.contains("rms_norm") && e.contains("[7]"), "{e}");
});
