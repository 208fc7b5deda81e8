#!/usr/bin/env bash
# Idempotent host set-up for labctl on Debian 12 (root): apt packages, the .venv, the labgen
# generator (scripts/build-labgen.sh, cached) and the virtlogd/libvirtd daemons (there is no
# systemd here). A second run installs and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The one package list (also read by playbooks/lab-host.yml): names separated by blanks, '#' comments.
mapfile -t APT_PACKAGES < <(sed -e 's/#.*//' scripts/apt-packages.txt | tr -s ' \t' '\n' | sed '/^$/d')
((${#APT_PACKAGES[@]})) || { echo "setup: scripts/apt-packages.txt lists no packages" >&2; exit 1; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # packages must not start their system daemons (openvswitch-switch would start the host's own,
  # non-DPDK OVS; labctl runs private instances): deny it for this install, as policy-rc.d(8) allows
  policy=/usr/sbin/policy-rc.d
  made_policy=
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ -n "$made_policy" ]]; then rm -f "$policy"; fi
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.labctl-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: pip install -e '.[dev,docs]'"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev,docs]'
  echo "$want" > "$stamp"
fi

scripts/build-labgen.sh
scripts/services.sh
