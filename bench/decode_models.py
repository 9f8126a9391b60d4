#!/usr/bin/env python3
"""Builds the decode benchmark's models on the GPU machine (transformers + torch, no network).

Random bf16 weights at the real shapes of Llama-3.2-1B, Qwen2.5-0.5B, Qwen3-0.6B (the configs
of the HF-parity fixtures, gpukit-llm/tests/hf_parity/make_models.py) and Llama-3.1-8B, each
saved as config.json + model.safetensors in OUT_DIR/<name>/ with a `.complete` marker, and a
word-level tokenizer over the vocabulary (ids decode to `<id>` words) for the benches that go
through the serving engine; models already complete are kept. Weights are drawn on the GPU (normal, std 0.02; norm weights near 1),
so even the 8B model takes seconds plus the file write.

usage: python3 bench/decode_models.py OUT_DIR [--models llama3.2-1b,qwen2.5-0.5b,...]
"""
import argparse
import json
import os
import sys
import time

import torch
import transformers
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpukit-llm",
                                "tests", "hf_parity"))
from make_models import MODELS as PARITY, rope  # noqa: E402

MODELS = {
    "llama3.2-1b": PARITY["llama3.2-1b"],
    "qwen2.5-0.5b": PARITY["qwen2.5-0.5b"],
    "qwen3-0.6b": PARITY["qwen3-0.6b"],
    # Llama-3.1-8B: GQA 32/8, llama3 RoPE scaling, untied head.
    "llama3.1-8b": lambda: transformers.LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=128256,
        max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
        **rope(500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
}


@torch.no_grad()
def build(name, out, seed=7):
    config = MODELS[name]()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    g = torch.Generator(device="cuda").manual_seed(seed)
    sd = {}
    for pname, p in model.state_dict().items():
        if config.tie_word_embeddings and pname == "lm_head.weight":
            continue
        t = torch.empty(p.shape, dtype=torch.float32, device="cuda")
        if "norm" in pname:
            t.normal_(1.0, 0.1, generator=g)
        else:
            t.normal_(0.0, 0.02, generator=g)
        sd[pname] = t.to(torch.bfloat16).cpu()
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    config.to_json_file(os.path.join(d, "config.json"))
    open(os.path.join(d, ".complete"), "w").close()
    return sum(v.numel() for v in sd.values())


def write_tokenizer(model_dir):
    """A word-level tokenizer covering the model's vocabulary: ids decode to `<id>` words."""
    path = os.path.join(model_dir, "tokenizer.json")
    if os.path.exists(path):
        return
    vocab = json.load(open(os.path.join(model_dir, "config.json")))["vocab_size"]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {f"<{i}>": i for i in range(vocab)},
                  "unk_token": "<0>"},
    }
    with open(path, "w") as f:
        json.dump(tok, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    for name in args.models.split(","):
        d = os.path.join(args.out, name)
        if os.path.exists(os.path.join(d, ".complete")):
            print(f"{name}: already built")
        else:
            t = time.time()
            n = build(name, args.out)
            print(f"{name}: {n / 1e9:.2f} B parameters, {time.time() - t:.0f} s", flush=True)
            torch.cuda.empty_cache()
        write_tokenizer(d)


if __name__ == "__main__":
    main()
