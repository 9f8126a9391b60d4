"""Builds an HF model directory for the Python LLM tests and bench where the default model
cannot be fetched (the GPU machine has no network): a byte-level BPE tokenizer trained with
`tokenizers` on text found on the machine, and a Llama with random weights (transformers, bf16
safetensors) whose vocabulary is exactly the tokenizer's, plus a ChatML chat template.

usage: python3 make_test_model.py OUT_DIR [--shape tiny|1b]

`tiny` (4 layers, hidden 256) is for the tests; `1b` has Llama-3.2-1B's layer shapes (hidden
2048, 16 layers, 32/8 heads, FFN 8192) with the small vocabulary, for decode speed.
"""

import argparse
import glob
import json
import os

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus():
    """Text that is on every machine with Python: the standard library's sources."""
    files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:200]
    for f in files:
        with open(f, encoding="utf-8", errors="ignore") as fh:
            yield fh.read()


def tokenizer(vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer)
    return tok


SHAPES = {
    "tiny": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64),
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, head_dim=64),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = tokenizer(8192)
    vocab = tok.get_vocab_size()
    tok.save(os.path.join(args.out, "tokenizer.json"))
    eos = tok.token_to_id("<|im_end|>")
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>"}, f)
    torch.manual_seed(1234)
    config = transformers.LlamaConfig(
        vocab_size=vocab, max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=True,
        eos_token_id=eos, **SHAPES[args.shape],
    )
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.8, 1.2)
            else:
                p.normal_(0.0, 0.02)
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(sd, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    if int(transformers.__version__.split(".")[0]) >= 5:
        config.dtype = "bfloat16"
    else:
        config.torch_dtype = "bfloat16"
    config.save_pretrained(args.out)
    open(os.path.join(args.out, ".complete"), "w").close()
    print(f"{args.out}: {args.shape}, vocab {vocab}, {sum(v.numel() for v in sd.values()) / 1e6:.1f} M parameters")


if __name__ == "__main__":
    main()
