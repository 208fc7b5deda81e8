#!/usr/bin/env bash
# The main job: the embedded lab end to end (no VM). A sweep of domains/quick.yaml until decided (or 150 s),
# the results table, a plot, the advice, and an NDR/PDR search. Results land in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
LABCTL=.venv/bin/labctl
mkdir -p out
DB=out/demo.db
rm -f "$DB" "$DB-wal" "$DB-shm"

echo "== labctl doctor"
$LABCTL doctor
echo
echo "== labctl validate domains/quick.yaml"
$LABCTL validate domains/quick.yaml
echo
echo "== labctl sweep domains/quick.yaml --until decided --budget 150s --steadiness 5 (embedded lab: DPDK vswitch <-> virtio_user guest; repeats added only where a comparison is undecided)"
$LABCTL sweep domains/quick.yaml --db "$DB" --until decided --budget 150s --steadiness 5
echo
echo "== labctl report"
$LABCTL report --db "$DB"
echo
echo "== labctl plot"
$LABCTL plot --db "$DB" --by 'guest.nics.*.rx_queue_size' --out out/demo.png
echo
echo "== labctl advise"
$LABCTL advise --db "$DB"
echo
echo "== labctl ndr domains/vnf.yaml (NDR and PDR with MLRsearch on the paced generator, a forwarder that saturates; about half a minute)"
$LABCTL ndr domains/vnf.yaml --db "$DB" --final-trial 1 --precision 0.01
