"""Does a trial reached by hot-swapping the guest's NICs measure what a trial reached by a boot measures, and
what does each cost? One guest lab, the same configurations (a NIC knob's two values, alternating so every
trial changes the NICs) reached either way, interleaved in blocks: block 0 reaches A B A B by boot, swap, swap,
boot; block 1 by swap, boot, boot, swap; and so on, so each configuration is reached both ways in every block
and the host's slow swings fall on both designs alike. A trial "by boot" powers the running guest off and boots
a fresh one with the trial's NICs (``swap: boot``, inside the trial: its wall time holds the power-off and the
boot); "by swap" swaps the running guest's NICs (:mod:`labctl.lab.libvirt.hotplug`). The first trial boots the
lab and is not counted.

Prints one JSON document::

    {"guest": "appliance" | "image", "knob": ..., "values": [...], "blocks": N, "metric": "mpps",
     "ratio": {"swap_over_boot": geometric mean of the within-block pairs' rate ratios, "ci95": [lo, hi],
               "pairs": n, "contains_1": bool, "log_sd": ...},
     "negotiated": {"boot": {value: {"rx_ring": [...], "tx_ring": [...], "queues": [...]}}, "hotplug": {...},
                    "same": bool},
     "wall_per_trial_s": {"boot": {"median": ..., "mean": ...}, "hotplug": {...}, "swap_over_boot": ...},
     "reach_s": {"boot": {"median": ...}, "hotplug": {...}},
     "trials": [{"block", "position", "value", "design", "reached", "mpps", "wall_s", "steps_s", "status"}, ...],
     "host": ...}

``steps_s`` holds the trial's own timings (the swap's detach, host side, attach and guest steps; the boot's;
the forwarder's start; the traffic), so where a design's wall time goes can be read.

The ratio's interval is Student's t on the log ratios of the pairs (a swap-reached and a boot-reached trial of
the same value in the same block), as ``labctl sweep --until decided`` judges its within-block pairs
(:mod:`labctl.analysis.sequential`). Targets (issue 40): the interval contains 1, and on the appliance guest
the swapped design's wall time per trial is at most a third of the booted one's.

    python benchmarks/swap.py [--guest appliance|image] [--blocks 3] [--knob guest.nics.*.rx_queue_size]
                              [--values 256,1024] [--duration 2] [--warmup 1] [--name bench-swap]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labctl import signals  # noqa: E402
from labctl.measure.labs import LabSession, check_measurable  # noqa: E402
from labctl.measure.trial import run_trial  # noqa: E402
from labctl.profile.load import load_profile  # noqa: E402

#: each block's designs, by position (configurations alternate A B A B in every block)
DESIGNS = (("boot", "hotplug", "hotplug", "boot"), ("hotplug", "boot", "boot", "hotplug"))


def profile_text(guest: str, name: str, duration: float, warmup: float) -> str:
    """The benchmark's lab: the appliance guest of the integration tests, or the user's image (``labctl image
    guest``, built or found in its cache) with its own testpmd, both on two vhost-user NICs fed by labgen."""
    common = (f"name: {name}\nbackend: libvirt\nuri: qemu:///system\n"
              f"workload: {{duration_s: {duration:g}, warmup_s: {warmup:g}, rxd: 256, txd: 256"
              + (", forwarder: testpmd}\n" if guest == "image" else "}\n"))
    nics = ("  nics:\n    - {backend: vhostuser, queues: 1, rx_queue_size: 256, tx_queue_size: 256}\n"
            "    - {backend: vhostuser, queues: 1, rx_queue_size: 256, tx_queue_size: 256}\n")
    if guest == "appliance":
        return common + ("guest:\n  vcpus: 1\n  memory_mib: 1024\n" + nics
                         + '  pinning: {vcpus: {0: "1"}, emulator: "1", vhost: "0"}\n')
    from labctl.lab.libvirt.guestimage import build_guest_image

    info = build_guest_image()
    boot = ""
    if info.kernel:
        cmdline = info.cmdline or "root=/dev/vda rw console=ttyS0"
        boot = f"  boot:\n    kernel: {info.kernel}\n" + (f"    initrd: {info.initrd}\n" if info.initrd else "") + \
            f'    cmdline: "{cmdline}"\n'
    return common + (f"guest:\n  image: {info.path}\n{boot}  agent_timeout_s: 240\n  vcpus: 2\n  memory_mib: 1536\n"
                     + nics + '  pinning: {vhost: "0"}\n')


def t95(n: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, n - 1))


def ratio_interval(pairs: list[float]) -> dict[str, Any]:
    """Geometric mean of the pairs' ratios and its 95% t interval on the logs."""
    logs = [math.log(r) for r in pairs if r > 0]
    if len(logs) < 2:
        return {"swap_over_boot": None, "ci95": None, "pairs": len(logs), "contains_1": None}
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t95(len(logs)) * sd / math.sqrt(len(logs))
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    return {"swap_over_boot": round(math.exp(mean), 4), "ci95": [round(lo, 4), round(hi, 4)], "pairs": len(logs),
            "contains_1": lo <= 1.0 <= hi, "log_sd": round(sd, 4)}


def summary(values: list[float], digits: int = 2) -> dict[str, float | None]:
    if not values:
        return {"median": None, "mean": None, "n": 0}
    return {"median": round(statistics.median(values), digits), "mean": round(statistics.fmean(values), digits),
            "n": len(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guest", choices=("appliance", "image"), default="appliance")
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--knob", default="guest.nics.*.rx_queue_size")
    parser.add_argument("--values", default="256,1024")
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--name", default="bench-swap")
    args = parser.parse_args()
    values = [int(v) for v in args.values.split(",")]
    if len(values) != 2 or not 1 <= args.blocks <= 50:
        parser.error("--values: two values; --blocks: 1..50")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "swap.yaml"
        path.write_text(profile_text(args.guest, args.name, args.duration, args.warmup))
        loaded = {(v, design): load_profile(path, {args.knob: v, "swap": "hotplug" if design == "hotplug" else "boot"})
                  for v in values for design in ("boot", "hotplug")}
        check_measurable(loaded[(values[0], "boot")].profile)
        trials: list[dict[str, Any]] = []
        with signals.stoppable(), LabSession(args.name, loaded[(values[0], "boot")].profile.libvirt_uri) as labs:
            first = run_trial(loaded[(values[1], "boot")], session=labs)  # the lab's first boot: not counted
            if first.status != "ok":
                raise SystemExit(f"the first trial failed: {first.error}")
            for block in range(args.blocks):
                for position, design in enumerate(DESIGNS[block % 2]):
                    value = values[position % 2]  # every trial changes the NICs: A B A B, blocks too
                    # swap: boot powers the guest off and boots one with these NICs, inside the trial (its wall)
                    record = run_trial(loaded[(value, design)], repeat_index=block, session=labs)
                    reached = record.details.get("reached") or {}
                    trials.append({"block": block, "position": position, "value": value, "design": design,
                                   "reached": reached.get("how"), "reach_s": reached.get("s"),
                                   "note": reached.get("note"), "status": record.status, "error": record.error,
                                   "mpps": record.metrics.mpps if record.status == "ok" else None,
                                   "wall_s": round(record.details.get("timings", {}).get("trial_s", 0.0), 2),
                                   "steps_s": {k: round(v, 2) for k, v in record.details.get("timings", {}).items()
                                               if isinstance(v, (int, float))},
                                   "nics": [n.get("negotiated") for n in record.details.get("nics", [])],
                                   "host": record.env.host, "accel": record.env.accel})
            info = labs.info()
    print(json.dumps(report(args, values, trials, info), indent=2))


def report(args: argparse.Namespace, values: list[int], trials: list[dict[str, Any]], info: dict[str, Any]) -> dict:
    ok = [t for t in trials if t["status"] == "ok" and t["mpps"]]
    by = {(t["block"], t["value"], t["design"]): t for t in ok}
    pairs = [by[(b, v, "hotplug")]["mpps"] / by[(b, v, "boot")]["mpps"] for b in range(args.blocks) for v in values
             if (b, v, "hotplug") in by and (b, v, "boot") in by]
    negotiated: dict[str, Any] = {}
    for design in ("boot", "hotplug"):
        negotiated[design] = {}
        for v in values:
            nics = [n for t in ok if t["design"] == design and t["value"] == v for n in t["nics"] if n]
            negotiated[design][str(v)] = {key: sorted({n.get(key) for n in nics}) for key in ("rx_ring", "tx_ring",
                                                                                                "queues")}
    negotiated["same"] = negotiated["boot"] == negotiated["hotplug"]
    wall = {d: summary([t["wall_s"] for t in trials if t["design"] == d and t["status"] == "ok"])
            for d in ("boot", "hotplug")}
    if wall["boot"]["median"] and wall["hotplug"]["median"]:
        wall["swap_over_boot"] = round(wall["hotplug"]["median"] / wall["boot"]["median"], 3)
    reach = {d: summary([t["reach_s"] for t in trials if t["design"] == d and t["reach_s"] is not None])
             for d in ("boot", "hotplug")}
    mismatched = [t for t in trials if t["reached"] != t["design"]]
    return {"guest": args.guest, "knob": args.knob, "values": values, "blocks": args.blocks, "metric": "mpps",
            "duration_s": args.duration, "warmup_s": args.warmup, "ratio": ratio_interval(pairs),
            "negotiated": negotiated, "wall_per_trial_s": wall, "reach_s": reach,
            "rates": {d: {str(v): summary([t["mpps"] for t in ok if t["design"] == d and t["value"] == v], 3)
                          for v in values} for d in ("boot", "hotplug")},
            "reached_otherwise": [{k: t[k] for k in ("block", "position", "design", "reached", "note")}
                                  for t in mismatched],
            "failed": [{k: t[k] for k in ("block", "position", "design", "error")} for t in trials
                       if t["status"] != "ok"],
            "session": info, "host": trials[0]["host"] if trials else None,
            "accel": trials[0]["accel"] if trials else None, "trials": trials}


if __name__ == "__main__":
    main()
