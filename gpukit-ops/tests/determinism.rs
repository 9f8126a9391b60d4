//! Determinism of every CUDA op: run twice → bitwise equal; captured in a CUDA graph and
//! replayed → bitwise equal to eager. (The CPU is deterministic by construction.)

// Test code: a failed expectation is a test failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpukit_ops::ops::{self, Activation};
use gpukit_ops::{BinaryOp, CudaDevice, DType, Device, ReduceOp, ScalarOp, Tensor, UnaryOp};
use gpukit_sched::{LanePriority, Runtime};

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec_f64()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// Ops on a normal-priority lane of device 0 (the runtime is returned to keep it alive).
fn cuda_device() -> (Runtime, CudaDevice) {
    let rt = Runtime::with_devices(&[0]).unwrap();
    let lane = rt
        .device(0)
        .unwrap()
        .default_tenant()
        .lane(LanePriority::Normal)
        .unwrap();
    let cuda = CudaDevice::new(&lane).unwrap();
    (rt, cuda)
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_every_op_is_bitwise_deterministic_and_graph_equals_eager() {
    let (_rt, cuda) = cuda_device();
    let dev = Device::Cuda(cuda.clone());
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let r = |shape: &[usize], seed| Tensor::rand(shape, -2.0, 2.0, dt, seed, &dev).unwrap();
        let (x, y) = (r(&[33, 1000], 1), r(&[33, 1000], 2));
        let row = r(&[1000], 3);
        let w = r(&[1000], 4);
        let (a, b) = (r(&[2, 96, 200], 5), r(&[2, 200, 72], 6));
        let (wt, bias) = (r(&[1536, 1000], 7), r(&[1536], 8));
        let x1 = r(&[1, 1000], 9);
        // w_ring is above gemv::RING_SMALL_BELOW in every dtype (the Hopper ring GEMV on
        // sm_90a); w_small, 5 MB (bf16) and 10 MB (f32), takes its small-matrix ring, two
        // blocks a multiprocessor (in bf16 with x in registers, and a last stage of 3 rows).
        let (w_ring, x_ring) = (r(&[4099, 2056], 10), r(&[1, 2056], 11));
        let (w_small, x_small) = (r(&[2503, 1000], 12), r(&[1, 1000], 13));
        let ids = Tensor::from_slice(&[5i32, 0, 32, 7], &[4], &dev).unwrap();
        let x3 = r(&[3, 1000], 14);
        let cond_v: Vec<u8> = (0..33 * 1000).map(|i| u8::from(i % 7 < 3)).collect();
        let cond = Tensor::from_slice(&cond_v, &[33, 1000], &dev).unwrap();
        let gather_v: Vec<i64> = (0..33 * 17).map(|i| (i * 389 % 1000) as i64).collect();
        let gather_ids = Tensor::from_slice(&gather_v, &[33, 17], &dev).unwrap();
        let xt = x.transpose(0, 1).unwrap();
        let e = |shape: &[usize]| Tensor::empty(shape, dt, &dev).unwrap();
        let mut outs = vec![
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33]),
            e(&[1000]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[2, 96, 72]),
            e(&[1, 1536]),
            e(&[4, 1000]),
            Tensor::empty(&[33], DType::I64, &dev).unwrap(),
            Tensor::empty(
                &[33, 1000],
                if dt == DType::F32 {
                    DType::BF16
                } else {
                    DType::F32
                },
                &dev,
            )
            .unwrap(),
            e(&[33, 1536]),
            e(&[1, 4099]),
            e(&[1, 2503]),
            e(&[33, 1000]),
            e(&[33, 1000]),
            e(&[33, 17]),
            e(&[1000, 33]),
            e(&[33, 2000]),
            e(&[33, 1000]),
            Tensor::empty(&[1000], DType::I64, &dev).unwrap(),
            e(&[1000, 33]),
            e(&[3, 1536]),
            e(&[]),
        ];
        let run = |o: &mut [Tensor]| -> gpukit_ops::Result<()> {
            ops::binary_into(BinaryOp::Mul, &x, &y, &o[0])?;
            ops::binary_into(BinaryOp::Add, &x, &row, &o[1])?; // broadcast: strided kernel
            ops::unary_into(UnaryOp::GeluErf, &x, &o[2])?;
            ops::scalar_into(ScalarOp::Mul, &x, 0.37, &o[3])?;
            ops::softmax_into(&x, 1, false, &o[4])?;
            ops::reduce_into(ReduceOp::Sum, &x, 1, &o[5])?;
            ops::reduce_into(ReduceOp::Mean, &x, 0, &o[6])?; // column kernel
            ops::rms_norm_into(&x, &w, 1e-5, &o[7])?;
            let (a7, b8) = o[8..10].split_at_mut(1);
            ops::add_rms_norm_into(&x, &y, &w, 1e-5, &a7[0], &b8[0])?;
            ops::layer_norm_into(&x, &w, Some(&row), 1e-5, &o[10])?;
            ops::matmul_into(&a, &b, &o[11])?;
            ops::linear_into(&x1, &wt, Some(&bias), Activation::None, &o[12])?; // GEMV
            ops::index_select_into(&x, 0, &ids, &o[13])?;
            ops::argmax_into(&x, 1, &o[14])?;
            ops::cast_into(&x, &o[15])?;
            ops::linear_into(&x, &wt, Some(&bias), Activation::GeluTanh, &o[16])?; // cuBLASLt
            ops::linear_into(&x_ring, &w_ring, None, Activation::None, &o[17])?; // ring GEMV
            ops::linear_into(&x_small, &w_small, None, Activation::None, &o[18])?; // small ring
            ops::clamp_into(&x, -1.0, 0.5, &o[19])?;
            ops::where_into(&cond, &x, &y, &o[20])?;
            ops::gather_into(&x, 1, &gather_ids, &o[21])?;
            ops::copy_into(&xt, &o[22])?; // strided copy (transpose made dense)
            ops::concat_into(&[&x, &y], 1, &o[23])?;
            ops::softmax_into(&x, 0, true, &o[24])?; // column kernel, log-softmax
            ops::argmax_into(&x, 0, &o[25])?; // column kernel
            ops::unary_into(UnaryOp::Exp, &xt, &o[26])?; // strided unary
            ops::linear_into(&x3, &wt, Some(&bias), Activation::None, &o[27])?; // 3-row GEMV
            ops::reduce_all_into(ReduceOp::Max, &x, &o[28])?;
            Ok(())
        };
        run(&mut outs).unwrap();
        let first: Vec<Vec<u64>> = outs.iter().map(bits).collect();
        run(&mut outs).unwrap();
        for (i, o) in outs.iter().enumerate() {
            assert_eq!(
                bits(o),
                first[i],
                "{dt}: op {i} differs between two eager runs"
            );
        }
        // Poison, then capture the same sequence and replay it.
        for o in outs.iter_mut() {
            let p = Tensor::full(o.shape(), f64::NAN, o.dtype(), &dev).unwrap();
            if o.dtype() == DType::I64 {
                ops::copy_into(&Tensor::full(o.shape(), -1.0, DType::I64, &dev).unwrap(), o)
                    .unwrap();
            } else {
                ops::copy_into(&p, o).unwrap();
            }
        }
        let mut captured = outs.clone();
        let graph = cuda.capture(|| run(&mut captured)).unwrap();
        for _ in 0..3 {
            graph.launch(cuda.stream()).unwrap();
        }
        for (i, o) in outs.iter().enumerate() {
            assert_eq!(
                bits(o),
                first[i],
                "{dt}: op {i} differs between graph replay and eager"
            );
        }
        println!(
            "[gpu] determinism {dt}: {} ops bitwise equal twice and under graph replay",
            outs.len()
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_transformer_kernels_are_bitwise_deterministic_and_graph_equals_eager() {
    let (_rt, cuda) = cuda_device();
    transformer_kernels(&cuda);
}

/// The transformer kernels on a lane of a 40-SM partition (green context): grids sized for
/// the partition's SMs, the same bits as on the whole device — launch shapes follow the SMs,
/// sums do not.
#[test]
#[ignore = "needs a CUDA device"]
fn gpu_transformer_kernels_on_an_sm_partition_equal_the_whole_device() {
    use gpukit_sched::{QosClass, SchedulerOptions, TenantSpec};
    let (rt, whole) = cuda_device();
    let want = transformer_kernels(&whole);
    let sched = rt
        .device(0)
        .unwrap()
        .scheduler(SchedulerOptions::default())
        .unwrap();
    let tenant = sched
        .admit(
            &TenantSpec::new("decode", QosClass::Guaranteed)
                .memory(2 << 30)
                .sm_share(0.25),
        )
        .unwrap();
    let Some(part) = tenant.partition() else {
        panic!(
            "the GPU machine's driver has green contexts: {}",
            sched.isolation()
        );
    };
    let lane = tenant.lane(LanePriority::High).unwrap();
    assert_eq!(lane.stream().sm_count(), part.sm_count());
    assert!(part.sm_count() < whole.stream().sm_count());
    let cuda = CudaDevice::new(&lane).unwrap();
    assert_eq!(
        transformer_kernels(&cuda),
        want,
        "on {} SMs the kernels' results differ from the whole device's",
        part.sm_count()
    );
    println!(
        "[gpu] transformer kernels on a {}-SM partition: bitwise equal to the whole device's",
        part.sm_count()
    );
}

/// Runs the transformer kernels (attention, RoPE, the KV cache, sampling, the fused decode-step
/// GEMVs, quantized GEMVs) in f16 and bf16 on `cuda`: twice eagerly and under graph replay,
/// asserting the bits equal; returns them per dtype.
fn transformer_kernels(cuda: &CudaDevice) -> Vec<Vec<Vec<u64>>> {
    use gpukit_ops::attention::{
        AttentionMask, attention_shape, sdpa_into, sdpa_kv_into, sdpa_workspace_len,
    };
    use gpukit_ops::kv_cache::{KvCache, KvLayout};
    use gpukit_ops::quant::{QuantFormat, qgemv_into, quantize_tensor, random_blocks};
    use gpukit_ops::rope::{RopeLayout, rope_inplace, rope_kv_append};
    use gpukit_ops::sampling::{SamplingParams, sample_tokens_into, sampler_workspace_len};
    let dev = Device::Cuda(cuda.clone());
    let mask = AttentionMask {
        causal: true,
        ..Default::default()
    };
    let mut all = Vec::new();
    for dt in [DType::F16, DType::BF16] {
        let r = |shape: &[usize], seed| Tensor::rand(shape, -1.0, 1.0, dt, seed, &dev).unwrap();
        // Prefill (q_len 200) and split-K decode (1 query × GQA 8 over 5000 keys: on Hopper the
        // decode ring).
        let (qp, kp, vp) = (
            r(&[1, 8, 200, 128], 1),
            r(&[1, 2, 200, 128], 2),
            r(&[1, 2, 200, 128], 3),
        );
        let (qd, kd, vd) = (
            r(&[1, 8, 1, 128], 4),
            r(&[1, 1, 5000, 128], 5),
            r(&[1, 1, 5000, 128], 6),
        );
        let ws_len = sdpa_workspace_len(&attention_shape(&qd, &kd, &vd).unwrap(), &mask);
        assert!(ws_len > 0, "the decode case must take the split path");
        let ws = Tensor::empty(&[ws_len], DType::F32, &dev).unwrap();
        let x0 = r(&[7, 4, 64], 7);
        let positions = Tensor::from_slice(&[3i32, 9, 10, 11, 12, 13, 200], &[7], &dev).unwrap();
        let inv_freq = Tensor::rand(&[32], 0.0, 1.0, DType::F32, 8, &dev).unwrap();
        let (kn, vn) = (r(&[3, 2, 64], 9), r(&[3, 2, 64], 10));
        let pos = Tensor::from_slice(&[5i32], &[1], &dev).unwrap();
        let logits = r(&[3, 49_159], 11);
        let sampler_ws =
            Tensor::empty(&[sampler_workspace_len(3, 49_159)], DType::U8, &dev).unwrap();
        // The decode step's fused ops: SwiGLU GEMV; QKV → q/k norm → RoPE → KV append.
        let (x_glu, w_glu) = (r(&[1, 2048], 12), r(&[2 * 1000, 2048], 13));
        let qkv = r(&[1, (8 + 2 * 2) * 64], 14);
        let (qn, kn_w) = (r(&[64], 15), r(&[64], 16));
        let pos2 = Tensor::from_slice(&[9i32], &[1], &dev).unwrap();
        // Pre-norm projections: residual + pending → RMSNorm → GEMV / SwiGLU / LM head + greedy.
        let (pending, norm_w) = (r(&[1, 2048], 17), r(&[2048], 18));
        let w_head = r(&[49_159, 2048], 19);
        let head_ws = Tensor::empty(
            &[ops::rms_norm_linear_greedy_workspace_len(49_159, 2048, dt)],
            DType::F32,
            &dev,
        )
        .unwrap();
        let step = Tensor::from_slice(&[12i64], &[1], &dev).unwrap();
        // Pre-norm QKV GEMV with RoPE and the KV append as its epilogue (cache row 12).
        let (w_qkv, b_qkv) = (r(&[(8 + 2 * 2) * 64, 2048], 20), r(&[(8 + 2 * 2) * 64], 21));
        let pos3 = Tensor::from_slice(&[12i32], &[1], &dev).unwrap();
        // Quantized GEMV (GGUF blocks read directly): 1000 rows of 2048 in each simple format
        // (Q4_0, 1.15 MB, takes the tensor-core ring on Hopper, for one row of x and for three).
        let mut qmats: Vec<Tensor> = [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1]
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                let w = Tensor::rand(&[1000, 2048], -1.0, 1.0, DType::F32, 22 + i as u64, &dev);
                quantize_tensor(&w.unwrap(), f).unwrap()
            })
            .collect();
        // And Q4_K, 1000 rows of 2048 (1.2 MB: the Q4_K ring on Hopper), as random super-blocks
        // with finite scales (no reference quantizer exists for the K-quants).
        let q4k = random_blocks(QuantFormat::Q4K, 1000 * 2048, 25, 0.1).unwrap();
        qmats.push(Tensor::from_blocks(&q4k, QuantFormat::Q4K, &[1000, 2048], &dev).unwrap());
        let sampling = SamplingParams {
            temperature: 0.9,
            top_p: 0.9,
            top_k: 64,
            seed: 5,
            ..Default::default()
        };
        // min-p and the repetition penalty over a window of 5 recent ids a row.
        let sampling_penalized = SamplingParams {
            temperature: 0.8,
            min_p: 0.05,
            repetition_penalty: 1.3,
            seed: 6,
            ..Default::default()
        };
        let recent_v: Vec<i32> = (0..3 * 5).map(|i| i * 7_919 % 49_159).collect();
        let recent = Tensor::from_slice(&recent_v, &[3, 5], &dev).unwrap();
        // Three rows of x against the quantized weights (the multi-row kernels).
        let x_rows = r(&[3, 2048], 26);
        let e = |shape: &[usize]| Tensor::empty(shape, dt, &dev).unwrap();
        let mut outs = vec![
            e(&[1, 8, 200, 128]),
            e(&[1, 8, 1, 128]),
            e(&[7, 4, 64]),
            Tensor::empty(&[3], DType::I32, &dev).unwrap(),
            e(&[1, 1000]),
            e(&[1, 8, 64]),
            e(&[1, 1000]),
            e(&[1, 2048]),
            e(&[1, 1000]),
            e(&[1, 49_159]),
            Tensor::empty(&[1], DType::I32, &dev).unwrap(),
            e(&[1, 8, 64]),
            e(&[1, 1000]),
            e(&[1, 1000]),
            e(&[1, 1000]),
            e(&[1, 1000]),
            e(&[1, 8, 1, 128]),
            Tensor::empty(&[3], DType::I32, &dev).unwrap(),
            e(&[3, 1000]),
            e(&[3, 1000]),
            e(&[3, 1000]),
        ];
        // The layout the decode step's caches have on CUDA.
        let layout = KvLayout::preferred(&dev);
        let mut cache = KvCache::new(2, 16, 64, dt, layout, &dev).unwrap();
        let run = |o: &mut [Tensor], cache: &mut KvCache| -> gpukit_ops::Result<()> {
            sdpa_into(&qp, &kp, &vp, 0.088, mask, &o[0], &ws)?;
            sdpa_into(&qd, &kd, &vd, 0.088, mask, &o[1], &ws)?;
            // The same keys read as a pre-swizzled cache (on Hopper the ring's 1-d copies).
            sdpa_kv_into(&qd, &kd, &vd, KvLayout::Swizzled, 0.088, mask, &o[16], &ws)?;
            ops::copy_into(&x0, &o[2])?;
            rope_inplace(&o[2], &positions, &inv_freq, 1.0, RopeLayout::RotateHalf)?;
            cache.append_at(&kn, &vn, &pos)?;
            sample_tokens_into(&logits, None, &sampling, &step, &sampler_ws, &o[3])?;
            sample_tokens_into(
                &logits,
                Some(&recent),
                &sampling_penalized,
                &step,
                &sampler_ws,
                &o[17],
            )?;
            ops::linear_swiglu_into(&x_glu, &w_glu, &o[4])?;
            let rope = Some((&inv_freq, 1.0, RopeLayout::RotateHalf));
            rope_kv_append(&qkv, &o[5], cache, &pos2, rope, Some((&qn, &kn_w, 1e-6)))?;
            let sum = o[7].clone();
            let x = ops::PreNorm {
                residual: &x_glu,
                pending: Some((&pending, &sum)),
                weight: &norm_w,
                eps: 1e-5,
            };
            ops::rms_norm_linear_into(&x, &w_glu.narrow(0, 0, 1000)?, None, &o[6])?;
            ops::rms_norm_swiglu_into(&x, &w_glu, &o[8])?;
            let token = o[10].clone();
            ops::rms_norm_linear_greedy_into(&x, &w_head, &o[9], &head_ws, &token)?;
            ops::rms_norm_linear_rope_kv_into(
                &x,
                &w_qkv,
                Some(&b_qkv),
                &o[11],
                cache,
                &pos3,
                rope,
            )?;
            for (i, m) in qmats.iter().enumerate() {
                qgemv_into(&x_glu, m, &o[12 + i])?;
            }
            qgemv_into(&x_rows, &qmats[0], &o[18])?; // Q8_0, 3 rows
            qgemv_into(&x_rows, &qmats[3], &o[19])?; // Q4_K, 3 rows (Hopper: the ring)
            qgemv_into(&x_rows, &qmats[1], &o[20])?; // Q4_0, 3 rows (Hopper: the ring)
            Ok(())
        };
        run(&mut outs, &mut cache).unwrap();
        let mut first: Vec<Vec<u64>> = outs.iter().map(bits).collect();
        first.push(bits(cache.key_storage()));
        first.push(bits(cache.value_storage()));
        run(&mut outs, &mut cache).unwrap();
        let again = |outs: &[Tensor], cache: &KvCache| {
            let mut v: Vec<Vec<u64>> = outs.iter().map(bits).collect();
            v.push(bits(cache.key_storage()));
            v.push(bits(cache.value_storage()));
            v
        };
        assert_eq!(again(&outs, &cache), first, "{dt}: two eager runs differ");
        for o in outs.iter_mut() {
            let poison = if o.dtype() == DType::I32 {
                -1.0
            } else {
                f64::NAN
            };
            ops::copy_into(
                &Tensor::full(o.shape(), poison, o.dtype(), &dev).unwrap(),
                o,
            )
            .unwrap();
        }
        let mut fresh = KvCache::new(2, 16, 64, dt, layout, &dev).unwrap();
        let mut captured = outs.clone();
        let graph = cuda.capture(|| run(&mut captured, &mut fresh)).unwrap();
        for _ in 0..3 {
            graph.launch(cuda.stream()).unwrap();
        }
        assert_eq!(
            again(&outs, &fresh),
            first,
            "{dt}: graph replay differs from eager"
        );
        println!(
            "[gpu] determinism {dt}: sdpa prefill + split-K decode (both KV layouts), rope, kv \
             append, sampling (top-k / top-p, and min-p with a repetition penalty), \
             swiglu gemv, rope_kv_append, pre-norm gemv / swiglu / greedy head / qkv + rope + \
             kv append, quantized gemv (Q8_0, Q4_0, Q4_1, Q4_K; and 3 rows of x) bitwise equal twice and under \
             graph replay"
        );
        all.push(first);
    }
    all
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_batched_serving_ops_are_bitwise_deterministic_and_graph_equals_eager() {
    use gpukit_ops::paged::{PagedBatch, paged_attention_into, paged_kv_write_into};
    let (_rt, cuda) = cuda_device();
    let dev = Device::Cuda(cuda.clone());
    for dt in [DType::F16, DType::BF16] {
        let r = |shape: &[usize], seed| Tensor::rand(shape, -1.0, 1.0, dt, seed, &dev).unwrap();
        // Two sequences of 70 and 20 positions in scattered blocks of 16; the step's 30 rows
        // are the second's last 20 and the first's last 10 (a decode-and-prefill mix).
        let tables: Vec<i32> = vec![9, 2, 7, 0, 4, 5, 1, -1, -1, -1];
        let tables = Tensor::from_slice(&tables, &[2, 5], &dev).unwrap();
        let (mut seq, mut pos, mut slots) = (vec![], vec![], vec![]);
        let blocks = [[9, 2, 7, 0, 4], [5, 1, 0, 0, 0]];
        for (s, range) in [(1usize, 0..20), (0, 60..70)] {
            for p in range {
                seq.push(s as i32);
                pos.push(p as i32);
                slots.push(blocks[s][p / 16] * 16 + (p % 16) as i32);
            }
        }
        let i32s = |v: &[i32]| Tensor::from_slice(v, &[v.len()], &dev).unwrap();
        let (seq, pos, slots) = (i32s(&seq), i32s(&pos), i32s(&slots));
        let (k_cache, v_cache) = (r(&[10, 16, 2, 64], 1), r(&[10, 16, 2, 64], 2));
        let (kn, vn, q) = (r(&[30, 2, 64], 3), r(&[30, 2, 64], 4), r(&[30, 8, 64], 5));
        let (x, w, b) = (r(&[30, 520], 6), r(&[300, 520], 7), r(&[300], 8));
        let x5 = r(&[5, 520], 9);
        let e = |shape: &[usize]| Tensor::empty(shape, dt, &dev).unwrap();
        let outs = [e(&[30, 8, 64]), e(&[30, 300]), e(&[5, 300])];
        let run = |o: &[Tensor]| -> gpukit_ops::Result<()> {
            paged_kv_write_into(&kn, &vn, &k_cache, &v_cache, &slots)?;
            let batch = PagedBatch {
                block_tables: &tables,
                token_seq: &seq,
                token_pos: &pos,
            };
            paged_attention_into(&q, &k_cache, &v_cache, &batch, 0.125, None, &o[0])?;
            ops::linear_batch_invariant_into(&x, &w, Some(&b), &o[1])?;
            ops::linear_batch_invariant_into(&x5, &w, Some(&b), &o[2])
        };
        run(&outs).unwrap();
        let first: Vec<Vec<u64>> = outs.iter().chain([&k_cache, &v_cache]).map(bits).collect();
        run(&outs).unwrap();
        let now = |o: &[Tensor]| -> Vec<Vec<u64>> {
            o.iter().chain([&k_cache, &v_cache]).map(bits).collect()
        };
        assert_eq!(now(&outs), first, "{dt}: two eager runs differ");
        for o in &outs {
            ops::copy_into(&Tensor::full(o.shape(), f64::NAN, dt, &dev).unwrap(), o).unwrap();
        }
        let graph = cuda.capture(|| run(&outs)).unwrap();
        for _ in 0..3 {
            graph.launch(cuda.stream()).unwrap();
        }
        assert_eq!(now(&outs), first, "{dt}: graph replay differs from eager");
        println!(
            "[gpu] determinism {dt}: paged kv write, paged attention (a decode/prefill mix in \
             scattered blocks), the batch-invariant linear (tiled and skinny) bitwise equal twice \
             and under graph replay"
        );
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_convolutions_are_bitwise_deterministic_and_graph_equals_eager() {
    use gpukit_ops::signal::{Conv1d, conv_transpose1d_into, conv1d_into};
    let (_rt, cuda) = cuda_device();
    let dev = Device::Cuda(cuda.clone());
    let r = |shape: &[usize], seed| Tensor::rand(shape, -1.0, 1.0, DType::F32, seed, &dev).unwrap();
    // A dilated residual-block convolution, a depthwise one and HiFi-GAN's ×8 upsampling.
    let (x, w, b) = (r(&[1, 64, 1000], 1), r(&[64, 64, 5], 2), r(&[64], 3));
    let wd = r(&[64, 1, 3], 4);
    let wt = r(&[64, 32, 16], 5);
    let dilated = Conv1d {
        padding: 6,
        dilation: 3,
        ..Conv1d::default()
    };
    let depthwise = Conv1d {
        padding: 9,
        dilation: 9,
        groups: 64,
        ..Conv1d::default()
    };
    let up = Conv1d {
        stride: 8,
        padding: 4,
        ..Conv1d::default()
    };
    let e = |shape: &[usize]| Tensor::empty(shape, DType::F32, &dev).unwrap();
    let outs = [e(&[1, 64, 1000]), e(&[1, 64, 1000]), e(&[1, 32, 8000])];
    let run = |o: &[Tensor]| -> gpukit_ops::Result<()> {
        conv1d_into(&x, &w, Some(&b), &dilated, &o[0])?;
        conv1d_into(&x, &wd, None, &depthwise, &o[1])?;
        conv_transpose1d_into(&x, &wt, None, &up, &o[2])
    };
    run(&outs).unwrap();
    let first: Vec<Vec<u64>> = outs.iter().map(bits).collect();
    run(&outs).unwrap();
    assert_eq!(
        outs.iter().map(bits).collect::<Vec<_>>(),
        first,
        "two eager runs differ"
    );
    for o in &outs {
        ops::copy_into(
            &Tensor::full(o.shape(), f64::NAN, DType::F32, &dev).unwrap(),
            o,
        )
        .unwrap();
    }
    let graph = cuda.capture(|| run(&outs)).unwrap();
    graph.launch(cuda.stream()).unwrap();
    assert_eq!(
        outs.iter().map(bits).collect::<Vec<_>>(),
        first,
        "graph replay differs from eager"
    );
    println!(
        "[gpu] determinism: conv1d (dilated, depthwise) and conv_transpose1d (×8) bitwise equal \
         twice and under graph replay"
    );
}
