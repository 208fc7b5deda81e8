"""Many hosts' trials in one result store, the host as a dimension.

Each good host's JSONL (fetched by ``playbooks/sweep.yml``) becomes one imported run of the store, named
``fleet <run>: <host>``, whose trials keep ``env.host`` = the inventory hostname (so ``runs.host`` and the
``trial_metrics`` view's ``host`` column are the inventory hostname too). The name gets there on the host:
the playbook sets ``LABCTL_HOST`` to the inventory hostname and ``labctl.host.fingerprint`` records it. A
record that names another host (a host running a labctl without that override) is renamed here, and the
result says from what.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from labctl import api


class _HostOutcome(Protocol):
    host: str
    status: str
    jsonl: Path | None


@dataclass(frozen=True)
class Merged:
    """One host's trials imported into the store."""

    host: str
    run_id: int
    trials: int
    source: Path
    renamed_from: tuple[str, ...] = ()  # env.host values the records had, when not the inventory hostname

    def to_dict(self) -> dict:
        return {"host": self.host, "run_id": self.run_id, "trials": self.trials, "source": str(self.source),
                "renamed_from": list(self.renamed_from)}


def _named(host: str, path: Path) -> tuple[Path, tuple[str, ...]]:
    """``path`` itself when every record says ``env.host == host``; else a copy that does, next to it."""
    records = api.read_trials_file(path)  # validates every line (ImportFormatError names the file and line)
    others = tuple(sorted({str(r.env.host) for r in records if r.env.host != host}))
    if not others:
        return path, ()
    fixed = path.with_name(path.stem + f".as-{host}.jsonl")
    api.write_trials_file([r.model_copy(update={"env": r.env.model_copy(update={"host": host})}) for r in records],
                          fixed)
    return fixed, others


def merge(results: Iterable[_HostOutcome], db: str | Path, run_name: str | None = None) -> list[Merged]:
    """Import every good host's JSONL (status ``ok`` with a fetched file) into the store ``db``, one run
    per host, all in one transaction: every file is validated before the store is opened, and a failure
    part-way imports nothing. Hosts that failed or were unreachable are left out (their files, if any,
    stay in the run's artefacts)."""
    sources = [(r.host, *_named(r.host, Path(r.jsonl))) for r in results if r.status == "ok" and r.jsonl]
    if not sources:
        return []
    names = [f"fleet {run_name}: {host}" if run_name else f"fleet: {host}" for host, _path, _renamed in sources]
    imported = api.import_runs([(path, name) for (_host, path, _renamed), name in zip(sources, names)], db)
    return [Merged(host=host, run_id=run_id, trials=count, source=path, renamed_from=renamed)
            for (host, path, renamed), (run_id, count) in zip(sources, imported)]
