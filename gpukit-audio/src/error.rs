//! The crate's error type.

/// Errors of the audio functions.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter out of its range (a hop of 0, more mel bands than make sense, …): what was
    /// given and what is allowed.
    #[error("{function}: {detail}")]
    Invalid {
        /// The function.
        function: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A tensor op failed (shapes, dtypes, devices, memory, the FFT's length limits on CUDA).
    #[error(transparent)]
    Tensor(#[from] gpukit_ops::Error),
    /// A WAV file could not be read or written.
    #[error("{path}: {source}")]
    Wav {
        /// The file.
        path: String,
        /// What went wrong.
        #[source]
        source: hound::Error,
    },
    /// An audio file could not be opened.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A model file is malformed or lacks something the network needs.
    #[error("{file}: {what}")]
    Format {
        /// The file.
        file: String,
        /// What is wrong.
        what: String,
    },
    /// A voice could not be fetched into the cache (the message says how to install it).
    #[error(transparent)]
    Fetch(#[from] gpukit_driver::store::StoreError),
    /// Text could not be turned into phonemes (espeak-ng missing or failing, or no phoneme of
    /// the text is in the voice).
    #[error("phonemizing: {0}")]
    Phonemize(String),
    /// An audio file could not be decoded (symphonia).
    #[error("{path}: {detail}")]
    Decode {
        /// The file.
        path: String,
        /// What went wrong.
        detail: String,
    },
}

impl Error {
    pub(crate) fn invalid(function: &'static str, detail: impl Into<String>) -> Error {
        Error::Invalid {
            function,
            detail: detail.into(),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
