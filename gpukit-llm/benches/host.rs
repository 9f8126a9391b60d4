//! Parsing a GGUF header the size of a real model's (no GPU): 30 layers of 9 tensors, a
//! 49,152-token vocabulary with its scores, types and merges in the metadata — the default
//! model's shape.
//!
//! ```text
//! cargo bench -p gpukit-llm --bench host
//! ```

use std::hint::black_box;
use std::path::Path;

use criterion::Criterion;
use gpukit_llm::gguf::{GgufHeader, GgufWriter};

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

fn bench(c: &mut Criterion) {
    let bytes = file();
    let path = Path::new("bench.gguf");
    c.bench_function("gguf header: 270 tensors, 49k-token vocabulary", |b| {
        b.iter(|| {
            GgufHeader::parse(black_box(&bytes), path)
                .map(|h| h.tensor("blk.0.attn_q.weight").is_some())
        })
    });
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
