#!/usr/bin/env python3
"""What transformers' sampling would draw from: the probability of every token after its
logits warpers (temperature, top-k, top-p, in the order `generate` applies them), for a few
logit vectors and settings. The engine's GPU and CPU samplers are tested against these
(tests/kernels/sample.rs, tests/sampling.rs): the allowed set exactly, the frequencies by a
chi-square test.

Output: tests/fixtures/sampling.json, {"logits": {set name: [f32 logits]}, "cases": [{"name",
"logits" (a set name), "temperature", "top_k", "top_p", "probs"}]}. Probabilities keep 7
significant digits (plenty for a frequency test); logits are f32 values, written exactly.

Usage:  python3 scripts/make_sampling_goldens.py
"""

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import GenerationConfig, LogitsProcessorList  # noqa: E402
from transformers.generation.logits_process import (  # noqa: E402
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

OUT = Path(__file__).resolve().parent.parent / "tests/fixtures/sampling.json"

# The example: top_k 3 then top_p 0.7 over the renormalized three keeps tokens 1 and 5.
SMALL = [1.0, 3.0, 2.5, -1.0, 0.5, 2.9, 0.0]


def warpers(temperature, top_k, top_p):
    """The warpers `generate` builds for these settings, in its order."""
    cfg = GenerationConfig(do_sample=True, temperature=temperature, top_k=top_k, top_p=top_p)
    out = LogitsProcessorList()
    if cfg.temperature != 1.0:
        out.append(TemperatureLogitsWarper(cfg.temperature))
    if cfg.top_k not in (None, 0):
        out.append(TopKLogitsWarper(top_k=cfg.top_k, min_tokens_to_keep=1))
    if cfg.top_p is not None and cfg.top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=cfg.top_p, min_tokens_to_keep=1))
    return out


def probs(logits, temperature, top_k, top_p):
    scores = torch.tensor([logits], dtype=torch.float64)
    scores = warpers(temperature, top_k, top_p)(torch.zeros((1, 1), dtype=torch.long), scores)
    return torch.softmax(scores, dim=-1)[0].tolist()


def case(sets, name, logits, temperature, top_k, top_p):
    values = [float(x) for x in sets[logits]]
    p = probs(values, temperature, top_k, top_p)
    kept = [v for v, q in zip(values, p) if q > 0]
    dropped = [v for v, q in zip(values, p) if q == 0]
    # The kept set must be "every logit above a cut-off" (no tie split by the cut), which is
    # what a sampler that cuts by value can reproduce exactly.
    assert not dropped or min(kept) > max(dropped), name
    return {
        "name": name,
        "logits": logits,
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "probs": [float(f"{q:.7g}") for q in p],
    }


def main():
    rng = np.random.default_rng(7)
    sets = {
        "small": np.array(SMALL, dtype=np.float32),
        # transformers keeps every token tied with the k-th largest.
        "ties": np.array([2.0, 1.0, 2.0, 0.5, 2.0, 0.0], dtype=np.float32),
        "large": (rng.standard_normal(3000) * 3.0).astype(np.float32),
    }
    cases = [
        case(sets, "top_k then top_p (the issue's example)", "small", 1.0, 3, 0.7),
        case(sets, "temperature alone", "small", 1.3, 0, 1.0),
        case(sets, "top_p alone", "small", 0.7, 0, 0.6),
        case(sets, "top_k 5 and top_p 0.9 at T 2", "small", 2.0, 5, 0.9),
        case(sets, "top_k 4 and top_p 0.5 at T 1.5", "small", 1.5, 4, 0.5),
        case(sets, "top_k ties", "ties", 1.0, 2, 1.0),
        case(sets, "large vocabulary, top_k 40 and top_p 0.8", "large", 0.8, 40, 0.8),
        case(sets, "large vocabulary, top_p 0.3", "large", 1.0, 0, 0.3),
        # More candidates than the GPU kernel keeps on chip: its full-vocabulary path.
        case(sets, "large vocabulary, top_k 2500 and top_p 0.99 at T 4", "large", 4.0, 2500, 0.99),
    ]
    # Logits as the shortest text that reads back as the same f32.
    logits = "{" + ",".join(f'"{k}":[' + ",".join(str(x) for x in v) + "]" for k, v in sets.items()) + "}"
    body = json.dumps({"cases": cases}, separators=(",", ":"))
    OUT.write_text('{"logits":' + logits + "," + body[1:] + "\n")
    for c in cases:
        kept = sum(q > 0 for q in c["probs"])
        print(f"{c['name']}: {kept} of {len(sets[c['logits']])} tokens kept")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
