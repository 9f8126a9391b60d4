//! # gpukit-audio
//!
//! Audio on gpukit (layer 5, above `gpukit-ops`; beside `gpukit-llm`).
//!
//! What it will own (not written yet): FFT kernels of our own (no cuFFT) and on them STFT/ISTFT,
//! mel spectrograms, MFCC, Griffin-Lim, HPSS, CQT, YIN, phase vocoder and resampling; TTS models on
//! top.
