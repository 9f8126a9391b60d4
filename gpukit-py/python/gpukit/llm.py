"""Language models: load a GGUF file or an HF directory (or the default model) and generate.

    import gpukit as gk
    m = gk.llm.load()                      # SmolLM2-135M-Instruct, fetched once into the cache
    print(m.chat([{"role": "user", "content": "What is the capital of France?"}]))
    for piece in m.stream("Once upon a time", max_tokens=64):
        print(piece, end="", flush=True)
"""

from ._gpukit import Model, TextStream, Tokenizer, load

__all__ = ["Model", "TextStream", "Tokenizer", "load"]
