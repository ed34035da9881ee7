#!/usr/bin/env python3
"""Goldens of a real Gemma 3 GGUF: gemma-3-270m (the base model) in Q4_K_M, as transformers
5.x loads the file itself (weights dequantized to float32 by gguf-py, eager attention; its GGUF
loader reads Gemma's tokenizer as a byte-fallback BPE with merges rebuilt from the vocabulary,
which transformers 4.x got wrong).

Input:  assets/models/gemma-3-270m-q4_k_m.gguf (scripts/fetch_gemma3_model.sh; never committed)
Output: tests/fixtures/gemma3-270m/golden.json:
    {"file", "sha256", "transformers",
     "cases": [{"text", "prompt_ids" (with the BOS the file asks for), "greedy_ids" (16, no EOS
                stop), "min_margin" (smallest top1-top2 logit gap over the 16 steps, >= 0.05)}],
     "encode": [{"text", "ids"}]}   (ids without special tokens)

Usage:  python3 scripts/make_gemma3_goldens.py   (a minute or two on a CPU)
"""

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import make_fixtures as mf  # noqa: E402  (greedy decoding as every golden does it)

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "assets" / "models" / "gemma-3-270m-q4_k_m.gguf"
OUT = REPO / "tests" / "fixtures" / "gemma3-270m" / "golden.json"

# Candidates in order; the first N_CASES whose greedy margin is at least MIN_MARGIN are kept
# (a smaller gap could flip on adapters whose arithmetic differs, e.g. f16 tensor cores).
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea, there lived",
    "<start_of_turn>user\nWhat is the boiling point of water?<end_of_turn>\n<start_of_turn>model\n",
    "The three primary colors are",
    "import numpy as np\n\n# Compute the mean of an array\n",
    "Water freezes at a temperature of",
    "The first president of the United States was",
]
N_CASES = 3
MIN_MARGIN = 0.05

ENCODE = [
    "Hello world",
    "  two leading spaces,  double  spaces and a trailing one ",
    "digits 0123456789 and 3.14159, 42nd, 1,000,000",
    "café au lait, naïve résumé",
    "emoji party 🎉🙂 done",
    "line one\nline two\ttabbed\r\n",
    "你好，世界",
    "<start_of_turn>user\nhi<end_of_turn>",
    "def f(x):\n    return x  # done\n",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@torch.no_grad()
def main():
    if not MODEL.exists():
        sys.exit(f"{MODEL} is missing: run scripts/fetch_gemma3_model.sh")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    major = int(transformers.__version__.split(".")[0])
    assert major >= 5, f"transformers {transformers.__version__}: 4.x misreads Gemma's GGUF tokenizer"
    tok = AutoTokenizer.from_pretrained(MODEL.parent, gguf_file=MODEL.name)
    model = AutoModelForCausalLM.from_pretrained(MODEL.parent, gguf_file=MODEL.name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    cases = []
    for text in PROMPTS:
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.bos_token_id, ids
        logits, greedy, margin = mf.greedy(model, ids)
        if margin < MIN_MARGIN or len(cases) == N_CASES:
            print(f"skipped (margin {margin:.3f}): {text!r}")
            continue
        cases.append({"text": text, "prompt_ids": ids, "greedy_ids": greedy, "min_margin": mf.round6(margin)})
        print(f"{len(ids)} prompt ids, margin {margin:.3f}: {tok.decode(greedy)!r}")
    assert len(cases) == N_CASES, f"only {len(cases)} prompts with a margin of {MIN_MARGIN}"
    encode = [{"text": s, "ids": tok(s, add_special_tokens=False)["input_ids"]} for s in ENCODE]
    golden = {"file": MODEL.name, "sha256": sha256(MODEL), "transformers": transformers.__version__,
              "cases": cases, "encode": encode}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
