#!/usr/bin/env bash
# Installs what the browser tests need, where missing: Debian's chromium and chromedriver
# (WebGPU on SwiftShader), tesseract (reads the page test's screenshot), and wasm-bindgen-cli (its test runner) at exactly the
# wasm-bindgen version of Cargo.lock, which the runner requires, with the wasm32 target.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v tesseract >/dev/null; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver tesseract-ocr >/dev/null
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen-test-runner --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
    # Not --locked: its lock pins crate versions the registry may no longer offer.
    cargo install -q wasm-bindgen-cli --version "$want"
fi
