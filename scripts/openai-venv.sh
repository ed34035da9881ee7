#!/usr/bin/env bash
# The Python environment tests/openai_client.rs runs tests/openai_client.py in: a venv at
# target/openai-venv with the official `openai` package from PyPI (nothing else; no torch).
# Idempotent: a venv that already imports openai is kept. Debian's python3 has no venv module
# without python3-venv: installed then (apt-get, as root or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/openai-venv
PYTHON="${PYTHON:-python3}"
if "$VENV/bin/python" -c "import openai" 2>/dev/null; then
    exit 0
fi
rm -rf "$VENV"
if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check openai
echo "$VENV: openai $("$VENV/bin/python" -c 'import openai; print(openai.__version__)')"
