#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (fuzz/fuzz_targets), made from tests/fixtures: written to
fuzz/corpus-seeds/<target>/ (ignored by git; the fixtures are the source). Standard library only.

    python3 scripts/fuzz_seeds.py [OUT_DIR]
"""
import base64
import json
import random
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fuzz" / "corpus-seeds"


def write(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def hf_dirs():
    return sorted(p.parent for p in FIX.glob("*/config.json") if (p.parent / "tokenizer.json").exists())


# Tiny shapes, so that the fuzzer spends its time on headers rather than on weights: hidden 32
# (whole Q8_0 blocks), 2 heads of 16, 1 KV head, intermediate 32, 1 layer.
D, HEADS, KV, HD, INTER = 32, 2, 1, 16, 32
DTYPES = {"F32": 4, "F16": 2, "BF16": 2}


def tiny_tensors(arch, vocab, tied):
    """(HF name, shape) of every tensor the loader reads for a 1-layer model."""
    p = "model.layers.0."
    ts = [("model.embed_tokens.weight", [vocab, D]), (p + "input_layernorm.weight", [D]),
          (p + "self_attn.q_proj.weight", [HEADS * HD, D]), (p + "self_attn.k_proj.weight", [KV * HD, D]),
          (p + "self_attn.v_proj.weight", [KV * HD, D]), (p + "self_attn.o_proj.weight", [D, HEADS * HD]),
          (p + "post_attention_layernorm.weight", [D]), (p + "mlp.gate_proj.weight", [INTER, D]),
          (p + "mlp.up_proj.weight", [INTER, D]), (p + "mlp.down_proj.weight", [D, INTER]),
          ("model.norm.weight", [D])]
    if arch == "qwen2":
        ts += [(p + f"self_attn.{x}_proj.bias", [n * HD]) for x, n in (("q", HEADS), ("k", KV), ("v", KV))]
    if arch == "qwen3":
        ts += [(p + "self_attn.q_norm.weight", [HD]), (p + "self_attn.k_norm.weight", [HD])]
    if not tied:
        ts.append(("lm_head.weight", [vocab, D]))
    return ts


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def tiny_safetensors(tensors, dtype, rng):
    header, data = {}, b""
    for name, shape in tensors:
        n = numel(shape) * DTYPES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        # Small values in every dtype: random low bytes, a zero high byte.
        data += bytes(rng.randrange(256) if i % DTYPES[dtype] == 0 else 0 for i in range(n))
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def arch_of(config):
    return {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
            "MistralForCausalLM": "llama"}.get((config.get("architectures") or [""])[0])


def tiny_config(config, vocab):
    c = dict(config, hidden_size=D, num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HD,
             intermediate_size=INTER, num_hidden_layers=1, vocab_size=vocab)
    return json.dumps(c, indent=1).encode()


# GGUF (v3) writing, as gguf-py does it: little-endian, tensor data aligned to 32 bytes.
GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR = 4, 5, 6, 7, 8, 9


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(ty, v):
    if ty == GGUF_STR:
        return gguf_str(v)
    if ty == GGUF_ARR:
        elem, items = v
        return struct.pack("<IQ", elem, len(items)) + b"".join(gguf_value(elem, x) for x in items)
    return struct.pack({GGUF_U32: "<I", GGUF_I32: "<i", GGUF_F32: "<f", GGUF_BOOL: "<?"}[ty], v)


def gguf_name(hf):
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    module, kind = hf[len("model.layers.0."):].rsplit(".", 1)
    return f"blk.0.{parts[module]}.{kind}"


def tiny_gguf(arch, tok, tc, tensors, rng, rope_freqs):
    vocab = tok["model"]["vocab"]
    tokens = [None] * (max(vocab.values()) + 1)
    for t, i in vocab.items():
        tokens[i] = t
    types = [1] * len(tokens)
    for a in tok.get("added_tokens", []):
        tokens[a["id"]], types[a["id"]] = a["content"], 3
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    ids = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    meta = [("general.architecture", GGUF_STR, arch), (f"{arch}.embedding_length", GGUF_U32, D),
            (f"{arch}.block_count", GGUF_U32, 1), (f"{arch}.feed_forward_length", GGUF_U32, INTER),
            (f"{arch}.attention.head_count", GGUF_U32, HEADS), (f"{arch}.attention.head_count_kv", GGUF_U32, KV),
            (f"{arch}.attention.key_length", GGUF_U32, HD), (f"{arch}.context_length", GGUF_U32, 256),
            (f"{arch}.attention.layer_norm_rms_epsilon", GGUF_F32, 1e-6), (f"{arch}.rope.freq_base", GGUF_F32, 1e4),
            ("tokenizer.ggml.model", GGUF_STR, "gpt2"),
            ("tokenizer.ggml.pre", GGUF_STR, "qwen2" if arch != "llama" else "llama-bpe"),
            ("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, tokens)),
            ("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, types)),
            ("tokenizer.ggml.merges", GGUF_ARR, (GGUF_STR, merges)),
            ("tokenizer.ggml.bos_token_id", GGUF_U32, ids.get("<|endoftext|>", 0)),
            ("tokenizer.ggml.eos_token_id", GGUF_U32, ids.get("<|im_end|>", 0)),
            ("tokenizer.ggml.add_bos_token", GGUF_BOOL, arch == "llama")]
    if isinstance(tc.get("chat_template"), str):
        meta.append(("tokenizer.chat_template", GGUF_STR, tc["chat_template"]))
    infos, data = b"", b""
    all_tensors = [(gguf_name(n), s) for n, s in tensors] + ([("rope_freqs.weight", [HD // 2])] if rope_freqs else [])
    for name, shape in all_tensors:
        # Matrices as Q8_0 (blocks of 32: f16 scale 1/64, then 32 int8), vectors as F32.
        if len(shape) == 2:
            ty = 8
            blob = b"".join(b"\x00\x24" + bytes(rng.randrange(256) for _ in range(32)) for _ in range(numel(shape) // 32))
        else:
            ty = 0
            blob = b"".join(struct.pack("<f", 1.0 + rng.random()) for _ in range(numel(shape)))
        infos += gguf_str(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in reversed(shape))
        infos += struct.pack("<IQ", ty, len(data))
        data += blob + bytes(-len(blob) % 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(all_tensors), len(meta))
    head += b"".join(gguf_str(k) + struct.pack("<I", ty) + gguf_value(ty, v) for k, ty, v in meta) + infos
    return head + bytes(-len(head) % 32) + data


def precompiled_tokenizer():
    """llama-f32's tokenizer.json with a Precompiled normalizer: SentencePiece's charsmap, a
    trie (units 257..=511 the root's children; "a" at 256 ^ 97 with a leaf) mapping "a" to "b",
    for the checks of src/tokenizer/charsmap.rs."""
    units = [0] * 512
    units[0], units[353] = 256 << 10, (1 << 10) | (1 << 8) | 97
    charsmap = struct.pack("<I", 4 * len(units)) + b"".join(struct.pack("<I", u) for u in units) + b"b\0"
    tok = json.loads((FIX / "llama-f32" / "tokenizer.json").read_text())
    tok["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}
    return json.dumps(tok).encode()


def main():
    rng = random.Random(13)
    write("tokenizer_json", "precompiled", precompiled_tokenizer() + b"\0{}")
    for d in hf_dirs():
        config = json.loads((d / "config.json").read_text())
        tok = json.loads((d / "tokenizer.json").read_text())
        tc_path = d / "tokenizer_config.json"
        tc = json.loads(tc_path.read_text()) if tc_path.exists() else {}
        arch = arch_of(config)
        write("config_json", d.name, (d / "config.json").read_bytes())
        write("tokenizer_json", d.name, (d / "tokenizer.json").read_bytes() + b"\0" + json.dumps(tc).encode())
        if arch is None:
            continue
        tied = bool(config.get("tie_word_embeddings"))
        # The safetensors models get a vocabulary of 16; the GGUF ones the tokenizer's own.
        tensors = tiny_tensors(arch, 16, tied)
        dtype = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}[config.get("dtype") or config["torch_dtype"]]
        st = tiny_safetensors(tensors, dtype, rng)
        write("safetensors", d.name, st)
        # config.json, NUL, the safetensors file: the loader's checks of one against the other.
        write("config_json", d.name + "-tiny-with-tensors", tiny_config(config, 16) + b"\0" + st)
        tensors = tiny_tensors(arch, config["vocab_size"], tied)
        g = tiny_gguf(arch, tok, tc, tensors, rng, rope_freqs="rope_scaling" in config)
        for target in ("gguf", "gguf_tokenizer"):
            write(target, d.name + ".gguf", g)
    # A template, then role / content pairs, NUL-separated.
    chat = json.loads((FIX / "chat_templates.json").read_text())
    for tname, template in chat["templates"].items():
        for cname, messages in chat["conversations"].items():
            parts = [template] + [x for m in messages for x in (m["role"], m["content"])]
            write("chat_template", f"{tname}-{cname}", "\0".join(parts).encode())
    # A tokenizer index, then little-endian u16 ids (see fuzz_targets/detokenizer.rs): ids a
    # golden prompt holds, and random ones.
    golden = json.loads((FIX / "llama-f32" / "golden.json").read_text())
    prompts = [c["prompt_ids"] for c in golden.get("cases", []) if "prompt_ids" in c][:3]
    for pick in range(6):
        seqs = prompts + [[rng.randrange(400) for _ in range(rng.randrange(1, 64))] for _ in range(3)]
        for i, ids in enumerate(seqs):
            data = bytes([pick]) + b"".join(int(x).to_bytes(2, "little") for x in ids[:256])
            write("detokenizer", f"t{pick}-{i}", data)


if __name__ == "__main__":
    main()
