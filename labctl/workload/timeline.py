"""A paced trial over time: labgen's gaps and time bins read on labctl's clock.

labgen stamps every frame with its send time (TSC) and numbers it per stream, so what went missing is
placed in time (:mod:`labctl.dpdk.labgen`, ``/labgen/gaps``): a *gap* is a run of frames lost on the way
(a stream skipped their numbers) or refused by the driver (a full ring, or a peer that is gone), between the
send stamps of the frames that got through on either side. Every frame of a gap was sent strictly inside
that interval. One outage of the lab shows as a gap in every stream (64 flows a port by default) and in
every port's refusals, each interval a little wider than the outage by up to one frame interval of its
stream; their union is the outage: :func:`outages` merges overlapping intervals, so an outage's bounds lie
within ``flows`` frame intervals of its first and last missing frame (at 50 kpps a port and 64 flows,
1.3 ms).

Times are seconds from a reference on CLOCK_MONOTONIC (``time.monotonic_ns()``: a reconf's change time,
a soak's start), through the trial's :class:`~labctl.dpdk.labgen_replies.TrialClock`. Time bins count frames by
their send stamp too (:class:`~labctl.dpdk.labgen_replies.SeriesBin`): :func:`bin_range` turns a stretch of labctl's
clock into the bins it covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labctl.dpdk.labgen_replies import Gap, TrialClock


@dataclass(frozen=True)
class Outage:
    """A stretch of send time in which frames went missing: ``start_s``/``end_s`` from the reference,
    ``lost`` frames lost on the way and ``refused`` ones the driver did not take, ``streams`` the streams and
    ports it touched; ``head``: it began before the first frame of some stream got through (the window's
    start), ``tail``: it lasted to the end of sending."""

    start_s: float
    end_s: float
    lost: int
    refused: int
    streams: int
    head: bool = False
    tail: bool = False

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def missing(self) -> int:
        return self.lost + self.refused

    def to_dict(self) -> dict[str, Any]:
        return {"start_s": round(self.start_s, 6), "end_s": round(self.end_s, 6), "length_s": round(self.length_s, 6),
                "lost": self.lost, "refused": self.refused, "streams": self.streams, "head": self.head,
                "tail": self.tail}


def _span(gap: Gap, clock: TrialClock, ref_mono_ns: float, start_mono_ns: float) -> tuple[float, float]:
    before = start_mono_ns if gap.head or not gap.before_tsc else clock.mono_ns(gap.before_tsc)
    after = clock.mono_ns(gap.after_tsc)
    return (before - ref_mono_ns) / 1e9, (max(after, before) - ref_mono_ns) / 1e9


def outages(gaps: list[Gap], clock: TrialClock, ref_mono_ns: float, start_mono_ns: float) -> list[Outage]:
    """The gaps (both logs) as outages in time: each gap's interval from ``ref_mono_ns`` (a head gap's from
    ``start_mono_ns``, the measured window's start), overlapping intervals merged; gaps whose frames all
    arrived late after all (reordered) are left out. Sorted by start."""
    spans = sorted(((*_span(g, clock, ref_mono_ns, start_mono_ns), g) for g in gaps if g.missing > 0),
                   key=lambda s: (s[0], s[1]))
    merged: list[Outage] = []
    members: set[tuple[str, int]] = set()
    for start, end, gap in spans:
        lost = gap.missing if gap.log == "lost" else 0
        refused = gap.missing if gap.log == "refused" else 0
        if merged and start <= merged[-1].end_s:
            last = merged[-1]
            members.add((gap.log, gap.stream))
            merged[-1] = Outage(last.start_s, max(last.end_s, end), last.lost + lost, last.refused + refused,
                                len(members), last.head or gap.head, last.tail or gap.tail)
            continue
        members = {(gap.log, gap.stream)}
        merged.append(Outage(start, end, lost, refused, 1, gap.head, gap.tail))
    return merged


def bin_range(clock: TrialClock, bin_cycles: int, from_mono_ns: float, to_mono_ns: float) -> tuple[int, int]:
    """The time bins ``[first, end)`` whose start lies in ``[from, to)`` of labctl's clock (a bin is counted in
    the window its start falls in: a window's edges are exact to one bin)."""
    if bin_cycles <= 0:
        raise ValueError("a trial without time bins")

    def index(mono: float) -> int:
        return max(math.ceil((clock.tsc(mono) - clock.arm_tsc) / bin_cycles), 0)

    return index(from_mono_ns), max(index(to_mono_ns), index(from_mono_ns))


def bin_at(clock: TrialClock, bin_cycles: int, mono_ns: float) -> int:
    """The time bin holding a moment of labctl's clock."""
    if bin_cycles <= 0:
        raise ValueError("a trial without time bins")
    return max(math.floor((clock.tsc(mono_ns) - clock.arm_tsc) / bin_cycles), 0)


def bin_start_s(clock: TrialClock, bin_cycles: int, index: int, ref_mono_ns: float) -> float:
    """When bin ``index`` begins, in seconds from ``ref_mono_ns``."""
    return (clock.mono_ns(clock.arm_tsc + index * bin_cycles) - ref_mono_ns) / 1e9


def bin_width_s(clock: TrialClock, bin_cycles: int) -> float:
    return bin_cycles * clock.ns_per_cycle / 1e9
