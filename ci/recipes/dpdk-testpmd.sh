#!/bin/sh
# A labctl recipe for DPDK (a profile's recipes: NAME: {repo: /src/dpdk, argv: [/path/to/dpdk-testpmd.sh],
# output: build/app/dpdk-testpmd, role: forwarder}): testpmd with only the drivers labctl's labs use, linked
# statically (DPDK's meson default), so the one file is the whole build and the recipe cache keeps only it.
#
# labctl runs it in a clean checkout of each commit (its working directory), never through a shell of its own,
# with ccache's compiler links first on PATH (meson also finds ccache by itself); a second commit rebuilds only
# what changed. Needs meson, ninja-build, python3-pyelftools and libnuma-dev (scripts/apt-packages.txt).
#
# Variables (the recipe's env:, part of its cache key): DPDK_DRIVERS (the drivers to build), DPDK_MESON_ARGS
# (more meson options, split on blanks), NINJA_JOBS (parallel jobs; default: ninja's own).
set -eu
drivers=${DPDK_DRIVERS:-net/virtio,net/vhost,mempool/ring,bus/vdev,bus/pci}
# shellcheck disable=SC2086  # DPDK_MESON_ARGS is a list of options
meson setup build -Denable_drivers="$drivers" -Denable_apps=test-pmd -Dtests=false -Denable_docs=false \
    -Dexamples= ${DPDK_MESON_ARGS:-}
ninja -C build ${NINJA_JOBS:+-j "$NINJA_JOBS"}
