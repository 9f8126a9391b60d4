//! VITS inference (Kim, Kong and Son, "Conditional Variational Autoencoder with Adversarial
//! Learning for End-to-End Text-to-Speech", ICML 2021), as Piper's voices export it: one
//! speaker, the stochastic duration predictor, a mean-only residual coupling flow and a HiFi-GAN
//! decoder (Kong, Kim and Bae, NeurIPS 2020).
//!
//! Every layer runs as gpukit ops on the voice's device (CPU or CUDA) on f32 tensors laid out
//! `[1, channels, frames]`, one utterance at a time (so no padding masks). The one step on the
//! host is the rational-quadratic spline of the duration predictor's flows (Durkan et al.,
//! "Neural Spline Flows", NeurIPS 2019): a few numbers per phoneme, on the path that brings the
//! durations to the host anyway (they size the output).

use gpukit_ops::signal::{self, Conv1d};
use gpukit_ops::{BinaryOp, DType, Device, ScalarOp, Tensor, UnaryOp, ops};

use super::onnx::{ConvLayer, OnnxWeights, Weight};
use crate::{Error, Result};

/// The most phoneme ids one utterance may have (a sentence of some 400 words): the text
/// encoder's attention holds `[heads, t, t]` scores. [`super::Voice::speak`] splits longer
/// sentences at word boundaries.
pub const MAX_IDS: usize = 4096;
/// HiFi-GAN's leaky-ReLU slope inside the generator.
const LRELU_SLOPE: f32 = 0.1;
/// The slope of the leaky ReLU before the generator's last convolution (PyTorch's default).
const LRELU_POST_SLOPE: f32 = 0.01;
/// LayerNorm's epsilon in the VITS modules.
const LN_EPS: f32 = 1e-5;
/// The duration predictor's spline: bins, tail bound and the minimum bin width, height and
/// derivative (VITS's `ConvFlow` and `piecewise_rational_quadratic_transform`).
const SPLINE_BINS: usize = 10;
const SPLINE_TAIL: f32 = 5.0;
const SPLINE_MIN: f32 = 1e-3;

/// A convolution's weights on the device.
struct Conv {
    w: Tensor,
    b: Option<Tensor>,
    geometry: Conv1d,
    transposed: bool,
}

impl Conv {
    fn load(w: &OnnxWeights, path: &str, dev: &Device) -> Result<Self> {
        let ConvLayer {
            weight,
            bias,
            geometry,
            transposed,
        } = w.conv(path)?;
        if weight.shape.len() != 3 || weight.shape.contains(&0) {
            return Err(Error::Format {
                file: "voice".into(),
                what: format!(
                    "{path}: weight of shape {:?}, not [out, in, taps]",
                    weight.shape
                ),
            });
        }
        Ok(Self {
            w: tensor(weight, dev)?,
            b: bias.as_ref().map(|b| tensor(b, dev)).transpose()?,
            geometry: *geometry,
            transposed: *transposed,
        })
    }

    /// A convolution the exporter runs after a separate `Pad` node (VITS's feed-forward layers
    /// pad their input themselves): the same-length padding of an odd kernel.
    fn load_same(w: &OnnxWeights, path: &str, dev: &Device) -> Result<Self> {
        let mut c = Self::load(w, path, dev)?;
        let k = c.w.shape()[2];
        if k % 2 == 0 || c.geometry.padding != 0 {
            return Err(Error::Format {
                file: "voice".into(),
                what: format!("{path}: expected an unpadded odd kernel, got {k} taps"),
            });
        }
        c.geometry.padding = k / 2;
        Ok(c)
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(if self.transposed {
            signal::conv_transpose1d(x, &self.w, self.b.as_ref(), &self.geometry)?
        } else {
            signal::conv1d(x, &self.w, self.b.as_ref(), &self.geometry)?
        })
    }
}

fn tensor(w: &Weight, dev: &Device) -> Result<Tensor> {
    Ok(Tensor::from_slice(&w.values, &w.shape, dev)?)
}

/// LayerNorm over the channels of `[1, C, T]` (VITS's channel-first `LayerNorm`).
struct ChannelNorm {
    gamma: Tensor,
    beta: Tensor,
}

impl ChannelNorm {
    fn load(w: &OnnxWeights, path: &str, dev: &Device) -> Result<Self> {
        Ok(Self {
            gamma: tensor(w.weight(&format!("{path}.gamma"))?, dev)?,
            beta: tensor(w.weight(&format!("{path}.beta"))?, dev)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let t = x.transpose(1, 2)?.contiguous()?;
        let y = ops::layer_norm(&t, &self.gamma, Some(&self.beta), LN_EPS)?;
        Ok(y.transpose(1, 2)?.contiguous()?)
    }
}

fn leaky_relu(x: &Tensor, slope: f32) -> Result<Tensor> {
    let scaled = ops::scalar(ScalarOp::Mul, x, slope)?;
    Ok(ops::binary(BinaryOp::Maximum, x, &scaled)?)
}

fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(ops::binary(BinaryOp::Add, a, b)?)
}

/// `x[:, start..start + len]` of `[1, C, T]`, contiguous.
fn channels(x: &Tensor, start: usize, len: usize) -> Result<Tensor> {
    Ok(x.narrow(1, start, len)?.contiguous()?)
}

/// Multi-head self-attention with windowed relative positions (Shaw et al. 2018), keys and
/// values sharing one embedding table per layer across heads.
struct RelAttention {
    q: Conv,
    k: Conv,
    v: Conv,
    o: Conv,
    /// `[k_channels, 2·window + 1]`: the key embeddings, transposed for the product.
    rel_k: Tensor,
    /// `[2·window + 1, k_channels]`.
    rel_v: Tensor,
    heads: usize,
    window: usize,
}

impl RelAttention {
    fn load(w: &OnnxWeights, path: &str, heads: usize, dev: &Device) -> Result<Self> {
        let rel = |name: &str| -> Result<Tensor> {
            let e = w.weight(&format!("{path}.{name}"))?;
            let (n, d) = match e.shape[..] {
                [1, n, d] => (n, d),
                _ => {
                    return Err(Error::Format {
                        file: "voice".into(),
                        what: format!("{path}.{name} has shape {:?}, not [1, 2w+1, d]", e.shape),
                    });
                }
            };
            tensor(
                &Weight {
                    shape: vec![n, d],
                    values: e.values.clone(),
                },
                dev,
            )
        };
        let rel_v = rel("emb_rel_v")?;
        let rel_k = rel("emb_rel_k")?.transpose(0, 1)?.contiguous()?;
        let window = rel_v.shape()[0].saturating_sub(1) / 2;
        Ok(Self {
            q: Conv::load(w, &format!("{path}.conv_q"), dev)?,
            k: Conv::load(w, &format!("{path}.conv_k"), dev)?,
            v: Conv::load(w, &format!("{path}.conv_v"), dev)?,
            o: Conv::load(w, &format!("{path}.conv_o"), dev)?,
            rel_k,
            rel_v,
            heads,
            window,
        })
    }

    fn forward(&self, x: &Tensor, rel: &RelIndex) -> Result<Tensor> {
        let (c, t) = (x.shape()[1], x.shape()[2]);
        let (h, d) = (self.heads, c / self.heads);
        let scale = 1.0 / (d as f32).sqrt();
        // [h, t, d] queries (scaled) and values, [h, d, t] keys.
        let q = self.q.forward(x)?.reshape(&[h, d, t])?.transpose(1, 2)?;
        let q = ops::scalar(ScalarOp::Mul, &q.contiguous()?, scale)?;
        let k = self.k.forward(x)?.reshape(&[h, d, t])?;
        let v = self
            .v
            .forward(x)?
            .reshape(&[h, d, t])?
            .transpose(1, 2)?
            .contiguous()?;
        // scores[i, j] = q_i·k_j + q_i·e_k[j − i + w] for |j − i| ≤ w.
        let scores = ops::matmul(&q, &k)?;
        let rel_logits = ops::matmul(&q, &self.rel_k)?;
        let local = ops::gather(&rel_logits, 2, &rel.to_absolute)?;
        let local = ops::binary(BinaryOp::Mul, &local, &rel.absolute_mask)?;
        let p = ops::softmax(&add(&scores, &local)?, 2)?;
        // out_i = Σ_j p_ij v_j + Σ_r p[i, i + r − w] e_v[r].
        let out = ops::matmul(&p, &v)?;
        let rel_w = ops::gather(&p, 2, &rel.to_relative)?;
        let rel_w = ops::binary(BinaryOp::Mul, &rel_w, &rel.relative_mask)?;
        let out = add(&out, &ops::matmul(&rel_w, &self.rel_v)?)?;
        let out = out.transpose(1, 2)?.contiguous()?.reshape(&[1, c, t])?;
        self.o.forward(&out)
    }
}

/// The gathers between relative and absolute positions for `t` frames and window `w`.
struct RelIndex {
    /// `[h, t, t]`: for (i, j), the relative slot j − i + w (clamped).
    to_absolute: Tensor,
    /// `[h, t, t]`: 1 where |j − i| ≤ w.
    absolute_mask: Tensor,
    /// `[h, t, 2w + 1]`: for (i, r), the absolute position i + r − w (clamped).
    to_relative: Tensor,
    /// `[h, t, 2w + 1]`: 1 where 0 ≤ i + r − w < t.
    relative_mask: Tensor,
}

impl RelIndex {
    fn new(t: usize, w: usize, heads: usize, dev: &Device) -> Result<Self> {
        let n = 2 * w + 1;
        let (mut abs_i, mut abs_m) = (Vec::with_capacity(t * t), Vec::with_capacity(t * t));
        for i in 0..t as i64 {
            for j in 0..t as i64 {
                let r = j - i + w as i64;
                abs_i.push(r.clamp(0, n as i64 - 1) as i32);
                abs_m.push(if (0..n as i64).contains(&r) {
                    1.0f32
                } else {
                    0.0
                });
            }
        }
        let (mut rel_i, mut rel_m) = (Vec::with_capacity(t * n), Vec::with_capacity(t * n));
        for i in 0..t as i64 {
            for r in 0..n as i64 {
                let j = i + r - w as i64;
                rel_i.push(j.clamp(0, t as i64 - 1) as i32);
                rel_m.push(if (0..t as i64).contains(&j) {
                    1.0f32
                } else {
                    0.0
                });
            }
        }
        // Masks repeated per head too: the products with them are then of one shape (the
        // CPU's dense path), not broadcast.
        Ok(Self {
            to_absolute: Tensor::from_slice(&abs_i.repeat(heads), &[heads, t, t], dev)?,
            absolute_mask: Tensor::from_slice(&abs_m.repeat(heads), &[heads, t, t], dev)?,
            to_relative: Tensor::from_slice(&rel_i.repeat(heads), &[heads, t, n], dev)?,
            relative_mask: Tensor::from_slice(&rel_m.repeat(heads), &[heads, t, n], dev)?,
        })
    }
}

/// The text encoder: phoneme embeddings, a relative-position transformer (post-norm, ReLU
/// feed-forward of two convolutions), and the projection to the prior's mean and log-scale.
struct TextEncoder {
    emb: Tensor,
    attn: Vec<RelAttention>,
    norm1: Vec<ChannelNorm>,
    ffn: Vec<(Conv, Conv)>,
    norm2: Vec<ChannelNorm>,
    proj: Conv,
    hidden: usize,
}

/// VITS's attention heads in Piper's voices.
const HEADS: usize = 2;

impl TextEncoder {
    fn load(w: &OnnxWeights, dev: &Device) -> Result<Self> {
        let emb = w.embedding("enc_p.emb")?;
        let hidden = emb.shape.get(1).copied().unwrap_or(0);
        let layers = (0..)
            .take_while(|i| {
                w.conv(&format!("enc_p.encoder.attn_layers.{i}.conv_q"))
                    .is_ok()
            })
            .count();
        let mut s = Self {
            emb: tensor(emb, dev)?,
            attn: Vec::new(),
            norm1: Vec::new(),
            ffn: Vec::new(),
            norm2: Vec::new(),
            proj: Conv::load(w, "enc_p.proj", dev)?,
            hidden,
        };
        for i in 0..layers {
            let p = "enc_p.encoder";
            s.attn.push(RelAttention::load(
                w,
                &format!("{p}.attn_layers.{i}"),
                HEADS,
                dev,
            )?);
            s.norm1.push(ChannelNorm::load(
                w,
                &format!("{p}.norm_layers_1.{i}"),
                dev,
            )?);
            s.ffn.push((
                Conv::load_same(w, &format!("{p}.ffn_layers.{i}.conv_1"), dev)?,
                Conv::load_same(w, &format!("{p}.ffn_layers.{i}.conv_2"), dev)?,
            ));
            s.norm2.push(ChannelNorm::load(
                w,
                &format!("{p}.norm_layers_2.{i}"),
                dev,
            )?);
        }
        Ok(s)
    }

    /// ids `[t]` (i32) → (hidden states `[1, H, t]`, prior mean `[1, C, t]`, log-scale).
    fn forward(&self, ids: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let t = ids.shape()[0];
        let x = ops::embedding(&self.emb, ids)?;
        let x = ops::scalar(ScalarOp::Mul, &x, (self.hidden as f32).sqrt())?;
        let mut x = x
            .transpose(0, 1)?
            .contiguous()?
            .reshape(&[1, self.hidden, t])?;
        let window = self.attn.first().map_or(0, |a| a.window);
        let rel = RelIndex::new(t, window, HEADS, &x.device())?;
        for i in 0..self.attn.len() {
            let y = self.attn[i].forward(&x, &rel)?;
            x = self.norm1[i].forward(&add(&x, &y)?)?;
            let (c1, c2) = &self.ffn[i];
            let y = ops::unary(UnaryOp::Relu, &c1.forward(&x)?)?;
            let y = c2.forward(&y)?;
            x = self.norm2[i].forward(&add(&x, &y)?)?;
        }
        let stats = self.proj.forward(&x)?;
        let c = stats.shape()[1] / 2;
        Ok((x, channels(&stats, 0, c)?, channels(&stats, c, c)?))
    }
}

/// Dilated depthwise-separable convolutions (VITS's `DDSConv`): per layer a depthwise
/// convolution, LayerNorm, GELU, a 1×1 convolution, LayerNorm, GELU, and a residual add.
struct DdsConv {
    layers: Vec<(Conv, ChannelNorm, Conv, ChannelNorm)>,
}

impl DdsConv {
    fn load(w: &OnnxWeights, path: &str, dev: &Device) -> Result<Self> {
        let n = (0..)
            .take_while(|i| w.conv(&format!("{path}.convs_sep.{i}")).is_ok())
            .count();
        let layers = (0..n)
            .map(|i| {
                Ok((
                    Conv::load(w, &format!("{path}.convs_sep.{i}"), dev)?,
                    ChannelNorm::load(w, &format!("{path}.norms_1.{i}"), dev)?,
                    Conv::load(w, &format!("{path}.convs_1x1.{i}"), dev)?,
                    ChannelNorm::load(w, &format!("{path}.norms_2.{i}"), dev)?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    fn forward(&self, x: &Tensor, g: Option<&Tensor>) -> Result<Tensor> {
        let mut x = match g {
            Some(g) => add(x, g)?,
            None => x.clone(),
        };
        for (sep, n1, pw, n2) in &self.layers {
            let y = ops::unary(UnaryOp::GeluErf, &n1.forward(&sep.forward(&x)?)?)?;
            let y = ops::unary(UnaryOp::GeluErf, &n2.forward(&pw.forward(&y)?)?)?;
            x = add(&x, &y)?;
        }
        Ok(x)
    }
}

/// A coupling layer of the duration predictor: the second channel through a rational-quadratic
/// spline whose knots a DDSConv computes from the first channel and the conditioning.
struct ConvFlow {
    pre: Conv,
    convs: DdsConv,
    proj: Conv,
}

/// The stochastic duration predictor, sampled in reverse: noise through the inverted flows
/// gives log-durations (noise scale 0: the deterministic path).
struct DurationPredictor {
    pre: Conv,
    convs: DdsConv,
    proj: Conv,
    /// The flows in the order they run (reversed), the first one (unused in reverse) dropped.
    flows: Vec<ConvFlow>,
    /// The element-wise affine flow: mean and inverse scale (exp(−logs)) per channel.
    affine_m: [f32; 2],
    affine_inv_scale: [f32; 2],
}

impl DurationPredictor {
    fn load(w: &OnnxWeights, dev: &Device) -> Result<Self> {
        // Flows are [affine, (conv flow, flip) × n]: conv flows at odd indices. In reverse VITS
        // skips the first conv flow (index 1).
        let mut flows = Vec::new();
        let mut i = 3;
        while w.conv(&format!("dp.flows.{i}.pre")).is_ok() {
            flows.push(ConvFlow {
                pre: Conv::load(w, &format!("dp.flows.{i}.pre"), dev)?,
                convs: DdsConv::load(w, &format!("dp.flows.{i}.convs"), dev)?,
                proj: Conv::load(w, &format!("dp.flows.{i}.proj"), dev)?,
            });
            i += 2;
        }
        flows.reverse();
        let pair = |name: &str, v: &Weight| -> Result<[f32; 2]> {
            match v.values[..] {
                [a, b] => Ok([a, b]),
                _ => Err(Error::Format {
                    file: "voice".into(),
                    what: format!("{name} has {} values, not 2", v.values.len()),
                }),
            }
        };
        // exp(−logs): the exporter may have folded it into the flow's multiplication.
        let affine_inv_scale = match w.weight("dp.flows.0.logs") {
            Ok(logs) => pair("dp.flows.0.logs", logs)?.map(|l| (-l).exp()),
            Err(_) => pair("dp.flows.0 scale", w.node_weight("/dp/flows.0/Mul", 1)?)?,
        };
        Ok(Self {
            pre: Conv::load(w, "dp.pre", dev)?,
            convs: DdsConv::load(w, "dp.convs", dev)?,
            proj: Conv::load(w, "dp.proj", dev)?,
            flows,
            affine_m: pair("dp.flows.0.m", w.weight("dp.flows.0.m")?)?,
            affine_inv_scale,
        })
    }

    /// Log-durations `[t]` of the phonemes whose hidden states are `x` `[1, H, t]`; `noise`
    /// `[2, t]` (zeros for the deterministic path).
    fn forward(&self, x: &Tensor, noise: [Vec<f32>; 2]) -> Result<Vec<f32>> {
        let g = self
            .proj
            .forward(&self.convs.forward(&self.pre.forward(x)?, None)?)?;
        let t = x.shape()[2];
        let dev = x.device();
        let [mut z0, mut z1] = noise;
        for flow in &self.flows {
            // Flip (the channels swap), then the coupling on the new second channel.
            std::mem::swap(&mut z0, &mut z1);
            let x0 = Tensor::from_slice(&z0, &[1, 1, t], &dev)?;
            let h = flow.pre.forward(&x0)?;
            let h = flow.convs.forward(&h, Some(&g))?;
            let h = flow.proj.forward(&h)?;
            let params = h.to_vec::<f32>()?;
            let per = params.len() / t;
            let hidden_scale = 1.0 / (flow.pre.w.shape()[0] as f32).sqrt();
            for (j, z) in z1.iter_mut().enumerate() {
                let knots: Vec<f32> = (0..per).map(|p| params[p * t + j]).collect();
                *z = spline_inverse(*z, &knots, hidden_scale);
            }
        }
        // The first flip, then the element-wise affine flow inverted; channel 0 is the
        // log-duration.
        std::mem::swap(&mut z0, &mut z1);
        Ok(z0
            .iter()
            .map(|&z| (z - self.affine_m[0]) * self.affine_inv_scale[0])
            .collect())
    }
}

/// The inverse of the rational-quadratic spline on [−B, B] (identity outside), with knots from
/// `params`: `bins` unnormalised widths and heights (scaled by `hidden_scale`, VITS's
/// 1/√filter_channels) and `bins − 1` inner derivatives, the outer ones fixed so the spline
/// meets the identity tails with slope 1.
fn spline_inverse(y: f32, params: &[f32], hidden_scale: f32) -> f32 {
    let n = SPLINE_BINS;
    if !(-SPLINE_TAIL..=SPLINE_TAIL).contains(&y) || params.len() != 3 * n - 1 {
        return y;
    }
    let softmax = |v: &[f32]| -> Vec<f32> {
        let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = v.iter().map(|x| (x - m).exp()).collect();
        let s: f32 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    };
    let knots = |raw: &[f32]| -> Vec<f32> {
        let scaled: Vec<f32> = raw.iter().map(|v| v * hidden_scale).collect();
        let p = softmax(&scaled);
        let mut cum = vec![0.0f32; n + 1];
        let mut acc = 0.0f32;
        for (i, w) in p.iter().enumerate() {
            acc += SPLINE_MIN + (1.0 - SPLINE_MIN * n as f32) * w;
            cum[i + 1] = acc;
        }
        for c in &mut cum {
            *c = 2.0 * SPLINE_TAIL * *c - SPLINE_TAIL;
        }
        cum[0] = -SPLINE_TAIL;
        cum[n] = SPLINE_TAIL;
        cum
    };
    let cw = knots(&params[..n]);
    let ch = knots(&params[n..2 * n]);
    // Derivatives at the n + 1 knots: the ends fixed at 1, the inner ones min + softplus.
    let end = ((1.0 - SPLINE_MIN).exp() - 1.0).ln();
    let softplus = |x: f32| if x > 20.0 { x } else { x.exp().ln_1p() };
    let d: Vec<f32> = std::iter::once(end)
        .chain(params[2 * n..].iter().copied())
        .chain(std::iter::once(end))
        .map(|u| SPLINE_MIN + softplus(u))
        .collect();
    // The bin: the last knot below y (the top knot nudged up, as VITS's searchsorted does).
    let bin = (0..n).rev().find(|&k| y >= ch[k]).unwrap_or(0).min(n - 1);
    let (x0, w) = (cw[bin], cw[bin + 1] - cw[bin]);
    let (y0, h) = (ch[bin], ch[bin + 1] - ch[bin]);
    let delta = h / w;
    let (d0, d1) = (d[bin], d[bin + 1]);
    let dy = y - y0;
    let a = dy * (d0 + d1 - 2.0 * delta) + h * (delta - d0);
    let b = h * d0 - dy * (d0 + d1 - 2.0 * delta);
    let c = -delta * dy;
    let disc = b * b - 4.0 * a * c;
    let root = (2.0 * c) / (-b - disc.sqrt());
    root * w + x0
}

/// WaveNet-style layers (VITS's `WN`): gated dilated convolutions with residual and skip
/// outputs, no conditioning.
struct WaveNet {
    layers: Vec<(Conv, Conv)>,
}

impl WaveNet {
    fn load(w: &OnnxWeights, path: &str, dev: &Device) -> Result<Self> {
        let n = (0..)
            .take_while(|i| w.conv(&format!("{path}.in_layers.{i}")).is_ok())
            .count();
        let layers = (0..n)
            .map(|i| {
                Ok((
                    Conv::load(w, &format!("{path}.in_layers.{i}"), dev)?,
                    Conv::load(w, &format!("{path}.res_skip_layers.{i}"), dev)?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let hidden = x.shape()[1];
        let mut x = x.clone();
        let mut skip: Option<Tensor> = None;
        let last = self.layers.len().saturating_sub(1);
        for (i, (conv_in, res_skip)) in self.layers.iter().enumerate() {
            let a = conv_in.forward(&x)?;
            let acts = ops::binary(
                BinaryOp::Mul,
                &ops::unary(UnaryOp::Tanh, &channels(&a, 0, hidden)?)?,
                &ops::unary(UnaryOp::Sigmoid, &channels(&a, hidden, hidden)?)?,
            )?;
            let rs = res_skip.forward(&acts)?;
            let s = if i < last {
                x = add(&x, &channels(&rs, 0, hidden)?)?;
                channels(&rs, hidden, hidden)?
            } else {
                rs
            };
            skip = Some(match skip {
                Some(acc) => add(&acc, &s)?,
                None => s,
            });
        }
        skip.ok_or_else(|| Error::Format {
            file: "voice".into(),
            what: "a WaveNet without layers".into(),
        })
    }
}

/// The flow from the prior to the latent, inverted: mean-only residual coupling layers, each
/// preceded (in reverse) by a flip of the channel order.
struct Flow {
    /// (pre, WaveNet, post) per coupling layer, in the order they run (reversed).
    layers: Vec<(Conv, WaveNet, Conv)>,
}

impl Flow {
    fn load(w: &OnnxWeights, dev: &Device) -> Result<Self> {
        let mut layers = Vec::new();
        let mut i = 0;
        while w.conv(&format!("flow.flows.{i}.pre")).is_ok() {
            layers.push((
                Conv::load(w, &format!("flow.flows.{i}.pre"), dev)?,
                WaveNet::load(w, &format!("flow.flows.{i}.enc"), dev)?,
                Conv::load(w, &format!("flow.flows.{i}.post"), dev)?,
            ));
            i += 2;
        }
        layers.reverse();
        Ok(Self { layers })
    }

    fn forward(&self, z: &Tensor) -> Result<Tensor> {
        let c = z.shape()[1];
        let half = c / 2;
        let flip: Vec<i32> = (0..c as i32).rev().collect();
        let flip = Tensor::from_slice(&flip, &[c], &z.device())?;
        let mut z = z.clone();
        for (pre, wn, post) in &self.layers {
            z = ops::index_select(&z, 1, &flip)?;
            let x0 = channels(&z, 0, half)?;
            let x1 = channels(&z, half, half)?;
            let m = post.forward(&wn.forward(&pre.forward(&x0)?)?)?;
            let x1 = ops::binary(BinaryOp::Sub, &x1, &m)?;
            z = ops::concat(&[&x0, &x1], 1)?;
        }
        Ok(z)
    }
}

/// HiFi-GAN's generator: upsampling transposed convolutions, each followed by the mean of
/// multi-receptive-field residual blocks (leaky ReLU before each dilated convolution).
struct Generator {
    pre: Conv,
    ups: Vec<Conv>,
    /// Per upsampling stage, its residual blocks, each a list of convolutions.
    blocks: Vec<Vec<Vec<Conv>>>,
    post: Conv,
}

impl Generator {
    fn load(w: &OnnxWeights, dev: &Device) -> Result<Self> {
        let stages = (0..)
            .take_while(|i| w.conv(&format!("dec.ups.{i}")).is_ok())
            .count();
        let total = (0..)
            .take_while(|i| w.conv(&format!("dec.resblocks.{i}.convs.0")).is_ok())
            .count();
        let per = total.checked_div(stages).unwrap_or(0);
        if stages == 0 || per == 0 || per * stages != total {
            return Err(Error::Format {
                file: "voice".into(),
                what: format!("{stages} upsampling layers and {total} residual blocks"),
            });
        }
        let block = |b: usize| -> Result<Vec<Conv>> {
            (0..)
                .map_while(|j| {
                    let p = format!("dec.resblocks.{b}.convs.{j}");
                    w.conv(&p).is_ok().then(|| Conv::load(w, &p, dev))
                })
                .collect()
        };
        Ok(Self {
            pre: Conv::load(w, "dec.conv_pre", dev)?,
            ups: (0..stages)
                .map(|i| Conv::load(w, &format!("dec.ups.{i}"), dev))
                .collect::<Result<_>>()?,
            blocks: (0..stages)
                .map(|s| (0..per).map(|j| block(s * per + j)).collect())
                .collect::<Result<_>>()?,
            post: Conv::load(w, "dec.conv_post", dev)?,
        })
    }

    fn forward(&self, z: &Tensor) -> Result<Tensor> {
        let mut x = self.pre.forward(z)?;
        for (up, blocks) in self.ups.iter().zip(&self.blocks) {
            x = up.forward(&leaky_relu(&x, LRELU_SLOPE)?)?;
            let mut sum: Option<Tensor> = None;
            for convs in blocks {
                let mut y = x.clone();
                for conv in convs {
                    y = add(&y, &conv.forward(&leaky_relu(&y, LRELU_SLOPE)?)?)?;
                }
                sum = Some(match sum {
                    Some(s) => add(&s, &y)?,
                    None => y,
                });
            }
            if let Some(s) = sum {
                x = ops::scalar(ScalarOp::Div, &s, blocks.len() as f32)?;
            }
        }
        let x = self.post.forward(&leaky_relu(&x, LRELU_POST_SLOPE)?)?;
        Ok(ops::unary(UnaryOp::Tanh, &x)?)
    }
}

/// The noise scales and speaking rate of one synthesis (Piper's `scales` input).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scales {
    /// The prior's noise: 0 decodes the prior's mean (deterministic).
    pub noise_scale: f32,
    /// Duration multiplier: above 1 speaks slower.
    pub length_scale: f32,
    /// The duration predictor's noise: 0 is its deterministic path.
    pub noise_w: f32,
}

impl Scales {
    /// Checks that the scales are finite and non-negative, the length scale above 0.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the scales otherwise.
    pub fn validate(&self) -> Result<()> {
        let ok = |v: f32| v.is_finite() && v >= 0.0;
        if ok(self.noise_scale)
            && ok(self.noise_w)
            && ok(self.length_scale)
            && self.length_scale > 0.0
        {
            Ok(())
        } else {
            Err(Error::invalid(
                "tts",
                format!("scales must be finite and ≥ 0 (length scale > 0), got {self:?}"),
            ))
        }
    }
}

/// The intermediate results of one synthesis, for comparing each sub-network on its own.
#[derive(Debug)]
pub struct Trace {
    /// The text encoder's prior mean `[1, C, t]`.
    pub m_p: Tensor,
    /// The text encoder's prior log-scale `[1, C, t]`.
    pub logs_p: Tensor,
    /// The duration predictor's log-durations `[t]`.
    pub logw: Vec<f32>,
    /// Frames per phoneme (`⌈exp(logw)·length_scale⌉`).
    pub durations: Vec<usize>,
    /// The latent after the flow `[1, C, frames]`.
    pub z: Tensor,
    /// The waveform `[samples]`, in [−1, 1].
    pub audio: Tensor,
}

/// A loaded VITS network on one device.
pub struct Vits {
    enc: TextEncoder,
    dp: DurationPredictor,
    flow: Flow,
    dec: Generator,
    device: Device,
}

impl std::fmt::Debug for Vits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vits")
            .field("device", &self.device.describe())
            .field("encoder_layers", &self.enc.attn.len())
            .field("flows", &self.flow.layers.len())
            .field("upsampling", &self.dec.ups.len())
            .finish()
    }
}

impl Vits {
    /// Builds the network from an exported voice's weights on `device`.
    ///
    /// # Errors
    /// [`Error::Format`] for a weight or layer the network needs that the file lacks;
    /// tensor errors (device memory).
    pub fn load(w: &OnnxWeights, device: &Device) -> Result<Self> {
        Ok(Self {
            enc: TextEncoder::load(w, device)?,
            dp: DurationPredictor::load(w, device)?,
            flow: Flow::load(w, device)?,
            dec: Generator::load(w, device)?,
            device: device.clone(),
        })
    }

    /// The device the network runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Synthesises phoneme ids (Piper's ids, with its padding and BOS/EOS) into a waveform,
    /// keeping every intermediate result. Noise comes from `seed` when a noise scale is
    /// above 0.
    ///
    /// # Errors
    /// [`Error::Invalid`] for no ids, an id outside the voice's table, or scales that are not
    /// finite and non-negative (a length scale of 0); tensor errors.
    pub fn synthesize_trace(&self, ids: &[i64], scales: &Scales, seed: u64) -> Result<Trace> {
        const F: &str = "tts";
        let vocab = self.enc.emb.shape()[0];
        if ids.is_empty() {
            return Err(Error::invalid(F, "no phoneme ids to speak"));
        }
        if let Some(bad) = ids.iter().find(|&&i| i < 0 || i as usize >= vocab) {
            return Err(Error::invalid(
                F,
                format!("phoneme id {bad} is outside the voice's {vocab} symbols"),
            ));
        }
        scales.validate()?;
        if ids.len() > MAX_IDS {
            return Err(Error::invalid(
                F,
                format!(
                    "{} phoneme ids in one utterance; at most {MAX_IDS} (attention over the \
                     utterance grows with its square): split the text into sentences",
                    ids.len()
                ),
            ));
        }
        let t = ids.len();
        let ids32: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
        let ids_t = Tensor::from_slice(&ids32, &[t], &self.device)?;
        let (x, m_p, logs_p) = self.enc.forward(&ids_t)?;

        let noise = |n: usize, s: u64, scale: f32| -> Result<Vec<f32>> {
            if scale == 0.0 {
                return Ok(vec![0.0; n]);
            }
            Ok(gaussian(n, s)?.iter().map(|v| v * scale).collect())
        };
        let dp_noise = [
            noise(t, seed, scales.noise_w)?,
            noise(t, seed ^ 0x9e37_79b9, scales.noise_w)?,
        ];
        let logw = self.dp.forward(&x, dp_noise)?;
        let durations: Vec<usize> = logw
            .iter()
            .map(|&l| (l.exp() * scales.length_scale).ceil().max(0.0) as usize)
            .collect();
        let frames: usize = durations.iter().sum::<usize>().max(1);
        // Each frame takes its phoneme's prior (VITS's monotonic path from the durations).
        let mut path: Vec<i32> = durations
            .iter()
            .enumerate()
            .flat_map(|(i, &d)| std::iter::repeat_n(i as i32, d))
            .collect();
        path.resize(frames, (t - 1) as i32);
        let path = Tensor::from_slice(&path, &[frames], &self.device)?;
        let mut z_p = ops::index_select(&m_p, 2, &path)?;
        if scales.noise_scale > 0.0 {
            let c = m_p.shape()[1];
            let eps = noise(c * frames, seed ^ 0x5851_f42d, scales.noise_scale)?;
            let eps = Tensor::from_slice(&eps, &[1, c, frames], &self.device)?;
            let std = ops::unary(UnaryOp::Exp, &ops::index_select(&logs_p, 2, &path)?)?;
            z_p = add(&z_p, &ops::binary(BinaryOp::Mul, &eps, &std)?)?;
        }
        let z = self.flow.forward(&z_p)?;
        let audio = self.dec.forward(&z)?;
        let n = audio.numel();
        Ok(Trace {
            m_p,
            logs_p,
            logw,
            durations,
            z,
            audio: audio.reshape(&[n])?,
        })
    }

    /// The waveform of phoneme ids, f32 samples in [−1, 1] at the voice's rate.
    ///
    /// # Errors
    /// As [`Vits::synthesize_trace`].
    pub fn synthesize(&self, ids: &[i64], scales: &Scales, seed: u64) -> Result<Vec<f32>> {
        Ok(self
            .synthesize_trace(ids, scales, seed)?
            .audio
            .to_vec::<f32>()?)
    }
}

/// `n` standard normal samples from `seed` (Box–Muller over uniform samples).
fn gaussian(n: usize, seed: u64) -> Result<Vec<f32>> {
    let m = n.div_ceil(2).max(1);
    let u = Tensor::rand(&[2, m], 1e-7, 1.0, DType::F32, seed, &Device::Cpu)?.to_vec::<f32>()?;
    let mut out = Vec::with_capacity(2 * m);
    for i in 0..m {
        let r = (-2.0 * u[i].ln()).sqrt();
        let a = 2.0 * std::f32::consts::PI * u[m + i];
        out.extend([r * a.cos(), r * a.sin()]);
    }
    out.truncate(n);
    Ok(out)
}
