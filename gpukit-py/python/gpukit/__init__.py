"""gpukit: a GPU runtime written in Rust — tensors, ops, NVRTC kernels, CUDA streams and graphs,
a caching memory pool, an LLM engine, audio signal processing and text to speech.

    import gpukit as gk
    x = gk.arange(6, dtype=gk.float32).reshape(2, 3)
    y = gk.softmax(x.to("cuda") * 2.0)            # ops run where their inputs are
    print(y.numpy())

Everything runs on the CPU too (`device="cpu"`, the default for new tensors). GPU tensors cross
to torch and cupy without a copy (`torch.from_dlpack(t)`, `gk.from_dlpack(torch_tensor)`).
Errors are Python exceptions: `ValueError` for shapes, dtypes and arguments, `MemoryError` for
memory, `RuntimeError` for the driver and NVRTC.
"""

from . import audio, llm, tts
from ._gpukit import (
    Device,
    Event,
    Evictable,
    Graph,
    Kernel,
    PanicException,
    Scheduler,
    Stream,
    Tensor,
    __version__,
    abs,
    add,
    arange,
    argmax,
    asarray,
    bfloat16,
    clamp,
    concat,
    copy_,
    cos,
    cuda_available,
    dequantize,
    device,
    devices,
    div,
    dtype,
    embedding,
    empty,
    evictable,
    exp,
    float16,
    float32,
    from_dlpack,
    from_numpy,
    from_blocks,
    full,
    gather,
    gelu,
    index_select,
    int32,
    int64,
    jit,
    layer_norm,
    linear,
    log,
    log_softmax,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    ones,
    pow,
    q4_0,
    q4_1,
    q4_K,
    q5_K,
    q6_K,
    q8_0,
    qgemv,
    quantize,
    rand,
    reciprocal,
    relu,
    rms_norm,
    rope,
    rope_frequencies,
    rsqrt,
    sample,
    sdpa,
    sigmoid,
    silu,
    sin,
    softmax,
    sqrt,
    square,
    sub,
    sum,
    tanh,
    uint8,
    zeros,
)
from ._gpukit import where as where  # noqa: PLC0414 (a keyword-like name, re-exported as is)

cat = concat

__all__ = [name for name in dir() if not name.startswith("_")] + ["__version__"]
