#!/usr/bin/env python3
"""Log-probabilities of greedy chat tokens, from transformers, for `wginfer serve`'s
`logprobs` / `top_logprobs` (tests/serve.rs).

The prompt is the qwen2-f32 fixture's chat golden (golden.json "chat": transformers' template
and tokenizer ids). For each of NEW_TOKENS greedy steps (no EOS stopping, as the fixture's
goldens): the chosen id, its log-probability (log_softmax of the float32 logits, the model's
own distribution: no temperature), the TOP most likely ids with theirs, and the step's
smallest lead of one of the TOP + 1 most likely over the next (far above the engine's logit
error, so the engine picks and ranks the same ids).

Output: tests/fixtures/logprobs.json, {"fixture", "prompt_ids", "steps": [{"id", "logprob",
"top_ids", "top_logprobs", "margin"}], "generated_by"}. Needs the fixture folders
(scripts/make_fixtures.py). A second on CPU.

Usage:  python3 scripts/make_logprob_goldens.py
"""

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests/fixtures"
OUT = FIXTURES / "logprobs.json"
FIXTURE = "qwen2-f32"
NEW_TOKENS = 8
TOP = 5


@torch.no_grad()
def main():
    model = AutoModelForCausalLM.from_pretrained(FIXTURES / FIXTURE, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    prompt = json.loads((FIXTURES / FIXTURE / "golden.json").read_text())["chat"]["ids"]
    ids = list(prompt)
    steps = []
    for _ in range(NEW_TOKENS):
        logits = model(torch.tensor([ids])).logits[0, -1].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        # One more than reported: how far the last reported one leads the next.
        top = torch.topk(logprobs, TOP + 1)
        chosen = int(top.indices[0])
        steps.append({
            "id": chosen,
            "logprob": float(logprobs[chosen]),
            "top_ids": [int(i) for i in top.indices[:TOP]],
            "top_logprobs": [float(v) for v in top.values[:TOP]],
            "margin": float(top.values.diff().abs().min()),
        })
        ids.append(chosen)
    out = {"fixture": FIXTURE, "prompt_ids": prompt, "steps": steps,
           "generated_by": {"torch": torch.__version__, "transformers": transformers.__version__}}
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}: min margin {min(s['margin'] for s in steps):.4f}")


if __name__ == "__main__":
    main()
