"""Offered loads as a user writes them: ``max``, ``2.5Mpps``, ``750kpps``, ``120000pps``, ``40%``.

A rate is the load of all sending ports together, in packets per second, as the record's ``mpps`` is
what all ports received; the generator paces each port at its share (MLRsearch's loads are per port,
labgen's too). A percentage is of the measured maximum: the rate the lab forwarded at the largest
load the generator can offer (an unpaced trial), so ``40%`` is a load the device under test sustains
for that fraction of its capacity, which is what latency at a stated load means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RATE = re.compile(r"^\s*(?:(max)|(\d+(?:\.\d+)?)\s*(mpps|kpps|pps|%))\s*$", re.IGNORECASE)
_UNIT = {"mpps": 1e6, "kpps": 1e3, "pps": 1.0}
FORMS = "max, a rate such as 2.5Mpps, 750kpps or 120000pps, or a share of the maximum such as 40%"


@dataclass(frozen=True)
class Rate:
    kind: str  # max | pps | pct
    value: float = 0.0  # packets per second (all ports) or per cent of the maximum

    def __str__(self) -> str:
        if self.kind == "max":
            return "max"
        if self.kind == "pct":
            return f"{self.value:g}%"
        return f"{self.value / 1e6:g}Mpps"


def parse_rate(text: str) -> Rate:
    """``text`` as a Rate; ValueError with the allowed forms."""
    match = _RATE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a rate (allowed: {FORMS})")
    if match.group(1):
        return Rate("max")
    number, unit = float(match.group(2)), match.group(3).lower()
    if unit == "%":
        if not 0 < number <= 100:
            raise ValueError(f"{text!r}: a share of the maximum is 0..100% (allowed: {FORMS})")
        return Rate("pct", number)
    if number <= 0:
        raise ValueError(f"{text!r}: a rate above zero (allowed: {FORMS})")
    return Rate("pps", number * _UNIT[unit])
