"""Live trials for an adaptive search (``labctl tune``): one run in the store, one lab session kept
across evaluations, each configuration the search asks for measured (a trial, or an NDR/PDR search)
and stored as it finishes.

The search itself (TPE, then a race) lives above the core, in :mod:`advisor.search`; the face hands it
in as ``search(evaluate, on_step)``, so nothing here imports the advisor.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from labctl.events import OnEvent, notify
from labctl.measure.labs import LabSession, check_measurable
from labctl.measure.ndr import SearchSettings, ndr_trial
from labctl.measure.session import base_data, open_session
from labctl.measure.trial import run_trial
from labctl.profile.knobs import with_knobs
from labctl.profile.load import LoadedProfile, validate_data

__all__ = ["run_tune"]

#: ``search(evaluate, on_step)``: calls ``evaluate(config)`` per configuration it picks, ``on_step(item)``
#: after each, and returns its result.
Search = Callable[[Callable[[dict[str, Any]], Any], Callable[[Any], None]], Any]


def run_tune(loaded: LoadedProfile, db: Any, search: Search, budget: int, settings: SearchSettings | None = None,
             metric: str = "mpps", on_event: OnEvent | None = None, wait: bool = True) -> Any:
    """Run ``search`` with live trials of ``loaded``'s lab. ``settings``: each evaluation is an NDR/PDR
    search and returns ``{metric}_mpps`` (None for a failed one); else it returns the trial record."""
    check_measurable(loaded.profile)
    base = base_data(loaded)
    profile = loaded.profile
    with open_session(db, profile.name, base, [], on_event=on_event) as session, \
            LabSession(profile.name, profile.libvirt_uri, on_event, wait) as labs:

        def evaluate(config: dict[str, Any]) -> Any:
            trial = validate_data(with_knobs(copy.deepcopy(base), config), loaded.source)
            with session.trial():
                if settings is None:
                    record = run_trial(trial, on_event=on_event, session=labs)
                else:
                    record, _result = ndr_trial(trial, settings, labs, session.add_measurement, on_event)
            session.add(record, entry={"config": config})
            if settings is None:
                return record
            value = getattr(record.metrics, f"{metric}_mpps")
            return value if record.status == "ok" else None

        def step(item: Any) -> None:
            notify(on_event, "step", run_id=session.run_id, done=item.step, total=budget, data=item)

        try:
            return search(evaluate, step)
        finally:
            if labs.boots:
                session.store.update_run_info(session.run_id, **labs.info())
