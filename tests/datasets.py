"""Planted synthetic trial sets: known answers for the advisor's and the search's tests and benchmarks.

Each data set is a list of :class:`labctl.results.record.TrialRecord` as ``labctl sweep`` would store them: the
flattened configuration of a real profile (every knob, defaults included) with one sweep setting
applied, an environment and realistic metrics (Mpps, offered rate, loss ratio, ring-full drop counters).
Trials are interleaved (repeat 0 of every configuration, then repeat 1, ...) and numbered from 1.

The planted effects are multiplicative on the median rate; the noise is log-normal with a coefficient
of variation of 3-5 % (what repeated runs of one configuration scatter by on a quiet host), and loss
ratios scatter log-normally around their planted medians. Everything is drawn from
``numpy.random.default_rng(seed)``: the same seed gives the same records.

Data sets (each ``name(seed=0) -> list[TrialRecord]``; :data:`DATASETS` maps names to them):

``ring_loss``       rx_queue_size 1024 cuts ring-full drops 20x (0.02 % -> 0.001 %) at the same rate;
                    burst has no effect.
``queue_rate``      2 queue pairs forward 25 % more than 1; rx_queue_size has no effect.
``split_pinning``   2 queue pairs forward 25 % more, but only with split pinning (vswitch PMD and vCPUs
                    on different CPUs); with shared pinning queues make no difference.
``pure_noise``      three knobs, no effect at all.
``two_band``        no effect, but every trial lands in one of two bands (about 9 and 16 Mpps), as
                    identical runs did on the 2-vCPU development host.
``tx_ring_on_tap``  tap backend with tx_queue_size 256 and 1024 recorded; the 1024 trials look faster
                    (mislabelled data: QEMU caps tap at 256), rx_queue_size 1024 is really +10 %.
``tcg_queue_rate``  ``queue_rate`` recorded under TCG on shared cores.
``few_repeats``     2 queue pairs +25 %, but only 2 repeats per configuration.
``search_grid``     54 configurations (queues x rx ring x burst x pinning), 4 repeats, mostly additive
                    effects plus a queues x pinning interaction: the search benchmark's grid.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from labctl.profile.knobs import crossed, flatten, with_knobs
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.profile.schema import Profile

#: A trial's planted truth: median Mpps and median loss ratio, and the share of the loss that is
#: ring-full drops into the guest (the rest is drops into the vswitch).
Truth = tuple[float, float, float]
Model = Callable[[dict[str, Any]], Truth]

WINDOW_S = 5.0
BASE_MPPS = 10.0

#: The profile every planted data set starts from: an embedded lab, 2 vCPUs, two vhost-user NICs,
#: split pinning (vswitch PMD on CPU 0, both vCPUs on CPU 1).
BASE_PROFILE: dict[str, Any] = {
    "name": "planted",
    "backend": "embedded",
    "guest": {
        "vcpus": 2,
        "memory_mib": 512,
        "nics": [
            {"backend": "vhostuser", "queues": 1, "rx_queue_size": 256, "tx_queue_size": 256},
            {"backend": "vhostuser", "queues": 1, "rx_queue_size": 256, "tx_queue_size": 256},
        ],
        "pinning": {"vcpus": {0: "1", 1: "1"}, "vhost": "0"},
    },
    "workload": {"mode": "io", "burst": 32, "packet_size": 64, "duration_s": 5.0, "warmup_s": 1.0},
}

#: Libvirt lab with two tap NICs (the tx-ring rule's data set).
TAP_PROFILE: dict[str, Any] = {
    **BASE_PROFILE,
    "backend": "libvirt",
    "guest": {
        **BASE_PROFILE["guest"],
        "nics": [
            {"backend": "tap", "queues": 1, "rx_queue_size": 256, "tx_queue_size": 256},
            {"backend": "tap", "queues": 1, "rx_queue_size": 256, "tx_queue_size": 256},
        ],
    },
}

EMBEDDED_ENV = Environment(host="planted", cpu_model="Planted CPU", cores=8, accel="none", lab="embedded",
                           shared_cores=False, hugepages=False)


def _profile_data(base: dict[str, Any]) -> dict[str, Any]:
    """Validated and completed (every default filled in), as a sweep would see it."""
    return Profile.model_validate(base).model_dump()


def synthesize(
    sweep: dict[str, list[Any]],
    model: Model,
    *,
    repeats: int = 4,
    cv: float = 0.04,
    loss_spread: float = 0.3,
    seed: int = 0,
    base: dict[str, Any] | None = None,
    env: Environment | None = None,
    bands: tuple[float, float] | None = None,
    validate: bool = True,
) -> list[TrialRecord]:
    """Trials of every configuration of ``sweep`` (``repeats`` each, interleaved), their medians from
    ``model(config)`` (config: the flattened knobs), log-normal noise of coefficient of variation ``cv``.

    ``bands=(low, high)``: each trial's rate is drawn from one of two bands instead (probability 1/2,
    the planted effect scaling both), as this host produced. ``validate=False`` keeps configurations the
    schema would refuse (mislabelled imports)."""
    rng = np.random.default_rng(seed)
    data = _profile_data(base or BASE_PROFILE)
    configs = []
    for knobs in crossed(sweep):
        applied = with_knobs(data, knobs)
        if validate:
            applied = Profile.model_validate(applied).model_dump()
        configs.append(flatten(applied))
    sigma = math.sqrt(math.log(1.0 + cv * cv))
    records: list[TrialRecord] = []
    trial_id = 0
    for repeat in range(repeats):
        for config in configs:
            mpps_median, loss_median, ring_share = model(config)
            if bands is not None:
                level = bands[1] if rng.random() < 0.5 else bands[0]
                mpps_median = mpps_median * level / BASE_MPPS
            mpps = float(mpps_median * rng.lognormal(-sigma * sigma / 2, sigma))
            loss = float(min(0.5, loss_median * rng.lognormal(0.0, loss_spread))) if loss_median > 0 else 0.0
            trial_id += 1
            records.append(_record(trial_id, config, repeat, mpps, loss, ring_share, env or EMBEDDED_ENV))
    return records


def _record(trial_id: int, config: dict[str, Any], repeat: int, mpps: float, loss: float, ring_share: float,
            env: Environment) -> TrialRecord:
    received = int(round(mpps * 1e6 * WINDOW_S))
    offered = int(round(received / (1.0 - loss)))
    lost = offered - received
    into_guest = int(round(lost * ring_share))
    into_vswitch = lost - into_guest
    packet_size = int(config.get("workload.packet_size", 64))
    metrics = Metrics(
        mpps=received / WINDOW_S / 1e6,
        gbps=received * packet_size * 8 / WINDOW_S / 1e9,
        offered_mpps=offered / WINDOW_S / 1e6,
        loss_ratio=lost / offered if offered else None,
        rx_packets=received,
        tx_packets=offered - into_guest,
        tx_dropped=into_guest,
        guest_tx_dropped=into_vswitch,
        drops={"guest_rx_ring_full": into_guest, "vswitch_rx_ring_full": into_vswitch, "guest_rx_nombuf": 0,
               "guest_imissed": 0, "unaccounted": 0},
        window_s=WINDOW_S,
    )
    return TrialRecord(id=trial_id, run_id=1, config=config, env=env, metrics=metrics, status="ok",
                       repeat_index=repeat, started_at=1_700_000_000.0 + 10 * trial_id,
                       finished_at=1_700_000_000.0 + 10 * trial_id + WINDOW_S)


def _nic(config: dict[str, Any], field: str) -> Any:
    return config["guest.nics.0." + field]


def _split(config: dict[str, Any]) -> bool:
    """True when the vswitch PMD CPU runs none of the vCPUs."""
    vhost = config.get("guest.pinning.vhost")
    vcpus = {v for k, v in config.items() if k.startswith("guest.pinning.vcpus.")}
    return vhost is not None and vhost not in vcpus


# --------------------------------------------------------------------------------------------------
# the data sets


def ring_loss(seed: int = 0) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        big = _nic(c, "rx_queue_size") == 1024
        return BASE_MPPS * (1.003 if big else 1.0), (1e-5 if big else 2e-4), 0.9

    return synthesize({"guest.nics.*.rx_queue_size": [256, 1024], "workload.burst": [32, 64]}, model,
                      repeats=4, cv=0.04, seed=seed)


def queue_rate(seed: int = 0, *, repeats: int = 4, env: Environment | None = None) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        return BASE_MPPS * (1.25 if _nic(c, "queues") == 2 else 1.0), 1e-4, 0.8

    return synthesize({"guest.nics.*.queues": [1, 2], "guest.nics.*.rx_queue_size": [256, 512, 1024]}, model,
                      repeats=repeats, cv=0.04, seed=seed, env=env)


def split_pinning(seed: int = 0) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        gain = 1.25 if (_nic(c, "queues") == 2 and _split(c)) else 1.0
        return BASE_MPPS * gain, 1e-4, 0.8

    return synthesize({"guest.nics.*.queues": [1, 2], "guest.pinning.vhost": ["0", "1"]}, model,
                      repeats=8, cv=0.04, seed=seed)


def pure_noise(seed: int = 0) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        return BASE_MPPS, 1e-4, 0.8

    return synthesize({"guest.nics.*.queues": [1, 2], "guest.nics.*.rx_queue_size": [256, 1024],
                       "workload.burst": [32, 64]}, model, repeats=4, cv=0.04, seed=seed)


def two_band(seed: int = 0) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        return BASE_MPPS * (1.05 if c["workload.burst"] == 64 else 1.0), 1e-4, 0.8

    return synthesize({"guest.nics.*.rx_queue_size": [256, 1024], "workload.burst": [32, 64]}, model,
                      repeats=5, cv=0.04, seed=seed, bands=(9.0, 16.0))


def tx_ring_on_tap(seed: int = 0) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        gain = 1.2 if _nic(c, "tx_queue_size") == 1024 else 1.0
        gain *= 1.1 if _nic(c, "rx_queue_size") == 1024 else 1.0
        return BASE_MPPS * gain, 1e-4, 0.8

    env = Environment(host="planted", accel="kvm", lab="libvirt", shared_cores=False)
    return synthesize({"guest.nics.*.tx_queue_size": [256, 1024], "guest.nics.*.rx_queue_size": [256, 1024]},
                      model, repeats=4, cv=0.04, seed=seed, base=TAP_PROFILE, env=env, validate=False)


def tcg_queue_rate(seed: int = 0) -> list[TrialRecord]:
    env = Environment(host="planted", accel="tcg", lab="libvirt", shared_cores=True)
    return queue_rate(seed, env=env)


def few_repeats(seed: int = 0) -> list[TrialRecord]:
    def model(c: dict[str, Any]) -> Truth:
        return BASE_MPPS * (1.25 if _nic(c, "queues") == 2 else 1.0), 1e-4, 0.8

    return synthesize({"guest.nics.*.queues": [1, 2]}, model, repeats=2, cv=0.04, seed=seed)


#: Planted multiplicative effects of :func:`search_grid` (value -> factor), and the interaction.
SEARCH_EFFECTS: dict[str, dict[Any, float]] = {
    "guest.nics.*.queues": {1: 1.0, 2: 1.15, 4: 1.10},
    "guest.nics.*.rx_queue_size": {256: 1.0, 512: 1.04, 1024: 1.06},
    "workload.burst": {16: 0.92, 32: 1.0, 64: 1.03},
    "guest.pinning.vhost": {"0": 1.0, "1": 0.85},  # "1": the PMD shares CPU 1 with the vCPUs
}


def search_true_median(config: dict[str, Any]) -> float:
    """The planted median rate of one :func:`search_grid` configuration (flattened knobs)."""
    factor = 1.0
    values = {"guest.nics.*.queues": _nic(config, "queues"), "guest.nics.*.rx_queue_size": _nic(config, "rx_queue_size"),
              "workload.burst": config["workload.burst"], "guest.pinning.vhost": config["guest.pinning.vhost"]}
    for knob, value in values.items():
        factor *= SEARCH_EFFECTS[knob][value]
    if values["guest.nics.*.queues"] > 1 and not _split(config):
        factor /= SEARCH_EFFECTS["guest.nics.*.queues"][values["guest.nics.*.queues"]]  # no queue gain when shared
    return BASE_MPPS * factor


def search_grid(seed: int = 0, *, repeats: int = 4, cv: float = 0.04) -> list[TrialRecord]:
    base = {**BASE_PROFILE, "guest": {**BASE_PROFILE["guest"], "vcpus": 4,
                                      "pinning": {"vcpus": {0: "1", 1: "1", 2: "1", 3: "1"}, "vhost": "0"}}}
    sweep = {knob: list(values) for knob, values in SEARCH_EFFECTS.items()}
    return synthesize(sweep, lambda c: (search_true_median(c), 1e-4, 0.8), repeats=repeats, cv=cv, seed=seed,
                      base=base)


DATASETS: dict[str, Callable[..., list[TrialRecord]]] = {
    "ring_loss": ring_loss,
    "queue_rate": queue_rate,
    "split_pinning": split_pinning,
    "pure_noise": pure_noise,
    "two_band": two_band,
    "tx_ring_on_tap": tx_ring_on_tap,
    "tcg_queue_rate": tcg_queue_rate,
    "few_repeats": few_repeats,
    "search_grid": search_grid,
}


# --- a trend's series on this host's own spread ----------------------------------------------------------

def host_residuals() -> list[float]:
    """The log residuals of every stored embedded-lab trial in ``benchmarks/data`` about its configuration's
    mean log, scaled by sqrt(n / (n - 1)) for the mean fitted from the same n trials (192 trials of 48
    configurations on a 2-vCPU host: sd about 0.2, heavy-tailed, two bands in some configurations): the
    host's own spread, for series drawn by :func:`trend_series`."""
    import json
    import math
    from collections import defaultdict
    from pathlib import Path

    out = []
    for path in sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "data").glob("*.jsonl")):
        groups: dict[str, list[float]] = defaultdict(list)
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            if row.get("metrics", {}).get("mpps"):
                config = {k: v for k, v in row["config"].items() if k != "repeat"}
                groups[json.dumps(config, sort_keys=True)].append(row["metrics"]["mpps"])
        for values in groups.values():
            logs = [math.log(v) for v in values]
            mean, scale = sum(logs) / len(logs), math.sqrt(len(logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
            out += [(x - mean) * scale for x in logs]
    return out


def trend_series(seed: int, runs: int = 10, trials: int = 5, step_at: int | None = None, factor: float = 0.5,
                 rate: float = 8.0, residuals: list[float] | None = None) -> list[list[float]]:
    """A series of ``runs`` runs of ``trials`` trials at ``rate``, each trial multiplied by the exponential of a
    residual of :func:`host_residuals` drawn with replacement (``random.Random(seed)``); from run ``step_at`` on
    (when given) the rate is ``factor`` times as high: a planted step."""
    import math
    import random

    rng = random.Random(seed)
    noise = residuals if residuals is not None else host_residuals()
    return [[rate * (factor if step_at is not None and r >= step_at else 1.0) * math.exp(rng.choice(noise))
             for _ in range(trials)] for r in range(runs)]
