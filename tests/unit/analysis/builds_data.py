"""Planted trials of one run that sweeps a ``build`` knob with the frame size: builds alternating within
every repeat (base slow same base slow same ...), as a sweep orders them. ``slow`` is a planted
regression, ``same`` an A/A copy of ``base``. Shared by the within-run compare tests (analysis and CLI)."""

from __future__ import annotations

import math

import numpy as np

from labctl.results.record import Environment, Metrics, TrialRecord
from tests.factories import config

ENV = Environment(host="lab1", cpu_model="Planted CPU @ 2.0GHz", cores=2, kernel="6.1.0", accel="tcg",
                  lab="embedded", dpdk="22.11.4")
#: median Mpps per frame size of the base build
BASE = {64: 4.0, 256: 3.5}
#: each build's factor on the base build's medians
FACTORS = {"base": 1.0, "slow": 0.8, "same": 1.0}


def build_records(seed: int = 0, *, repeats: int = 6, cv: float = 0.03, factors: dict[str, float] | None = None,
                  sizes: dict[int, float] | None = None, metric: str = "mpps", env: Environment = ENV,
                  envs: dict[str, Environment] | None = None) -> list[TrialRecord]:
    """``repeats`` rounds of every (frame size, build), builds alternating inside each round, log-normal
    noise of coefficient of variation ``cv``; ``envs`` gives a build its own environment."""
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log(1.0 + cv * cv))
    factors = factors or FACTORS
    sizes = sizes or BASE
    out = []
    for repeat in range(repeats):
        for size, median in sizes.items():
            for build, factor in factors.items():
                value = float(median * factor * rng.lognormal(-sigma * sigma / 2, sigma))
                cfg = {**config(), "workload.packet_size": size, "build": build}
                tid = len(out) + 1
                out.append(TrialRecord(id=tid, run_id=1, config=cfg, env=(envs or {}).get(build, env),
                                       metrics=Metrics(**{metric: value}), repeat_index=repeat,
                                       started_at=1700000000.0 + 10.0 * tid))
    return out
