//! The KV cache and the quantized GEMV; the GGML formats against gguf-py; block-quantized tensors as a dtype.

use super::*;

op_test!(kv_cache_and_quantized_gemv, |dev: &Device| {
    use gpukit_ops::kv_cache::KvCache;
    use gpukit_ops::quant::{QuantFormat, qgemv_into, quantize};
    let s = seed();
    // head_dim 8: no whole 128-byte block, so both layouts store rows in order; 72: one whole
    // block and a tail in bf16, two and a tail in f32.
    for (dt, hd, layout) in [
        (DType::F32, 8usize, KvLayout::Linear),
        (DType::BF16, 8, KvLayout::Swizzled),
        (DType::F32, 72, KvLayout::Swizzled),
        (DType::BF16, 72, KvLayout::Swizzled),
        (DType::BF16, 72, KvLayout::Linear),
    ] {
        let (kvh, max_len) = (2usize, 10usize);
        let mut cache = KvCache::new(kvh, max_len, hd, dt, layout, dev).unwrap();
        assert_eq!(cache.layout(), layout);
        let mut want_k = vec![0f64; kvh * max_len * hd];
        let mut want_rows = want_k.clone();
        let mut filled = 0usize;
        for (i, tokens) in [3usize, 1, 4].into_iter().enumerate() {
            let (k, kv) = input(&[tokens, kvh, hd], dt, -1.0, 1.0, s + i as u64, dev);
            let (v, _) = input(&[tokens, kvh, hd], dt, -1.0, 1.0, s + 10 + i as u64, dev);
            cache.append(&k, &v).unwrap();
            for (t, &x) in kv.iter().enumerate() {
                let (d, r) = (t % hd, t / hd);
                let key = filled + r / kvh;
                want_k[((r % kvh) * max_len + key) * hd + layout.column(key, d, hd, dt)] = x;
                want_rows[((r % kvh) * max_len + key) * hd + d] = x;
            }
            filled += tokens;
        }
        assert_eq!(cache.len(), 8);
        let got = cache.keys().unwrap().to_vec_f64().unwrap();
        let want: Vec<f64> = (0..kvh)
            .flat_map(|h| want_k[h * max_len * hd..][..8 * hd].to_vec())
            .collect();
        assert_eq!(got, want, "kv cache {dt} head_dim {hd} {layout:?}");
        // Read back in order.
        let in_order: Vec<f64> = (0..kvh)
            .flat_map(|h| want_rows[h * max_len * hd..][..8 * hd].to_vec())
            .collect();
        assert_eq!(layout.linearize(got, 8, hd, dt), in_order);
        // Full: a clear error and nothing written.
        let (k3, _) = input(&[3, kvh, hd], dt, -1.0, 1.0, s, dev);
        assert!(cache.append(&k3, &k3).is_err());
        cache.truncate(2).unwrap();
        assert_eq!(cache.values().unwrap().shape(), &[kvh, 2, hd]);
        assert!(cache.truncate(5).is_err());
        // A device position past the end is reported, never written.
        let pos = Tensor::from_slice(&[9i32], &[1], dev).unwrap();
        let r = cache
            .append_at(&k3, &k3, &pos)
            .and_then(|_| cache.key_storage().to_vec_f64().map(|_| ()));
        assert!(r.unwrap_err().to_string().contains("out of range"));
        cache.reset();
        assert!(cache.is_empty());
    }
    // (257, 576): rows of 18 blocks, a row count the kernel's four rows per warp do not divide;
    // (61, 1056): 33 blocks (odd, so Q8_0 and Q4_0 rows start at both word offsets, and lane 0
    // takes two blocks per row). Q4_0 at (300, 8448), 1.4 MB, takes the Hopper ring
    // (`quant::ring`): rows of 264 blocks in chunks of 136 and 128, and a last tile of 12
    // rows; so does (1000, 2048), 1.2 MB, for 1 to 8 rows of x (a last tile of 8 rows).
    let shapes = |f| {
        let mut v = vec![(257usize, 576usize), (61, 1056)];
        if f == QuantFormat::Q4_0 {
            v.extend([(300, 8448), (1000, 2048)]);
        }
        v.into_iter().map(move |nk| (f, nk))
    };
    for (f, (n, k)) in [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1]
        .into_iter()
        .flat_map(shapes)
    {
        let w: Vec<f32> = Tensor::rand(&[n * k], -1.0, 1.0, DType::F32, s, &Device::Cpu)
            .unwrap()
            .to_vec()
            .unwrap();
        let q = quantize(f, &w).unwrap();
        let mut deq = vec![0f32; w.len()];
        gpukit_ops::quant::dequantize(f, &q, &mut deq).unwrap();
        let qm = Tensor::from_blocks(&q, f, &[n, k], dev).unwrap();
        for dt in FLOATS {
            let (x, xv) = input(&[1, k], dt, -1.0, 1.0, s + 1, dev);
            let out = poisoned(&[1, n], dt, dev);
            qgemv_into(&x, &qm, &out).unwrap();
            // The same x at an unaligned address (a view one element in): scalar loads in the
            // one-warp-per-row kernel, bitwise the aligned call's where that kernel took it too
            // (not the ring's: it sums in another order).
            let (x2, _) = input(&[1, k + 1], dt, -1.0, 1.0, s + 1, dev);
            ops::copy_into(&x, &x2.narrow(1, 1, k).unwrap()).unwrap();
            let out2 = poisoned(&[1, n], dt, dev);
            qgemv_into(&x2.narrow(1, 1, k).unwrap(), &qm, &out2).unwrap();
            if !may_take_ring(dev, &qm, dt) {
                assert_eq!(
                    out2.to_vec_f64().unwrap(),
                    out.to_vec_f64().unwrap(),
                    "qgemv {f:?} {dt}: unaligned x"
                );
            }
            let want: Vec<f64> = (0..n)
                .map(|r| (0..k).map(|c| f64::from(deq[r * k + c]) * xv[c]).sum())
                .collect();
            for (o, what) in [(&out, "aligned"), (&out2, "unaligned")] {
                assert_close(
                    &format!("qgemv {f:?} {dt} ({n}, {k}), {what} x"),
                    &o.to_vec_f64().unwrap(),
                    &want,
                    tol(dt),
                );
            }
            check_qgemv_rows(&qm, &deq, dt, s + 2, dev);
        }
        assert!(Tensor::from_blocks(&q[..10], f, &[n, k], dev).is_err());
    }
});

/// Whether a quantized GEMV may take the Hopper tensor-core ring (`quant::ring`: Q4_0,
/// Q4_K or Q5_K, f16/bf16 x, k a multiple of 256, at least 1 MiB of blocks; on a GPU other than
/// Hopper it does not, and the checks this gates are only skipped).
fn may_take_ring(dev: &Device, qm: &Tensor, dt: DType) -> bool {
    use gpukit_ops::quant::QuantFormat;
    matches!(dev, Device::Cuda(_))
        && matches!(
            qm.dtype().quant_format(),
            Some(QuantFormat::Q4_0 | QuantFormat::Q4K | QuantFormat::Q5K)
        )
        && dt != DType::F32
        && qm.shape()[1].is_multiple_of(256)
        && qm.nbytes() >= 1 << 20
}

/// Several rows of x (3 and 8) against quantized weights `qm` (`deq` its values, dequantized):
/// within `dt`'s tolerance of dequantize-then-product, and each output row bitwise what a
/// one-row call on that row of x gives: both calls take the ring or both the one-warp kernels.
/// They do not where the one-row call takes the ring and the rows' x does not fit its shared
/// memory: at k = 8448, 3 rows fit (3 × 34.8 KB of x, partial sums and three 39 KB stages in 227
/// KiB) and 8 do not. Nine rows are refused.
fn check_qgemv_rows(qm: &Tensor, deq: &[f32], dt: DType, s: u64, dev: &Device) {
    use gpukit_ops::quant::qgemv_into;
    let (n, k) = (qm.shape()[0], qm.shape()[1]);
    for m in [3, 8] {
        let (x, xv) = input(&[m, k], dt, -1.0, 1.0, s + m as u64, dev);
        let out = poisoned(&[m, n], dt, dev);
        qgemv_into(&x, qm, &out).unwrap();
        let got = out.to_vec_f64().unwrap();
        let want: Vec<f64> = (0..m * n)
            .map(|t| {
                let (r, j) = (t / n, t % n);
                (0..k)
                    .map(|c| f64::from(deq[j * k + c]) * xv[r * k + c])
                    .sum()
            })
            .collect();
        let what = format!("qgemv {} {dt} {m} rows of ({n}, {k})", qm.dtype());
        assert_close(&what, &got, &want, tol(dt));
        if !may_take_ring(dev, qm, dt) || k <= 4096 || m <= 3 {
            for r in 0..m {
                let one = poisoned(&[1, n], dt, dev);
                qgemv_into(&x.narrow(0, r, 1).unwrap(), qm, &one).unwrap();
                assert_eq!(
                    one.to_vec_f64().unwrap(),
                    got[r * n..][..n],
                    "{what}: row {r} differs from a one-row call"
                );
            }
        }
    }
    let (x9, _) = input(&[9, k], dt, -1.0, 1.0, s, dev);
    let out9 = poisoned(&[9, n], dt, dev);
    let e = qgemv_into(&x9, qm, &out9).unwrap_err().to_string();
    assert!(e.contains("qgemv") && e.contains("[9, "), "{e}");
}

op_test!(quants_match_gguf_py, |dev: &Device| {
    use gpukit_ops::quant::{
        QuantFormat, dequantize, dequantize_tensor, qgemv_into, random_blocks,
    };
    // Blocks and values from gguf-py (tests/fixtures/make_ggml_quants.py keeps the script):
    // every format, dequantized on the CPU and on `dev`.
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/ggml_quants.json")).unwrap();
    let s = seed();
    for f in QuantFormat::ALL {
        let case = &fixture[f.name()];
        let hex = case["blocks"].as_str().unwrap();
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let want: Vec<u32> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let mut cpu = vec![0f32; want.len()];
        dequantize(f, &bytes, &mut cpu).unwrap();
        assert_eq!(
            cpu.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want,
            "{} CPU dequantization vs gguf-py",
            f.name()
        );
        let q = Tensor::from_blocks(&bytes, f, &[want.len()], dev).unwrap();
        let got: Vec<f32> = dequantize_tensor(&q, DType::F32).unwrap().to_vec().unwrap();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want,
            "{} dequantize_tensor on {} vs gguf-py",
            f.name(),
            dev.describe()
        );
        if !matches!(f, QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K) {
            // The simple formats' GEMV: kv_cache_and_quantized_gemv.
            continue;
        }
        // GEMV straight from random super-blocks (finite f16 scales), against
        // dequantize-then-product: 3, 5 and 33 super-blocks a row (each half-warp takes every
        // other one, so the second half has one fewer), rows of 37, 64 and 300; Q4_K and Q5_K
        // at (300, 8448), 1.4 / 1.7 MB, take the Hopper ring (chunks of 16, 16 and 1 / 4 × 8
        // and 1 super-blocks, a last tile of 12 rows), and at (1000, 2048), 1.2 / 1.4 MB, for 1
        // to 8 rows of x.
        for (n, k) in [(37usize, 768usize), (64, 1280), (300, 8448), (1000, 2048)] {
            // Scales shrink with the row so that f16 sums stay finite (Q6_K's reach 10⁵ at 8448).
            let raw = random_blocks(f, n * k, s, 768.0 / k as f32).unwrap();
            let mut deq = vec![0f32; n * k];
            dequantize(f, &raw, &mut deq).unwrap();
            let qm = Tensor::from_blocks(&raw, f, &[n, k], dev).unwrap();
            for dt in FLOATS {
                let (x, xv) = input(&[1, k], dt, -1.0, 1.0, s + 3, dev);
                let out = poisoned(&[1, n], dt, dev);
                qgemv_into(&x, &qm, &out).unwrap();
                // The same x one element into a buffer: scalar loads, the same sums (where the
                // aligned call did not take the ring, which sums in another order).
                let (x2, _) = input(&[1, k + 1], dt, -1.0, 1.0, s + 4, dev);
                ops::copy_into(&x, &x2.narrow(1, 1, k).unwrap()).unwrap();
                let out2 = poisoned(&[1, n], dt, dev);
                qgemv_into(&x2.narrow(1, 1, k).unwrap(), &qm, &out2).unwrap();
                if !may_take_ring(dev, &qm, dt) {
                    assert_eq!(
                        out2.to_vec_f64().unwrap(),
                        out.to_vec_f64().unwrap(),
                        "qgemv {} {dt}: unaligned x",
                        f.name()
                    );
                }
                let want: Vec<f64> = (0..n)
                    .map(|r| (0..k).map(|c| f64::from(deq[r * k + c]) * xv[c]).sum())
                    .collect();
                for (o, what) in [(&out, "aligned"), (&out2, "unaligned")] {
                    assert_close(
                        &format!("qgemv {} {dt} ({n}, {k}), {what} x", f.name()),
                        &o.to_vec_f64().unwrap(),
                        &want,
                        tol(dt),
                    );
                }
                check_qgemv_rows(&qm, &deq, dt, s + 5, dev);
            }
        }
    }
    println!(
        "[{}] K-quants: dequantization bit-identical to gguf-py; GEMV within tolerance",
        dev.describe()
    );
});

// Block-quantized tensors as a dtype: construction, views, transfers, dequantization through
// `to_dtype`, quantization, the GEMV on a view of rows, and every other op refusing them.
op_test!(quantized_tensors, |dev: &Device| {
    use gpukit_ops::quant::{
        QuantFormat, dequantize, dequantize_tensor, qgemv_into, quantize, quantize_tensor,
    };
    let s = seed();
    let (n, k) = (64usize, 256usize);
    let w = Tensor::rand(&[n, k], -1.0, 1.0, DType::F32, s, &Device::Cpu).unwrap();
    let wv = w.to_vec::<f32>().unwrap();
    for f in [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1] {
        let dt = DType::Quant(f);
        let bytes = quantize(f, &wv).unwrap();
        let mut deq = vec![0f32; n * k];
        dequantize(f, &bytes, &mut deq).unwrap();
        let q = Tensor::from_blocks(&bytes, f, &[n, k], dev).unwrap();
        assert_eq!(
            (q.shape(), q.dtype(), q.nbytes()),
            (&[n, k][..], dt, bytes.len())
        );
        assert_eq!(
            format!("{q:?}"),
            format!("Tensor([{n}, {k}], {f}, {})", dev.describe())
        );
        // Quantizing on any device gives the reference quantizer's blocks, and so does
        // `to_dtype`; the blocks come back unchanged from the device.
        let qd = quantize_tensor(&w.to_device(dev).unwrap(), f).unwrap();
        assert_eq!(qd.blocks().unwrap().to_vec::<u8>().unwrap(), bytes, "{f}");
        let qc = ops::to_dtype(&w.to_device(dev).unwrap(), dt).unwrap();
        assert_eq!(
            qc.to_device(&Device::Cpu)
                .unwrap()
                .blocks()
                .unwrap()
                .to_vec::<u8>()
                .unwrap(),
            bytes
        );
        // Values: to_vec_f32 and to_dtype dequantize (f32 bit for bit; bf16 rounded once).
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&q.to_vec_f32().unwrap()), bits(&deq), "{f} to_vec_f32");
        let f32s = ops::to_dtype(&q, DType::F32).unwrap();
        assert_eq!(
            bits(&f32s.to_vec::<f32>().unwrap()),
            bits(&deq),
            "{f} to_dtype"
        );
        let bf = poisoned(&[n, k], DType::BF16, dev);
        ops::cast_into(&q, &bf).unwrap();
        let want_bf: Vec<f64> = deq
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_f64())
            .collect();
        assert_eq!(bf.to_vec_f64().unwrap(), want_bf, "{f} cast_into bf16");
        // A view of rows 5..25: its values, its blocks, and its GEMV are those rows' (bitwise:
        // rows are independent in every kernel this size takes).
        let rows = q.narrow(0, 5, 20).unwrap();
        assert_eq!(rows.nbytes(), bytes.len() / n * 20);
        let got = dequantize_tensor(&rows, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(bits(&got), bits(&deq[5 * k..25 * k]), "{f} row view");
        let back = rows.to_device(&Device::Cpu).unwrap();
        assert_eq!(
            back.blocks().unwrap().to_vec::<u8>().unwrap(),
            &bytes[bytes.len() / n * 5..bytes.len() / n * 25]
        );
        let (x, _) = input(&[2, k], DType::BF16, -1.0, 1.0, s + 1, dev);
        let all = poisoned(&[2, n], DType::BF16, dev);
        qgemv_into(&x, &q, &all).unwrap();
        let part = poisoned(&[2, 20], DType::BF16, dev);
        qgemv_into(&x, &rows, &part).unwrap();
        let all = all.to_vec_f64().unwrap();
        let want: Vec<f64> = (0..2)
            .flat_map(|r| all[r * n + 5..r * n + 25].to_vec())
            .collect();
        assert_eq!(part.to_vec_f64().unwrap(), want, "{f} qgemv on a row view");
        // Views that would split blocks or rows of blocks are refused; whole-row ones are not.
        assert!(q.transpose(0, 1).is_err());
        assert!(q.narrow(1, 0, 32).is_err());
        assert!(q.reshape(&[n * 16, 16]).is_err());
        assert!(q.unsqueeze(2).is_err());
        assert!(q.broadcast_to(&[2, n, k]).is_err());
        assert_eq!(
            q.reshape(&[n / 2, 2 * k])
                .unwrap()
                .unsqueeze(0)
                .unwrap()
                .shape(),
            &[1, n / 2, 2 * k]
        );
        // Element constructors refuse the block dtypes; `empty` gives zeroed blocks on the CPU.
        assert!(Tensor::full(&[1, 32], 1.0, dt, dev).is_err());
        assert!(Tensor::zeros(&[1, 32], dt, dev).is_err());
        assert!(Tensor::rand(&[1, 32], 0.0, 1.0, dt, 1, dev).is_err());
        assert!(Tensor::empty(&[1, 48], dt, dev).is_err());
        let z = Tensor::empty(&[2, 64], dt, &Device::Cpu).unwrap();
        assert_eq!(z.to_vec_f32().unwrap(), vec![0f32; 128]);
        assert!(w.blocks().is_err());
        // Every op that reads elements refuses a quantized operand with a dtype error.
        let other = Tensor::rand(&[n, k], -1.0, 1.0, DType::F32, s, dev).unwrap();
        let idx = Tensor::from_slice(&[1i32, 0], &[2], dev).unwrap();
        let wts = Tensor::ones(&[k], DType::F32, dev).unwrap();
        let results = [
            ("to_vec", q.to_vec::<u8>().map(|_| ())),
            ("copy", ops::copy(&q).map(|_| ())),
            ("unary", ops::unary(UnaryOp::Exp, &q).map(|_| ())),
            ("binary", ops::binary(BinaryOp::Add, &q, &q).map(|_| ())),
            (
                "binary mixed",
                ops::binary(BinaryOp::Add, &q, &other).map(|_| ()),
            ),
            ("scalar", ops::scalar(ScalarOp::Mul, &q, 2.0).map(|_| ())),
            ("sum", ops::sum(&q, 1).map(|_| ())),
            ("argmax", ops::argmax(&q, 1).map(|_| ())),
            ("softmax", ops::softmax(&q, 1).map(|_| ())),
            (
                "matmul",
                ops::matmul(&other.narrow(0, 0, 2).unwrap().narrow(1, 0, n).unwrap(), &q)
                    .map(|_| ()),
            ),
            (
                "linear",
                ops::linear(&x, &q, None, ops::Activation::None).map(|_| ()),
            ),
            ("rms_norm", ops::rms_norm(&q, &wts, 1e-6).map(|_| ())),
            ("index_select", ops::index_select(&q, 0, &idx).map(|_| ())),
            ("concat", ops::concat(&[&q, &q], 0).map(|_| ())),
            ("to_dtype i32", ops::to_dtype(&q, DType::I32).map(|_| ())),
        ];
        for (what, r) in results {
            assert!(
                matches!(r, Err(gpukit_ops::Error::DType { .. })),
                "{what} on {f}: {r:?}"
            );
        }
        // Allocating forms refuse before they allocate, whatever the output's shape (a [3, 32]
        // tensor's sums are [3], not whole blocks); so do the in-place and sampling ops.
        let q3 = q.narrow(0, 0, 3).unwrap().narrow(1, 0, 32);
        assert!(
            q3.is_err(),
            "a narrow inside a row of several rows is not contiguous"
        );
        let q3 = Tensor::from_blocks(&bytes[..3 * bytes.len() / n / 8], f, &[3, 32], dev).unwrap();
        let q3r = q3.reshape(&[1, 3, 32]).unwrap();
        let positions = Tensor::from_slice(&[0i32], &[1], dev).unwrap();
        let inv_freq = Tensor::ones(&[16], DType::F32, dev).unwrap();
        let results = [
            ("sum [3]", ops::sum(&q3, 1).map(|_| ())),
            (
                "reduce_all",
                ops::reduce_all(ReduceOp::Max, &q3).map(|_| ()),
            ),
            ("argmax_all", ops::argmax_all(&q3).map(|_| ())),
            (
                "rope",
                gpukit_ops::rope::rope_inplace(
                    &q3r,
                    &positions,
                    &inv_freq,
                    1.0,
                    gpukit_ops::rope::RopeLayout::RotateHalf,
                ),
            ),
            (
                "qgemv with quantized x",
                qgemv_into(
                    &q.narrow(0, 0, 2).unwrap(),
                    &q,
                    &poisoned(&[2, n], DType::F32, dev),
                ),
            ),
        ];
        for (what, r) in results {
            assert!(
                matches!(r, Err(gpukit_ops::Error::DType { .. })),
                "{what} on {f}: {r:?}"
            );
        }
        // The GEMV takes only a block-quantized matrix.
        let o = poisoned(&[2, n], DType::BF16, dev);
        let dense = Tensor::rand(&[n, k], -1.0, 1.0, DType::BF16, s, dev).unwrap();
        assert!(qgemv_into(&x, &dense, &o).is_err());
        let flat = q.reshape(&[n * k]).unwrap();
        assert!(qgemv_into(&x, &flat, &o).is_err());
    }
    // A view of rows that starts off a 4-byte boundary (Q4_0 rows of one 18-byte block): the
    // CPU takes it; CUDA refuses it (its loads need 4-byte alignment) instead of misreading.
    let bytes = quantize(QuantFormat::Q4_0, &wv[..4 * 32]).unwrap();
    let q = Tensor::from_blocks(&bytes, QuantFormat::Q4_0, &[4, 32], dev).unwrap();
    let x = Tensor::ones(&[1, 32], DType::F32, dev).unwrap();
    let o = poisoned(&[1, 3], DType::F32, dev);
    let r = qgemv_into(&x, &q.narrow(0, 1, 3).unwrap(), &o);
    match dev {
        Device::Cpu => r.unwrap(),
        Device::Cuda(_) => assert!(r.unwrap_err().to_string().contains("aligned")),
    }
});
