"""The Textual face of labctl: watch a sweep, browse results, read and apply the advice.

``labctl tui [--db PATH] [FILE]`` opens :class:`labctl.tui.app.LabctlApp`: five screens one key away
(``h`` Host, ``l`` Labs, ``s`` Sweep, ``r`` Results, ``a`` Advice). Like the CLI it is a thin face
over :mod:`labctl.api`: it calls nothing below it. Slow calls run in thread workers; measuring ones
(a sweep, a tune, a steadiness probe, ``up``) run in a :class:`labctl.signals.CancelScope` that the
Sweep screen's cancel and SIGTERM stop cleanly. :mod:`labctl.tui.model` turns the API's results and
events into what the screens draw (``screens/``, ``widgets/``), so no widget holds any logic of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["run"]


def run(db: str | Path, profile: str | Path | None = None, overrides: dict[str, Any] | None = None) -> int:
    """Run the TUI until the user quits; returns the exit code (143 after SIGTERM)."""
    from labctl.tui.app import LabctlApp

    app = LabctlApp(db=db, profile=profile, overrides=overrides)
    code = app.run()
    return app.return_code if code is None else code
