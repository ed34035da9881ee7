#!/usr/bin/env python3
"""Chat templates as transformers renders them (`apply_chat_template`, add_generation_prompt),
for the engine's minijinja rendering (tests/promises.rs): templates of real models that use
`bos_token`, `eos_token`, `raise_exception`, Python string methods and filters, and one laid
out over several lines with indented tags (transformers renders with jinja2's trim_blocks and
lstrip_blocks). A template that raises gives the error's message instead of a text.

Output: tests/fixtures/chat_templates.json, {"bos_token", "eos_token", "templates": {name:
source}, "conversations": {name: messages}, "cases": [{"template", "conversation", "text" or
"error"}]}. Uses the llama-f32 fixture's tokenizer with bos/eos given to the template as
"<s>" / "</s>". Instant.

Usage:  python3 scripts/make_template_goldens.py
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import jinja2  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (its Gemma chat template)

FIXTURES = Path(__file__).resolve().parent.parent / "tests/fixtures"
OUT = FIXTURES / "chat_templates.json"
BOS, EOS = "<s>", "</s>"

TEMPLATES = {
    # mistralai/Mistral-7B-Instruct-v0.1
    "mistral-v0.1": (
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
        "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
    ),
    # meta-llama/Llama-2-7b-chat-hf
    "llama-2-chat": (
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
        "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
        "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if loop.index0 == 0 and system_message != false %}"
        "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
        "{% else %}{% set content = message['content'] %}{% endif %}"
        "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
        "{% endfor %}"
    ),
    # meta-llama/Meta-Llama-3-8B-Instruct
    "llama-3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
        "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
    ),
    # HuggingFaceH4/zephyr-7b-beta's, with its tags indented: one tag per line, whose line
    # break (trim_blocks) and indentation (lstrip_blocks) do not reach the output.
    "zephyr-indented": (
        "{% for message in messages %}\n"
        "    {% if message['role'] == 'user' %}\n"
        "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
        "    {% elif message['role'] == 'system' %}\n"
        "{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
        "    {% elif message['role'] == 'assistant' %}\n"
        "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
        "    {% endif %}\n"
        "    {% if loop.last and add_generation_prompt %}\n"
        "{{ '<|assistant|>' }}\n"
        "    {% endif %}\n"
        "{% endfor %}"
    ),
    # google/gemma-3-1b-it (also the gemma3-bf16 fixture's): the system turn folded into the
    # first user turn, "model" for the assistant, `| trim`, `is string` / `is iterable` tests.
    "gemma-3": mf.GEMMA_CHAT_TEMPLATE,
}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello there!"}],
    "system-user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "  What is 2 + 2?\n"},
    ],
    "three-turns": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": " Hello! How can I help? "},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "user-user": [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}],
}


def render(tok, template, messages):
    try:
        text = tok.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True,
                                       bos_token=BOS, eos_token=EOS)
        return {"text": text}
    except jinja2.TemplateError as e:
        return {"error": str(e)}


def main():
    transformers.logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(FIXTURES / "llama-f32")
    cases = []
    for t_name, template in TEMPLATES.items():
        for c_name, messages in CONVERSATIONS.items():
            cases.append({"template": t_name, "conversation": c_name, **render(tok, template, messages)})
    # The templates must see the bos/eos given here, not the tokenizer's own.
    assert cases[0]["text"].startswith(BOS), cases[0]
    assert sum("error" in c for c in cases) == 4, [c for c in cases if "error" in c]
    golden = {"bos_token": BOS, "eos_token": EOS, "templates": TEMPLATES, "conversations": CONVERSATIONS,
              "cases": cases, "generated_by": {"transformers": transformers.__version__, "jinja2": jinja2.__version__}}
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
