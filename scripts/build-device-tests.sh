#!/usr/bin/env bash
# Builds the kernel and golden test binaries (release) and copies them, stripped, to
# target/device/{kernels,golden,gguf,quant}: what the H200 runs, since it has no cargo (docs/PERF.md,
# "Kernel tests on the H200"). Run from the repository root.
set -euo pipefail
mkdir -p target/device
cargo test --release --no-run --test kernels --test golden --test gguf --test quant --message-format=json \
    | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], "target/device/" + m["target"]["name"])
        print("target/device/" + m["target"]["name"])
'
strip target/device/kernels target/device/golden target/device/gguf target/device/quant
ls -la target/device
