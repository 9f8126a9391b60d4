//! The constant-Q transform (Brown 1991; Schörkhuber & Klapuri 2010) as `librosa.cqt`
//! computes it: per octave, from the top, the STFT (rectangular window) of the signal at that
//! octave's rate projected onto the FFTs of windowed complex sinusoids (wavelets) — sparsified
//! as librosa sparsifies them — then the signal halved in rate by polyphase resampling for the
//! next octave. The filters are designed on the host in f64; the STFTs, resampling and the
//! projection (one real matmul per octave) run on the signal's device.

use std::f64::consts::PI;

use gpukit_ops::signal::PadMode;
use gpukit_ops::{BinaryOp, ScalarOp, Tensor, ops};
use rustfft::FftPlanner;
use rustfft::num_complex::Complex64;

use crate::resample::{ResType, resample};
use crate::spectrum::{Stft, stft};
use crate::window::Window;
use crate::{Error, Result};

/// Constant-Q parameters (librosa's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cqt {
    /// Sample rate, Hz (22 050).
    pub sr: f64,
    /// Samples between frames (512); halved per octave while even.
    pub hop_length: usize,
    /// Lowest frequency, Hz (`None`: C1, 32.70 Hz).
    pub fmin: Option<f64>,
    /// Frequency bins (84).
    pub n_bins: usize,
    /// Bins per octave (12).
    pub bins_per_octave: usize,
    /// Tuning offset in fractions of a bin (0).
    pub tuning: f64,
    /// Filter length scale (1).
    pub filter_scale: f64,
    /// Each filter's normalisation: `Some(p)` divides by its L^p norm (1; ∞ allowed), `None`
    /// none.
    pub norm: Option<f64>,
    /// Fraction of each filter's spectral magnitude dropped from its smallest bins (0.01).
    pub sparsity: f64,
    /// The wavelets' window (Hann).
    pub window: Window,
    /// Divide each bin by √(its filter length), so a tone's level does not depend on its bin.
    pub scale: bool,
    /// How each octave's STFT pads its ends (zeros).
    pub pad_mode: PadMode,
    /// How the signal is halved in rate between octaves (librosa's default, soxr, is not
    /// implemented: polyphase).
    pub res_type: ResType,
}

impl Default for Cqt {
    fn default() -> Self {
        Cqt {
            sr: 22050.0,
            hop_length: 512,
            fmin: None,
            n_bins: 84,
            bins_per_octave: 12,
            tuning: 0.0,
            filter_scale: 1.0,
            norm: Some(1.0),
            sparsity: 0.01,
            window: Window::Hann,
            scale: true,
            pad_mode: PadMode::Constant,
            res_type: ResType::Polyphase,
        }
    }
}

/// C1 in Hz (`librosa.note_to_hz("C1")`).
const C1: f64 = 32.703_195_662_574_83;

impl Cqt {
    /// The centre frequencies in Hz, ascending (`librosa.cqt_frequencies`, computed as
    /// `interval_frequencies` computes them: octave powers times equal-tempered ratios).
    pub fn frequencies(&self) -> Vec<f64> {
        let bpo = self.bins_per_octave;
        let fmin = self.fmin.unwrap_or(C1) * 2f64.powf(self.tuning / bpo as f64);
        let mut ratios: Vec<f64> = (0..self.n_bins)
            .map(|k| 2f64.powi((k / bpo) as i32) * 2f64.powf((k % bpo) as f64 / bpo as f64))
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios.iter().map(|r| r * fmin).collect()
    }
}

/// Each frequency's bandwidth relative to itself, from its neighbours' log spacing
/// (`librosa.filters._relative_bandwidth`).
fn relative_bandwidth(freqs: &[f64], bins_per_octave: usize) -> Vec<f64> {
    let n = freqs.len();
    let alpha = |bpo: f64| (2f64.powf(2.0 / bpo) - 1.0) / (2f64.powf(2.0 / bpo) + 1.0);
    if n == 1 {
        return vec![alpha(bins_per_octave as f64)];
    }
    let logf: Vec<f64> = freqs.iter().map(|f| f.log2()).collect();
    (0..n)
        .map(|i| {
            let bpo = match i {
                0 => 1.0 / (logf[1] - logf[0]),
                _ if i == n - 1 => 1.0 / (logf[n - 1] - logf[n - 2]),
                _ => 2.0 / (logf[i + 1] - logf[i - 1]),
            };
            alpha(bpo)
        })
        .collect()
}

/// Filter lengths in samples at `sr` and the highest cut-off frequency
/// (`librosa.filters.wavelet_lengths` with γ = 0).
fn wavelet_lengths(freqs: &[f64], alpha: &[f64], sr: f64, p: &Cqt) -> (Vec<f64>, f64) {
    let mut cutoff = f64::MIN;
    let lengths = freqs
        .iter()
        .zip(alpha)
        .map(|(&f, &a)| {
            let q = p.filter_scale / a;
            cutoff = cutoff.max(f * (1.0 + 0.5 * p.window.bandwidth() / q));
            q * sr / f
        })
        .collect();
    (lengths, cutoff)
}

/// An octave's filters in the frequency domain: `[n_filters, n_fft/2 + 1]` complex, row-major,
/// and n_fft (`__vqt_filter_fft` then `sparsify_rows`, scaled by √(sr / octave rate)).
fn octave_basis(freqs: &[f64], alpha: &[f64], octave_sr: f64, p: &Cqt) -> (Vec<Complex64>, usize) {
    let (lengths, _) = wavelet_lengths(freqs, alpha, octave_sr, p);
    let longest = lengths.iter().copied().fold(0.0, f64::max);
    let n_fft = 2f64.powf(longest.log2().ceil()) as usize;
    let bins = n_fft / 2 + 1;
    let mut planner = FftPlanner::<f64>::new();
    let fft = planner.plan_fft_forward(n_fft);
    let mut basis = Vec::with_capacity(freqs.len() * bins);
    for (&f, &len) in freqs.iter().zip(&lengths) {
        // np.arange(−len // 2, len // 2): the wavelet's sample positions around its centre.
        let (start, stop) = ((-len / 2.0).floor() as i64, (len / 2.0).floor() as i64);
        let n = (stop - start) as usize;
        let window = p.window.values(n);
        let mut sig: Vec<Complex64> = (start..stop)
            .zip(&window)
            .map(|(pos, w)| Complex64::from_polar(1.0, pos as f64 * 2.0 * PI * f / octave_sr) * w)
            .collect();
        if let Some(norm) = p.norm {
            let total = if norm.is_infinite() {
                sig.iter().map(|z| z.norm()).fold(0.0, f64::max)
            } else {
                sig.iter()
                    .map(|z| z.norm().powf(norm))
                    .sum::<f64>()
                    .powf(1.0 / norm)
            };
            if total > f64::from(f32::MIN_POSITIVE) {
                sig.iter_mut().for_each(|z| *z /= total);
            }
        }
        // Centred in n_fft, rounded to complex64 as librosa stores it, then scaled.
        let mut row = vec![Complex64::default(); n_fft];
        let left = (n_fft - n) / 2;
        for (r, z) in row[left..left + n].iter_mut().zip(&sig) {
            let z32 = Complex64::new(f64::from(z.re as f32), f64::from(z.im as f32));
            *r = z32 * (len / n_fft as f64);
        }
        fft.process(&mut row);
        row.truncate(bins);
        sparsify(&mut row, p.sparsity);
        let gain = (p.sr / octave_sr).sqrt();
        basis.extend(row.iter().map(|z| z * gain));
    }
    (basis, n_fft)
}

/// Zeroes the smallest entries of `row` holding less than `quantile` of its summed magnitude
/// (`librosa.util.sparsify_rows`).
fn sparsify(row: &mut [Complex64], quantile: f64) {
    let mags: Vec<f64> = row.iter().map(|z| z.norm()).collect();
    let total: f64 = mags.iter().sum();
    let mut sorted = mags.clone();
    sorted.sort_by(f64::total_cmp);
    let mut cumulative = 0.0;
    let mut threshold = sorted[0];
    for &m in &sorted {
        cumulative += m / total;
        if cumulative >= quantile {
            threshold = m;
            break;
        }
    }
    for (z, m) in row.iter_mut().zip(&mags) {
        if *m < threshold {
            *z = Complex64::default();
        }
    }
}

/// The complex product `B · D` of an octave's filters `B` `[n_f, bins]` and an STFT `D`
/// `[.., bins, n_frames, 2]`: one real matmul of D's frames `[.., n_frames, 2·bins]` (real and
/// imaginary parts interleaved, as the FFT writes them) by the real form of Bᵀ
/// `[2·bins, 2·n_f]`. Returns `[.., n_f, n_frames, 2]`.
fn project(d: &Tensor, basis: &[Complex64], n_f: usize) -> Result<Tensor> {
    let r = d.rank();
    let bins = d.shape()[r - 3];
    let frames = d.transpose(r - 3, r - 2)?.contiguous()?;
    let mut shape = frames.shape()[..r - 2].to_vec();
    shape.push(2 * bins);
    let flat = frames.reshape(&shape)?;
    let mut m = vec![0f32; 4 * bins * n_f];
    for f in 0..n_f {
        for k in 0..bins {
            let z = basis[f * bins + k];
            let (re, im) = (z.re as f32, z.im as f32);
            m[(2 * k) * 2 * n_f + 2 * f] = re;
            m[(2 * k) * 2 * n_f + 2 * f + 1] = im;
            m[(2 * k + 1) * 2 * n_f + 2 * f] = -im;
            m[(2 * k + 1) * 2 * n_f + 2 * f + 1] = re;
        }
    }
    let m = Tensor::from_slice(&m, &[2 * bins, 2 * n_f], &d.device())?;
    let out = ops::matmul(&flat, &m)?;
    let mut oshape = out.shape()[..out.rank() - 1].to_vec();
    oshape.extend([n_f, 2]);
    let rr = oshape.len();
    Ok(out.reshape(&oshape)?.transpose(rr - 3, rr - 2)?)
}

/// The constant-Q transform `[.., n_bins, n_frames, 2]` (complex) of signals `y`
/// `[.., samples]` (`librosa.cqt` with `res_type="polyphase"`).
///
/// # Errors
/// [`Error::Invalid`] for parameters out of range (no bins, a top filter above Nyquist, a
/// signal too short for the lowest octave's filters); as [`stft`] and [`resample`].
pub fn cqt(y: &Tensor, p: &Cqt) -> Result<Tensor> {
    const F: &str = "cqt";
    let bpo = p.bins_per_octave;
    if p.n_bins == 0 || bpo == 0 || p.hop_length == 0 || p.sr.is_nan() || p.sr <= 0.0 {
        return Err(Error::invalid(
            F,
            format!(
                "needs n_bins, bins_per_octave, hop_length ≥ 1 and sr > 0; got {}, {bpo}, {}, {}",
                p.n_bins, p.hop_length, p.sr
            ),
        ));
    }
    if p.filter_scale.is_nan()
        || p.filter_scale <= 0.0
        || !(0.0..1.0).contains(&p.sparsity)
        || p.fmin.is_some_and(|f| f.is_nan() || f <= 0.0)
    {
        return Err(Error::invalid(
            F,
            "needs filter_scale > 0, 0 ≤ sparsity < 1 and fmin > 0",
        ));
    }
    let n_octaves = p.n_bins.div_ceil(bpo);
    let n_filters = bpo.min(p.n_bins);
    let freqs = p.frequencies();
    let alpha = relative_bandwidth(&freqs, bpo);
    let (lengths, cutoff) = wavelet_lengths(&freqs, &alpha, p.sr, p);
    let nyquist = p.sr / 2.0;
    if cutoff > nyquist {
        return Err(Error::invalid(
            F,
            format!(
                "the top filter reaches {cutoff:.1} Hz, above Nyquist ({nyquist} Hz): lower fmin \
                 or n_bins"
            ),
        ));
    }
    // Early downsampling: as many halvings as the top octave's cut-off and the hop allow.
    let twos = p.hop_length.trailing_zeros() as i64;
    let by_cutoff = ((nyquist / cutoff).log2().ceil() as i64 - 1 - 1).max(0);
    let by_hop = (twos - n_octaves as i64 + 1).max(0);
    let count = by_cutoff.min(by_hop);
    let (mut y, mut sr, mut hop) = (y.clone(), p.sr, p.hop_length);
    if count > 0 {
        let factor = 1usize << count;
        hop /= factor;
        y = resample(&y, factor as f64, 1.0, p.res_type, true, true)?;
        if !p.scale {
            y = ops::scalar(ScalarOp::Mul, &y, (factor as f64).sqrt() as f32)?;
        }
        sr /= factor as f64;
    }
    let mut responses = Vec::with_capacity(n_octaves);
    for i in 0..n_octaves {
        let hi = p.n_bins - n_filters * i;
        let lo = p.n_bins.saturating_sub(n_filters * (i + 1));
        let (basis, n_fft) = octave_basis(&freqs[lo..hi], &alpha[lo..hi], sr, p);
        let st = Stft {
            n_fft,
            hop_length: Some(hop),
            win_length: None,
            window: Window::Rectangular,
            center: true,
            pad_mode: p.pad_mode,
        };
        let d = stft(&y, &st).map_err(|e| {
            Error::invalid(
                F,
                format!("octave {i} (filters of {n_fft} samples at {sr} Hz): {e}"),
            )
        })?;
        responses.push(project(&d, &basis, hi - lo)?);
        if hop % 2 == 0 {
            hop /= 2;
            sr /= 2.0;
            y = resample(&y, 2.0, 1.0, p.res_type, true, true)?;
        }
    }
    // Lowest octave first, each cut to the shortest's frames.
    let frames = responses
        .iter()
        .map(|r| r.shape()[r.rank() - 2])
        .min()
        .unwrap_or(0);
    let axis = responses[0].rank() - 3;
    let parts: Vec<Tensor> = responses
        .iter()
        .rev()
        .map(|r| r.narrow(axis + 1, 0, frames))
        .collect::<std::result::Result<_, _>>()?;
    let v = ops::concat(&parts.iter().collect::<Vec<_>>(), axis)?;
    if !p.scale {
        return Ok(v);
    }
    let inv: Vec<f32> = lengths.iter().map(|l| (1.0 / l.sqrt()) as f32).collect();
    let inv = Tensor::from_slice(&inv, &[p.n_bins, 1, 1], &v.device())?;
    Ok(ops::binary(BinaryOp::Mul, &v, &inv)?)
}

/// `|cqt|` `[.., n_bins, n_frames]`.
///
/// # Errors
/// As [`cqt`].
pub fn cqt_magnitude(y: &Tensor, p: &Cqt) -> Result<Tensor> {
    Ok(gpukit_ops::signal::complex_abs(&cqt(y, p)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_are_equal_tempered_from_c1() {
        let f = Cqt::default().frequencies();
        assert_eq!(f.len(), 84);
        assert!((f[0] - C1).abs() < 1e-12);
        assert!((f[12] - 2.0 * C1).abs() < 1e-9);
        // A4 is 45 semitones above C1.
        assert!((f[45] - 440.0).abs() < 1e-9);
    }
}
