//! Every op, one test body run on the CPU (always) and on CUDA (`#[ignore]`d without a device;
//! run by `cargo xtask test-gpu` or the GPU bundle). Each compares with an independent f64
//! reference computed here, on fresh random inputs (the seed is printed), with odd shapes and
//! outputs poisoned with NaN first. CUDA runs also compare with the CPU implementation.
//!
//! Tolerances on ‖out − ref‖ / ‖ref‖: f32 1e-5, f16 2e-3, bf16 1e-2 (matmul f32: 1e-5 at full
//! precision).

// Test code: a failed expectation is a test failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Reference loops index several arrays by the same position: clearer as ranges.
#![allow(clippy::needless_range_loop)]

use std::sync::OnceLock;

use gpukit_ops::kv_cache::KvLayout;
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::{BinaryOp, DType, Device, ReduceOp, ScalarOp, Tensor, UnaryOp};
use gpukit_sched::{LanePriority, Runtime};

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| Runtime::with_devices(&[0]).expect("GPU tests need a CUDA device"))
}

fn cuda() -> Device {
    let lane = runtime()
        .device(0)
        .unwrap()
        .default_tenant()
        .lane(LanePriority::Normal)
        .unwrap();
    Device::cuda(&lane).unwrap()
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("seed {s}");
    s
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        _ => 1e-2,
    }
}

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// ‖got − want‖ / ‖want‖ ≤ tol, no NaN unless the reference has one there.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_close_scaled(what, got, want, &[], tol);
}

/// [`assert_close`] for results of sums that may cancel: each element's weight in the norm is
/// the larger of |want| and `scale` (the sum of its terms' magnitudes, which bounds the
/// rounding error of any summation order), so a result near zero is not held to a relative
/// error its inputs cannot give. An empty `scale` is all zeros.
fn assert_close_scaled(what: &str, got: &[f64], want: &[f64], scale: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (mut num, mut den) = (0.0, 0.0);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}: element {i} is {g}, reference NaN");
            continue;
        }
        assert!(
            !g.is_nan(),
            "{what}: element {i} is NaN (unwritten or wrong), reference {w}"
        );
        if w.is_infinite() {
            assert_eq!(g, w, "{what}: element {i}");
            continue;
        }
        num += (g - w) * (g - w);
        den += w.abs().max(scale.get(i).copied().unwrap_or(0.0)).powi(2);
    }
    let rel = if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    };
    assert!(rel <= tol, "{what}: relative error {rel:e} > {tol:e}");
}

/// A NaN-filled output tensor (so unwritten elements cannot pass).
fn poisoned(shape: &[usize], dt: DType, dev: &Device) -> Tensor {
    Tensor::full(shape, f64::NAN, dt, dev).unwrap()
}

/// [`poisoned`] for any dtype: NaN for floats, 123 for integers (the tests' integer inputs stay
/// within [-1, 100)).
fn poisoned_any(shape: &[usize], dt: DType, dev: &Device) -> Tensor {
    let v = if dt.is_float() { f64::NAN } else { 123.0 };
    Tensor::full(shape, v, dt, dev).unwrap()
}

/// A KV cache in `layout` whose storage is NaN-filled (so rows not written stay NaN).
fn poisoned_cache(
    kv_heads: usize,
    max_len: usize,
    head_dim: usize,
    dt: DType,
    layout: KvLayout,
    dev: &Device,
) -> gpukit_ops::kv_cache::KvCache {
    let cache =
        gpukit_ops::kv_cache::KvCache::new(kv_heads, max_len, head_dim, dt, layout, dev).unwrap();
    for t in [cache.key_storage(), cache.value_storage()] {
        ops::copy_into(&poisoned(t.shape(), dt, dev), &mut t.clone()).unwrap();
    }
    cache
}

/// `t` (`[.., keys, head_dim]`, contiguous) with each row stored in `layout`, the key counted
/// from each head's first row: K or V as a KV cache of that layout holds them.
fn in_layout(t: &Tensor, layout: KvLayout) -> Tensor {
    if layout == KvLayout::Linear {
        return t.clone();
    }
    let s = t.shape();
    let (keys, d) = (s[s.len() - 2], s[s.len() - 1]);
    let dev = t.device();
    if matches!(dev, Device::Cuda(_)) {
        // On the device, by the cache's own append kernel (checked against KvLayout::column by
        // kv_cache_and_quantized_gemv): the long cases' K/V are hundreds of MB, too slow to
        // round-trip through the host.
        let heads = t.numel() / (keys * d).max(1);
        let mut cache =
            gpukit_ops::kv_cache::KvCache::new(heads, keys, d, t.dtype(), layout, &dev).unwrap();
        let rows = t
            .reshape(&[heads, keys, d])
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        cache.append(&rows, &rows).unwrap();
        return cache.key_storage().reshape(s).unwrap();
    }
    // The swizzle is its own inverse: linearize also lays rows out in it.
    let y = layout.linearize(t.to_vec_f32().unwrap(), keys, d, t.dtype());
    let host = Tensor::from_slice(&y, s, &Device::Cpu).unwrap();
    ops::to_dtype(&host, t.dtype()).unwrap()
}

/// A RoPE table with base 10 000 and no scaling for `rotary` dims (at least 2, so the cases
/// without RoPE still get one) and its inverse frequencies on `dev`.
fn plain_rope(rotary: usize, dev: &Device) -> (gpukit_ops::rope::RopeTable, Tensor) {
    let table = gpukit_ops::rope::RopeConfig {
        rotary_dim: rotary.max(2),
        base: 10_000.0,
        scaling: gpukit_ops::rope::RopeScaling::None,
    }
    .table(0)
    .unwrap();
    let inv = Tensor::from_slice(&table.inv_freq, &[table.inv_freq.len()], dev).unwrap();
    (table, inv)
}

/// Random input on `dev` and its exact values (after rounding to `dt`).
fn input(
    shape: &[usize],
    dt: DType,
    lo: f64,
    hi: f64,
    seed: u64,
    dev: &Device,
) -> (Tensor, Vec<f64>) {
    let host = Tensor::rand(shape, lo, hi, dt, seed, &Device::Cpu).unwrap();
    let vals = host.to_vec_f64().unwrap();
    (host.to_device(dev).unwrap(), vals)
}

/// On CUDA, the same op on the CPU must agree too.
fn also_cpu(dev: &Device, got: &[f64], cpu: impl FnOnce() -> Vec<f64>, tol: f64, what: &str) {
    also_cpu_scaled(dev, got, cpu, &[], tol, what);
}

/// [`also_cpu`] with [`assert_close_scaled`]'s per-element scale.
fn also_cpu_scaled(
    dev: &Device,
    got: &[f64],
    cpu: impl FnOnce() -> Vec<f64>,
    scale: &[f64],
    tol: f64,
    what: &str,
) {
    if matches!(dev, Device::Cuda(_)) {
        assert_close_scaled(&format!("{what} (CUDA vs CPU op)"), got, &cpu(), scale, tol);
    }
}

/// A write at a device position past the KV cache: refused on the CPU; on CUDA the launch
/// succeeds and the next synchronising call reports it.
fn assert_past_cache_refused(dev: &Device, r: gpukit_ops::Result<()>, what: &str) {
    match dev {
        Device::Cpu => assert!(r.is_err(), "{what}: position past the cache accepted"),
        Device::Cuda(c) => {
            r.unwrap();
            assert!(
                c.synchronize().is_err(),
                "{what}: position past the cache not reported"
            );
        }
    }
}

macro_rules! op_test {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn cpu() {
                ($body)(&Device::Cpu);
            }

            #[test]
            #[ignore = "needs a CUDA device"]
            fn cuda() {
                ($body)(&super::cuda());
            }
        }
    };
}

/// Index of each element of `out_shape` in an operand broadcast to it (row-major).
fn bcast_index(out_shape: &[usize], shape: &[usize], mut i: usize) -> usize {
    let mut idx = 0;
    let mut stride = 1;
    let lead = out_shape.len() - shape.len();
    for d in (0..out_shape.len()).rev() {
        let c = i % out_shape[d];
        i /= out_shape[d];
        if d >= lead {
            let n = shape[d - lead];
            if n != 1 {
                idx += c * stride;
            }
            stride *= n;
        }
    }
    idx
}

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
            ] {
                let mut out = poisoned(&out_shape, dt, dev);
                ops::binary_into(op, &a, &b, &mut out).unwrap();
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
                    0.0,
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
    let mut out = poisoned(&[2, 3], DType::F16, dev);
    let e = ops::binary_into(BinaryOp::Add, &a, &a, &mut out)
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
        let mut host_out = poisoned(&[2, 3], DType::F32, &Device::Cpu);
        let e = ops::binary_into(BinaryOp::Add, &a, &a, &mut host_out)
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
    ];
    let positive = [UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Recip];
    for dt in FLOATS {
        for shape in [vec![1], vec![17, 31], vec![2, 3, 1031]] {
            let (x, xv) = input(&shape, dt, -4.0, 4.0, s, dev);
            let (p, pv) = input(&shape, dt, 0.1, 8.0, s + 7, dev);
            for (ops_list, t, tv) in [(&all[..], &x, &xv), (&positive[..], &p, &pv)] {
                for &op in ops_list {
                    let mut out = poisoned(&shape, dt, dev);
                    ops::unary_into(op, t, &mut out).unwrap();
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
                let mut out = poisoned(&shape, dt, dev);
                ops::scalar_into(op, t, 1.75, &mut out).unwrap();
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
            let mut out = poisoned(&shape, dt, dev);
            ops::clamp_into(&x, -1.0, 0.5, &mut out).unwrap();
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
            let mut out = poisoned(&shape, dt, dev);
            ops::where_into(&cond, &x, &y, &mut out).unwrap();
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
                let mut got = poisoned(&shape, to, dev);
                ops::cast_into(&x, &mut got).unwrap();
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
        let mut out = poisoned(&[9, 37], dt, dev);
        ops::where_into(&cond, &a, &b, &mut out).unwrap();
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
        let mut out = poisoned(&[7, 5], dt, dev);
        ops::clamp_into(&x.transpose(0, 1).unwrap(), -1.0, 0.5, &mut out).unwrap();
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

// Elementwise kernels past one pass of their grid: `launch::elementwise` caps it at 16 blocks
// of 256 threads per multiprocessor (~540k threads on an H100), and the contiguous kernels take
// 16 bytes a thread, so 4.5M elements loop 2–8 times per thread (strided: 8).
op_test!(elementwise_large, |dev: &Device| {
    let s = seed();
    let n = 4_500_007;
    for dt in [DType::F32, DType::BF16] {
        let (a, av) = input(&[n], dt, -3.0, 3.0, s, dev);
        let (b, bv) = input(&[n], dt, 0.5, 3.0, s + 1, dev);
        let mut out = poisoned(&[n], dt, dev);
        ops::binary_into(BinaryOp::Mul, &a, &b, &mut out).unwrap();
        let want: Vec<f64> = (0..n)
            .map(|i| f64::from(av[i] as f32 * bv[i] as f32))
            .collect();
        assert_close(
            &format!("mul {dt} [{n}]"),
            &out.to_vec_f64().unwrap(),
            &want,
            tol(dt),
        );
        let mut out = poisoned(&[n], dt, dev);
        ops::unary_into(UnaryOp::Silu, &a, &mut out).unwrap();
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
        let mut out = poisoned(&[n], dt, dev);
        ops::scalar_into(ScalarOp::Add, &a, 0.5, &mut out).unwrap();
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
        let mut out = poisoned(&[c, r], dt, dev);
        ops::binary_into(BinaryOp::Add, &t, &row, &mut out).unwrap();
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
        let mut into = poisoned_any(&[5, 3, 4], dt, dev);
        ops::copy_into(&p, &mut into).unwrap();
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
        let mut into = poisoned_any(&[3, 6, 5], dt, dev);
        ops::concat_into(&[&x, &y], 1, &mut into).unwrap();
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
                let mut out = poisoned(&out_shape, dt, dev);
                ops::reduce_into(op, &x, axis, &mut out).unwrap();
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
            let mut am = Tensor::full(&out_shape, -1.0, DType::I64, dev).unwrap();
            ops::argmax_into(&x, axis, &mut am).unwrap();
            let got = am.to_vec_f64().unwrap();
            for t in 0..outer * inner {
                let (o, i) = (t / inner, t % inner);
                let best = (0..len).map(|j| at(o, j, i)).fold(f64::MIN, f64::max);
                let first = (0..len).find(|&j| at(o, j, i) == best).unwrap();
                assert_eq!(got[t] as usize, first, "argmax {dt} {shape:?} at {t}");
            }
            for log in [false, true] {
                let mut out = poisoned(&shape, dt, dev);
                ops::softmax_into(&x, axis, log, &mut out).unwrap();
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
                let mut out = poisoned(&[], dt, dev);
                ops::reduce_all_into(op, &x, &mut out).unwrap();
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
            let mut am = Tensor::full(&[], -1.0, DType::I64, dev).unwrap();
            ops::argmax_all_into(&x, &mut am).unwrap();
            let best = xv.iter().copied().fold(f64::MIN, f64::max);
            let first = xv.iter().position(|&v| v == best).unwrap();
            assert_eq!(
                am.to_vec_f64().unwrap(),
                vec![first as f64],
                "argmax_all {dt} {shape:?}"
            );
            for log in [false, true] {
                let mut out = poisoned(&shape, dt, dev);
                ops::softmax_all_into(&x, log, &mut out).unwrap();
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
    let mut strided_out = Tensor::zeros(&[6, 4], DType::F32, dev)
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let e = ops::softmax_all_into(&x, false, &mut strided_out).unwrap_err();
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
            let mut out = poisoned(&[rows, hidden], dt, dev);
            ops::rms_norm_into(&x, &w, eps, &mut out).unwrap();
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
            let (mut o, mut ro) = (
                poisoned(&[rows, hidden], dt, dev),
                poisoned(&[rows, hidden], dt, dev),
            );
            ops::add_rms_norm_into(&x, &r, &w, eps, &mut o, &mut ro).unwrap();
            assert_eq!(ro.to_vec_f64().unwrap(), h, "add_rms_norm residual {dt}");
            assert_close(
                &format!("add_rms_norm {dt}"),
                &o.to_vec_f64().unwrap(),
                &rms(&h),
                tol(dt),
            );

            for bias in [false, true] {
                let mut out = poisoned(&[rows, hidden], dt, dev);
                ops::layer_norm_into(&x, &w, bias.then_some(&b), eps, &mut out).unwrap();
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

op_test!(embedding_and_index_select, |dev: &Device| {
    let s = seed();
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I64] {
        let (vocab, hidden) = (1000, 77);
        let (table, tv) = input(&[vocab, hidden], dt, -1.0, 1.0, s, dev);
        let idv: Vec<i32> = (0..19)
            .map(|i| ((i * 7919 + s as usize) % vocab) as i32)
            .collect();
        let ids = Tensor::from_slice(&idv, &[19], dev).unwrap();
        let mut rows = poisoned_any(&[19, hidden], dt, dev);
        ops::index_select_into(&table, 0, &ids, &mut rows).unwrap();
        let got = rows.to_vec_f64().unwrap();
        assert_eq!(
            got,
            ops::embedding(&table, &ids).unwrap().to_vec_f64().unwrap(),
            "{dt} embedding"
        );
        for (r, &id) in idv.iter().enumerate() {
            assert_eq!(
                &got[r * hidden..][..hidden],
                &tv[id as usize * hidden..][..hidden],
                "{dt} row {r}"
            );
        }
        // Views: rows 5.. of the table (dense, at an offset) and its transpose (strided).
        let tail = table.narrow(0, 5, vocab - 5).unwrap();
        let got = ops::embedding(&tail, &Tensor::from_slice(&[0i32, 7], &[2], dev).unwrap())
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_eq!(
            &got[..hidden],
            &tv[5 * hidden..][..hidden],
            "{dt} offset view"
        );
        assert_eq!(
            &got[hidden..],
            &tv[12 * hidden..][..hidden],
            "{dt} offset view"
        );
        let cols = ops::index_select(
            &table.transpose(0, 1).unwrap(),
            1,
            &Tensor::from_slice(&[3i32], &[1], dev).unwrap(),
        )
        .unwrap()
        .to_vec_f64()
        .unwrap();
        assert_eq!(
            cols,
            tv[3 * hidden..][..hidden].to_vec(),
            "{dt} strided view"
        );
        // index_select along a middle axis with i64 ids.
        let (x, xv) = input(&[3, 10, 4], dt, -1.0, 1.0, s + 1, dev);
        let sel = Tensor::from_slice(&[9i64, 0, 9, 4], &[4], dev).unwrap();
        let mut out = poisoned_any(&[3, 4, 4], dt, dev);
        ops::index_select_into(&x, 1, &sel, &mut out).unwrap();
        let got = out.to_vec_f64().unwrap();
        for o in 0..3 {
            for (j, &id) in [9usize, 0, 9, 4].iter().enumerate() {
                for i in 0..4 {
                    assert_eq!(got[(o * 4 + j) * 4 + i], xv[(o * 10 + id) * 4 + i]);
                }
            }
        }
    }
    // gather along each axis of a 3-d tensor, i32 and i64 indices.
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32] {
        let shape = [3usize, 5, 4];
        let (x, xv) = input(&shape, dt, -1.0, 1.0, s + 5, dev);
        for axis in 0..3 {
            let mut ishape = shape;
            ishape[axis] = 7;
            let n: usize = ishape.iter().product();
            let ids: Vec<i64> = (0..n)
                .map(|t| ((t * 31 + s as usize) % shape[axis]) as i64)
                .collect();
            let index = Tensor::from_slice(&ids, &ishape, dev).unwrap();
            let mut out = poisoned_any(&ishape, dt, dev);
            ops::gather_into(&x, axis, &index, &mut out).unwrap();
            let got = out.to_vec_f64().unwrap();
            for t in 0..n {
                let mut c = [
                    t / (ishape[1] * ishape[2]),
                    (t / ishape[2]) % ishape[1],
                    t % ishape[2],
                ];
                c[axis] = ids[t] as usize;
                assert_eq!(
                    got[t],
                    xv[(c[0] * 5 + c[1]) * 4 + c[2]],
                    "gather {dt} axis {axis} at {t}"
                );
            }
        }
        let i32s = Tensor::from_slice(&[0i32, 4, 2], &[1, 3, 1], dev).unwrap();
        let small = x.narrow(0, 0, 1).unwrap().narrow(2, 0, 1).unwrap();
        let got = ops::gather(&small, 1, &i32s).unwrap().to_vec_f64().unwrap();
        assert_eq!(
            got,
            vec![xv[0], xv[16], xv[8]],
            "gather {dt} through a view"
        );
    }
    let (x, _) = input(&[2, 3], DType::F32, 0.0, 1.0, s, dev);
    let bad_shape = Tensor::from_slice(&[0i64; 4], &[2, 2], dev).unwrap();
    assert!(ops::gather(&x, 0, &bad_shape).is_err());
    let out_of_range = Tensor::from_slice(&[0i64, 1, 2, 3, 0, 1], &[2, 3], dev).unwrap();
    let e = ops::gather(&x, 0, &out_of_range).and_then(|t| t.to_vec_f64());
    assert!(e.unwrap_err().to_string().contains("out of range"));

    // An id out of range is an error, never an out-of-bounds read.
    let (table, _) = input(&[10, 4], DType::F32, -1.0, 1.0, s, dev);
    let bad = Tensor::from_slice(&[3i32, 10], &[2], dev).unwrap();
    let r = ops::embedding(&table, &bad).and_then(|t| t.to_vec_f64());
    let e = r.unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
    // The device is usable afterwards and the error is reported once.
    let ok = Tensor::from_slice(&[1i32], &[1], dev).unwrap();
    assert_eq!(
        ops::embedding(&table, &ok)
            .unwrap()
            .to_vec_f64()
            .unwrap()
            .len(),
        4
    );
});

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
            let mut out = poisoned(&out_shape, dt, dev);
            ops::matmul_into(&a, &b, &mut out).unwrap();
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
            let mut out = poisoned(&[65, 127], dt, dev);
            ops::matmul_into_with(&a, &b, &mut out, gpukit_ops::F32Precision::Tf32).unwrap();
            let tf32 = rel(&out);
            assert!(
                tf32 <= 2e-3,
                "matmul f32 with TF32: relative error {tf32:e}"
            );
            let mut out = poisoned(&[65, 127], dt, dev);
            ops::matmul_into(&a, &b, &mut out).unwrap();
            let full = rel(&out);
            assert!(full <= 1e-5, "matmul f32 full: relative error {full:e}");
            // The plan of a product is built once: the same product again adds none, another
            // shape one.
            if let Device::Cuda(c) = dev {
                let plans = c.gemm_plans();
                assert!(plans >= 2, "{plans} plans after two products");
                ops::matmul_into(&a, &b, &mut out).unwrap();
                assert_eq!(c.gemm_plans(), plans, "the same product planned again");
                let mut narrower = poisoned(&[65, 126], dt, dev);
                ops::matmul_into(&a, &b.narrow(1, 0, 126).unwrap(), &mut narrower).unwrap();
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
                let mut out = poisoned(&[m, n], dt, dev);
                ops::linear_into(&x, &w, bias.then_some(&b), act, &mut out).unwrap();
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
        // One row against matrices above launch::GEMV_RING_MIN_BYTES (the Hopper ring GEMV on
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
                let mut out = poisoned(&[1, n], dt, dev);
                ops::linear_into(&x, &w, bias.then_some(&b), Activation::None, &mut out).unwrap();
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

op_test!(empty_and_scalar_tensors, |dev: &Device| {
    let e = Tensor::zeros(&[0, 5], DType::F32, dev).unwrap();
    assert_eq!(ops::exp(&e).unwrap().numel(), 0);
    assert_eq!(ops::add(&e, &e).unwrap().shape(), &[0, 5]);
    let sc = Tensor::full(&[], 2.0, DType::F32, dev).unwrap();
    assert_eq!(ops::mul(&sc, &sc).unwrap().to_vec_f64().unwrap(), vec![4.0]);
    assert!(Tensor::from_slice(&[1.0f32, 2.0], &[3], dev).is_err());
});

op_test!(rope_and_dequantize, |dev: &Device| {
    use gpukit_ops::quant::{QuantFormat, dequantize, dequantize_tensor, quantize};
    use gpukit_ops::rope::{RopeConfig, RopeLayout, RopeScaling, rope_inplace};
    let s = seed();
    for dt in FLOATS {
        for (rotary, scaling) in [
            (64usize, RopeScaling::None),
            (
                32,
                RopeScaling::Yarn {
                    factor: 4.0,
                    original_max_position: 4096,
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                    attention_factor: None,
                },
            ),
        ] {
            let table = RopeConfig {
                rotary_dim: rotary,
                base: 10_000.0,
                scaling,
            }
            .table(0)
            .unwrap();
            let (tokens, heads, hd) = (5usize, 3usize, 64usize);
            for layout in [RopeLayout::RotateHalf, RopeLayout::AdjacentPairs] {
                let (mut x, xv) = input(&[tokens, heads, hd], dt, -1.0, 1.0, s, dev);
                let pos: Vec<i32> = vec![0, 1, 17, 4095, 100_000];
                let positions = Tensor::from_slice(&pos, &[tokens], dev).unwrap();
                let inv =
                    Tensor::from_slice(&table.inv_freq, &[table.inv_freq.len()], dev).unwrap();
                rope_inplace(&mut x, &positions, &inv, table.attention_scale, layout).unwrap();
                let mut want: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
                let per_row: Vec<usize> = pos
                    .iter()
                    .flat_map(|&p| std::iter::repeat_n(p as usize, heads))
                    .collect();
                table.apply(&mut want, hd, &per_row, layout).unwrap();
                let want: Vec<f64> = want.into_iter().map(f64::from).collect();
                assert_close(
                    &format!("rope {dt} {layout:?} rotary {rotary}"),
                    &x.to_vec_f64().unwrap(),
                    &want,
                    tol(dt),
                );
            }
        }
    }
    let x: Vec<f32> = Tensor::rand(&[32 * 37], -3.0, 3.0, DType::F32, s, &Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    for f in [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1] {
        let q = quantize(f, &x).unwrap();
        let mut want = vec![0f32; x.len()];
        dequantize(f, &q, &mut want).unwrap();
        let qt = Tensor::from_blocks(&q, f, &[37, 32], dev).unwrap();
        let got: Vec<f32> = dequantize_tensor(&qt, DType::F32)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{f:?}: not bit-identical"
        );
        let bf = dequantize_tensor(&qt, DType::BF16)
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_close(
            &format!("dequantize {f:?} to bf16"),
            &bf,
            &want.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            1e-2,
        );
        assert!(Tensor::from_blocks(&q[..q.len() - 1], f, &[37, 32], dev).is_err());
    }
});

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
    // (`launch::qgemv_ring`): rows of 264 blocks in chunks of 136 and 128, and a last tile of 12
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
            let mut out = poisoned(&[1, n], dt, dev);
            qgemv_into(&x, &qm, &mut out).unwrap();
            // The same x at an unaligned address (a view one element in): scalar loads in the
            // one-warp-per-row kernel, bitwise the aligned call's where that kernel took it too
            // (not the ring's: it sums in another order).
            let (x2, _) = input(&[1, k + 1], dt, -1.0, 1.0, s + 1, dev);
            ops::copy_into(&x, &mut x2.narrow(1, 1, k).unwrap()).unwrap();
            let mut out2 = poisoned(&[1, n], dt, dev);
            qgemv_into(&x2.narrow(1, 1, k).unwrap(), &qm, &mut out2).unwrap();
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

/// Whether a quantized GEMV may take the Hopper tensor-core ring (`launch::qgemv_ring`: Q4_0,
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
        let mut out = poisoned(&[m, n], dt, dev);
        qgemv_into(&x, qm, &mut out).unwrap();
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
                let mut one = poisoned(&[1, n], dt, dev);
                qgemv_into(&x.narrow(0, r, 1).unwrap(), qm, &mut one).unwrap();
                assert_eq!(
                    one.to_vec_f64().unwrap(),
                    got[r * n..][..n],
                    "{what}: row {r} differs from a one-row call"
                );
            }
        }
    }
    let (x9, _) = input(&[9, k], dt, -1.0, 1.0, s, dev);
    let mut out9 = poisoned(&[9, n], dt, dev);
    let e = qgemv_into(&x9, qm, &mut out9).unwrap_err().to_string();
    assert!(e.contains("qgemv") && e.contains("[9, "), "{e}");
}

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
            let mut view = buffer.narrow(3, 0, d).unwrap();
            ops::copy_into(&in_layout(t, KvLayout::Swizzled), &mut view).unwrap();
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

op_test!(
    sampling_on_the_device_matches_the_reference,
    |dev: &Device| {
        use gpukit_ops::sampling::{SamplingParams, sample_tokens_into, sampler_workspace_len};
        let s = seed();
        let greedy = SamplingParams::default();
        let t = SamplingParams {
            temperature: 0.8,
            seed: s,
            ..Default::default()
        };
        let configs = [
            greedy.clone(),
            SamplingParams {
                repetition_penalty: 1.3,
                ..greedy
            },
            t.clone(),
            SamplingParams {
                top_k: 40,
                ..t.clone()
            },
            SamplingParams {
                top_p: 0.9,
                ..t.clone()
            },
            SamplingParams {
                min_p: 0.05,
                repetition_penalty: 1.3,
                ..t.clone()
            },
            SamplingParams {
                top_k: 50,
                top_p: 0.95,
                min_p: 0.02,
                repetition_penalty: 1.2,
                temperature: 1.1,
                seed: s ^ 7,
            },
            // Peaked distributions: few candidates on the device's list.
            SamplingParams {
                temperature: 0.1,
                top_p: 0.5,
                ..t.clone()
            },
            SamplingParams {
                temperature: 0.1,
                top_p: 0.99,
                min_p: 0.1,
                ..t.clone()
            },
            // With the floored logits below, a cut through thousands of ties.
            SamplingParams {
                temperature: 1.0,
                top_k: 10,
                ..t.clone()
            },
        ];
        // On CUDA the vocabularies span one chunk of 1024 ids (5, 1000) to 126, none a whole
        // number of chunks; the floored logits put thousands of ties in the radix select's bins.
        let rows = 3;
        let sizes: &[usize] = if matches!(dev, Device::Cuda(_)) {
            &[5, 1000, 49_159, 128_257]
        } else {
            &[5, 1000]
        };
        let ws_for = |d: &Device, vocab: usize| {
            Tensor::empty(&[sampler_workspace_len(rows, vocab)], DType::U8, d).unwrap()
        };
        let mut n = 0;
        for &vocab in sizes {
            for (dt, floored) in [
                (DType::F32, false),
                (DType::F16, false),
                (DType::BF16, false),
                (DType::F32, true),
            ] {
                let (mut logits, vals) =
                    input(&[rows, vocab], dt, -4.0, 4.0, s + vocab as u64, dev);
                if floored {
                    let f: Vec<f32> = vals.iter().map(|&x| x.floor() as f32).collect();
                    logits = Tensor::from_slice(&f, &[rows, vocab], dev).unwrap();
                }
                let ids: Vec<i32> = (0..rows * 6).map(|i| ((i * 37) % vocab) as i32).collect();
                let mut ids = ids;
                ids[1] = -1; // an empty slot
                let recent = Tensor::from_slice(&ids, &[rows, 6], dev).unwrap();
                let cpu_logits = logits.to_device(&Device::Cpu).unwrap();
                let cpu_recent = recent.to_device(&Device::Cpu).unwrap();
                let (ws, cpu_ws) = (ws_for(dev, vocab), ws_for(&Device::Cpu, 0));
                for p in &configs {
                    for step in [0i64, 1, 17, 1 << 33] {
                        let st = Tensor::from_slice(&[step], &[1], dev).unwrap();
                        let out = Tensor::full(&[rows], -7.0, DType::I32, dev).unwrap();
                        sample_tokens_into(&logits, Some(&recent), p, &st, &ws, &out).unwrap();
                        let got = out.to_vec::<i32>().unwrap();
                        let want = Tensor::full(&[rows], -7.0, DType::I32, &Device::Cpu).unwrap();
                        let cst = Tensor::from_slice(&[step], &[1], &Device::Cpu).unwrap();
                        sample_tokens_into(&cpu_logits, Some(&cpu_recent), p, &cst, &cpu_ws, &want)
                            .unwrap();
                        assert_eq!(
                            got,
                            want.to_vec::<i32>().unwrap(),
                            "vocab {vocab} {dt} floored {floored} step {step} {p:?}"
                        );
                        assert!(got.iter().all(|&i| i >= 0 && (i as usize) < vocab));
                        n += 1;
                    }
                }
            }
        }
        // NaN counts as the maximum (like torch.argmax): greedy picks the first NaN of a row,
        // with and without a penalty, whatever the vocabulary's size (the CUDA sampler merges
        // per-thread and per-warp maxima in a different order from the CPU's scan).
        for &vocab in sizes {
            let mut v: Vec<f32> = (0..rows * vocab)
                .map(|i| ((i * 7919) % 1000) as f32 / 100.0)
                .collect();
            let nans = [
                (0, 0),
                (0, vocab - 1),
                (1, vocab - 1),
                (1, vocab / 2),
                (2, vocab / 3),
            ];
            for (r, c) in nans {
                v[r * vocab + c] = f32::NAN;
            }
            let want = vec![0, (vocab / 2) as i32, (vocab / 3) as i32];
            for dt in [DType::F32, DType::BF16] {
                let logits =
                    ops::to_dtype(&Tensor::from_slice(&v, &[rows, vocab], dev).unwrap(), dt)
                        .unwrap();
                let cpu_logits = logits.to_device(&Device::Cpu).unwrap();
                let recent = Tensor::from_slice(&[0i32, 1, 2], &[rows, 1], dev).unwrap();
                let cpu_recent = recent.to_device(&Device::Cpu).unwrap();
                for p in [&configs[0], &configs[1]] {
                    let st = Tensor::from_slice(&[3i64], &[1], dev).unwrap();
                    let out = Tensor::full(&[rows], -7.0, DType::I32, dev).unwrap();
                    let ws = ws_for(dev, vocab);
                    sample_tokens_into(&logits, Some(&recent), p, &st, &ws, &out).unwrap();
                    let cst = Tensor::from_slice(&[3i64], &[1], &Device::Cpu).unwrap();
                    let cpu = Tensor::full(&[rows], -7.0, DType::I32, &Device::Cpu).unwrap();
                    let cpu_ws = ws_for(&Device::Cpu, 0);
                    sample_tokens_into(&cpu_logits, Some(&cpu_recent), p, &cst, &cpu_ws, &cpu)
                        .unwrap();
                    let what = format!("NaN logits, vocab {vocab} {dt} {p:?}");
                    assert_eq!(out.to_vec::<i32>().unwrap(), want, "{what}");
                    assert_eq!(cpu.to_vec::<i32>().unwrap(), want, "{what}: CPU");
                }
            }
        }
        // At a temperature above 0, NaN and −∞ logits weigh nothing, and a row where nothing
        // weighs draws id 0: row 0 all −∞, row 1 NaN but for id vocab − 2, row 2 −∞ but for
        // ids 1 and vocab − 1 (equal, so top-k 1 keeps both).
        for &vocab in sizes {
            let mut v = vec![f32::NEG_INFINITY; rows * vocab];
            v[vocab..2 * vocab].fill(f32::NAN);
            v[vocab + vocab - 2] = 1.5;
            v[2 * vocab + 1] = 0.25;
            v[2 * vocab + vocab - 1] = 0.25;
            let logits = Tensor::from_slice(&v, &[rows, vocab], dev).unwrap();
            let cpu_logits = logits.to_device(&Device::Cpu).unwrap();
            let (ws, cpu_ws) = (ws_for(dev, vocab), ws_for(&Device::Cpu, 0));
            for p in [&configs[2], &configs[3], &configs[4], &configs[5]] {
                let p = SamplingParams {
                    top_k: p.top_k.min(1),
                    ..p.clone()
                };
                for step in [0i64, 5] {
                    let st = Tensor::from_slice(&[step], &[1], dev).unwrap();
                    let out = Tensor::full(&[rows], -7.0, DType::I32, dev).unwrap();
                    sample_tokens_into(&logits, None, &p, &st, &ws, &out).unwrap();
                    let cst = Tensor::from_slice(&[step], &[1], &Device::Cpu).unwrap();
                    let cpu = Tensor::full(&[rows], -7.0, DType::I32, &Device::Cpu).unwrap();
                    sample_tokens_into(&cpu_logits, None, &p, &cst, &cpu_ws, &cpu).unwrap();
                    let got = out.to_vec::<i32>().unwrap();
                    let what = format!("NaN / −∞ logits, vocab {vocab} step {step} {p:?}");
                    assert_eq!(got, cpu.to_vec::<i32>().unwrap(), "{what}");
                    assert_eq!(got[..2], [0, (vocab - 2) as i32], "{what}");
                    assert!(
                        got[2] == 1 || got[2] == (vocab - 1) as i32,
                        "{what}: {got:?}"
                    );
                }
            }
        }
        // The draws follow the softmax: chi-square over 8000 steps of a 4-token vocabulary
        // (3 degrees of freedom). The bound is p = 1e-6 (30.66): the seed is fresh each run, and
        // at p = 0.001 (16.27, with 2000 steps) a correct sampler failed one run in a thousand
        // (session 29 hit 19.3 on the CPU; the same seed replayed in Python gives the same
        // counts, and 150 other seeds averaged 2.8, as chi-square(3) should). Four times the
        // steps keep the test as sensitive to a biased draw.
        let lg = [0.0f32, 1.0, 2.0, 0.5];
        let logits = Tensor::from_slice(&lg, &[1, 4], dev).unwrap();
        let p = SamplingParams {
            temperature: 1.0,
            seed: s,
            ..Default::default()
        };
        let out = Tensor::zeros(&[1], DType::I32, dev).unwrap();
        let ws = ws_for(dev, 4);
        let mut counts = [0f64; 4];
        let draws = 8000;
        for step in 0..draws {
            let st = Tensor::from_slice(&[step as i64], &[1], dev).unwrap();
            sample_tokens_into(&logits, None, &p, &st, &ws, &out).unwrap();
            counts[out.to_vec::<i32>().unwrap()[0] as usize] += 1.0;
        }
        let z: f64 = lg.iter().map(|&l| f64::from(l).exp()).sum();
        let chi2: f64 = lg
            .iter()
            .zip(&counts)
            .map(|(&l, &c)| {
                let e = f64::from(l).exp() / z * f64::from(draws);
                (c - e) * (c - e) / e
            })
            .sum();
        assert!(chi2 < 30.66, "chi-square {chi2} for counts {counts:?}");
        println!(
            "[{}] sampling: {n} draws equal to the reference; chi-square {chi2:.2}",
            dev.describe()
        );
        // Errors: a bad parameter, a wrong step dtype.
        let st = Tensor::from_slice(&[0i64], &[1], dev).unwrap();
        let bad = SamplingParams {
            top_p: 1.5,
            ..p.clone()
        };
        assert!(sample_tokens_into(&logits, None, &bad, &st, &ws, &out).is_err());
        let st32 = Tensor::from_slice(&[0i32], &[1], dev).unwrap();
        assert!(sample_tokens_into(&logits, None, &p, &st32, &ws, &out).is_err());
        if matches!(dev, Device::Cuda(_)) {
            // A workspace one byte short, or of another dtype, is refused before any launch.
            let short = Tensor::empty(&[sampler_workspace_len(1, 4) - 1], DType::U8, dev).unwrap();
            assert!(sample_tokens_into(&logits, None, &p, &st, &short, &out).is_err());
            let f32_ws = Tensor::empty(&[sampler_workspace_len(1, 4)], DType::F32, dev).unwrap();
            assert!(sample_tokens_into(&logits, None, &p, &st, &f32_ws, &out).is_err());
            // A view 8 bytes in is long enough but not 16-byte aligned; 16 bytes in, it works.
            let big = Tensor::empty(&[sampler_workspace_len(1, 4) + 16], DType::U8, dev).unwrap();
            let at = |o: usize| big.narrow(0, o, sampler_workspace_len(1, 4)).unwrap();
            assert!(sample_tokens_into(&logits, None, &p, &st, &at(8), &out).is_err());
            sample_tokens_into(&logits, None, &p, &st, &at(16), &out).unwrap();
            // No rows: nothing to draw, nothing launched.
            let none = Tensor::zeros(&[0, 4], DType::F32, dev).unwrap();
            let no_out = Tensor::zeros(&[0], DType::I32, dev).unwrap();
            sample_tokens_into(&none, None, &p, &st, &ws, &no_out).unwrap();
        }
    }
);

op_test!(quants_match_gguf_py, |dev: &Device| {
    use gpukit_ops::quant::{
        QuantFormat, dequantize, dequantize_tensor, qgemv_into, random_blocks,
    };
    // Blocks and values from gguf-py (tests/fixtures/make_ggml_quants.py keeps the script):
    // every format, dequantized on the CPU and on `dev`.
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/ggml_quants.json")).unwrap();
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
                let mut out = poisoned(&[1, n], dt, dev);
                qgemv_into(&x, &qm, &mut out).unwrap();
                // The same x one element into a buffer: scalar loads, the same sums (where the
                // aligned call did not take the ring, which sums in another order).
                let (x2, _) = input(&[1, k + 1], dt, -1.0, 1.0, s + 4, dev);
                ops::copy_into(&x, &mut x2.narrow(1, 1, k).unwrap()).unwrap();
                let mut out2 = poisoned(&[1, n], dt, dev);
                qgemv_into(&x2.narrow(1, 1, k).unwrap(), &qm, &mut out2).unwrap();
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
        let mut bf = poisoned(&[n, k], DType::BF16, dev);
        ops::cast_into(&q, &mut bf).unwrap();
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
        let mut all = poisoned(&[2, n], DType::BF16, dev);
        qgemv_into(&x, &q, &mut all).unwrap();
        let mut part = poisoned(&[2, 20], DType::BF16, dev);
        qgemv_into(&x, &rows, &mut part).unwrap();
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
        let mut q3r = q3.reshape(&[1, 3, 32]).unwrap();
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
                    &mut q3r,
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
                    &mut poisoned(&[2, n], DType::F32, dev),
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
        let mut o = poisoned(&[2, n], DType::BF16, dev);
        let dense = Tensor::rand(&[n, k], -1.0, 1.0, DType::BF16, s, dev).unwrap();
        assert!(qgemv_into(&x, &dense, &mut o).is_err());
        let flat = q.reshape(&[n * k]).unwrap();
        assert!(qgemv_into(&x, &flat, &mut o).is_err());
    }
    // A view of rows that starts off a 4-byte boundary (Q4_0 rows of one 18-byte block): the
    // CPU takes it; CUDA refuses it (its loads need 4-byte alignment) instead of misreading.
    let bytes = quantize(QuantFormat::Q4_0, &wv[..4 * 32]).unwrap();
    let q = Tensor::from_blocks(&bytes, QuantFormat::Q4_0, &[4, 32], dev).unwrap();
    let x = Tensor::ones(&[1, 32], DType::F32, dev).unwrap();
    let mut o = poisoned(&[1, 3], DType::F32, dev);
    let r = qgemv_into(&x, &q.narrow(0, 1, 3).unwrap(), &mut o);
    match dev {
        Device::Cpu => r.unwrap(),
        Device::Cuda(_) => assert!(r.unwrap_err().to_string().contains("aligned")),
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
                ops::copy_into(&filled, &mut c.narrow(2, 0, keys).unwrap()).unwrap();
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
            let mut out = poisoned(&[m, n], dt, dev);
            ops::linear_swiglu_into(&x, &w, &mut out).unwrap();
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
                    let mut o = poisoned(&[m, n], dt, &Device::Cpu);
                    ops::linear_swiglu_into(&xc, &wc, &mut o).unwrap();
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
            let mut q_out = poisoned(&[tokens, nq, hd], dt, dev);
            let position = Tensor::from_slice(&[pos], &[1], dev).unwrap();
            rope_kv_append(&qkv, &mut q_out, &mut cache, &position, rope, qk_norm).unwrap();
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
                    let mut q = poisoned(&[tokens, nq, hd], dt, &Device::Cpu);
                    let position = c(&position);
                    let rope = (rotary > 0).then_some((&inv, table.attention_scale, layout));
                    let qk_norm = norm.then_some((&qw, &kw, eps));
                    rope_kv_append(&qkv, &mut q, &mut cache, &position, rope, qk_norm).unwrap();
                    q.to_vec_f64().unwrap()
                },
                tol(dt),
                &what,
            );
            // A position past the cache writes nothing and is an error.
            let past = Tensor::from_slice(&[(max_len - tokens + 1) as i32], &[1], dev).unwrap();
            let r = rope_kv_append(&qkv, &mut q_out, &mut cache, &past, rope, qk_norm);
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
                let mut out = poisoned(&[1, n], dt, dev);
                ops::rms_norm_linear_into(&x, &w1, Some(&b1), &mut out).unwrap();
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
                let mut act = poisoned(&[1, n], dt, dev);
                ops::rms_norm_swiglu_into(&x, &w, &mut act).unwrap();
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
                let mut logits = poisoned(&[1, n], dt, dev);
                ops::rms_norm_linear_greedy_into(&x, &w1, &mut logits, &ws, &token).unwrap();
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
            let mut logits = poisoned(&[1, n], dt, dev);
            ops::rms_norm_linear_greedy_into(&x, &w, &mut logits, &ws, &token).unwrap();
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
        let mut out = poisoned(&[1, 3], dt, dev);
        // 7 elements are 14 or 28 bytes: never a multiple of 16.
        assert_eq!(
            ops::rms_norm_linear_into(&x, &w, None, &mut out).is_err(),
            cuda
        );
        let mut wrong = poisoned(&[1, 4], dt, dev);
        assert!(ops::rms_norm_linear_into(&x, &w, None, &mut wrong).is_err());
        let short = Tensor::ones(&[6], dt, dev).unwrap();
        let bad = PreNorm {
            weight: &short,
            ..x
        };
        assert!(ops::rms_norm_linear_into(&bad, &w, None, &mut out).is_err());
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
            let mut q_f = poisoned(&[1, nq, hd], dt, dev);
            ops::rms_norm_linear_rope_kv_into(
                &x,
                &w,
                bias,
                &mut q_f,
                &mut cache_f,
                &position,
                rope,
            )
            .unwrap();
            // Separate.
            let sum_s = poisoned(&[1, k], dt, dev);
            let x = PreNorm {
                pending: pending.then_some((&y, &sum_s)),
                ..x
            };
            let mut qkv = poisoned(&[1, n], dt, dev);
            ops::rms_norm_linear_into(&x, &w, bias, &mut qkv).unwrap();
            let mut cache_s = nan_cache(dev);
            let mut q_s = poisoned(&[1, nq, hd], dt, dev);
            rope_kv_append(&qkv, &mut q_s, &mut cache_s, &position, rope, None).unwrap();
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
                    let mut q = poisoned(&[1, nq, hd], dt, &Device::Cpu);
                    let rope = (rotary > 0).then_some((&inv, table.attention_scale, layout));
                    let position = cpu(&position);
                    ops::rms_norm_linear_rope_kv_into(
                        &x,
                        &w,
                        bias.as_ref(),
                        &mut q,
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
            let r = ops::rms_norm_linear_rope_kv_into(
                &x,
                &w,
                bias,
                &mut q_f,
                &mut cache_p,
                &past,
                rope,
            );
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
                    &mut q_f,
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
                &mut poisoned(&[1, 1, 512], dt, dev),
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
            let mut out = poisoned(&[3, 4], dt, dev);
            ops::linear_into(&x, &w, bias, act, &mut out).unwrap();
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
        let mut x = Tensor::from_slice(&xv, &[tokens, heads, hd], dev).unwrap();
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
            let r = rope_inplace(&mut x, p, f, 1.0, RopeLayout::RotateHalf);
            assert!(
                matches!(r, Err(gpukit_ops::Error::Shape { .. })),
                "rope with broadcast {what}: {r:?}"
            );
        }
        assert_eq!(x.to_vec::<f32>().unwrap(), xv, "a refused rope changed x");
        // rope_kv_append: broadcast inv_freq or q/k norm weights.
        let (nq, nkv) = (2usize, 1usize);
        let qkv = Tensor::zeros(&[1, (nq + 2 * nkv) * hd], DType::F32, dev).unwrap();
        let mut q_out = Tensor::zeros(&[1, nq, hd], DType::F32, dev).unwrap();
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
            let r = rope_kv_append(&qkv, &mut q_out, &mut cache, pos, rope, norm);
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
        rope_kv_append(&qkv, &mut q_out, &mut cache, &bposition, rope, None).unwrap();
        // A quantized tensor's rows hold at least one block (no zero-column quantized matrix
        // reaches the GEMV); a cache's positions fit an i32 (refused before any allocation).
        let q8 = gpukit_ops::DType::Quant(QuantFormat::Q8_0);
        assert!(Tensor::from_blocks(&[], QuantFormat::Q8_0, &[4, 0], dev).is_err());
        assert!(Tensor::empty(&[4, 0], q8, dev).is_err());
        assert!(Tensor::empty(&[0], q8, dev).is_err());
        let rows0 = Tensor::from_blocks(&[], QuantFormat::Q8_0, &[0, 32], dev).unwrap();
        let x0 = Tensor::zeros(&[1, 32], DType::F32, dev).unwrap();
        let mut y0 = Tensor::zeros(&[1, 0], DType::F32, dev).unwrap();
        qgemv_into(&x0, &rows0, &mut y0).unwrap();
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
