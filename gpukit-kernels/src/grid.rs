//! Launch shapes shared by several families: grid-stride loops, a block per row, a thread per
//! item.

use gpukit_driver::LaunchConfig;

use crate::shared::BLOCK_THREADS;
use crate::{Error, Result};

/// A grid-stride launch over `n` elements: enough blocks of [`BLOCK_THREADS`] to fill `sms`
/// multiprocessors (the stream's: [`gpukit_driver::Stream::sm_count`]) several times over (16
/// per multiprocessor), never more than needed.
pub fn elementwise(n: usize, sms: u32) -> LaunchConfig {
    let needed = n.div_ceil(BLOCK_THREADS as usize).max(1);
    let cap = sms as usize * 16;
    LaunchConfig::new(needed.min(cap).max(1) as u32, BLOCK_THREADS)
}

/// One block of [`BLOCK_THREADS`] per row.
///
/// # Errors
/// [`Error::InvalidArgument`] for more rows than a grid holds.
pub fn rows(rows: usize) -> Result<LaunchConfig> {
    let grid = u32::try_from(rows.max(1))
        .map_err(|_| Error::InvalidArgument(format!("{rows} rows exceed the grid limit")))?;
    Ok(LaunchConfig::new(grid, BLOCK_THREADS))
}

/// One thread per item, in blocks of [`BLOCK_THREADS`].
///
/// # Errors
/// [`Error::InvalidArgument`] for more items than a grid holds.
pub fn threads(items: usize) -> Result<LaunchConfig> {
    Ok(LaunchConfig::for_elements(items, BLOCK_THREADS)?)
}

/// `n` as a grid's y or z dimension (at most 65 535).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `what` above that.
pub(crate) fn dim(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|&v| v <= 65_535)
        .ok_or_else(|| Error::InvalidArgument(format!("{n} {what} exceed the grid limit")))
}
