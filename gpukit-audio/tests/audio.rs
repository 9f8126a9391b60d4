//! gpukit-audio's functions on the CPU (always) and CUDA (`#[ignore]`d without a device; run by
//! `cargo xtask test-gpu` and the GPU bundle): the STFT inverts back to its signal, CUDA agrees
//! with the CPU (the f64 reference librosa parity is checked against, in gpukit-py's tests),
//! and running twice gives the same bits. Tolerance on ‖out − ref‖ / ‖ref‖: 2e-5 for
//! transforms and mel spectrograms, 1e-4 for decibel-domain results. The effects, resampling
//! and YIN are checked by what they must do to a signal (lengths, a tone's pitch and level,
//! parts that sum back to the whole), CUDA against the CPU within 2e-3 (phase-vocoder
//! results: f32 phase sums) or 1e-5.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::OnceLock;

use gpukit_audio::mel::mfcc;
use gpukit_audio::wav::{WavFormat, read_wav, write_wav};
use gpukit_audio::{DbRef, Mel, PadMode, Stft, Window, istft, melspectrogram, power_to_db, stft};
use gpukit_ops::{DType, Device, Tensor};
use gpukit_sched::{LanePriority, Runtime};

fn cuda() -> Device {
    static RT: OnceLock<Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| Runtime::with_devices(&[0]).expect("GPU tests need a CUDA device"));
    let lane = rt
        .device(0)
        .unwrap()
        .default_tenant()
        .lane(LanePriority::Normal)
        .unwrap();
    Device::cuda(&lane).unwrap()
}

fn rel(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum();
    let den: f64 = want.iter().map(|b| f64::from(*b).powi(2)).sum();
    (num / den.max(1e-300)).sqrt()
}

/// Two channels of a chirp plus noise at 16 kHz.
fn signal(dev: &Device) -> Tensor {
    let n = 16_000 + 123;
    let noise = Tensor::rand(&[2 * n], -0.05, 0.05, DType::F32, 7, &Device::Cpu)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let y: Vec<f32> = (0..2 * n)
        .map(|i| {
            let t = (i % n) as f64 / 16_000.0;
            let c = if i < n { 1.0 } else { -0.5 };
            (c * (2.0 * std::f64::consts::PI * (200.0 * t + 1500.0 * t * t)).sin()) as f32
                + noise[i]
        })
        .collect();
    Tensor::from_slice(&y, &[2, n], dev).unwrap()
}

fn cases() -> Vec<Stft> {
    vec![
        Stft::with_n_fft(512),
        Stft {
            n_fft: 400,
            hop_length: Some(160),
            win_length: Some(320),
            window: Window::Hamming,
            ..Stft::default()
        },
        Stft {
            n_fft: 2048,
            hop_length: Some(512),
            pad_mode: PadMode::Reflect,
            ..Stft::default()
        },
        Stft {
            n_fft: 1001,
            hop_length: Some(250),
            center: false,
            ..Stft::default()
        },
    ]
}

fn body(dev: &Device) {
    let y = signal(dev);
    let yv = y.to_vec::<f32>().unwrap();
    let len = y.shape()[1];
    for p in cases() {
        let s = stft(&y, &p).unwrap();
        assert_eq!(s.shape()[..2], [2, p.n_fft / 2 + 1]);
        // Perfect reconstruction where the window overlap covers the signal (all of it when
        // centred; away from the ends otherwise).
        let back = istft(&s, &p, Some(len)).unwrap().to_vec::<f32>().unwrap();
        let edge = if p.center { 0 } else { p.n_fft };
        let inner = |v: &[f32]| -> Vec<f32> {
            v.chunks(len)
                .flat_map(|c| c[edge..len - edge].to_vec())
                .collect()
        };
        assert!(rel(&inner(&back), &inner(&yv)) < 2e-5, "istft(stft) {p:?}");
        if let Device::Cuda(_) = dev {
            let cpu = stft(&y.to_device(&Device::Cpu).unwrap(), &p).unwrap();
            let got = s.contiguous().unwrap().to_vec::<f32>().unwrap();
            assert!(
                rel(&got, &cpu.contiguous().unwrap().to_vec::<f32>().unwrap()) < 2e-5,
                "{p:?}"
            );
            // The same bits every run.
            let again = stft(&y, &p)
                .unwrap()
                .contiguous()
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            assert_eq!(got, again, "stft run twice {p:?}");
        }
    }
    let p = Stft {
        n_fft: 512,
        hop_length: Some(128),
        ..Stft::default()
    };
    let mel = Mel {
        n_mels: 40,
        ..Mel::new(16_000.0)
    };
    let m = melspectrogram(&y, &p, &mel, 2.0).unwrap();
    let db = power_to_db(&m, DbRef::Max, 1e-10, Some(80.0)).unwrap();
    let c = mfcc(&y, &p, &mel, 13, 0.0).unwrap();
    assert_eq!(c.shape(), [2, 13, m.shape()[2]]);
    if let Device::Cuda(_) = dev {
        let host = y.to_device(&Device::Cpu).unwrap();
        let flat = |t: &Tensor| t.contiguous().unwrap().to_vec::<f32>().unwrap();
        let m_cpu = melspectrogram(&host, &p, &mel, 2.0).unwrap();
        assert!(rel(&flat(&m), &flat(&m_cpu)) < 2e-5, "melspectrogram");
        let db_cpu = power_to_db(&m_cpu, DbRef::Max, 1e-10, Some(80.0)).unwrap();
        assert!(rel(&flat(&db), &flat(&db_cpu)) < 1e-4, "power_to_db");
        let c_cpu = mfcc(&host, &p, &mel, 13, 0.0).unwrap();
        assert!(rel(&flat(&c), &flat(&c_cpu)) < 1e-4, "mfcc");
        assert_eq!(
            flat(&c),
            flat(&mfcc(&y, &p, &mel, 13, 0.0).unwrap()),
            "mfcc run twice"
        );
    }
}

#[test]
fn stft_istft_mel_mfcc_cpu() {
    body(&Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device"]
fn stft_istft_mel_mfcc_cuda() {
    body(&cuda());
}

#[test]
fn wav_files_round_trip_and_bad_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let y = Tensor::from_slice(
        &[0.0f32, 0.5, -0.25, 1.0, -1.0, 0.125],
        &[2, 3],
        &Device::Cpu,
    )
    .unwrap();
    let path = dir.path().join("a.wav");
    write_wav(&path, &y, 8000, WavFormat::Float32).unwrap();
    let a = read_wav(&path, &Device::Cpu).unwrap();
    assert_eq!(a.sample_rate, 8000);
    assert_eq!(
        a.samples.to_vec::<f32>().unwrap(),
        y.to_vec::<f32>().unwrap()
    );
    write_wav(&path, &y, 8000, WavFormat::Pcm16).unwrap();
    let b = read_wav(&path, &Device::Cpu)
        .unwrap()
        .samples
        .to_vec::<f32>()
        .unwrap();
    // Rounding to 1/32768, and +1.0 clipped to 32767/32768.
    for (g, w) in b.iter().zip(y.to_vec::<f32>().unwrap()) {
        assert!((g - w).abs() <= 1.0 / 32768.0, "{g} vs {w}");
    }
    std::fs::write(dir.path().join("bad.wav"), b"RIFF....WAVEjunk").unwrap();
    let e = read_wav(dir.path().join("bad.wav"), &Device::Cpu).unwrap_err();
    assert!(e.to_string().contains("bad.wav"), "{e}");
    assert!(read_wav(dir.path().join("none.wav"), &Device::Cpu).is_err());
    let scalar = Tensor::zeros(&[2, 2, 2], DType::F32, &Device::Cpu).unwrap();
    assert!(write_wav(&path, &scalar, 8000, WavFormat::Pcm16).is_err());

    // symphonia reads the same 16-bit WAV, found by its content, to the same samples.
    let other = dir.path().join("copy.audio");
    std::fs::copy(&path, &other).unwrap();
    let c = gpukit_audio::decode::load(&other, &Device::Cpu).unwrap();
    assert_eq!(c.sample_rate, 8000);
    assert_eq!(c.samples.shape(), [2, 3]);
    assert_eq!(c.samples.to_vec::<f32>().unwrap(), b);
    std::fs::write(dir.path().join("bad.ogg"), b"OggS but not really").unwrap();
    let e = gpukit_audio::decode::load(dir.path().join("bad.ogg"), &Device::Cpu).unwrap_err();
    assert!(matches!(e, gpukit_audio::Error::Decode { .. }), "{e}");
    assert!(e.to_string().contains("bad.ogg"), "{e}");
    let e = gpukit_audio::decode::load(dir.path().join("none.flac"), &Device::Cpu).unwrap_err();
    assert!(matches!(e, gpukit_audio::Error::Io { .. }), "{e}");
}

/// A tone of `hz` at `sr`, `n` samples.
fn tone(hz: f64, sr: f64, n: usize, dev: &Device) -> Tensor {
    let y: Vec<f32> = (0..n)
        .map(|i| (0.5 * (2.0 * std::f64::consts::PI * hz * i as f64 / sr).sin()) as f32)
        .collect();
    Tensor::from_slice(&y, &[n], dev).unwrap()
}

fn rms(v: &[f32]) -> f64 {
    (v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
}

/// Results of the effects, resampling and YIN on `dev`, after checking what each must do.
fn effects_body(dev: &Device) -> Vec<Vec<f32>> {
    use gpukit_audio::effects::{Hpss, hpss_signal, pitch_shift, time_stretch};
    use gpukit_audio::features::{deemphasis, preemphasis};
    use gpukit_audio::pitch::{Yin, yin};
    use gpukit_audio::{ResType, resample};

    let flat = |t: &Tensor| t.to_vec::<f32>().unwrap();
    let mut results = Vec::new();
    // Resampling keeps a 1 kHz tone's level, and both methods agree away from the ends (at a
    // ratio whose output grid is exact, 3/4).
    let y = tone(1000.0, 16_000.0, 8000, dev);
    let poly = resample(&y, 16_000.0, 12_000.0, ResType::Polyphase, true, false).unwrap();
    let fft = resample(&y, 16_000.0, 12_000.0, ResType::Fft, true, false).unwrap();
    assert_eq!(poly.shape(), [6000]);
    assert_eq!(fft.shape(), [6000]);
    let (p, f) = (flat(&poly), flat(&fft));
    assert!((rms(&p[500..5500]) / rms(&flat(&y)) - 1.0).abs() < 0.01);
    assert!(rel(&p[500..5500], &f[500..5500]) < 1e-2);
    results.extend([p, f]);
    // YIN finds a 220 Hz tone.
    let f0 = flat(
        &yin(
            &tone(220.0, 16_000.0, 16_000, dev),
            &Yin {
                sr: 16_000.0,
                ..Yin::new(80.0, 800.0)
            },
        )
        .unwrap(),
    );
    assert!(
        f0[2..f0.len() - 2].iter().all(|&f| (f - 220.0).abs() < 0.5),
        "{f0:?}"
    );
    results.push(f0);
    // Time stretching and pitch shifting set the lengths librosa's do.
    let y = signal(dev);
    let p = Stft {
        n_fft: 512,
        ..Stft::default()
    };
    let fast = time_stretch(&y, 1.5, &p).unwrap();
    assert_eq!(fast.shape(), [2, (16_123.0f64 / 1.5).round() as usize]);
    let shifted = pitch_shift(
        &y.narrow(1, 0, 6000).unwrap(),
        16_000.0,
        3.0,
        12,
        ResType::Fft,
        false,
        &p,
    )
    .unwrap();
    assert_eq!(shifted.shape(), [2, 6000]);
    results.extend([flat(&fast), flat(&shifted)]);
    // Harmonic and percussive parts sum back to the signal (the masks sum to 1).
    let (h, q) = hpss_signal(&y, &p, &Hpss::default()).unwrap();
    let (hv, qv, yv) = (flat(&h), flat(&q), flat(&y));
    let sum: Vec<f32> = hv.iter().zip(&qv).map(|(a, b)| a + b).collect();
    assert!(rel(&sum, &yv) < 1e-4);
    results.extend([hv, qv]);
    // The constant-Q magnitude of A4 peaks in A4's bin, 45 semitones above C1.
    let cq =
        gpukit_audio::cqt::cqt_magnitude(&tone(440.0, 22_050.0, 22_050, dev), &Default::default())
            .unwrap();
    assert_eq!(cq.shape()[0], 84);
    let frames = cq.shape()[1];
    let mid: Vec<f32> = (0..84)
        .map(|b| {
            cq.narrow(0, b, 1)
                .unwrap()
                .narrow(1, frames / 2, 1)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()[0]
        })
        .collect();
    let peak = (0..84).fold(0, |best, b| if mid[b] > mid[best] { b } else { best });
    assert_eq!(peak, 45, "{mid:?}");
    results.push(flat(&cq));
    // De-emphasis inverts pre-emphasis.
    let back = deemphasis(&preemphasis(&y, 0.97).unwrap(), 0.97).unwrap();
    assert!(rel(&flat(&back), &yv) < 1e-4);
    results.push(flat(&back));
    results
}

#[test]
fn effects_resample_and_yin_cpu() {
    effects_body(&Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device"]
fn effects_resample_and_yin_cuda() {
    let dev = cuda();
    let cuda_results = effects_body(&dev);
    let cpu_results = effects_body(&Device::Cpu);
    for (i, (g, w)) in cuda_results.iter().zip(&cpu_results).enumerate() {
        // Results 3 and 4 come from the phase vocoder.
        let tol = if matches!(i, 3 | 4) { 2e-3 } else { 1e-5 };
        assert!(rel(g, w) < tol, "result {i}: {}", rel(g, w));
    }
    assert_eq!(cuda_results, effects_body(&dev), "run twice");
}
