//! Token sampling: the Philox-4x32-10 counter-based generator (Salmon et al., "Parallel random
//! numbers: as easy as 1, 2, 3", SC 2011), the CPU reference of the sampler, and
//! [`sample_tokens_into`], which runs it on tensors (on CUDA: a few launches per step, each a
//! grid of blocks over 1024-id chunks of the vocabulary, `gpukit-kernels/cuda/sampling.cu`).
//!
//! A draw is a pure function of (seed, step, row): the same seed gives the same tokens on any run
//! and any device. Every sum is exact — probabilities are 40-bit fixed-point integers — so no
//! order of the device's parallel work can change a threshold or a draw, and the reference is
//! plain sequential code:
//! 1. repetition penalty over the window of previous ids (CTRL, Keskar et al. 2019): a positive
//!    logit is divided by the penalty, a negative one multiplied;
//! 2. temperature 0 → greedy (first maximum; NaN counts as the maximum, like `torch.argmax`);
//! 3. z = logit / temperature, e = [`exp_det`](z − max z) ∈ [0, 1] (a NaN logit gives e = 0), and
//!    the weight q = ⌊e · 2⁴⁰⌋, an integer ([`fixed_weight`]; e < 2⁻⁴⁰ — a probability below
//!    10⁻¹² of the most likely token's — weighs nothing). The softmax is q / Σq;
//! 4. filters, each a threshold on e, ties at the threshold kept (as HF transformers' top-k
//!    does): top-k keeps e ≥ the k-th largest e; top-p keeps e ≥ the largest threshold whose
//!    kept weight reaches top_p · Σq (compared in f64); min-p keeps e ≥ min_p (p ≥ min_p · the
//!    largest p, as e of the most likely token is 1). The device finds the top-k and top-p
//!    thresholds by a three-round radix select over e's bit patterns (12, 10, 10 bits) with
//!    histograms of counts and weights;
//! 5. one uniform u in [0, 1) with 24 bits, u24 = u · 2²⁴, picks, in id order, the first id
//!    whose cumulative kept weight exceeds ⌊u24 · K / 2²⁴⌋ (K the kept weight). Where nothing
//!    weighs — every logit NaN or −∞, or any z = +∞ (a +∞ logit; then z − max is NaN for it and
//!    −∞ for the rest) — the draw is id 0.

use gpukit_driver::KernelArgs;
use gpukit_kernels::sampling::{self as kernels, SamplingKernel};
use gpukit_kernels::{DType, SamplerArgs};

use crate::ops::{check_out, dptr, same_device, u32_dim};
use crate::{Device, Error, Result, Tensor};

/// The scale of the sampler's fixed-point weights: q = ⌊e · 2⁴⁰⌋ for e ∈ [0, 1].
pub const FIXED_SCALE: f32 = (1u64 << 40) as f32;

/// The largest vocabulary the sampler takes: its weights (≤ 2⁴⁰ each) then sum below 2⁶⁴.
pub const MAX_VOCAB: usize = 1 << 23;

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

/// The uniform draw in [0, 1) for `step` of a request seeded with `seed` (row 0 of a batch):
/// the top 24 bits of Philox word 0 at counter (step, 0, 0, 0), key (seed low, seed high) —
/// exact in f32.
pub fn uniform(seed: u64, step: u64) -> f32 {
    uniform_at(seed, step, 0)
}

/// The uniform draw for `row` of a batch: counter (step low, step high, row, 0).
pub fn uniform_at(seed: u64, step: u64, row: u32) -> f32 {
    let w = philox4x32_10(
        [step as u32, (step >> 32) as u32, row, 0],
        [seed as u32, (seed >> 32) as u32],
    );
    (w[0] >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// `e^x` for the sampler (x ≤ 0), computed the same way on the CPU and the device: x·log2(e)
/// split into integer and fraction, 2^fraction by its degree-7 Taylor polynomial in fused
/// multiply-adds, scaled by 2^integer (relative error < 1e-5 down to 2^-126, mostly from
/// rounding x·log2(e)); 0 below 2^-126. Above f32's range (x > 88.7, never given by the
/// sampler) this CPU version returns +∞; the device's is only defined for x ≤ 0.
pub fn exp_det(x: f32) -> f32 {
    const C: [u32; 8] = [
        0x3f80_0000,
        0x3f31_7218,
        0x3e75_fdf0,
        0x3d63_5847,
        0x3c1d_955b,
        0x3aae_c3ff,
        0x3921_8489,
        0x377f_e5fe,
    ];
    let t = x * f32::from_bits(0x3fb8_aa3b);
    if t.is_nan() || t < -126.0 {
        return 0.0;
    }
    if t >= 128.0 {
        // Past f32's range (x > 88.7; the sampler never passes x > 0).
        return f32::INFINITY;
    }
    let n = t.floor();
    let f = t - n;
    let mut r = f32::from_bits(C[7]);
    for &c in C[..7].iter().rev() {
        r = r.mul_add(f, f32::from_bits(c));
    }
    r * f32::from_bits(((n as i32 + 127) as u32) << 23)
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

/// The fixed-point weight of `e` ∈ [0, 1]: ⌊e · 2⁴⁰⌋ (exact: the scaling is by a power of two,
/// the truncation of an f32 to an integer).
pub fn fixed_weight(e: f32) -> u64 {
    (e * FIXED_SCALE) as u64
}

/// The sampler's distribution over one row: e per id, the weights, their sum and the threshold
/// on e the filters leave (see the module docs).
struct Dist {
    e: Vec<f32>,
    q: Vec<u64>,
    total: u64,
    theta: f32,
}

fn penalized(logits: &[f32], recent: &[u32], penalty: f32) -> Vec<f32> {
    let mut l = logits.to_vec();
    if penalty != 1.0 {
        let mut seen = vec![false; l.len()];
        for &id in recent {
            if let Some(s) = seen.get_mut(id as usize) {
                *s = true;
            }
        }
        for (x, s) in l.iter_mut().zip(seen) {
            if s {
                *x = if *x > 0.0 { *x / penalty } else { *x * penalty };
            }
        }
    }
    l
}

/// Whether `kept` of `total` weight reaches the top-p mass: `kept ≥ top_p · total`, in f64 (as
/// the device compares).
pub fn reaches_top_p(kept: u64, total: u64, top_p: f32) -> bool {
    kept as f64 >= f64::from(top_p) * total as f64
}

fn distribution(l: &[f32], p: &SamplingParams) -> Dist {
    let z: Vec<f32> = l.iter().map(|&x| x / p.temperature).collect();
    // f32::max ignores NaN, as the device's fmaxf does.
    let m = z.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let e: Vec<f32> = z.iter().map(|&x| exp_det(x - m)).collect();
    let q: Vec<u64> = e.iter().map(|&x| fixed_weight(x)).collect();
    let total: u64 = q.iter().sum();
    let mut theta = 0f32;
    if p.min_p > 0.0 {
        theta = theta.max(p.min_p);
    }
    let topk = p.top_k > 0 && p.top_k < l.len();
    if topk || p.top_p < 1.0 {
        // A threshold is the e of some id, ties kept together; both are found on a copy of e.
        let mut vals = e.clone();
        if topk {
            // The k-th largest e.
            let (_, kth, _) = vals.select_nth_unstable_by(p.top_k - 1, largest_first);
            theta = theta.max(*kth);
        }
        if p.top_p < 1.0 {
            theta = theta.max(top_p_threshold(&mut vals, total, p.top_p));
        }
    }
    Dist { e, q, total, theta }
}

/// The order of e values, largest first.
fn largest_first(a: &f32, b: &f32) -> std::cmp::Ordering {
    b.total_cmp(a)
}

/// The largest e whose kept weight (the weights of every value at least it, `total` over all of
/// `vals`) reaches `top_p` of `total`; 0 where none does. The values are walked largest first,
/// in groups of equal values, over a sorted prefix of the largest: 1024 of them, then four times
/// as many while the prefix's weight falls short of the mass. A group cut off at the prefix's
/// end that already reaches it gives the same answer as the whole group would (more of it only
/// weighs more). `vals` is reordered.
fn top_p_threshold(vals: &mut [f32], total: u64, top_p: f32) -> f32 {
    let len = vals.len();
    let mut n = len.min(1024);
    loop {
        if n < len {
            vals.select_nth_unstable_by(n - 1, largest_first);
        }
        let prefix = &mut vals[..n];
        prefix.sort_unstable_by(largest_first);
        let mut kept = 0u64;
        let mut i = 0;
        while i < n {
            let v = prefix[i];
            while i < n && prefix[i] == v {
                kept += fixed_weight(v);
                i += 1;
            }
            if reaches_top_p(kept, total, top_p) {
                return v;
            }
        }
        if n == len {
            return 0.0;
        }
        n = n.saturating_mul(4).min(len);
    }
}

/// The ids that survive the filters, in id order, with their probabilities (q / Σq, not
/// renormalised over the kept ids). Greedy gives the one chosen id. Empty `logits`, and more
/// than [`MAX_VOCAB`] of them (whose weights could overflow the sum), give none.
pub fn candidates(logits: &[f32], recent: &[u32], p: &SamplingParams) -> Vec<(u32, f32)> {
    if logits.is_empty() || logits.len() > MAX_VOCAB {
        return Vec::new();
    }
    let l = penalized(logits, recent, p.repetition_penalty);
    if p.temperature <= 0.0 {
        return vec![(greedy(&l), 1.0)];
    }
    let d = distribution(&l, p);
    (0..l.len())
        .filter(|&i| d.e[i] >= d.theta)
        .map(|i| (i as u32, (d.q[i] as f64 / d.total.max(1) as f64) as f32))
        .collect()
}

/// The first maximum of `l`; NaN counts as larger than every number (the first NaN wins), like
/// `torch.argmax` and the CUDA sampler.
fn greedy(l: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in l.iter().enumerate() {
        let b = l[best];
        if !b.is_nan() && (x.is_nan() || x > b) {
            best = i;
        }
    }
    best as u32
}

/// Samples the token for `step` (CPU reference; row 0 of a batch). `None` as [`sample_row`].
pub fn sample(logits: &[f32], recent: &[u32], p: &SamplingParams, step: u64) -> Option<u32> {
    sample_row(logits, recent, p, step, 0)
}

/// The draw's target in [0, kept): ⌊u24 · kept / 2²⁴⌋ for the 24-bit uniform u24 of
/// (seed, step, row).
pub fn draw_target(seed: u64, step: u64, row: u32, kept: u64) -> u64 {
    let u24 = (uniform_at(seed, step, row) * 16_777_216.0) as u128;
    ((u24 * u128::from(kept)) >> 24) as u64
}

/// Samples the token of `row` of a batch for `step` (CPU reference). Id 0 when no id has any
/// weight (see the module docs); `None` for empty `logits` and for more than [`MAX_VOCAB`] of
/// them (whose weights could overflow the sum; [`sample_tokens_into`] refuses them too).
pub fn sample_row(
    logits: &[f32],
    recent: &[u32],
    p: &SamplingParams,
    step: u64,
    row: u32,
) -> Option<u32> {
    if logits.is_empty() || logits.len() > MAX_VOCAB {
        return None;
    }
    let l = penalized(logits, recent, p.repetition_penalty);
    if p.temperature <= 0.0 {
        return Some(greedy(&l));
    }
    let d = distribution(&l, p);
    let kept_q = |i: usize| if d.e[i] >= d.theta { d.q[i] } else { 0 };
    let kept: u64 = (0..l.len()).map(kept_q).sum();
    let target = draw_target(p.seed, step, row, kept);
    let mut acc = 0u64;
    for i in 0..l.len() {
        acc += kept_q(i);
        if acc > target {
            return Some(i as u32);
        }
    }
    Some(0)
}

impl SamplingParams {
    /// Whether a draw is the first maximum of the raw logits: greedy (temperature ≤ 0) with no
    /// repetition penalty applied (none set, or no recent-id window given). Such a draw needs
    /// no more than the logits' per-block maxima
    /// ([`crate::ops::rms_norm_linear_greedy_into`]).
    pub fn is_plain_greedy(&self, has_window: bool) -> bool {
        self.temperature <= 0.0 && (!has_window || self.repetition_penalty == 1.0)
    }

    /// Checks the ranges: temperature ≥ 0, top_p in (0, 1], min_p in [0, 1], penalty > 0.
    ///
    /// # Errors
    /// [`Error::Shape`] naming the bad parameter.
    pub fn validate(&self) -> Result<()> {
        let ok = self.temperature >= 0.0
            && self.top_p > 0.0
            && self.top_p <= 1.0
            && (0.0..=1.0).contains(&self.min_p)
            && self.repetition_penalty > 0.0;
        if ok {
            Ok(())
        } else {
            Err(Error::shape(
                "sampling",
                format!(
                    "parameters out of range (temperature ≥ 0, 0 < top_p ≤ 1, 0 ≤ min_p ≤ 1, \
                     repetition_penalty > 0): {self:?}"
                ),
            ))
        }
    }
}

/// Bytes of the u8 workspace [`sample_tokens_into`] needs on CUDA over `rows` rows of `vocab`
/// logits (each id's e, the histograms and per-chunk sums; ~4 bytes per id plus 37 KB per row).
/// `usize::MAX` past [`MAX_VOCAB`] ids or where the product overflows (no workspace is that
/// large: [`sample_tokens_into`] refuses such a vocabulary, or reports a short workspace).
pub fn sampler_workspace_len(rows: usize, vocab: usize) -> usize {
    if vocab > MAX_VOCAB {
        return usize::MAX;
    }
    rows.max(1).saturating_mul(kernels::row_bytes(vocab))
}

/// Samples one token id per row of `logits [rows, vocab]` (float, vocab ≤ [`MAX_VOCAB`]) into
/// `out [rows]` (i32), for the step held in `step` (i64 `[1]`, read on the device so a captured
/// decode step replays with the next value). `recent [rows, window]` (i32, negative entries
/// empty) are the ids the repetition penalty applies to. Row `r` draws at Philox counter
/// (step, r). `workspace`: u8, contiguous, 16-byte aligned (a tensor of its own, or a view at a
/// multiple of 16 bytes), at least [`sampler_workspace_len`] bytes (unused on the CPU).
/// Allocates nothing; capturable. The CPU runs the
/// reference, which picks the same ids.
///
/// # Errors
/// Shape, dtype and device errors (a short workspace among them); out-of-range parameters.
pub fn sample_tokens_into(
    logits: &Tensor,
    recent: Option<&Tensor>,
    params: &SamplingParams,
    step: &Tensor,
    workspace: &Tensor,
    out: &Tensor,
) -> Result<()> {
    params.validate()?;
    let mut operands = vec![logits, step];
    operands.extend(recent);
    let dev = same_device("sampling", &operands)?;
    crate::ops::float_only("sampling", logits)?;
    if logits.rank() != 2 || logits.shape()[1] == 0 {
        return Err(Error::shape(
            "sampling",
            format!(
                "logits {:?} {} must be [rows, vocab] with vocab ≥ 1",
                logits.shape(),
                logits.dtype()
            ),
        ));
    }
    let (rows, vocab) = (logits.shape()[0], logits.shape()[1]);
    if vocab > MAX_VOCAB {
        return Err(Error::shape(
            "sampling",
            format!("a vocabulary of {vocab} ids exceeds the sampler's {MAX_VOCAB}"),
        ));
    }
    Error::expect_dtype("sampling step", step.dtype(), DType::I64)?;
    if step.shape() != [1] {
        return Err(Error::shape("sampling", "step must be an i64 [1]"));
    }
    let window = match recent {
        Some(r) => {
            Error::expect_dtype("sampling recent ids", r.dtype(), DType::I32)?;
            if r.rank() != 2 || r.shape()[0] != rows {
                return Err(Error::shape(
                    "sampling",
                    format!("recent ids {:?} must be [{rows}, window]", r.shape()),
                ));
            }
            r.shape()[1]
        }
        None => 0,
    };
    check_out("sampling", out, &[rows], DType::I32, &dev, &operands)?;
    match &dev {
        Device::Cpu => {
            let l: Vec<f32> = logits.to_vec_f32()?;
            let ids: Vec<i32> = match recent {
                Some(r) => r.to_vec()?,
                None => Vec::new(),
            };
            let st = step.to_vec::<i64>()?[0] as u64;
            let picked: Vec<f64> = (0..rows)
                .map(|r| {
                    let rec: Vec<u32> = ids[r * window..(r + 1) * window]
                        .iter()
                        .filter(|&&i| i >= 0)
                        .map(|&i| i as u32)
                        .collect();
                    let row = &l[r * vocab..(r + 1) * vocab];
                    f64::from(sample_row(row, &rec, params, st, r as u32).unwrap_or(0))
                })
                .collect();
            crate::ops::write_host(out, picked)
        }
        Device::Cuda(c) => {
            let logits = logits.contiguous()?;
            let recent = recent.map(Tensor::contiguous).transpose()?;
            crate::ops::need_contiguous("sampling", out, "the output")?;
            let topk = params.top_k > 0 && params.top_k < vocab;
            let search = topk || params.top_p < 1.0;
            let args = SamplerArgs {
                temperature: params.temperature,
                top_p: params.top_p,
                min_p: params.min_p,
                penalty: params.repetition_penalty,
                top_k: if topk { params.top_k as u32 } else { 0 },
                vocab: u32_dim("sampling", vocab)?,
                window: u32_dim("sampling", window)?,
                chunks: u32_dim("sampling", kernels::chunks(vocab))?,
                seed: params.seed,
                row_bytes: kernels::row_bytes(vocab) as u64,
            };
            let recent_ptr = match &recent {
                Some(r) => dptr(r)?,
                None => gpukit_driver::DevicePtr::default(),
            };
            let dt = logits.dtype();
            let need = sampler_workspace_len(rows, vocab);
            check_workspace(workspace, need, &dev)?;
            if rows == 0 {
                return Ok(());
            }
            let ws = dptr(workspace)?;
            let grid = kernels::grid(rows, vocab)?;
            let run_on =
                |kernel: SamplingKernel, grid: &gpukit_driver::LaunchConfig, ka: KernelArgs| {
                    // SAFETY: every stage reads and writes only the rows × row_bytes workspace
                    // (checked above), laid out as `kernels::row_bytes` says; the first stage
                    // reads logits (rows × vocab) and recent (rows × window i32, when window > 0),
                    // the last reads step (one i64) and writes out (rows i32).
                    unsafe { c.launch(kernel, grid, &ka) }
                };
            let run = |kernel: SamplingKernel, ka: KernelArgs| run_on(kernel, &grid, ka);
            // The first stage reads the logits: each chunk's first maximum (greedy) or its z.
            let greedy = params.temperature <= 0.0;
            run(
                if greedy {
                    SamplingKernel::SampleGreedy(dt)
                } else {
                    SamplingKernel::SampleScale(dt)
                },
                KernelArgs::new()
                    .arg(dptr(&logits)?)
                    .arg(recent_ptr)
                    .arg(args)
                    .arg(ws),
            )?;
            if greedy {
                return run_on(
                    SamplingKernel::SampleGreedyMerge,
                    &kernels::merge_grid(rows)?,
                    KernelArgs::new().arg(args).arg(ws).arg(dptr(out)?),
                );
            }
            run(
                SamplingKernel::SampleExp,
                KernelArgs::new().arg(args).arg(ws),
            )?;
            if search {
                for level in [2u32, 3] {
                    run(
                        SamplingKernel::SampleRefine,
                        KernelArgs::new().arg(args).arg(ws).arg(level),
                    )?;
                }
            }
            if search || params.min_p > 0.0 {
                run(
                    SamplingKernel::SampleTheta,
                    KernelArgs::new().arg(args).arg(ws),
                )?;
            }
            run(
                SamplingKernel::SampleDraw,
                KernelArgs::new()
                    .arg(dptr(step)?)
                    .arg(args)
                    .arg(ws)
                    .arg(dptr(out)?),
            )
        }
    }
}

/// Checks the sampler's workspace: u8, contiguous, on `dev`, 16-byte aligned, at least `need`
/// bytes.
fn check_workspace(workspace: &Tensor, need: usize, dev: &Device) -> Result<()> {
    // Being u8, it cannot share storage with the float logits or the integer ids, step and
    // output (a tensor's storage has one dtype).
    Error::expect_dtype("sampling workspace", workspace.dtype(), DType::U8)?;
    // Device, then layout: only a CUDA tensor has an address to check.
    let usable =
        workspace.device().same(dev) && workspace.is_contiguous() && dptr(workspace)?.0 % 16 == 0;
    if !usable || workspace.numel() < need {
        return Err(Error::shape(
            "sampling",
            format!(
                "the workspace {:?} on {} must be a contiguous, 16-byte aligned u8 tensor of at \
                 least {need} bytes on {} (sampler_workspace_len)",
                workspace.shape(),
                workspace.device().describe(),
                dev.describe()
            ),
        ));
    }
    Ok(())
}

/// Moves a decode step's device state on by one token, after [`sample_tokens_into`] drew `token`
/// (i32 `[rows]`): `position` (i32 `[1]`) and `step` (i64 `[1]`) grow by one, and each row of
/// `recent` (i32 `[rows, window]`, oldest id first, negative entries empty) shifts left by one
/// with the drawn id entering at the end. One launch; allocates nothing; capturable, so a graph
/// of a whole decode step carries its own state from one replay to the next.
///
/// # Errors
/// Shape, dtype and device errors.
pub fn advance_decode_state(
    position: &Tensor,
    step: &Tensor,
    recent: Option<&Tensor>,
    token: &Tensor,
) -> Result<()> {
    let mut operands = vec![position, step, token];
    operands.extend(recent);
    let dev = same_device("decode state", &operands)?;
    Error::expect_dtype("decode position", position.dtype(), DType::I32)?;
    Error::expect_dtype("decode step", step.dtype(), DType::I64)?;
    Error::expect_dtype("decode token", token.dtype(), DType::I32)?;
    let rows = token.numel();
    let window = match recent {
        Some(r) => {
            Error::expect_dtype("decode recent ids", r.dtype(), DType::I32)?;
            if r.rank() != 2 || r.shape()[0] != rows || !r.is_contiguous() {
                return Err(Error::shape(
                    "decode state",
                    format!(
                        "recent ids {:?} must be a contiguous [{rows}, window]",
                        r.shape()
                    ),
                ));
            }
            r.shape()[1]
        }
        None => 0,
    };
    if position.shape() != [1] || step.shape() != [1] || token.rank() != 1 || !token.is_contiguous()
    {
        return Err(Error::shape(
            "decode state",
            format!(
                "position {:?} and step {:?} must be [1], token {:?} a contiguous [rows]",
                position.shape(),
                step.shape(),
                token.shape()
            ),
        ));
    }
    match &dev {
        Device::Cpu => {
            // Wrapping, as the kernel's increments are.
            let p = position.to_vec::<i32>()?[0];
            crate::ops::write_host(position, [f64::from(p.wrapping_add(1))])?;
            let st = step.to_vec::<i64>()?[0];
            crate::ops::write_host(step, [st.wrapping_add(1) as f64])?;
            // An empty window keeps nothing (as on the device).
            if let Some(r) = recent.filter(|_| window > 0) {
                let ids = token.to_vec::<i32>()?;
                let mut w = r.to_vec::<i32>()?;
                for (row, &id) in w.chunks_exact_mut(window).zip(&ids) {
                    row.rotate_left(1);
                    row[window - 1] = id;
                }
                crate::ops::write_host(r, w.into_iter().map(f64::from))?;
            }
            Ok(())
        }
        Device::Cuda(c) => {
            let ka = KernelArgs::new()
                .arg(dptr(position)?)
                .arg(dptr(step)?)
                .arg(match recent {
                    Some(r) => dptr(r)?,
                    None => gpukit_driver::DevicePtr::default(),
                })
                .arg(u32_dim("decode state", window)?)
                .arg(dptr(token)?)
                .arg(u32_dim("decode state", rows)?);
            // SAFETY: position is one i32, step one i64, token `rows` i32, recent rows × window
            // i32 (read and written only when window > 0); one thread.
            unsafe {
                c.launch(
                    SamplingKernel::DecodeAdvance,
                    &gpukit_kernels::grid::threads(1)?,
                    &ka,
                )
            }
        }
    }
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
        assert_eq!(ids(&t), vec![0, 1, 2, 3, 4]);
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
            vec![1, 2, 3]
        );
        assert_eq!(
            ids(&SamplingParams {
                min_p: 0.3,
                ..t.clone()
            }),
            vec![1, 2, 3]
        );
        assert_eq!(ids(&SamplingParams { min_p: 0.5, ..t }), vec![1, 3]);
    }

    #[test]
    fn exp_det_is_close_to_exp() {
        let mut worst = 0f64;
        // Down to x = -87 (2^-125.5); below 2^-126 the result is 0 by definition.
        for i in 0..=174_000 {
            let x = -(i as f32) * 0.000_5;
            let want = f64::from(x).exp();
            let rel = ((f64::from(exp_det(x)) - want) / want).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 1e-5, "exp_det relative error {worst:e}");
        assert_eq!(exp_det(0.0), 1.0);
        assert_eq!(exp_det(-200.0), 0.0);
        assert_eq!(exp_det(f32::NEG_INFINITY), 0.0);
    }

    #[test]
    fn top_p_threshold_equals_a_walk_over_every_value_sorted() {
        use rand::{Rng, SeedableRng};
        // The walk over all values, largest first, in groups of equal values.
        fn walk(vals: &[f32], total: u64, top_p: f32) -> f32 {
            let mut s = vals.to_vec();
            s.sort_by(|a, b| b.total_cmp(a));
            let (mut kept, mut i) = (0u64, 0);
            while i < s.len() {
                let v = s[i];
                while i < s.len() && s[i] == v {
                    kept += fixed_weight(v);
                    i += 1;
                }
                if reaches_top_p(kept, total, top_p) {
                    return v;
                }
            }
            0.0
        }
        let seed: u64 = rand::random();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for &n in &[1usize, 7, 1023, 1024, 1025, 4096, 5000, 70_000] {
            for case in 0..7 {
                let vals: Vec<f32> = (0..n)
                    .map(|_| match case {
                        // Peaked: a few large values, the rest tiny.
                        0 => exp_det(-rng.random_range(0.0f32..30.0)),
                        // Flat: the mass needs nearly every value.
                        1 => rng.random_range(0.5f32..1.0),
                        // Few distinct values: tie groups far larger than the first prefix.
                        2 => [1.0f32, 0.5, 0.25][rng.random_range(0..3)],
                        // All equal.
                        3 => 0.75,
                        // Many zeros (no weight) among a few values.
                        4 => {
                            if rng.random_bool(0.9) {
                                0.0
                            } else {
                                rng.random_range(0.0f32..1.0)
                            }
                        }
                        // Floored to 1/64: ties everywhere.
                        5 => (rng.random_range(0.0f32..1.0) * 64.0).floor() / 64.0,
                        // Distinct values that all weigh nothing (below 2^-40): total 0.
                        _ => rng.random_range(1e-15f32..8e-13),
                    })
                    .collect();
                let total: u64 = vals.iter().map(|&v| fixed_weight(v)).sum();
                for &top_p in &[0.0f32, 0.1, 0.5, 0.9, 0.999, 1.0] {
                    let mut work = vals.clone();
                    assert_eq!(
                        top_p_threshold(&mut work, total, top_p).to_bits(),
                        walk(&vals, total, top_p).to_bits(),
                        "n {n}, case {case}, top_p {top_p}, seed {seed}"
                    );
                }
            }
        }
    }

    #[test]
    fn top_k_keeps_ties_at_the_cut_and_filters_intersect() {
        let logits = [2.0f32, 1.0, 1.0, 1.0, 0.0];
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
        // k = 2: the second largest value is shared by ids 1, 2, 3 — all kept (HF semantics).
        assert_eq!(
            ids(&SamplingParams {
                top_k: 2,
                ..t.clone()
            }),
            vec![0, 1, 2, 3]
        );
        assert_eq!(
            ids(&SamplingParams {
                top_k: 1,
                top_p: 0.99,
                ..t.clone()
            }),
            vec![0]
        );
        assert!(
            SamplingParams {
                top_p: 0.0,
                ..t.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            SamplingParams {
                repetition_penalty: 0.0,
                ..t
            }
            .validate()
            .is_err()
        );
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
