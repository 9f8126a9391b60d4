#!/usr/bin/env python3
"""`gpukit serve` under load, beside HF transformers' batched `generate` in the same run.

The models are the decode bench's random-weight bf16 models (bench/decode_models.py, in
$GPUKIT_DECODE_MODELS): Llama-3.2-1B and Llama-3.1-8B, each with the word-level tokenizer over
its whole vocabulary (so any id decodes) that decode_models.py writes beside its weights.

Workload (seeded, the same every run): prompts of random token ids whose lengths are drawn from
a log-normal distribution (median 200, sigma 0.6) clipped to [64, 1024] (mean about 250);
outputs likewise clipped to [64, 512] (mean about 250), generated to their full length
(`ignore_eos`), greedy. Each concurrency level C keeps C requests in flight (a new one starts
when one ends) over max(C, 8) requests (4 at C = 1); the fixed-rate runs send Poisson arrivals.
Measured per request from the server-sent events: time to first token (TTFT) and time per
output token after the first (TPOT); per level: output tokens/s over the level's wall time, the
KV-cache blocks in use (polled from /metrics) and where the engine's time went (its step phases
from /metrics: scheduling, enqueueing the forward pass, waiting for the device and sampling,
output), as shares of the level's wall time, and the device time of every 8th step by kind of
work (linear, attention, sampling, other: the server's --profile-every).

The peer: HF transformers `generate` (greedy, bf16, sdpa attention) on batches of C prompts of
250 tokens producing 250 tokens each, output tokens/s. And the single stream: `gpukit generate`'s
decode speed on the same model, beside the server's at C = 1.

Prints the table; writes bench-serve.json and bench-serve.png (matplotlib, where installed) to
RESULTS_DIR.

usage: python3 bench/serve.py RESULTS_DIR GPUKIT_CLI [--models llama3.2-1b,llama3.1-8b]
       [--concurrency 1,8,32,128,256] [--rates 4,16] [--server-args "--max-step-tokens 512"]
"""
import argparse
import http.client
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

MODELS_DIR = os.environ.get("GPUKIT_DECODE_MODELS", "/tmp/gpukit-decode-models")
PARTS = ("linear", "attention", "sampling", "other")
PROFILE_EVERY = 8


def split(r):
    """The level's device time by part (shares of the profiled steps' device time) and the
    engine's host share of the wall time (scheduling and output; the forward pass's enqueueing
    overlaps the device on CUDA)."""
    dev = r["profiled_device_s"]
    total = sum(dev.values()) or 1.0
    host = (r["phases_s"]["schedule"] + r["phases_s"]["output"]) / r["wall_s"]
    return {p: dev[p] / total for p in PARTS}, host


def lengths(rng, n, lo, hi, median=200.0, sigma=0.6):
    return [int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma)))) for _ in range(n)]


def workload(n, vocab, seed):
    rng = random.Random(seed)
    p = lengths(rng, n, 64, 1024)
    o = lengths(rng, n, 64, 512)
    return [([rng.randrange(100, vocab - 100) for _ in range(a)], b) for a, b in zip(p, o)]


class Server:
    def __init__(self, cli, model_dir, extra):
        cmd = [cli, "serve", "--model", model_dir, "--port", "0", *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.log = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("gpukit serve exited:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://([\d.]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.host}:{self.port}/metrics") as r:
            out = {}
            for line in r.read().decode().splitlines():
                if not line.startswith("#") and " " in line:
                    k, v = line.rsplit(" ", 1)
                    # Every series carries the served model's label; one model is served here.
                    k = re.sub(r'model="(?:[^"\\]|\\.)*",?', "", k).replace("{}", "")
                    out[k] = out.get(k, 0.0) + float(v)
            return out

    def request(self, prompt, max_tokens):
        """Streams one completion; returns (ttft, tpot, output tokens)."""
        body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                           "ignore_eos": True, "stream": True,
                           "stream_options": {"include_usage": True}})
        conn = http.client.HTTPConnection(self.host, self.port, timeout=3600)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]}")
        first = last = None
        tokens = 0
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            now = time.perf_counter()
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif chunk["choices"] and chunk["choices"][0].get("text"):
                first = first or now
                last = now
        conn.close()
        ttft = (first or last or t0) - t0
        tpot = (last - first) / (tokens - 1) if first and tokens > 1 else 0.0
        return ttft, tpot, tokens

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] if v else float("nan")


def run_level(server, reqs, concurrency=None, rate=None, seed=0):
    """Runs the requests with `concurrency` in flight, or arriving at `rate` per second."""
    results, lock = [], threading.Lock()
    kv = []
    done = threading.Event()

    def poll():
        while not done.is_set():
            m = server.metrics()
            kv.append(m["gpukit_kv_blocks_in_use"] / max(1, m["gpukit_kv_blocks_total"]))
            time.sleep(0.5)

    def one(prompt, n):
        r = server.request(prompt, n)
        with lock:
            results.append(r)

    poller = threading.Thread(target=poll, daemon=True)
    before = server.metrics()
    poller.start()
    t0 = time.perf_counter()
    if concurrency:
        queue = list(reqs)
        qlock = threading.Lock()

        def worker():
            while True:
                with qlock:
                    if not queue:
                        return
                    p, n = queue.pop(0)
                one(p, n)

        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    else:
        rng = random.Random(seed)
        threads, at = [], 0.0
        for p, n in reqs:
            at += rng.expovariate(rate)
            threads.append(threading.Timer(at, one, (p, n)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done.set()
    poller.join()
    after = server.metrics()
    phases = {}
    for phase in ("schedule", "forward", "sample", "output"):
        key = f'gpukit_engine_step_seconds_total{{phase="{phase}"}}'
        phases[phase] = after.get(key, 0.0) - before.get(key, 0.0)
    device = {}
    for part in PARTS:
        key = f'gpukit_engine_profiled_device_seconds_total{{part="{part}"}}'
        device[part] = after.get(key, 0.0) - before.get(key, 0.0)
    ttft = [r[0] for r in results]
    tpot = [r[1] for r in results if r[1] > 0]
    out = sum(r[2] for r in results)
    return {
        "requests": len(results), "output_tokens": out, "wall_s": wall,
        "tokens_per_s": out / wall, "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99),
        "tpot_p50": pct(tpot, 50), "tpot_p99": pct(tpot, 99),
        "kv_mean": statistics.fmean(kv) if kv else 0.0, "kv_max": max(kv) if kv else 0.0,
        "phases_s": phases, "profiled_device_s": device,
    }


def hf_peer(model_dir, batches, prompt_len=250, new=250):
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16, attn_implementation="sdpa").cuda().eval()
    vocab = model.config.vocab_size
    out = {}
    for c in batches:
        g = torch.Generator().manual_seed(c)
        ids = torch.randint(100, vocab - 100, (c, prompt_len), generator=g).cuda()
        try:
            with torch.no_grad():
                model.generate(ids[:, :16], max_new_tokens=4, min_new_tokens=4, do_sample=False)
                torch.cuda.synchronize()
                t = time.perf_counter()
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                               min_new_tokens=new, do_sample=False)
                torch.cuda.synchronize()
            out[c] = c * new / (time.perf_counter() - t)
        except torch.cuda.OutOfMemoryError:
            out[c] = None
            torch.cuda.empty_cache()
    del model
    torch.cuda.empty_cache()
    return out


def cli_decode(cli, model_dir):
    """`gpukit generate`'s decode tokens/s (256 greedy tokens)."""
    r = subprocess.run([cli, "generate", "--model", model_dir, "--max-tokens", "256", "--stats",
                        "<1> <2> <3> <4> <5> <6> <7> <8>"], capture_output=True, text=True)
    m = re.search(r"([\d.]+) tokens/s", r.stderr)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("cli")
    ap.add_argument("--models", default="llama3.2-1b,llama3.1-8b")
    ap.add_argument("--concurrency", default="1,8,32,128,256")
    ap.add_argument("--rates", default="4,16")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--server-args", default="",
                    help="more arguments for `gpukit serve`, e.g. \"--max-step-tokens 512\"")
    ap.add_argument("--peer-concurrency", default=None,
                    help="batch sizes of the HF peer (default: the concurrency levels)")
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    rates = [float(r) for r in args.rates.split(",") if r]
    report = {"models": {}}
    for name in args.models.split(","):
        d = os.path.join(MODELS_DIR, name)
        if not os.path.exists(os.path.join(d, "tokenizer.json")):
            sys.exit(f"{d} has no tokenizer.json: python3 bench/decode_models.py {MODELS_DIR} "
                     f"--models {name}")
        vocab = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
        cli_tps = cli_decode(args.cli, d)
        print(f"{name}: gpukit generate decodes at {cli_tps} tok/s", flush=True)
        server = Server(args.cli, d, ["--max-batch", str(max(levels)), "--max-seq-len", "1600",
                                      "--profile-every", str(PROFILE_EVERY),
                                      *args.server_args.split()])
        print("".join(server.log).strip(), flush=True)
        rows = []
        try:
            server.request([1, 2, 3, 4], 4)  # warm-up: kernels loaded, plans made
            for c in levels:
                n = 4 if c == 1 else max(c, 8)
                r = run_level(server, workload(n, vocab, seed=c), concurrency=c)
                r["load"] = f"C={c}"
                rows.append(r)
                print(f"{name} C={c}: {r['tokens_per_s']:.0f} tok/s, TTFT p50 "
                      f"{r['ttft_p50'] * 1e3:.0f} ms, TPOT p50 / p99 {r['tpot_p50'] * 1e3:.1f} / "
                      f"{r['tpot_p99'] * 1e3:.1f} ms, KV max {r['kv_max'] * 100:.0f}%; engine "
                      + ", ".join(f"{k} {v / r['wall_s'] * 100:.0f}%"
                                  for k, v in r["phases_s"].items())
                      + "; device " + ", ".join(f"{k} {v * 100:.0f}%"
                                                for k, v in split(r)[0].items()), flush=True)
            for rate in rates:
                r = run_level(server, workload(int(rate * 8), vocab, seed=1000 + int(rate)),
                              rate=rate)
                r["load"] = f"{rate:g} req/s"
                rows.append(r)
        finally:
            server.stop()
        peer_levels = [int(c) for c in (args.peer_concurrency or args.concurrency).split(",")]
        peer = {} if args.no_peer else hf_peer(d, peer_levels)
        for c, v in peer.items():
            print(f"{name} HF generate batch {c}: "
                  + (f"{v:.0f} tok/s" if v else "out of memory"), flush=True)
        report["models"][name] = {"rows": rows, "peer_tokens_per_s": peer,
                                  "cli_decode_tokens_per_s": cli_tps}
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench-serve.json"), "w") as f:
            json.dump(report, f, indent=1)
    print()
    print("| model | load | requests | output tok/s | HF generate tok/s | TTFT p50 / p99 (ms) | "
          "TPOT p50 / p99 (ms) | KV used mean / max | device: linear / attention / sampling / "
          "other | host |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, m in report["models"].items():
        for r in m["rows"]:
            c = int(r["load"][2:]) if r["load"].startswith("C=") else None
            peer = m["peer_tokens_per_s"].get(c) if c else None
            ps = f"{peer:.0f}" if peer else "—"
            print(f"| {name} | {r['load']} | {r['requests']} | {r['tokens_per_s']:.0f} | {ps} | "
                  f"{r['ttft_p50'] * 1e3:.0f} / {r['ttft_p99'] * 1e3:.0f} | "
                  f"{r['tpot_p50'] * 1e3:.1f} / {r['tpot_p99'] * 1e3:.1f} | "
                  f"{r['kv_mean'] * 100:.0f}% / {r['kv_max'] * 100:.0f}% | "
                  + " / ".join(f"{v * 100:.0f}%" for v in split(r)[0].values())
                  + f" | {split(r)[1] * 100:.0f}% |")
        c1 = next((r for r in m["rows"] if r["load"] == "C=1"), None)
        if c1 and c1["tpot_p50"] > 0 and m["cli_decode_tokens_per_s"]:
            srv = 1 / c1["tpot_p50"]
            print(f"\n{name}: single stream through the server {srv:.0f} tok/s, `gpukit "
                  f"generate` {m['cli_decode_tokens_per_s']:.0f} tok/s "
                  f"({srv / m['cli_decode_tokens_per_s']:.2f}×)")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench-serve.json"), "w") as f:
        json.dump(report, f, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for name, m in report["models"].items():
            rows = [r for r in m["rows"] if r["load"].startswith("C=")]
            cs = [int(r["load"][2:]) for r in rows]
            axes[0].plot(cs, [r["tokens_per_s"] for r in rows], "o-", label=f"gpukit {name}")
            peer = [(c, v) for c, v in m["peer_tokens_per_s"].items() if v]
            if peer:
                axes[0].plot(*zip(*peer), "s--", label=f"HF generate {name}")
            axes[1].plot(cs, [r["tpot_p99"] * 1e3 for r in rows], "o-", label=name)
        axes[0].set(xscale="log", yscale="log", xlabel="concurrency",
                    ylabel="output tokens/s", title="throughput")
        axes[1].set(xscale="log", xlabel="concurrency", ylabel="ms", title="TPOT p99")
        for a in axes:
            a.legend()
            a.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "bench-serve.png"), dpi=120)
    except ImportError:
        print("(matplotlib not installed: no plot)", file=sys.stderr)


if __name__ == "__main__":
    main()
