//! # gpukit-ops
//!
//! Tensors and the op set (layer 5, above `gpukit-kernels`).
//!
//! What it will own (not written yet): `Tensor` (host or pooled device storage, shape, strides,
//! offset, dtype), views, host/device copies through the transfer engine; every op in an
//! allocating form and an `_into` form that writes a preallocated output (so hot loops allocate
//! nothing and can be captured into a CUDA graph); a CPU implementation of every op, which is the
//! reference the CUDA kernels are tested against.
