//! The engine on an HF model directory written here: `config.json` (a small Qwen2 — Q/K/V
//! biases, GQA, tied head), `model.safetensors` (random bf16 weights), `tokenizer.json` (a
//! byte-level BPE made with the `tokenizers` crate, ChatML special tokens),
//! `tokenizer_config.json` (chat template, EOS) and `generation_config.json` (a second EOS id).
//! Checked: loading, the chat template and tokenizer wiring, EOS handling, and that the same
//! seed gives the same text; on CUDA (GPU test) the same again with sampling on the device, and
//! the first greedy token equal to the argmax of the model's own logits.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use gpukit_llm::chat::Message;
use gpukit_llm::decode::{DecodeOptions, Replay};
use gpukit_llm::engine::{ComputeDevice, Engine, GenerateOptions, Prompt, StopReason};
use gpukit_llm::model::{LoadOptions, Model};
use gpukit_ops::Device;
use gpukit_ops::sampling::SamplingParams;
use half::bf16;
use safetensors::{Dtype, tensor::TensorView};
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

const HIDDEN: usize = 128;
const FFN: usize = 256;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
/// The smallest head size the CUDA attention kernels are built for.
const HEAD_DIM: usize = 64;

/// Writes the directory; returns the vocabulary size.
fn write_model(dir: &Path) -> usize {
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

fn sampled(seed: u64) -> GenerateOptions {
    GenerateOptions {
        max_new_tokens: 24,
        sampling: SamplingParams {
            temperature: 0.9,
            top_k: 40,
            top_p: 0.95,
            seed,
            ..Default::default()
        },
        stop: Vec::new(),
        ..Default::default()
    }
}

fn exercise(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path());
    let engine = Engine::load(dir.path(), device, LoadOptions::default(), &mut |_, _| {}).unwrap();
    let spec = engine.model().spec();
    assert!(spec.qkv_bias && spec.tied_embeddings);
    let messages = [Message::new("user", "Hi there")];
    assert_eq!(
        engine.chat_prompt(&messages).unwrap(),
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    );
    // The rendered chat text tokenizes without added specials, one token per byte:
    // <|im_start|> "user\n" "Hi there" <|im_end|> "\n" <|im_start|> "assistant\n".
    let ids = engine
        .tokenizer()
        .encode_rendered(&engine.chat_prompt(&messages).unwrap())
        .unwrap();
    assert_eq!(ids.len(), 27);
    assert_eq!(ids[0], 256, "<|im_start|> is one special token");

    let run = |prompt: Prompt<'_>, opts: &GenerateOptions| {
        let mut text = String::new();
        let stats = engine
            .generate(prompt, opts, &mut |p| text.push_str(p))
            .unwrap();
        (text, stats)
    };
    let (a, sa) = run(Prompt::Chat(&messages), &sampled(5));
    let (b, _) = run(Prompt::Chat(&messages), &sampled(5));
    let (c, _) = run(Prompt::Ids(&ids), &sampled(5));
    assert_eq!(a, b, "same seed, same text");
    assert_eq!(a, c, "a chat prompt is its rendered ids");
    assert_eq!(sa.prompt_tokens, 27);
    // Generation ends at max tokens or at one of the EOS ids (257 from the configs, "!" from
    // generation_config.json), never printing it.
    match sa.stop {
        StopReason::MaxTokens => assert_eq!(sa.new_tokens, 24),
        StopReason::Eos => assert!(sa.new_tokens < 24),
        StopReason::StopString => panic!("no stop strings were given"),
        StopReason::Cancelled => panic!("nothing cancelled the generation"),
    }
    assert!(!a.contains('!') && !a.contains("<|im_end|>"), "{a:?}");
    // Greedy: the first token is the argmax of the prompt's logits.
    let greedy = GenerateOptions {
        max_new_tokens: 1,
        ..Default::default()
    };
    let mut s = engine.model().session(64).unwrap();
    let logits = engine.model().forward_logits(&mut s, &ids).unwrap();
    let best = (0..logits.len()).fold(0, |b, i| if logits[i] > logits[b] { i } else { b });
    let (first, st) = run(Prompt::Ids(&ids), &greedy);
    if st.stop == StopReason::MaxTokens {
        assert_eq!(
            first,
            engine.tokenizer().decode(&[best as u32]).unwrap(),
            "greedy token"
        );
    } else {
        assert!(best == 257 || engine.tokenizer().decode(&[best as u32]).unwrap() == "!");
    }
    decode_step_checks(engine.model(), &ids, device);
    println!(
        "[{}] hf dir engine on {}: sampled {:?} ({} tokens, {:?})",
        if matches!(device, Device::Cpu) {
            "cpu"
        } else {
            "gpu"
        },
        device.describe(),
        a,
        sa.new_tokens,
        sa.stop
    );
}

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
}

/// The decode step (what the engine runs after the prompt) against the general forward pass
/// fed the same tokens, and on CUDA its graph replays against its eager runs, bit for bit.
/// Greedy draws from Philox step 1, no penalty.
fn greedy_opts(greedy: &SamplingParams, replay: Replay) -> DecodeOptions<'_> {
    DecodeOptions {
        sampling: greedy,
        recent: &[],
        first_step: 1,
        replay,
    }
}

fn decode_step_checks(model: &Model, prompt: &[u32], device: &Device) {
    const STEPS: usize = 12;
    let greedy = SamplingParams::default();
    let run = |replay: Replay| {
        let mut s = model.session(prompt.len() + STEPS + 1).unwrap();
        let first = argmax(&model.forward_logits(&mut s, prompt).unwrap());
        let mut d = model
            .decode_step(&mut s, first, greedy_opts(&greedy, replay))
            .unwrap();
        let (mut tokens, mut logits) = (vec![first], Vec::new());
        for _ in 0..STEPS {
            let next = d.run().unwrap();
            let l = d.logits().to_vec_f32().unwrap();
            assert_eq!(
                next,
                argmax(&l),
                "the greedy draw is the argmax of the step's logits"
            );
            tokens.push(next);
            logits.push(l);
        }
        let captured = d.is_captured();
        drop(d);
        assert_eq!(s.position(), prompt.len() + STEPS);
        (tokens, logits, captured)
    };
    let (tokens, logits, captured) = run(Replay::Graph);
    assert_eq!(captured, !matches!(device, Device::Cpu));
    // The general forward pass, token by token: the same logits within the dtype's rounding
    // (the decode attention splits the keys by the capacity, the forward pass by the length).
    let mut s = model.session(prompt.len() + STEPS + 1).unwrap();
    model.forward_logits(&mut s, prompt).unwrap();
    let tol = if matches!(device, Device::Cpu) {
        1e-4
    } else {
        3e-2
    };
    for (i, want) in logits.iter().enumerate() {
        let got = model.forward_logits(&mut s, &[tokens[i]]).unwrap();
        let scale = want.iter().fold(1f32, |m, x| m.max(x.abs()));
        let err = got
            .iter()
            .zip(want)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            err <= tol * scale,
            "step {i}: max |Δlogit| {err} (scale {scale})"
        );
    }
    if !matches!(device, Device::Cpu) {
        let (e_tokens, e_logits, e_captured) = run(Replay::Eager);
        assert!(!e_captured);
        assert_eq!(e_tokens, tokens, "graph and eager draw the same tokens");
        for (g, e) in logits.iter().zip(&e_logits) {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(g),
                bits(e),
                "graph replay bitwise equal to the eager step"
            );
        }
    }
}

#[test]
fn hf_directory_engine_on_the_cpu() {
    exercise(&Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_hf_directory_engine_on_cuda() {
    let dev = ComputeDevice::open("cuda").unwrap();
    exercise(dev.device());
}
