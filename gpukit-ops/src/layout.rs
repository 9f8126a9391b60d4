//! Shapes, strides and views.

use crate::{Error, Result};

/// Where a tensor's elements are in its storage: `element(i₀, …) = offset + Σ iₖ·strides[k]`.
/// Strides are in elements; 0 repeats an element (broadcast views).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

/// Row-major strides for `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut s = 1isize;
    for d in (0..shape.len()).rev() {
        strides[d] = s;
        s *= shape[d].max(1) as isize;
    }
    strides
}

/// The element count of `shape`, checked: at most `isize::MAX / 16` elements (so element and
/// byte offsets of any dtype, and the signed strides, fit).
///
/// # Errors
/// [`Error::Shape`] naming `op` and the shape when the product overflows that bound.
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 16)
        .ok_or_else(|| Error::shape(op, format!("{shape:?} has too many elements")))
}

/// The shape both operands broadcast to (numpy rules: align right; sizes equal or 1).
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::shape(
                    op,
                    format!("shapes {a:?} and {b:?} do not broadcast"),
                ));
            }
        };
    }
    checked_numel(op, &out)?;
    Ok(out)
}

impl Layout {
    /// A dense row-major layout.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// A layout with explicit element strides from storage index `offset` (a stride of 0
    /// repeats an element; callers check that the layout stays inside its storage).
    pub(crate) fn strided(shape: &[usize], strides: &[isize], offset: usize) -> Self {
        Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The strides, in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// First element's index in the storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the elements are dense and row-major.
    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1isize;
        for d in (0..self.shape.len()).rev() {
            if self.shape[d] != 1 && self.strides[d] != expect {
                return false;
            }
            expect *= self.shape[d] as isize;
        }
        true
    }

    /// One past the largest storage index this layout touches (0 when empty).
    pub fn span(&self) -> usize {
        if self.numel() == 0 {
            return 0;
        }
        let mut last = self.offset as isize;
        for (d, &n) in self.shape.iter().enumerate() {
            last += (n as isize - 1) * self.strides[d].max(0);
        }
        last as usize + 1
    }

    fn check_dim(&self, op: &'static str, dim: usize) -> Result<()> {
        if dim < self.shape.len() {
            Ok(())
        } else {
            Err(Error::shape(
                op,
                format!(
                    "dimension {dim} of a {}-d tensor {:?}",
                    self.shape.len(),
                    self.shape
                ),
            ))
        }
    }

    /// Elements `start..start + len` of dimension `dim`.
    ///
    /// # Errors
    /// [`Error::Shape`] if the range is outside the dimension.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Self> {
        self.check_dim("narrow", dim)?;
        if start
            .checked_add(len)
            .is_none_or(|end| end > self.shape[dim])
        {
            return Err(Error::shape(
                "narrow",
                format!(
                    "{start}..{start}+{len} of dimension {dim} of {:?}",
                    self.shape
                ),
            ));
        }
        let mut l = self.clone();
        l.offset = (self.offset as isize + start as isize * self.strides[dim]) as usize;
        l.shape[dim] = len;
        Ok(l)
    }

    /// Every `step`-th element of dimension `dim` from `start`, `len` of them (NumPy's
    /// `start::step` with a positive step).
    ///
    /// # Errors
    /// [`Error::Shape`] for a step of 0 or elements outside the dimension.
    pub fn slice(&self, dim: usize, start: usize, len: usize, step: usize) -> Result<Self> {
        self.check_dim("slice", dim)?;
        let last = len
            .checked_sub(1)
            .map(|n| n.checked_mul(step).and_then(|o| o.checked_add(start)));
        let inside = match last {
            None => start <= self.shape[dim],
            Some(end) => end.is_some_and(|e| e < self.shape[dim]),
        };
        let bad = || {
            Error::shape(
                "slice",
                format!(
                    "{len} elements from {start} in steps of {step} in dimension {dim} of {:?}",
                    self.shape
                ),
            )
        };
        if step == 0 || !inside {
            return Err(bad());
        }
        let mut l = self.narrow(dim, start, 0)?;
        l.shape[dim] = len;
        // With one element or none the step is never taken (and may be any size).
        if len > 1 {
            l.strides[dim] = isize::try_from(step)
                .ok()
                .and_then(|s| l.strides[dim].checked_mul(s))
                .ok_or_else(bad)?;
        }
        Ok(l)
    }

    /// Windows of `size` elements every `step` along `dim` (torch's `Tensor.unfold`): `dim`
    /// becomes the `(len − size) / step + 1` windows and a new last dimension of `size` walks
    /// each window. Windows overlap when `step < size` (a read-only view for an STFT's frames).
    ///
    /// # Errors
    /// [`Error::Shape`] for a step of 0 or a window longer than the dimension.
    pub fn unfold(&self, dim: usize, size: usize, step: usize) -> Result<Self> {
        self.check_dim("unfold", dim)?;
        let len = self.shape[dim];
        if step == 0 || size > len {
            return Err(Error::shape(
                "unfold",
                format!(
                    "windows of {size} every {step} do not fit dimension {dim} of {:?}",
                    self.shape
                ),
            ));
        }
        let stride = self.strides[dim];
        let mut l = self.clone();
        l.shape[dim] = (len - size) / step + 1;
        l.strides[dim] = isize::try_from(step)
            .ok()
            .and_then(|s| stride.checked_mul(s))
            .ok_or_else(|| Error::shape("unfold", format!("a step of {step} overflows")))?;
        l.shape.push(size);
        l.strides.push(stride);
        Ok(l)
    }

    /// Dimensions `a` and `b` swapped.
    ///
    /// # Errors
    /// [`Error::Shape`] for a dimension out of range.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Self> {
        self.check_dim("transpose", a)?;
        self.check_dim("transpose", b)?;
        let mut l = self.clone();
        l.shape.swap(a, b);
        l.strides.swap(a, b);
        Ok(l)
    }

    /// A size-1 dimension inserted before dimension `dim` (`dim == ndim` appends one).
    ///
    /// # Errors
    /// [`Error::Shape`] for `dim > ndim`.
    pub fn unsqueeze(&self, dim: usize) -> Result<Self> {
        if dim > self.shape.len() {
            return Err(Error::shape(
                "unsqueeze",
                format!("dimension {dim} of a rank-{} tensor", self.shape.len()),
            ));
        }
        let mut l = self.clone();
        // The stride of a size-1 dimension is never used to step; give it the span of the
        // dimensions after it so a contiguous tensor stays contiguous in every sense.
        let stride = l.strides.get(dim).map_or(1, |&s| s * l.shape[dim] as isize);
        l.shape.insert(dim, 1);
        l.strides.insert(dim, stride);
        Ok(l)
    }

    /// Dimension `dim`, of size 1, removed (the inverse of [`Layout::unsqueeze`]).
    ///
    /// # Errors
    /// [`Error::Shape`] if `dim` is out of range or its size is not 1.
    pub fn squeeze(&self, dim: usize) -> Result<Self> {
        self.check_dim("squeeze", dim)?;
        if self.shape[dim] != 1 {
            return Err(Error::shape(
                "squeeze",
                format!(
                    "dimension {dim} of {:?} has size {}, not 1",
                    self.shape, self.shape[dim]
                ),
            ));
        }
        let mut l = self.clone();
        l.shape.remove(dim);
        l.strides.remove(dim);
        Ok(l)
    }

    /// Dimensions reordered: dimension `i` of the result is dimension `dims[i]` of this one.
    ///
    /// # Errors
    /// [`Error::Shape`] unless `dims` is a permutation of `0..ndim`.
    pub fn permute(&self, dims: &[usize]) -> Result<Self> {
        let mut seen = vec![false; self.shape.len()];
        if dims.len() != self.shape.len()
            || dims
                .iter()
                .any(|&d| d >= seen.len() || std::mem::replace(&mut seen[d], true))
        {
            return Err(Error::shape(
                "permute",
                format!(
                    "{dims:?} is not a permutation of the dimensions of {:?}",
                    self.shape
                ),
            ));
        }
        Ok(Layout {
            shape: dims.iter().map(|&d| self.shape[d]).collect(),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        })
    }

    /// The same contiguous elements with another shape.
    ///
    /// # Errors
    /// [`Error::Shape`] if the element counts differ or the layout is not contiguous (call
    /// `contiguous()` on the tensor first).
    pub fn reshape(&self, shape: &[usize]) -> Result<Self> {
        let n = checked_numel("reshape", shape)?;
        if n != self.numel() {
            return Err(Error::shape(
                "reshape",
                format!(
                    "{:?} ({} elements) to {shape:?} ({n})",
                    self.shape,
                    self.numel()
                ),
            ));
        }
        if !self.is_contiguous() {
            return Err(Error::shape(
                "reshape",
                format!(
                    "{:?} is not contiguous; call contiguous() first",
                    self.shape
                ),
            ));
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: self.offset,
        })
    }

    /// A view repeating size-1 (or missing leading) dimensions to `shape`, with stride 0.
    ///
    /// # Errors
    /// [`Error::Shape`] if the shape is not a broadcast of this one.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Self> {
        checked_numel("broadcast", shape)?;
        if shape.len() < self.shape.len() {
            return Err(Error::shape(
                "broadcast",
                format!("{:?} to fewer dimensions {shape:?}", self.shape),
            ));
        }
        let lead = shape.len() - self.shape.len();
        let mut strides = vec![0isize; shape.len()];
        for (i, &n) in shape.iter().enumerate() {
            if i < lead {
                continue;
            }
            let own = self.shape[i - lead];
            if own == n {
                strides[i] = self.strides[i - lead];
            } else if own != 1 {
                return Err(Error::shape(
                    "broadcast",
                    format!("{:?} cannot broadcast to {shape:?}", self.shape),
                ));
            }
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// When the last dimension is dense (stride 1): its length and the storage index where each
    /// row starts, in row-major order. Rank 0 is one row of one element.
    pub(crate) fn rows(&self) -> Option<(usize, impl Iterator<Item = usize> + '_)> {
        let (len, outer) = match self.shape.split_last() {
            Some((&len, outer)) => (len, outer),
            None => (1, &[][..]),
        };
        if len > 1 && self.strides.last() != Some(&1) {
            return None;
        }
        let starts = Layout {
            shape: outer.to_vec(),
            strides: self.strides[..outer.len()].to_vec(),
            offset: self.offset,
        };
        Some((len, starts.indices_owned()))
    }

    /// Storage index of every element, in row-major order of the shape.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.clone().indices_owned()
    }

    fn indices_owned(self) -> impl Iterator<Item = usize> {
        let n = self.numel();
        let mut idx = vec![0usize; self.shape.len()];
        let mut pos = self.offset as isize;
        (0..n).map(move |i| {
            if i > 0 {
                for d in (0..idx.len()).rev() {
                    idx[d] += 1;
                    pos += self.strides[d];
                    if idx[d] < self.shape[d] {
                        break;
                    }
                    pos -= self.strides[d] * self.shape[d] as isize;
                    idx[d] = 0;
                }
            }
            pos as usize
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_slices() {
        let l = Layout::contiguous(&[6, 4]);
        let s = l.slice(0, 1, 3, 2).unwrap();
        assert_eq!(
            (s.shape(), s.strides(), s.offset()),
            (&[3, 4][..], &[8, 1][..], 4)
        );
        assert_eq!(s.indices().take(5).collect::<Vec<_>>(), [4, 5, 6, 7, 12]);
        // One element: any step; none: a start at the end.
        assert_eq!(l.slice(1, 2, 1, usize::MAX).unwrap().strides(), [4, 1]);
        assert_eq!(l.slice(0, 6, 0, 3).unwrap().numel(), 0);
        assert!(l.slice(0, 1, 3, 3).is_err()); // 1, 4, 7: past the end
        assert!(l.slice(0, 0, 2, 0).is_err());
    }

    #[test]
    fn views_and_indices() {
        let l = Layout::contiguous(&[2, 3]);
        assert!(l.is_contiguous());
        assert_eq!(l.indices().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5]);
        let t = l.transpose(0, 1).unwrap();
        assert!(!t.is_contiguous());
        assert_eq!(t.indices().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
        let n = l.narrow(1, 1, 2).unwrap();
        assert_eq!(n.indices().collect::<Vec<_>>(), vec![1, 2, 4, 5]);
        let b = Layout::contiguous(&[3]).broadcast_to(&[2, 3]).unwrap();
        assert_eq!(b.indices().collect::<Vec<_>>(), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(
            broadcast_shapes("t", &[4, 1, 3], &[5, 1]).unwrap(),
            vec![4, 5, 3]
        );
        assert!(broadcast_shapes("t", &[2, 3], &[4]).is_err());
        assert!(l.reshape(&[3, 2]).is_ok());
        assert!(t.reshape(&[6]).is_err());
        assert_eq!(t.span(), 6);
        let p = Layout::contiguous(&[2, 3, 4]).permute(&[2, 0, 1]).unwrap();
        assert_eq!(p.shape(), &[4, 2, 3]);
        assert!(Layout::contiguous(&[2, 3]).permute(&[0, 0]).is_err());
        let u = t.unsqueeze(0).unwrap();
        assert_eq!(u.shape(), &[1, 3, 2]);
        assert_eq!(u.indices().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
        let c = l.unsqueeze(2).unwrap();
        assert_eq!(c.shape(), &[2, 3, 1]);
        assert!(c.is_contiguous());
        assert!(l.unsqueeze(3).is_err());
    }
}
