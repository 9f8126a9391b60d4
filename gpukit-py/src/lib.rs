//! # gpukit-py
//!
//! The Python module `gpukit` (layer 6, a user-facing crate beside `gpukit-cli`).
//!
//! What it will own (not written yet): PyO3 bindings (abi3, built with maturin) for devices,
//! tensors, ops and the LLM engine. PyO3 is added when the first binding is written, so that the
//! workspace does not build it for nothing until then.
