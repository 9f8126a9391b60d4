//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in `gpukit-mem`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A quota would be exceeded (nothing evictable was left to make room).
    #[error(
        "out of memory: {requested} bytes requested from a pool limited to {limit} bytes with \
         {in_use} bytes in use"
    )]
    OutOfMemory {
        /// Bytes asked for (rounded to the allocator's 512-byte granularity).
        requested: usize,
        /// The quota's limit in bytes.
        limit: usize,
        /// Bytes charged to the quota.
        in_use: usize,
    },
    /// The device itself is full, after releasing every cached segment and evicting what could
    /// be evicted.
    #[error(
        "out of device memory: {requested} bytes requested; the pool holds {reserved} bytes and \
         the device has no more"
    )]
    DeviceOutOfMemory {
        /// Bytes asked for (rounded).
        requested: usize,
        /// Bytes the pool holds from the driver.
        reserved: usize,
    },
    /// A driver call failed.
    #[error(transparent)]
    Driver(#[from] gpukit_driver::Error),
    /// An argument outside its valid range (the message names it).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A transfer was cancelled or its worker stopped before it ran.
    #[error("transfer failed: {0}")]
    Transfer(String),
    /// A file-system operation failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// True for both kinds of out-of-memory (quota and device).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            Error::OutOfMemory { .. } | Error::DeviceOutOfMemory { .. } => true,
            Error::Driver(e) => e.is_out_of_memory(),
            _ => false,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Locks a mutex, recovering the data if a panicking thread poisoned it (every critical section
/// here leaves the data consistent between statements that can panic).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
