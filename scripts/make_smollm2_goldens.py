#!/usr/bin/env python3
"""Golden outputs of the default model, SmolLM2-135M-Instruct Q4_1 (GGUF).

Needs assets/models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch_default_model.sh)
and `pip install transformers torch tokenizers gguf accelerate` (transformers
refuses to load a GGUF without accelerate).

transformers loads the file through its GGUF path: every tensor is
dequantized with gguf-py's `dequantize` to float32, attn_q / attn_k rows are
un-permuted back to the Hugging Face layout (see check_qk_unpermute) and the
model then runs in float32 with eager attention. So these goldens are "float32
math on the dequantized weights", which is what the engine should reproduce.

Writes tests/fixtures/smollm2/golden.json:

  {"model": {"file", "sha256", "size"},
   "metadata": {...},          summary of the GGUF header (see gguf_metadata)
   "chat": [{"messages", "text" (chat template, add_generation_prompt=True),
             "prompt_ids", "greedy_ids" (16, no EOS stop), "greedy_text",
             "step_margins" (top1-top2 logit gap at each of the 16 steps),
             "min_margin", "top_logits" ([id, logit] x 10 at the last prompt
             position)}],
   "encode": [{"text", "ids", "tokens", ["transformers_ids"]}]}

"encode" ids are without added special tokens, with special tokens in the
text parsed (llama.cpp's parse_special=true). They come from the tokenizer
llama.cpp builds for tokenizer.ggml.pre = "smollm": split every \\p{N}
character off first, then the GPT-2 regex, then byte-level BPE (this is also
SmolLM2's own tokenizer.json pipeline: Digits(individual) + ByteLevel).
transformers' GGUF tokenizer does not know "smollm" and uses the GPT-2 regex
alone; where the two disagree the entry also has "transformers_ids" (the
script prints those cases).

Usage:  python3 scripts/make_smollm2_goldens.py
"""

import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF loader's progress bar

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from gguf import GGUFReader, GGUFValueType, dequantize  # noqa: E402
from tokenizers import Regex, Tokenizer, pre_tokenizers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MODEL_DIR = REPO / "assets" / "models"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = REPO / "tests" / "fixtures" / "smollm2" / "golden.json"

NEW_TOKENS = 16
TOP_K = 10

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Write a haiku about the sea."},
    ],
]

ENCODE_STRINGS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " one leading space",
    "   three leading spaces and trailing ",
    "你好，世界！今天天气很好。",
    "机器学习 and 深度学习 mixed with English",
    "def add(a, b):\n    return a + b  # sum\n\tif x != y and z >= 3: print(f\"{x!r}\")\n",
    "fn main() { let v: Vec<u8> = vec![0x1f, 255]; println!(\"{:?}\", v); }",
    "emoji 🦀🎉 and 👍🏽 and ❤️",
    "12345",
    "Pi is 3.14159, 1,000,000 and 2024-01-31.",
    "x =  42 (two spaces before digits)",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "café naïve résumé",
    "line1\nline2\r\n\n  indented\n\n\n",
    "",
]

# llama.cpp's split for tokenizer.ggml.pre = "smollm": "\p{N}" first, then the
# GPT-2 regex (which tokenizers' ByteLevel(use_regex=True) applies).
SMOLLM_DIGIT_SPLIT = r"\p{N}"


# ---------------------------------------------------------------- GGUF header


def field_value(field):
    """Python value of a scalar or string field; arrays -> list."""
    types = field.types
    if types[0] == GGUFValueType.ARRAY:
        if types[1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if types[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    v = field.parts[field.data[0]].tolist()[0]
    if types[0] == GGUFValueType.BOOL:
        return bool(v)
    if types[0] in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return float(v)
    return int(v)


def type_name(field):
    t = field.types
    if t[0] == GGUFValueType.ARRAY:
        return f"ARRAY[{t[1].name}]"
    return t[0].name


def tensor_entry(t):
    ne = [int(x) for x in t.shape]  # ggml order: ne[0] = row length (columns)
    return {
        "name": t.name,
        "type": t.tensor_type.name,
        "ne": ne,
        "shape": ne[::-1],  # row-major [rows, cols], as torch / HF see it
        "n_bytes": int(t.n_bytes),
        "offset": int(t.data_offset),  # absolute file offset of the data
    }


def gguf_metadata(reader):
    """Summary: every key outside tokenizer.ggml.* with type and value (long
    arrays shortened), every tokenizer.ggml.* key with type and value for
    scalars (length + first entries for arrays), the chat template, the
    tensor type counts and the tensors of layer 0 plus token_embd / output."""
    general, tokenizer = {}, {}
    chat_template = None
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value = field_value(field)
        entry = {"type": type_name(field)}
        if isinstance(value, list):
            entry["len"] = len(value)
            entry["first"] = value[:20]
        else:
            entry["value"] = value
        if name == "tokenizer.chat_template":
            chat_template = value
        elif name.startswith("tokenizer."):
            tokenizer[name] = entry
        else:
            general[name] = entry
    counts = Counter(t.tensor_type.name for t in reader.tensors)
    names = {t.name for t in reader.tensors}
    selected = [tensor_entry(t) for t in reader.tensors
                if t.name.startswith("blk.0.") or not t.name.startswith("blk.")]
    return {
        "gguf_version": field_value(reader.fields["GGUF.version"]),
        "architecture": field_value(reader.fields["general.architecture"]),
        "alignment": int(reader.alignment),
        "keys": general,
        "tokenizer_keys": tokenizer,
        "chat_template": chat_template,
        "tensor_count": len(reader.tensors),
        "tensor_type_counts": dict(sorted(counts.items())),
        "output_weight_present": "output.weight" in names,  # absent: tied to token_embd
        "tensors": selected,
    }


# ---------------------------------------------------------------- checks


def llama_permute(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf.py LlamaModel.permute (HF rows -> GGUF rows)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama_unpermute(w, n_head):
    """Inverse of llama_permute (GGUF rows -> HF rows)."""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


@torch.no_grad()
def check_qk_unpermute(reader, model, chat_ids):
    """transformers' GGUF loader (modeling_gguf_pytorch_utils.py,
    LlamaTensorProcessor._reverse_permute_weights) un-permutes attn_q with
    n_head and attn_k with n_head_kv, i.e. reshape(n, head_dim/2, 2, cols)
    .swapaxes(1, 2): GGUF row h*D + 2i + a  ->  HF row h*D + a*D/2 + i.
    Check that on the loaded weights, and show that skipping it breaks the
    model (argmax at the last prompt position changes)."""
    cfg = model.config
    tensors = {t.name: t for t in reader.tensors}
    results = {}
    for gname, hf, n in (("blk.0.attn_q.weight", "q_proj", cfg.num_attention_heads),
                         ("blk.0.attn_k.weight", "k_proj", cfg.num_key_value_heads)):
        t = tensors[gname]
        raw = dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
        hf_w = getattr(model.model.layers[0].self_attn, hf).weight.numpy()
        unperm = llama_unpermute(raw, n)
        assert np.array_equal(unperm, hf_w), f"{gname}: HF weight is not the un-permuted GGUF one"
        assert np.array_equal(llama_permute(hf_w, cfg.num_attention_heads, n if hf == "k_proj" else None), raw)
        assert not np.array_equal(raw, hf_w)
        results[hf] = "un-permuted"
    # Put the GGUF row order back into every layer and see what breaks.
    layers = model.model.layers
    saved = [(l.self_attn.q_proj.weight.clone(), l.self_attn.k_proj.weight.clone()) for l in layers]
    inp = torch.tensor([chat_ids])
    good = model(input_ids=inp).logits[0, -1]
    for layer in layers:
        a = layer.self_attn
        a.q_proj.weight.copy_(torch.from_numpy(llama_permute(a.q_proj.weight.numpy(), cfg.num_attention_heads)))
        a.k_proj.weight.copy_(torch.from_numpy(
            llama_permute(a.k_proj.weight.numpy(), cfg.num_attention_heads, cfg.num_key_value_heads)))
    bad = model(input_ids=inp).logits[0, -1]
    for layer, (q, k) in zip(layers, saved):
        layer.self_attn.q_proj.weight.copy_(q)
        layer.self_attn.k_proj.weight.copy_(k)
    assert torch.equal(model(input_ids=inp).logits[0, -1], good)
    results["argmax_with_unpermute"] = int(good.argmax())
    results["argmax_without_unpermute"] = int(bad.argmax())
    results["max_abs_logit_change_without_unpermute"] = float((good - bad).abs().max())
    return results


# ---------------------------------------------------------------- goldens


@torch.no_grad()
def greedy(model, ids, pad_id):
    """16 greedy steps through generate() with the KV cache, EOS ignored."""
    model.generation_config = GenerationConfig(
        do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
        eos_token_id=None, pad_token_id=pad_id,
    )
    inp = torch.tensor([ids])
    out = model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), use_cache=True,
                         output_logits=True, return_dict_in_generate=True)
    gen = out.sequences[0, len(ids):].tolist()
    assert len(gen) == NEW_TOKENS == len(out.logits), len(gen)
    margins = []
    for step, logits in enumerate(out.logits):
        logits = logits[0]
        assert int(logits.argmax()) == gen[step]
        top2 = torch.topk(logits, 2).values
        margins.append(float(top2[0] - top2[1]))
    first = out.logits[0][0]
    # Cross-check against one uncached forward over prompt + generated.
    full = model(input_ids=torch.tensor([ids + gen[:-1]]), use_cache=False).logits[0]
    assert full[len(ids) - 1:].argmax(-1).tolist() == gen, "cached and uncached greedy differ"
    assert float((full[len(ids) - 1] - first).abs().max()) < 1e-3
    top = torch.topk(first, TOP_K)
    top_logits = [[int(i), round6(float(v))] for v, i in zip(top.values, top.indices)]
    return gen, margins, top_logits


def round6(x):
    return float(f"{x:.6g}")


def smollm_reference_tokenizer(hf_tok):
    """The tokenizer llama.cpp builds for pre="smollm": same vocab, merges and
    special tokens as transformers', pre-tokenizer \\p{N} split + GPT-2 regex."""
    ref = Tokenizer.from_str(hf_tok.backend_tokenizer.to_str())
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SMOLLM_DIGIT_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return ref


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    path = MODEL_DIR / MODEL_FILE
    if not path.exists():
        sys.exit(f"{path} is missing: run scripts/fetch_default_model.sh first")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()

    reader = GGUFReader(path)
    meta = gguf_metadata(reader)
    print(f"architecture {meta['architecture']}, {meta['tensor_count']} tensors")
    print("tensor types:", ", ".join(f"{k} x{v}" for k, v in meta["tensor_type_counts"].items()))
    for t in meta["tensors"]:
        if not t["name"].startswith("blk."):
            print(f"  {t['name']}: {t['type']} ne={t['ne']}")
    print("output.weight present:", meta["output_weight_present"])
    for k, v in meta["tokenizer_keys"].items():
        shown = v["value"] if "value" in v else f"array of {v['len']}"
        print(f"  {k} ({v['type']}): {shown}")

    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        MODEL_DIR, gguf_file=MODEL_FILE, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0

    chats = []
    for messages in CHATS:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok(text)["input_ids"] == ids, "tokenizer adds special tokens by default"
        gen, margins, top_logits = greedy(model, ids, pad_id)
        gen_text = tok.decode(gen)
        chats.append({
            "messages": messages, "text": text, "prompt_ids": ids, "greedy_ids": gen,
            "greedy_text": gen_text, "step_margins": [round6(m) for m in margins],
            "min_margin": round6(min(margins)), "top_logits": top_logits,
        })
        print(f"chat {len(chats)}: {len(ids)} prompt ids -> {gen_text!r}")
        print(f"  min margin {min(margins):.4f}; step margins "
              + " ".join(f"{m:.3f}" for m in margins))

    unpermute = check_qk_unpermute(reader, model, chats[0]["prompt_ids"])
    print("Q/K un-permute:", unpermute)

    ref = smollm_reference_tokenizer(tok)
    encode, differ = [], 0
    for s in ENCODE_STRINGS:
        ids = ref.encode(s, add_special_tokens=False).ids
        hf_ids = tok(s, add_special_tokens=False)["input_ids"]
        entry = {"text": s, "ids": ids, "tokens": ref.encode(s, add_special_tokens=False).tokens}
        assert tok.decode(ids) == s, (s, tok.decode(ids))
        if hf_ids != ids:
            differ += 1
            entry["transformers_ids"] = hf_ids
            print(f"  encode differs for {s!r}: smollm {ids} vs transformers {hf_ids}")
        encode.append(entry)
    for c in chats:
        assert ref.encode(c["text"], add_special_tokens=False).ids == c["prompt_ids"]
    print(f"encode: {len(encode)} strings, {differ} where transformers' GGUF tokenizer differs")

    golden = {
        "model": {"file": MODEL_FILE, "sha256": sha, "size": path.stat().st_size},
        "generated_by": {"torch": torch.__version__, "transformers": transformers.__version__},
        "metadata": meta,
        "qk_unpermute_check": unpermute,
        "chat": chats,
        "encode": encode,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
