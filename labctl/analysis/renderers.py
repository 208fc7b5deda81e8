"""Renderers of reports and trials: the table engineers paste into posts, markdown, CSV, JSON, a
terminal bar chart, and the one-trial summary of ``labctl run``."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from labctl.analysis.report import Report, Row
from labctl.errors import UserError
from labctl.profile.knobs import short_label
from labctl.results.lines import describe_nics
from labctl.results.record import TrialRecord

FORMATS = ("table", "md", "csv", "json")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


EXTRA_HEADERS = {"ndr_mpps": "ndr", "pdr_mpps": "pdr", "latency_p99_us": "p99 us"}


def _extras(report: Report) -> list[str]:
    """The extra figures some row of the report has (NDR, PDR, p99 latency), in a fixed order."""
    return [name for name in EXTRA_HEADERS if any(name in row.extras for row in report.rows)]


def _cells(report: Report, row: Row) -> list[str]:
    ci = "-" if row.ci[0] is None else f"[{row.ci[0]:.3f}, {row.ci[1]:.3f}]"
    loss = "-" if row.loss is None else f"{row.loss:.4%}"
    delta = "" if row.delta is None else f"{row.delta} {row.verdict}"
    extras = [_fmt(row.extras.get(name), 1 if name.endswith("_us") else 3) for name in _extras(report)]
    return [_fmt(row.knobs.get(k)) for k in _columns(report)] + [
        _fmt(row.median), ci, str(row.n), loss, *extras, delta, "; ".join(row.notes)]


def _columns(report: Report) -> list[str]:
    return [k for k in report.knobs if k != report.by] + ([report.by] if report.by else [])


def headers(report: Report) -> list[str]:
    return _columns(report) + [f"median {report.metric}", "95% CI", "n", "loss",
                               *(EXTRA_HEADERS[name] for name in _extras(report)), "vs baseline", "notes"]


def aligned(head: list[str], body: list[list[str]]) -> str:
    """Columns padded to their widest cell, a rule under the header."""
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in body]
    return "\n".join(lines)


def render_table(report: Report) -> str:
    lines = [aligned(headers(report), [_cells(report, row) for row in report.rows])]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    head = headers(report)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(report, row)) + " |" for row in report.rows]
    lines += ["", *(f"*{note}*" for note in report.notes)]
    return "\n".join(lines)


def render_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    extras = _extras(report)
    writer.writerow(_columns(report) + [f"median_{report.metric}", "ci_low", "ci_high", "n", "loss_ratio",
                                        *(f"median_{name}" for name in extras), "delta", "verdict", "notes",
                                        "trials"])
    for row in report.rows:
        writer.writerow([row.knobs.get(k) for k in _columns(report)] +
                        [row.median, row.ci[0], row.ci[1], row.n, row.loss, *(row.extras.get(n) for n in extras),
                         row.delta, row.verdict, "; ".join(row.notes), " ".join(map(str, row.trials))])
    return out.getvalue()


def render_terminal_plot(report: Report, width: int = 80) -> str:
    """A small bar chart of the medians (plotext), for the table format."""
    import plotext as plt

    labels = [short_label(row.knobs.items()) or "all" for row in report.rows]
    plt.clear_figure()
    plt.simple_bar(labels, [row.median for row in report.rows], width=width,
                   title=f"median {report.metric}")
    return plt.build()


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: not a report format (allowed: {', '.join(FORMATS)})")


VIEW_FORMATS = ("table", "json")  # how a comparison or a trend is shown


def check_view_format(fmt: str, what: str = "a comparison") -> None:
    if fmt not in VIEW_FORMATS:
        raise UserError(f"--format {fmt}: {what} is shown as table or json (allowed: {', '.join(VIEW_FORMATS)})")


def text_or_json(result: Any, fmt: str, what: str, text: Any) -> str:
    """``text(result)`` for ``table``, the result's ``to_dict()`` as JSON for ``json``."""
    check_view_format(fmt, what)
    return text(result) if fmt == "table" else json.dumps(result.to_dict(), indent=2, default=str)


def render(report: Report, fmt: str) -> str:
    check_format(fmt)
    if fmt == "table":
        return render_table(report)
    if fmt == "md":
        return render_markdown(report)
    if fmt == "csv":
        return render_csv(report)
    return json.dumps(report.to_dict(), indent=2, default=str)


def _tcp_summary(record: TrialRecord) -> list[str]:
    """The tcp kinds' lines: rate, service demand, CPU per side and QEMU thread, the guest's queues."""
    m, tcp = record.metrics, record.details.get("tcp") or {}
    if m.bandwidth_gbps is None and m.transactions_per_s is None:
        return []
    sessions = f"{m.sessions_ok}/{tcp.get('sessions', '?')} sessions {tcp.get('direction', '')}"
    if m.bandwidth_gbps is not None:
        lines = [f"bandwidth: {m.bandwidth_gbps:.3f} Gbit/s ({sessions}, retransmits {m.retransmits}, "
                 f"window {m.window_s:.1f} s)",
                 f"service demand: host {_fmt(m.service_demand_host_us_per_kb)} us/KB, "
                 f"guest {_fmt(m.service_demand_guest_us_per_kb)} us/KB"]
    else:
        lines = [f"transactions: {m.transactions_per_s:.0f}/s ({sessions}, latency {_fmt(m.rr_latency_us, 1)} us, "
                 f"window {m.window_s:.1f} s)",
                 f"service demand: host {_fmt(m.service_demand_host_us_per_tx, 1)} us/tx, "
                 f"guest {_fmt(m.service_demand_guest_us_per_tx, 1)} us/tx"]
    lines.append(f"cpu:       host {_fmt(m.host_cpu_cores, 2)} of {record.details.get('cpu_window', {}).get('host_cpus', '?')} "
                 f"CPUs, guest {_fmt(m.guest_cpu_cores, 2)} vCPUs; "
                 + ", ".join(f"{k} {v:.0f}%" for k, v in m.cpu.items() if v >= 0.5))
    queues = ", ".join(f"{q} {v.get('packets', 0)} pkts {v.get('interrupts', 0)} irqs"
                       for q, v in (record.details.get("per_queue") or {}).items())
    lines.append(f"queues:    {m.guest_queues_enabled} enabled in the guest (asked "
                 f"{tcp.get('guest_queues_requested') or 'driver default'}): {queues}")
    return lines


def trial_summary(record: TrialRecord) -> str:
    m = record.metrics
    lines = []
    if record.status != "ok":
        lines.append(f"trial {record.status}: {record.error}")
    if m.mpps is not None:
        achieved = f", achieved {m.achieved_mpps:.3f}" if m.achieved_mpps is not None else ""
        lines.append(f"rate:      {m.mpps:.3f} Mpps, {m.gbps:.3f} Gbit/s (offered {m.offered_mpps:.3f}{achieved} Mpps, "
                     f"window {m.window_s:.1f} s)")
        if m.valid is not None:
            labgen = record.details.get("labgen", {})
            shifted = (f"; {labgen['shifts']} pauses of its CPU ({labgen.get('paused_us', 0) / 1000:.1f} ms) shifted "
                       "it (workload.pacing shift)") if labgen.get("shifts") else ""
            lines.append("paced:     " + ("valid: the generator kept its schedule" if m.valid else
                                          f"INVALID: {labgen.get('reason', 'the generator fell behind')}") + shifted)
        if m.mpps_0to1 is not None:
            lines.append(f"per dir:   0->1 {m.mpps_0to1:.3f} Mpps, 1->0 {m.mpps_1to0:.3f} Mpps")
        if m.loss_ratio is not None:
            lines.append(f"loss:      {m.loss_ratio:.4%} (drops: " +
                         ", ".join(f"{k} {v}" for k, v in m.drops.items() if v) + ")")
        if m.lost is not None:
            lines.append(f"sequence:  {m.lost} lost in flight (sent, never back), {m.reordered} reordered, "
                         f"{m.duplicate} duplicate")
        if m.latency_p50_us is not None:
            lines.append(f"latency:   p50 {m.latency_p50_us:.1f} us, p90 {m.latency_p90_us:.1f}, p99 "
                         f"{m.latency_p99_us:.1f}, p99.9 {m.latency_p999_us:.1f}, max {m.latency_max_us:.1f} us")
        if m.queue_shares:
            lines.append("queues:    " + ", ".join(f"{k} {v:.0%}" for k, v in sorted(m.queue_shares.items())))
        if m.cpu:
            lines.append("cpu:       " + ", ".join(f"{k} {v:.0f}%" for k, v in sorted(m.cpu.items())))
        if m.cycles_per_packet:
            lines.append(f"cycles/pkt: {m.cycles_per_packet:.0f} (guest forwarding cores)")
        if m.vswitch_cycles_per_packet is not None or m.vswitch_idle_share is not None:
            pmds = record.details.get("ovs", {}).get("pmd", {}).get("pmds", {})
            queues = "; ".join(f"PMD {core}: " + ", ".join(f"{q['port']}/{q['queue']}" for q in pmd.get("rxqs", []))
                               for core, pmd in pmds.items())
            cpp = f"{m.vswitch_cycles_per_packet:.0f}" if m.vswitch_cycles_per_packet is not None else "-"
            idle = f"{m.vswitch_idle_share:.0%}" if m.vswitch_idle_share is not None else "-"
            lines.append(f"ovs:       {cpp} processing cycles/pkt, PMD idle {idle} ({queues})")
    lines.extend(_tcp_summary(record))
    nics = describe_nics(record.details.get("nics", []))
    if nics:
        lines.append("nics:      asked -> what the guest's driver negotiated")
        lines += [f"           {line}" for line in nics]
    if record.details.get("host_side"):
        lines.append(f"host side: {record.details['host_side']}")
    boot = record.details.get("boot")
    if boot:
        lines.append(f"guest:     {'booted for this trial in ' + format(boot['boot_s'], '.1f') + ' s' if boot['booted'] else 'already up (the forwarder restarted)'}")
    env = record.env
    if env.lab:
        lines.append(f"env:       {env.lab} lab, accel {env.accel}, DPDK {env.dpdk}, pins {env.pins}, "
                     f"hugepages {env.hugepages}" + (", SHARED CORES" if env.shared_cores else "")
                     + (f", virtio backend {env.virtio_backend}" if env.virtio_backend else ""))
    for warning in record.warnings:
        lines.append(f"warning:   {warning}")
    return "\n".join(lines)
