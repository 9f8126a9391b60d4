//! # gpukit-py
//!
//! The Python module `gpukit` (layer 6, a user-facing crate beside `gpukit-cli`): PyO3
//! bindings with the stable ABI (abi3, Python ≥ 3.10), built by maturin (`pip install
//! ./gpukit-py`). The compiled part is `gpukit._gpukit`; the package `gpukit` (in `python/`)
//! re-exports it and adds `gpukit.llm`, type stubs and docstrings.
//!
//! - `device`: devices, streams and events.
//! - `tensor`: `gk.Tensor`, dtypes, creation, numpy conversion, views and operators.
//! - `ops`: the op set as functions.
//! - `dlpack`: zero-copy exchange with torch and cupy.
//! - `jit` and `graph`: NVRTC kernels, CUDA graphs.
//! - `memory`: evictable tensors (spilled to host memory under pressure).
//! - `llm`: models.
//! - `audio`: `gpukit-audio` (STFT, mel, MFCC, spectral features, WAV files).
//! - `tts`: text to speech with Piper's VITS voices (`gk.tts.load()`).
//!
//! Every function releases the GIL during GPU work, loading and generation; every Rust error
//! becomes a Python exception (`errors`), and a panic becomes `gpukit.PanicException`
//! instead of aborting the interpreter.

// The Python-facing functions take the arguments Python passes, many of them optional.
#![allow(clippy::too_many_arguments)]

/// The allocator of the module's Rust code: mimalloc, keeping freed pages
/// (`gpukit_mem::host`).
#[global_allocator]
static ALLOCATOR: gpukit_mem::host::MiMalloc = gpukit_mem::host::MiMalloc;

mod audio;
mod device;
mod dlpack;
mod errors;
mod graph;
mod jit;
mod llm;
mod memory;
mod ops;
mod tensor;
mod tts;

use pyo3::prelude::*;

/// Raises a Rust panic inside the extension, for the test that checks a panic reaches Python as
/// an exception rather than aborting the interpreter.
#[pyfunction]
#[allow(clippy::panic, reason = "the point of this function is to panic")]
fn _panic(message: &str) {
    panic!("{message}");
}

#[pymodule]
fn _gpukit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    gpukit_mem::host::keep_freed_pages();
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "PanicException",
        py.get_type::<pyo3::panic::PanicException>(),
    )?;
    m.add_submodule(&audio::module(py)?)?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<device::PyStream>()?;
    m.add_class::<device::PyEvent>()?;
    m.add_class::<device::PyScheduler>()?;
    m.add_class::<tensor::PyDType>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<jit::PyKernel>()?;
    m.add_class::<graph::PyGraph>()?;
    m.add_class::<memory::PyEvictable>()?;
    m.add_class::<llm::PyModel>()?;
    m.add_class::<llm::PyTokenizer>()?;
    m.add_class::<llm::TextStream>()?;
    m.add_class::<tts::PyVoice>()?;
    m.add_class::<tts::SpeechStream>()?;
    for (name, dtype) in tensor::all_dtypes() {
        m.add(name, tensor::PyDType { dtype })?;
    }
    m.add_function(wrap_pyfunction!(_panic, m)?)?;
    m.add_function(wrap_pyfunction!(device::devices, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_function(wrap_pyfunction!(device::cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::zeros, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::ones, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::empty, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::full, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::rand, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::arange, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::from_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::asarray, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(memory::evictable, m)?)?;
    m.add_function(wrap_pyfunction!(jit::jit, m)?)?;
    m.add_function(wrap_pyfunction!(llm::load, m)?)?;
    m.add_function(wrap_pyfunction!(tts::load_voice, m)?)?;
    for f in [
        wrap_pyfunction!(ops::add, m)?,
        wrap_pyfunction!(ops::sub, m)?,
        wrap_pyfunction!(ops::mul, m)?,
        wrap_pyfunction!(ops::div, m)?,
        wrap_pyfunction!(ops::maximum, m)?,
        wrap_pyfunction!(ops::minimum, m)?,
        wrap_pyfunction!(ops::pow, m)?,
        wrap_pyfunction!(ops::neg, m)?,
        wrap_pyfunction!(ops::abs, m)?,
        wrap_pyfunction!(ops::exp, m)?,
        wrap_pyfunction!(ops::log, m)?,
        wrap_pyfunction!(ops::sqrt, m)?,
        wrap_pyfunction!(ops::rsqrt, m)?,
        wrap_pyfunction!(ops::sin, m)?,
        wrap_pyfunction!(ops::cos, m)?,
        wrap_pyfunction!(ops::tanh, m)?,
        wrap_pyfunction!(ops::sigmoid, m)?,
        wrap_pyfunction!(ops::relu, m)?,
        wrap_pyfunction!(ops::silu, m)?,
        wrap_pyfunction!(ops::square, m)?,
        wrap_pyfunction!(ops::reciprocal, m)?,
        wrap_pyfunction!(ops::gelu, m)?,
        wrap_pyfunction!(ops::clamp, m)?,
        wrap_pyfunction!(ops::where_, m)?,
        wrap_pyfunction!(ops::copy_, m)?,
        wrap_pyfunction!(ops::sum, m)?,
        wrap_pyfunction!(ops::mean, m)?,
        wrap_pyfunction!(ops::max, m)?,
        wrap_pyfunction!(ops::min, m)?,
        wrap_pyfunction!(ops::argmax, m)?,
        wrap_pyfunction!(ops::softmax, m)?,
        wrap_pyfunction!(ops::log_softmax, m)?,
        wrap_pyfunction!(ops::matmul, m)?,
        wrap_pyfunction!(ops::linear, m)?,
        wrap_pyfunction!(ops::rms_norm, m)?,
        wrap_pyfunction!(ops::layer_norm, m)?,
        wrap_pyfunction!(ops::embedding, m)?,
        wrap_pyfunction!(ops::index_select, m)?,
        wrap_pyfunction!(ops::gather, m)?,
        wrap_pyfunction!(ops::concat, m)?,
        wrap_pyfunction!(ops::rope_frequencies, m)?,
        wrap_pyfunction!(ops::rope, m)?,
        wrap_pyfunction!(ops::sdpa, m)?,
        wrap_pyfunction!(ops::sample, m)?,
        wrap_pyfunction!(ops::quantize, m)?,
        wrap_pyfunction!(ops::from_blocks, m)?,
        wrap_pyfunction!(ops::dequantize, m)?,
        wrap_pyfunction!(ops::qgemv, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
