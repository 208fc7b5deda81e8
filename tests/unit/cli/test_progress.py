"""Progress of a sweep by --metric ndr: the planned searches are counted, not each search's measurements
(the CLI's bar and the TUI's Sweep screen showed 258/6)."""

from __future__ import annotations

from labctl.events import Event
from labctl.results.record import SEARCH_ROLES, Metrics, TrialRecord


def _events(searches: int = 2, measurements: int = 40, done_before: int = 0) -> list[Event]:
    out = [Event("run", run_id=3, total=6, done=done_before)]
    done = done_before
    for _ in range(searches):
        for i in range(measurements):
            done += 1
            role = SEARCH_ROLES[i % len(SEARCH_ROLES)]
            out.append(Event("trial", run_id=3, done=done, total=6, data={"config": {"ring": 256}},
                             record=TrialRecord(config={}, details={"role": role}, metrics=Metrics(mpps=1.0))))
        done += 1
        out.append(Event("trial", run_id=3, done=done, total=6, data={"config": {"ring": 256}},
                         record=TrialRecord(config={}, details={"role": "ndr"},
                                            metrics=Metrics(ndr_mpps=2.0, pdr_mpps=2.1))))
    return out


def test_the_cli_bar_counts_planned_searches():
    from labctl.cli.output import SweepProgress

    with SweepProgress() as progress:
        for event in _events(done_before=1):
            progress(event)
        task = progress.progress.tasks[0]
        assert (task.completed, task.total) == (3, 6)


def test_the_tuis_progress_counts_planned_searches():
    from labctl.api import trial_rate
    from labctl.tui.model import Progress

    progress = Progress()
    for event in _events(done_before=1):
        progress.apply(event)
    assert (progress.done, progress.total) == (3, 6)
    assert "3/6 trials" in progress.headline()
    assert progress.last.endswith("NDR 2.000 / PDR 2.100 Mpps")
    plain = Progress()
    for i in range(3):
        plain.apply(Event("trial", run_id=1, done=i + 1, total=4, record=TrialRecord(config={}, metrics=Metrics(mpps=9.0))))
    assert plain.done == 3 and trial_rate(TrialRecord(config={}, metrics=Metrics(mpps=9.0))) == "9.00 Mpps"
