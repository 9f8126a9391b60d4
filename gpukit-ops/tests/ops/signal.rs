//! FFTs, padding and overlap-add against f64 references computed here: a direct DFT (lengths
//! up to 1024), and for longer ones the inverse transform and Parseval's identity (and on CUDA
//! the CPU op, itself f64). Lengths cover every radix, odd lengths and Bluestein's algorithm.
//! Tolerance on ‖out − ref‖ / ‖ref‖: 2e-5 (f32 transforms of up to 16 384 points).
//! Recurrences, median filters and sorts are exact (the same f32 arithmetic, or only
//! orderings); `upfirdn` is within 1e-5 of an f64 upsample-and-convolve reference.

use super::*;
use gpukit_ops::signal::{self, FftOutput, FftWindow, PadMode, WindowFn};

const FFT_TOL: f64 = 2e-5;

/// Σ_j x_j e^(sign·2πi jk/n) for complex rows, in f64.
fn dft(re: &[f64], im: &[f64], sign: f64) -> Vec<(f64, f64)> {
    let n = re.len();
    (0..n)
        .map(|k| {
            let (mut a, mut b) = (0.0, 0.0);
            for j in 0..n {
                let t = sign * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                a += re[j] * t.cos() - im[j] * t.sin();
                b += re[j] * t.sin() + im[j] * t.cos();
            }
            (a, b)
        })
        .collect()
}

op_test!(rfft_and_irfft, |dev: &Device| {
    let s = seed();
    // Radix 8·4·2, 3, 5, odd (complex FFT of n points), Bluestein (7, 1001, 2·509), one point;
    // past one block's shared memory on CUDA: four-step (40 000), Bluestein over four-step
    // transforms (5805 = 3³·5·43, 30 001 = 19·1579).
    for n in [
        1usize, 2, 7, 16, 30, 45, 400, 512, 1001, 1018, 2048, 5805, 16384, 30001, 40000,
    ] {
        let batch = [3usize, 2];
        let (x, xv) = input(
            &[batch[0], batch[1], n],
            DType::F32,
            -1.0,
            1.0,
            s ^ n as u64,
            dev,
        );
        let (w, wv) = input(&[n], DType::F32, 0.0, 1.0, s, dev);
        let bins = n / 2 + 1;
        let spec = poisoned(&[6, bins, 2], DType::F32, dev)
            .reshape(&[3, 2, bins, 2])
            .unwrap();
        signal::rfft_into(&x, Some(FftWindow::Values(&w)), FftOutput::Complex, &spec).unwrap();
        let got = spec.to_vec_f64().unwrap();
        if n <= 1024 {
            let mut want = Vec::new();
            for row in xv.chunks(n) {
                let re: Vec<f64> = row.iter().zip(&wv).map(|(a, b)| a * b).collect();
                let d = dft(&re, &vec![0.0; n], -1.0);
                want.extend(d[..bins].iter().flat_map(|&(a, b)| [a, b]));
            }
            assert_close(&format!("rfft n={n}"), &got, &want, FFT_TOL);
            // Magnitudes and powers from the same kernel.
            for kind in [FftOutput::Magnitude, FftOutput::Power] {
                let m = poisoned(&[3, 2, bins], DType::F32, dev);
                signal::rfft_into(&x, Some(FftWindow::Values(&w)), kind, &m).unwrap();
                let want_m: Vec<f64> = want
                    .chunks(2)
                    .map(|p| {
                        let pw = p[0] * p[0] + p[1] * p[1];
                        if kind == FftOutput::Power {
                            pw
                        } else {
                            pw.sqrt()
                        }
                    })
                    .collect();
                assert_close(
                    &format!("rfft {kind:?} n={n}"),
                    &m.to_vec_f64().unwrap(),
                    &want_m,
                    FFT_TOL,
                );
            }
        } else {
            // Parseval: Σ|x|² = (|X0|² + 2 Σ|Xk|² (+|X_{n/2}|² once for even n)) / n.
            for (r, row) in xv.chunks(n).enumerate() {
                let energy: f64 = row.iter().zip(&wv).map(|(a, b)| (a * b).powi(2)).sum();
                let sp = &got[r * 2 * bins..(r + 1) * 2 * bins];
                let mut e = 0.0;
                for k in 0..bins {
                    let p = sp[2 * k].powi(2) + sp[2 * k + 1].powi(2);
                    let twice = k != 0 && !(n % 2 == 0 && k == n / 2);
                    e += if twice { 2.0 * p } else { p };
                }
                assert!(
                    (e / n as f64 - energy).abs() <= 1e-4 * energy,
                    "Parseval n={n}: {e} vs {energy}"
                );
            }
        }
        also_cpu(
            dev,
            &got,
            || {
                let c = signal::rfft(
                    &x.to_device(&Device::Cpu).unwrap(),
                    Some(FftWindow::Values(&w.to_device(&Device::Cpu).unwrap())),
                )
                .unwrap();
                c.to_vec_f64().unwrap()
            },
            FFT_TOL,
            &format!("rfft n={n}"),
        );
        // The inverse: back to the windowed signal. The zero-frequency bin's imaginary part is
        // ignored (set it to garbage to check).
        let back = poisoned(&[3, 2, n], DType::F32, dev);
        let mut sp_host = spec.to_vec_f32().unwrap();
        for r in 0..6 {
            sp_host[r * 2 * bins + 1] = 7.0;
        }
        let spec2 = Tensor::from_slice(&sp_host, &[3, 2, bins, 2], dev).unwrap();
        signal::irfft_into(&spec2, n, None, &back).unwrap();
        let want: Vec<f64> = xv
            .chunks(n)
            .flat_map(|row| row.iter().zip(&wv).map(|(a, b)| a * b).collect::<Vec<_>>())
            .collect();
        assert_close(
            &format!("irfft(rfft) n={n}"),
            &back.to_vec_f64().unwrap(),
            &want,
            FFT_TOL,
        );
    }
    assert!(signal::irfft(&Tensor::zeros(&[5, 2], DType::F32, dev).unwrap(), 16, None).is_err());
    // Analytic windows, computed where the op runs, against their values as a tensor: on the
    // input of rfft and the output of irfft, odd and even lengths, centred in the row.
    for (n, function, length) in [
        (512usize, WindowFn::Hann, 400usize),
        (45, WindowFn::Blackman, 45),
        (64, WindowFn::Hamming, 63),
        (20000, WindowFn::Hann, 18000),
    ] {
        let offset = (n - length) / 2;
        let (x, _) = input(&[3, n], DType::F32, -1.0, 1.0, s, dev);
        let values: Vec<f32> = (0..n)
            .map(|j| match j.checked_sub(offset) {
                Some(k) if k < length => function.value(k, length) as f32,
                _ => 0.0,
            })
            .collect();
        let w = Tensor::from_slice(&values, &[n], dev).unwrap();
        let f = FftWindow::Function {
            function,
            length,
            offset,
        };
        let a = signal::rfft(&x, Some(f)).unwrap().to_vec_f64().unwrap();
        let b = signal::rfft(&x, Some(FftWindow::Values(&w)))
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_close(&format!("rfft {function:?} window"), &a, &b, FFT_TOL);
        let spec = signal::rfft(&x, None).unwrap();
        let a = signal::irfft(&spec, n, Some(f))
            .unwrap()
            .to_vec_f64()
            .unwrap();
        let b = signal::irfft(&spec, n, Some(FftWindow::Values(&w)))
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_close(&format!("irfft {function:?} window"), &a, &b, FFT_TOL);
    }
    let too_long = FftWindow::Function {
        function: WindowFn::Hann,
        length: 10,
        offset: 10,
    };
    assert!(
        signal::rfft(
            &Tensor::zeros(&[16], DType::F32, dev).unwrap(),
            Some(too_long)
        )
        .is_err()
    );
    assert!(signal::rfft(&Tensor::zeros(&[4], DType::F16, dev).unwrap(), None).is_err());
});

op_test!(complex_fft, |dev: &Device| {
    let s = seed();
    // Past one block on CUDA: Bluestein (10 007, prime), four-step (12 000, 65 536).
    for n in [1usize, 5, 12, 97, 360, 1000, 8192, 10007, 12000, 65536] {
        let (x, xv) = input(&[3, n, 2], DType::F32, -1.0, 1.0, s ^ n as u64, dev);
        for inverse in [false, true] {
            let out = poisoned(&[3, n, 2], DType::F32, dev);
            signal::fft_into(&x, inverse, &out).unwrap();
            let got = out.to_vec_f64().unwrap();
            if n <= 1024 {
                let mut want = Vec::new();
                for row in xv.chunks(2 * n) {
                    let re: Vec<f64> = row.iter().step_by(2).copied().collect();
                    let im: Vec<f64> = row.iter().skip(1).step_by(2).copied().collect();
                    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
                    let d = dft(&re, &im, if inverse { 1.0 } else { -1.0 });
                    want.extend(d.iter().flat_map(|&(a, b)| [a * scale, b * scale]));
                }
                assert_close(
                    &format!("fft n={n} inverse={inverse}"),
                    &got,
                    &want,
                    FFT_TOL,
                );
            }
        }
        let round = signal::fft(&signal::fft(&x, false).unwrap(), true).unwrap();
        assert_close(
            &format!("ifft(fft) n={n}"),
            &round.to_vec_f64().unwrap(),
            &xv,
            FFT_TOL,
        );
    }
});

op_test!(stft_frames_from_an_overlapping_view, |dev: &Device| {
    // The STFT's pattern: frames read in place from an unfold view (hop < n), written as a
    // transposed view [bins, frames] of a frames-major buffer... and the other way round.
    let s = seed();
    let (n, hop, len) = (64usize, 17usize, 1000usize);
    let (y, yv) = input(&[2, len], DType::F32, -1.0, 1.0, s, dev);
    let frames = y.unfold(1, n, hop).unwrap();
    let f = frames.shape()[1];
    assert_eq!(f, (len - n) / hop + 1);
    let bins = n / 2 + 1;
    let buf = poisoned(&[2, bins, f, 2], DType::F32, dev);
    let view = buf.transpose(1, 2).unwrap();
    signal::rfft_into(&frames, None, FftOutput::Complex, &view).unwrap();
    let got = buf.to_vec_f64().unwrap();
    let mut want = vec![0.0; got.len()];
    for b in 0..2 {
        for t in 0..f {
            let re = &yv[b * len + t * hop..b * len + t * hop + n];
            for (k, &(a, c)) in dft(re, &vec![0.0; n], -1.0)[..bins].iter().enumerate() {
                let i = ((b * bins + k) * f + t) * 2;
                want[i] = a;
                want[i + 1] = c;
            }
        }
    }
    assert_close(
        "rfft of unfolded frames into a transposed view",
        &got,
        &want,
        FFT_TOL,
    );
});

op_test!(pad_and_overlap_add, |dev: &Device| {
    let x = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.], &[2, 3], dev).unwrap();
    let cases: [(PadMode, [f32; 9]); 4] = [
        (PadMode::Constant, [9., 9., 1., 2., 3., 9., 9., 9., 9.]),
        (PadMode::Edge, [1., 1., 1., 2., 3., 3., 3., 3., 3.]),
        // np.pad([1, 2, 3], (2, 4), "reflect")
        (PadMode::Reflect, [3., 2., 1., 2., 3., 2., 1., 2., 3.]),
        // np.pad([1, 2, 3], (2, 4), "symmetric")
        (PadMode::Symmetric, [2., 1., 1., 2., 3., 3., 2., 1., 1.]),
    ];
    for (mode, row) in cases {
        let out = poisoned(&[2, 9], DType::F32, dev);
        signal::pad_into(&x, 2, 4, mode, 9.0, &out).unwrap();
        let got = out.to_vec::<f32>().unwrap();
        assert_eq!(got[..9], row, "{mode:?}");
        let second: Vec<f32> = row
            .iter()
            .map(|&v| if v == 9.0 { 9.0 } else { v + 3.0 })
            .collect();
        assert_eq!(got[9..], second[..], "{mode:?} second row");
    }
    // A transposed (non-contiguous) input pads the same as its contiguous copy.
    let t = x.transpose(0, 1).unwrap();
    let a = signal::pad(&t, 3, 1, PadMode::Reflect, 0.0)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let b = signal::pad(&t.contiguous().unwrap(), 3, 1, PadMode::Reflect, 0.0)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(a, b);
    assert!(
        signal::pad(
            &Tensor::zeros(&[0], DType::F32, dev).unwrap(),
            1,
            1,
            PadMode::Edge,
            0.0
        )
        .is_err()
    );

    let s = seed();
    let (frames, fv) = input(&[3, 5, 16], DType::F32, -1.0, 1.0, s, dev);
    for hop in [1usize, 4, 16, 20] {
        let len = 4 * hop + 16;
        let out = poisoned(&[3, len], DType::F32, dev);
        signal::overlap_add_into(&frames, hop, &out).unwrap();
        let mut want = vec![0.0; 3 * len];
        for b in 0..3 {
            for f in 0..5 {
                for j in 0..16 {
                    want[b * len + f * hop + j] += fv[(b * 5 + f) * 16 + j];
                }
            }
        }
        assert_close(
            &format!("overlap_add hop {hop}"),
            &out.to_vec_f64().unwrap(),
            &want,
            1e-6,
        );
    }
    assert!(signal::overlap_add(&frames, 0).is_err());
});

op_test!(zero_crossing_rate, |dev: &Device| {
    let s = seed();
    let (y, yv) = input(&[3, 1000], DType::F32, -1.0, 1.0, s, dev);
    // Exact zeros and values within the threshold are positive zeros.
    let mut host = yv.iter().map(|&v| v as f32).collect::<Vec<_>>();
    host[10..20].fill(0.0);
    host[30..35].fill(-1e-12);
    drop(y);
    let y = Tensor::from_slice(&host, &[3, 1000], dev).unwrap();
    for (frame, hop) in [(64usize, 16usize), (1000, 1), (7, 7)] {
        let n_frames = (1000 - frame) / hop + 1;
        let out = poisoned(&[3, n_frames], DType::F32, dev);
        signal::zero_crossing_rate_into(&y, frame, hop, 1e-10, &out).unwrap();
        let neg = |v: f32| v < -1e-10;
        let want: Vec<f64> = (0..3)
            .flat_map(|r| {
                let row = &host[r * 1000..(r + 1) * 1000];
                (0..n_frames)
                    .map(|f| {
                        let x = &row[f * hop..f * hop + frame];
                        (1..frame).filter(|&i| neg(x[i - 1]) != neg(x[i])).count() as f64
                            / frame as f64
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_close(
            &format!("zcr {frame}/{hop}"),
            &out.to_vec_f64().unwrap(),
            &want,
            1e-7,
        );
    }
    assert!(
        signal::zero_crossing_rate_into(&y, 1001, 1, 0.0, &poisoned(&[3, 1], DType::F32, dev))
            .is_err()
    );
});

/// numpy's padding index for position `j` of a row of `n` (None: the constant).
fn np_pad_index(j: isize, n: usize, mode: PadMode) -> Option<usize> {
    let n = n as isize;
    let mirror = |period: isize, last: isize| {
        let p = j.rem_euclid(period);
        (if p < n { p } else { last - p }) as usize
    };
    match mode {
        _ if (0..n).contains(&j) => Some(j as usize),
        PadMode::Constant => None,
        PadMode::Edge => Some(j.clamp(0, n - 1) as usize),
        _ if n == 1 => Some(0),
        PadMode::Reflect => Some(mirror(2 * (n - 1), 2 * (n - 1))),
        PadMode::Symmetric => Some(mirror(2 * n, 2 * n - 1)),
    }
}

op_test!(recurrence_upfirdn_median_and_sort, |dev: &Device| {
    let s = seed();
    // y[n] = x[n] + a·y[n − 1] along each axis, one f32 FMA per step: exact on both devices.
    let shape = [3usize, 37, 5];
    let (x, xv) = input(&shape, DType::F32, -1.0, 1.0, s, dev);
    for axis in 0..3 {
        let mut ishape = shape.to_vec();
        ishape[axis] = 1;
        let (init, iv) = input(&ishape, DType::F32, -1.0, 1.0, s + 1, dev);
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let len = shape[axis];
        for (a, with_init) in [(1.0f32, false), (0.97, true), (-0.5, true)] {
            let out = poisoned(&shape, DType::F32, dev);
            let init_t = with_init.then_some(&init);
            signal::linear_recurrence_into(&x, axis, a, init_t, &out).unwrap();
            let mut want = vec![0.0; xv.len()];
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = if with_init {
                        iv[o * inner + i] as f32
                    } else {
                        0.0
                    };
                    for n in 0..len {
                        let e = (o * len + n) * inner + i;
                        acc = a.mul_add(acc, xv[e] as f32);
                        want[e] = f64::from(acc);
                    }
                }
            }
            let what = format!("linear_recurrence axis {axis} a {a}");
            assert_close(&what, &out.to_vec_f64().unwrap(), &want, 0.0);
        }
    }
    let t = x.transpose(0, 2).unwrap();
    assert_eq!(
        signal::cumsum(&t, 1).unwrap().to_vec::<f32>().unwrap(),
        signal::cumsum(&t.contiguous().unwrap(), 1)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    );
    assert!(signal::cumsum(&x, 3).is_err());
    let bad_init = Tensor::zeros(&[3, 2, 5], DType::F32, dev).unwrap();
    assert!(signal::linear_recurrence(&x, 1, 0.5, Some(&bad_init)).is_err());

    // upfirdn against upsample, full convolution and downsample in f64.
    let (sig, sv) = input(&[2, 50], DType::F32, -1.0, 1.0, s + 2, dev);
    let (h, hv) = input(&[17], DType::F32, -1.0, 1.0, s + 3, dev);
    for (up, down, offset, n_out) in [
        (1usize, 1usize, 0i64, 66usize),
        (3, 2, 0, 84),
        (1, 2, 5, 30),
        (4, 1, -3, 220),
        (160, 147, 30, 60),
    ] {
        let out = poisoned(&[2, n_out], DType::F32, dev);
        signal::upfirdn_into(&sig, &h, up, down, offset, &out).unwrap();
        let mut want = Vec::new();
        for r in 0..2 {
            let u = |m: i64| -> f64 {
                if m < 0 || m % up as i64 != 0 || m / up as i64 >= 50 {
                    0.0
                } else {
                    sv[r * 50 + (m / up as i64) as usize]
                }
            };
            want.extend((0..n_out).map(|k| {
                let t = k as i64 * down as i64 + offset;
                (0..17).map(|j| hv[j] * u(t - j as i64)).sum::<f64>()
            }));
        }
        let got = out.to_vec_f64().unwrap();
        assert_close(&format!("upfirdn up {up} down {down}"), &got, &want, 1e-5);
    }
    assert!(signal::upfirdn(&sig, &h, 0, 1, 0, 10).is_err());
    assert!(signal::upfirdn(&sig, &sig, 1, 1, 0, 10).is_err());

    // scipy.ndimage.median_filter([1, 5, 2, 8, 3], size=3, mode="reflect")
    let m = Tensor::from_slice(&[1f32, 5., 2., 8., 3.], &[5], dev).unwrap();
    let got = signal::median_filter(&m, 0, 3, PadMode::Symmetric, 0.0).unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), [1., 2., 5., 3., 3.]);
    // Every mode, odd and even windows, a window longer than the axis, both axes.
    let shape = [4usize, 23, 3];
    let (x, xv) = input(&shape, DType::F32, -1.0, 1.0, s + 4, dev);
    for mode in [
        PadMode::Constant,
        PadMode::Edge,
        PadMode::Reflect,
        PadMode::Symmetric,
    ] {
        for size in [1usize, 4, 7, 31] {
            for axis in [1usize, 2] {
                let out = poisoned(&shape, DType::F32, dev);
                signal::median_filter_into(&x, axis, size, mode, 0.25, &out).unwrap();
                let len = shape[axis];
                let stride: usize = shape[axis + 1..].iter().product();
                let want: Vec<f64> = (0..xv.len())
                    .map(|e| {
                        let n = (e / stride) % len;
                        let base = e - n * stride;
                        let mut w: Vec<f64> = (0..size)
                            .map(|k| {
                                let j = n as isize - (size / 2) as isize + k as isize;
                                np_pad_index(j, len, mode).map_or(0.25, |p| xv[base + p * stride])
                            })
                            .collect();
                        w.sort_by(f64::total_cmp);
                        w[size / 2]
                    })
                    .collect();
                let what = format!("median_filter {mode:?} size {size} axis {axis}");
                assert_close(&what, &out.to_vec_f64().unwrap(), &want, 0.0);
            }
        }
    }
    assert!(signal::median_filter(&x, 1, 0, PadMode::Edge, 0.0).is_err());
    assert!(signal::median_filter(&x, 1, 256, PadMode::Edge, 0.0).is_err());

    // Sorts: odd and power-of-two rows, duplicates, a transposed input.
    for shape in [[3usize, 7], [5, 1000], [2, 4096]] {
        let (x, xv) = input(&shape, DType::F32, -1.0, 1.0, s + 5, dev);
        let rounded = ops::scalar(ScalarOp::Mul, &x, 8.0).unwrap();
        let rounded = ops::unary(UnaryOp::Round, &rounded).unwrap();
        for (t, mut v) in [
            (x.clone(), xv.clone()),
            (rounded.clone(), rounded.to_vec_f64().unwrap()),
        ] {
            let out = poisoned(&shape, DType::F32, dev);
            signal::sort_into(&t, &out).unwrap();
            for row in v.chunks_mut(shape[1]) {
                row.sort_by(f64::total_cmp);
            }
            assert_close(
                &format!("sort {shape:?}"),
                &out.to_vec_f64().unwrap(),
                &v,
                0.0,
            );
        }
    }
    let (x, _) = input(&[6, 9], DType::F32, -1.0, 1.0, s + 6, dev);
    let t = x.transpose(0, 1).unwrap();
    assert_eq!(
        signal::sort(&t).unwrap().to_vec::<f32>().unwrap(),
        signal::sort(&t.contiguous().unwrap())
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    );
    let long = Tensor::zeros(&[1, 8193], DType::F32, dev).unwrap();
    assert_eq!(signal::sort(&long).is_err(), matches!(dev, Device::Cuda(_)));
});

/// PyTorch's conv1d (or conv_transpose1d) in f64, by scattering each input sample.
#[allow(clippy::too_many_arguments)]
fn conv_ref(
    xv: &[f64],
    wv: &[f64],
    bv: &[f64],
    (batch, c_in, len): (usize, usize, usize),
    (c_out, k): (usize, usize),
    p: &signal::Conv1d,
    transposed: bool,
    len_out: usize,
) -> Vec<f64> {
    let (cin_g, cout_g) = (c_in / p.groups, c_out / p.groups);
    let mut y = vec![0.0; batch * c_out * len_out];
    for b in 0..batch {
        for o in 0..c_out {
            let g = o / cout_g;
            for c in 0..cin_g {
                let ci = g * cin_g + c;
                for kk in 0..k {
                    let wk = if transposed {
                        wv[(ci * cout_g + o % cout_g) * k + kk]
                    } else {
                        wv[(o * cin_g + c) * k + kk]
                    };
                    for t in 0..len_out {
                        let xs = if transposed {
                            let q = t as i64 + p.padding as i64 - (kk * p.dilation) as i64;
                            (q >= 0 && q % p.stride as i64 == 0).then(|| q / p.stride as i64)
                        } else {
                            Some((t * p.stride + kk * p.dilation) as i64 - p.padding as i64)
                        };
                        if let Some(s) = xs.filter(|&s| s >= 0 && s < len as i64) {
                            y[(b * c_out + o) * len_out + t] +=
                                wk * xv[(b * c_in + ci) * len + s as usize];
                        }
                    }
                }
            }
            for t in 0..len_out {
                y[(b * c_out + o) * len_out + t] += bv[o];
            }
        }
    }
    y
}

op_test!(conv1d_and_conv_transpose1d, |dev: &Device| {
    let s = seed();
    // (batch, c_in, len, c_out, taps, stride, padding, dilation, groups): 1×1, same-padded odd
    // taps, dilated (WaveNet, HiFi-GAN residual blocks), depthwise, strided, a length of 1,
    // and output channels in groups of 8.
    let cases = [
        (
            1usize, 5usize, 37usize, 7usize, 1usize, 1usize, 0usize, 1usize, 1usize,
        ),
        (2, 6, 41, 4, 3, 1, 1, 1, 1),
        (1, 8, 50, 8, 5, 1, 6, 3, 1),
        (2, 6, 29, 6, 3, 1, 9, 9, 6),
        (1, 4, 33, 6, 4, 2, 1, 1, 2),
        (1, 3, 1, 2, 3, 1, 1, 1, 1),
        // Eight output channels a thread on CUDA: one group, and two groups of 8.
        (2, 16, 45, 32, 7, 1, 9, 3, 1),
        (1, 4, 33, 16, 3, 2, 1, 1, 2),
    ];
    for (i, &(batch, c_in, len, c_out, k, stride, padding, dilation, groups)) in
        cases.iter().enumerate()
    {
        let p = signal::Conv1d {
            stride,
            padding,
            dilation,
            groups,
        };
        let seed = s ^ (i as u64 * 77);
        let (x, xv) = input(&[batch, c_in, len], DType::F32, -1.0, 1.0, seed, dev);
        let (b, bv) = input(&[c_out], DType::F32, -1.0, 1.0, seed + 1, dev);
        let (w, wv) = input(
            &[c_out, c_in / groups, k],
            DType::F32,
            -1.0,
            1.0,
            seed + 2,
            dev,
        );
        let n = p.out_len(len, k).unwrap();
        let out = poisoned(&[batch, c_out, n], DType::F32, dev);
        signal::conv1d_into(&x, &w, Some(&b), &p, &out).unwrap();
        let want = conv_ref(&xv, &wv, &bv, (batch, c_in, len), (c_out, k), &p, false, n);
        let got = out.to_vec_f64().unwrap();
        assert_close(&format!("conv1d {:?}", cases[i]), &got, &want, 1e-5);
        let again = signal::conv1d(&x, &w, Some(&b), &p).unwrap();
        assert_eq!(again.to_vec::<f32>().unwrap(), out.to_vec::<f32>().unwrap());

        // The transposed convolution: w [c_in, c_out/groups, taps].
        let (wt, wtv) = input(
            &[c_in, c_out / groups, k],
            DType::F32,
            -1.0,
            1.0,
            seed + 3,
            dev,
        );
        let n = p.transposed_out_len(len, k).unwrap();
        let out = poisoned(&[batch, c_out, n], DType::F32, dev);
        signal::conv_transpose1d_into(&x, &wt, Some(&b), &p, &out).unwrap();
        let want = conv_ref(&xv, &wtv, &bv, (batch, c_in, len), (c_out, k), &p, true, n);
        let got = out.to_vec_f64().unwrap();
        assert_close(
            &format!("conv_transpose1d {:?}", cases[i]),
            &got,
            &want,
            1e-5,
        );
    }
    // HiFi-GAN's upsampling layer: kernel 16, stride 8, padding 4, no bias.
    let p = signal::Conv1d {
        stride: 8,
        padding: 4,
        ..signal::Conv1d::default()
    };
    let (x, xv) = input(&[1, 16, 23], DType::F32, -1.0, 1.0, s + 9, dev);
    let (w, wv) = input(&[16, 8, 16], DType::F32, -1.0, 1.0, s + 10, dev);
    let y = signal::conv_transpose1d(&x, &w, None, &p).unwrap();
    assert_eq!(y.shape(), [1, 8, 23 * 8]);
    let want = conv_ref(&xv, &wv, &[0.0; 8], (1, 16, 23), (8, 16), &p, true, 23 * 8);
    assert_close("conv_transpose1d ×8", &y.to_vec_f64().unwrap(), &want, 1e-5);

    // A strided input view is read as its values.
    let (x, _) = input(&[1, 9, 2, 4], DType::F32, -1.0, 1.0, s + 11, dev);
    let view = x.reshape(&[1, 9, 8]).unwrap().narrow(2, 1, 6).unwrap();
    let (w, _) = input(&[3, 9, 3], DType::F32, -1.0, 1.0, s + 12, dev);
    let got = signal::conv1d(&view, &w, None, &signal::Conv1d::padded(1)).unwrap();
    let want = signal::conv1d(
        &view.contiguous().unwrap(),
        &w,
        None,
        &signal::Conv1d::padded(1),
    )
    .unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());

    // Clear errors for bad geometry.
    let (x, _) = input(&[1, 4, 5], DType::F32, -1.0, 1.0, s, dev);
    let (w, _) = input(&[2, 3, 3], DType::F32, -1.0, 1.0, s, dev);
    assert!(signal::conv1d(&x, &w, None, &signal::Conv1d::default()).is_err());
    let (w, _) = input(&[2, 4, 9], DType::F32, -1.0, 1.0, s, dev);
    assert!(signal::conv1d(&x, &w, None, &signal::Conv1d::default()).is_err());
    let zero = signal::Conv1d {
        stride: 0,
        ..signal::Conv1d::default()
    };
    assert!(signal::conv1d(&x, &w, None, &zero).is_err());
    let bias = Tensor::zeros(&[3], DType::F32, dev).unwrap();
    assert!(signal::conv1d(&x, &w, Some(&bias), &signal::Conv1d::padded(4)).is_err());
});
