#!/usr/bin/env bash
# Idempotent host set-up for labctl on Debian 12 (root): apt packages, the .venv, and the
# virtlogd/libvirtd daemons (there is no systemd here). A second run installs nothing.
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

scripts/services.sh
