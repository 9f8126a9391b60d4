//! Matrix products: `matmul` (batched) and `linear` (`x · Wᵀ + b`, weights stored `[n, k]`).
//!
//! CUDA: cuBLASLt through the lane's [`GemmProvider`](gpukit_kernels::GemmProvider), except
//! `linear` with at most [`GEMV_MAX_M`] rows and no activation, which uses gpukit's own GEMV
//! kernel (the decode path: memory-bound, one pass over the weights). The CPU reference uses the
//! `gemm` crate in f32 (f16/bf16 operands converted, result rounded once).

use gpukit_driver::KernelArgs;
use gpukit_kernels::gemv::{self, GemvKernel};
use gpukit_kernels::linear::{
    LinearKernel, plan as linear_plan, reduce_grid as linear_reduce_grid, tiled_fits,
};
use gpukit_kernels::shared::{BLOCK_THREADS, QGEMV_MAX_ROWS};
use gpukit_kernels::{BLayout, DType, Epilogue, F32Precision, GemmShape};
use rayon::prelude::*;

use super::{
    check_out, dptr, float_only, need_contiguous, new_output, same_device, u32_dim,
    workspace_or_new, write_host,
};
use crate::device::Device;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Rows up to which `linear` uses the GEMV kernel on CUDA.
pub use gpukit_kernels::shared::GEMV_MAX_M;

/// An activation fused into `linear`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Activation {
    /// None.
    #[default]
    None,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation.
    GeluTanh,
}

struct Dims {
    out: Vec<usize>,
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    shared_b: bool,
}

fn matmul_dims(a: &Tensor, b: &Tensor) -> Result<Dims> {
    let (ra, rb) = (a.rank(), b.rank());
    let bad = || {
        Error::shape(
            "matmul",
            format!(
                "{:?} · {:?}: needs a [.., m, k] and b [k, n] or [.., k, n] with a's batch dims",
                a.shape(),
                b.shape()
            ),
        )
    };
    if ra < 2 || rb < 2 {
        return Err(bad());
    }
    let (m, k) = (a.shape()[ra - 2], a.shape()[ra - 1]);
    let (kb, n) = (b.shape()[rb - 2], b.shape()[rb - 1]);
    let shared_b = rb == 2;
    if kb != k || (!shared_b && (rb != ra || a.shape()[..ra - 2] != b.shape()[..rb - 2])) {
        return Err(bad());
    }
    let mut out = a.shape()[..ra - 2].to_vec();
    out.extend([m, n]);
    Ok(Dims {
        batch: a.shape()[..ra - 2].iter().product(),
        out,
        m,
        k,
        n,
        shared_b,
    })
}

/// The f32 elements of a host buffer.
fn f32_slice(d: &crate::HostData) -> Result<&[f32]> {
    match d {
        crate::HostData::F32(v) => Ok(v),
        _ => Err(Error::shape("cpu", "expected f32 data")),
    }
}

/// Row-major `c[m, n] = a[m, k] · b` on the CPU, `b` `[k, n]` (or `[n, k]` with `b_nk`).
pub(crate) fn cpu_gemm(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
    b_nk: bool,
) {
    let b_strides = if b_nk { (1, k) } else { (n, 1) };
    cpu_gemm_strided(a, b, b_strides, c, (m, k, n), gemm::Parallelism::Rayon(0));
}

/// Row-major `c[m, n] = a[m, k] · b` on the CPU with b's element (row, col) at
/// `b[row·rs + col·cs]` for `b_strides` = (rs, cs), on `parallelism`'s threads.
pub(crate) fn cpu_gemm_strided(
    a: &[f32],
    b: &[f32],
    b_strides: (usize, usize),
    c: &mut [f32],
    (m, k, n): (usize, usize, usize),
    parallelism: gemm::Parallelism,
) {
    assert!(c.len() >= m * n, "cpu_gemm: c too short");
    // SAFETY: c holds m·n row-major values (checked above) and is exclusively borrowed.
    unsafe { cpu_gemm_into(a, b, b_strides, c.as_mut_ptr(), n, (m, k, n), parallelism) }
}

/// [`cpu_gemm_strided`] into `c` with rows `c_rs` apart (`c[i·c_rs + j]`): the rows of a block
/// of a larger matrix, which parallel callers fill block by block. The product overwrites c
/// (c's old values are not read).
///
/// # Safety
/// `c` must be valid for writes at `i·c_rs + j` for every i < m, j < n, and nothing else may
/// read or write those elements during the call.
pub(crate) unsafe fn cpu_gemm_into(
    a: &[f32],
    b: &[f32],
    b_strides: (usize, usize),
    c: *mut f32,
    c_rs: usize,
    (m, k, n): (usize, usize, usize),
    parallelism: gemm::Parallelism,
) {
    let (b_rs, b_cs) = b_strides;
    assert!(a.len() >= m * k, "cpu_gemm: a too short");
    assert!(
        k == 0 || n == 0 || b.len() > (k - 1) * b_rs + (n - 1) * b_cs,
        "cpu_gemm: b too short for its strides"
    );
    // SAFETY: a holds m·k row-major values and b reaches its last element (checked above); c's
    // elements are the caller's to write (this function's contract).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            c_rs as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `out = a · b` (batched over a's leading dimensions; `b` either `[k, n]` shared by every batch
/// or with a's batch dimensions), f32 accumulation. f32 operands use full f32 precision unless
/// `precision` asks for TF32.
///
/// # Errors
/// [`Error::Shape`] for incompatible shapes; dtype/device errors; cuBLASLt errors.
pub fn matmul_into_with(
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    precision: F32Precision,
) -> Result<()> {
    let dev = same_device("matmul", &[a, b])?;
    float_only("matmul", a)?;
    super::same_dtype("matmul", a, b)?;
    let d = matmul_dims(a, b)?;
    check_out("matmul", out, &d.out, a.dtype(), &dev, &[a, b])?;
    if out.numel() == 0 {
        return Ok(());
    }
    if d.k == 0 {
        return super::copy_into(&Tensor::zeros(&d.out, a.dtype(), &dev)?, out);
    }
    match &dev {
        Device::Cpu => {
            let (av, bv) = (a.to_vec_f32()?, b.to_vec_f32()?);
            let mut c = vec![0f32; d.batch * d.m * d.n];
            for i in 0..d.batch {
                let bi = if d.shared_b { 0 } else { i };
                cpu_gemm(
                    &av[i * d.m * d.k..][..d.m * d.k],
                    &bv[bi * d.k * d.n..][..d.k * d.n],
                    &mut c[i * d.m * d.n..][..d.m * d.n],
                    d.m,
                    d.k,
                    d.n,
                    false,
                );
            }
            write_host(out, c.into_iter().map(f64::from))
        }
        Device::Cuda(c) => {
            let (a, b) = (a.contiguous()?, b.contiguous()?);
            need_contiguous("matmul", out, "the output")?;
            // A shared B folds the batch into the rows: one larger product.
            let (m, batch) = if d.shared_b {
                (d.m * d.batch, 1)
            } else {
                (d.m, d.batch)
            };
            let shape = GemmShape {
                m,
                n: d.n,
                k: d.k,
                batch,
                b_layout: BLayout::KN,
                shared_b: false,
            };
            let gemm = c.gemm()?;
            // SAFETY: a, b and out are contiguous device tensors of the sizes `shape` implies,
            // on the lane whose stream the provider uses.
            unsafe {
                gemm.matmul(
                    dptr(&a)?,
                    dptr(&b)?,
                    dptr(out)?,
                    None,
                    shape,
                    a.dtype(),
                    Epilogue::None,
                    precision,
                )
            }?;
            Ok(())
        }
    }
}

/// `out = a · b` at full f32 precision.
///
/// # Errors
/// As [`matmul_into_with`].
pub fn matmul_into(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    matmul_into_with(a, b, out, F32Precision::Full)
}

/// `a · b`, allocated, full f32 precision.
///
/// # Errors
/// As [`matmul_into_with`].
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let d = matmul_dims(a, b)?;
    let out = new_output("matmul", &d.out, a, &same_device("matmul", &[a, b])?)?;
    matmul_into(a, b, &out)?;
    Ok(out)
}

fn linear_shape(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
) -> Result<(Vec<usize>, usize, usize, usize)> {
    let k = *x
        .shape()
        .last()
        .ok_or_else(|| Error::shape("linear", "x must have at least one dimension"))?;
    if w.rank() != 2 || w.shape()[1] != k {
        return Err(Error::shape(
            "linear",
            format!(
                "weight {:?} must be [n, {k}] for x {:?}",
                w.shape(),
                x.shape()
            ),
        ));
    }
    let n = w.shape()[0];
    if let Some(b) = bias
        && b.shape() != [n]
    {
        return Err(Error::shape(
            "linear",
            format!("bias {:?} must be [{n}]", b.shape()),
        ));
    }
    let mut out = x.shape().to_vec();
    if let Some(last) = out.last_mut() {
        *last = n;
    }
    let m = x.shape()[..x.rank() - 1].iter().product();
    Ok((out, m, k, n))
}

/// `out = act(x · Wᵀ + bias)`: `x [.., k]`, `w [n, k]` (a linear layer's weight), `bias [n]`.
/// On CUDA, at most [`GEMV_MAX_M`] rows without activation run gpukit's GEMV kernel; the rest
/// cuBLASLt with a fused bias/activation epilogue.
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes; dtype/device errors; cuBLASLt errors.
pub fn linear_into(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    act: Activation,
    out: &Tensor,
) -> Result<()> {
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    let dev = same_device("linear", &inputs)?;
    float_only("linear", x)?;
    for t in &inputs[1..] {
        super::same_dtype("linear", x, t)?;
    }
    let (shape, m, k, n) = linear_shape(x, w, bias)?;
    check_out("linear", out, &shape, x.dtype(), &dev, &inputs)?;
    if out.numel() == 0 {
        return Ok(());
    }
    if k == 0 {
        // An empty sum is one zero term: the same bias and activation paths give act(bias).
        let mut ones_k = x.shape().to_vec();
        if let Some(last) = ones_k.last_mut() {
            *last = 1;
        }
        let xz = Tensor::zeros(&ones_k, x.dtype(), &dev)?;
        let wz = Tensor::zeros(&[n, 1], x.dtype(), &dev)?;
        return linear_into(&xz, &wz, bias, act, out);
    }
    match &dev {
        Device::Cpu => {
            let bv = bias.map(Tensor::to_vec_f32).transpose()?;
            let epilogue = |i: usize, v: f32| -> f64 {
                let y = f64::from(v) + bv.as_ref().map_or(0.0, |b| f64::from(b[i % n]));
                match act {
                    Activation::None => y,
                    Activation::Relu => y.max(0.0),
                    Activation::GeluTanh => {
                        let u = (2.0 / std::f64::consts::PI).sqrt() * (y + 0.044715 * y * y * y);
                        0.5 * y * (1.0 + u.tanh())
                    }
                }
            };
            // Dense f32 operands: straight from and into the host buffers (no copies of the
            // weights: this is the CPU decode path). Otherwise through f32 copies.
            let dense = |t: &Tensor| t.dtype() == DType::F32 && t.is_contiguous();
            if dense(x) && dense(w) && dense(out) {
                let (xg, wg) = (x.host("cpu")?, w.host("cpu")?);
                let (xs, ws) = (
                    &f32_slice(&xg)?[x.layout().offset()..][..m * k],
                    &f32_slice(&wg)?[w.layout().offset()..][..n * k],
                );
                let offset = out.layout().offset();
                let mut og = out.host_mut("cpu")?;
                let crate::HostData::F32(ov) = &mut *og else {
                    return Err(Error::shape("cpu", "expected an f32 output"));
                };
                let os = &mut ov[offset..][..m * n];
                cpu_gemm(xs, ws, os, m, k, n, true);
                if bias.is_some() || act != Activation::None {
                    for (i, o) in os.iter_mut().enumerate() {
                        *o = epilogue(i, *o) as f32;
                    }
                }
                return Ok(());
            }
            let (xv, wv) = (x.to_vec_f32()?, w.to_vec_f32()?);
            let mut c = vec![0f32; m * n];
            cpu_gemm(&xv, &wv, &mut c, m, k, n, true);
            let vals = c.iter().enumerate().map(|(i, &v)| epilogue(i, v));
            write_host(out, vals.collect::<Vec<_>>())
        }
        Device::Cuda(c) => {
            let (x, w) = (x.contiguous()?, w.contiguous()?);
            let bias = bias.map(Tensor::contiguous).transpose()?;
            need_contiguous("linear", out, "the output")?;
            let bias_ptr = bias.as_ref().map(dptr).transpose()?;
            if m <= GEMV_MAX_M && act == Activation::None {
                let dt = x.dtype();
                let per16 = 16 / dt.size_in_bytes();
                let aligned = [dptr(&x)?, dptr(&w)?].iter().all(|p| p.0 % 16 == 0);
                let vectorized = k % per16 == 0 && aligned;
                let kernel = GemvKernel::Gemv {
                    dtype: dt,
                    vectorized,
                    single_row: m == 1,
                };
                let mut args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(dptr(&w)?)
                    .arg(bias_ptr.unwrap_or(gpukit_driver::DevicePtr(0)))
                    .arg(dptr(out)?);
                let ring_rows = gemv::ring_rows(n, k, dt.size_in_bytes())
                    .filter(|_| m == 1 && vectorized && c.kernels().target() == "sm_90a");
                let ring = match ring_rows {
                    Some(rows) => {
                        let ring = GemvKernel::GemvRing { dtype: dt, rows };
                        let props = c.props();
                        gemv::ring(
                            n,
                            k,
                            dt.size_in_bytes(),
                            c.sm_count() as usize,
                            props.shared_memory_per_block_optin_bytes as usize,
                            c.kernels().function(ring)?.static_shared_mem_bytes() as usize,
                        )?
                    }
                    None => None,
                };
                if let Some((cfg, [split, rows, stages, prefetch])) = ring {
                    let args = args
                        .arg(u32_dim("linear", n)?)
                        .arg(u32_dim("linear", k)?)
                        .arg(split)
                        .arg(stages)
                        .arg(prefetch);
                    let kernel = GemvKernel::GemvRing { dtype: dt, rows };
                    // SAFETY: as below; the ring's rows (the kernel's), stages, prefetched
                    // stages and shared memory come from gemv::ring for this shape.
                    return unsafe { c.launch(kernel, &cfg, &args) };
                }
                let cfg = if m == 1 && vectorized {
                    // The persistent single-row kernel: (…, N, K, warps per row).
                    let split = gemv::split(n, k, dt.size_in_bytes());
                    let resident = c.resident_blocks(kernel, BLOCK_THREADS, 0)?;
                    args = args
                        .arg(u32_dim("linear", n)?)
                        .arg(u32_dim("linear", k)?)
                        .arg(split);
                    gemv::persistent(n, split, 0, resident)?
                } else {
                    let (x, out) = (dptr(&x)?, dptr(out)?);
                    // SAFETY: as below.
                    return unsafe { gemv_blocks(c, x, &w, bias_ptr, out, [m, n, k], vectorized) };
                };
                // SAFETY: x holds m·k, w n·k, out m·n elements, bias n (or null, unread);
                // the vector variant only when k is a multiple of the 16-byte width and rows
                // are 16-byte aligned.
                return unsafe { c.launch(kernel, &cfg, &args) };
            }
            let epilogue = match act {
                Activation::None => Epilogue::None,
                Activation::Relu => Epilogue::Relu,
                Activation::GeluTanh => Epilogue::GeluTanh,
            };
            let shape = GemmShape {
                m,
                n,
                k,
                batch: 1,
                b_layout: BLayout::NK,
                shared_b: false,
            };
            let gemm = c.gemm()?;
            // SAFETY: contiguous device tensors of the sizes `shape` implies, on this lane.
            unsafe {
                gemm.matmul(
                    dptr(&x)?,
                    dptr(&w)?,
                    dptr(out)?,
                    bias_ptr,
                    shape,
                    x.dtype(),
                    epilogue,
                    F32Precision::Full,
                )
            }?;
            Ok(())
        }
    }
}

/// The multi-row GEMV (`GemvKernel::Gemv`, not the single-row variant) for `[m, n, k]`, m at
/// most [`GEMV_MAX_M`]: each output row's sums over k run in an order fixed by n and k alone.
///
/// # Safety
/// x holds m·k, w n·k, out m·n elements of w's dtype on this lane, bias n (or null); with
/// `vectorized`, k is a multiple of the 16-byte width and x and w are 16-byte aligned.
unsafe fn gemv_blocks(
    c: &crate::CudaDevice,
    x: gpukit_driver::DevicePtr,
    w: &Tensor,
    bias: Option<gpukit_driver::DevicePtr>,
    out: gpukit_driver::DevicePtr,
    [m, n, k]: [usize; 3],
    vectorized: bool,
) -> Result<()> {
    let dt = w.dtype();
    let kernel = GemvKernel::Gemv {
        dtype: dt,
        vectorized,
        single_row: false,
    };
    let (cfg, rows) = gemv::blocks(n, k, dt.size_in_bytes())?;
    let args = KernelArgs::new()
        .arg(x)
        .arg(dptr(w)?)
        .arg(bias.unwrap_or(gpukit_driver::DevicePtr(0)))
        .arg(out)
        .arg(u32_dim("linear", m)?)
        .arg(u32_dim("linear", n)?)
        .arg(u32_dim("linear", k)?)
        .arg(rows);
    // SAFETY: forwarded to the caller.
    unsafe { c.launch(kernel, &cfg, &args) }
}

/// A dot product whose order of additions is fixed by the length alone: eight running sums
/// over strided elements (which the compiler keeps in vector registers), combined pairwise.
fn dot_fixed(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (xa, xb) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += xa[i] * xb[i];
        }
    }
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + tail
}

/// `out [m, n] = x [m, k] · Wᵀ + bias`, **batch invariant**: every row of `out` is computed
/// from its row of x the same way whatever m is and whatever the other rows hold, so a
/// sequence's projections are bit for bit the same alone or in any batch (what a serving
/// engine needs for batch-invariant results; He et al. 2025, "Defeating Nondeterminism in LLM
/// Inference", explain why ordinary GEMMs are not).
///
/// `w` is `[n, k]` in x's float dtype, or block-quantized (GGUF); `bias` `[n]` in x's dtype.
/// On the CPU each sum runs in an order fixed by k (eight strided running sums combined
/// pairwise, f32). On CUDA, f16/bf16 weights with k a multiple of 8 go through the tensor-core
/// kernels of `gpukit_kernels::linear` (tilings chosen by m from
/// `gpukit_kernels::shared::LINEAR_TILES`; each sums every element in segments of k fixed by k
/// alone, each one 16-deep chunk at a time in order, the segments' sums in order, whether one
/// block walks them or each runs in its own block with an f32 workspace of segments · m · n
/// values); other dense weights
/// through the multi-row GEMV kernel [`GEMV_MAX_M`] rows at a time (its reduction order is fixed
/// by n and k; every [`GEMV_MAX_M`] rows read the weights again); quantized ones through the
/// quantized GEMV one row at a time. Which path a call takes depends on the dtype, k and the
/// operands' alignment, never on m.
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes; [`Error::DType`] for a non-float x or a dtype
/// mismatch; device errors.
pub fn linear_batch_invariant_into(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    linear_batch_invariant_with_workspace_into(x, w, bias, None, out)
}

/// f32 values of the workspace [`linear_batch_invariant_with_workspace_into`] takes for `m` rows,
/// `n` outputs and depth `k` of `dtype` on CUDA (0: none needed; the tiled kernels' plans that
/// run K segments as separate blocks need `segments · m · n`).
pub fn linear_batch_invariant_workspace_len(dtype: DType, m: usize, n: usize, k: usize) -> usize {
    let tiled = matches!(dtype, DType::F16 | DType::BF16) && k.is_multiple_of(8);
    match tiled.then(|| linear_plan(dtype, m, n, k)) {
        Some(Ok(plan)) => plan.split.map_or(0, |segs| segs * m * n),
        _ => 0,
    }
}

/// [`linear_batch_invariant_into`] with the split plans' workspace given (f32, contiguous, at
/// least [`linear_batch_invariant_workspace_len`] values; `None`: allocated when needed), so
/// that nothing is allocated: what a CUDA graph of a step needs, which replays with the same
/// addresses. The same sums either way.
///
/// # Errors
/// As [`linear_batch_invariant_into`]; [`Error::Shape`] / [`Error::DType`] for a workspace too
/// small or not f32.
pub fn linear_batch_invariant_with_workspace_into(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    workspace: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "linear_batch_invariant";
    if w.dtype().is_quantized() {
        return quantized_rows(x, w, bias, out);
    }
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    let dev = same_device(OP, &inputs)?;
    float_only(OP, x)?;
    for t in &inputs[1..] {
        super::same_dtype(OP, x, t)?;
    }
    let (shape, m, k, n) = linear_shape(x, w, bias)?;
    check_out(OP, out, &shape, x.dtype(), &dev, &inputs)?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let xv = x.to_vec_f32()?;
            // Dense f32 weights are read in place (an LM head is hundreds of MB); others
            // through an f32 copy.
            let guard = match w.dtype() == DType::F32 && w.is_contiguous() {
                true => Some(w.host("cpu")?),
                false => None,
            };
            let copy;
            let wv: &[f32] = match &guard {
                Some(g) => &f32_slice(g)?[w.layout().offset()..][..n * k],
                None => {
                    copy = w.to_vec_f32()?;
                    &copy
                }
            };
            let bv = bias.map(Tensor::to_vec_f32).transpose()?;
            // Column blocks in parallel; within one, each weight row against every row of x
            // (the row stays in L1 while x streams by). Results land transposed, [n][m].
            let cols: Vec<f32> = wv
                .par_chunks(16 * k.max(1))
                .flat_map_iter(|wc| {
                    let xv = &xv;
                    wc.chunks_exact(k.max(1))
                        .flat_map(move |wr| {
                            xv.chunks_exact(k.max(1)).map(move |xr| dot_fixed(xr, wr))
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let vals = (0..m * n).map(|i| {
                let (r, j) = (i / n, i % n);
                let y = cols.get(j * m + r).copied().unwrap_or(0.0);
                f64::from(y + bv.as_ref().map_or(0.0, |b| b[j]))
            });
            write_host(out, vals.collect::<Vec<_>>())
        }
        Device::Cuda(c) => {
            let (x, w) = (x.contiguous()?, w.contiguous()?);
            let bias = bias.map(Tensor::contiguous).transpose()?;
            need_contiguous(OP, out, "the output")?;
            let dt = x.dtype();
            let per16 = 16 / dt.size_in_bytes();
            let (xp, op) = (dptr(&x)?, dptr(out)?);
            let bias_ptr = bias.as_ref().map(dptr).transpose()?;
            if tiled_fits(dt, k, xp.0, dptr(&w)?.0) {
                let plan = linear_plan(dt, m, n, k)?;
                let need = plan.split.map_or(0, |segs| segs * m * n);
                let partial = workspace_or_new(OP, workspace, need, &x.device())?;
                let null = gpukit_driver::DevicePtr(0);
                let partial_ptr = partial.as_ref().map(dptr).transpose()?.unwrap_or(null);
                let args = KernelArgs::new()
                    .arg(xp)
                    .arg(dptr(&w)?)
                    .arg(bias_ptr.unwrap_or(null))
                    .arg(op)
                    .arg(partial_ptr)
                    .arg(u32_dim(OP, m)?)
                    .arg(u32_dim(OP, n)?)
                    .arg(u32_dim(OP, k)?);
                // SAFETY: contiguous x [m, k], w [n, k], out [m, n] and bias [n] (or null) of
                // the dtype on this lane; k a multiple of 8 and x, w 16-byte aligned
                // (tiled_fits), as the kernels' 16-byte loads need; the workspace (split plans)
                // holds one f32 per output per segment, grid z being the segments.
                unsafe { c.launch(plan.kernel, &plan.cfg, &args) }?;
                if let (Some(segs), Some(partial)) = (plan.split, &partial) {
                    let args = KernelArgs::new()
                        .arg(dptr(partial)?)
                        .arg(bias_ptr.unwrap_or(null))
                        .arg(op)
                        .arg(u32_dim(OP, m)?)
                        .arg(u32_dim(OP, n)?)
                        .arg(u32_dim(OP, segs)?);
                    // SAFETY: the workspace holds segs · m · n f32 sums the launch above wrote;
                    // out [m, n] and bias [n] (or null) as above.
                    unsafe {
                        c.launch(LinearKernel::Reduce(dt), &linear_reduce_grid(m, n), &args)
                    }?;
                }
                return Ok(());
            }
            let vectorized = k % per16 == 0 && xp.0 % 16 == 0 && dptr(&w)?.0 % 16 == 0;
            let size = dt.size_in_bytes();
            for r0 in (0..m).step_by(GEMV_MAX_M) {
                let rows = GEMV_MAX_M.min(m - r0);
                let xr = xp.offset(r0 * k * size)?;
                let or = op.offset(r0 * n * size)?;
                // SAFETY: rows r0..r0 + rows of x (k each) and out (n each) lie inside the
                // contiguous tensors; w holds n·k, bias n; with `vectorized` k is a multiple of
                // the 16-byte width, so every chunk of x starts 16-byte aligned like x.
                unsafe { gemv_blocks(c, xr, &w, bias_ptr, or, [rows, n, k], vectorized) }?;
            }
            Ok(())
        }
    }
}

/// [`linear_batch_invariant_into`] for block-quantized weights: the quantized GEMV, whose rows
/// are independent on the CPU (taken [`QGEMV_MAX_ROWS`] at a time) and which runs one row per
/// launch on CUDA (its single-row and multi-row kernels sum in different orders).
fn quantized_rows(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, out: &Tensor) -> Result<()> {
    const OP: &str = "linear_batch_invariant";
    let &[n, k] = w.shape() else {
        return Err(Error::shape(
            OP,
            format!("weights {:?} must be [n, k]", w.shape()),
        ));
    };
    if x.rank() != 2 || x.shape()[1] != k || out.shape() != [x.shape()[0], n] {
        return Err(Error::shape(
            OP,
            format!(
                "x {:?} must be [m, {k}] and out {:?} [m, {n}] for weights {:?}",
                x.shape(),
                out.shape(),
                w.shape()
            ),
        ));
    }
    let m = x.shape()[0];
    let step = match x.device() {
        Device::Cpu => QGEMV_MAX_ROWS,
        Device::Cuda(_) => 1,
    };
    // With a bias the products go to a temporary first (an op's output aliases no input).
    let products = match bias {
        Some(_) => Tensor::empty(out.shape(), out.dtype(), &out.device())?,
        None => out.clone(),
    };
    for r0 in (0..m).step_by(step) {
        let rows = step.min(m - r0);
        let (xr, pr) = (x.narrow(0, r0, rows)?, products.narrow(0, r0, rows)?);
        crate::quant::qgemv_into(&xr, w, &pr)?;
    }
    match bias {
        Some(b) => super::binary_into(crate::BinaryOp::Add, &products, b, out),
        None => Ok(()),
    }
}

/// `act(x · Wᵀ + bias)`, allocated.
///
/// # Errors
/// As [`linear_into`].
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, act: Activation) -> Result<Tensor> {
    let (shape, ..) = linear_shape(x, w, bias)?;
    let out = new_output("linear", &shape, x, &x.device())?;
    linear_into(x, w, bias, act, &out)?;
    Ok(out)
}

/// SwiGLU's first half (Shazeer 2020, "GLU Variants Improve Transformer"): with `w_gate_up`
/// `[2n, k]` holding the gate projection's n rows and then the up projection's,
/// `out [.., n] = silu(x · W_gateᵀ) ⊙ (x · W_upᵀ)` for `x [.., k]`, in f32 and rounded once to
/// the dtype (the separate ops round the gate, its silu and the up projection each).
/// On CUDA this is one GEMV that reads both weight halves (the decode step's MLP): x must be
/// one row, `k` a multiple of 16 bytes and the operands 16-byte aligned. On the CPU any number
/// of rows (through [`linear`] and a temporary `[.., 2n]`).
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes, more than one row on CUDA or an unaligned operand;
/// [`Error::DType`] for a non-float or mixed dtype; device errors.
pub fn linear_swiglu_into(x: &Tensor, w_gate_up: &Tensor, out: &Tensor) -> Result<()> {
    let dev = same_device("linear_swiglu", &[x, w_gate_up])?;
    float_only("linear_swiglu", x)?;
    super::same_dtype("linear_swiglu", x, w_gate_up)?;
    let (mut shape, m, k, n2) = linear_shape(x, w_gate_up, None)?;
    if n2 % 2 != 0 {
        return Err(Error::shape(
            "linear_swiglu",
            format!(
                "weight {:?} must stack the gate and up rows: an even row count",
                w_gate_up.shape()
            ),
        ));
    }
    let n = n2 / 2;
    if let Some(last) = shape.last_mut() {
        *last = n;
    }
    check_out(
        "linear_swiglu",
        out,
        &shape,
        x.dtype(),
        &dev,
        &[x, w_gate_up],
    )?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let c = linear(x, w_gate_up, None, Activation::None)?.to_vec_f32()?;
            let vals = (0..m * n).map(|i| {
                let (r, j) = (i / n, i % n);
                let (g, u) = (c[r * n2 + j], c[r * n2 + n + j]);
                f64::from(g / (1.0 + (-g).exp()) * u)
            });
            write_host(out, vals.collect::<Vec<_>>())
        }
        Device::Cuda(c) => {
            need_contiguous("linear_swiglu", x, "x")?;
            need_contiguous("linear_swiglu", w_gate_up, "the weight")?;
            need_contiguous("linear_swiglu", out, "the output")?;
            let dt = x.dtype();
            let aligned = [dptr(x)?, dptr(w_gate_up)?].iter().all(|p| p.0 % 16 == 0);
            if m != 1 || k % (16 / dt.size_in_bytes()) != 0 || !aligned {
                return Err(Error::shape(
                    "linear_swiglu",
                    format!(
                        "the CUDA kernel takes one row of x with k a multiple of 16 bytes and \
                         16-byte aligned operands; got x {:?} {dt}{}",
                        x.shape(),
                        if aligned { "" } else { " (unaligned)" }
                    ),
                ));
            }
            let (cfg, outputs) = gemv::swiglu_blocks(n, k, dt.size_in_bytes())?;
            let args = KernelArgs::new()
                .arg(dptr(x)?)
                .arg(dptr(w_gate_up)?)
                .arg(dptr(out)?)
                .arg(u32_dim("linear_swiglu", n)?)
                .arg(u32_dim("linear_swiglu", k)?)
                .arg(outputs);
            // SAFETY: x holds k, w 2n·k, out n elements (checked), k a multiple of the 16-byte
            // vector and both inputs 16-byte aligned.
            unsafe { c.launch(GemvKernel::GemvSwiglu(dt), &cfg, &args) }
        }
    }
}
