#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo-fuzz, libFuzzer), each for FUZZ_SECONDS (default 60), one
# after the other. Installs what is missing: Rust nightly (minimal profile) and cargo-fuzz.
#
#   scripts/fuzz.sh                        # every target, FUZZ_SECONDS each
#   FUZZ_SECONDS=5 scripts/fuzz.sh         # the short run `make test` does
#   FUZZ_RUNS=1000000 scripts/fuzz.sh gguf # a number of executions instead of a time
#
# Seeds are made from tests/fixtures (scripts/fuzz_seeds.py) into fuzz/corpus-seeds/; what the
# fuzzer finds accumulates in fuzz/corpus/<target>/. A crash, a hang past FUZZ_TIMEOUT seconds
# on one input, or more than 2 GiB of memory stops the run with the input saved under
# fuzz/artifacts/<target>/, and this script fails. Every such input becomes a fix and a
# regression test (tests/fuzz_regressions.rs, with its input inline).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${FUZZ_SECONDS:-60}
TIMEOUT=${FUZZ_TIMEOUT:-10}
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(gguf gguf_tokenizer safetensors config_json tokenizer_json chat_template detokenizer)
fi

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

python3 scripts/fuzz_seeds.py fuzz/corpus-seeds
# No sanitizer: the engine is safe Rust, and libFuzzer's RSS limit and timeout still catch
# out-of-memory and hangs. Release with debug assertions (overflow checks), cargo-fuzz's default.
# FUZZ_NO_BUILD=1 runs the binaries already built (a long run while the sources change).
[ -n "${FUZZ_NO_BUILD:-}" ] || (cd fuzz && cargo +nightly fuzz build --sanitizer none)
bin_dir="fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release"

for t in "${TARGETS[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    if [ -n "${FUZZ_RUNS:-}" ]; then bound=(-runs="$FUZZ_RUNS"); else bound=(-max_total_time="$SECONDS_EACH"); fi
    log="fuzz/artifacts/$t.log"
    echo "== fuzz $t (${bound[*]}), log in $log"
    if ! "$bin_dir/$t" "fuzz/corpus/$t" "fuzz/corpus-seeds/$t" "${bound[@]}" -rss_limit_mb=2048 \
        -timeout="$TIMEOUT" -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1; then
        tail -n 40 "$log"
        echo "fuzz $t failed: the input is under fuzz/artifacts/$t/" >&2
        exit 1
    fi
    grep 'stat::number_of_executed_units' "$log"
done
