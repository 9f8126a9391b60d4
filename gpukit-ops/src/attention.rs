//! Scaled dot-product attention — the CPU reference the attention kernels are tested against:
//! `softmax(Q·Kᵀ·scale + mask)·V`, accumulated in f64.
//!
//! Layout: `q [batch, q_heads, q_len, head_dim]`, `k`/`v [batch, kv_heads, kv_len, head_dim]`,
//! output like `q`. Grouped-query attention without replication: query head `h` reads KV head
//! `h / (q_heads / kv_heads)`. The causal mask is offset so the queries are the last `q_len`
//! positions: query `i` sits at position `kv_len − q_len + i` and sees keys at positions ≤ its
//! own, and with a sliding window `w` only the last `w` of them (positions > pos − w).

use crate::{Error, Result};

/// Dimensions of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Sequences.
    pub batch: usize,
    /// Query heads.
    pub q_heads: usize,
    /// Key/value heads (divides `q_heads`).
    pub kv_heads: usize,
    /// Queries per sequence.
    pub q_len: usize,
    /// Keys per sequence.
    pub kv_len: usize,
    /// Values per head.
    pub head_dim: usize,
}

/// Which keys each query sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AttentionMask {
    /// Causal (with the offset described in the module docs).
    pub causal: bool,
    /// Sliding window length (Mistral), with `causal`.
    pub sliding_window: Option<usize>,
}

impl AttentionShape {
    fn check(&self, q: usize, k: usize, v: usize, mask: &AttentionMask) -> Result<()> {
        let s = self;
        let bad = |detail: String| Err(Error::shape("sdpa", detail));
        if s.kv_heads == 0 || !s.q_heads.is_multiple_of(s.kv_heads) {
            return bad(format!(
                "{} query heads do not divide into {} KV heads",
                s.q_heads, s.kv_heads
            ));
        }
        let (nq, nk) = (
            s.batch * s.q_heads * s.q_len * s.head_dim,
            s.batch * s.kv_heads * s.kv_len * s.head_dim,
        );
        if q != nq || k != nk || v != nk {
            return bad(format!(
                "{q}, {k}, {v} values for q, k, v of {s:?} (need {nq}, {nk}, {nk})"
            ));
        }
        if mask.causal && s.kv_len < s.q_len {
            return bad(format!(
                "causal attention with {} queries over {} keys",
                s.q_len, s.kv_len
            ));
        }
        if mask.sliding_window == Some(0) || (mask.sliding_window.is_some() && !mask.causal) {
            return bad("a sliding window needs a causal mask and at least one position".into());
        }
        Ok(())
    }
}

/// The reference attention (see the module docs). Returns the output, laid out like `q`.
///
/// # Errors
/// [`Error::Shape`] for sizes that do not match `shape`, heads that do not group, a causal mask
/// with more queries than keys, or an empty sliding window.
pub fn sdpa_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: AttentionShape,
    scale: f32,
    mask: AttentionMask,
) -> Result<Vec<f32>> {
    shape.check(q.len(), k.len(), v.len(), &mask)?;
    let AttentionShape {
        batch,
        q_heads,
        kv_heads,
        q_len,
        kv_len,
        head_dim: d,
    } = shape;
    let group = q_heads / kv_heads;
    let mut out = vec![0f32; q.len()];
    let mut scores = vec![0f64; kv_len];
    for b in 0..batch {
        for h in 0..q_heads {
            let kvh = h / group;
            let kbase = (b * kv_heads + kvh) * kv_len * d;
            for i in 0..q_len {
                let qrow = &q[((b * q_heads + h) * q_len + i) * d..][..d];
                let pos = kv_len - q_len + i;
                let visible = |j: usize| {
                    !mask.causal || (j <= pos && mask.sliding_window.is_none_or(|w| j + w > pos))
                };
                let mut max = f64::NEG_INFINITY;
                for (j, s) in scores.iter_mut().enumerate() {
                    *s = if visible(j) {
                        let krow = &k[kbase + j * d..][..d];
                        let dot: f64 = qrow
                            .iter()
                            .zip(krow)
                            .map(|(a, b)| f64::from(*a) * f64::from(*b))
                            .sum();
                        dot * f64::from(scale)
                    } else {
                        f64::NEG_INFINITY
                    };
                    max = max.max(*s);
                }
                let z: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                let orow = &mut out[((b * q_heads + h) * q_len + i) * d..][..d];
                for (t, o) in orow.iter_mut().enumerate() {
                    let acc: f64 = scores
                        .iter()
                        .enumerate()
                        .map(|(j, s)| (s - max).exp() * f64::from(v[kbase + j * d + t]))
                        .sum();
                    *o = (acc / z) as f32;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(
        q_heads: usize,
        kv_heads: usize,
        q_len: usize,
        kv_len: usize,
        d: usize,
    ) -> AttentionShape {
        AttentionShape {
            batch: 1,
            q_heads,
            kv_heads,
            q_len,
            kv_len,
            head_dim: d,
        }
    }

    #[test]
    fn equal_scores_average_the_values_and_the_mask_selects_keys() {
        // q = 0 gives equal scores: the output is the mean of the visible values.
        let s = shape(1, 1, 2, 3, 1);
        let (q, k, v) = ([0f32; 2], [1f32, 2.0, 3.0], [10f32, 20.0, 60.0]);
        let full = sdpa_reference(&q, &k, &v, s, 1.0, AttentionMask::default()).unwrap();
        assert_eq!(full, vec![30.0, 30.0]);
        // Causal with offset: query 0 is at position 1 (sees keys 0, 1), query 1 at 2 (all).
        let causal = AttentionMask {
            causal: true,
            sliding_window: None,
        };
        assert_eq!(
            sdpa_reference(&q, &k, &v, s, 1.0, causal).unwrap(),
            vec![15.0, 30.0]
        );
        // A window of 1: each query sees only its own position.
        let w1 = AttentionMask {
            causal: true,
            sliding_window: Some(1),
        };
        assert_eq!(
            sdpa_reference(&q, &k, &v, s, 1.0, w1).unwrap(),
            vec![20.0, 60.0]
        );
    }

    #[test]
    fn grouped_heads_equal_replicated_kv_heads() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let (hq, hkv, ql, kl, d) = (8, 2, 3, 17, 16);
        let mut r = |n: usize| {
            (0..n)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect::<Vec<_>>()
        };
        let (q, k, v) = (r(hq * ql * d), r(hkv * kl * d), r(hkv * kl * d));
        let mask = AttentionMask {
            causal: true,
            sliding_window: Some(5),
        };
        let gqa = sdpa_reference(&q, &k, &v, shape(hq, hkv, ql, kl, d), 0.25, mask).unwrap();
        let rep = |x: &[f32]| -> Vec<f32> {
            (0..hq)
                .flat_map(|h| x[(h / (hq / hkv)) * kl * d..][..kl * d].to_vec())
                .collect()
        };
        let mha =
            sdpa_reference(&q, &rep(&k), &rep(&v), shape(hq, hq, ql, kl, d), 0.25, mask).unwrap();
        assert_eq!(gqa, mha);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let s = shape(3, 2, 1, 1, 1);
        assert!(
            sdpa_reference(
                &[0.0; 3],
                &[0.0; 2],
                &[0.0; 2],
                s,
                1.0,
                AttentionMask::default()
            )
            .is_err()
        );
        let s = shape(1, 1, 2, 1, 1);
        let causal = AttentionMask {
            causal: true,
            sliding_window: None,
        };
        assert!(sdpa_reference(&[0.0; 2], &[0.0; 1], &[0.0; 1], s, 1.0, causal).is_err());
        let s = shape(1, 1, 1, 1, 1);
        assert!(
            sdpa_reference(&[0.0; 2], &[0.0], &[0.0], s, 1.0, AttentionMask::default()).is_err()
        );
    }
}
