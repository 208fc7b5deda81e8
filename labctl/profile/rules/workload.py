"""The forwarding workload: bursts, descriptors, frame sizes, durations, noisy mode, the rate and labgen's pacing."""

from __future__ import annotations

from typing import Iterator

from labctl import platform
from labctl.errors import Problem
from labctl.profile.rates import FORMS, parse_rate
from labctl.profile.rules.registry import err, out_of_range, rule, warn
from labctl.profile.schema import Profile


@rule("workload", "testpmd bursts are 1..512 packets (MAX_PKT_BURST); descriptor counts are powers of two "
      "the PMDs accept; frames are 64..1518 bytes without jumbo support. Mode noisy emulates a VNF's work per "
      "packet (random reads/writes in a table of lkup_memory_mib MiB per port, an optional software TX buffer): "
      "its table comes from the guest's DPDK heap, so it is bounded.",
      "DPDK app/test-pmd/testpmd.h; DPDK testpmd user guide, noisy forwarding mode (noisy_vnf.c)")
def _workload(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    yield from out_of_range("workload.burst", w.burst, 1, platform.MAX_BURST)
    yield from out_of_range("workload.packet_size", w.packet_size, 64, 1518, " bytes")
    for field in ("rxd", "txd"):
        value = getattr(w, field)
        if value < 64 or value > 4096 or value & (value - 1):
            yield err(f"workload.{field}", f"{value} is not allowed (allowed: powers of two 64..4096)")
    yield from out_of_range("workload.duration_s", w.duration_s, 1, 3600, " s")
    yield from out_of_range("workload.warmup_s", w.warmup_s, 0, 600, " s")
    if w.burst > w.rxd:
        yield warn("workload.burst", f"burst {w.burst} is larger than rxd {w.rxd}: a receive never fills a burst")
    n = w.noisy
    for field in ("tx_sw_bufsz", "tx_sw_buf_flushtime", "lkup_memory_mib", "lkup_num_reads",
                  "lkup_num_writes", "lkup_num_reads_writes"):
        value = getattr(n, field)
        if not 0 <= value <= 1_000_000:
            yield err(f"workload.noisy.{field}", f"{value} is out of range (allowed: 0..1000000)")
    if n.lkup_memory_mib > 4096:
        yield err("workload.noisy.lkup_memory_mib", f"{n.lkup_memory_mib} MiB is out of range (allowed: 0..4096)")
    if w.mode != "noisy" and n != type(n)():
        yield warn("workload.noisy", f"noisy settings have no effect in mode {w.mode} (they apply to mode noisy)")


@rule("rate", "A paced load needs the paced generator: testpmd 22.11 cannot pace on vhost or virtio ports "
      "(no queue rate limit: ENOTSUP), so flowgen only sends flat out; labgen paces on the TSC.",
      "DPDK 22.11 testpmd (set txtimes, queue rate limit); native/labgen")
def _rate(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    try:
        rate = parse_rate(w.rate)
    except ValueError as exc:
        yield err("workload.rate", str(exc))
        return
    if rate.kind != "max" and w.generator != "labgen":
        yield err("workload.rate", f"{w.rate}: generator {w.generator} cannot pace (allowed: max, or generator labgen)")
    if rate.kind == "pps" and rate.value > 200e6:
        yield err("workload.rate", f"{w.rate}: above 200 Mpps (allowed: {FORMS})")


@rule("pacing", "labgen's sending CPU on a shared host stops for 0.1-10 ms, tens of times a second (measured on "
      "these 2-vCPU VMs). Catching up on an absolute schedule sends rate x pause frames back to back: a burst the "
      "asked-for traffic does not contain, which near the no-loss rate overflows the receiving ring, so the NDR "
      "measured is the generator's host's. shift (the default) moves the schedule by such a pause instead and "
      "reports it (shifts, paused_us); absolute is siitperf's schedule. Only labgen paces, so the knob is labgen's.",
      "native/labgen/src/worker.c shift_schedule; siitperf throughput.cc (absolute schedule); README 'Paced "
      "load, NDR and PDR' (workload.pacing: an interleaved sweep of both on domains/vnf.yaml)")
def _pacing(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    if w.pacing != "shift" and (w.kind != "forward" or w.generator != "labgen"):
        what = f"generator {w.generator}" if w.kind == "forward" else f"workload kind {w.kind}"
        yield warn("workload.pacing", f"{w.pacing}: has no effect with {what} (it applies to generator labgen)")
