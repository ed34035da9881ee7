#!/usr/bin/env bash
# Installs the software GPU drivers the engine and its tests run on when there is no GPU, only
# what is missing: Mesa's Vulkan driver (lavapipe) and its EGL/GL stack (llvmpipe, for wgpu's
# GL backend, which tests/portable.rs runs). On Debian 12 from bookworm-backports: Mesa 25
# runs compute ~8x faster than bookworm's 22.3.
set -euo pipefail # (grep without -q below: -q ends the pipe early and pipefail sees ldconfig die of SIGPIPE)
missing=()
icd() { compgen -G '/usr/share/vulkan/icd.d/*.json' || compgen -G '/etc/vulkan/icd.d/*.json'; } >/dev/null
if ! { icd && ldconfig -p | grep libvulkan.so.1 >/dev/null; }; then
    missing+=(mesa-vulkan-drivers libvulkan1)
fi
if ! { ldconfig -p | grep libEGL.so.1 >/dev/null && ldconfig -p | grep libEGL_mesa.so.0 >/dev/null; }; then
    missing+=(libegl1 libegl-mesa0 libgl1-mesa-dri)
fi
[ ${#missing[@]} -gt 0 ] || exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
. /etc/os-release
target=()
if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ] && ! grep -q bookworm-backports "$src"; then
        $SUDO sed -i 's/^Suites: bookworm bookworm-updates$/Suites: bookworm bookworm-updates bookworm-backports/' "$src"
    fi
    grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/ && target=(-t bookworm-backports)
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${target[@]}" "${missing[@]}" >/dev/null
echo "installed: ${missing[*]} ($(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true))"
