#!/usr/bin/env python3
"""`wginfer serve` driven by the official `openai` package (run by tests/openai_client.rs).

Starts the binary on a free loopback port with an API key and checks, through the client:
greedy chat and completions, whole and streamed, equal to `wginfer generate` on the same
prompt (the oracle: the CLI runs the library alone); stop strings; seed reproducibility;
logprobs in the client's types; a stream closed mid-way frees its KV memory at once (from
/metrics); every bad request answered with its 4xx in OpenAI's error shape; a missing or
wrong key answered 401. SIGTERM then ends the server with status 0.

Usage: tests/openai_client.py WGINFER_BINARY MODEL_DIR
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import urllib.error
import urllib.request

import openai

WGINFER, MODEL_DIR = sys.argv[1], sys.argv[2]
MODEL = os.path.basename(MODEL_DIR.rstrip("/"))
KEY = "test-key"
CONTEXT = 256
BODY_LIMIT = 1 << 16
# The same engine settings for the server and the CLI oracle.
ENGINE_ARGS = ["--model", MODEL_DIR, "--context", str(CONTEXT)]
SYSTEM, USER = "You are terse.", "Hello there, how are you?"


def start_server():
    """The server and its base URL, read from its first line on stderr."""
    args = [WGINFER, "serve", *ENGINE_ARGS, "--port", "0", "--api-key", KEY, "--kv", "paged",
            "--parallel", "4", "--max-body", str(BODY_LIMIT)]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    assert " on http://127.0.0.1:" in first, f"no address in {first!r}"
    url = first.split(" on ")[1].strip()
    # The rest of stderr (one line per request) is passed on, so the pipe never fills.
    threading.Thread(target=lambda: [sys.stderr.write(line) for line in proc.stderr], daemon=True).start()
    deadline = time.time() + 120
    while True:
        try:
            if http(f"{url}/health")[0] == 200:
                return proc, url
        except OSError:
            pass
        assert time.time() < deadline and proc.poll() is None, "the server never became healthy"
        time.sleep(0.05)


def http(url, body=None, headers=None):
    """A plain request (no client): its status and body, also for an error status."""
    req = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def generate(prompt, max_tokens, chat):
    """The CLI's greedy answer for the same prompt (the chat one with the same system message)."""
    args = [WGINFER, "generate", *ENGINE_ARGS, "--prompt", prompt, "--temperature", "0",
            "--max-tokens", str(max_tokens), "--json"]
    if chat:
        args += ["--chat", "--system", SYSTEM]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    v = json.loads(out.strip().splitlines()[-1])
    return v["text"], len(v["prompt_ids"]), len(v["ids"])


def chat_messages(user=USER):
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def streamed(chunks, chat):
    """A stream's text joined, its finish reason, its usage (include_usage), and its chunks."""
    chunks = list(chunks)
    *pieces, last = chunks
    assert last.choices == [] and last.usage is not None, last
    text = "".join((c.choices[0].delta.content if chat else c.choices[0].text) or "" for c in pieces)
    finishes = [c.choices[0].finish_reason for c in pieces]
    assert all(f is None for f in finishes[:-1]), finishes
    return text, finishes[-1], last.usage, pieces


def check_greedy(client):
    max_tokens = 24
    want, prompt_tokens, tokens = generate(USER, max_tokens, chat=True)
    finish = "length" if tokens == max_tokens else "stop"
    common = dict(model=MODEL, messages=chat_messages(), max_tokens=max_tokens, temperature=0)
    r = client.chat.completions.create(**common)
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant", r
    assert r.choices[0].message.content == want, (r.choices[0].message.content, want)
    assert r.choices[0].finish_reason == finish, r
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (prompt_tokens, tokens), r.usage
    s = client.chat.completions.create(**common, stream=True, stream_options={"include_usage": True})
    text, s_finish, usage, chunks = streamed(s, chat=True)
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    assert (text, s_finish, usage) == (want, finish, r.usage), (text, s_finish, usage)
    print(f"greedy chat, whole and streamed ({len(chunks)} chunks): {want!r}")

    prompt = "Hello world"
    want, prompt_tokens, tokens = generate(prompt, 16, chat=False)
    finish = "length" if tokens == 16 else "stop"
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=0)
    assert (r.choices[0].text, r.choices[0].finish_reason) == (want, finish), r
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (prompt_tokens, tokens), r.usage
    s = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=0, stream=True,
                                  stream_options={"include_usage": True})
    text, s_finish, usage, _ = streamed(s, chat=False)
    assert (text, s_finish, usage) == (want, finish, r.usage), (text, s_finish, usage)
    print(f"greedy completion, whole and streamed: {want!r}")
    return want


def check_stop(client, full):
    """A stop string from the middle of the greedy text: the answer ends right before it."""
    mid = len(full) // 2
    stop = full[mid:mid + 3]
    want = full[:full.find(stop)]
    common = dict(model=MODEL, prompt="Hello world", max_tokens=16, temperature=0, stop=["never here", stop])
    r = client.completions.create(**common)
    assert (r.choices[0].text, r.choices[0].finish_reason) == (want, "stop"), (r, stop)
    text, finish, _, _ = streamed(client.completions.create(**common, stream=True,
                                                            stream_options={"include_usage": True}), chat=False)
    assert (text, finish) == (want, "stop"), (text, finish, stop)
    print(f"stop {stop!r}: {want!r}")


def check_seed(client):
    def run(seed, stream=False):
        common = dict(model=MODEL, messages=chat_messages(), max_tokens=16, temperature=1.0, seed=seed)
        if stream:
            s = client.chat.completions.create(**common, stream=True, stream_options={"include_usage": True})
            return streamed(s, chat=True)[0]
        return client.chat.completions.create(**common).choices[0].message.content

    a = run(7)
    assert run(7) == a and run(7, stream=True) == a, "the same seed gave another text"
    assert run(8) != a, "seeds 7 and 8 gave the same text"
    print(f"seed 7 twice and streamed: {a!r}")


def check_logprobs(client):
    """The client parses the logprobs (its own types); their values are checked in tests/serve.rs."""
    r = client.chat.completions.create(model=MODEL, messages=chat_messages(), max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens, content
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token, t
    s = client.chat.completions.create(model=MODEL, messages=chat_messages(), max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=3, stream=True,
                                       stream_options={"include_usage": True})
    got = [t for c in streamed(s, chat=True)[3] if c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert got == content, (got, content)
    print(f"logprobs of {len(content)} tokens, whole and streamed")


def metric(url, name):
    for line in http(f"{url}/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} in /metrics")


def check_cancel(client, url):
    """A stream closed after its first token: its KV memory is free right after."""
    stopped = 'wginfer_requests_finished_total{finish="stopped"}'
    before = metric(url, stopped)
    s = client.completions.create(model=MODEL, prompt="Hello world", max_tokens=200, temperature=0, stream=True)
    next(iter(s))
    assert metric(url, "wginfer_kv_blocks_used") > 0, "no KV memory held while streaming"
    s.close()
    t = time.time()
    while metric(url, "wginfer_kv_blocks_used") > 0:
        assert time.time() - t < 5, "KV memory still held after the stream was closed"
        time.sleep(0.01)
    assert metric(url, stopped) == before + 1, "the closed stream was not cancelled"
    print(f"closed stream: KV memory free after {1e3 * (time.time() - t):.0f} ms")


def check_error(call, status, param=None, code=None):
    """`call` raises the client's error for `status`, with OpenAI's error body."""
    try:
        call()
    except openai.APIStatusError as e:
        assert e.status_code == status, (e.status_code, status, e.response.text)
        err = e.response.json()["error"]
        assert isinstance(err["message"], str) and err["message"] and isinstance(err["type"], str), err
        assert "param" in err and "code" in err, err
        assert param is None or err["param"] == param, (err, param)
        assert code is None or err["code"] == code, (err, code)
        return err
    raise AssertionError(f"no error (expected {status})")


def check_bad_requests(client, url):
    chat = client.chat.completions.create
    msgs = chat_messages()
    status, body = http(f"{url}/v1/chat/completions", b'{"model": ', {
        "authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert status == 400 and "not valid JSON" in json.loads(body)["error"]["message"], body
    for call, param in [
        (lambda: chat(model=MODEL, messages=msgs, temperature="hot"), "temperature"),
        (lambda: chat(model=MODEL, messages=[]), "messages"),
        (lambda: chat(model=MODEL, messages=msgs, n=2), "n"),
        (lambda: chat(model=MODEL, messages=msgs, top_logprobs=21, logprobs=True), "top_logprobs"),
        (lambda: chat(model=MODEL, messages=msgs, max_tokens=CONTEXT), "max_tokens"),
        (lambda: client.completions.create(model=MODEL, prompt="hi", logprobs=2), "logprobs"),
    ]:
        check_error(call, 400, param)
    check_error(lambda: chat(model="gpt-9", messages=msgs), 404, "model", "model_not_found")
    long = "word " * CONTEXT
    err = check_error(lambda: client.completions.create(model=MODEL, prompt=long), 400, "prompt")
    assert str(CONTEXT) in err["message"], err
    check_error(lambda: client.completions.create(model=MODEL, prompt="x" * 2 * BODY_LIMIT), 413,
                code="request_too_large")
    print("bad requests: 400 / 404 / 413 in OpenAI's shape")

    wrong = openai.OpenAI(base_url=f"{url}/v1", api_key="wrong-key", max_retries=0)
    try:
        wrong.models.list()
        raise AssertionError("a wrong key was let in")
    except openai.AuthenticationError as e:
        assert e.status_code == 401 and e.response.json()["error"]["code"] == "invalid_api_key", e
    check_error(lambda: wrong.chat.completions.create(model=MODEL, messages=msgs), 401, code="invalid_api_key")
    status, body = http(f"{url}/v1/chat/completions", json.dumps({"model": MODEL, "messages": msgs}).encode(),
                        {"content-type": "application/json"})
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key", body
    print("missing and wrong key: 401")


def main():
    proc, url = start_server()
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)
        assert [m.id for m in client.models.list()] == [MODEL]
        full = check_greedy(client)
        check_stop(client, full)
        check_seed(client)
        check_logprobs(client)
        check_cancel(client, url)
        check_bad_requests(client, url)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, f"the server exited with {code} after SIGTERM"
    print("SIGTERM: exit 0")


if __name__ == "__main__":
    main()
