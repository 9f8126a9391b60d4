//! Filters and orderings along an axis: first-order recurrences (prefix sums, IIR filters),
//! polyphase upsample–filter–downsample, median filters and sorts.
//!
//! On CUDA each runs one kernel of `gpukit_kernels::signal` (a thread per line, output or row,
//! so every run gives the same bits); on the CPU the same arithmetic in the same order
//! ([`linear_recurrence_into`]) or in f64 ([`upfirdn_into`]), and the exact orderings
//! ([`median_filter_into`], [`sort_into`]).

use gpukit_driver::LaunchConfig;
use gpukit_kernels::shared::{MEDIAN_MAX_SIZE, SORT_MAX_POINTS};

use super::{DType, Error, Result, check_out, dptr, host_values, same_device, u32_dim, write_host};
use super::{Device, DevicePtr, KernelArgs, PadMode, SignalKernel, Tensor, grid};
use super::{f32_only, last_axis, pad_source, with_contiguous_out};

/// `x`'s shape split around `axis`: (product of the axes before, its length, product after).
fn around_axis(op: &'static str, x: &Tensor, axis: usize) -> Result<(usize, usize, usize)> {
    let s = x.shape();
    if axis >= s.len() {
        return Err(Error::shape(
            op,
            format!("axis {axis} out of range for shape {s:?}"),
        ));
    }
    Ok((
        s[..axis].iter().product(),
        s[axis],
        s[axis + 1..].iter().product(),
    ))
}

/// `out` = the first-order recurrence `y[n] = x[n] + a·y[n − 1]` along `axis` of `x`, starting
/// from `y[−1]` = `init` (shaped like `x` with `axis` of length 1; zeros without it): the prefix
/// sum for a = 1 ([`cumsum`]), and scipy's `lfilter([1], [1, −a], x, zi = a·init)` — a
/// one-pole IIR filter such as de-emphasis — otherwise. Each step is one f32 fused
/// multiply-add, in order along the axis, on both devices: the CPU and CUDA give the same bits.
///
/// # Errors
/// Shape errors for an axis out of range or an `init` of the wrong shape; dtype and device
/// errors.
pub fn linear_recurrence_into(
    x: &Tensor,
    axis: usize,
    a: f32,
    init: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "linear_recurrence";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (outer, len, inner) = around_axis(OP, x, axis)?;
    check_out(OP, out, x.shape(), DType::F32, &dev, &[x])?;
    if let Some(init) = init {
        f32_only(OP, init)?;
        same_device(OP, &[x, init])?;
        let mut want = x.shape().to_vec();
        want[axis] = 1;
        if init.shape() != want.as_slice() {
            return Err(Error::shape(
                OP,
                format!(
                    "init must be {want:?} (x {:?} with axis {axis} of length 1), got {:?}",
                    x.shape(),
                    init.shape()
                ),
            ));
        }
    }
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let start = match init {
                Some(t) => host_values(t)?,
                None => vec![0.0; outer * inner],
            };
            let mut y = vec![0.0; v.len()];
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = start[o * inner + i] as f32;
                    for n in 0..len {
                        let e = (o * len + n) * inner + i;
                        acc = a.mul_add(acc, v[e] as f32);
                        y[e] = f64::from(acc);
                    }
                }
            }
            write_host(out, y)
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            let init = init.map(Tensor::contiguous).transpose()?;
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(init.as_ref().map_or(Ok(DevicePtr(0)), dptr)?)
                    .arg(dptr(out_c)?)
                    .arg(outer as u64)
                    .arg(u32_dim(OP, len)?)
                    .arg(inner as u64)
                    .arg(a);
                let cfg = grid::elementwise(outer * inner, c.sm_count());
                // SAFETY: x and out_c are contiguous [outer, len, inner] f32; init, when
                // given, contiguous [outer, inner].
                unsafe { c.launch(SignalKernel::LinearRecurrence, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// The first-order recurrence along `axis` (see [`linear_recurrence_into`]).
///
/// # Errors
/// As [`linear_recurrence_into`].
pub fn linear_recurrence(x: &Tensor, axis: usize, a: f32, init: Option<&Tensor>) -> Result<Tensor> {
    let out = Tensor::empty(x.shape(), DType::F32, &x.device())?;
    linear_recurrence_into(x, axis, a, init, &out)?;
    Ok(out)
}

/// The inclusive prefix sum of `x` along `axis`, accumulated in f32 in order (numpy's
/// `cumsum` on f32).
///
/// # Errors
/// As [`linear_recurrence_into`].
pub fn cumsum(x: &Tensor, axis: usize) -> Result<Tensor> {
    linear_recurrence(x, axis, 1.0, None)
}

/// `out[.., k]` = Σ_j `h[j]`·u[k·`down` + `offset` − j], where u is the row of `x` `[.., n_in]`
/// upsampled by `up` (sample m at position m·`up`, zeros between) and `h` `[taps]` an FIR
/// filter: scipy's `upfirdn(h, x, up, down)` from its output index `offset / down` on (a
/// polyphase filter: only the taps j ≡ k·down + offset (mod up) meet a sample). `out` is
/// `[.., n_out]`; outputs past the signal are zero. The building block of polyphase resampling
/// (`scipy.signal.resample_poly`).
///
/// # Errors
/// [`Error::Shape`] for an `h` that is not 1-D and non-empty, or `up` or `down` of 0; dtype and
/// device errors.
pub fn upfirdn_into(
    x: &Tensor,
    h: &Tensor,
    up: usize,
    down: usize,
    offset: i64,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "upfirdn";
    f32_only(OP, x)?;
    f32_only(OP, h)?;
    let dev = same_device(OP, &[x, h, out])?;
    let (batch, n_in) = last_axis(OP, x, "the signal")?;
    if h.shape().len() != 1 || h.numel() == 0 || up == 0 || down == 0 {
        return Err(Error::shape(
            OP,
            format!(
                "needs a 1-D filter of at least one tap and up, down ≥ 1, got h {:?}, up {up}, \
                 down {down}",
                h.shape()
            ),
        ));
    }
    let n_out = *out.shape().last().unwrap_or(&0);
    let mut shape = batch.to_vec();
    shape.push(n_out);
    check_out(OP, out, &shape, DType::F32, &dev, &[x, h])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let rows = out.numel() / n_out;
    let taps = h.numel();
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let hv = host_values(h)?;
            let mut values = Vec::with_capacity(out.numel());
            for r in 0..rows {
                let row = &v[r * n_in..(r + 1) * n_in];
                values.extend((0..n_out).map(|k| {
                    let t = k as i64 * down as i64 + offset;
                    (0..taps)
                        .filter(|&j| (t - j as i64).rem_euclid(up as i64) == 0)
                        .filter_map(|j| {
                            let m = (t - j as i64).div_euclid(up as i64);
                            usize::try_from(m)
                                .ok()
                                .and_then(|m| row.get(m))
                                .map(|&s| hv[j] * s)
                        })
                        .sum::<f64>()
                }));
            }
            write_host(out, values)
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            let h = h.contiguous()?;
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(dptr(&h)?)
                    .arg(dptr(out_c)?)
                    .arg(u32_dim(OP, rows)?)
                    .arg(u32_dim(OP, n_in)?)
                    .arg(u32_dim(OP, n_out)?)
                    .arg(u32_dim(OP, taps)?)
                    .arg(u32_dim(OP, up)?)
                    .arg(u32_dim(OP, down)?)
                    .arg(offset);
                let cfg = grid::elementwise(out.numel(), c.sm_count());
                // SAFETY: x contiguous [rows, n_in], h [taps], out_c contiguous [rows, n_out];
                // the kernel reads only samples inside a row and taps below `taps`.
                unsafe { c.launch(SignalKernel::Upfirdn, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// `n_out` outputs of [`upfirdn_into`] per row.
///
/// # Errors
/// As [`upfirdn_into`].
pub fn upfirdn(
    x: &Tensor,
    h: &Tensor,
    up: usize,
    down: usize,
    offset: i64,
    n_out: usize,
) -> Result<Tensor> {
    let (batch, _) = last_axis("upfirdn", x, "the signal")?;
    let mut shape = batch.to_vec();
    shape.push(n_out);
    let out = Tensor::empty(&shape, DType::F32, &x.device())?;
    upfirdn_into(x, h, up, down, offset, &out)?;
    Ok(out)
}

/// `out` = the sliding median of `x` along `axis` over windows of `size` samples: output n takes
/// the value of rank ⌊size/2⌋ among positions n − ⌊size/2⌋ … n − ⌊size/2⌋ + size − 1 (the
/// median for an odd size, the upper median for an even one), positions outside the axis
/// filled by `mode` (`value` for [`PadMode::Constant`]) — `scipy.ndimage.median_filter` with a
/// window along one axis, whose `"reflect"` is [`PadMode::Symmetric`], `"mirror"`
/// [`PadMode::Reflect`] and `"nearest"` [`PadMode::Edge`]. NaNs give an unspecified result.
///
/// # Errors
/// [`Error::Shape`] for a size of 0 or above 255, an axis out of range, or an empty axis padded
/// by a mode other than constant; dtype and device errors.
pub fn median_filter_into(
    x: &Tensor,
    axis: usize,
    size: usize,
    mode: PadMode,
    value: f32,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "median_filter";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (outer, len, inner) = around_axis(OP, x, axis)?;
    if size == 0 || size > MEDIAN_MAX_SIZE {
        return Err(Error::shape(
            OP,
            format!("the window must hold 1 to {MEDIAN_MAX_SIZE} samples, got {size}"),
        ));
    }
    check_out(OP, out, x.shape(), DType::F32, &dev, &[x])?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let rank = size / 2;
            let mut y = vec![0.0; v.len()];
            let mut window = Vec::with_capacity(size);
            for o in 0..outer {
                for i in 0..inner {
                    let at = |n: usize| (o * len + n) * inner + i;
                    for n in 0..len {
                        window.clear();
                        window.extend((0..size).map(|k| {
                            let j = n as isize - rank as isize + k as isize;
                            pad_source(j, len, mode).map_or(f64::from(value), |s| v[at(s)])
                        }));
                        window.sort_by(f64::total_cmp);
                        y[at(n)] = window[rank];
                    }
                }
            }
            write_host(out, y)
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(dptr(out_c)?)
                    .arg(outer as u64)
                    .arg(u32_dim(OP, len)?)
                    .arg(inner as u64)
                    .arg(size as u32)
                    .arg(mode.code() as u32)
                    .arg(value);
                let cfg = grid::elementwise(out.numel(), c.sm_count());
                // SAFETY: x and out_c are contiguous [outer, len, inner] f32 and size is at
                // most the kernel's window array; reads go through pad_source inside the axis.
                unsafe { c.launch(SignalKernel::MedianFilter, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// The sliding median along `axis` (see [`median_filter_into`]).
///
/// # Errors
/// As [`median_filter_into`].
pub fn median_filter(
    x: &Tensor,
    axis: usize,
    size: usize,
    mode: PadMode,
    value: f32,
) -> Result<Tensor> {
    let out = Tensor::empty(x.shape(), DType::F32, &x.device())?;
    median_filter_into(x, axis, size, mode, value, &out)?;
    Ok(out)
}

/// `out` = each row (last axis) of `x` sorted in ascending order (`np.sort` on the last axis).
/// Rows holding NaN come out in an unspecified order.
///
/// # Errors
/// [`Error::Shape`] for rows longer than 8192 on CUDA (a block sorts a row in shared memory);
/// dtype and device errors.
pub fn sort_into(x: &Tensor, out: &Tensor) -> Result<()> {
    const OP: &str = "sort";
    f32_only(OP, x)?;
    let dev = same_device(OP, &[x, out])?;
    let (_, len) = last_axis(OP, x, "the rows")?;
    check_out(OP, out, x.shape(), DType::F32, &dev, &[x])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let rows = out.numel() / len;
    match &dev {
        Device::Cpu => {
            let mut v = host_values(x)?;
            for row in v.chunks_mut(len) {
                row.sort_by(f64::total_cmp);
            }
            write_host(out, v)
        }
        Device::Cuda(c) => {
            if len > SORT_MAX_POINTS {
                return Err(Error::shape(
                    OP,
                    format!("rows of up to {SORT_MAX_POINTS} values on CUDA, got {len}"),
                ));
            }
            let x = x.contiguous()?;
            let points = len.next_power_of_two();
            with_contiguous_out(out, |out_c| {
                let args = KernelArgs::new()
                    .arg(dptr(&x)?)
                    .arg(dptr(out_c)?)
                    .arg(u32_dim(OP, rows)?)
                    .arg(len as u32)
                    .arg(points as u32);
                let threads = (points as u32).clamp(32, 512);
                let cfg = LaunchConfig::new(rows.min(1 << 20) as u32, threads)
                    .shared_mem((points * 4) as u32);
                // SAFETY: x and out_c are contiguous [rows, len] f32; the block's shared
                // memory holds `points` ≤ SORT_MAX_POINTS f32.
                unsafe { c.launch(SignalKernel::Sort, &cfg, &args) }?;
                Ok(())
            })
        }
    }
}

/// Each row of `x` sorted ascending (see [`sort_into`]).
///
/// # Errors
/// As [`sort_into`].
pub fn sort(x: &Tensor) -> Result<Tensor> {
    let out = Tensor::empty(x.shape(), DType::F32, &x.device())?;
    sort_into(x, &out)?;
    Ok(out)
}
