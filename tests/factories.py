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


TCP_ENV = Environment(host="lab1", cores=2, kernel="6.1.0", accel="kvm", lab="libvirt", virtio_backend="vhost-net")


def tcp_config(profile: str = "tcp-multiqueue", **knobs) -> dict:
    """The flattened configuration of a shipped tcp profile (every default filled in, as a sweep stores
    it) with ``knobs`` (``{"workload.sessions": 4}``) applied."""
    from pathlib import Path

    import yaml

    from labctl.profile.knobs import flatten, with_knobs
    from labctl.profile.schema import Profile

    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "domains" / f"{profile}.yaml").read_text())
    data = Profile.model_validate(data).model_dump()
    return flatten(Profile.model_validate(with_knobs(data, knobs)).model_dump())


def tcp_records(medians: dict[tuple, tuple[float, float, float]], *, kind: str = "tcp_stream", n: int = 4,
                cv: float = 0.03, seed: int = 0, knobs: tuple[str, ...] = ("workload.sessions", "workload.guest_queues"),
                env: Environment = TCP_ENV) -> list[TrialRecord]:
    """Planted trials of a tcp sweep: per configuration (a tuple of ``knobs`` values) the medians of its
    rate (``bandwidth_gbps`` for tcp_stream, ``transactions_per_s`` for tcp_rr), host and guest service
    demand; ``n`` interleaved repeats each, log-normal noise of coefficient of variation ``cv`` on all three."""
    import math

    import numpy as np

    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log(1.0 + cv * cv))
    profile = "tcp-multiqueue" if kind == "tcp_stream" else "tcp-rr"
    rate, per = ("bandwidth_gbps", "kb") if kind == "tcp_stream" else ("transactions_per_s", "tx")
    configs = {key: tcp_config(profile, **dict(zip(knobs, key))) for key in medians}
    out = []
    for repeat in range(n):
        for key, (value, sd_host, sd_guest) in medians.items():
            draw = [float(x * rng.lognormal(-sigma * sigma / 2, sigma)) for x in (value, sd_host, sd_guest)]
            metrics = Metrics(**{rate: draw[0], f"service_demand_host_us_per_{per}": draw[1],
                                 f"service_demand_guest_us_per_{per}": draw[2]}, retransmits=0, window_s=5.0)
            tid = len(out) + 1
            out.append(TrialRecord(id=tid, run_id=1, config=configs[key], env=env, metrics=metrics,
                                   repeat_index=repeat, started_at=1700000000.0 + 10.0 * tid))
    return out


def build_binary(folder, name: str = "dpdk-testpmd", copy_of=None, script: str | None = None):
    """A build's binary as the profile rules accept one: ``folder`` made (0755), the file in it a copy of
    ``copy_of`` or a ``#!/bin/sh`` ``script``, root's (the test's user), mode 0755. Returns its path."""
    import os
    import shutil
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    path = folder / name
    if copy_of is not None:
        shutil.copyfile(copy_of, path)
    else:
        path.write_text(f"#!/bin/sh\n{script}\n")
    os.chmod(path, 0o755)
    return path


def git_history(repo, commits: list[dict[str, str | None]], executable: tuple[str, ...] = ("build.sh",)) -> list[str]:
    """A git repository at ``repo`` with one commit per entry of ``commits`` (path -> text; None removes
    the file; the key ``_subject`` is the commit's subject), each committed with a fixed author and date;
    files named in ``executable`` are mode 0755. Returns the commits' full shas, oldest first."""
    import os
    import subprocess
    from pathlib import Path

    repo = Path(repo)
    repo.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "--quiet", "--initial-branch=main")
    shas = []
    for number, files in enumerate(commits):
        for name, text in files.items():
            if name == "_subject":
                continue
            path = repo / name
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            os.chmod(path, 0o755 if name in executable else 0o644)
        git("add", "--all")
        git("commit", "--quiet", "--allow-empty", "-m", files.get("_subject") or f"commit {number}")
        shas.append(git("rev-parse", "HEAD"))
    return shas


def trend_store(db, step: bool, residuals: list[float] | None = None, seed: int = 3, runs: range = range(10)):
    """Ten runs of profile demo (rx 256 and 1024, five trials each, this host's spread:
    :func:`tests.datasets.trend_series`) stored one after another in ``db``; with ``step``, rx 256 at half the
    rate from run 7 on, where the forwarder's binary changed too. ``runs``: which of the ten are stored (0 is
    the first). Returns ``db``."""
    from labctl.results.store import Store
    from tests.datasets import trend_series

    series = {256: trend_series(seed, step_at=6 if step else None, residuals=residuals),
              1024: trend_series(seed + 100, residuals=residuals)}
    with Store(db) as store:
        for r in runs:
            binary = {"forwarder": {"path": "/opt/fwd", "sha256": "a" * 64 if r < 6 or not step else "b" * 64,
                                    "version": "DPDK 22.11.11", "build": None}}
            run_id = store.create_run("demo", {}, [])
            for record in run_records(run_id, {rx: series[rx][r] for rx in series},
                                      env=ENV.model_copy(update={"binaries": binary}),
                                      start=1_700_000_000.0 + 1000 * r, first_id=0):
                record.id = None
                store.add_trial(record)
    return db
