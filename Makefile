# The two commands a new user needs: `make run` and `make test`.
.PHONY: run test lint vulkan build

PROMPT ?= What is the capital of France?

vulkan:
	./scripts/install-vulkan.sh

build:
	cargo build --release

# Sets up (Vulkan driver if missing) and answers a prompt with a bundled tiny model until the
# default model lands (see README).
run: vulkan build
	./target/release/wginfer info
	./target/release/wginfer generate --model tests/fixtures/qwen2-f32 --chat --prompt "$(PROMPT)" --max-tokens 32 --temperature 0

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets --workspace -- -D warnings

# Everything CI runs: formatting, lints, all tests on the default adapter (lavapipe on a machine
# without a GPU), and the golden tests again on wgpu's GL backend (no f16, no subgroups).
test: vulkan lint
	cargo test --workspace
	WGPU_BACKEND=gl cargo test --test golden
