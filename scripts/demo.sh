#!/usr/bin/env bash
# The main job: the embedded lab end to end (no VM), ending in a decided answer. Seed 000's question on a
# VNF-like forwarder (domains/rings.yaml): do rx rings of 1024 lose less than 256 at the same paced load?
# First an NDR/PDR search of the 256 rings sets the load; then loss at that load, trials in blocks, compared
# within blocks, until decided (or the budget is spent); the burst size is swept beside it, a knob that should
# not matter there. Then the report, the advice, the HTML page, the advice applied to a domain XML, and what to
# do next. Results land in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
LABCTL=.venv/bin/labctl
mkdir -p out
DB=out/demo.db
rm -f "$DB" "$DB-wal" "$DB-shm"
# the paced load, set from this host's own loss curve: three quarters of the 256-descriptor rings' PDR (the
# highest load at which they lose at most 0.5%, found by MLRsearch first). There 256 drops at the guest vCPU's
# pauses and 1024 rides most of them out. A fixed load does not carry from host to host: at 0.5 Mpps the rings
# decided in 3 of 3 demos on a host whose steadiness probe read 75-150% spread (256 lost 0.31-0.50%, 1024
# 0.02-0.09%), and stayed open on the same VM when it read 6% (256 lost 0.12%); there 0.7 Mpps decided at the
# first look (256 0.34%, 1024 0.06%) with the rings' PDR at 0.94 Mpps, and at the PDR itself 1024 lost 0.2-0.3%
# too. DEMO_RATE=0.5Mpps skips the search.
RATE=${DEMO_RATE:-}
# a change of a tenth of a percentage point of loss counts (the PDR's limit is 0.5%; rings of 256 lost 0.7-1.8% here)
THRESHOLD=${DEMO_THRESHOLD:-0.1}
BUDGET=${DEMO_BUDGET:-170s}

echo "== labctl doctor"
$LABCTL doctor
echo
echo "== labctl validate domains/rings.yaml"
$LABCTL validate domains/rings.yaml
echo
if [[ -z "$RATE" ]]; then
  echo "== labctl ndr domains/rings.yaml: the 256-descriptor rings' NDR and PDR (MLRsearch on the paced generator; under a minute), for the sweep's load"
  LOADDB=out/demo-load.db
  rm -f "$LOADDB" "$LOADDB-wal" "$LOADDB-shm"
  $LABCTL ndr domains/rings.yaml --db "$LOADDB" --precision 0.01 --json > out/demo-load.json
  RATE=$(.venv/bin/python - out/demo-load.json <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ndr, pdr = doc["ndr"], doc["pdr"]
print(f"NDR {ndr['lower_mpps']:.3f} Mpps, PDR {pdr['lower_mpps']:.3f} Mpps (load lower bounds; {doc['trials']} trials in "
      f"{doc['wall_s']:.0f} s)", file=sys.stderr)
rate = 0.75 * (pdr["lower_mpps"] or 0)
print(f"{rate:.3f}Mpps" if rate > 0.05 else "0.5Mpps")
PY
)
  echo "the sweep's load: $RATE (three quarters of the PDR)"
  echo
fi

echo "== labctl sweep domains/rings.yaml --rate $RATE --until decided --verdict-metric loss_ratio --threshold $THRESHOLD --budget $BUDGET --steadiness 5"
echo "   (rx rings 256 vs 1024 x burst 32 vs 64 on the embedded lab: DPDK vswitch <-> virtio_user guest, labgen pacing;"
echo "    loss at $RATE judged within blocks; a change of $THRESHOLD percentage points of loss counts)"
$LABCTL sweep domains/rings.yaml --db "$DB" --rate "$RATE" --until decided --verdict-metric loss_ratio \
  --threshold "$THRESHOLD" --budget "$BUDGET" --steadiness 5
echo
echo "== labctl report"
$LABCTL report --db "$DB" --run 1 --metric loss_ratio
echo
echo "== labctl advise"
$LABCTL advise --db "$DB" --run 1
echo
echo "== labctl report --html out/demo.html (the rings run as one page to share)"
$LABCTL report --db "$DB" --run 1 --html out/demo.html
echo
echo "== labctl apply --xml: the advice into a libvirt domain (here the one labctl renders for domains/guest-vhostuser.yaml)"
$LABCTL render domains/guest-vhostuser.yaml > out/guest.xml
$LABCTL apply --xml out/guest.xml --run 1 --db "$DB" --out out/guest-tuned.xml \
  || echo "(the run recommended no change, so there is nothing to apply)"
echo
cat <<EOF
== next
  the page:          out/demo.html (open it in a browser; plots inline, no network)
  the TUI:           $LABCTL tui --db $DB        (r: results, a: advice)
  your own domain:   $LABCTL apply my-domain --run 1 --db $DB --dry-run   (then without --dry-run; --verify, --undo)
  your own guest:    docs, "Tune rings and queues on my guest" (make docs: build/docs/site/index.html)
EOF
