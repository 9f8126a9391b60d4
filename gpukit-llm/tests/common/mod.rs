//! A small Qwen2 written as an HF model directory, for the tests: `config.json` (Q/K/V biases,
//! GQA, tied head), `model.safetensors` (random bf16 weights), `tokenizer.json` (a byte-level
//! BPE made with the `tokenizers` crate, ChatML special tokens), `tokenizer_config.json` (chat
//! template, EOS) and `generation_config.json` (a second EOS id).

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::path::Path;

use half::bf16;
use safetensors::{Dtype, tensor::TensorView};
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

pub const HIDDEN: usize = 128;
pub const FFN: usize = 256;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
/// The smallest head size the CUDA attention kernels are built for.
pub const HEAD_DIM: usize = 64;

/// Writes the directory; returns the vocabulary size.
pub fn write_model(dir: &Path) -> usize {
    // Byte-level BPE over the 256 byte symbols, no merges, plus the ChatML specials.
    let mut alphabet: Vec<char> = ByteLevel::alphabet().into_iter().collect();
    alphabet.sort_unstable();
    let vocab: tokenizers::models::bpe::Vocab = alphabet
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c.to_string(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, vec![])
        .build()
        .unwrap();
    let mut tok = Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tok.with_decoder(Some(ByteLevel::default()));
    tok.add_special_tokens(&[
        AddedToken::from("<|im_start|>", true),
        AddedToken::from("<|im_end|>", true),
    ]);
    tok.save(dir.join("tokenizer.json"), false).unwrap();
    let n_vocab = tok.get_vocab_size(true);
    assert_eq!(n_vocab, 258);
    std::fs::write(
        dir.join("tokenizer_config.json"),
        serde_json::json!({
            "eos_token": "<|im_end|>",
            "bos_token": null,
            "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        })
        .to_string(),
    )
    .unwrap();
    let bang = tok.token_to_id("!").unwrap();
    std::fs::write(
        dir.join("generation_config.json"),
        format!(r#"{{"eos_token_id": [257, {bang}]}}"#),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.json"),
        serde_json::json!({
            "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
            "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
            "vocab_size": n_vocab, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "tie_word_embeddings": true, "hidden_act": "silu",
            "eos_token_id": 257
        })
        .to_string(),
    )
    .unwrap();
    // Random bf16 weights.
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, scale: f32, offset: f32| {
        let n: usize = shape.iter().product();
        let bytes = (0..n)
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let u = (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                bf16::from_f32(offset + scale * u).to_le_bytes()
            })
            .collect();
        tensors.push((name, shape, bytes));
    };
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    add(
        "model.embed_tokens.weight".into(),
        vec![n_vocab, HIDDEN],
        0.3,
        0.0,
    );
    add("model.norm.weight".into(), vec![HIDDEN], 0.2, 1.0);
    for i in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        add(p("input_layernorm.weight"), vec![HIDDEN], 0.2, 1.0);
        add(p("post_attention_layernorm.weight"), vec![HIDDEN], 0.2, 1.0);
        for (n, rows) in [("q", q), ("k", kv), ("v", kv)] {
            add(
                p(&format!("self_attn.{n}_proj.weight")),
                vec![rows, HIDDEN],
                0.2,
                0.0,
            );
            add(p(&format!("self_attn.{n}_proj.bias")), vec![rows], 0.1, 0.0);
        }
        add(p("self_attn.o_proj.weight"), vec![HIDDEN, q], 0.2, 0.0);
        add(p("mlp.gate_proj.weight"), vec![FFN, HIDDEN], 0.2, 0.0);
        add(p("mlp.up_proj.weight"), vec![FFN, HIDDEN], 0.2, 0.0);
        add(p("mlp.down_proj.weight"), vec![HIDDEN, FFN], 0.2, 0.0);
    }
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::BF16, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(views, None).unwrap(),
    )
    .unwrap();
    n_vocab
}
