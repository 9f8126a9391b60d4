//! Host-side work of the LLM layer (no GPU):
//! - parsing a GGUF header the size of a real model's: 30 layers of 9 tensors, a 49,152-token
//!   vocabulary with its scores, types and merges in the metadata — the default model's shape;
//! - the tokenizer: encoding and decoding 4 KiB of English-like text with a byte-level BPE of
//!   4,096 tokens (trained here, with the `tokenizers` crate, on a seeded corpus).
//!
//! ```text
//! cargo bench -p gpukit-llm --bench host
//! ```

use std::hint::black_box;
use std::path::Path;

use criterion::Criterion;
use gpukit_llm::gguf::{GgufHeader, GgufWriter};
use gpukit_llm::tokenizer::Tokenizer;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A GGUF file with the default model's metadata and tensor count (each tensor a few bytes:
/// parsing reads the tensor table, not the data).
fn file() -> Vec<u8> {
    let mut w = GgufWriter::default();
    w.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 30)
        .kv_u32("llama.embedding_length", 576)
        .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5);
    let tokens: Vec<String> = (0..49_152).map(|i| format!("tok{i:05}")).collect();
    let merges: Vec<String> = (0..48_900)
        .map(|i| format!("t{} k{}", i % 977, i / 977))
        .collect();
    w.kv_strings("tokenizer.ggml.tokens", &tokens)
        .kv_strings("tokenizer.ggml.merges", &merges);
    let block = [0u8; 16];
    for layer in 0..30 {
        for name in [
            "attn_norm",
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_norm",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ] {
            w.tensor(&format!("blk.{layer}.{name}.weight"), &[4], 0, &block);
        }
    }
    w.bytes()
}

/// Seeded English-like text: `words` words from a small lexicon, with punctuation.
fn text(words: usize, seed: u64) -> String {
    const LEXICON: [&str; 24] = [
        "the", "model", "decodes", "a", "token", "per", "step", "while", "requests", "wait", "in",
        "queue", "and", "batches", "share", "memory", "GPU", "kernels", "read", "weights", "from",
        "cache", "quickly", "again",
    ];
    let mut x = seed | 1;
    let mut out = String::new();
    for i in 0..words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(LEXICON[(x % LEXICON.len() as u64) as usize]);
        out.push_str(if i % 11 == 10 { ". " } else { " " });
    }
    out
}

/// A directory with a byte-level BPE `tokenizer.json` of 4,096 tokens trained on `text`.
fn tokenizer_dir() -> Res<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let mut tok = tokenizers::Tokenizer::new(BPE::default());
    tok.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tok.with_decoder(Some(ByteLevel::default()));
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(4096)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .show_progress(false)
        .build()
        .into();
    let corpus: Vec<String> = (0..200).map(|i| text(200, i + 1)).collect();
    tok.train(&mut trainer, corpus.iter())?;
    tok.save(dir.path().join("tokenizer.json"), false)?;
    Ok(dir)
}

fn bench(c: &mut Criterion) -> Res<()> {
    let bytes = file();
    let path = Path::new("bench.gguf");
    c.bench_function("gguf header: 270 tensors, 49k-token vocabulary", |b| {
        b.iter(|| {
            GgufHeader::parse(black_box(&bytes), path)
                .map(|h| h.tensor("blk.0.attn_q.weight").is_some())
        })
    });
    let dir = tokenizer_dir()?;
    let tok = Tokenizer::from_hf_dir(dir.path())?;
    let prose: String = text(800, 99).chars().take(4096).collect();
    let ids = tok.encode(&prose)?;
    c.bench_function("tokenizer: encode 4 KiB (byte-level BPE, 4k tokens)", |b| {
        b.iter(|| tok.encode(black_box(&prose)).map(|v| v.len()))
    });
    c.bench_function(
        &format!(
            "tokenizer: decode {} ids (byte-level BPE, 4k tokens)",
            ids.len()
        ),
        |b| b.iter(|| tok.decode(black_box(&ids)).map(|s| s.len())),
    );
    Ok(())
}

fn main() -> Res<()> {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c)?;
    c.final_summary();
    Ok(())
}
