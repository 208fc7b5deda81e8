#!/usr/bin/env bash
# Idempotent host set-up for labctl on Debian 12 (root): apt packages, the .venv, the labgen
# generator (scripts/build-labgen.sh, cached) and the virtlogd/libvirtd daemons (there is no
# systemd here). A second run installs and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  qemu-system-x86 qemu-utils
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-system libvirt-daemon-config-network
  libvirt-clients libvirt-dev
  libxml2-utils dnsmasq-base pkg-config iproute2 kmod cpio
  dpdk dpdk-dev librte-net-vhost23 librte-net-virtio23 librte-mempool-ring23
  libdpdk-dev meson gcc
  busybox-static ethtool iperf3 tmux
  python3-venv
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.labctl-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: pip install -e '.[dev]'"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
  echo "$want" > "$stamp"
fi

scripts/build-labgen.sh
scripts/services.sh
