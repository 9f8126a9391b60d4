//! The short-time Fourier transform and its inverse, with librosa's conventions
//! (`librosa.stft` / `librosa.istft`, librosa 0.10–0.11): frames centred on `t · hop_length`
//! when `center` is set (the signal padded by `n_fft / 2` each side, with zeros by default),
//! the window (periodic, `win_length` samples) centred in `n_fft`, no normalisation.
//!
//! A spectrogram's shape is librosa's `[.., 1 + n_fft/2, n_frames]` (complex: `[.., 1 + n_fft/2,
//! n_frames, 2]`, real and imaginary parts last). It is a transposed view of frames stored one
//! after another (`[.., n_frames, 1 + n_fft/2]` contiguous): the layout the FFT writes and
//! the mel projection reads without a copy; call `contiguous()` for librosa's memory order.

use gpukit_ops::ops;
use gpukit_ops::signal::{self, FftOutput, FftWindow, PadMode};
use gpukit_ops::{BinaryOp, ScalarOp, UnaryOp};
use gpukit_ops::{DType, Tensor};

use crate::window::{self, Window};
use crate::{Error, Result};

/// STFT parameters (librosa's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stft {
    /// FFT length (librosa's default 2048).
    pub n_fft: usize,
    /// Samples between frames (`None`: `win_length / 4`).
    pub hop_length: Option<usize>,
    /// Window length, at most `n_fft` (`None`: `n_fft`).
    pub win_length: Option<usize>,
    /// The window.
    pub window: Window,
    /// Centre frame t on sample `t · hop_length` by padding `n_fft / 2` samples each side.
    pub center: bool,
    /// How `center` pads ([`PadMode::Constant`] pads zeros, librosa's default since 0.10).
    pub pad_mode: PadMode,
}

impl Default for Stft {
    fn default() -> Self {
        Stft {
            n_fft: 2048,
            hop_length: None,
            win_length: None,
            window: Window::Hann,
            center: true,
            pad_mode: PadMode::Constant,
        }
    }
}

impl Stft {
    /// These parameters with FFT length `n_fft`.
    pub fn with_n_fft(n_fft: usize) -> Stft {
        Stft {
            n_fft,
            ..Stft::default()
        }
    }

    /// The window length.
    pub fn win_length(&self) -> usize {
        self.win_length.unwrap_or(self.n_fft)
    }

    /// The hop length.
    pub fn hop_length(&self) -> usize {
        self.hop_length.unwrap_or(self.win_length() / 4)
    }

    /// Frequency bins, `1 + n_fft / 2`.
    pub fn bins(&self) -> usize {
        self.n_fft / 2 + 1
    }

    fn check(&self, function: &'static str) -> Result<()> {
        if self.n_fft == 0 || self.hop_length() == 0 {
            return Err(Error::invalid(
                function,
                format!(
                    "n_fft {} and hop_length {} must be at least 1",
                    self.n_fft,
                    self.hop_length()
                ),
            ));
        }
        if self.win_length() == 0 || self.win_length() > self.n_fft {
            return Err(Error::invalid(
                function,
                format!(
                    "win_length {} must be in 1..={} (n_fft)",
                    self.win_length(),
                    self.n_fft
                ),
            ));
        }
        Ok(())
    }

    /// The window centred in `n_fft`, computed by the FFT ops where they run.
    fn fft_window(&self) -> FftWindow<'static> {
        self.window.fft_window(self.win_length(), self.n_fft)
    }

    /// The frames `[.., n_frames, n_fft]` of `y` `[.., samples]` (a view of the padded signal).
    fn frames(&self, function: &'static str, y: &Tensor) -> Result<Tensor> {
        self.check(function)?;
        let len = *y.shape().last().ok_or_else(|| {
            Error::invalid(function, "needs a signal [.., samples], got a scalar")
        })?;
        let padded = if self.center {
            let p = self.n_fft / 2;
            if self.pad_mode != PadMode::Constant && len == 0 {
                return Err(Error::invalid(function, "an empty signal cannot be padded"));
            }
            signal::pad(y, p, p, self.pad_mode, 0.0)?
        } else {
            y.clone()
        };
        let total = *padded.shape().last().unwrap_or(&0);
        if total < self.n_fft {
            return Err(Error::invalid(
                function,
                format!(
                    "{len} samples{} are fewer than n_fft = {}",
                    if self.center { " (padded)" } else { "" },
                    self.n_fft
                ),
            ));
        }
        Ok(padded.unfold(padded.rank() - 1, self.n_fft, self.hop_length())?)
    }
}

/// Swaps the frame and frequency axes of `[.., n_frames, bins(, 2)]` (a view).
fn frames_last(t: &Tensor, complex: bool) -> Result<Tensor> {
    let r = t.rank();
    let (a, b) = if complex {
        (r - 3, r - 2)
    } else {
        (r - 2, r - 1)
    };
    Ok(t.transpose(a, b)?)
}

/// The complex STFT `[.., 1 + n_fft/2, n_frames, 2]` of f32 signals `y` `[.., samples]`
/// (`librosa.stft`). See the module for the layout.
///
/// # Errors
/// [`Error::Invalid`] for parameters out of range or a signal shorter than `n_fft` (after
/// centring); tensor errors (dtype, device, the FFT's length limits on CUDA).
pub fn stft(y: &Tensor, p: &Stft) -> Result<Tensor> {
    let frames = p.frames("stft", y)?;
    let mut shape = frames.shape()[..frames.rank() - 1].to_vec();
    shape.extend([p.bins(), 2]);
    let out = Tensor::empty(&shape, DType::F32, &y.device())?;
    signal::rfft_into(&frames, Some(p.fft_window()), FftOutput::Complex, &out)?;
    frames_last(&out, true)
}

/// `|STFT|^power` `[.., 1 + n_fft/2, n_frames]` of `y` `[.., samples]`: magnitudes for
/// `power` 1, powers for 2 (computed by the FFT kernel as it writes), any other positive power
/// from the magnitudes (librosa's `_spectrogram`).
///
/// # Errors
/// As [`stft`]; [`Error::Invalid`] for a power that is not positive.
pub fn spectrogram(y: &Tensor, p: &Stft, power: f32) -> Result<Tensor> {
    if power.is_nan() || power <= 0.0 || power.is_infinite() {
        return Err(Error::invalid(
            "spectrogram",
            format!("power must be positive, got {power}"),
        ));
    }
    let frames = p.frames("spectrogram", y)?;
    let mut shape = frames.shape()[..frames.rank() - 1].to_vec();
    shape.push(p.bins());
    let out = Tensor::empty(&shape, DType::F32, &y.device())?;
    let kind = if power == 2.0 {
        FftOutput::Power
    } else {
        FftOutput::Magnitude
    };
    signal::rfft_into(&frames, Some(p.fft_window()), kind, &out)?;
    let out = if power == 1.0 || power == 2.0 {
        out
    } else {
        ops::scalar(ScalarOp::Pow, &out, power)?
    };
    frames_last(&out, false)
}

/// The signal `[.., samples]` whose STFT is `stft_matrix` `[.., 1 + n_fft/2, n_frames, 2]`
/// (`librosa.istft`): inverse FFTs, windowed, overlap-added in frame order and divided by the
/// window's summed square where that exceeds f32's smallest normal value. `n_fft` follows from
/// the bins; `p.n_fft` must match. `length` trims or zero-pads the result to that many
/// samples (and uses only the frames it needs).
///
/// # Errors
/// [`Error::Invalid`] for parameters that do not match the matrix; tensor errors.
pub fn istft(stft_matrix: &Tensor, p: &Stft, length: Option<usize>) -> Result<Tensor> {
    const F: &str = "istft";
    p.check(F)?;
    let s = stft_matrix.shape();
    if s.len() < 3 || s[s.len() - 1] != 2 || s[s.len() - 3] != p.bins() {
        return Err(Error::invalid(
            F,
            format!(
                "needs a complex STFT [.., {} bins, n_frames, 2] for n_fft = {}, got {s:?}",
                p.bins(),
                p.n_fft
            ),
        ));
    }
    let (n_fft, hop) = (p.n_fft, p.hop_length());
    let start = if p.center { n_fft / 2 } else { 0 };
    let mut n_frames = s[s.len() - 2];
    if let Some(len) = length {
        n_frames = n_frames.min((len + 2 * start).div_ceil(hop));
    }
    if n_frames == 0 {
        return Err(Error::invalid(F, "the STFT has no frames"));
    }
    // [.., n_frames, bins, 2]
    let spec = frames_last(stft_matrix, true)?.narrow(stft_matrix.rank() - 3, 0, n_frames)?;
    let win = p.window.padded(p.win_length(), n_fft);
    let frames = signal::irfft(&spec, n_fft, Some(p.fft_window()))?;
    let full = signal::overlap_add(&frames, hop)?;
    let full_len = *full.shape().last().unwrap_or(&0);
    let out_len = length.unwrap_or_else(|| full_len.saturating_sub(2 * start));
    // The squared window overlap-added over the frames, inverted where it is not tiny.
    let mut envelope = vec![0f64; full_len];
    for f in 0..n_frames {
        for (j, w) in win.iter().enumerate() {
            envelope[f * hop + j] += w * w;
        }
    }
    let tiny = f64::from(f32::MIN_POSITIVE);
    let inv: Vec<f64> = (start..start + out_len)
        .map(|t| match envelope.get(t) {
            Some(&e) if e > tiny => 1.0 / e,
            _ => 1.0,
        })
        .collect();
    let take = out_len.min(full_len.saturating_sub(start));
    let axis = full.rank() - 1;
    let y = full.narrow(axis, start.min(full_len), take)?;
    let y = if take < out_len {
        signal::pad(&y, 0, out_len - take, PadMode::Constant, 0.0)?
    } else {
        y
    };
    Ok(ops::binary(
        BinaryOp::Mul,
        &y,
        &window::tensor(&inv, &stft_matrix.device())?,
    )?)
}

/// How [`griffin_lim`] starts its phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseInit {
    /// Every phase 0 (librosa's `init=None`).
    Zero,
    /// Phases uniform in [0, 2π) from this seed (librosa's default is random too, from numpy's
    /// generator, so its values differ from these).
    Random(u64),
}

/// The complex values `[.., 2]` scaled to unit modulus (`z / (|z| + tiny)`).
fn unit_phase(z: &Tensor) -> Result<Tensor> {
    let r = z.rank();
    let norm = signal::complex_abs(z)?;
    let denom = ops::scalar(ScalarOp::Add, &norm, f32::MIN_POSITIVE)?;
    Ok(ops::binary(BinaryOp::Div, z, &denom.unsqueeze(r - 1)?)?)
}

/// A signal `[.., samples]` whose STFT magnitude approximates `s` `[.., 1 + n_fft/2, n_frames]`
/// (`librosa.griffinlim`): the fast Griffin-Lim algorithm (Griffin & Lim 1984; Perraudin,
/// Balazs & Søndergaard 2013), `n_iter` rounds of ISTFT → STFT with `momentum` (librosa's 0.99),
/// then the ISTFT of the last phases. `length` as in [`istft`].
///
/// # Errors
/// [`Error::Invalid`] for a negative momentum or parameters that do not match `s`; as
/// [`stft`] and [`istft`].
pub fn griffin_lim(
    s: &Tensor,
    p: &Stft,
    n_iter: usize,
    momentum: f32,
    init: PhaseInit,
    length: Option<usize>,
) -> Result<Tensor> {
    const F: &str = "griffin_lim";
    p.check(F)?;
    let shape = s.shape();
    if s.rank() < 2 || shape[s.rank() - 2] != p.bins() {
        return Err(Error::invalid(
            F,
            format!(
                "needs a magnitude spectrogram [.., {} bins, n_frames] for n_fft = {}, got \
                 {shape:?}",
                p.bins(),
                p.n_fft
            ),
        ));
    }
    if momentum.is_nan() || momentum < 0.0 {
        return Err(Error::invalid(
            F,
            format!("momentum must be ≥ 0, got {momentum}"),
        ));
    }
    let dev = s.device();
    let mut complex_shape = shape.to_vec();
    complex_shape.push(2);
    let magnitude = s.unsqueeze(s.rank())?;
    let mut angles = match init {
        PhaseInit::Zero => {
            let re = Tensor::ones(shape, DType::F32, &dev)?.unsqueeze(s.rank())?;
            let im = Tensor::zeros(shape, DType::F32, &dev)?.unsqueeze(s.rank())?;
            ops::concat(&[&re, &im], s.rank())?
        }
        PhaseInit::Random(seed) => {
            let phase = Tensor::rand(shape, 0.0, std::f64::consts::TAU, DType::F32, seed, &dev)?;
            let phase = phase.unsqueeze(s.rank())?;
            ops::concat(
                &[
                    &ops::unary(UnaryOp::Cos, &phase)?,
                    &ops::unary(UnaryOp::Sin, &phase)?,
                ],
                s.rank(),
            )?
        }
    };
    angles = ops::binary(BinaryOp::Mul, &angles, &magnitude)?;
    let mut tprev: Option<Tensor> = None;
    let keep = momentum / (1.0 + momentum);
    for _ in 0..n_iter {
        let inverse = istft(&angles, p, length)?;
        let rebuilt = stft(&inverse, p)?;
        let mut next = rebuilt.clone();
        if let Some(prev) = &tprev {
            next = ops::binary(
                BinaryOp::Sub,
                &next,
                &ops::scalar(ScalarOp::Mul, prev, keep)?,
            )?;
        }
        angles = ops::binary(BinaryOp::Mul, &unit_phase(&next)?, &magnitude)?;
        tprev = Some(rebuilt);
    }
    istft(&angles, p, length)
}
