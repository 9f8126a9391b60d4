//! WAV files (`hound`): read to f32 samples in [−1, 1] at the file's rate, write 16-bit PCM or
//! 32-bit float.

use std::path::Path;

use gpukit_ops::{Device, Tensor};

use crate::{Error, Result};

/// Audio read from a file: `[channels, frames]` f32 samples and the sample rate in Hz.
#[derive(Clone, Debug)]
pub struct Audio {
    /// Samples `[channels, frames]`, f32 in [−1, 1] (integer PCM scaled by 1 / 2^(bits−1)).
    pub samples: Tensor,
    /// Sample rate in Hz.
    pub sample_rate: u32,
}

fn wav_error(path: &Path, source: hound::Error) -> Error {
    Error::Wav {
        path: path.display().to_string(),
        source,
    }
}

/// Reads a WAV file (PCM 8–32 bit or IEEE float) into `[channels, frames]` f32 on `device`.
///
/// # Errors
/// [`Error::Wav`] for a file that cannot be opened or is not a WAV file hound reads; tensor
/// errors.
pub fn read_wav(path: impl AsRef<Path>, device: &Device) -> Result<Audio> {
    let path = path.as_ref();
    let mut reader = hound::WavReader::open(path).map_err(|e| wav_error(path, e))?;
    let spec = reader.spec();
    let channels = usize::from(spec.channels.max(1));
    let interleaved: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .samples::<f32>()
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| wav_error(path, e))?,
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f64;
            reader
                .samples::<i32>()
                .map(|s| s.map(|v| (f64::from(v) * scale) as f32))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| wav_error(path, e))?
        }
    };
    from_interleaved(&interleaved, channels, spec.sample_rate, device)
}

/// `[channels, frames]` audio on `device` from interleaved samples (a trailing partial frame
/// dropped).
pub(crate) fn from_interleaved(
    interleaved: &[f32],
    channels: usize,
    sample_rate: u32,
    device: &Device,
) -> Result<Audio> {
    let frames = interleaved.len() / channels;
    let mut planar = vec![0f32; channels * frames];
    for (i, v) in interleaved.iter().take(channels * frames).enumerate() {
        planar[(i % channels) * frames + i / channels] = *v;
    }
    Ok(Audio {
        samples: Tensor::from_slice(&planar, &[channels, frames], device)?,
        sample_rate,
    })
}

/// The sample format [`write_wav`] writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WavFormat {
    /// 16-bit PCM (samples scaled by 32768, rounded and clipped to the 16-bit range: the
    /// inverse of reading, as libsndfile does it).
    #[default]
    Pcm16,
    /// 32-bit IEEE float.
    Float32,
}

/// A sample in [−1, 1] as 16-bit PCM: scaled by 32768, rounded and clipped to the 16-bit
/// range (the inverse of reading, as libsndfile does it).
pub fn pcm16(v: f32) -> i16 {
    (f64::from(v) * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}

/// Writes `samples` (`[frames]` mono or `[channels, frames]`, f32 on any device) as a WAV file.
///
/// # Errors
/// [`Error::Invalid`] for a tensor of another rank or more than 65 535 channels; [`Error::Wav`]
/// when the file cannot be written; tensor errors.
pub fn write_wav(
    path: impl AsRef<Path>,
    samples: &Tensor,
    sample_rate: u32,
    format: WavFormat,
) -> Result<()> {
    let path = path.as_ref();
    let (channels, frames) = match *samples.shape() {
        [n] => (1, n),
        [c, n] => (c, n),
        _ => {
            return Err(Error::invalid(
                "write_wav",
                format!(
                    "needs [frames] or [channels, frames], got {:?}",
                    samples.shape()
                ),
            ));
        }
    };
    let channels16 = u16::try_from(channels)
        .ok()
        .filter(|&c| c > 0)
        .ok_or_else(|| Error::invalid("write_wav", format!("{channels} channels")))?;
    let values = samples.to_vec_f32()?;
    let spec = hound::WavSpec {
        channels: channels16,
        sample_rate,
        bits_per_sample: match format {
            WavFormat::Pcm16 => 16,
            WavFormat::Float32 => 32,
        },
        sample_format: match format {
            WavFormat::Pcm16 => hound::SampleFormat::Int,
            WavFormat::Float32 => hound::SampleFormat::Float,
        },
    };
    let mut w = hound::WavWriter::create(path, spec).map_err(|e| wav_error(path, e))?;
    for t in 0..frames {
        for c in 0..channels {
            let v = values[c * frames + t];
            let r = match format {
                WavFormat::Pcm16 => w.write_sample(pcm16(v)),
                WavFormat::Float32 => w.write_sample(v),
            };
            r.map_err(|e| wav_error(path, e))?;
        }
    }
    w.finalize().map_err(|e| wav_error(path, e))
}
