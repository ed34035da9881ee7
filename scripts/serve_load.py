#!/usr/bin/env python3
"""A load run of `wginfer serve` with the official `openai` package's async client.

Starts the server (loopback, a free port), warms it up with one request, then CLIENTS
concurrent clients each stream greedy chat completions of their own short prompts (closed
loop: a client sends its next request when its last one ended) until REQUESTS have been sent
or TIME_LIMIT seconds have passed. Prints requests/s, tokens/s, and P50/P99 of the time to
first token and of the inter-token latency (gaps between content chunks as the client sees
them), as JSON.

Usage (the venv of scripts/openai-venv.sh has the package):
    target/openai-venv/bin/python scripts/serve_load.py --wginfer target/release/wginfer \\
        --model assets/models/SmolLM2-135M-Instruct.Q4_1.gguf [--clients 64] [--requests 256] \\
        [--max-tokens 8] [--time-limit 300] [-- EXTRA SERVE ARGS]
"""

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import openai


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100 * len(v)))] if v else float("nan")


def start_server(args):
    cmd = [args.wginfer, "serve", "--model", args.model, "--port", "0", "--kv", "paged",
           "--parallel", str(args.clients), "--context", str(args.context), "--log-format", "json",
           *args.serve_args]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    url = first.split(" on ")[1].strip()
    # Per-request log lines are read and dropped, so the pipe never fills.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    deadline = time.time() + 300
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health") as r:
                if r.status == 200:
                    return proc, url, cmd
        except OSError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            sys.exit(f"the server never became healthy: {' '.join(cmd)}")
        time.sleep(0.1)


async def one(client, model, prompt, max_tokens):
    """A streamed request: its TTFT (s), gaps between its content chunks (s), tokens."""
    t0 = time.perf_counter()
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
        stream=True, stream_options={"include_usage": True})
    times, tokens = [], 0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    return times[0] - t0, [b - a for a, b in zip(times, times[1:])], tokens


async def run(args, url):
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600)
    model = (await client.models.list()).data[0].id
    await one(client, model, "Hello", args.max_tokens)
    sent, ttft, itl, tokens = 0, [], [], 0
    t0 = time.perf_counter()

    async def worker(c):
        nonlocal sent, tokens
        while sent < args.requests and time.perf_counter() - t0 < args.time_limit:
            i = sent
            sent += 1
            first, gaps, n = await one(client, model, f"Client {c}, question {i}: name a colour.", args.max_tokens)
            ttft.append(first)
            itl.extend(gaps)
            tokens += n

    await asyncio.gather(*(worker(c) for c in range(args.clients)))
    wall = time.perf_counter() - t0
    ms = lambda v, p: round(1e3 * percentile(v, p), 1)  # noqa: E731
    return {"requests": len(ttft), "seconds": round(wall, 2), "requests_per_s": round(len(ttft) / wall, 2),
            "tokens_per_s": round(tokens / wall, 1), "ttft_ms_p50": ms(ttft, 50), "ttft_ms_p99": ms(ttft, 99),
            "itl_ms_p50": ms(itl, 50), "itl_ms_p99": ms(itl, 99)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wginfer", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--time-limit", type=float, default=300)
    p.add_argument("serve_args", nargs="*", help="more `wginfer serve` options (after --)")
    args = p.parse_args()
    proc, url, cmd = start_server(args)
    try:
        result = asyncio.run(run(args, url))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    result.update(clients=args.clients, max_tokens=args.max_tokens, server=" ".join(cmd))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
