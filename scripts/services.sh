#!/usr/bin/env bash
# Start virtlogd and libvirtd in the background when they are not running (no systemd on these hosts).
set -euo pipefail
mkdir -p /run/libvirt /var/log/libvirt
if ! pgrep -x virtlogd >/dev/null; then
  echo "services: starting virtlogd"
  virtlogd -d
fi
if ! pgrep -x libvirtd >/dev/null; then
  echo "services: starting libvirtd"
  libvirtd -d
fi
for _ in $(seq 1 50); do
  [[ -S /run/libvirt/libvirt-sock ]] && exit 0
  sleep 0.2
done
echo "services: libvirtd did not create /run/libvirt/libvirt-sock" >&2
exit 1
