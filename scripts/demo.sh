#!/usr/bin/env bash
# The main job: the embedded lab end to end (no VM), ending in a decided answer. Seed 000's question on a
# VNF-like forwarder (domains/rings.yaml): do rx rings of 1024 lose less than 256 at the same paced load?
# Loss at that load, trials in blocks, compared within blocks, until decided (or the budget is spent); the
# burst size is swept beside it, a knob that should not matter there. Then the report, the advice, an
# NDR/PDR search, the HTML page, the advice applied to a domain XML, and what to do next. Results land in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
LABCTL=.venv/bin/labctl
mkdir -p out
DB=out/demo.db
rm -f "$DB" "$DB-wal" "$DB-shm"
# the paced load: above the 256-descriptor rings' no-loss rate and the 1024 ones' (the NDRs measured here: about
# 0.2 and 0.4 Mpps), below the forwarder's saturation (about 1.7 Mpps): 256 drops at every pause of the guest's
# vCPU and 1024 rides most of them out (probed here at 0.5 Mpps: 256 lost 0.54% and 0.71%, 1024 0.19% and 0.01%;
# at 0.6 Mpps the rings decided in 2 of 3 demos, at 0.7 the 1024 rings lost as much as 256: the forwarder's limit).
# Not yet a load for every host: on a quieter day 2 of 3 demos decided; when the probe read 6-8% spread, 0.5 Mpps
# left the rings open (256 lost 0.12%), 0.7 decided at the first look (256 0.34%, 1024 0.06%), and 0.76 and 0.94
# left them open again (1024 lost 0.2-0.3% too); a load of three quarters of the 256 rings' PDR (0.94 and
# 1.015 Mpps in two searches of 48-117 s) landed at 0.76. One run each: a load that follows the host is open work.
RATE=${DEMO_RATE:-0.5Mpps}
# a change of a tenth of a percentage point of loss counts (the PDR's limit is 0.5%; rings of 256 lost 0.7-1.8% here)
THRESHOLD=${DEMO_THRESHOLD:-0.1}
BUDGET=${DEMO_BUDGET:-170s}

echo "== labctl doctor"
$LABCTL doctor
echo
echo "== labctl validate domains/rings.yaml"
$LABCTL validate domains/rings.yaml
echo
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
echo "== labctl ndr domains/vnf.yaml (NDR and PDR with MLRsearch on the paced generator, rings of 1024; about half a minute)"
$LABCTL ndr domains/vnf.yaml --db "$DB" --final-trial 1 --precision 0.01
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
