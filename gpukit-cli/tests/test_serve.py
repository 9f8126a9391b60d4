"""`gpukit serve` from the outside: the real binary on a free loopback port, driven by the
`openai` client and raw HTTP.

Checked: the endpoints and their formats (chat and text completions, streaming or not, usage,
logprobs, models, health, metrics); the default model's answer equals `gpukit generate`'s;
16 concurrent streaming clients with different sampling parameters each get exactly what the
same request gets alone (batch invariance: tokens and log-probabilities bit for bit); under a
KV-cache budget too small for all of them, requests are preempted and still match; malformed,
mistyped, unknown and oversized requests get OpenAI-style errors (fuzzed too) and the server
stays up; a client that disconnects mid-stream frees its sequence; two models served at once
as tenants (a guaranteed one with a latency objective, a best-effort one paced to keep it) each
answer as the model does alone.

The binary comes from GPUKIT_BIN (set by `cargo xtask test` and the GPU bundle). The model is
the default one, or GPUKIT_TEST_MODEL where it is set (the GPU machine cannot fetch). Each test
runs on the CPU and, where a GPU is present, on CUDA.
"""

import concurrent.futures
import json
import os
import random
import re
import signal
import subprocess
import time
import types
import urllib.error
import urllib.request

import openai
import pytest

import gpukit

BIN = os.environ.get("GPUKIT_BIN")
MODEL = os.environ.get("GPUKIT_TEST_MODEL")

pytestmark = pytest.mark.skipif(not BIN, reason="GPUKIT_BIN (the gpukit binary) is not set")

DEVICES = ["cpu"] + (["cuda"] if gpukit.cuda_available() else [])


class Server:
    """A `gpukit serve` process and its base URL."""

    def __init__(self, device, *extra, model=True):
        cmd = [BIN, "serve", "--port", "0", "--device", device, *extra]
        if MODEL and model:
            cmd += ["--model", MODEL]
        self.device = device
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.log = []
        deadline = time.time() + 900  # the first run may fetch the default model
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("gpukit serve exited:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("gpukit serve did not start:\n" + "".join(self.log))
        self.model = json.loads(self.get("/v1/models"))["data"][0]["id"]
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0)

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.read().decode()

    def post(self, path, body, raw=False):
        """(status, parsed JSON body) of a POST; `body` is bytes when `raw`."""
        data = body if raw else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metric(self, name, model=None):
        """The value of series `name` of `model` (the first served model by default)."""
        series = f'{name}{{model="{model or self.model}"}} '
        for line in self.get("/metrics").splitlines():
            if line.startswith(series):
                return float(line.split()[-1])
        raise KeyError(series)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module", params=DEVICES)
def server(request):
    s = Server(request.param, "--max-batch", "16", "--max-seq-len", "512", "--kv-memory", "96MiB",
               "--max-step-tokens", "128")
    yield s
    s.stop()


QUESTION = "What is the capital of France?"


def chat(server, content, **kw):
    return server.client.chat.completions.create(
        model=server.model, messages=[{"role": "user", "content": content}], **kw)


def test_models_health_and_metrics(server):
    assert json.loads(server.get("/health")) == {"status": "ok"}
    models = server.client.models.list().data
    assert [m.id for m in models] == [server.model]
    text = server.get("/metrics")
    for name in ["gpukit_requests_total", "gpukit_requests_waiting", "gpukit_kv_blocks_total",
                 "gpukit_time_to_first_token_seconds_bucket", "gpukit_batch_sequences"]:
        assert name in text, name
    assert server.metric("gpukit_kv_blocks_total") > 0


def test_chat_answer_matches_the_cli(server):
    r = chat(server, QUESTION, max_tokens=24, temperature=0)
    answer = r.choices[0].message.content
    cmd = [BIN, "generate", "--chat", "--max-tokens", "24", "--device", server.device, QUESTION]
    if MODEL:
        cmd[2:2] = ["--model", MODEL]
    cli = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    assert answer.strip() == cli.strip()
    assert r.usage.completion_tokens >= 1
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.choices[0].finish_reason in ("stop", "length")
    if not MODEL:
        assert "Paris" in answer


def test_streaming_equals_the_whole_response(server):
    whole = chat(server, "Tell me about the sea.", max_tokens=20, temperature=0)
    stream = chat(server, "Tell me about the sea.", max_tokens=20, temperature=0, stream=True,
                  stream_options={"include_usage": True})
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            finish = c.finish_reason or finish
    assert "".join(pieces) == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens
    # Text completions, streamed and not.
    c = server.client.completions.create(model=server.model, prompt="Once upon a time",
                                         max_tokens=12, temperature=0)
    s = server.client.completions.create(model=server.model, prompt="Once upon a time",
                                         max_tokens=12, temperature=0, stream=True)
    assert "".join(ch.choices[0].text for ch in s) == c.choices[0].text
    assert c.usage.completion_tokens <= 12


def test_logprobs_of_the_chosen_tokens(server):
    r = chat(server, QUESTION, max_tokens=8, temperature=0, logprobs=True)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert all(t.logprob <= 0.0 for t in content)
    assert "".join(t.token for t in content).strip() == r.choices[0].message.content.strip()
    c = server.client.completions.create(model=server.model, prompt="One, two,", max_tokens=5,
                                         temperature=0, logprobs=0)
    assert len(c.choices[0].logprobs.token_logprobs) == c.usage.completion_tokens
    # ignore_eos: exactly max_tokens, whatever the model says.
    c = server.client.completions.create(model=server.model, prompt="The end.", max_tokens=30,
                                         temperature=0, extra_body={"ignore_eos": True})
    assert c.usage.completion_tokens == 30 and c.choices[0].finish_reason == "length"


def sampling(i):
    """Request i of the concurrency tests: its own sampling parameters and length."""
    kinds = [dict(temperature=0), dict(temperature=0.8, seed=i), dict(temperature=1.0, top_p=0.9,
             seed=100 + i), dict(temperature=0.7, seed=7, extra_body={"top_k": 20})]
    return dict(max_tokens=8 + 3 * (i % 5), logprobs=True, **kinds[i % len(kinds)])


PROMPTS = ["Hi!", "Write a haiku about snow.", "List three colors.", QUESTION,
           "Explain gravity to a child.", "What is 2 + 2?", "Name a famous painter.",
           "Say something kind."]


def run_one(server, i, max_tokens=None):
    """Streams request i (with its own length, or `max_tokens`); returns its text and its
    tokens' log-probabilities."""
    kw = sampling(i)
    if max_tokens:
        kw["max_tokens"] = max_tokens
    stream = chat(server, PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)), stream=True,
                  **kw)
    text, logprobs = [], []
    for chunk in stream:
        for c in chunk.choices:
            text.append(c.delta.content or "")
            if c.logprobs and c.logprobs.content:
                logprobs += [(t.token, t.logprob) for t in c.logprobs.content]
    return "".join(text), logprobs


def test_concurrent_clients_get_what_they_get_alone(server):
    n = 16
    alone = [run_one(server, i) for i in range(n)]
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        together = list(pool.map(lambda i: run_one(server, i), range(n)))
    for i in range(n):
        assert together[i] == alone[i], f"request {i} differs when batched"
    assert server.metric("gpukit_requests_running") == 0


def test_preempted_requests_match_their_runs_alone(server):
    # 8 blocks of 16 positions: room for one sequence of 128 positions; the test's requests (a
    # chat prompt of ~35 tokens, its first block shared, and 40 new tokens) need 4 blocks of
    # their own each, so five at once must preempt.
    small = Server(server.device, "--max-batch", "8", "--max-seq-len", "128", "--block-size",
                   "16", "--kv-blocks", "8", "--max-step-tokens", "64")
    try:
        n = 5
        alone = [run_one(small, i, max_tokens=40) for i in range(n)]
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            together = list(pool.map(lambda i: run_one(small, i, max_tokens=40), range(n)))
        assert together == alone
        assert small.metric("gpukit_preemptions_total") > 0
    finally:
        small.stop()


def test_bad_requests_get_clear_errors_and_the_server_stays_up(server):
    msgs = [{"role": "user", "content": "hi"}]
    cases = [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "JSON object"),
        ({"messages": msgs, "max_tokens": "ten"}, 400, "max_tokens"),
        ({"messages": msgs, "temperature": [1]}, 400, "invalid"),
        ({"messages": msgs, "frobnicate": True}, 400, "frobnicate"),
        ({"messages": msgs, "max_tokens": 10**9}, 400, "context"),
        ({"messages": msgs, "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": []}, 400, "empty"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "role"),
        ({"messages": msgs, "n": 3}, 400, "n must be 1"),
        ({"messages": msgs, "top_p": 1.5}, 400, "top_p"),
        ({"messages": msgs, "model": "no-such-model"}, 404, "does not exist"),
        ({"messages": [{"role": "user", "content": "x" * 4000}]}, 400, "context"),
    ]
    for body, status, needle in cases:
        raw = isinstance(body, bytes)
        got, reply = server.post("/v1/chat/completions", body, raw=raw)
        assert got == status, (body, reply)
        err = reply["error"]
        assert needle.lower() in err["message"].lower(), (needle, err)
        assert err["type"]
    got, reply = server.post("/v1/completions", {"prompt": "a", "echo": True})
    assert got == 400
    with pytest.raises(openai.NotFoundError):
        server.client.chat.completions.create(model="nope", messages=msgs)
    assert json.loads(server.get("/health")) == {"status": "ok"}
    assert chat(server, "hi", max_tokens=3, temperature=0).usage.completion_tokens >= 1


def test_a_full_queue_answers_503_with_a_retry_hint(server):
    busy = Server(server.device, "--max-batch", "1", "--max-waiting", "1", "--max-step-tokens",
                  "64")
    try:
        body = json.dumps({"prompt": "Count to fifty:", "max_tokens": 12, "temperature": 0,
                           "ignore_eos": True}).encode()

        def send(_):
            req = urllib.request.Request(busy.url + "/v1/completions", data=body, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=300) as r:
                    return r.status, None, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("Retry-After"), json.loads(e.read())

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(send, range(6)))
        refused = [r for r in replies if r[0] == 503]
        assert refused, [r[0] for r in replies]
        assert all(r[1] == "1" and r[2]["error"]["code"] == "overloaded" for r in refused)
        assert any(r[0] == 200 for r in replies)
        assert json.loads(busy.get("/health")) == {"status": "ok"}
    finally:
        busy.stop()


def test_fuzzed_bodies_never_break_the_server(server):
    rng = random.Random(1234)
    values = [None, True, -1, 0, 3, 2**70, 1.5, float("-inf"), "", "x", "\u0000\ud7ff", [], {},
              [1, "a"], {"role": "user"}, [{"role": "user", "content": 5}],
              [{"role": "user", "content": [{"type": "image_url"}]}]]
    fields = ["model", "messages", "prompt", "max_tokens", "temperature", "top_p", "top_k",
              "seed", "stop", "stream", "logprobs", "n", "stream_options", "min_p",
              "repetition_penalty", "max_completion_tokens", "zzz"]
    for k in range(150):
        body = {f: rng.choice(values) for f in rng.sample(fields, rng.randint(0, 6))}
        if rng.random() < 0.5:
            body["messages"] = [{"role": "user", "content": "hi"}]
            body["max_tokens"] = rng.choice([1, 2, body.get("max_tokens", 1)])
        path = rng.choice(["/v1/chat/completions", "/v1/completions"])
        data = json.dumps(body, allow_nan=True).encode()
        if rng.random() < 0.1:
            data = data[: rng.randint(0, len(data))]
        req = urllib.request.Request(server.url + path, data=data, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
        assert status in (200, 400, 404), (k, body, status, text)
        if status != 200:
            assert "error" in json.loads(text), (k, body, text)
    assert json.loads(server.get("/health")) == {"status": "ok"}
    assert server.metric("gpukit_requests_running") == 0


def test_a_client_that_disconnects_frees_its_sequence(server):
    finished = server.metric("gpukit_requests_finished_total")
    body = json.dumps({"messages": [{"role": "user", "content": "Write a long story."}],
                       "max_tokens": 400, "temperature": 0.8, "seed": 1, "stream": True,
                       "model": server.model}).encode()
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=body, method="POST")
    r = urllib.request.urlopen(req, timeout=60)
    assert r.readline().startswith(b"data: ")
    r.close()  # the client goes away mid-stream
    deadline = time.time() + 30
    while time.time() < deadline:
        if (server.metric("gpukit_requests_running") == 0
                and server.metric("gpukit_requests_finished_total") > finished):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the disconnected request still runs")
    generated = server.metric("gpukit_generation_tokens_total")
    time.sleep(0.5)
    assert server.metric("gpukit_generation_tokens_total") == generated


def test_two_models_share_the_device_as_tenants(server):
    # The same model twice: "fast" guaranteed, with a time-per-token objective no step can
    # meet (so the pacer holds "bulk" back whenever "fast" decodes), and "bulk" best-effort.
    root = json.loads(server.get("/v1/models"))["data"][0]["root"]
    fast = ["--model", root, "--served-model-name", "fast", "--qos", "guaranteed",
            "--tpot-slo", "0.001", "--kv-memory", "48MiB"]
    if server.device == "cuda":
        fast += ["--sm", "0.5", "--memory", "4GiB"]
    bulk = ["--model", root, "--served-model-name", "bulk", "--qos", "best-effort",
            "--kv-memory", "48MiB"]
    two = Server(server.device, "--max-batch", "8", "--max-seq-len", "512", "--max-step-tokens",
                 "128", *fast, *bulk, model=False)
    try:
        listed = {m["id"]: m for m in json.loads(two.get("/v1/models"))["data"]}
        assert list(listed) == ["fast", "bulk"]
        assert listed["fast"]["qos"] == "guaranteed"
        assert listed["bulk"]["qos"] == "best-effort"
        if "SM partitions" in "".join(two.log):
            assert listed["fast"]["partition_sms"] > 0
        n = 6
        alone = [run_one(server, i) for i in range(n)]
        on = {name: types.SimpleNamespace(client=two.client, model=name) for name in listed}
        with concurrent.futures.ThreadPoolExecutor(2 * n) as pool:
            runs = {name: [pool.submit(run_one, on[name], i) for i in range(n)] for name in on}
            for name, futures in runs.items():
                assert [f.result() for f in futures] == alone, f"{name} differs"
        assert two.metric("gpukit_requests_total", "fast") == n
        assert two.metric("gpukit_requests_total", "bulk") == n

        # "fast" decodes a long answer while "bulk" decodes a shorter one: every step of
        # "fast" misses its objective, so "bulk" soon gets one step per 100 ms slice and waits
        # (on CUDA; a step of the CPU's debug build outlasts the slice, so it is never held).
        def complete(name, tokens):
            return two.client.completions.create(
                model=name, prompt="Once upon a time", max_tokens=tokens, temperature=0,
                extra_body={"ignore_eos": True}).usage.completion_tokens
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            g, b = pool.submit(complete, "fast", 96), pool.submit(complete, "bulk", 48)
            assert (g.result(), b.result()) == (96, 48)
        held = two.metric("gpukit_engine_paced_total", "bulk")
        assert held > 0 if server.device == "cuda" else held >= 0
        assert two.metric("gpukit_engine_paced_total", "fast") == 0
        status, body = two.post("/v1/chat/completions", {
            "model": "other", "messages": [{"role": "user", "content": "Hi"}]})
        assert status == 404
        assert "`fast`, `bulk`" in body["error"]["message"]
    finally:
        two.stop()
