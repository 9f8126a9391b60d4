//! One-dimensional convolutions over channels: PyTorch's `Conv1d` and `ConvTranspose1d`
//! (grouped, strided, dilated, zero padding) — the layers of WaveNet-style flows and HiFi-GAN
//! vocoders.
//!
//! On CUDA one kernel of `gpukit_kernels::signal` each, a thread per output summing its taps in
//! a fixed order (the same bits every run, eager or captured). On the CPU an im2col (or
//! col2im) around the `gemm` crate's f32 product: the direct convolution in pieces of output
//! positions whose im2col block stays in cache, in parallel; the two agree to f32 rounding.

use gpukit_driver::DevicePtr;

use super::{DType, Error, Result, check_out, dptr, same_device, u32_dim, write_host};
use super::{Device, KernelArgs, SignalKernel, Tensor, grid};
use super::{f32_only, with_contiguous_out};
use crate::ops::{cpu_gemm, cpu_gemm_into, host_f32};
use rayon::prelude::*;

/// Output channels per thread of `conv1d_ob8_f32`.
const OB8: usize = 8;

/// The geometry of a 1-D convolution: PyTorch's `stride`, `padding` (zeros on both ends),
/// `dilation` and `groups`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv1d {
    /// Step between output positions (in input samples; for the transposed convolution, the
    /// upsampling factor).
    pub stride: usize,
    /// Zeros added on both ends of the input (removed from both ends of a transposed
    /// convolution's output).
    pub padding: usize,
    /// Spacing between taps.
    pub dilation: usize,
    /// Channel groups: input and output channels split into `groups` independent blocks
    /// (`groups` = channels is a depthwise convolution).
    pub groups: usize,
}

impl Default for Conv1d {
    fn default() -> Self {
        Self {
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
        }
    }
}

impl Conv1d {
    /// Stride 1, no dilation, one group, `padding` zeros on both ends.
    pub fn padded(padding: usize) -> Self {
        Self {
            padding,
            ..Self::default()
        }
    }

    /// The output length of [`conv1d`] over `len` samples with `k` taps (`None` when the
    /// padded input is shorter than the dilated filter).
    pub fn out_len(&self, len: usize, k: usize) -> Option<usize> {
        let span = self.dilation.checked_mul(k.checked_sub(1)?)? + 1;
        let padded = len.checked_add(2 * self.padding)?;
        Some(padded.checked_sub(span)? / self.stride + 1)
    }

    /// The output length of [`conv_transpose1d`] over `len` samples with `k` taps (`None` when
    /// the padding removes more than the whole output).
    pub fn transposed_out_len(&self, len: usize, k: usize) -> Option<usize> {
        let full = (len.checked_sub(1)?)
            .checked_mul(self.stride)?
            .checked_add(self.dilation.checked_mul(k.checked_sub(1)?)?)?
            + 1;
        full.checked_sub(2 * self.padding).filter(|&n| n > 0)
    }
}

/// The checked dimensions of a convolution: (batch, c_in, len_in, c_out, k) from x
/// `[batch, c_in, len_in]` and w (`[c_out, c_in/groups, k]`, or transposed `[c_in,
/// c_out/groups, k]`).
struct Dims {
    batch: usize,
    c_in: usize,
    len_in: usize,
    c_out: usize,
    k: usize,
}

fn dims(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv1d,
    transposed: bool,
) -> Result<Dims> {
    f32_only(op, x)?;
    f32_only(op, w)?;
    let (xs, ws) = (x.shape(), w.shape());
    let bad = |why: String| Err(Error::shape(op, why));
    if xs.len() != 3 || ws.len() != 3 {
        return bad(format!(
            "needs x [batch, channels, length] and w [.., .., taps], got x {xs:?}, w {ws:?}"
        ));
    }
    if p.stride == 0 || p.dilation == 0 || p.groups == 0 {
        return bad(format!(
            "stride, dilation and groups must be ≥ 1, got {p:?}"
        ));
    }
    let (batch, c_in, len_in, k) = (xs[0], xs[1], xs[2], ws[2]);
    let c_out = if transposed { ws[1] * p.groups } else { ws[0] };
    let (w_in, w_in_want) = if transposed {
        (ws[0], c_in)
    } else {
        (ws[1] * p.groups, c_in)
    };
    if k == 0 || c_in % p.groups != 0 || c_out % p.groups != 0 || w_in != w_in_want {
        return bad(format!(
            "x {xs:?} and w {ws:?} do not match with {} groups (w is [c_out, c_in/groups, taps]{})",
            p.groups,
            if transposed {
                ", transposed [c_in, c_out/groups, taps]"
            } else {
                ""
            }
        ));
    }
    if let Some(b) = bias {
        f32_only(op, b)?;
        if b.shape() != [c_out] {
            return bad(format!("bias must be [{c_out}], got {:?}", b.shape()));
        }
    }
    Ok(Dims {
        batch,
        c_in,
        len_in,
        c_out,
        k,
    })
}

/// `out` = PyTorch's `conv1d(x, w, bias, stride, padding, dilation, groups)`: `out[b, o, t]` =
/// `bias[o]` + Σ_c Σ_k `w[o, c, k]`·`x[b, g·c_in/groups + c, t·stride − padding +
/// k·dilation]`, g the group of output channel o, positions outside x reading zero. x is `[batch,
/// c_in, len]`, w `[c_out, c_in/groups, taps]`, bias `[c_out]`, out `[batch, c_out,`
/// [`Conv1d::out_len`]`]`; all f32.
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes or a zero stride, dilation or group count; dtype and
/// device errors.
pub fn conv1d_into(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv1d,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "conv1d";
    let d = dims(OP, x, w, bias, p, false)?;
    let len_out = p.out_len(d.len_in, d.k).ok_or_else(|| {
        Error::shape(
            OP,
            format!(
                "input of {} samples (padding {}) is shorter than {} taps at dilation {}",
                d.len_in, p.padding, d.k, p.dilation
            ),
        )
    })?;
    launch_or_run(OP, x, w, bias, p, &d, len_out, out, false)
}

/// [`conv1d_into`] into a new tensor.
///
/// # Errors
/// As [`conv1d_into`].
pub fn conv1d(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, p: &Conv1d) -> Result<Tensor> {
    let d = dims("conv1d", x, w, bias, p, false)?;
    let len = p.out_len(d.len_in, d.k).unwrap_or(0);
    let out = Tensor::empty(&[d.batch, d.c_out, len], DType::F32, &x.device())?;
    conv1d_into(x, w, bias, p, &out)?;
    Ok(out)
}

/// `out` = PyTorch's `conv_transpose1d(x, w, bias, stride, padding, 0, groups, dilation)`: each
/// input sample `x[b, c, s]` adds `w[c, o', k]·x[b, c, s]` to `out[b, g·c_out/groups + o',
/// s·stride − padding + k·dilation]` (g the group of c), plus `bias`. x is `[batch, c_in,
/// len]`, w `[c_in, c_out/groups, taps]`, bias `[c_out]`, out `[batch, c_out,`
/// [`Conv1d::transposed_out_len`]`]`; all f32.
///
/// # Errors
/// As [`conv1d_into`].
pub fn conv_transpose1d_into(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv1d,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "conv_transpose1d";
    let d = dims(OP, x, w, bias, p, true)?;
    let len_out = p.transposed_out_len(d.len_in, d.k).ok_or_else(|| {
        Error::shape(
            OP,
            format!(
                "padding {} removes the whole output of {} samples",
                p.padding, d.len_in
            ),
        )
    })?;
    launch_or_run(OP, x, w, bias, p, &d, len_out, out, true)
}

/// [`conv_transpose1d_into`] into a new tensor.
///
/// # Errors
/// As [`conv1d_into`].
pub fn conv_transpose1d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv1d,
) -> Result<Tensor> {
    let d = dims("conv_transpose1d", x, w, bias, p, true)?;
    let len = p.transposed_out_len(d.len_in, d.k).unwrap_or(0);
    let out = Tensor::empty(&[d.batch, d.c_out, len], DType::F32, &x.device())?;
    conv_transpose1d_into(x, w, bias, p, &out)?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn launch_or_run(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    p: &Conv1d,
    d: &Dims,
    len_out: usize,
    out: &Tensor,
    transposed: bool,
) -> Result<()> {
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    let mut all = inputs.clone();
    all.push(out);
    let dev = same_device(op, &all)?;
    check_out(
        op,
        out,
        &[d.batch, d.c_out, len_out],
        DType::F32,
        &dev,
        &inputs,
    )?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            // Contiguous operands are read in place, others copied out once; a contiguous f32
            // output is written in place.
            let (x, w) = (x.contiguous()?, w.contiguous()?);
            let (gx, gw) = (x.host("cpu")?, w.host("cpu")?);
            let (xv, wv) = (host_f32(&gx, &x)?, host_f32(&gw, &w)?);
            let bv = bias.map(|b| b.to_vec::<f32>()).transpose()?;
            let run = |y: &mut [f32]| {
                if transposed {
                    cpu_conv_transpose(xv, wv, p, d, len_out, y);
                } else {
                    cpu_conv(xv, wv, p, d, len_out, y);
                }
                if let Some(b) = &bv {
                    y.par_chunks_mut(len_out).enumerate().for_each(|(i, row)| {
                        let bo = b[i % d.c_out];
                        row.iter_mut().for_each(|v| *v += bo);
                    });
                }
            };
            let total = d.batch * d.c_out * len_out;
            if out.is_contiguous() {
                let mut g = out.host_mut("cpu")?;
                if let crate::HostData::F32(dst) = &mut *g {
                    let off = out.layout().offset();
                    run(&mut dst[off..off + total]);
                    return Ok(());
                }
            }
            let mut y = vec![0.0f32; total];
            run(&mut y);
            write_host(out, y.into_iter().map(f64::from))
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            let w = w.contiguous()?;
            let bias = bias.map(Tensor::contiguous).transpose()?;
            let bias_ptr = bias.as_ref().map_or(Ok(DevicePtr(0)), dptr)?;
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(dptr(&w)?)
                    .arg(bias_ptr)
                    .arg(dptr(out_c)?)
                    .arg(u32_dim(op, d.batch)?)
                    .arg(u32_dim(op, d.c_in)?)
                    .arg(u32_dim(op, d.len_in)?)
                    .arg(u32_dim(op, d.c_out)?)
                    .arg(u32_dim(op, len_out)?)
                    .arg(u32_dim(op, d.k)?)
                    .arg(u32_dim(op, p.stride)?)
                    .arg(u32_dim(op, p.padding)?)
                    .arg(u32_dim(op, p.dilation)?)
                    .arg(u32_dim(op, p.groups)?);
                // Eight output channels a thread when the groups allow (the same bits).
                let ob8 = !transposed && (d.c_out / p.groups).is_multiple_of(OB8);
                let threads = if ob8 { out.numel() / OB8 } else { out.numel() };
                let cfg = grid::elementwise(threads, c.sm_count());
                let kernel = match (transposed, ob8) {
                    (true, _) => SignalKernel::ConvTranspose1d,
                    (false, true) => SignalKernel::Conv1dOb8,
                    (false, false) => SignalKernel::Conv1d,
                };
                // SAFETY: x contiguous [batch, c_in, len_in], w contiguous with the checked
                // shape, bias null or [c_out], out_c contiguous [batch, c_out, len_out]; the
                // kernels read only taps whose input position lies inside x.
                unsafe { c.launch(kernel, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// Output columns per piece of the CPU convolution: its im2col block (`c_in/groups · taps ×
/// PIECE` f32) stays in cache, and pieces run in parallel.
const PIECE: usize = 1024;

/// `conv1d` on the CPU without the bias, into `y` (`[batch, c_out, len_out]`, every element
/// written): per batch, group and piece of `PIECE` output positions, the im2col block
/// `[c_in/groups · taps, piece]` (a per-thread buffer) times the group's weights
/// `[c_out/groups, c_in/groups · taps]` (the input itself for a 1×1 convolution), written
/// straight into the piece's columns of y; pieces in parallel.
fn cpu_conv(x: &[f32], w: &[f32], p: &Conv1d, d: &Dims, len_out: usize, y: &mut [f32]) {
    let (cin_g, cout_g, k) = (d.c_in / p.groups, d.c_out / p.groups, d.k);
    let direct = k == 1 && p.stride == 1 && p.padding == 0;
    assert!(
        y.len() >= d.batch * d.c_out * len_out,
        "cpu_conv: y too short"
    );
    let jobs: Vec<(usize, usize, usize)> = (0..d.batch)
        .flat_map(|b| (0..p.groups).map(move |g| (b, g)))
        .flat_map(|(b, g)| (0..len_out).step_by(PIECE).map(move |t0| (b, g, t0)))
        .collect();
    // The pieces' blocks of y are disjoint: each job writes its own through the pointer.
    struct Out(*mut f32);
    // SAFETY: the pointer is only used to write the disjoint blocks below, and y outlives
    // the parallel loop.
    unsafe impl Sync for Out {}
    let out = Out(y.as_mut_ptr());
    let out = &out;
    thread_local! {
        static COLS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // The pieces run in parallel, each product on its own thread.
    let serial = gemm::Parallelism::None;
    jobs.par_iter().for_each(|&(b, g, t0)| {
        let n = PIECE.min(len_out - t0);
        let xg = &x[(b * d.c_in + g * cin_g) * d.len_in..][..cin_g * d.len_in];
        let a = &w[g * cout_g * cin_g * k..][..cout_g * cin_g * k];
        let base = (b * d.c_out + g * cout_g) * len_out + t0;
        // SAFETY: rows base + o·len_out .. + n (o < cout_g) lie inside y (batch b, the group's
        // channels, positions t0..t0 + n < len_out), and no other job's (b, g, t0) reaches
        // them.
        let dst = unsafe { out.0.add(base) };
        if direct {
            // The input rows are the columns: rhs [cin_g, n] with row stride len_in.
            let rhs = &xg[t0..];
            // SAFETY: as above.
            unsafe {
                cpu_gemm_into(
                    a,
                    rhs,
                    (d.len_in, 1),
                    dst,
                    len_out,
                    (cout_g, cin_g, n),
                    serial,
                )
            };
            return;
        }
        COLS.with_borrow_mut(|cols| {
            // Every element is written below, so a grown buffer needs no clearing.
            cols.resize(cols.len().max(cin_g * k * n), 0.0);
            for c in 0..cin_g {
                let row = &xg[c * d.len_in..][..d.len_in];
                for kk in 0..k {
                    let dst = &mut cols[(c * k + kk) * n..][..n];
                    im2col_row(row, dst, t0 * p.stride + kk * p.dilation, p);
                }
            }
            // SAFETY: as above.
            unsafe {
                cpu_gemm_into(
                    a,
                    cols,
                    (n, 1),
                    dst,
                    len_out,
                    (cout_g, cin_g * k, n),
                    serial,
                )
            };
        });
    });
}

/// One im2col row: `dst[t]` = `row[t·stride + shift − padding]`, zero outside the row.
fn im2col_row(row: &[f32], dst: &mut [f32], shift: usize, p: &Conv1d) {
    let pos = |t: usize| (t * p.stride + shift) as isize - p.padding as isize;
    // Outputs whose input lies inside the row: t in [lo, hi), the first t with
    // t·stride + shift ≥ padding and the first with t·stride + shift ≥ padding + len.
    let first_at = |bound: usize| bound.saturating_sub(shift).div_ceil(p.stride);
    let n = dst.len();
    let lo = first_at(p.padding).min(n);
    let hi = first_at(p.padding + row.len()).clamp(lo, n);
    dst[..lo].fill(0.0);
    dst[hi..].fill(0.0);
    if p.stride == 1 && lo < hi {
        let start = pos(lo) as usize;
        dst[lo..hi].copy_from_slice(&row[start..start + (hi - lo)]);
    } else {
        for (t, v) in dst.iter_mut().enumerate().take(hi).skip(lo) {
            *v = row[pos(t) as usize];
        }
    }
}

/// `conv_transpose1d` on the CPU without the bias, into `y` (`[batch, c_out, len_out]`,
/// cleared first): per batch and group, the group's weights transposed `[c_out/groups · taps,
/// c_in/groups]` times its input `[c_in/groups, len]`, then each column's taps added at their
/// output positions (col2im).
fn cpu_conv_transpose(x: &[f32], w: &[f32], p: &Conv1d, d: &Dims, len_out: usize, y: &mut [f32]) {
    let (cin_g, cout_g, k) = (d.c_in / p.groups, d.c_out / p.groups, d.k);
    y.fill(0.0);
    let mut cols = vec![0.0f32; cout_g * k * d.len_in];
    let mut wt = vec![0.0f32; cout_g * k * cin_g];
    for g in 0..p.groups {
        // wt[(o, k), c] = w[g·cin_g + c, o, k]
        for c in 0..cin_g {
            for ok in 0..cout_g * k {
                wt[ok * cin_g + c] = w[(g * cin_g + c) * cout_g * k + ok];
            }
        }
        for b in 0..d.batch {
            let xg = &x[(b * d.c_in + g * cin_g) * d.len_in..][..cin_g * d.len_in];
            cpu_gemm(&wt, xg, &mut cols, cout_g * k, cin_g, d.len_in, false);
            let yg = &mut y[(b * d.c_out + g * cout_g) * len_out..][..cout_g * len_out];
            for o in 0..cout_g {
                let yo = &mut yg[o * len_out..][..len_out];
                for kk in 0..k {
                    let col = &cols[(o * k + kk) * d.len_in..][..d.len_in];
                    for (s, &v) in col.iter().enumerate() {
                        let t = (s * p.stride + kk * p.dilation) as isize - p.padding as isize;
                        if let Some(dst) = usize::try_from(t).ok().and_then(|t| yo.get_mut(t)) {
                            *dst += v;
                        }
                    }
                }
            }
        }
    }
}
