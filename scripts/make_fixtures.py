#!/usr/bin/env python3
"""Build tiny random-weight Hugging Face models and their golden outputs.

Everything is made locally from configs (nothing is downloaded) and all
randomness comes from fixed seeds, so re-running this script reproduces the
same files byte for byte (with the same torch / transformers / tokenizers).

Output, under tests/fixtures/:

    llama-f32/    LlamaForCausalLM,   float32,  llama3 rope scaling, GQA 4:2,
                  config.json rewritten in the old transformers-4.x key style
    qwen2-f32/    Qwen2ForCausalLM,   float32,  MQA 4:1, q/k/v biases, tied
                  embeddings, config.json in the installed transformers' style
    qwen2-bf16/   same architecture, other seed, weights stored as bfloat16
    mistral-f16/  MistralForCausalLM, float16,  GQA 8:2, head_dim 8
    qwen3-bf16/   Qwen3ForCausalLM,   bfloat16, GQA 4:2, head_dim 32 (not
                  hidden / heads = 16), per-head q/k RMSNorm, no biases
    gemma3-bf16/  Gemma3ForCausalLM (text), bfloat16, GQA 4:2, head_dim 32,
                  6 layers: 5 local (sliding window 16, RoPE base 10000) and
                  the last global (base 1e6, linear RoPE scaling x8), (1 + w)
                  norms before and after attention and MLP, GeGLU (tanh),
                  q/k norms, query_pre_attn_scalar 24 (not head_dim),
                  embeddings scaled by sqrt(hidden), tied LM head, Gemma's
                  chat template; prompts of 16 tokens too (the window)

Each folder holds config.json, model.safetensors, tokenizer.json,
tokenizer_config.json (ChatML chat_template), generation_config.json and
golden.json (see write_golden for its layout).

All four share one trained byte-level BPE (same vocab and merges). The llama
and mistral folders use it with the GPT-2 ByteLevel pre-tokenizer; the qwen2
folders carry the pipeline of a real Qwen2 tokenizer.json (NFC + regex Split +
ByteLevel), because transformers 5.x loads any qwen2 folder as Qwen2Tokenizer,
which imposes that pipeline regardless of tokenizer.json.

Goldens are the float32 math on the stored weights (bf16/f16 weights are
upcast exactly), eager attention, greedy decoding of 16 tokens without EOS
stopping. Seeds are retried deterministically until every greedy step of every
case has a top1-top2 logit gap of at least MIN_MARGIN.

Usage:  python3 scripts/make_fixtures.py [--only NAME ...]
        (--only: build and verify just those fixtures, leaving the others'
        files as they are)
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

# Never reach out to a model hub: everything here is built locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    Qwen3Config,
    Qwen3ForCausalLM,
)

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures"

VOCAB_SIZE = 384
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
BOS_ID, EOS_ID = 0, 2  # <|endoftext|>, <|im_end|>

PROMPT_LENS = [1, 7, 64, 300, 1500]
NEW_TOKENS = 16
MIN_MARGIN = 0.05  # smallest allowed top1-top2 logit gap over all greedy steps
MAX_ATTEMPTS = 200

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# google/gemma-3-1b-it's tokenizer_config.json chat_template.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\\n'}}\n{%- endif -%}\n"
)

CHAT_MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hello there, how are you?"},
]

ENCODE_STRINGS = [
    "Hello world",
    "  two leading spaces,  double  spaces and a trailing one ",
    "Punctuation: hello, world! (yes?) -- ok; \"quoted\" 'single'.",
    "digits 0123456789 and 3.14159, 42nd, 1,000,000",
    "café au lait, naïve résumé",
    "emoji party 🎉🙂 done",
    "line one\nline two\ttabbed\r\n",
    "<|im_start|>user\nhi<|im_end|>",
]

# Training text for the tokenizer (written here so no download is needed).
CORPUS = """\
The quick brown fox jumps over the lazy dog. A large language model reads a
sequence of tokens and predicts the next one. Each token is looked up in an
embedding table, passed through a stack of transformer layers, and projected
back onto the vocabulary to give one logit per token. The highest logit wins
when decoding greedily, and the chosen token is appended to the sequence.

Attention lets every position look at the positions before it. Queries, keys
and values are linear projections of the hidden state; rotary position
embeddings rotate the queries and keys by an angle that depends on the
position, so that the dot product between them only depends on the distance.
Grouped query attention shares one key and value head between several query
heads, which makes the key value cache smaller and the model faster.

After attention comes the feed forward block: a gate projection and an up
projection, a SiLU activation on the gate, an element wise product, and a
down projection back to the hidden size. Both blocks are wrapped in residual
connections and preceded by RMS normalization with a learned scale.

Hello there! How are you today? I am fine, thank you. What time is it? It is
half past seven in the evening, on the 14th of March 2024. The price was
$3.50, or about 3,50 EUR; the temperature was 21.5 degrees. Call 555-0199.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 256 1024 4096 65536 3.14159 2.71828.

def main(args):
    for i, item in enumerate(args):
        if item is None:
            continue
        print(f"{i}: {item}")
    return 0

Le café est très bon. Über den Wolken muss die Freiheit wohl grenzenlos sein.
El niño comió una manzana. Naïve façade, résumé, coöperate, jalapeño.
Emoji are bytes too: 🎉 🙂 🚀 ✨ and so are symbols like → ≤ ≥ ∑ π.

You are a helpful assistant. Answer the question briefly and precisely. The
user asked about the weather, the news, a recipe for bread, and how to write
a function that sorts a list of numbers in place without extra memory.
"""

# Model specs. "seed" is the first seed tried; attempts go seed, seed+1, ...
SPECS = [
    {
        "name": "llama-f32",
        "tokenizer": "gpt2",
        "arch": "llama",
        "dtype": torch.float32,
        "seed": 1000,
        "old_style_config": True,
        "eos_in_generation_config": EOS_ID,
    },
    {
        "name": "qwen2-f32",
        "tokenizer": "qwen2",
        "arch": "qwen2",
        "dtype": torch.float32,
        "seed": 2000,
        "old_style_config": False,
        "eos_in_generation_config": [EOS_ID, BOS_ID],
    },
    {
        "name": "qwen2-bf16",
        "tokenizer": "qwen2",
        "arch": "qwen2",
        "dtype": torch.bfloat16,
        "seed": 3000,
        "old_style_config": False,
        "eos_in_generation_config": [EOS_ID, BOS_ID],
    },
    {
        "name": "mistral-f16",
        "tokenizer": "gpt2",
        "arch": "mistral",
        "dtype": torch.float16,
        "seed": 4000,
        "old_style_config": False,
        "eos_in_generation_config": EOS_ID,
    },
    {
        "name": "qwen3-bf16",
        "tokenizer": "qwen2",
        "arch": "qwen3",
        "dtype": torch.bfloat16,
        "seed": 5000,
        "old_style_config": False,
        "eos_in_generation_config": [EOS_ID, BOS_ID],
    },
    {
        "name": "gemma3-bf16",
        "tokenizer": "gemma",
        "arch": "gemma3",
        "dtype": torch.bfloat16,
        "seed": 6000,
        "old_style_config": False,
        "eos_in_generation_config": EOS_ID,
        # 16: a prompt that fills the sliding window exactly, decode crosses it.
        "prompt_lens": [1, 7, 16, 64, 300, 1500],
    },
]

# Pre-tokenizer regex of Qwen2's tokenizer.json.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

INIT_STD = 0.2  # std of every projection / embedding weight and bias


# ---------------------------------------------------------------- tokenizer


def train_bpe():
    """Train a small GPT-2 style byte-level BPE (vocab, merges, pipeline)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=1,
        show_progress=False,
    )
    # Repeat so pair counts are well separated; the order of lines is fixed.
    tok.train_from_iterator([CORPUS] * 4, trainer=trainer)
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    for i, s in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def qwen2_style(tok):
    """Same vocab and merges, with the pipeline of a real Qwen2 tokenizer.json
    (NFC normalizer, regex Split then ByteLevel without its own regex).
    transformers 5.x always loads qwen2 folders as Qwen2Tokenizer, which
    rebuilds exactly this pipeline whatever tokenizer.json says, so the file
    must say the same for the goldens to hold both in Python and in Rust."""
    q = Tokenizer.from_str(tok.to_str())
    q.normalizer = normalizers.NFC()
    q.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    return q


def wrap_tokenizer(tok, chat_template=CHAT_TEMPLATE):
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL_TOKENS[BOS_ID],
        eos_token=SPECIAL_TOKENS[EOS_ID],
        pad_token=SPECIAL_TOKENS[BOS_ID],
        chat_template=chat_template,
        model_max_length=4096,
        clean_up_tokenization_spaces=False,
    )


def build_tokenizers():
    """{"gpt2": ..., "qwen2": ..., "gemma": ...}: one trained BPE in two pipelines ("gemma":
    the gpt2 one with Gemma's chat template)."""
    tok = train_bpe()
    return {"gpt2": wrap_tokenizer(tok), "qwen2": wrap_tokenizer(qwen2_style(tok)),
            "gemma": wrap_tokenizer(tok, GEMMA_CHAT_TEMPLATE)}


TOKENIZER_CLASS = {"gpt2": "PreTrainedTokenizerFast", "qwen2": "Qwen2Tokenizer", "gemma": "PreTrainedTokenizerFast"}


def save_tokenizer(tokenizer, kind, folder):
    """Save tokenizer.json + tokenizer_config.json with the template inline."""
    tokenizer.save_pretrained(folder, save_jinja_files=False)
    jinja = folder / "chat_template.jinja"
    if jinja.exists():  # newer transformers may still write it separately
        jinja.unlink()
    path = folder / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["chat_template"] = tokenizer.chat_template
    # Class names every transformers version knows (5.x writes its own
    # "TokenizersBackend", which 4.x cannot load).
    cfg["tokenizer_class"] = TOKENIZER_CLASS[kind]
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- models


def make_config(arch, dtype):
    common = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        num_hidden_layers=2,
        max_position_embeddings=4096,
        initializer_range=INIT_STD,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=None,
        hidden_act="silu",
        attention_dropout=0.0,
        use_cache=True,
    )
    if arch == "llama":
        cfg = LlamaConfig(
            **common,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=160,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 256,
            },
            attention_bias=False,
            mlp_bias=False,
            tie_word_embeddings=False,
        )
    elif arch == "qwen2":
        cfg = Qwen2Config(
            **common,
            num_attention_heads=4,
            num_key_value_heads=1,
            intermediate_size=160,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            tie_word_embeddings=True,
            use_sliding_window=False,
            sliding_window=None,
        )
    elif arch == "mistral":
        cfg = MistralConfig(
            **common,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=8,
            intermediate_size=96,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            sliding_window=None,
            tie_word_embeddings=False,
        )
    elif arch == "qwen3":
        cfg = Qwen3Config(
            **common,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            intermediate_size=160,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            attention_bias=False,
            tie_word_embeddings=False,
            use_sliding_window=False,
            sliding_window=None,
        )
    elif arch == "gemma3":
        common = {k: v for k, v in common.items() if k not in ("hidden_act", "num_hidden_layers")}
        cfg = Gemma3TextConfig(
            **common,
            num_hidden_layers=6,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            intermediate_size=160,
            rms_norm_eps=1e-6,
            hidden_activation="gelu_pytorch_tanh",
            query_pre_attn_scalar=24,
            sliding_window=16,
            # llama.cpp's pattern for gemma3 (every sixth layer global), so the GGUF holds it too.
            layer_types=["sliding_attention"] * 5 + ["full_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
            final_logit_softcapping=None,
            attn_logit_softcapping=None,
            attention_bias=False,
            tie_word_embeddings=True,
        )
        cfg.architectures = ["Gemma3ForCausalLM"]
    else:
        raise ValueError(arch)
    cfg._attn_implementation = "eager"
    cfg.dtype = dtype
    return cfg


MODEL_CLASSES = {"llama": LlamaForCausalLM, "qwen2": Qwen2ForCausalLM, "mistral": MistralForCausalLM,
                 "qwen3": Qwen3ForCausalLM, "gemma3": Gemma3ForCausalLM}

# Gemma's RMSNorm scales by (1 + w): its norm weights are drawn 1 lower, so the scales match.
NORM_OFFSET = {"gemma3": 1.0}


@torch.no_grad()
def init_weights(model, seed, norm_offset=0.0):
    """Fill every parameter from one seeded generator, independent of the
    library's own init: N(0, INIT_STD) for matrices and biases, U(0.6, 1.4)
    for the per-layer RMSNorm scales and U(2, 4) for the final norm (a larger
    final scale spreads the logits so greedy margins are comfortable); norm
    weights less `norm_offset` (Gemma's norms scale by 1 + w)."""
    gen = torch.Generator().manual_seed(seed)
    seen = set()
    for name, p in sorted(model.named_parameters(remove_duplicate=False), key=lambda kv: kv[0]):
        if id(p) in seen:  # tied lm_head
            continue
        seen.add(id(p))
        if name == "model.norm.weight":
            v = torch.rand(p.shape, generator=gen) * 2.0 + 2.0 - norm_offset
        elif name.endswith("norm.weight"):
            v = torch.rand(p.shape, generator=gen) * 0.8 + 0.6 - norm_offset
        else:
            v = torch.randn(p.shape, generator=gen) * INIT_STD
        p.copy_(v.to(p.dtype))


def build_model(arch, dtype, seed):
    """Return (model stored in `dtype`, float32 model holding the same values)."""
    cfg = make_config(arch, torch.float32)
    model = MODEL_CLASSES[arch](cfg).to(torch.float32)
    init_weights(model, seed, NORM_OFFSET.get(arch, 0.0))
    stored = model.to(dtype)  # rounds to bf16/f16 (no-op for f32)
    stored.config.dtype = dtype
    # A fresh float32 model holding the exact upcast of the stored values.
    # (Not stored.to(float32): that would keep buffers such as the rotary
    # inv_freq rounded to bf16/f16.)
    ref = MODEL_CLASSES[arch](make_config(arch, torch.float32)).to(torch.float32)
    ref.load_state_dict({k: v.to(torch.float32) for k, v in stored.state_dict().items()})
    ref.eval()
    return stored, ref


# ---------------------------------------------------------------- goldens


def prompt_ids(spec_index, length):
    gen = torch.Generator().manual_seed(7919 * (spec_index + 1) + length)
    low = len(SPECIAL_TOKENS)
    return torch.randint(low, VOCAB_SIZE, (length,), generator=gen).tolist()


@torch.no_grad()
def greedy(model, ids):
    """Greedy decoding through generate() with the KV cache: no sampling, no
    EOS stopping, no logits processors. Returns (logits at the last prompt
    position, generated ids, smallest top1-top2 gap over the steps)."""
    model.generation_config = GenerationConfig(  # replaces the saved one (it has an EOS)
        do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=BOS_ID
    )
    inp = torch.tensor([ids])
    out = model.generate(
        input_ids=inp, attention_mask=torch.ones_like(inp), use_cache=True,
        output_logits=True, return_dict_in_generate=True,
    )
    generated = out.sequences[0, len(ids):].tolist()
    assert len(generated) == NEW_TOKENS == len(out.logits)
    margin = float("inf")
    for step, logits in enumerate(out.logits):
        logits = logits[0]
        assert int(torch.argmax(logits)) == generated[step], "generate() did not take the argmax"
        top2 = torch.topk(logits, 2).values
        margin = min(margin, float(top2[0] - top2[1]))
    return out.logits[0][0].clone(), generated, margin


@torch.no_grad()
def check_without_cache(model, ids, first_logits, generated):
    """One plain forward over prompt + generated (no cache): every position
    must predict the next greedy id, and the first logits must agree."""
    seq = torch.tensor([ids + generated[:-1]])
    logits = model(input_ids=seq, use_cache=False).logits[0]
    tail = logits[len(ids) - 1:]
    assert tail.argmax(-1).tolist() == generated, "cached and uncached greedy ids differ"
    err = float((tail[0] - first_logits).abs().max())
    assert err < 1e-4 * max(1.0, float(first_logits.abs().max())), err


def compute_cases(model, spec_index, prompt_lens):
    """Goldens for every prompt length, or None as soon as one case has a
    greedy margin below MIN_MARGIN (cheap cases first)."""
    cases = []
    for length in prompt_lens:
        ids = prompt_ids(spec_index, length)
        logits, gen_ids, margin = greedy(model, ids)
        if margin < MIN_MARGIN:
            return None, (length, margin)
        cases.append({"prompt_len": length, "prompt_ids": ids, "greedy_ids": gen_ids,
                      "logits": logits.tolist(), "min_margin": margin})
    return cases, None


def round6(x):
    return float(f"{x:.6g}")


def write_golden(folder, spec, seed, cases, tokenizer):
    """golden.json (compact, floats to 6 significant digits):
    {"arch", "dtype" (as stored), "seed",
     "cases": [{"prompt_len", "prompt_ids", "greedy_ids" (16),
                "logits" (vocab floats at the last prompt position),
                "min_margin" (smallest top1-top2 gap over the 16 steps)}],
     "chat": {"messages", "text" (template with add_generation_prompt), "ids"},
     "encode": [{"text", "ids"}]}   (ids without added special tokens)"""
    chat_text = tokenizer.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    chat_ids = tokenizer(chat_text, add_special_tokens=False)["input_ids"]
    assert tokenizer(chat_text)["input_ids"] == chat_ids  # no BOS/EOS added by default
    encode = []
    for s in ENCODE_STRINGS:
        ids = tokenizer(s, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == s, (s, tokenizer.decode(ids))
        encode.append({"text": s, "ids": ids})
    golden = {
        "arch": spec["arch"],
        "dtype": str(spec["dtype"]).replace("torch.", ""),
        "seed": seed,
        "cases": [
            {**c, "logits": [round6(v) for v in c["logits"]], "min_margin": round6(c["min_margin"])}
            for c in cases
        ],
        "chat": {"messages": CHAT_MESSAGES, "text": chat_text, "ids": chat_ids},
        "encode": encode,
    }
    (folder / "golden.json").write_text(json.dumps(golden, separators=(",", ":"), ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- saving


def to_old_style_config(path):
    """Rewrite config.json with transformers-4.x keys: torch_dtype, top-level
    rope_theta and a rope_scaling dict (null when there is no scaling)."""
    cfg = json.loads(path.read_text())
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    rope = cfg.pop("rope_parameters", None)
    if rope is not None:
        rope = dict(rope)
        cfg["rope_theta"] = rope.pop("rope_theta")
        cfg["rope_scaling"] = None if rope.get("rope_type", "default") == "default" else rope
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def save_model(stored, folder, spec):
    stored.generation_config = GenerationConfig(
        bos_token_id=BOS_ID, eos_token_id=spec["eos_in_generation_config"], do_sample=False
    )
    stored.save_pretrained(folder, safe_serialization=True)
    if spec["old_style_config"]:
        to_old_style_config(folder / "config.json")
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors"
    ], list(folder.iterdir())


# ---------------------------------------------------------------- main steps


def make_fixture(spec_index, spec, tokenizers_):
    folder = OUT / spec["name"]
    for attempt in range(MAX_ATTEMPTS):
        seed = spec["seed"] + attempt
        stored, ref = build_model(spec["arch"], spec["dtype"], seed)
        cases, failed = compute_cases(ref, spec_index, spec.get("prompt_lens", PROMPT_LENS))
        if cases is not None:
            break
        print(f"  {spec['name']}: seed {seed}: margin {failed[1]:.4f} at prompt_len {failed[0]}, next seed")
    else:
        sys.exit(f"{spec['name']}: no seed with margin >= {MIN_MARGIN}")
    for c in cases:
        check_without_cache(ref, c["prompt_ids"], torch.tensor(c["logits"]), c["greedy_ids"])
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    tokenizer = tokenizers_[spec["tokenizer"]]
    save_model(stored, folder, spec)
    save_tokenizer(tokenizer, spec["tokenizer"], folder)
    write_golden(folder, spec, seed, cases, tokenizer)
    margins = ", ".join(f"L={c['prompt_len']}: {c['min_margin']:.4f}" for c in cases)
    print(f"{spec['name']}: seed {seed}; margins {margins}")


@torch.no_grad()
def verify_fixture(spec):
    """Reload the saved folder like a user would and compare with golden."""
    folder = OUT / spec["name"]
    golden = json.loads((folder / "golden.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    if spec["arch"] == "llama":
        rp = model.config.rope_parameters
        assert rp["rope_type"] == "llama3" and rp["factor"] == 8.0, rp
    if spec["arch"] == "qwen3":
        c = model.config
        assert c.head_dim == 32 != c.hidden_size // c.num_attention_heads, c
        assert model.model.layers[0].self_attn.q_norm.weight.shape == (32,)
    if spec["arch"] == "gemma3":
        c = model.config
        assert c.layer_types.count("full_attention") == 1 and c.sliding_window == 16, c
        assert c.rope_parameters["full_attention"]["rope_type"] == "linear", c.rope_parameters
        assert c.query_pre_attn_scalar != c.head_dim, c
    worst = 0.0
    for case in (golden["cases"][2], golden["cases"][-1]):
        logits, gen_ids, _ = greedy(model, case["prompt_ids"])
        want = torch.tensor(case["logits"])
        err = float((logits - want).abs().max())
        worst = max(worst, err)
        assert err < 1e-4 * max(1.0, float(want.abs().max())), (spec["name"], err)
        assert gen_ids == case["greedy_ids"], (spec["name"], gen_ids, case["greedy_ids"])
    # The Python tokenizer (AutoTokenizer) and the raw tokenizer.json (what
    # the tokenizers crate reads) must both give the golden ids.
    tok = AutoTokenizer.from_pretrained(folder)
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    chat = tok.apply_chat_template(golden["chat"]["messages"], tokenize=False, add_generation_prompt=True)
    assert chat == golden["chat"]["text"]
    for e in golden["encode"] + [golden["chat"]]:
        assert tok(e["text"], add_special_tokens=False)["input_ids"] == e["ids"], (type(tok), e)
        assert raw.encode(e["text"], add_special_tokens=False).ids == e["ids"], e
        assert raw.encode(e["text"]).ids == e["ids"], e
    print(f"verified {spec['name']} ({type(tok).__name__}; max |logit diff| {worst:.2e})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=[s["name"] for s in SPECS],
                        help="build and verify only these fixtures")
    only = parser.parse_args().only
    torch.set_num_threads(1)  # identical float reductions on every run
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    OUT.mkdir(parents=True, exist_ok=True)
    tokenizers_ = build_tokenizers()
    chosen = [(i, spec) for i, spec in enumerate(SPECS) if only is None or spec["name"] in only]
    for i, spec in chosen:
        make_fixture(i, spec, tokenizers_)
    for _, spec in chosen:
        verify_fixture(spec)


if __name__ == "__main__":
    main()
