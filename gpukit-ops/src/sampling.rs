//! Token sampling: the Philox-4x32-10 counter-based generator (Salmon et al., "Parallel random
//! numbers: as easy as 1, 2, 3", SC 2011) and the CPU reference of the sampler the device kernels
//! reproduce.
//!
//! A draw is a pure function of (seed, step): the same seed gives the same tokens on any run and
//! any device. The sampler works in f32 in a fixed order so a device implementation can match it
//! id for id:
//! 1. repetition penalty over the window of previous ids (CTRL, Keskar et al. 2019): a positive
//!    logit is divided by the penalty, a negative one multiplied;
//! 2. temperature 0 → greedy (first maximum);
//! 3. logits / temperature, softmax (max-subtracted);
//! 4. candidates ordered by probability, descending, ties by lower id; top-k keeps the first k;
//!    top-p keeps the shortest prefix whose mass reaches p; min-p keeps those with probability
//!    ≥ min_p · the largest;
//! 5. one uniform draw in [0, 1) scaled by the kept mass picks the token by cumulative sum in that
//!    order.

/// Philox-4x32-10: 128-bit counter, 64-bit key → four 32-bit words.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = M0 * u64::from(c[0]);
        let p1 = M1 * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// The uniform draw in [0, 1) for `step` of a request seeded with `seed`: the top 24 bits of
/// Philox word 0 at counter (step, 0, 0, 0), key (seed low, seed high) — exact in f32.
pub fn uniform(seed: u64, step: u64) -> f32 {
    let w = philox4x32_10(
        [step as u32, (step >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    );
    (w[0] >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Sampling parameters. The defaults are greedy decoding.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 = greedy.
    pub temperature: f32,
    /// Keep the k most probable (0 = all).
    pub top_k: usize,
    /// Keep the smallest set reaching this mass (1 = all).
    pub top_p: f32,
    /// Keep tokens with probability ≥ min_p · the largest (0 = all).
    pub min_p: f32,
    /// Penalty for ids in the recent window (1 = none).
    pub repetition_penalty: f32,
    /// The request's seed.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

/// The candidates that survive the filters, in draw order, with their probabilities (not yet
/// renormalised). Empty `logits` give no candidates.
pub fn candidates(logits: &[f32], recent: &[u32], p: &SamplingParams) -> Vec<(u32, f32)> {
    let mut l = logits.to_vec();
    if p.repetition_penalty != 1.0 {
        let mut seen = vec![false; l.len()];
        for &id in recent {
            if let Some(s) = seen.get_mut(id as usize)
                && !*s
            {
                *s = true;
                let x = &mut l[id as usize];
                *x = if *x > 0.0 {
                    *x / p.repetition_penalty
                } else {
                    *x * p.repetition_penalty
                };
            }
        }
    }
    if l.is_empty() {
        return Vec::new();
    }
    if p.temperature <= 0.0 {
        let mut best = 0;
        for (i, &x) in l.iter().enumerate() {
            if x > l[best] {
                best = i;
            }
        }
        return vec![(best as u32, 1.0)];
    }
    let max = l
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b / p.temperature));
    let mut probs: Vec<(u32, f32)> = l
        .iter()
        .enumerate()
        .map(|(i, &x)| (i as u32, (x / p.temperature - max).exp()))
        .collect();
    let total: f32 = probs.iter().map(|c| c.1).sum();
    for c in &mut probs {
        c.1 /= total;
    }
    probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if p.top_k > 0 {
        probs.truncate(p.top_k);
    }
    if p.top_p < 1.0 {
        let mut mass = 0.0;
        let mut keep = probs.len();
        for (i, c) in probs.iter().enumerate() {
            mass += c.1;
            if mass >= p.top_p {
                keep = i + 1;
                break;
            }
        }
        probs.truncate(keep);
    }
    if p.min_p > 0.0 {
        let floor = probs[0].1 * p.min_p;
        probs.retain(|c| c.1 >= floor);
    }
    probs
}

/// Samples the token for `step` (CPU reference).
pub fn sample(logits: &[f32], recent: &[u32], p: &SamplingParams, step: u64) -> Option<u32> {
    let c = candidates(logits, recent, p);
    if c.len() <= 1 {
        return c.first().map(|x| x.0);
    }
    let mass: f32 = c.iter().map(|x| x.1).sum();
    let target = uniform(p.seed, step) * mass;
    let mut acc = 0.0;
    for &(id, prob) in &c {
        acc += prob;
        if target < acc {
            return Some(id);
        }
    }
    c.last().map(|x| x.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answers() {
        // kat_vectors of Random123 for philox4x32 with 10 rounds.
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn greedy_penalties_and_masks_are_exact() {
        let logits = [1.0f32, 3.0, 2.0, 3.0, -1.0];
        assert_eq!(sample(&logits, &[], &SamplingParams::default(), 0), Some(1));
        // A penalty of 2 on id 1 (3 → 1.5) and id 4 (-1 → -2) makes id 3 the greedy choice.
        let p = SamplingParams {
            repetition_penalty: 2.0,
            ..Default::default()
        };
        assert_eq!(sample(&logits, &[1, 4, 1], &p, 0), Some(3));
        let t = SamplingParams {
            temperature: 1.0,
            ..Default::default()
        };
        let ids = |p: &SamplingParams| {
            candidates(&logits, &[], p)
                .iter()
                .map(|c| c.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&t), vec![1, 3, 2, 0, 4]);
        assert_eq!(
            ids(&SamplingParams {
                top_k: 2,
                ..t.clone()
            }),
            vec![1, 3]
        );
        // Probabilities ≈ [0.054, 0.397, 0.146, 0.397, 0.007] (softmax of the logits).
        assert_eq!(
            ids(&SamplingParams {
                top_p: 0.6,
                ..t.clone()
            }),
            vec![1, 3]
        );
        assert_eq!(
            ids(&SamplingParams {
                top_p: 0.85,
                ..t.clone()
            }),
            vec![1, 3, 2]
        );
        assert_eq!(
            ids(&SamplingParams {
                min_p: 0.3,
                ..t.clone()
            }),
            vec![1, 3, 2]
        );
        assert_eq!(ids(&SamplingParams { min_p: 0.5, ..t }), vec![1, 3]);
    }

    #[test]
    fn same_seed_same_tokens_and_the_distribution_follows_softmax() {
        let logits = [0.0f32, 1.0, 2.0, 0.5];
        let p = SamplingParams {
            temperature: 1.0,
            seed: 42,
            ..Default::default()
        };
        let run = |p: &SamplingParams| {
            (0..200)
                .map(|s| sample(&logits, &[], p, s).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(&p), run(&p));
        assert_ne!(
            run(&p),
            run(&SamplingParams {
                seed: 43,
                ..p.clone()
            })
        );
        // Chi-square over 20000 draws, 3 degrees of freedom: p = 0.001 at 16.27.
        let n = 20_000u64;
        let mut counts = [0f64; 4];
        for s in 0..n {
            counts[sample(&logits, &[], &p, s).unwrap() as usize] += 1.0;
        }
        let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let chi2: f64 = logits
            .iter()
            .zip(&counts)
            .map(|(&l, &c)| {
                let e = f64::from(l).exp() / z * n as f64;
                (c - e) * (c - e) / e
            })
            .sum();
        assert!(chi2 < 16.27, "chi-square {chi2} for counts {counts:?}");
    }
}
