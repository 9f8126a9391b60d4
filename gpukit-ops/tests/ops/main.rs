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
        ops::copy_into(&poisoned(t.shape(), dt, dev), &t.clone()).unwrap();
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

mod attention;
mod decode_ops;
mod edge_cases;
mod elementwise;
mod index;
mod matmul;
mod norm;
mod paged;
mod quant;
mod reduce;
mod rope;
mod sampling;
mod signal;
