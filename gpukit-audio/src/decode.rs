//! Audio files of any common format to f32 samples at the file's rate: WAV through `hound`
//! ([`crate::wav::read_wav`]), everything else (FLAC, Ogg Vorbis, MP3, AIFF, PCM in other
//! containers) through `symphonia`'s pure-Rust demuxers and decoders.

use std::path::Path;

use gpukit_ops::Device;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{CODEC_TYPE_NULL, DecoderOptions};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use crate::wav::{Audio, from_interleaved, read_wav};
use crate::{Error, Result};

fn decode_error(path: &Path, detail: impl std::fmt::Display) -> Error {
    Error::Decode {
        path: path.display().to_string(),
        detail: detail.to_string(),
    }
}

/// Reads an audio file into `[channels, frames]` f32 samples in [−1, 1] on `device`, at the
/// file's sample rate (librosa's `load(path, sr=None, mono=False)`): `.wav` files through
/// [`read_wav`], any other format symphonia recognises by probing its content (FLAC, Ogg
/// Vorbis, MP3, AIFF), decoded gaplessly (encoder delay and padding trimmed) from its first
/// audio track.
///
/// # Errors
/// [`Error::Wav`] (WAV files), [`Error::Io`] for a file that cannot be opened,
/// [`Error::Decode`] for one in no format symphonia reads or holding no decodable audio; tensor
/// errors.
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Audio> {
    let path = path.as_ref();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.as_deref() == Some("wav") {
        return read_wav(path, device);
    }
    let file = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    let stream = MediaSourceStream::new(Box::new(file), Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = &ext {
        hint.with_extension(ext);
    }
    let options = FormatOptions {
        enable_gapless: true,
        ..FormatOptions::default()
    };
    let probed = symphonia::default::get_probe()
        .format(&hint, stream, &options, &MetadataOptions::default())
        .map_err(|e| decode_error(path, format!("not an audio format gpukit reads ({e})")))?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| decode_error(path, "no audio track"))?;
    let track_id = track.id;
    let sample_rate = track
        .codec_params
        .sample_rate
        .ok_or_else(|| decode_error(path, "the audio track has no sample rate"))?;
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .map_err(|e| decode_error(path, e))?;
    let mut channels = track.codec_params.channels.map_or(0, |c| c.count());
    let mut interleaved: Vec<f32> = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break;
            }
            Err(e) => return Err(decode_error(path, e)),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = decoder.decode(&packet).map_err(|e| decode_error(path, e))?;
        let spec = *decoded.spec();
        channels = spec.channels.count();
        let mut buffer = SampleBuffer::<f32>::new(decoded.capacity() as u64, spec);
        buffer.copy_interleaved_ref(decoded);
        interleaved.extend_from_slice(buffer.samples());
    }
    if channels == 0 || interleaved.is_empty() {
        return Err(decode_error(path, "no audio samples decoded"));
    }
    from_interleaved(&interleaved, channels, sample_rate, device)
}
