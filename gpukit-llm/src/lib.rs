//! # gpukit-llm
//!
//! Large language models on gpukit (layer 6, above `gpukit-ops`; beside `gpukit-audio`).
//!
//! What it will own (not written yet): loaders for safetensors (mmap, sharded) and GGUF (quantized
//! tensors kept quantized on the device), tokenizers and chat templates, `ModelSpec` for GPT-2,
//! Llama, Mistral, Qwen2 and Qwen3, a preallocated KV cache, and an engine that runs prefill and a
//! decode step captured as one CUDA graph, sampling on the device.
