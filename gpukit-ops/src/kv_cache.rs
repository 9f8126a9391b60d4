//! A preallocated KV cache for one attention layer.
//!
//! Keys and values are stored `[kv_heads, max_len, head_dim]`: for a decode step, each KV head's
//! cached rows are one contiguous run, which is what a split-K attention kernel streams. New
//! rows arrive as `[tokens, kv_heads, head_dim]` (a projection's output layout) and are written at
//! a position that can come from device memory, so a captured decode step replays at the next
//! position without the host. Nothing is reallocated or concatenated while generating.

use gpukit_driver::KernelArgs;
use gpukit_kernels::{DType, Kernel, registry::launch};

use crate::ops::{dptr, need_contiguous, same_device, u32_dim};
use crate::{Device, Error, Result, Tensor};

/// The cache of one layer.
#[derive(Clone, Debug)]
pub struct KvCache {
    k: Tensor,
    v: Tensor,
    len: usize,
}

impl KvCache {
    /// A zeroed cache for `max_len` positions (at most `i32::MAX`: positions are i32 on the
    /// device).
    ///
    /// # Errors
    /// [`Error::DType`] for a non-float dtype; [`Error::Shape`] for `max_len` above `i32::MAX`;
    /// memory errors.
    pub fn new(
        kv_heads: usize,
        max_len: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        if !dtype.is_float() {
            return Err(Error::dtype(
                "kv_cache",
                format!("needs a float dtype, got {dtype}"),
            ));
        }
        if i32::try_from(max_len).is_err() {
            return Err(Error::shape(
                "kv_cache",
                format!(
                    "{max_len} positions: at most {} (positions are i32)",
                    i32::MAX
                ),
            ));
        }
        let shape = [kv_heads, max_len, head_dim];
        Ok(KvCache {
            k: Tensor::zeros(&shape, dtype, device)?,
            v: Tensor::zeros(&shape, dtype, device)?,
            len: 0,
        })
    }

    /// Positions filled (as tracked by [`KvCache::append`], [`KvCache::truncate`] and
    /// [`KvCache::reset`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the cache can hold.
    pub fn max_len(&self) -> usize {
        self.k.shape()[1]
    }

    /// The whole key storage `[kv_heads, max_len, head_dim]` (for kernels that take a length).
    pub fn key_storage(&self) -> &Tensor {
        &self.k
    }

    /// The whole value storage.
    pub fn value_storage(&self) -> &Tensor {
        &self.v
    }

    /// The filled keys, a view `[kv_heads, len, head_dim]`.
    ///
    /// # Errors
    /// Never in practice (the view is in range by construction).
    pub fn keys(&self) -> Result<Tensor> {
        self.k.narrow(1, 0, self.len)
    }

    /// The filled values, a view `[kv_heads, len, head_dim]`.
    ///
    /// # Errors
    /// As [`KvCache::keys`].
    pub fn values(&self) -> Result<Tensor> {
        self.v.narrow(1, 0, self.len)
    }

    /// Forgets everything (no memory is touched).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` positions.
    ///
    /// # Errors
    /// [`Error::Shape`] if `len` is more than is filled.
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        if len > self.len {
            return Err(Error::shape(
                "kv_cache",
                format!("cannot truncate {} positions to {len}", self.len),
            ));
        }
        self.len = len;
        Ok(())
    }

    /// Declares the first `len` positions filled, after writes made with
    /// [`KvCache::append_at`] (a captured decode step appends at a position held on the device).
    ///
    /// # Errors
    /// [`Error::Shape`] if `len` exceeds the capacity.
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        if len > self.max_len() {
            return Err(Error::shape(
                "kv_cache",
                format!("{len} positions in a cache of {}", self.max_len()),
            ));
        }
        self.len = len;
        Ok(())
    }

    /// Appends `k_new`, `v_new` (`[tokens, kv_heads, head_dim]`) after the filled positions.
    ///
    /// # Errors
    /// [`Error::Shape`] for mismatched shapes or a full cache; dtype/device errors.
    pub fn append(&mut self, k_new: &Tensor, v_new: &Tensor) -> Result<()> {
        let tokens = k_new.shape().first().copied().unwrap_or(0);
        if self.len + tokens > self.max_len() {
            return Err(Error::shape(
                "kv_cache",
                format!(
                    "{} + {tokens} positions exceed the cache's {}",
                    self.len,
                    self.max_len()
                ),
            ));
        }
        let pos = Tensor::from_slice(&[self.len as i32], &[1], &self.k.device())?;
        self.append_at(k_new, v_new, &pos)?;
        self.len += tokens;
        Ok(())
    }

    /// Writes `k_new`, `v_new` at the position held in `pos` (i32 `[1]`, on the cache's device;
    /// read by the kernel, so this can be captured in a graph and replayed with the next
    /// position). The host-side length is not changed. A write past `max_len` writes nothing and
    /// is reported at the next synchronising call on CUDA (at once on the CPU).
    ///
    /// # Errors
    /// [`Error::Shape`] / [`Error::DType`] for mismatched operands; [`Error::Index`] on the CPU for
    /// a position out of range.
    pub fn append_at(&mut self, k_new: &Tensor, v_new: &Tensor, pos: &Tensor) -> Result<()> {
        let dev = same_device("kv_cache", &[&self.k, k_new, v_new, pos])?;
        Error::expect_dtype("kv_cache position", pos.dtype(), DType::I32)?;
        let (kv_heads, max_len, head_dim) =
            (self.k.shape()[0], self.k.shape()[1], self.k.shape()[2]);
        for t in [k_new, v_new] {
            Error::expect_dtype("kv_cache", t.dtype(), self.k.dtype())?;
            if t.rank() != 3
                || t.shape()[1..] != [kv_heads, head_dim]
                || t.shape()[0] != k_new.shape()[0]
            {
                return Err(Error::shape(
                    "kv_cache",
                    format!(
                        "new rows {:?} must be [tokens, {kv_heads}, {head_dim}]",
                        t.shape()
                    ),
                ));
            }
        }
        if pos.shape() != [1] {
            return Err(Error::shape(
                "kv_cache",
                format!("position {:?} must be [1]", pos.shape()),
            ));
        }
        let tokens = k_new.shape()[0];
        match &dev {
            Device::Cpu => {
                let p = pos.to_vec::<i32>()?[0];
                if p < 0 || p as usize + tokens > max_len {
                    return Err(Error::Index {
                        op: "kv_cache",
                        detail: format!("position {p} + {tokens} rows in a cache of {max_len}"),
                    });
                }
                for (cache, fresh) in [(&self.k, k_new), (&self.v, v_new)] {
                    let src = fresh.to_vec_f64()?;
                    let mut dst = cache
                        .host_mut()
                        .ok_or_else(|| Error::shape("cpu", "host"))?;
                    for (t, &x) in src.iter().enumerate() {
                        let (d, r) = (t % head_dim, t / head_dim);
                        let (h, tok) = (r % kv_heads, r / kv_heads);
                        dst.set((h * max_len + p as usize + tok) * head_dim + d, x);
                    }
                }
                Ok(())
            }
            Device::Cuda(c) => {
                for (cache, fresh) in [(&self.k, k_new), (&self.v, v_new)] {
                    let fresh = fresh.contiguous()?;
                    need_contiguous("kv_cache", cache, "the cache")?;
                    let args = KernelArgs::new()
                        .arg(dptr(cache)?)
                        .arg(dptr(&fresh)?)
                        .arg(dptr(pos)?)
                        .arg(u32_dim("kv_cache", tokens)?)
                        .arg(u32_dim("kv_cache", kv_heads)?)
                        .arg(u32_dim("kv_cache", head_dim)?)
                        .arg(u32_dim("kv_cache", max_len)?)
                        .arg(c.err_ptr());
                    let n = tokens * kv_heads * head_dim;
                    // SAFETY: the cache holds kv_heads·max_len·head_dim elements, fresh
                    // tokens·kv_heads·head_dim; the kernel checks pos + tokens ≤ max_len before
                    // writing; pos is one i32; the error flag is 4 bytes.
                    unsafe {
                        c.launch(
                            Kernel::KvAppend(cache.dtype()),
                            &launch::elementwise(n.max(1), c.props()),
                            &args,
                        )
                    }?;
                }
                Ok(())
            }
        }
    }
}
