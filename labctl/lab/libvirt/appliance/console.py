"""The appliance's protocol with its ``/init`` (``labctl/lab/libvirt/appliance/files/init.sh``).

init.sh reads ``labctl.mode=verify|workload`` and the other ``labctl.*`` parameters from the kernel
command line (``kernel_cmdline`` writes them) and reports on the serial console with ``LABCTL-*`` lines
(``parse_console`` reads them into a ``ConsoleReport``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_PARAM_RE = re.compile(r"^[A-Za-z0-9_]+$")
# values never hold spaces, quotes or shell characters; "=" and "," carry testpmd arguments
_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/+=-]+$")


def kernel_cmdline(mode: str = "verify", console: str = "ttyS0", extra: Iterable[str] = (),
                   **params: object) -> str:
    """``console=ttyS0 labctl.mode=MODE labctl.K=V ...``; values may not hold spaces or quotes."""
    if mode not in ("verify", "workload", "serve", "shell"):
        raise ValueError(f"unknown appliance mode {mode!r}")
    words = [f"console={console}", f"labctl.mode={mode}"]
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = int(v)
        if not _PARAM_RE.match(k) or not _VALUE_RE.match(str(v)):
            raise ValueError(f"labctl.{k}={v!r} cannot go on a kernel command line")
        words.append(f"labctl.{k}={v}")
    words.extend(extra)
    return " ".join(words)


@dataclass
class ConsoleReport:
    """The LABCTL-* lines of one boot, parsed."""

    nics: list[dict] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    info: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    boot: dict | None = None
    done: bool = False

    @property
    def final_stats(self) -> dict | None:
        finals = [s for s in self.stats if s.get("final")]
        return finals[-1] if finals else None


def parse_console(text: str) -> ConsoleReport:
    """Parse the serial console (or channel) output of an appliance boot."""
    report = ConsoleReport()
    targets = {"LABCTL-NIC": report.nics, "LABCTL-STATS": report.stats, "LABCTL-INFO": report.info,
               "LABCTL-WARN": report.warnings, "LABCTL-ERROR": report.errors}
    for raw in text.splitlines():
        line = raw.strip("\r")
        idx = line.find("LABCTL-")
        if idx < 0:
            continue
        line = line[idx:]
        if line.startswith("LABCTL-DONE"):
            report.done = True
            continue
        tag, _, payload = line.partition(" ")
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        if tag == "LABCTL-BOOT":
            report.boot = data
        elif tag in targets:
            targets[tag].append(data)
    return report
