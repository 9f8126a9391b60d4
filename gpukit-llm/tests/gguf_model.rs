//! A small Llama GGUF written here with every block format gpukit reads (Q8_0, Q4_0, Q4_1, Q4_K,
//! Q5_K, Q6_K, F16, F32):
//! - on the CPU, malformed variants of it fail with errors naming the file and the tensor;
//! - on CUDA (GPU test), the model with its weights kept quantized on the device (the quantized
//!   GEMV for decode steps, dequantize + GEMM for the prompt) gives the logits of the same model
//!   with its weights dequantized to bf16 at load within 3% of the largest logit (the prompt runs
//!   the same dequantize + GEMM in both; decode steps differ in the weights' bf16 rounding and
//!   the accumulation order, and each op's output is rounded to bf16 — about 1.7% measured on an
//!   H100, where a wrong block decode would be tens of percent), and the same greedy tokens
//!   wherever the margin exceeds twice the measured error; against the CPU model in f32 it stays
//!   within 6% (bf16 activations through two layers of large random weights).

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpukit_llm::engine::ComputeDevice;
use gpukit_llm::gguf::{GgufFile, GgufWriter};
use gpukit_llm::model::{LoadOptions, Model};
use gpukit_ops::Device;
use gpukit_ops::quant::{QuantFormat, quantize};
use half::f16;

const HIDDEN: usize = 256;
const FFN: usize = 512;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const VOCAB: usize = 300;
const LAYERS: usize = 2;

/// A small deterministic generator (xorshift) for weights.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn uniform(&mut self, scale: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }

    fn values(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(scale)).collect()
    }
}

/// GGML type ids (`enum ggml_type`).
const F32: u32 = 0;
const F16: u32 = 1;
const Q4_0: u32 = 2;
const Q4_1: u32 = 3;
const Q8_0: u32 = 8;
const Q4_K: u32 = 12;
const Q5_K: u32 = 13;
const Q6_K: u32 = 14;

/// `rows × cols` weights of GGML type `ty` (random values of about `scale`).
fn weights(rng: &mut Rng, ty: u32, rows: usize, cols: usize, scale: f32) -> Vec<u8> {
    let n = rows * cols;
    let mut q = |f| quantize(f, &rng.values(n, scale)).unwrap();
    match ty {
        Q8_0 => q(QuantFormat::Q8_0),
        Q4_0 => q(QuantFormat::Q4_0),
        Q4_1 => q(QuantFormat::Q4_1),
        F32 => rng
            .values(n, scale)
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        F16 => rng
            .values(n, scale)
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect(),
        // K-quants: random quants and sub-block scales, super-block scales set to sane values.
        Q4_K | Q5_K | Q6_K => {
            let (size, d_at) = match ty {
                Q4_K => (144, 0),
                Q5_K => (176, 0),
                _ => (210, 208),
            };
            let blocks = n / 256;
            let mut out: Vec<u8> = (0..blocks * size).map(|_| rng.next() as u8).collect();
            for b in out.chunks_exact_mut(size) {
                b[d_at..d_at + 2].copy_from_slice(&f16::from_f32(scale / 512.0).to_le_bytes());
                if ty != Q6_K {
                    b[2..4].copy_from_slice(&f16::from_f32(scale / 64.0).to_le_bytes());
                }
            }
            out
        }
        _ => unreachable!(),
    }
}

/// The GGUF bytes; `skip` leaves a tensor out, `wrong_shape` gives one an extra row.
fn model_file(seed: u64, skip: Option<&str>, wrong_shape: Option<&str>) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut w = GgufWriter::default();
    let tokens: Vec<String> = (0..VOCAB).map(|i| format!("t{i}")).collect();
    w.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", LAYERS as u32)
        .kv_u32("llama.embedding_length", HIDDEN as u32)
        .kv_u32("llama.feed_forward_length", FFN as u32)
        .kv_u32("llama.attention.head_count", HEADS as u32)
        .kv_u32("llama.attention.head_count_kv", KV_HEADS as u32)
        .kv_u32("llama.context_length", 256)
        .kv_f32("llama.rope.freq_base", 10000.0)
        .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
        .kv_strings("tokenizer.ggml.tokens", &tokens);
    let mut t = |name: &str, ty: u32, rows: usize, cols: usize, scale: f32| {
        let data = if ty == F32 && rows == 1 {
            // Norm weights around 1.
            rng.values(cols, 0.2)
                .iter()
                .flat_map(|x| (1.0 + x).to_le_bytes())
                .collect()
        } else {
            weights(&mut rng, ty, rows, cols, scale)
        };
        if skip == Some(name) {
            return;
        }
        let rows = if wrong_shape == Some(name) {
            rows + 1
        } else {
            rows
        };
        let dims: Vec<u64> = if rows == 1 {
            vec![cols as u64]
        } else {
            vec![cols as u64, rows as u64]
        };
        w.tensor(name, &dims, ty, &data);
    };
    let kv = KV_HEADS * HEAD_DIM;
    t("token_embd.weight", Q8_0, VOCAB, HIDDEN, 1.0);
    for i in 0..LAYERS {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        t(&n("attn_norm"), F32, 1, HIDDEN, 0.0);
        t(&n("attn_q"), Q4_K, HIDDEN, HIDDEN, 0.15);
        t(&n("attn_k"), Q5_K, kv, HIDDEN, 0.15);
        t(&n("attn_v"), Q6_K, kv, HIDDEN, 0.15);
        t(&n("attn_output"), Q8_0, HIDDEN, HIDDEN, 0.1);
        t(&n("ffn_norm"), F32, 1, HIDDEN, 0.0);
        t(&n("ffn_gate"), Q4_0, FFN, HIDDEN, 0.1);
        t(&n("ffn_up"), Q4_1, FFN, HIDDEN, 0.1);
        t(&n("ffn_down"), Q6_K, HIDDEN, FFN, 0.1);
    }
    t("output_norm.weight", F32, 1, HIDDEN, 0.0);
    t("output.weight", F16, VOCAB, HIDDEN, 0.3);
    w.bytes()
}

fn open(bytes: &[u8]) -> (tempfile::TempDir, GgufFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    std::fs::write(&path, bytes).unwrap();
    let f = GgufFile::open(&path).unwrap();
    (dir, f)
}

fn load(f: &GgufFile, device: &Device) -> gpukit_llm::Result<Model> {
    Model::from_gguf(f, device, LoadOptions::default(), &mut |_, _| {})
}

#[test]
fn malformed_models_name_the_file_and_tensor() {
    let (_d, f) = open(&model_file(7, None, None));
    let m = load(&f, &Device::Cpu).unwrap();
    assert_eq!(m.spec().n_kv_heads, KV_HEADS);
    let mut s = m.session(8).unwrap();
    let logits = m.forward_logits(&mut s, &[1, 2, 3]).unwrap();
    assert_eq!(logits.len(), VOCAB);
    assert!(logits.iter().all(|x| x.is_finite()));
    // Ids outside the vocabulary and a full session are errors that leave the session usable.
    let e = m.forward_logits(&mut s, &[VOCAB as u32]).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
    let e = m.forward_logits(&mut s, &[1; 6]).unwrap_err();
    assert!(e.to_string().contains("room for 5"), "{e}");
    assert_eq!(s.position(), 3);
    m.forward_logits(&mut s, &[4]).unwrap();

    let (_d, f) = open(&model_file(7, Some("blk.1.ffn_up.weight"), None));
    let e = load(&f, &Device::Cpu).unwrap_err().to_string();
    assert!(
        e.contains("tiny.gguf") && e.contains("blk.1.ffn_up.weight"),
        "{e}"
    );
    let (_d, f) = open(&model_file(7, None, Some("blk.0.attn_k.weight")));
    let e = load(&f, &Device::Cpu).unwrap_err().to_string();
    assert!(
        e.contains("blk.0.attn_k.weight") && e.contains("the config needs [128, 256]"),
        "{e}"
    );
}

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_quantized_gguf_model_matches_the_cpu() {
    let compute = ComputeDevice::open("cuda").unwrap();
    let cuda = compute.device().clone();
    for seed in [11, 12, 13] {
        let (_d, f) = open(&model_file(seed, None, None));
        let cpu = load(&f, &Device::Cpu).unwrap();
        let gpu = load(&f, &cuda).unwrap();
        let dense = Model::from_gguf(
            &f,
            &cuda,
            LoadOptions {
                dequantize: true,
                ..Default::default()
            },
            &mut |_, _| {},
        )
        .unwrap();
        // Quantized weights stay in their blocks on the device: far fewer bytes than bf16.
        assert!(
            gpu.weight_bytes() * 2 < dense.weight_bytes(),
            "{} bytes quantized vs {} dequantized",
            gpu.weight_bytes(),
            dense.weight_bytes()
        );
        let mut sessions: Vec<_> = [&cpu, &gpu, &dense]
            .iter()
            .map(|m| m.session(40).unwrap())
            .collect();
        let prompt: Vec<u32> = (0..17)
            .map(|i| (i * 37 + seed as u32) % VOCAB as u32)
            .collect();
        let mut input = prompt.clone();
        let (mut worst_dense, mut worst_cpu) = (0f32, 0f32);
        let mut compared = 0;
        for step in 0..16 {
            let [c, g, d] = [&cpu, &gpu, &dense];
            let [sc, sg, sd] = &mut sessions[..] else {
                unreachable!()
            };
            let a = c.forward_logits(sc, &input).unwrap();
            let b = g.forward_logits(sg, &input).unwrap();
            let r = d.forward_logits(sd, &input).unwrap();
            let scale = r.iter().fold(1f32, |m, x| m.max(x.abs()));
            let diff = |x: &[f32], y: &[f32]| {
                x.iter()
                    .zip(y)
                    .map(|(p, q)| (p - q).abs())
                    .fold(0f32, f32::max)
            };
            let (e_dense, e_cpu) = (diff(&b, &r), diff(&b, &a));
            worst_dense = worst_dense.max(e_dense / scale);
            worst_cpu = worst_cpu.max(e_cpu / scale);
            assert!(
                e_dense <= 0.03 * scale,
                "seed {seed} step {step}: quantized vs dequantized error {e_dense} of {scale}"
            );
            assert!(
                e_cpu <= 0.06 * scale,
                "seed {seed} step {step}: CUDA vs CPU error {e_cpu} of {scale}"
            );
            let mut sorted = r.clone();
            sorted.sort_by(|x, y| y.total_cmp(x));
            let want = argmax(&r);
            if sorted[0] - sorted[1] > 2.0 * e_dense {
                assert_eq!(argmax(&b), want, "seed {seed} step {step}");
                compared += 1;
            }
            input = vec![want];
        }
        println!(
            "[gpu] quantized GGUF (Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K) seed {seed}: vs dequantized bf16 \
             max error {:.2}%, vs CPU f32 {:.2}% of the largest logit; greedy tokens equal at \
             {compared}/16 steps with a margin over twice the error; {} bytes on the device \
             ({} dequantized)",
            worst_dense * 100.0,
            worst_cpu * 100.0,
            gpu.weight_bytes(),
            dense.weight_bytes()
        );
    }
}
