//! Signal ops on f32 tensors: discrete Fourier transforms along the last axis, padding,
//! overlap-add, zero-crossing rates, and (from [`filter`]) first-order recurrences, polyphase
//! `upfirdn`, median filters and sorts — the pieces `gpukit-audio` builds STFT, ISTFT,
//! resampling and spectral features from — and (from [`conv`]) the 1-D convolutions its
//! text-to-speech networks are built from.
//!
//! Complex values are a trailing axis of 2 f32 (real, imaginary), as `torch.view_as_real` lays
//! them out. Transforms follow numpy's `np.fft` conventions: forward transforms are
//! unnormalised (X_k = Σ_j x_j e^(−2πi jk/n)), inverse ones divide by n, and `irfft` ignores the
//! imaginary parts of the zero-frequency and (even n) Nyquist bins.
//!
//! On the CPU every transform is computed in f64 (`rustfft`) and rounded once: the reference.
//! On CUDA they run gpukit's own FFT kernels (`gpukit_kernels::signal`: Stockham radix
//! 8/4/2/3/5, Bluestein for other lengths) in f32, one transform per group of threads, in
//! shared memory; the leading axes may be any strided view, including an overlapping one from
//! [`Tensor::unfold`] (an STFT's frames are read in place, not copied). Lengths past one
//! block's shared memory (above 8192 complex points, or 4096 for Bluestein) compose several
//! launches: the four-step algorithm for products of 2, 3 and 5, Bluestein's over power-of-two
//! four-step transforms otherwise — any length, at the cost of more passes through memory.

use gpukit_driver::{DevicePtr, KernelArgs};
use gpukit_kernels::grid;
use gpukit_kernels::signal::{self as ksignal, FftArgs, FftMode, SignalKernel};
pub use gpukit_kernels::signal::{FftOutput, PadMode, WindowFn, smooth};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex64;

use crate::device::{CudaDevice, Device};
use crate::ops::{check_out, dptr, host_values, same_device, u32_dim, write_host};
use crate::tensor::Tensor;
use crate::{DType, Error, Result};

mod complex;
pub mod conv;
pub mod filter;
mod large;
pub use complex::{complex_abs, complex_from_parts, complex_mul, complex_parts};
pub use conv::{Conv1d, conv_transpose1d, conv_transpose1d_into, conv1d, conv1d_into};
pub use filter::{
    cumsum, linear_recurrence, linear_recurrence_into, median_filter, median_filter_into, sort,
    sort_into, upfirdn, upfirdn_into,
};

/// The f32 check every signal op makes.
fn f32_only(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype() != DType::F32 {
        return Err(Error::dtype(
            op,
            format!("takes f32 tensors, got {} {:?}", t.dtype(), t.shape()),
        ));
    }
    t.elements_only(op)
}

/// The length of the last axis, and the leading (batch) shape.
fn last_axis<'a>(op: &'static str, t: &'a Tensor, what: &str) -> Result<(&'a [usize], usize)> {
    match t.shape().split_last() {
        Some((&n, batch)) => Ok((batch, n)),
        None => Err(Error::shape(
            op,
            format!("{what} needs at least one axis, got a scalar"),
        )),
    }
}

/// Checks a complex operand `[.., n, 2]`; returns its batch shape and `n`.
fn complex_axis<'a>(op: &'static str, t: &'a Tensor) -> Result<(&'a [usize], usize)> {
    let s = t.shape();
    if s.len() < 2 || s[s.len() - 1] != 2 {
        return Err(Error::shape(
            op,
            format!("a complex tensor is [.., n, 2] (real and imaginary parts last), got {s:?}"),
        ));
    }
    Ok((&s[..s.len() - 2], s[s.len() - 2]))
}

/// The window an FFT op multiplies each row by (the input of [`rfft_into`], the output of
/// [`irfft_into`]).
#[derive(Clone, Copy, Debug)]
pub enum FftWindow<'a> {
    /// Values `[n]` f32 on the op's device.
    Values(&'a Tensor),
    /// A periodic window function `length` samples long starting at sample `offset` of the
    /// row, zero elsewhere (librosa's window centred in `n_fft`), computed where the op runs:
    /// inside the FFT kernel on CUDA, so nothing is uploaded.
    Function {
        /// The function (not [`WindowFn::None`]).
        function: WindowFn,
        /// Its length (period) in samples.
        length: usize,
        /// Its first sample's position in the row.
        offset: usize,
    },
}

/// A checked window: values `[n]` on the op's device (contiguous), or a function that fits.
enum Checked {
    Values(Tensor),
    Function(WindowFn, usize, usize),
}

impl Checked {
    /// The window's `n` values in f64 (the CPU side).
    fn values(&self, n: usize) -> Result<Vec<f64>> {
        Ok(match self {
            Checked::Values(t) => host_values(t)?,
            Checked::Function(f, length, offset) => (0..n)
                .map(|j| match j.checked_sub(*offset) {
                    Some(k) if k < *length => f.value(k, *length),
                    _ => 0.0,
                })
                .collect(),
        })
    }
}

/// Checks `w` against rows of `n` samples on `dev`.
fn window_for(
    op: &'static str,
    w: Option<FftWindow<'_>>,
    n: usize,
    dev: &Device,
) -> Result<Option<Checked>> {
    let w = match w {
        None => return Ok(None),
        Some(FftWindow::Function {
            function,
            length,
            offset,
        }) => {
            if function == WindowFn::None || length == 0 || offset.saturating_add(length) > n {
                return Err(Error::shape(
                    op,
                    format!(
                        "a {function:?} window of {length} samples from sample {offset} does \
                         not fit a row of {n}"
                    ),
                ));
            }
            return Ok(Some(Checked::Function(function, length, offset)));
        }
        Some(FftWindow::Values(w)) => w,
    };
    f32_only(op, w)?;
    if w.shape() != [n] {
        return Err(Error::shape(
            op,
            format!("the window is {:?}, expected [{n}]", w.shape()),
        ));
    }
    if !w.device().same(dev) {
        return Err(Error::Device {
            op,
            a: format!("{} (the signal)", dev.describe()),
            b: format!("{} (the window)", w.device().describe()),
        });
    }
    Ok(Some(Checked::Values(w.contiguous()?)))
}

// ---------------------------------------------------------------------------------------------
// CPU reference.

/// Forward (sign −1) or inverse (sign +1, unnormalised) DFTs of the rows of `v`, in f64.
fn cpu_dft(rows: &mut [Complex64], n: usize, inverse: bool) {
    if n == 0 || rows.is_empty() {
        return;
    }
    let mut planner = FftPlanner::<f64>::new();
    let plan = if inverse {
        planner.plan_fft_inverse(n)
    } else {
        planner.plan_fft_forward(n)
    };
    plan.process(rows);
}

/// The full Hermitian spectrum of length `n` from `n / 2 + 1` bins (imaginary parts of the
/// zero and Nyquist bins dropped, as numpy's irfft does).
fn hermitian(bins: &[Complex64], n: usize) -> impl Iterator<Item = Complex64> + '_ {
    (0..n).map(move |k| {
        let (src, flip) = if k <= n / 2 {
            (k, false)
        } else {
            (n - k, true)
        };
        let b = bins[src];
        if src == 0 || 2 * src == n {
            Complex64::new(b.re, 0.0)
        } else if flip {
            b.conj()
        } else {
            b
        }
    })
}

// ---------------------------------------------------------------------------------------------
// CUDA launch.

/// Leading axes of an input and an output, merged where both allow into at most two
/// (outer, inner) groups: `(inner count, [outer, inner] input strides, [outer, inner] output
/// strides)`, or `None` when they need three or more.
fn batch_groups(shape: &[usize], a: &[isize], b: &[isize]) -> Option<(usize, [i64; 2], [i64; 2])> {
    // (size, stride a, stride b), innermost first, axes of size 1 dropped.
    let mut groups: Vec<(usize, isize, isize)> = Vec::new();
    for d in (0..shape.len()).rev() {
        if shape[d] == 1 {
            continue;
        }
        match groups.last_mut() {
            Some(g) if a[d] == g.1 * g.0 as isize && b[d] == g.2 * g.0 as isize => {
                g.0 *= shape[d];
            }
            _ => groups.push((shape[d], a[d], b[d])),
        }
    }
    match groups.as_slice() {
        [] => Some((1, [0, 0], [0, 0])),
        [g] => Some((g.0, [0, g.1 as i64], [0, g.2 as i64])),
        [i, o] => Some((i.0, [o.1 as i64, i.1 as i64], [o.2 as i64, i.2 as i64])),
        _ => None,
    }
}

/// One FFT launch: `x` and `out` with `k_in` / `k_out` trailing axes per transform (1 real, 2
/// complex) and the same leading axes. Makes `x` contiguous, or goes through a contiguous
/// output, where the leading axes of both do not merge into two groups or a complex pair is
/// not adjacent.
#[allow(clippy::too_many_arguments)]
fn launch_fft(
    c: &CudaDevice,
    op: &'static str,
    mode: FftMode,
    out_kind: FftOutput,
    x: &Tensor,
    out: &Tensor,
    window: Option<&Checked>,
    n: usize,
    sign: i32,
    scale: f32,
) -> Result<()> {
    let k_in = if mode == FftMode::R2c { 1 } else { 2 };
    let k_out = match (mode, out_kind) {
        (FftMode::C2r, _) | (FftMode::R2c, FftOutput::Magnitude | FftOutput::Power) => 1,
        _ => 2,
    };
    let pair_ok = |t: &Tensor, k: usize| k == 1 || t.layout().strides()[t.rank() - 1] == 1;
    let batch = &x.shape()[..x.rank() - k_in];
    let count = batch.iter().product::<usize>();
    if count == 0 {
        return Ok(());
    }
    let mut x = x.clone();
    if !pair_ok(&x, k_in) {
        x = x.contiguous()?;
    }
    let elem_stride = |t: &Tensor, k: usize| t.layout().strides()[t.rank() - k] as i64;
    let direct = pair_ok(out, k_out).then(|| {
        let xs = &x.layout().strides()[..batch.len()];
        let os = &out.layout().strides()[..batch.len()];
        batch_groups(batch, xs, os).or_else(|| {
            x = x.contiguous().ok()?;
            batch_groups(batch, &x.layout().strides()[..batch.len()], os)
        })
    });
    let (target, groups, copy_back) = match direct.flatten() {
        Some(g) => (out.clone(), g, false),
        None => {
            let x2 = x.contiguous()?;
            let tmp = Tensor::empty(out.shape(), DType::F32, &out.device())?;
            let b = batch.len();
            let g = batch_groups(
                batch,
                &x2.layout().strides()[..b],
                &tmp.layout().strides()[..b],
            )
            .ok_or_else(|| Error::shape(op, "contiguous operands must merge"))?;
            x = x2;
            (tmp, g, true)
        }
    };
    let plan = ksignal::fft(
        mode,
        n,
        count,
        c.props().shared_memory_per_block_optin_bytes as usize,
    )?;
    let (inner, in_stride, out_stride) = groups;
    let args = FftArgs {
        input: dptr(&x)?,
        output: dptr(&target)?,
        window: match window {
            Some(Checked::Values(w)) => dptr(w)?,
            _ => DevicePtr(0),
        },
        in_stride,
        out_stride,
        in_elem: elem_stride(&x, k_in),
        out_elem: elem_stride(&target, k_out),
        inner: u32_dim(op, inner)?,
        count: u32_dim(op, count)?,
        n: u32_dim(op, n)?,
        points: plan.points,
        bluestein: plan.bluestein,
        mode: mode.code() as u32,
        out_kind: out_kind.code() as u32,
        sign,
        scale,
        per_block: plan.per_block,
        threads: plan.threads,
        window_fn: match window {
            Some(Checked::Function(f, ..)) => f.code() as u32,
            _ => WindowFn::None.code() as u32,
        },
        win_length: match window {
            Some(Checked::Function(_, length, _)) => u32_dim(op, *length)?,
            _ => 0,
        },
        win_offset: match window {
            Some(Checked::Function(_, _, offset)) => u32_dim(op, *offset)?,
            _ => 0,
        },
        reserved: 0,
    };
    // SAFETY: the strides and counts describe x and the target exactly (checked shapes); the
    // window holds n f32; the plan's shared memory holds per_block transforms.
    unsafe { c.launch(SignalKernel::Fft, &plan.cfg, &KernelArgs::new().arg(args)) }?;
    if copy_back {
        crate::ops::copy_into(&target, out)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Public ops.

/// `out` = the `n / 2 + 1` non-negative-frequency bins of the DFT of each row of `x` (f32
/// `[.., n]`, any strides), each row first multiplied by `window` when given:
/// complex `[.., n/2+1, 2]` for [`FftOutput::Complex`], magnitudes or powers `[.., n/2+1]`
/// otherwise.
///
/// # Errors
/// [`Error::Shape`] / [`Error::DType`] for operands that do not fit; memory errors.
pub fn rfft_into(
    x: &Tensor,
    window: Option<FftWindow<'_>>,
    output: FftOutput,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "rfft";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (batch, n) = last_axis(OP, x, "the signal")?;
    if n == 0 {
        return Err(Error::shape(OP, "a transform needs at least one sample"));
    }
    let bins = n / 2 + 1;
    let mut shape = batch.to_vec();
    shape.push(bins);
    if output == FftOutput::Complex {
        shape.push(2);
    }
    check_out(OP, out, &shape, DType::F32, &dev, &[x])?;
    let window = window_for(OP, window, n, &dev)?;
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let w = window.as_ref().map(|w| w.values(n)).transpose()?;
            let mut values = Vec::with_capacity(out.numel());
            let mut row = vec![Complex64::default(); n];
            for xs in v.chunks(n) {
                for (j, (r, &s)) in row.iter_mut().zip(xs).enumerate() {
                    *r = Complex64::new(s * w.as_ref().map_or(1.0, |w| w[j]), 0.0);
                }
                cpu_dft(&mut row, n, false);
                for z in &row[..bins] {
                    match output {
                        FftOutput::Complex => values.extend([z.re, z.im]),
                        FftOutput::Magnitude => values.push(z.norm()),
                        FftOutput::Power => values.push(z.norm_sqr()),
                    }
                }
            }
            write_host(out, values)
        }
        Device::Cuda(c) if !large::fits(c, FftMode::R2c, n) => {
            large::rfft(c, x, window.as_ref(), output, n, out)
        }
        Device::Cuda(c) => launch_fft(
            c,
            OP,
            FftMode::R2c,
            output,
            x,
            out,
            window.as_ref(),
            n,
            -1,
            1.0,
        ),
    }
}

/// The complex half-spectrum `[.., n/2+1, 2]` of each row of `x` `[.., n]` (see [`rfft_into`]).
///
/// # Errors
/// As [`rfft_into`].
pub fn rfft(x: &Tensor, window: Option<FftWindow<'_>>) -> Result<Tensor> {
    let (batch, n) = last_axis("rfft", x, "the signal")?;
    let mut shape = batch.to_vec();
    shape.extend([n / 2 + 1, 2]);
    let out = Tensor::empty(&shape, DType::F32, &x.device())?;
    rfft_into(x, window, FftOutput::Complex, &out)?;
    Ok(out)
}

/// `out` `[.., n]` = the real inverse DFT (divided by n) of each Hermitian half-spectrum of `x`
/// `[.., n/2+1, 2]`, multiplied by `window` when given. The imaginary parts of
/// the zero-frequency bin and, for even n, the Nyquist bin are ignored.
///
/// # Errors
/// [`Error::Shape`] when `x` does not hold `n / 2 + 1` bins; dtype, device and memory errors.
pub fn irfft_into(x: &Tensor, n: usize, window: Option<FftWindow<'_>>, out: &Tensor) -> Result<()> {
    const OP: &str = "irfft";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (batch, bins) = complex_axis(OP, x)?;
    if n == 0 || bins != n / 2 + 1 {
        return Err(Error::shape(
            OP,
            format!("{bins} bins are not the half-spectrum of a length-{n} signal (n/2 + 1)"),
        ));
    }
    let mut shape = batch.to_vec();
    shape.push(n);
    check_out(OP, out, &shape, DType::F32, &dev, &[x])?;
    let window = window_for(OP, window, n, &dev)?;
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let w = window.as_ref().map(|w| w.values(n)).transpose()?;
            let mut values = Vec::with_capacity(out.numel());
            let mut row = vec![Complex64::default(); n];
            for xs in v.chunks(2 * bins) {
                let half: Vec<Complex64> =
                    xs.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect();
                for (r, z) in row.iter_mut().zip(hermitian(&half, n)) {
                    *r = z;
                }
                cpu_dft(&mut row, n, true);
                values.extend(
                    row.iter()
                        .enumerate()
                        .map(|(j, z)| z.re / n as f64 * w.as_ref().map_or(1.0, |w| w[j])),
                );
            }
            write_host(out, values)
        }
        Device::Cuda(c) if !large::fits(c, FftMode::C2r, n) => {
            large::irfft(c, x, window.as_ref(), n, out)
        }
        Device::Cuda(c) => launch_fft(
            c,
            OP,
            FftMode::C2r,
            FftOutput::Complex,
            x,
            out,
            window.as_ref(),
            n,
            1,
            1.0 / n as f32,
        ),
    }
}

/// The real signals `[.., n]` of the half-spectra `x` `[.., n/2+1, 2]` (see [`irfft_into`]).
///
/// # Errors
/// As [`irfft_into`].
pub fn irfft(x: &Tensor, n: usize, window: Option<FftWindow<'_>>) -> Result<Tensor> {
    let (batch, _) = complex_axis("irfft", x)?;
    let mut shape = batch.to_vec();
    shape.push(n);
    let out = Tensor::empty(&shape, DType::F32, &x.device())?;
    irfft_into(x, n, window, &out)?;
    Ok(out)
}

/// `out` = the DFT of each complex row of `x` (`[.., n, 2]`), or with `inverse` the inverse DFT
/// divided by n.
///
/// # Errors
/// Shape, dtype, device and memory errors.
pub fn fft_into(x: &Tensor, inverse: bool, out: &Tensor) -> Result<()> {
    const OP: &str = "fft";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (_, n) = complex_axis(OP, x)?;
    check_out(OP, out, x.shape(), DType::F32, &dev, &[x])?;
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let mut values = Vec::with_capacity(v.len());
            let mut row = vec![Complex64::default(); n];
            let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
            for xs in v.chunks(2 * n) {
                for (r, p) in row.iter_mut().zip(xs.chunks(2)) {
                    *r = Complex64::new(p[0], p[1]);
                }
                cpu_dft(&mut row, n, inverse);
                values.extend(row.iter().flat_map(|z| [z.re * scale, z.im * scale]));
            }
            write_host(out, values)
        }
        Device::Cuda(c) if !large::fits(c, FftMode::C2c, n) => {
            let rows = x.numel() / (2 * n);
            let y = large::dft(
                c,
                &x.contiguous()?.reshape(&[rows, n, 2])?,
                if inverse { 1 } else { -1 },
            )?;
            let y = if inverse {
                crate::ops::scalar(crate::ScalarOp::Mul, &y, 1.0 / n as f32)?
            } else {
                y
            };
            crate::ops::copy_into(&y.reshape(out.shape())?, out)
        }
        Device::Cuda(c) => launch_fft(
            c,
            OP,
            FftMode::C2c,
            FftOutput::Complex,
            x,
            out,
            None,
            n,
            if inverse { 1 } else { -1 },
            if inverse { 1.0 / n as f32 } else { 1.0 },
        ),
    }
}

/// The DFT (or the inverse DFT divided by n) of each complex row of `x` `[.., n, 2]`.
///
/// # Errors
/// As [`fft_into`].
pub fn fft(x: &Tensor, inverse: bool) -> Result<Tensor> {
    let out = Tensor::empty(x.shape(), DType::F32, &x.device())?;
    fft_into(x, inverse, &out)?;
    Ok(out)
}

/// `out` `[.., left + len + right]` = each row of `x` `[.., len]` padded at both ends of its
/// last axis: with `value` ([`PadMode::Constant`]), the edge sample ([`PadMode::Edge`]) or its
/// mirror image without repeating the edge ([`PadMode::Reflect`], numpy's `"reflect"`) or
/// repeating it ([`PadMode::Symmetric`], numpy's `"symmetric"`); mirrors repeat when a pad is
/// longer than the signal.
///
/// # Errors
/// [`Error::Shape`] for an empty signal padded by [`PadMode::Edge`] or [`PadMode::Reflect`];
/// shape, dtype and device errors.
pub fn pad_into(
    x: &Tensor,
    left: usize,
    right: usize,
    mode: PadMode,
    value: f32,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "pad";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (batch, len) = last_axis(OP, x, "the signal")?;
    let width = left
        .checked_add(len)
        .and_then(|w| w.checked_add(right))
        .ok_or_else(|| Error::shape(OP, "the padded length overflows"))?;
    let mut shape = batch.to_vec();
    shape.push(width);
    check_out(OP, out, &shape, DType::F32, &dev, &[x])?;
    if len == 0 && mode != PadMode::Constant && width > 0 {
        return Err(Error::shape(
            OP,
            format!("an empty signal has no edge to pad from ({mode:?})"),
        ));
    }
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let rows = out.numel() / width;
            let mut values = Vec::with_capacity(out.numel());
            for r in 0..rows {
                let row = &v[r * len..(r + 1) * len];
                values.extend((0..width).map(|j| {
                    let j = j as isize - left as isize;
                    pad_source(j, len, mode).map_or(f64::from(value), |s| row[s])
                }));
            }
            write_host(out, values)
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            with_contiguous_out(out, |out_c| {
                let rows = out.numel() / width;
                let args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(dptr(out_c)?)
                    .arg(u32_dim(OP, rows)?)
                    .arg(u32_dim(OP, len)?)
                    .arg(len as i64)
                    .arg(u32_dim(OP, left)?)
                    .arg(u32_dim(OP, right)?)
                    .arg(mode.code() as u32)
                    .arg(value);
                let cfg = grid::elementwise(out.numel(), c.sm_count());
                // SAFETY: x is contiguous rows·len f32, out_c contiguous rows·width.
                unsafe { c.launch(SignalKernel::Pad, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// Where padded position `j` (relative to the first sample) reads from, or `None` for the
/// constant.
fn pad_source(j: isize, len: usize, mode: PadMode) -> Option<usize> {
    let n = len as isize;
    if (0..n).contains(&j) {
        return Some(j as usize);
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(if j < 0 { 0 } else { len - 1 }),
        PadMode::Reflect if len == 1 => Some(0),
        PadMode::Reflect => {
            let period = 2 * (n - 1);
            let p = j.rem_euclid(period);
            Some(if p < n { p } else { period - p } as usize)
        }
        PadMode::Symmetric => {
            let period = 2 * n;
            let p = j.rem_euclid(period);
            Some(if p < n { p } else { period - 1 - p } as usize)
        }
    }
}

/// Each row of `x` padded at both ends of its last axis (see [`pad_into`]).
///
/// # Errors
/// As [`pad_into`].
pub fn pad(x: &Tensor, left: usize, right: usize, mode: PadMode, value: f32) -> Result<Tensor> {
    let (batch, len) = last_axis("pad", x, "the signal")?;
    let mut shape = batch.to_vec();
    shape.push(left.saturating_add(len).saturating_add(right));
    let out = Tensor::empty(&shape, DType::F32, &x.device())?;
    pad_into(x, left, right, mode, value, &out)?;
    Ok(out)
}

/// Runs `launch` on `out` when it is contiguous, else on a contiguous scratch tensor copied
/// into `out` afterwards (the elementwise signal kernels write contiguous rows).
fn with_contiguous_out(out: &Tensor, launch: impl FnOnce(&Tensor) -> Result<()>) -> Result<()> {
    if out.is_contiguous() {
        return launch(out);
    }
    let scratch = Tensor::empty(out.shape(), DType::F32, &out.device())?;
    launch(&scratch)?;
    crate::ops::copy_into(&scratch, out)
}

/// `out[.., t]` = Σ_f `frames[.., f, t − f·hop]` over the frames covering sample t, summed in
/// frame order (the same bits every run): `frames` `[.., n_frames, n]` overlap-added into
/// `[.., (n_frames − 1)·hop + n]`.
///
/// # Errors
/// [`Error::Shape`] for no frames or a hop of 0; dtype and device errors.
pub fn overlap_add_into(frames: &Tensor, hop: usize, out: &Tensor) -> Result<()> {
    const OP: &str = "overlap_add";
    f32_only(OP, frames)?;
    let dev = same_device(OP, &[frames, out])?;
    let s = frames.shape();
    if s.len() < 2 || s[s.len() - 2] == 0 || hop == 0 {
        return Err(Error::shape(
            OP,
            format!("needs frames [.., n_frames ≥ 1, n] and a hop ≥ 1, got {s:?} and {hop}"),
        ));
    }
    let (n_frames, n) = (s[s.len() - 2], s[s.len() - 1]);
    let len = (n_frames - 1)
        .checked_mul(hop)
        .and_then(|l| l.checked_add(n))
        .ok_or_else(|| Error::shape(OP, "the signal length overflows"))?;
    let mut shape = s[..s.len() - 2].to_vec();
    shape.push(len);
    check_out(OP, out, &shape, DType::F32, &dev, &[frames])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let batch = out.numel() / len;
    match &dev {
        Device::Cpu => {
            let v = host_values(frames)?;
            let mut values = Vec::with_capacity(out.numel());
            for b in 0..batch {
                let fr = &v[b * n_frames * n..(b + 1) * n_frames * n];
                values.extend((0..len).map(|t| {
                    let first = if t < n { 0 } else { (t - n) / hop + 1 };
                    let last = (t / hop).min(n_frames - 1);
                    (first..=last).map(|f| fr[f * n + t - f * hop]).sum::<f64>()
                }));
            }
            write_host(out, values)
        }
        Device::Cuda(c) => {
            let frames = frames.contiguous()?;
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&frames)?)
                    .arg(dptr(out_c)?)
                    .arg(u32_dim(OP, batch)?)
                    .arg(u32_dim(OP, n_frames)?)
                    .arg(u32_dim(OP, n)?)
                    .arg(u32_dim(OP, hop)?);
                let cfg = grid::elementwise(out.numel(), c.sm_count());
                // SAFETY: frames is contiguous batch·n_frames·n f32, out_c contiguous batch·len.
                unsafe { c.launch(SignalKernel::OverlapAdd, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// Frames `[.., n_frames, n]` overlap-added with hop `hop` (see [`overlap_add_into`]).
///
/// # Errors
/// As [`overlap_add_into`].
pub fn overlap_add(frames: &Tensor, hop: usize) -> Result<Tensor> {
    let s = frames.shape();
    if s.len() < 2 || s[s.len() - 2] == 0 {
        return Err(Error::shape(
            "overlap_add",
            format!("needs frames [.., n_frames ≥ 1, n], got {s:?}"),
        ));
    }
    let mut shape = s[..s.len() - 2].to_vec();
    shape.push(
        (s[s.len() - 2] - 1)
            .saturating_mul(hop)
            .saturating_add(s[s.len() - 1]),
    );
    let out = Tensor::empty(&shape, DType::F32, &frames.device())?;
    overlap_add_into(frames, hop, &out)?;
    Ok(out)
}

/// `out[.., f]` = the fraction of the `frame_length` samples of frame f (starting at sample
/// `f · hop` of each row of `y` `[.., len]`) whose sign differs from the previous sample's
/// (librosa's `zero_crossing_rate` on frames it has already padded): values within
/// ±`threshold` count as positive zeros, and a frame's first sample as no crossing. `out` is
/// `[.., 1 + (len − frame_length) / hop]`.
///
/// # Errors
/// [`Error::Shape`] for a frame longer than the signal or a hop of 0; dtype and device errors.
pub fn zero_crossing_rate_into(
    y: &Tensor,
    frame_length: usize,
    hop: usize,
    threshold: f32,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "zero_crossing_rate";
    f32_only(OP, y)?;
    let dev = same_device(OP, &[y, out])?;
    let (batch, len) = last_axis(OP, y, "the signal")?;
    if frame_length == 0 || frame_length > len || hop == 0 {
        return Err(Error::shape(
            OP,
            format!("frames of {frame_length} every {hop} do not fit a signal of {len}"),
        ));
    }
    let n_frames = (len - frame_length) / hop + 1;
    let mut shape = batch.to_vec();
    shape.push(n_frames);
    check_out(OP, out, &shape, DType::F32, &dev, &[y])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let rows = out.numel() / n_frames;
    let negative = |v: f64| v < -f64::from(threshold);
    match &dev {
        Device::Cpu => {
            let v = host_values(y)?;
            let mut values = Vec::with_capacity(out.numel());
            for r in 0..rows {
                let row = &v[r * len..(r + 1) * len];
                values.extend((0..n_frames).map(|f| {
                    let x = &row[f * hop..f * hop + frame_length];
                    let count = x
                        .windows(2)
                        .filter(|p| negative(p[0]) != negative(p[1]))
                        .count();
                    count as f64 / frame_length as f64
                }));
            }
            write_host(out, values)
        }
        Device::Cuda(c) => {
            let y = y.contiguous()?;
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&y)?)
                    .arg(dptr(out_c)?)
                    .arg(u32_dim(OP, rows)?)
                    .arg(u32_dim(OP, len)?)
                    .arg(u32_dim(OP, frame_length)?)
                    .arg(u32_dim(OP, hop)?)
                    .arg(u32_dim(OP, n_frames)?)
                    .arg(threshold);
                // A warp per frame: 32 threads per output element.
                let cfg = grid::elementwise(out.numel().saturating_mul(32), c.sm_count());
                // SAFETY: y is contiguous rows·len f32 and every frame lies inside its row;
                // out_c is contiguous rows·n_frames.
                unsafe { c.launch(SignalKernel::ZeroCrossingRate, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}
