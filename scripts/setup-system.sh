#!/usr/bin/env bash
# Installs the system packages datafarm needs: bubblewrap (the default sandbox) and Mesa >= 25
# lavapipe (Vulkan on the CPU, for SAPIEN render passes; Debian 12's Mesa 22 lavapipe is rejected by
# SAPIEN). Idempotent: a second run only checks versions and returns in well under a second.
set -euo pipefail

need_bwrap=0
need_mesa=0
command -v bwrap >/dev/null 2>&1 || need_bwrap=1

mesa_version() {
    dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true
}
mesa_major() {
    local v
    v=$(mesa_version)
    v=${v#*:}           # drop an epoch such as "1:"
    echo "${v%%.*}"
}
m=$(mesa_major)
if [ -z "$m" ] || [ "$m" -lt 25 ] 2>/dev/null; then need_mesa=1; fi
dpkg-query -W -f='${Status}' libvulkan1 2>/dev/null | grep -q "install ok installed" || need_mesa=1

if [ "$need_bwrap$need_mesa" = "00" ]; then
    echo "system packages: bubblewrap $(bwrap --version | awk '{print $2}'), mesa-vulkan-drivers $(mesa_version) (ok)"
    exit 0
fi

if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: missing system packages (bubblewrap: $need_bwrap, mesa>=25 lavapipe: $need_mesa)." >&2
    echo "         Install them as root: sudo bash scripts/setup-system.sh" >&2
    echo "         Without bubblewrap the default sandbox is unavailable; without Mesa >= 25 render tests skip." >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
src=/etc/apt/sources.list.d/debian.sources
if [ "$need_mesa" = 1 ] && [ -f "$src" ] && grep -q '^Suites: bookworm bookworm-updates$' "$src"; then
    # Mesa >= 25 lives in bookworm-backports; enable the suite in the existing source file.
    sed -i 's/^Suites: bookworm bookworm-updates$/Suites: bookworm bookworm-updates bookworm-backports/' "$src"
fi
apt-get update -qq
pkgs=()
[ "$need_bwrap" = 1 ] && pkgs+=(bubblewrap)
if [ ${#pkgs[@]} -gt 0 ]; then apt-get install -y -qq "${pkgs[@]}" >/dev/null; fi
if [ "$need_mesa" = 1 ]; then
    if apt-cache policy mesa-vulkan-drivers | grep -q bookworm-backports; then
        apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
    else
        apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
    fi
fi
echo "system packages: bubblewrap $(bwrap --version | awk '{print $2}'), mesa-vulkan-drivers $(mesa_version) (installed)"
