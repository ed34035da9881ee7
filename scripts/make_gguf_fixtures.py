#!/usr/bin/env python3
"""Tiny quantized GGUF files made from the tiny HF fixtures, with goldens.

Converts tests/fixtures/llama-f32, qwen2-f32 and qwen3-bf16 (made by
scripts/make_fixtures.py) to GGUF the way llama.cpp's convert_hf_to_gguf.py
would, writing with gguf-py's GGUFWriter and quantizing with
gguf.quants.quantize:

    tests/fixtures/gguf/tiny-llama-q8_0.gguf    every 2-D weight Q8_0, norms F32
    tests/fixtures/gguf/tiny-llama-mixed.gguf   attn_q/k/v/output Q4_0,
                                                ffn_gate/up Q4_1, ffn_down Q5_0,
                                                token_embd Q8_0, output F16,
                                                norms F32
    tests/fixtures/gguf/tiny-qwen2-q8_0.gguf    2-D weights Q8_0, q/k/v biases
                                                and norms F32, no output.weight
                                                (tied to token_embd)
    tests/fixtures/gguf/tiny-llama3-f32.gguf    every tensor F32, with the
                                                llama3 rope scaling as
                                                rope_freqs.weight, and
                                                attention.key_length
    tests/fixtures/gguf/tiny-qwen3-q8_0.gguf    arch qwen3: 2-D weights Q8_0,
                                                norms (q/k norms too) F32,
                                                key_length 32 (not 64 / 4)
    tests/fixtures/gguf/tiny-gemma3-q8_0.gguf   arch gemma3: 2-D weights Q8_0,
                                                norms F32 stored as 1 + w, the
                                                sliding window, linear RoPE
                                                scaling of the global layers
    tests/fixtures/gguf/tiny-llama-mixed-parts.gguf
                                                types differing inside the fused
                                                projections: layer 0 attn_q Q4_0,
                                                attn_k Q5_0, attn_v Q8_0,
                                                ffn_gate Q4_1, ffn_up Q8_0;
                                                layer 1 attn_q/k/v Q8_0,
                                                ffn_gate/up Q4_1; attn_output
                                                Q4_1, ffn_down Q5_1, token_embd
                                                Q8_0, output Q5_1, norms F32

and next to each `<stem>.golden.json`.

Conversion, as llama.cpp does it:
  * tensor names token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v,
    attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm, output;
    weights keep the HF [out_features, in_features] layout (GGUF ne = [in, out]).
  * llama only: attn_q / attn_k rows permuted with LlamaModel.permute,
    w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2)
    (n_head_kv for attn_k). Within each head of size D this puts HF row
    a*D/2 + i (rotate-half pairs i and i + D/2) at GGUF row 2*i + a, i.e. the
    two halves of each rotary pair become adjacent rows (ggml's "normal"
    rope rotates x[2i], x[2i+1]). qwen2 is not permuted (llama.cpp uses its
    NEOX rope for qwen2, which rotates i and i + D/2 like HF).
  * metadata {arch}.vocab_size, context_length, embedding_length,
    feed_forward_length, block_count, attention.head_count,
    attention.head_count_kv, rope.freq_base, attention.layer_norm_rms_epsilon,
    rope.dimension_count; tokenizer.ggml.model = "gpt2", tokenizer.ggml.pre =
    "gpt2" (llama: plain GPT-2 byte-level regex) / "qwen2", tokens (byte-level
    strings as in tokenizer.json), token_type (3 = CONTROL for the three
    special tokens, 1 = NORMAL otherwise), merges ("a b"), bos 0, eos 2,
    padding 0, add_bos_token false, add_eos_token false, chat_template.
  * The llama fixture uses llama3 rope scaling. llama.cpp stores that as a
    rope_freqs.weight tensor (LlamaModel.generate_extra_tensors: F32, one
    divisor per frequency: 1 for high frequencies, the factor for low ones,
    1 / ((1 - smooth) / factor + smooth) between; written before the model's
    tensors), which transformers' GGUF loader ignores. tiny-llama-q8_0,
    tiny-llama-mixed and tiny-llama-mixed-parts leave it out: plain rope (theta 10000), goldens from
    transformers loading them. tiny-llama3-f32 has it, so its goldens come
    from the folder's own model (llama3 scaling) holding the GGUF's weights
    (see below). One difference from llama.cpp: its converter reads
    original_max_position_embeddings from the top level of config.json
    (8192 when absent, the value real Llama 3.x configs also carry inside
    rope_scaling); the fixture has 256, inside rope_scaling only, so this
    script takes it from there, as transformers does.
  * gemma3 (Gemma3Model): no permutation; every norm weight stored as 1 + w
    (Gemma3Model.modify_tensors, norm_shift); the four norms of a block as
    attn_norm (input_layernorm), post_attention_norm, ffn_norm
    (pre_feedforward_layernorm), post_ffw_norm; no output.weight (tied);
    metadata attention.sliding_window, key_length / value_length, rope.freq_base
    of the global layers, rope.scaling.type linear + rope.scaling.factor.
    llama.cpp itself takes the rest (llama-model.cpp, LLM_ARCH_GEMMA3): every
    sixth layer global, local RoPE base 10000, attention scale
    1 / sqrt(key_length) whatever query_pre_attn_scalar said, so the fixture
    (query_pre_attn_scalar 24) has its goldens from the folder's model with
    query_pre_attn_scalar = head_dim holding the dequantized weights
    (transformers' GGUF loader reads neither key_length nor the scaling).
  * qwen3 (Qwen3Model, a Qwen2Model): no permutation, no biases, the q/k
    norms as blk.N.attn_q_norm / attn_k_norm (F32, head_dim), and
    {arch}.attention.key_length / value_length from config.json's head_dim
    (TextModel.set_gguf_parameters writes them whenever head_dim is given).
    transformers' GGUF loader ignores key_length (it takes head_dim =
    hidden / heads and cannot load this file).

Goldens: each file is reloaded with transformers
(AutoModelForCausalLM.from_pretrained(gguf_file=..., dtype=float32), eager
attention; weights dequantized to float32 by gguf-py) or, for the two files
transformers' GGUF loader cannot read faithfully (tiny-llama3-f32,
tiny-qwen3-q8_0), the source folder's transformers model (its own config.json)
with its state dict rebuilt from the GGUF (GGUFReader + gguf.quants.dequantize
+ un-permute); `<stem>.golden.json`
gets, in the golden.json format of make_fixtures.py, cases for prompts of 1,
7, 64 and 300 random non-special tokens: prompt_ids, 16 greedy ids (no EOS
stop), logits at the last prompt position, min top1-top2 margin over the 16
steps (prompt seeds are retried until it is >= 0.05). Plus "quant_error"
(max |logit - float32 reference| at the last prompt position, reference =
the HF fixture's float32 weights unquantized, with plain rope for llama),
"tensors" (name -> ggml type) and chat / encode goldens from the tokenizer
transformers builds out of the GGUF.

Checks: an unquantized F32 conversion (not kept) must reproduce the float32
reference logits (proves names, permutation and metadata), and the GGUF
tokenizer must encode a set of strings like the fixture's tokenizer.json
(differences are printed and recorded under "tokenizer_differences").

Usage:  python3 scripts/make_gguf_fixtures.py [--only STEM ...]   (after make_fixtures.py;
        --only: just those files, the others left as they are)
Needs:  transformers torch tokenizers safetensors gguf accelerate
"""

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF loader's progress bar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFReader, GGUFWriter, LlamaFileType, RopeScalingType, TokenType  # noqa: E402
from gguf.quants import quantize  # noqa: E402
from safetensors.torch import load_file  # noqa: E402  (numpy has no bfloat16)
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import make_fixtures as mf  # noqa: E402  (helpers and conventions of the HF fixtures)

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
OUT = FIXTURES / "gguf"

PROMPT_LENS = [1, 7, 64, 300]
MIN_MARGIN = 0.05
MAX_PROMPT_ATTEMPTS = 100


def q8_0_everywhere(gguf_name):
    return Q.Q8_0


def mixed(gguf_name):
    if gguf_name == "token_embd.weight":
        return Q.Q8_0
    if gguf_name == "output.weight":
        return Q.F16
    leaf = gguf_name.split(".")[2]
    return {
        "attn_q": Q.Q4_0, "attn_k": Q.Q4_0, "attn_v": Q.Q4_0, "attn_output": Q.Q4_0,
        "ffn_gate": Q.Q4_1, "ffn_up": Q.Q4_1, "ffn_down": Q.Q5_0,
    }[leaf]


def mixed_parts(gguf_name):
    """Types differing inside the fused projections, as llama.cpp's *_M mixes do in some layers
    (gemma-3-270m Q4_K_M: q/k Q5_0, v Q8_0): layer 0 has q Q4_0, k Q5_0, v Q8_0 and gate Q4_1,
    up Q8_0; layer 1 keeps q/k/v (Q8_0) and gate/up (Q4_1) of one type each."""
    if gguf_name == "token_embd.weight":
        return Q.Q8_0
    if gguf_name == "output.weight":
        return Q.Q5_1
    layer, leaf = int(gguf_name.split(".")[1]), gguf_name.split(".")[2]
    mixed_layer = {"attn_q": Q.Q4_0, "attn_k": Q.Q5_0, "attn_v": Q.Q8_0, "ffn_gate": Q.Q4_1, "ffn_up": Q.Q8_0}
    uniform_layer = {"attn_q": Q.Q8_0, "attn_k": Q.Q8_0, "attn_v": Q.Q8_0, "ffn_gate": Q.Q4_1, "ffn_up": Q.Q4_1}
    common = {"attn_output": Q.Q4_1, "ffn_down": Q.Q5_1}
    return {**common, **(mixed_layer if layer == 0 else uniform_layer)}[leaf]


SPECS = [
    {"stem": "tiny-llama-q8_0", "source": "llama-f32", "arch": "llama", "pre": "gpt2",
     "plan": q8_0_everywhere, "file_type": LlamaFileType.MOSTLY_Q8_0},
    {"stem": "tiny-llama-mixed", "source": "llama-f32", "arch": "llama", "pre": "gpt2",
     "plan": mixed, "file_type": LlamaFileType.MOSTLY_Q4_0},  # "mostly": the attention weights
    {"stem": "tiny-qwen2-q8_0", "source": "qwen2-f32", "arch": "qwen2", "pre": "qwen2",
     "plan": q8_0_everywhere, "file_type": LlamaFileType.MOSTLY_Q8_0},
    # As llama.cpp writes them today: rope_freqs.weight, key_length / value_length; goldens
    # from the dequantized weights in the folder's own model ("dequantized").
    {"stem": "tiny-llama3-f32", "source": "llama-f32", "arch": "llama", "pre": "gpt2",
     "plan": lambda name: Q.F32, "file_type": LlamaFileType.ALL_F32,
     "rope_freqs": True, "key_length": True, "golden_from": "dequantized"},
    {"stem": "tiny-qwen3-q8_0", "source": "qwen3-bf16", "arch": "qwen3", "pre": "qwen2",
     "plan": q8_0_everywhere, "file_type": LlamaFileType.MOSTLY_Q8_0,
     "key_length": True, "golden_from": "dequantized"},
    {"stem": "tiny-llama-mixed-parts", "source": "llama-f32", "arch": "llama", "pre": "gpt2",
     "plan": mixed_parts, "file_type": LlamaFileType.MOSTLY_Q4_1},
    {"stem": "tiny-gemma3-q8_0", "source": "gemma3-bf16", "arch": "gemma3", "pre": "gpt2",
     "plan": q8_0_everywhere, "file_type": LlamaFileType.MOSTLY_Q8_0,
     "key_length": True, "golden_from": "dequantized"},
]

LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
# gemma3's block norms (llama.cpp's tensor_mapping for MODEL_ARCH.GEMMA3).
GEMMA3_LAYER_NAMES = {
    **LAYER_NAMES,
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}

# Strings for the tokenizer comparison on top of make_fixtures.ENCODE_STRINGS.
EXTRA_TOKENIZER_STRINGS = [
    "12345 and 3.14",
    "x =  42",
    "你好，世界",
    "cafe\u0301 (decomposed e + combining acute)",
    "A\u030angstro\u0308m",
    "def f(x):\n    return x  # done\n",
    "<|im_start|>assistant\n<|im_end|><|endoftext|>",
]


# ---------------------------------------------------------------- conversion


def llama_permute(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def rope_freqs(cfg):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: llama3 scaling
    as one divisor per frequency (original_max_position_embeddings from the
    rope settings, see the module docstring)."""
    rp = cfg.rope_parameters
    assert rp["rope_type"] == "llama3", rp
    base, dim = rp["rope_theta"], cfg.head_dim
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old_context_len = rp["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32).numpy()


def layer_names(arch):
    return GEMMA3_LAYER_NAMES if arch == "gemma3" else LAYER_NAMES


def gguf_name(hf_name, arch):
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    parts = hf_name.split(".")
    assert parts[:2] == ["model", "layers"], hf_name
    return f"blk.{parts[2]}.{layer_names(arch)['.'.join(parts[3:])]}"


def gguf_tensors(folder, cfg, spec):
    """[(gguf name, float32 array)] in llama.cpp's naming and row order."""
    arch = spec["arch"]
    state = load_file(str(folder / "model.safetensors"))
    tensors = {}
    if spec.get("rope_freqs"):
        tensors["rope_freqs.weight"] = rope_freqs(cfg)
    for hf_name, w in state.items():
        w = w.to(torch.float32).numpy()
        name = gguf_name(hf_name, arch)
        if arch == "gemma3" and hf_name.endswith("norm.weight"):
            w = w + np.float32(1.0)  # Gemma3Model.norm_shift
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_q.bias")):
            w = llama_permute(w, cfg.num_attention_heads)
        elif arch == "llama" and name.endswith(("attn_k.weight", "attn_k.bias")):
            w = llama_permute(w, cfg.num_attention_heads, cfg.num_key_value_heads)
        tensors[name] = w
    if cfg.tie_word_embeddings:
        tensors.pop("output.weight", None)
    else:
        assert "output.weight" in tensors

    def order(name):  # rope_freqs, token_embd, blocks in order, output_norm, output
        if name == "rope_freqs.weight":
            return (-1, 0, "")
        if name == "token_embd.weight":
            return (0, 0, "")
        if name.startswith("blk."):
            leaf = name.split(".", 2)[2]
            return (1, int(name.split(".")[1]), list(layer_names(arch).values()).index(leaf))
        return (2, 0, name)
    return [(n, tensors[n]) for n in sorted(tensors, key=order)]


def tokenizer_metadata(folder):
    """tokens / token types / merges / specials as llama.cpp's converter
    writes them for a byte-level BPE tokenizer.json."""
    tj = json.loads((folder / "tokenizer.json").read_text())
    tc = json.loads((folder / "tokenizer_config.json").read_text())
    vocab = tj["model"]["vocab"]
    n = len(vocab)
    tokens = [None] * n
    for tok, i in vocab.items():
        tokens[i] = tok
    assert None not in tokens
    types = [TokenType.NORMAL] * n
    for added in tj["added_tokens"]:
        assert tokens[added["id"]] == added["content"]
        types[added["id"]] = TokenType.CONTROL if added["special"] else TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return {
        "tokens": tokens, "types": types, "merges": merges,
        "bos": vocab[tc["bos_token"]], "eos": vocab[tc["eos_token"]], "pad": vocab[tc["pad_token"]],
        "chat_template": tc["chat_template"],
    }


def write_gguf(path, spec, cfg, tensors, tok, plan):
    """plan(gguf name) -> GGML type for 2-D tensors; 1-D tensors stay F32."""
    arch = spec["arch"]
    w = GGUFWriter(path, arch)
    w.add_type("model")
    w.add_name(f"tiny {spec['source']}")
    w.add_file_type(int(spec["file_type"]))
    w.add_quantization_version(2)
    w.add_vocab_size(cfg.vocab_size)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)  # gemma3: per layer type
    w.add_rope_freq_base(float(rope["rope_theta"]))
    if arch == "gemma3":
        w.add_sliding_window(cfg.sliding_window)
        assert rope["rope_type"] == "linear", rope
        w.add_rope_scaling_type(RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(rope["factor"]))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_rope_dimension_count(head_dim)
    if spec.get("key_length"):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(spec["pre"])
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_bos_token_id(tok["bos"])
    w.add_eos_token_id(tok["eos"])
    w.add_pad_token_id(tok["pad"])
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_chat_template(tok["chat_template"])
    types = {}
    for name, arr in tensors:
        qtype = plan(name) if arr.ndim == 2 else Q.F32
        if qtype == Q.F32:
            w.add_tensor(name, arr.astype(np.float32))
        elif qtype == Q.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, quantize(arr, qtype), raw_dtype=qtype)
        types[name] = qtype.name
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return types


# ---------------------------------------------------------------- checks / goldens


def load_gguf_model(path):
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def load_reference(spec):
    """Float32 HF model of the source fixture; llama with plain rope unless the GGUF has
    rope_freqs (what the GGUF encodes)."""
    folder = FIXTURES / spec["source"]
    cfg = AutoConfig.from_pretrained(folder)
    if spec["arch"] == "llama" and not spec.get("rope_freqs"):
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": float(cfg.rope_parameters["rope_theta"])}
    if spec["arch"] == "gemma3":
        cfg.query_pre_attn_scalar = cfg.head_dim  # what llama.cpp takes (see the module docstring)
    model = AutoModelForCausalLM.from_pretrained(folder, config=cfg, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    return model


@torch.no_grad()
def last_logits(model, ids):
    return model(input_ids=torch.tensor([ids])).logits[0, -1]


def prompt_ids(spec_index, length, attempt):
    gen = torch.Generator().manual_seed(104729 * (spec_index + 1) + 1009 * length + attempt)
    return torch.randint(len(mf.SPECIAL_TOKENS), mf.VOCAB_SIZE, (length,), generator=gen).tolist()


def check_f32_roundtrip(spec, cfg, tensors, tok, ref):
    """An all-F32 GGUF must give the reference logits: proves the conversion."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f32.gguf"
        write_gguf(path, spec, cfg, tensors, tok, lambda name: Q.F32)
        model = golden_model(spec, path)
        worst = 0.0
        for length in (7, 64):
            ids = prompt_ids(99, length, 0)
            worst = max(worst, float((last_logits(model, ids) - last_logits(ref, ids)).abs().max()))
    assert worst < 1e-4, f"{spec['stem']}: F32 GGUF differs from the reference by {worst}"
    return worst


def compare_tokenizers(spec, path):
    """Tokenizer transformers builds from the GGUF vs the fixture's tokenizer.json."""
    folder = FIXTURES / spec["source"]
    gguf_tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf_tok = AutoTokenizer.from_pretrained(folder)
    diffs = []
    for s in mf.ENCODE_STRINGS + EXTRA_TOKENIZER_STRINGS:
        a = gguf_tok(s, add_special_tokens=False)["input_ids"]
        b = raw.encode(s, add_special_tokens=False).ids
        c = hf_tok(s, add_special_tokens=False)["input_ids"]
        if not (a == b == c):
            diffs.append({"text": s, "gguf_transformers": a, "tokenizer_json": b, "hf_auto": c})
    assert gguf_tok.bos_token_id == 0 and gguf_tok.eos_token_id == 2, (gguf_tok.bos_token_id, gguf_tok.eos_token_id)
    return gguf_tok, diffs


def llama_unpermute(w, n_head):
    """Inverse of llama_permute: GGUF row h*D + 2i + a -> HF row h*D + a*D/2 + i."""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


@torch.no_grad()
def dequantized_model(spec, path):
    """The source folder's model (load_reference) with the HF state dict
    rebuilt from the GGUF without transformers' GGUF loader (GGUFReader +
    gguf.quants.dequantize + un-permute here). rope_freqs.weight must give
    the model's own (llama3-scaled) frequencies."""
    from gguf.quants import dequantize
    ref = load_reference(spec)
    cfg = ref.config
    inverse = {gguf_name(k, spec["arch"]): k for k in ref.state_dict() if "rotary" not in k}
    state = {}
    for t in GGUFReader(path).tensors:
        if t.name == "rope_freqs.weight":
            rp = cfg.rope_parameters
            base = 1.0 / (rp["rope_theta"] ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
            scaled = base / torch.from_numpy(np.array(t.data, dtype=np.float32))
            want = ref.model.rotary_emb.inv_freq
            assert torch.allclose(scaled, want, rtol=1e-6, atol=0), (scaled, want)
            continue
        w = dequantize(t.data, t.tensor_type).reshape([int(x) for x in t.shape[::-1]]).astype(np.float32)
        if spec["arch"] == "gemma3" and t.name.endswith("norm.weight"):
            w = w - np.float32(1.0)
        if spec["arch"] == "llama" and ".attn_q." in t.name:
            w = llama_unpermute(w, cfg.num_attention_heads)
        elif spec["arch"] == "llama" and ".attn_k." in t.name:
            w = llama_unpermute(w, cfg.num_key_value_heads)
        state[inverse[t.name]] = torch.from_numpy(np.ascontiguousarray(w))
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = ref.load_state_dict(state, strict=False)
    assert not unexpected and all(m == "lm_head.weight" for m in missing), (missing, unexpected)
    if cfg.tie_word_embeddings:
        ref.tie_weights()
    return ref


def golden_model(spec, path):
    """The model the goldens come from: transformers' GGUF loader, or where it cannot read the
    file faithfully, the dequantized weights in the folder's own model."""
    if spec.get("golden_from") == "dequantized":
        return dequantized_model(spec, path)
    return load_gguf_model(path)


@torch.no_grad()
def check_independent_load(spec, path, golden):
    """The golden logits again, from the dequantized weights in the folder's own model."""
    ref = dequantized_model(spec, path)
    worst = 0.0
    for case in golden["cases"]:
        got = last_logits(ref, case["prompt_ids"])
        want = torch.tensor(case["logits"])
        worst = max(worst, float((got - want).abs().max()))
    assert worst < 1e-3, f"{path.name}: independent dequantization differs by {worst}"
    return worst


def make_golden(spec_index, spec, path, types, ref, f32_err):
    model = golden_model(spec, path)
    cases, quant_error = [], {}
    for length in PROMPT_LENS:
        for attempt in range(MAX_PROMPT_ATTEMPTS):
            ids = prompt_ids(spec_index, length, attempt)
            logits, gen_ids, margin = mf.greedy(model, ids)
            if margin >= MIN_MARGIN:
                break
        else:
            sys.exit(f"{spec['stem']}: no prompt of length {length} with margin >= {MIN_MARGIN}")
        mf.check_without_cache(model, ids, logits, gen_ids)
        want = last_logits(ref, ids)
        quant_error[str(length)] = mf.round6(float((logits - want).abs().max()))
        ref_greedy = mf.greedy(ref, ids)[1]
        cases.append({"prompt_len": length, "prompt_ids": ids, "greedy_ids": gen_ids,
                      "logits": [mf.round6(v) for v in logits.tolist()],
                      "min_margin": mf.round6(margin),
                      "reference_greedy_ids": ref_greedy})
    gguf_tok, diffs = compare_tokenizers(spec, path)
    chat_text = gguf_tok.apply_chat_template(mf.CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    chat_ids = gguf_tok(chat_text, add_special_tokens=False)["input_ids"]
    encode = [{"text": s, "ids": gguf_tok(s, add_special_tokens=False)["input_ids"]}
              for s in mf.ENCODE_STRINGS + EXTRA_TOKENIZER_STRINGS]
    golden = {
        "file": path.name,
        "arch": spec["arch"],
        "source_fixture": spec["source"],
        "rope": "llama3 (rope_freqs.weight)" if spec.get("rope_freqs") else "default (no rope scaling)",
        "tensors": types,
        "cases": cases,
        "quant_error": quant_error,
        "f32_conversion_error": mf.round6(f32_err),
        "chat": {"messages": mf.CHAT_MESSAGES, "text": chat_text, "ids": chat_ids},
        "encode": encode,
        "tokenizer_differences": diffs,
    }
    if spec.get("golden_from") == "dequantized":
        golden["golden_from"] = "the source folder's model with the GGUF's dequantized weights"
    out = path.with_name(path.stem + ".golden.json")
    out.write_text(json.dumps(golden, separators=(",", ":"), ensure_ascii=False) + "\n")
    return golden, out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="+", metavar="STEM", choices=[s["stem"] for s in SPECS],
                        help="write only these files")
    only = parser.parse_args().only
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    OUT.mkdir(parents=True, exist_ok=True)
    refs = {}
    for i, spec in enumerate(SPECS):
        if only is not None and spec["stem"] not in only:
            continue
        folder = FIXTURES / spec["source"]
        cfg = AutoConfig.from_pretrained(folder)
        tensors = gguf_tensors(folder, cfg, spec)
        tok = tokenizer_metadata(folder)
        key = (spec["source"], bool(spec.get("rope_freqs")))
        if key not in refs:
            refs[key] = load_reference(spec)
        ref = refs[key]
        f32_err = check_f32_roundtrip(spec, cfg, tensors, tok, ref)
        path = OUT / f"{spec['stem']}.gguf"
        types = write_gguf(path, spec, cfg, tensors, tok, spec["plan"])
        # The file must read back with the intended types.
        back = {t.name: t.tensor_type.name for t in GGUFReader(path).tensors}
        assert back == types, (back, types)
        golden, out = make_golden(i, spec, path, types, ref, f32_err)
        independent = check_independent_load(spec, path, golden)
        counts = {}
        for t in types.values():
            counts[t] = counts.get(t, 0) + 1
        print(f"{path.name}: {path.stat().st_size} bytes, {counts}; F32 conversion error {f32_err:.2e}; "
              f"goldens vs independent dequantization {independent:.2e}")
        print("  max |logit - f32 reference| by prompt length: "
              + ", ".join(f"{k}: {v:.4f}" for k, v in golden["quant_error"].items()))
        print("  margins: " + ", ".join(f"{c['prompt_len']}: {c['min_margin']:.3f}" for c in golden["cases"])
              + "; greedy ids equal to the f32 reference's: "
              + ", ".join(str(c["greedy_ids"] == c["reference_greedy_ids"]) for c in golden["cases"]))
        if golden["tokenizer_differences"]:
            for d in golden["tokenizer_differences"]:
                print(f"  tokenizer differs on {d['text']!r}: gguf {d['gguf_transformers']}, "
                      f"tokenizer.json {d['tokenizer_json']}, AutoTokenizer(folder) {d['hf_auto']}")
        else:
            print("  tokenizer: GGUF tokenizer encodes every test string like tokenizer.json")
        print(f"  wrote {out.relative_to(REPO)} ({out.stat().st_size} bytes)")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"total under {OUT.relative_to(REPO)}: {total} bytes")


if __name__ == "__main__":
    main()
