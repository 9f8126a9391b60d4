//! # gpukit-mem
//!
//! Every device byte a gpukit tensor uses comes from here (layer 1, above `gpukit-driver`).

pub mod allocator;
#[cfg(test)]
mod allocator_tests;
