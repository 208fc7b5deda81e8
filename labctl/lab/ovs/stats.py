"""OVS-DPDK statistics as plain dicts for a trial record.

Parses ``ovs-appctl dpif-netdev/pmd-stats-show`` and ``dpif-netdev/pmd-rxq-show`` text (OVS 3.1) and
``ovs-vsctl --format=json list Interface``. The shapes parsed are those of the captured outputs in
tests/fixtures/ovs/.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PMD_HEADER = re.compile(r"^pmd thread numa_id (\d+) core_id (\d+):$")
_STAT = re.compile(r"^\s+([a-z. ]+?):\s+([-\d.]+)(?:\s+\(([\d.]+)%\))?")
_RXQ = re.compile(r"^\s+port:\s+(\S+)\s+queue-id:\s+(\d+)\s+\((enabled|disabled)\)\s+pmd usage:\s*(NOT AVAIL|\d+ %)")
_WINDOW = re.compile(r"^Displaying last (\d+) seconds pmd usage %")


def _key(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def _percent(text: str) -> int | None:
    text = text.strip()
    return None if text == "NOT AVAIL" else int(text.rstrip(" %"))


def parse_pmd_stats(text: str) -> dict[str, Any]:
    """``{"pmds": {"<core_id>": {...}}, "main": {...}}``; each thread's counters by OVS's own labels in
    snake case (``packets_received``, ``idle_cycles`` with ``idle_cycles_pct``, ``processing_cycles``,
    ``avg_processing_cycles_per_packet`` ...). OVS prints the per-packet averages only when the thread
    received packets: they are None otherwise. ``idle_share`` is idle / (idle + processing) cycles."""
    pmds: dict[str, dict[str, Any]] = {}
    main: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        header = _PMD_HEADER.match(line)
        if header:
            current = {"numa_id": int(header.group(1)), "core_id": int(header.group(2))}
            pmds[header.group(2)] = current
            continue
        if line.startswith("main thread:"):
            current = main
            continue
        stat = _STAT.match(line)
        if stat and current is not None:
            key = _key(stat.group(1))
            current[key] = _number(stat.group(2))
            if stat.group(3) is not None:
                current[f"{key}_pct"] = float(stat.group(3))
    for thread in [*pmds.values(), main]:
        for key in ("avg_cycles_per_packet", "avg_processing_cycles_per_packet"):
            thread.setdefault(key, None)
        if "idle_cycles" in thread:
            total = thread["idle_cycles"] + thread.get("processing_cycles", 0)
            thread["idle_share"] = thread["idle_cycles"] / total if total else None
    return {"pmds": pmds, "main": main}


def parse_pmd_rxq(text: str) -> dict[str, Any]:
    """``{"window_s": 60, "pmds": {"<core_id>": {"numa_id", "isolated", "overhead_pct", "rxqs":
    [{"port", "queue", "enabled", "usage_pct"}]}}}``; a usage OVS shows as NOT AVAIL (no history yet)
    is None."""
    window = None
    pmds: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if (match := _WINDOW.match(line)) is not None:
            window = int(match.group(1))
        elif (match := _PMD_HEADER.match(line)) is not None:
            current = {"numa_id": int(match.group(1)), "isolated": None, "overhead_pct": None, "rxqs": []}
            pmds[match.group(2)] = current
        elif current is None:
            continue
        elif (match := _RXQ.match(line)) is not None:
            current["rxqs"].append({"port": match.group(1), "queue": int(match.group(2)),
                                    "enabled": match.group(3) == "enabled", "usage_pct": _percent(match.group(4))})
        elif line.strip().startswith("isolated :"):
            current["isolated"] = line.split(":", 1)[1].strip() == "true"
        elif line.strip().startswith("overhead:"):
            current["overhead_pct"] = _percent(line.split(":", 1)[1])
    return {"window_s": window, "pmds": pmds}


def merge_pmd(stats: dict[str, Any], rxq: dict[str, Any]) -> dict[str, Any]:
    """One dict per PMD: its counters and the rx queues it polls, with their usage."""
    pmds: dict[str, dict[str, Any]] = {}
    for core in sorted(set(stats["pmds"]) | set(rxq["pmds"]), key=int):
        placement = rxq["pmds"].get(core, {})
        pmds[core] = {**stats["pmds"].get(core, {}), "isolated": placement.get("isolated"),
                      "overhead_pct": placement.get("overhead_pct"), "rxqs": placement.get("rxqs", [])}
    return {"pmds": pmds, "main": stats["main"], "rxq_window_s": rxq["window_s"]}


def _ovsdb_map(value: Any) -> dict[str, Any]:
    """An OVSDB map in ovs-vsctl's JSON: ["map", [[key, value], ...]]."""
    if isinstance(value, list) and len(value) == 2 and value[0] == "map":
        return {k: v for k, v in value[1]}
    return {}


def parse_interfaces(text: str) -> dict[str, dict[str, Any]]:
    """``ovs-vsctl --format=json --columns=name,statistics,status,link_state list Interface`` ->
    ``{name: {"statistics": {counter: int}, "status": {...}, "link_state": str}}``."""
    doc = json.loads(text)
    columns = doc["headings"]
    out: dict[str, dict[str, Any]] = {}
    for row in doc["data"]:
        values = dict(zip(columns, row))
        link = values.get("link_state")
        out[values["name"]] = {"statistics": _ovsdb_map(values.get("statistics")),
                               "status": _ovsdb_map(values.get("status")),
                               "link_state": link if isinstance(link, str) else None}
    return out


_PORT_HEADER = re.compile(r"^\s*port\s+(\S+):\s*(.*)$")
_COUNTER = re.compile(r"([A-Za-z0-9_]+)=(\d+)\b")
# OpenFlow's names for the basic counters -> the Interface table's names for the same counters
_BASIC = {"pkts": "packets", "bytes": "bytes", "drop": "dropped", "errs": "errors", "frame": "frame_err",
          "over": "over_err", "crc": "crc_err"}


def parse_dump_ports(text: str) -> dict[str, dict[str, int]]:
    """``ovs-ofctl --names -O OpenFlow14 dump-ports`` -> ``{port: {counter: int}}``, named as in the
    Interface table's statistics (``rx_packets``, ``tx_dropped``, ``rx_1_to_64_packets``) plus OVS's
    custom counters (``ovs_tx_failure_drops``, ``ovs_tx_retries``, per queue ``rx_q0_good_packets``).
    Counters the port does not have ('?') are left out."""
    ports: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    prefix = ""
    for line in text.splitlines():
        header = _PORT_HEADER.match(line)
        if header:
            current = ports.setdefault(header.group(1), {})
            line = header.group(2)
        if current is None:
            continue
        body = line.strip()
        if body.startswith(("rx ", "tx ")):
            prefix, body = body[:2], body[3:]
            basic = not body.startswith("rfc2819")
        elif body.startswith("CUSTOM Statistics"):
            prefix, basic = "", False
            continue
        elif body.startswith("duration="):
            continue
        else:
            basic = False
        for key, value in _COUNTER.findall(body):
            if key == "coll":
                current["collisions"] = int(value)
                continue
            name = _BASIC.get(key, key) if basic else key
            current[f"{prefix}_{name}" if prefix else name] = int(value)
    return ports


def counter_delta(after: dict[str, int], before: dict[str, int] | None) -> dict[str, int]:
    """Counters since ``before`` (a counter that is new, or went backwards after a reconnect, counts
    from zero)."""
    if not before:
        return dict(after)
    return {k: v - before.get(k, 0) if v >= before.get(k, 0) else v for k, v in after.items()}


def ovs_metrics(pmd: dict[str, Any]) -> dict[str, float]:
    """Headline figures of OVS's PMD statistics: processing cycles per packet (over every PMD's packets)
    and the idle share of the PMD cycles."""
    pmds = list(pmd.get("pmds", {}).values())
    packets = sum(p.get("packets_received", 0) or 0 for p in pmds)
    processing = sum(p.get("processing_cycles", 0) or 0 for p in pmds)
    idle = sum(p.get("idle_cycles", 0) or 0 for p in pmds)
    out = {}
    if packets:
        out["vswitch_cycles_per_packet"] = processing / packets
    if idle + processing:
        out["vswitch_idle_share"] = idle / (idle + processing)
    return out
