//! Degenerate inputs and inputs that must be refused, on each device: an error or the defined result, never a panic.

use super::*;

op_test!(empty_and_scalar_tensors, |dev: &Device| {
    let e = Tensor::zeros(&[0, 5], DType::F32, dev).unwrap();
    assert_eq!(ops::exp(&e).unwrap().numel(), 0);
    assert_eq!(ops::add(&e, &e).unwrap().shape(), &[0, 5]);
    let sc = Tensor::full(&[], 2.0, DType::F32, dev).unwrap();
    assert_eq!(ops::mul(&sc, &sc).unwrap().to_vec_f64().unwrap(), vec![4.0]);
    assert!(Tensor::from_slice(&[1.0f32, 2.0], &[3], dev).is_err());
});

// Degenerate but valid inputs, and inputs that must be refused, on each device: an error or the
// defined result, never a panic (which would fail the test).
op_test!(degenerate_and_bad_inputs, |dev: &Device| {
    use gpukit_ops::attention::{AttentionMask, sdpa};
    use gpukit_ops::quant::QuantFormat;
    use gpukit_ops::sampling::advance_decode_state;

    // Shapes whose element count overflows are refused before anything is allocated.
    let huge = [1usize << 32, 1 << 32];
    assert!(Tensor::empty(&huge, DType::F32, dev).is_err());
    assert!(Tensor::zeros(&huge, DType::BF16, dev).is_err());
    assert!(Tensor::rand(&huge, 0.0, 1.0, DType::F32, 1, dev).is_err());
    let e = Tensor::zeros(&[0], DType::F32, dev).unwrap();
    assert!(e.reshape(&huge).is_err());
    let one = Tensor::zeros(&[1], DType::F32, dev).unwrap();
    assert!(one.broadcast_to(&huge).is_err());
    // An empty or non-finite random range.
    for (lo, hi) in [
        (1.0, 1.0),
        (2.0, 1.0),
        (0.0, f64::INFINITY),
        (f64::NAN, 1.0),
    ] {
        assert!(Tensor::rand(&[3], lo, hi, DType::F32, 1, dev).is_err());
    }

    // narrow: a range whose end overflows is refused, not wrapped into range.
    let x = Tensor::from_slice(&[0f32, 1.0, 2.0, 3.0], &[4], dev).unwrap();
    let tail = x.narrow(0, 2, 2).unwrap();
    assert!(tail.narrow(0, usize::MAX, 1).is_err());
    assert!(x.narrow(0, 1, usize::MAX).is_err());
    // An empty view whose offset is past its storage reads as empty.
    let m = Tensor::zeros(&[2, 2], DType::F32, dev).unwrap();
    let empty = m.narrow(0, 2, 0).unwrap().transpose(0, 1).unwrap();
    assert_eq!(empty.shape(), &[2, 0]);
    assert!(empty.to_vec_f32().unwrap().is_empty());

    // Quantized tensors: blocks that do not cover the shape exactly, a last dimension of partial
    // blocks and sizes that overflow are refused.
    let q8 = QuantFormat::Q8_0;
    let block = [7u8; 34];
    for shape in [
        &[2usize, 32][..],
        &[1, 16],
        &[34],
        &[],
        &[usize::MAX, 32],
        &[1, usize::MAX - 31],
    ] {
        assert!(
            Tensor::from_blocks(&block, q8, shape, dev).is_err(),
            "{shape:?}"
        );
    }
    let qm = Tensor::from_blocks(&block, q8, &[1, 32], dev).unwrap();
    assert_eq!(
        (qm.shape(), qm.dtype(), qm.nbytes()),
        (&[1usize, 32][..], DType::Quant(q8), 34)
    );
    let back = qm.to_device(&Device::Cpu).unwrap().blocks().unwrap();
    assert_eq!(back.to_vec::<u8>().unwrap(), block);

    for dt in [DType::F16, DType::BF16] {
        // Non-causal attention with more queries than keys (cross-attention), ALiBi on and
        // off: over one key every query's output is that key's value row, exactly.
        let q = input(&[1, 2, 3, 64], dt, -1.0, 1.0, 11, dev).0;
        let k = input(&[1, 1, 1, 64], dt, -1.0, 1.0, 12, dev).0;
        let v = input(&[1, 1, 1, 64], dt, -1.0, 1.0, 13, dev).0;
        let vv = v.to_vec_f64().unwrap();
        for alibi in [false, true] {
            let mask = AttentionMask {
                causal: false,
                sliding_window: None,
                alibi,
            };
            let o = sdpa(&q, &k, &v, 0.125, mask).unwrap().to_vec_f64().unwrap();
            for (i, row) in o.chunks_exact(64).enumerate() {
                assert_eq!(row, &vv[..], "{dt} alibi={alibi} row {i}");
            }
        }
        // Over two keys the ALiBi bias moves the weights: key j gets slope·(j − position),
        // query i at position kv_len − q_len + i = i − 1 (the position only adds a constant,
        // which softmax ignores; the slope, 2^-4 and 2^-8 for 2 heads as in Press et al.,
        // does not). The f64 reference is written out here.
        let (q, qv) = input(&[1, 2, 3, 64], dt, -1.0, 1.0, 18, dev);
        let (k, kv) = input(&[1, 1, 2, 64], dt, -1.0, 1.0, 19, dev);
        let (v, vv) = input(&[1, 1, 2, 64], dt, -1.0, 1.0, 20, dev);
        let mask = AttentionMask {
            causal: false,
            sliding_window: None,
            alibi: true,
        };
        let got = sdpa(&q, &k, &v, 0.125, mask).unwrap().to_vec_f64().unwrap();
        let mut want = Vec::new();
        for (h, slope) in [(0usize, 0.0625f64), (1, 0.00390625)] {
            for i in 0..3 {
                let qrow = &qv[(h * 3 + i) * 64..][..64];
                let s: Vec<f64> = (0..2)
                    .map(|j| {
                        let dot: f64 = qrow
                            .iter()
                            .zip(&kv[j * 64..][..64])
                            .map(|(a, b)| a * b)
                            .sum();
                        0.125 * dot + slope * (j as f64 - (i as f64 - 1.0))
                    })
                    .collect();
                let m = s[0].max(s[1]);
                let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z = p[0] + p[1];
                want.extend((0..64).map(|c| (p[0] * vv[c] + p[1] * vv[64 + c]) / z));
            }
        }
        assert_close(
            &format!("{dt} non-causal ALiBi, 3 queries over 2 keys"),
            &got,
            &want,
            tol(dt),
        );
        // A window wider than any sequence is no window.
        let (q, k, v) = (
            input(&[1, 4, 5, 64], dt, -1.0, 1.0, 14, dev).0,
            input(&[1, 2, 37, 64], dt, -1.0, 1.0, 15, dev).0,
            input(&[1, 2, 37, 64], dt, -1.0, 1.0, 16, dev).0,
        );
        let causal = AttentionMask {
            causal: true,
            sliding_window: None,
            alibi: false,
        };
        let wide = AttentionMask {
            sliding_window: Some(usize::MAX),
            ..causal
        };
        let want = sdpa(&q, &k, &v, 0.125, causal)
            .unwrap()
            .to_vec_f64()
            .unwrap();
        let got = sdpa(&q, &k, &v, 0.125, wide).unwrap().to_vec_f64().unwrap();
        assert_eq!(got, want, "{dt}: a usize::MAX window");
        // A causal window with more queries than keys is an error, not an underflow.
        let short = input(&[1, 2, 2, 64], dt, -1.0, 1.0, 17, dev).0;
        let narrow = AttentionMask {
            sliding_window: Some(2),
            ..causal
        };
        assert!(sdpa(&q, &short, &short, 0.125, narrow).is_err());
    }

    // linear over k = 0 inputs: the empty sum, then the bias and activation.
    for dt in FLOATS {
        let x = Tensor::zeros(&[3, 0], dt, dev).unwrap();
        let w = Tensor::zeros(&[4, 0], dt, dev).unwrap();
        let b = Tensor::from_slice(&[-1.5f32, 0.5, 2.0, -0.25], &[4], dev).unwrap();
        let b = ops::to_dtype(&b, dt).unwrap();
        for (bias, act, row) in [
            (None, Activation::None, [0.0, 0.0, 0.0, 0.0]),
            (Some(&b), Activation::None, [-1.5, 0.5, 2.0, -0.25]),
            (Some(&b), Activation::Relu, [0.0, 0.5, 2.0, 0.0]),
        ] {
            let out = poisoned(&[3, 4], dt, dev);
            ops::linear_into(&x, &w, bias, act, &out).unwrap();
            let want: Vec<f64> = row.iter().copied().cycle().take(12).collect();
            assert_eq!(out.to_vec_f64().unwrap(), want, "{dt} {act:?}");
        }
    }

    // The decode state with an empty recent-ids window moves only the position and step.
    let position = Tensor::from_slice(&[5i32], &[1], dev).unwrap();
    let step = Tensor::from_slice(&[9i64], &[1], dev).unwrap();
    let recent = Tensor::zeros(&[1, 0], DType::I32, dev).unwrap();
    let token = Tensor::from_slice(&[7i32], &[1], dev).unwrap();
    advance_decode_state(&position, &step, Some(&recent), &token).unwrap();
    assert_eq!(position.to_vec::<i32>().unwrap(), [6]);
    assert_eq!(step.to_vec::<i64>().unwrap(), [10]);
});

// Host helpers given out-of-range input, and a host allocation that cannot succeed.
#[test]
fn host_helpers_out_of_range() {
    use gpukit_ops::rope::RopeTable;
    use gpukit_ops::sampling::exp_det;
    assert_eq!(exp_det(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp_det(100.0), f32::INFINITY);
    assert_eq!(exp_det(f32::NEG_INFINITY), 0.0);
    assert!((exp_det(-1.0) - (-1f32).exp()).abs() < 1e-6);
    let empty = RopeTable {
        inv_freq: vec![],
        attention_scale: 1.0,
    };
    assert_eq!(empty.cos_sin(0, 0), None);
    let t = RopeTable {
        inv_freq: vec![0.5],
        attention_scale: 1.0,
    };
    let (c, s) = t.cos_sin(2, 0).unwrap();
    assert!((c - 1f32.cos()).abs() < 1e-6 && (s - 1f32.sin()).abs() < 1e-6);
    assert_eq!(t.cos_sin(2, 1), None);
    // A reference attention shape whose sizes overflow.
    use gpukit_ops::attention::{AttentionMask, AttentionShape, sdpa_reference};
    let shape = AttentionShape {
        batch: 1 << 40,
        q_heads: 1 << 40,
        kv_heads: 1,
        q_len: 1,
        kv_len: 1,
        head_dim: 64,
    };
    assert!(sdpa_reference(&[], &[], &[], shape, 1.0, AttentionMask::default()).is_err());
    // Zeros are left as the allocator zeroed them; any other value, -0.0 included, is written.
    let z = Tensor::full(&[3], -0.0, DType::F32, &Device::Cpu).unwrap();
    assert!(
        z.to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|x| x.to_bits() == (-0f32).to_bits())
    );
    let z = Tensor::zeros(&[3], DType::BF16, &Device::Cpu).unwrap();
    assert_eq!(z.to_vec_f64().unwrap(), [0.0; 3]);
    // An empty batch makes no head count valid: with the heads' product overflowing it is
    // refused, and otherwise it attends nothing (no slopes or rows are allocated).
    let empty = AttentionShape {
        batch: 0,
        q_heads: 1 << 62,
        kv_heads: 1,
        q_len: 1 << 20,
        kv_len: 1,
        head_dim: 1,
    };
    assert!(sdpa_reference(&[], &[], &[], empty, 1.0, AttentionMask::default()).is_err());
    let alibi = AttentionMask {
        alibi: true,
        ..AttentionMask::default()
    };
    let empty = AttentionShape {
        q_heads: 1 << 40,
        q_len: 1,
        ..empty
    };
    assert!(
        sdpa_reference(&[], &[], &[], empty, 1.0, alibi)
            .unwrap()
            .is_empty()
    );
    // The sampler's CPU reference refuses more ids than the device takes (their weights could
    // overflow the sum), and the workspace length saturates instead of overflowing.
    use gpukit_ops::sampling::{
        MAX_VOCAB, SamplingParams, candidates, sample, sampler_workspace_len,
    };
    let flat = vec![0f32; MAX_VOCAB + 1];
    let p = SamplingParams {
        temperature: 1.0,
        ..Default::default()
    };
    assert_eq!(sample(&flat, &[], &p, 0), None);
    assert!(candidates(&flat, &[], &p).is_empty());
    assert_eq!(
        sample(&flat[..MAX_VOCAB], &[], &p, 0).map(|id| id < MAX_VOCAB as u32),
        Some(true)
    );
    assert_eq!(sampler_workspace_len(usize::MAX, 1000), usize::MAX);
    assert_eq!(sampler_workspace_len(1, usize::MAX), usize::MAX);
    // Dequantizing an empty view whose offset lies past its (empty) storage gives nothing.
    use gpukit_ops::quant::{QuantFormat, dequantize_tensor};
    let blocks = Tensor::empty(&[2, 32], DType::Quant(QuantFormat::Q8_0), &Device::Cpu)
        .unwrap()
        .narrow(0, 2, 0)
        .unwrap();
    let d = dequantize_tensor(&blocks, DType::F32).unwrap();
    assert_eq!(d.shape(), [0, 32]);
    // 2^58 bytes (past any address space) is an error, not an abort.
    let r = Tensor::zeros(&[1 << 58], DType::U8, &Device::Cpu);
    assert!(
        matches!(r, Err(gpukit_ops::Error::HostOutOfMemory { .. })),
        "{r:?}"
    );
}

// Inputs that must be refused before any kernel reads them: side tensors the kernels read
// densely given as broadcast (stride-0) views, a zero-column quantized matrix, a cache with more
// positions than an i32 holds, an absurd rotary dimension. Each error leaves its operands as
// they were.
op_test!(
    refuses_strided_side_inputs_and_absurd_sizes,
    |dev: &Device| {
        use gpukit_ops::kv_cache::KvCache;
        use gpukit_ops::quant::{QuantFormat, qgemv_into};
        use gpukit_ops::rope::{
            MAX_ROTARY_DIM, RopeConfig, RopeLayout, RopeScaling, rope_inplace, rope_kv_append,
        };
        let (tokens, heads, hd) = (3usize, 2usize, 8usize);
        let xv: Vec<f32> = (0..tokens * heads * hd).map(|i| i as f32 * 0.25).collect();
        let x = Tensor::from_slice(&xv, &[tokens, heads, hd], dev).unwrap();
        let positions = Tensor::from_slice(&[0i32, 1, 2], &[tokens], dev).unwrap();
        let inv_freq = Tensor::from_slice(&[1.0f32, 0.5, 0.25, 0.125], &[4], dev).unwrap();
        // One value broadcast to `n`: the kernels would read past its one element.
        let one_i32 = Tensor::from_slice(&[1i32], &[1], dev).unwrap();
        let one_f32 = Tensor::from_slice(&[1.0f32], &[1], dev).unwrap();
        let bpos = one_i32.broadcast_to(&[tokens]).unwrap();
        let bfreq = one_f32.broadcast_to(&[4]).unwrap();
        for (p, f, what) in [
            (&bpos, &inv_freq, "positions"),
            (&positions, &bfreq, "inv_freq"),
        ] {
            let r = rope_inplace(&x, p, f, 1.0, RopeLayout::RotateHalf);
            assert!(
                matches!(r, Err(gpukit_ops::Error::Shape { .. })),
                "rope with broadcast {what}: {r:?}"
            );
        }
        assert_eq!(x.to_vec::<f32>().unwrap(), xv, "a refused rope changed x");
        // rope_kv_append: broadcast inv_freq or q/k norm weights.
        let (nq, nkv) = (2usize, 1usize);
        let qkv = Tensor::zeros(&[1, (nq + 2 * nkv) * hd], DType::F32, dev).unwrap();
        let q_out = Tensor::zeros(&[1, nq, hd], DType::F32, dev).unwrap();
        let mut cache = KvCache::new(nkv, 4, hd, DType::F32, KvLayout::Linear, dev).unwrap();
        let position = Tensor::from_slice(&[0i32], &[1], dev).unwrap();
        // One element of a stride-0 view: contiguous, as any one-element view is.
        let bposition = one_i32.broadcast_to(&[3]).unwrap().narrow(0, 1, 1).unwrap();
        let w = Tensor::full(&[hd], 1.0, DType::F32, dev).unwrap();
        let bw = one_f32.broadcast_to(&[hd]).unwrap();
        let rope = Some((&inv_freq, 1.0f32, RopeLayout::RotateHalf));
        let brope = Some((&bfreq, 1.0f32, RopeLayout::RotateHalf));
        for (pos, rope, norm, what) in [
            (&position, brope, None, "inv_freq"),
            (&position, rope, Some((&bw, &w, 1e-6f32)), "q norm weight"),
            (&position, rope, Some((&w, &bw, 1e-6f32)), "k norm weight"),
        ] {
            let r = rope_kv_append(&qkv, &q_out, &mut cache, pos, rope, norm);
            assert!(
                matches!(r, Err(gpukit_ops::Error::Shape { .. })),
                "rope_kv_append with broadcast {what}: {r:?}"
            );
        }
        let zeros = vec![0f32; nq * hd];
        assert_eq!(
            q_out.to_vec::<f32>().unwrap(),
            zeros,
            "a refused append wrote q_out"
        );
        let cache_zeros = vec![0f32; nkv * 4 * hd];
        for t in [cache.key_storage(), cache.value_storage()] {
            assert_eq!(
                t.to_vec::<f32>().unwrap(),
                cache_zeros,
                "a refused append wrote the cache"
            );
        }
        rope_kv_append(&qkv, &q_out, &mut cache, &bposition, rope, None).unwrap();
        // A quantized tensor's rows hold at least one block (no zero-column quantized matrix
        // reaches the GEMV); a cache's positions fit an i32 (refused before any allocation).
        let q8 = gpukit_ops::DType::Quant(QuantFormat::Q8_0);
        assert!(Tensor::from_blocks(&[], QuantFormat::Q8_0, &[4, 0], dev).is_err());
        assert!(Tensor::empty(&[4, 0], q8, dev).is_err());
        assert!(Tensor::empty(&[0], q8, dev).is_err());
        let rows0 = Tensor::from_blocks(&[], QuantFormat::Q8_0, &[0, 32], dev).unwrap();
        let x0 = Tensor::zeros(&[1, 32], DType::F32, dev).unwrap();
        let y0 = Tensor::zeros(&[1, 0], DType::F32, dev).unwrap();
        qgemv_into(&x0, &rows0, &y0).unwrap();
        let r = KvCache::new(
            1,
            i32::MAX as usize + 1,
            1,
            DType::F32,
            KvLayout::Linear,
            dev,
        );
        assert!(
            matches!(r, Err(gpukit_ops::Error::Shape { .. })),
            "{:?}",
            r.err()
        );
        let table = RopeConfig {
            rotary_dim: MAX_ROTARY_DIM + 2,
            base: 10_000.0,
            scaling: RopeScaling::None,
        }
        .table(16);
        assert!(table.is_err());
    }
);

// Views by squeeze, and the address handed to foreign code (DLPack, jit kernels): the first
// element of the view, in the storage of the tensor it came from.
op_test!(squeeze_and_data_ptr, |dev: &Device| {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 1, 3], dev).unwrap();
    let s = t.squeeze(1).unwrap();
    assert_eq!(s.shape(), &[2, 3]);
    assert_eq!(s.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    assert!(t.squeeze(0).is_err());
    assert!(t.squeeze(3).is_err());
    let col = t
        .transpose(0, 2)
        .unwrap()
        .narrow(0, 1, 1)
        .unwrap()
        .squeeze(0)
        .unwrap();
    assert_eq!(col.shape(), &[1, 2]);
    assert_eq!(col.to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
    let row = t.narrow(0, 1, 1).unwrap();
    assert_eq!(row.data_ptr(), t.data_ptr() + 3 * 4);
    assert_ne!(t.data_ptr(), 0);
});

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_tensor_over_foreign_device_memory() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Another allocator's memory, and a flag set when it is released.
    struct Owner {
        _memory: gpukit_driver::DeviceAllocation,
        released: Arc<AtomicBool>,
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.released.store(true, Ordering::SeqCst);
        }
    }
    let dev = cuda();
    let Device::Cuda(c) = &dev else {
        unreachable!("cuda() is a CUDA device")
    };
    // 2 rows of 4 f32 with a row stride of 5 (a padded view), in memory gpukit did not allocate.
    let mut foreign = c.stream().device().alloc(10 * 4).unwrap();
    let host: Vec<f32> = (0..10).map(|i| i as f32).collect();
    c.stream().copy_to_device(&host, &mut foreign, 0).unwrap();
    let addr = foreign.ptr().0;
    let released = Arc::new(AtomicBool::new(false));
    // SAFETY: 40 bytes of f32 on this device, alive while the owner lives.
    let t = unsafe {
        Tensor::from_device_memory(
            c,
            addr,
            40,
            &[2, 4],
            &[5, 1],
            DType::F32,
            Box::new(Owner {
                _memory: foreign,
                released: released.clone(),
            }),
        )
    }
    .unwrap();
    assert_eq!(t.data_ptr(), addr);
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0]
    );
    // Ops read and write it in place.
    let doubled = ops::scalar(ScalarOp::Mul, &t, 2.0).unwrap();
    ops::copy_into(&doubled, &t).unwrap();
    assert_eq!(
        t.narrow(0, 1, 1).unwrap().to_vec::<f32>().unwrap(),
        vec![10.0, 12.0, 14.0, 16.0]
    );
    assert!(!released.load(Ordering::SeqCst));
    drop(doubled);
    drop(t);
    assert!(released.load(Ordering::SeqCst));
    // A layout reaching past the memory, or a negative stride, is refused.
    let spare = c.stream().device().alloc(16).unwrap();
    let a = spare.ptr().0;
    // SAFETY: refused before the memory is touched.
    let past =
        unsafe { Tensor::from_device_memory(c, a, 16, &[2, 4], &[4, 1], DType::F32, Box::new(())) };
    assert!(past.is_err());
    // SAFETY: as above.
    let negative =
        unsafe { Tensor::from_device_memory(c, a, 16, &[4], &[-1], DType::F32, Box::new(())) };
    assert!(negative.is_err());
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_host_copies_are_refused_inside_a_capture() {
    let dev = cuda();
    let Device::Cuda(c) = &dev else {
        unreachable!("cuda() is a CUDA device")
    };
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2], &dev).unwrap();
    let y = Tensor::zeros(&[2], DType::F32, &dev).unwrap();
    let mut during = Vec::new();
    let graph = c.capture(|| {
        during.push(Tensor::from_slice(&[3.0f32], &[1], &dev).map(|_| ()));
        during.push(x.to_device(&Device::Cpu).map(|_| ()));
        ops::scalar_into(ScalarOp::Mul, &x, 2.0, &y)
    });
    assert!(
        during
            .iter()
            .all(|r| matches!(r, Err(gpukit_ops::Error::Capture { .. }))),
        "{during:?}"
    );
    // The capture itself holds the op, and the lane and its transfers work as before.
    graph.unwrap().launch(c.stream()).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    let z = Tensor::from_slice(&[5.0f32], &[1], &dev).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![5.0]);
}
