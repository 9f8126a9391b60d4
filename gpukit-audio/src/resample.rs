//! Sample-rate conversion (`librosa.resample` with `res_type="polyphase"` or `"fft"`).
//!
//! [`ResType::Polyphase`] is `scipy.signal.resample_poly`: the rates reduced to up/down by
//! their greatest common divisor, a Kaiser-windowed sinc lowpass (β = 5, 20·max(up, down) + 1
//! taps, cut-off at the lower Nyquist frequency) designed here in f64 as scipy's `firwin`
//! designs it, applied by the polyphase `upfirdn` kernel. [`ResType::Fft`] is
//! `scipy.signal.resample`: the spectrum truncated or zero-padded to the new length. librosa's
//! default, soxr, is a different filter and is not implemented.

use std::f64::consts::PI;

use gpukit_ops::signal::{self, PadMode};
use gpukit_ops::{BinaryOp, ScalarOp, ops};
use gpukit_ops::{DType, Tensor};

use crate::{Error, Result};

/// A resampling method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResType {
    /// Polyphase windowed-sinc filtering (`scipy.signal.resample_poly`); integer rates only.
    Polyphase,
    /// Fourier-domain resampling (`scipy.signal.resample`), any rates.
    Fft,
}

/// The modified Bessel function of the first kind, order 0 (its power series; converges for
/// every x, quickly for the Kaiser β used here).
fn bessel_i0(x: f64) -> f64 {
    let q = x * x / 4.0;
    let (mut term, mut sum, mut k) = (1.0, 1.0, 1.0);
    while term > sum * 1e-17 {
        term *= q / (k * k);
        sum += term;
        k += 1.0;
    }
    sum
}

/// A linear-phase lowpass FIR filter of `taps` coefficients: the ideal filter
/// `cutoff · sinc(cutoff · m)` (cut-off as a fraction of the Nyquist frequency) times a
/// symmetric Kaiser window of shape `beta`, scaled to unit gain at DC —
/// `scipy.signal.firwin(taps, cutoff, window=("kaiser", beta))` (Kaiser 1974).
pub fn kaiser_lowpass(taps: usize, cutoff: f64, beta: f64) -> Vec<f64> {
    let alpha = 0.5 * taps.saturating_sub(1) as f64;
    let sinc = |x: f64| {
        if x == 0.0 {
            1.0
        } else {
            (PI * x).sin() / (PI * x)
        }
    };
    let h: Vec<f64> = (0..taps)
        .map(|n| {
            let m = n as f64 - alpha;
            let w = if alpha == 0.0 {
                1.0
            } else {
                let r = m / alpha;
                bessel_i0(beta * (1.0 - r * r).max(0.0).sqrt()) / bessel_i0(beta)
            };
            cutoff * sinc(cutoff * m) * w
        })
        .collect();
    let gain: f64 = h.iter().sum();
    h.iter().map(|v| v / gain).collect()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `y` `[.., n]` resampled along its last axis from `orig_sr` to `target_sr` Hz
/// (`librosa.resample`): `ceil(n · target_sr / orig_sr)` samples when `fix` (else the
/// method's own length, the same for both methods here), divided by √(target_sr / orig_sr)
/// when `scale`.
///
/// # Errors
/// [`Error::Invalid`] for rates that are not positive and finite, non-integer rates with
/// [`ResType::Polyphase`], or an empty signal; tensor errors.
pub fn resample(
    y: &Tensor,
    orig_sr: f64,
    target_sr: f64,
    res_type: ResType,
    fix: bool,
    scale: bool,
) -> Result<Tensor> {
    const F: &str = "resample";
    let ok = |r: f64| r.is_finite() && r > 0.0;
    if !ok(orig_sr) || !ok(target_sr) {
        return Err(Error::invalid(
            F,
            format!("rates must be positive, got {orig_sr} and {target_sr}"),
        ));
    }
    let n = match y.shape().last() {
        Some(&n) if n > 0 => n,
        _ => {
            return Err(Error::invalid(
                F,
                format!("needs a signal [.., samples ≥ 1], got {:?}", y.shape()),
            ));
        }
    };
    if orig_sr == target_sr {
        return Ok(y.clone());
    }
    let ratio = target_sr / orig_sr;
    let n_samples = (n as f64 * ratio).ceil() as usize;
    let axis = y.rank() - 1;
    let y_hat = match res_type {
        ResType::Polyphase => {
            if orig_sr.fract() != 0.0 || target_sr.fract() != 0.0 {
                return Err(Error::invalid(
                    F,
                    format!(
                        "polyphase resampling needs integer rates, got {orig_sr} and \
                         {target_sr} (use the fft method)"
                    ),
                ));
            }
            let (o, t) = (orig_sr as u64, target_sr as u64);
            let g = gcd(o, t);
            let (up, down) = ((t / g) as usize, (o / g) as usize);
            let max_rate = up.max(down);
            let half_len = 10 * max_rate;
            // scipy rounds the filter to the signal's dtype, then scales it by `up`.
            let h: Vec<f32> = kaiser_lowpass(2 * half_len + 1, 1.0 / max_rate as f64, 5.0)
                .iter()
                .map(|&v| v as f32 * up as f32)
                .collect();
            let h = Tensor::from_slice(&h, &[h.len()], &y.device())?;
            let n_pre_pad = down - half_len % down;
            let n_pre_remove = (half_len + n_pre_pad) / down;
            let offset = (n_pre_remove * down) as i64 - n_pre_pad as i64;
            let n_out = (n * up).div_ceil(down);
            signal::upfirdn(y, &h, up, down, offset, n_out)?
        }
        ResType::Fft => {
            let num = n_samples;
            let spectrum = signal::rfft(y, None)?;
            let m = num.min(n);
            let keep = m / 2 + 1;
            let mut kept = spectrum.narrow(axis, 0, keep)?;
            if m % 2 == 0 && num != n {
                // The bin at m/2 is the shorter signal's Nyquist bin: doubled when shortening
                // (its conjugate folds onto it), halved when lengthening (it splits in two).
                let mut gain = vec![1f32; keep];
                gain[m / 2] = if num < n { 2.0 } else { 0.5 };
                let gain = Tensor::from_slice(&gain, &[keep, 1], &y.device())?;
                kept = ops::binary(BinaryOp::Mul, &kept, &gain)?;
            }
            let scaled = ops::scalar(ScalarOp::Div, &kept, (n as f64 / num as f64) as f32)?;
            let bins = num / 2 + 1;
            let full = if bins > keep {
                let mut shape = scaled.shape().to_vec();
                shape[axis] = bins - keep;
                let zeros = Tensor::zeros(&shape, DType::F32, &y.device())?;
                ops::concat(&[&scaled, &zeros], axis)?
            } else {
                scaled
            };
            signal::irfft(&full, num, None)?
        }
    };
    let len = *y_hat.shape().last().unwrap_or(&0);
    let y_hat = if fix && len > n_samples {
        y_hat.narrow(axis, 0, n_samples)?
    } else if fix && len < n_samples {
        signal::pad(&y_hat, 0, n_samples - len, PadMode::Constant, 0.0)?
    } else {
        y_hat
    };
    Ok(if scale {
        ops::scalar(ScalarOp::Div, &y_hat, ratio.sqrt() as f32)?
    } else {
        y_hat
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kaiser_lowpass_is_symmetric_with_unit_gain() {
        let h = kaiser_lowpass(61, 1.0 / 3.0, 5.0);
        assert!((h.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for i in 0..30 {
            assert!((h[i] - h[60 - i]).abs() < 1e-15);
        }
        // I0(0) = 1; I0(1) = 1.2660658777520082 (Abramowitz & Stegun table 9.8).
        assert_eq!(bessel_i0(0.0), 1.0);
        assert!((bessel_i0(1.0) - 1.266_065_877_752_008_2).abs() < 1e-15);
    }
}
