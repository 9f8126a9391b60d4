//! DFTs longer than one block's shared memory holds, on CUDA: composed from launches of the FFT
//! kernel and elementwise ops.
//!
//! A length that is a product of 2, 3 and 5 splits as n = n1·n2 (the four-step algorithm:
//! n2 transforms of length n1, twiddle factors, n1 transforms of length n2; Bailey 1990), each
//! factor again if it is still too long. Any other length runs Bluestein's algorithm: the DFT as
//! a convolution with a chirp, computed by power-of-two transforms (Bluestein 1970). Real
//! transforms run as complex ones. Twiddles and chirps are computed in f64 on the host.

use std::f64::consts::PI;

use super::{Checked, FftOutput, complex_abs, complex_from_parts, complex_mul, complex_parts};
use super::{CudaDevice, DType, Error, FftMode, Result, Tensor, ksignal, launch_fft};
use crate::ops;
use crate::{BinaryOp, UnaryOp};

/// Whether one launch of the FFT kernel transforms length `n` in `mode` on `c`.
pub(super) fn fits(c: &CudaDevice, mode: FftMode, n: usize) -> bool {
    let smem = c.props().shared_memory_per_block_optin_bytes as usize;
    ksignal::fft(mode, n, 1, smem).is_ok()
}

/// `e^(i·angle)` for each angle (0 for `None`), as `[shape.., 2]` f32 on the device.
fn phasors(
    c: &CudaDevice,
    angles: impl Iterator<Item = Option<f64>>,
    shape: &[usize],
) -> Result<Tensor> {
    let v: Vec<f32> = angles
        .flat_map(|t| t.map_or([0.0, 0.0], |t| [t.cos() as f32, t.sin() as f32]))
        .collect();
    let mut s = shape.to_vec();
    s.push(2);
    Tensor::from_slice(&v, &s, &crate::Device::Cuda(c.clone()))
}

/// The unnormalised DFTs `X_k = Σ_j x_j e^(sign·2πi jk/n)` of the rows of `x` (contiguous
/// `[rows, n, 2]`), any n: one launch when it fits, else four-step or Bluestein.
pub(super) fn dft(c: &CudaDevice, x: &Tensor, sign: i32) -> Result<Tensor> {
    let (rows, n) = (x.shape()[0], x.shape()[1]);
    if fits(c, FftMode::C2c, n) {
        let out = Tensor::empty(x.shape(), DType::F32, &x.device())?;
        launch_fft(
            c,
            "fft",
            FftMode::C2c,
            FftOutput::Complex,
            x,
            &out,
            None,
            n,
            sign,
            1.0,
        )?;
        return Ok(out);
    }
    if ksignal::smooth(n) {
        return four_step(c, x, rows, n, sign);
    }
    bluestein(c, x, rows, n, sign)
}

/// n = n1·n2 with n1 the largest divisor of n that fits one launch and is at most √n.
fn four_step(c: &CudaDevice, x: &Tensor, rows: usize, n: usize, sign: i32) -> Result<Tensor> {
    let n1 = (1..=n)
        .take_while(|d| d * d <= n)
        .filter(|d| n.is_multiple_of(*d) && fits(c, FftMode::C2c, *d))
        .last()
        .unwrap_or(1);
    let n2 = n / n1;
    if n1 == 1 {
        return Err(Error::shape(
            "fft",
            format!("no factor of {n} fits one transform"),
        ));
    }
    // j = n2·j1 + j2: transforms over j1 for each j2.
    let columns = x
        .reshape(&[rows, n1, n2, 2])?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(&[rows * n2, n1, 2])?;
    let a = dft(c, &columns, sign)?
        .reshape(&[rows, n2, n1, 2])?
        .transpose(1, 2)?
        .contiguous()?;
    // Twiddles e^(sign·2πi·j2·k1/n), [n1 (k1), n2 (j2)].
    let twiddle = phasors(
        c,
        (0..n1).flat_map(|k1| {
            (0..n2).map(move |j2| Some(sign as f64 * 2.0 * PI * ((k1 * j2) % n) as f64 / n as f64))
        }),
        &[n1, n2],
    )?;
    let a = complex_mul(&a, &twiddle)?.reshape(&[rows * n1, n2, 2])?;
    // Transforms over j2 for each k1; X[k1 + n1·k2].
    dft(c, &a, sign)?
        .reshape(&[rows, n1, n2, 2])?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(&[rows, n, 2])
}

/// X_k = c_k · Σ_j (x_j c_j) · conj(c_{k−j}) with the chirp c_j = e^(sign·πi j²/n): a
/// convolution, by transforms of a power-of-two length m ≥ 2n − 1.
fn bluestein(c: &CudaDevice, x: &Tensor, rows: usize, n: usize, sign: i32) -> Result<Tensor> {
    let m = (2 * n - 1).next_power_of_two();
    // j² mod 2n keeps the angle exact in f64 for any n.
    let chirp_angle = |j: usize| sign as f64 * PI * ((j * j) % (2 * n)) as f64 / n as f64;
    let chirp = phasors(c, (0..n).map(|j| Some(chirp_angle(j))), &[n])?;
    // The filter conj(c) at lags 0..n−1 and, wrapped, −(n−1)..−1; zero between.
    let filter = phasors(
        c,
        (0..m).map(|i| {
            if i < n {
                Some(-chirp_angle(i))
            } else if i > m - n {
                Some(-chirp_angle(m - i))
            } else {
                None
            }
        }),
        &[m],
    )?;
    let filter_spectrum = dft(c, &filter.reshape(&[1, m, 2])?, -1)?;
    let a = complex_mul(x, &chirp)?;
    let padded = ops::concat(
        &[
            &a,
            &Tensor::zeros(&[rows, m - n, 2], DType::F32, &x.device())?,
        ],
        1,
    )?;
    let spectrum = complex_mul(&dft(c, &padded, -1)?, &filter_spectrum)?;
    let conv = dft(c, &spectrum, 1)?;
    let conv = ops::scalar(crate::ScalarOp::Mul, &conv.narrow(1, 0, n)?, 1.0 / m as f32)?;
    complex_mul(&conv, &chirp)
}

/// [`super::rfft_into`] on CUDA for lengths one launch cannot hold: the window applied, the
/// complex DFT of the real rows, its first n/2 + 1 bins in `output`'s form.
pub(super) fn rfft(
    c: &CudaDevice,
    x: &Tensor,
    window: Option<&Checked>,
    output: FftOutput,
    n: usize,
    out: &Tensor,
) -> Result<()> {
    let rows = x.numel() / n;
    let mut x = x.contiguous()?.reshape(&[rows, n])?;
    if let Some(w) = window {
        x = ops::binary(BinaryOp::Mul, &x, &window_tensor(w, n, &x.device())?)?;
    }
    let z = complex_from_parts(&x, &Tensor::zeros(&[rows, n], DType::F32, &x.device())?)?;
    let bins = dft(c, &z, -1)?.narrow(1, 0, n / 2 + 1)?;
    let result = match output {
        FftOutput::Complex => bins,
        FftOutput::Magnitude => complex_abs(&bins)?,
        FftOutput::Power => ops::sum(&ops::unary(UnaryOp::Square, &bins)?, 2)?,
    };
    ops::copy_into(&result.reshape(out.shape())?, out)
}

/// [`super::irfft_into`] on CUDA for lengths one launch cannot hold: the Hermitian spectrum
/// completed (the imaginary parts of the zero and Nyquist bins dropped), its inverse DFT's real
/// part divided by n, times the window.
pub(super) fn irfft(
    c: &CudaDevice,
    x: &Tensor,
    window: Option<&Checked>,
    n: usize,
    out: &Tensor,
) -> Result<()> {
    let bins = n / 2 + 1;
    let rows = x.numel() / (2 * bins);
    let dev = x.device();
    let half = x.contiguous()?.reshape(&[rows, bins, 2])?;
    // Bin 0's (and the Nyquist bin's) imaginary part is ignored.
    let mut mask = vec![1f32; 2 * bins];
    mask[1] = 0.0;
    if n.is_multiple_of(2) {
        mask[2 * (bins - 1) + 1] = 0.0;
    }
    let half = ops::binary(
        BinaryOp::Mul,
        &half,
        &Tensor::from_slice(&mask, &[bins, 2], &dev)?,
    )?;
    // Bins n/2+1 .. n−1 are the conjugates of bins n−k.
    let mirror: Vec<i64> = (bins..n).map(|k| (n - k) as i64).collect();
    let full = if mirror.is_empty() {
        half
    } else {
        let ids = Tensor::from_slice(&mirror, &[mirror.len()], &dev)?;
        let upper = ops::index_select(&half, 1, &ids)?;
        let conj = Tensor::from_slice(&[1f32, -1.0], &[2], &dev)?;
        let upper = ops::binary(BinaryOp::Mul, &upper, &conj)?;
        ops::concat(&[&half, &upper], 1)?
    };
    let (re, _) = complex_parts(&dft(c, &full, 1)?)?;
    let mut y = ops::scalar(crate::ScalarOp::Mul, &re, 1.0 / n as f32)?;
    if let Some(w) = window {
        y = ops::binary(BinaryOp::Mul, &y, &window_tensor(w, n, &dev)?)?;
    }
    ops::copy_into(&y.reshape(out.shape())?, out)
}

/// A checked window's `n` values as a tensor on `dev`.
fn window_tensor(w: &Checked, n: usize, dev: &crate::Device) -> Result<Tensor> {
    match w {
        Checked::Values(t) => Ok(t.clone()),
        Checked::Function(..) => {
            let v: Vec<f32> = w.values(n)?.iter().map(|&x| x as f32).collect();
            Tensor::from_slice(&v, &[n], dev)
        }
    }
}
