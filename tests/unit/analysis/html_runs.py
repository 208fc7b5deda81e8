"""Stored runs the page tests render (unit and browser): an embedded sweep, an NDR/PDR run, a TCP run,
a run of two builds, a run the advisor refuses, an unsteady TCG two-band run and a run whose names hold
markup. Every run is planted (``tests/datasets.py``, ``tests/factories.py``): no lab runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labctl.host.steadiness import UNSTEADY_WARNING
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store
from tests import datasets, factories

HOSTILE = "<script>document.title='pwned'</script>"

BUILDS = {"base": {"forwarder": {"path": "/opt/dpdk-22.11/bin/dpdk-testpmd", "sha256": "a" * 64,
                                 "version": "DPDK 22.11.4"}},
          "patched": {"forwarder": {"path": "/opt/dpdk-fix/bin/dpdk-testpmd", "sha256": "b" * 64,
                                    "version": "DPDK 22.11.4-fix"}}}


def store_run(db: Path, name: str, records: list[TrialRecord], info: dict[str, Any] | None = None) -> int:
    """``records`` stored as one finished run named ``name`` (ids given by the store)."""
    with Store(db) as store:
        run = store.create_run(name, {}, [], host="lab1")
        for record in records:
            store.add_trial(record.model_copy(update={"id": None, "run_id": run}))
        if info:
            store.update_run_info(run, **info)
        store.finish_run(run, "finished")
    return run


def embedded_sweep(db: Path, repeats: int = 4) -> int:
    """queue_rate: 2 queue pairs forward 25% more than 1 (x rx_queue_size 256/1024)."""
    return store_run(db, "planted", datasets.queue_rate(repeats=repeats))


def ndr_run(db: Path) -> int:
    """Two ring sizes x two repeats of an NDR/PDR search: its measurements (loads and loss) beside each
    search's record (NDR, PDR, bounds, latency at 10/50/90% of PDR)."""
    env = Environment(host="lab1", accel="none", lab="embedded", dpdk="22.11.4", cores=2)
    records = []
    for ring, ndr in ((256, 2.0), (1024, 2.6)):
        config = {**datasets.queue_rate(repeats=1)[0].config, "guest.nics.0.rx_queue_size": ring,
                  "guest.nics.1.rx_queue_size": ring}
        for repeat in range(2):
            n = ndr * (1 + 0.02 * repeat)
            for role, load, loss in (("calibration", 4.0, 0.3), ("search", 3.5, 0.2), ("search", n * 1.1, 0.01),
                                     ("search", n * 1.03, 0.003), ("search", n, 0.0), ("search", n * 0.9, 0.0)):
                records.append(TrialRecord(config=config, env=env, repeat_index=repeat, details={"role": role},
                                           metrics=Metrics(mpps=load * (1 - loss), offered_mpps=load,
                                                           loss_ratio=loss)))
            pdr = n * 1.03
            latency = [{"load_pct": pct, "mpps": pdr * pct / 100, "p50_us": 20 + pct / 5, "p90_us": 30 + pct / 3,
                        "p99_us": 60 + pct, "p999_us": 90 + pct, "max_us": 200.0, "valid": True}
                       for pct in (10, 50, 90)]
            records.append(TrialRecord(config=config, env=env, repeat_index=repeat,
                                       details={"role": "ndr", "latency": latency, "pdr": {"loss_ratio": 0.005}},
                                       metrics=Metrics(ndr_mpps=n, ndr_lower_mpps=n, ndr_upper_mpps=n * 1.03,
                                                       pdr_mpps=pdr, pdr_lower_mpps=pdr, pdr_upper_mpps=n * 1.1,
                                                       latency_p50_us=30.0, latency_p99_us=110.0)))
    return store_run(db, "ndr-demo", records)


def tcp_run(db: Path) -> int:
    """tcp_stream: sessions 1/2 x guest queues 1/2, bandwidth and service demand."""
    medians = {(1, 1): (2.0, 1.1, 0.9), (2, 1): (2.4, 1.0, 0.9), (1, 2): (2.0, 1.1, 0.95), (2, 2): (3.1, 0.9, 0.8)}
    return store_run(db, "tcp-multiqueue", factories.tcp_records(medians))


def builds_run(db: Path) -> int:
    """queue_rate measured with two builds of the forwarder; ``patched`` forwards 20% more."""
    records = []
    for r in datasets.queue_rate(repeats=5):
        for build, scale in (("base", 1.0), ("patched", 1.2)):
            env = r.env.model_copy(update={"binaries": BUILDS[build]})
            metrics = r.metrics.model_copy(update={"mpps": r.metrics.mpps * scale})
            records.append(r.model_copy(update={"config": {**r.config, "build": build}, "env": env,
                                                "metrics": metrics}))
    return store_run(db, "patch-gate", records)


def refusals_run(db: Path) -> int:
    """few_repeats: 2 repeats per configuration, too few for the advisor to decide anything."""
    return store_run(db, "few-repeats", datasets.few_repeats())


def warned_run(db: Path) -> int:
    """Two bands, under TCG, on a host measured unsteady before the sweep (every trial warned)."""
    warning = (f"{UNSTEADY_WARNING}: integer-loop rate spread 140%, memory copy 60% over 5 s "
               "(labctl doctor --steadiness)")
    tcg = Environment(host="lab1", accel="tcg", lab="libvirt", qemu="7.2.0", libvirt="9.0.0", cores=2)
    records = [r.model_copy(update={"env": tcg, "warnings": [warning]}) for r in datasets.two_band()]
    probe = {"verdict": "unsteady", "description": "unsteady: integer-loop rate p10-p90 spread 140%, memory copy 60% "
             "over 5 s on CPUs 0,1", "seconds": 5, "interval_s": 0.25, "cpus": [0, 1], "cpu_spread": 1.4,
             "copy_spread": 0.6}
    return store_run(db, "unsteady-tcg", records, info={"steadiness": probe})


def hostile_run(db: Path) -> int:
    """A run named with markup, its trials carrying markup in a warning and an error."""
    records = datasets.queue_rate(repeats=3)
    records[0] = records[0].model_copy(update={"warnings": [f"note {HOSTILE}"]})
    records.append(records[1].model_copy(update={"status": "failed", "error": f"boom {HOSTILE}",
                                                  "metrics": Metrics()}))
    return store_run(db, HOSTILE, records)
