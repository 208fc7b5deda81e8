"""Builders of test data shared by the unit tests: configurations, trial records, run plans."""

from __future__ import annotations

from labctl.results.record import Environment, Metrics, TrialRecord

ENV = Environment(host="lab1", cores=2, kernel="6.1.0", accel="tcg", lab="embedded", pins={"vswitch": "1"})


def config(rx: int = 256, queues: int = 1) -> dict:
    return {
        "name": "demo",
        "guest.nics.0.rx_queue_size": rx,
        "guest.nics.0.queues": queues,
        "guest.hugepages": False,
        "workload.duration_s": 10.0,
        "uri": None,
    }


def record(run_id: int, rx: int = 256, mpps: float = 9.8, **kw) -> TrialRecord:
    fields = {
        "run_id": run_id,
        "config": config(rx),
        "env": ENV,
        "metrics": Metrics(
            mpps=mpps,
            loss_ratio=0.0002,
            tx_dropped=1200,
            drops={"ring_full": 1200},
            queue_shares={"guest.port0.rxq0": 1.0},
            cpu={"vswitch_pmd": 99.5},
        ),
        "warnings": ["shared cores", "two-band result"],
        "details": {"per_queue": [{"q": 0, "ipackets": 123}]},
        "repeat_index": 1,
        "started_at": 1700000000.25,
        "finished_at": 1700000010.5,
    }
    fields.update(kw)
    return TrialRecord(**fields)


def plan(n: int) -> list[dict]:
    return [{"seq": i, "config": config(256 * 2 ** (i % 3)), "repeat_index": i // 3} for i in range(n)]


def run_records(run_id: int, values: dict[int, list[float]], env: Environment = ENV, metric: str = "mpps",
                start: float = 1700000000.0, first_id: int = 1) -> list[TrialRecord]:
    """One run's trials: per rx ring size (one configuration each) a trial per value of ``metric``, with
    ids from ``first_id`` and start times from ``start``."""
    out = []
    for rx, rates in values.items():
        for i, value in enumerate(rates):
            out.append(TrialRecord(id=first_id + len(out), run_id=run_id, config=config(rx), env=env,
                                   metrics=Metrics(**{metric: value}), repeat_index=i,
                                   started_at=start + 10.0 * len(out)))
    return out


def noisy(seed: int, medians: dict[int, float], cv: float, n: int) -> dict[int, list[float]]:
    """Per configuration ``n`` values drawn around its median with a coefficient of variation ``cv``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return {rx: [float(v) for v in rng.normal(median, median * cv, n)] for rx, median in medians.items()}
