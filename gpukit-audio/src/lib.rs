//! # gpukit-audio
//!
//! Audio on gpukit (layer 5, above `gpukit-ops`; beside `gpukit-llm`): librosa's signal
//! toolbox with librosa's conventions and defaults, on f32 tensors on the CPU (the f64
//! reference) or CUDA (gpukit's own FFT kernels, no cuFFT).
//!
//! - [`spectrum`]: [`stft`], [`istft`], [`spectrogram`] (`|STFT|^power`) and Griffin-Lim.
//! - [`mel`]: the mel scale, filter banks (Slaney and HTK), [`melspectrogram`], [`power_to_db`],
//!   [`amplitude_to_db`] and [`mfcc`].
//! - [`features`]: chroma, delta, spectral centroid, bandwidth, flatness, roll-off and contrast,
//!   zero-crossing rate, pre- and de-emphasis.
//! - [`effects`]: the phase vocoder, time stretching, pitch shifting, harmonic–percussive
//!   separation and soft masks.
//! - [`resample`](mod@resample): polyphase and FFT resampling; [`pitch`]: YIN, pitch tracking and tuning;
//!   [`cqt`]: the constant-Q transform.
//! - [`window`]: analysis windows; [`wav`]: WAV files; [`decode`]: any common audio format.
//! - [`tts`]: text to speech with Piper's VITS voices (text encoder, stochastic duration
//!   predictor, flow and HiFi-GAN on gpukit ops; phonemes from espeak-ng).
//!
//! Shapes are librosa's: signals `[.., samples]`, spectrograms `[.., 1 + n_fft/2, n_frames]`
//! (complex ones with a trailing axis of 2: real, imaginary).
//!
//! ```
//! use gpukit_audio::{Mel, Stft, melspectrogram, power_to_db, DbRef};
//! use gpukit_ops::{Device, Tensor};
//!
//! // One second of a 440 Hz tone at 16 kHz.
//! let sr = 16000.0;
//! let y: Vec<f32> = (0..16000).map(|i| (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 16000.0).sin()).collect();
//! let y = Tensor::from_slice(&y, &[16000], &Device::Cpu)?;
//! let stft = Stft { n_fft: 512, hop_length: Some(160), ..Stft::default() };
//! let mel = Mel { n_mels: 40, ..Mel::new(sr) };
//! let s = melspectrogram(&y, &stft, &mel, 2.0)?;
//! assert_eq!(s.shape(), [40, 101]);
//! let db = power_to_db(&s, DbRef::Max, 1e-10, Some(80.0))?;
//! assert_eq!(db.shape(), [40, 101]);
//! # Ok::<(), gpukit_audio::Error>(())
//! ```

pub mod cqt;
pub mod decode;
pub mod effects;
mod error;
pub mod features;
pub mod mel;
pub mod pitch;
pub mod resample;
pub mod spectrum;
pub mod tts;
pub mod wav;
pub mod window;

pub use error::{Error, Result};
pub use gpukit_ops::signal::PadMode;
pub use mel::{DbRef, Mel, MelNorm, MelScale, amplitude_to_db, melspectrogram, mfcc, power_to_db};
pub use resample::{ResType, resample};
pub use spectrum::{Stft, istft, spectrogram, stft};
pub use window::Window;
