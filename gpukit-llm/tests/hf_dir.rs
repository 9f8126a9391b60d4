//! The engine on an HF model directory written here: `config.json` (a small Qwen2 — Q/K/V
//! biases, GQA, tied head), `model.safetensors` (random bf16 weights), `tokenizer.json` (a
//! byte-level BPE made with the `tokenizers` crate, ChatML special tokens),
//! `tokenizer_config.json` (chat template, EOS) and `generation_config.json` (a second EOS id).
//! Checked: loading, the chat template and tokenizer wiring, EOS handling, and that the same
//! seed gives the same text; on CUDA (GPU test) the same again with sampling on the device, and
//! the first greedy token equal to the argmax of the model's own logits.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpukit_llm::chat::Message;
use gpukit_llm::decode::{DecodeOptions, Replay};
use gpukit_llm::engine::{ComputeDevice, Engine, GenerateOptions, Prompt, StopReason};
use gpukit_llm::model::{LoadOptions, Model};
use gpukit_ops::Device;
use gpukit_ops::sampling::SamplingParams;

mod common;
use common::write_model;

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
