#!/usr/bin/env python3
"""Greedy ids with a repetition penalty, from transformers' `generate`, for the engine's CPU
sampling path (tests/promises.rs).

transformers' RepetitionPenaltyLogitsProcessor divides the logit of every id that occurs in
the prompt or the output so far by the penalty (multiplies it when negative), once per
distinct id however often it occurs. For each fixture model a random prompt is drawn (seeds
tried in order) until, over 16 greedy steps: the penalty changes the ids within the first 8
steps, applying it once per occurrence instead of once per id changes them too (so the test
sees that difference), and every step's top-1 lead over top-2 after the penalty is at least
0.05 (far above the engine's logit error).

Output: tests/fixtures/penalty.json, {"penalty", "new_tokens", "cases": [{"fixture",
"prompt_ids", "ids", "plain_greedy_ids", "per_occurrence_ids", "min_margin", "seed"}]}.
Needs the fixture folders (scripts/make_fixtures.py). A few seconds on CPU.

Usage:  python3 scripts/make_penalty_goldens.py
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, GenerationConfig, LogitsProcessor, LogitsProcessorList  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests/fixtures"
OUT = FIXTURES / "penalty.json"
MODELS = ["llama-f32", "qwen2-f32"]
PENALTY = 1.3
NEW_TOKENS = 16
PROMPT_LEN = 24
VOCAB = 384
MIN_MARGIN = 0.05
MAX_SEEDS = 100


class PenaltyPerOccurrence(LogitsProcessor):
    """The penalty applied once per occurrence of an id (a common mistake): the contrast case."""

    def __call__(self, input_ids, scores):
        for i in input_ids[0].tolist():
            s = scores[0, i]
            scores[0, i] = s * PENALTY if s < 0 else s / PENALTY
        return scores


@torch.no_grad()
def generate(model, ids, penalty, processors=None):
    """16 greedy ids (no EOS stopping) and the smallest top1-top2 gap of the processed scores."""
    model.generation_config = GenerationConfig(
        do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0,
        repetition_penalty=penalty,
    )
    inp = torch.tensor([ids])
    out = model.generate(
        input_ids=inp, attention_mask=torch.ones_like(inp), logits_processor=processors,
        output_scores=True, return_dict_in_generate=True,
    )
    generated = out.sequences[0, len(ids):].tolist()
    assert len(generated) == NEW_TOKENS
    margin = min(float(torch.topk(s[0], 2).values.diff().abs()) for s in out.scores)
    return generated, margin


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))


def prompt(seed):
    # Ids from a tenth of the vocabulary, so the prompt repeats many of them.
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB // 10, (PROMPT_LEN,), generator=gen).tolist()


def make_case(name):
    model = AutoModelForCausalLM.from_pretrained(FIXTURES / name, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    for seed in range(MAX_SEEDS):
        ids = prompt(seed)
        penalized, margin = generate(model, ids, PENALTY)
        plain, _ = generate(model, ids, 1.0)
        per_occurrence, _ = generate(model, ids, 1.0, LogitsProcessorList([PenaltyPerOccurrence()]))
        if margin >= MIN_MARGIN and first_difference(penalized, plain) < NEW_TOKENS // 2 and penalized != per_occurrence:
            print(f"{name}: seed {seed}, margin {margin:.4f}")
            return {"fixture": name, "seed": seed, "prompt_ids": ids, "ids": penalized, "plain_greedy_ids": plain,
                    "per_occurrence_ids": per_occurrence, "min_margin": round(margin, 6)}
    sys.exit(f"{name}: no prompt in {MAX_SEEDS} seeds meets the conditions")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    cases = [make_case(name) for name in MODELS]
    golden = {"penalty": PENALTY, "new_tokens": NEW_TOKENS, "cases": cases,
              "generated_by": {"torch": torch.__version__, "transformers": transformers.__version__}}
    OUT.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
