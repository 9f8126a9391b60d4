//! A preallocated KV cache for one attention layer.
//!
//! Keys and values are stored `[kv_heads, max_len, head_dim]`: for a decode step, each KV head's
//! cached rows are one contiguous run, which is what a split-K attention kernel streams. New
//! rows arrive as `[tokens, kv_heads, head_dim]` (a projection's output layout) and are written at
//! a position that can come from device memory, so a captured decode step replays at the next
//! position without the host. Nothing is reallocated or concatenated while generating.
//!
//! A cache is laid out [`KvLayout::Linear`] (each row in order) or [`KvLayout::Swizzled`] (each
//! row's 16-byte chunks permuted by the key, so that the Hopper decode kernel can copy 64-key
//! tiles with plain 1-d bulk copies straight into the bank-conflict-free layout it reads). Every
//! writer here and every attention kernel takes either; [`KvLayout::linearize`] puts rows read
//! from storage back in order.

use gpukit_driver::KernelArgs;
use gpukit_kernels::kv::KvKernel;
use gpukit_kernels::{DType, grid};

use crate::ops::{dptr, need_contiguous, same_device, u32_dim};
use crate::{Device, Error, Result, Tensor};

/// How the keys' (and values') rows of `head_dim` elements are laid out in a KV cache, or in
/// the K/V operands of attention ([`crate::attention::sdpa_kv_into`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvLayout {
    /// Each row's elements in order.
    #[default]
    Linear,
    /// Pre-swizzled: within each whole 128-byte block of a row, the 16-byte chunk `j` is stored
    /// at chunk `j ^ (key mod 8)` of the block, `key` counted from the cache's (the operand's)
    /// first row; elements past the last whole block stay in place. 64 consecutive rows copied
    /// as one 1-d block then land in an XOR swizzle (the one the tensor memory accelerator's
    /// 128-byte mode writes, per row) that `ldmatrix` reads without bank conflicts: the Hopper
    /// decode kernel streams such a cache 0.3–2.0 µs faster per call than through tensor-map
    /// copies, which move lines of at most 128 bytes when they swizzle.
    Swizzled,
}

impl KvLayout {
    /// The layout for a cache on `device`: [`KvLayout::Swizzled`] on CUDA (what the fastest
    /// decode kernel reads; the other kernels read it through a different source address),
    /// [`KvLayout::Linear`] on the CPU (whose attention would otherwise reorder every row it
    /// reads).
    pub fn preferred(device: &Device) -> KvLayout {
        match device {
            Device::Cpu => KvLayout::Linear,
            Device::Cuda(_) => KvLayout::Swizzled,
        }
    }

    /// The column at which element `c` of row `key` (`head_dim` elements of `dtype`) is stored.
    pub fn column(self, key: usize, c: usize, head_dim: usize, dtype: DType) -> usize {
        let e = chunk_elements(dtype);
        let block = 8 * e;
        // Only whole blocks are swizzled.
        if self == KvLayout::Linear || c / block >= head_dim / block {
            return c;
        }
        // The chunk's index within its block, XOR-ed with the key.
        c ^ ((key & 7) * e)
    }

    /// The kernels' flag for the layout (`kv_swizzled` and the like: 1 for
    /// [`KvLayout::Swizzled`]).
    pub(crate) fn kernel_flag(self) -> u32 {
        u32::from(self == KvLayout::Swizzled)
    }

    /// Values read from storage in this layout — rows of `head_dim` elements of `dtype`, `keys`
    /// rows per head (the key of row `n` is `n mod keys`) — back in order. The swizzle is its own
    /// inverse (an XOR), so this also lays rows that are in order out in the layout.
    pub fn linearize<T: Copy>(
        self,
        data: Vec<T>,
        keys: usize,
        head_dim: usize,
        dtype: DType,
    ) -> Vec<T> {
        if self == KvLayout::Linear || head_dim == 0 || keys == 0 {
            return data;
        }
        let mut out = data.clone();
        // Whole 16-byte chunks move together (a partial one at the end of a row stays put).
        let e = chunk_elements(dtype);
        for (n, (row, src)) in out
            .chunks_exact_mut(head_dim)
            .zip(data.chunks_exact(head_dim))
            .enumerate()
        {
            for c in (0..head_dim / e * e).step_by(e) {
                let from = self.column(n % keys, c, head_dim, dtype);
                row[c..c + e].copy_from_slice(&src[from..from + e]);
            }
        }
        out
    }
}

/// Elements of `dtype` in a 16-byte chunk (every cache dtype is 2 or 4 bytes).
fn chunk_elements(dtype: DType) -> usize {
    (16 / dtype.size_in_bytes().max(1)).max(1)
}

/// The cache of one layer.
#[derive(Clone, Debug)]
pub struct KvCache {
    k: Tensor,
    v: Tensor,
    len: usize,
    layout: KvLayout,
}

impl KvCache {
    /// A zeroed cache for `max_len` positions (at most `i32::MAX`: positions are i32 on the
    /// device), its rows in `layout` ([`KvLayout::preferred`] for the device unless something
    /// reads the storage as plain rows).
    ///
    /// # Errors
    /// [`Error::DType`] for a non-float dtype; [`Error::Shape`] for `max_len` above `i32::MAX`;
    /// memory errors.
    pub fn new(
        kv_heads: usize,
        max_len: usize,
        head_dim: usize,
        dtype: DType,
        layout: KvLayout,
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
            layout,
        })
    }

    /// How the rows are laid out.
    pub fn layout(&self) -> KvLayout {
        self.layout
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

    /// The whole key storage `[kv_heads, max_len, head_dim]` (for kernels that take a length),
    /// rows in the cache's [`KvLayout`].
    pub fn key_storage(&self) -> &Tensor {
        &self.k
    }

    /// The whole value storage, rows in the cache's [`KvLayout`].
    pub fn value_storage(&self) -> &Tensor {
        &self.v
    }

    /// The filled keys, a view `[kv_heads, len, head_dim]`, rows in the cache's [`KvLayout`].
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
            crate::ops::same_dtype("kv_cache", &self.k, t)?;
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
                let dtype = self.k.dtype();
                for (cache, fresh) in [(&self.k, k_new), (&self.v, v_new)] {
                    let src = fresh.to_vec_f64()?;
                    let mut dst = cache.host_mut("cpu")?;
                    for (t, &x) in src.iter().enumerate() {
                        let (d, r) = (t % head_dim, t / head_dim);
                        let (h, key) = (r % kv_heads, p as usize + r / kv_heads);
                        let col = self.layout.column(key, d, head_dim, dtype);
                        dst.set((h * max_len + key) * head_dim + col, x);
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
                        .arg(self.layout.kernel_flag())
                        .arg(c.err_ptr());
                    let n = tokens * kv_heads * head_dim;
                    // SAFETY: the cache holds kv_heads·max_len·head_dim elements, fresh
                    // tokens·kv_heads·head_dim; the kernel checks pos + tokens ≤ max_len before
                    // writing; pos is one i32; the error flag is 4 bytes.
                    unsafe {
                        c.launch(
                            KvKernel::KvAppend(cache.dtype()),
                            &grid::elementwise(n.max(1), c.sm_count()),
                            &args,
                        )
                    }?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzled_columns() {
        let s = KvLayout::Swizzled;
        // bf16: 8 elements a chunk, blocks of 64. Key 3: chunk j of a block at j ^ 3.
        assert_eq!(s.column(3, 0, 128, DType::BF16), 24);
        assert_eq!(s.column(3, 9, 128, DType::BF16), 17);
        assert_eq!(s.column(3, 125, 128, DType::BF16), 101);
        // The key counts modulo 8; key 0 leaves rows in order.
        assert_eq!(s.column(11, 125, 128, DType::BF16), 101);
        assert_eq!(s.column(8, 77, 128, DType::BF16), 77);
        // head_dim 80: the tail past the first block stays in place.
        assert_eq!(s.column(5, 70, 80, DType::BF16), 70);
        assert_eq!(s.column(5, 2, 80, DType::BF16), 42);
        // f32: 4 elements a chunk, blocks of 32.
        assert_eq!(s.column(5, 6, 64, DType::F32), 18);
        assert_eq!(s.column(5, 6, 16, DType::F32), 6);
        assert_eq!(KvLayout::Linear.column(5, 6, 64, DType::F32), 6);
        // Each row's columns are a permutation, undone by linearize.
        for (hd, dt) in [
            (64, DType::BF16),
            (96, DType::F16),
            (72, DType::F32),
            (8, DType::BF16),
        ] {
            let keys = 11;
            let rows: Vec<usize> = (0..keys * hd).collect();
            let mut stored = vec![0; rows.len()];
            for (i, &x) in rows.iter().enumerate() {
                stored[i / hd * hd + s.column(i / hd, i % hd, hd, dt)] = x;
            }
            assert_eq!(s.linearize(stored, keys, hd, dt), rows, "{hd} {dt}");
        }
    }
}
