"""The labctl TUI: six screens one key away, workers for everything slow, clean stops.

Screens are Textual modes (each keeps its state while another is shown): ``h`` Host, ``l`` Labs,
``s`` Sweep, ``r`` Results, ``a`` Advice, ``v`` Live (a reconf or soak watched while it runs; not listed in the
footers); ``q`` quits, asking first when measuring work is in flight.

Stopping. Work that creates resources (a sweep, a tune, a steadiness probe, ``up``) runs in a thread
worker inside a :class:`~labctl.signals.CancelScope` that the app holds (:meth:`LabctlApp.open_scope`).
Cancel calls ``scope.cancel()``: the trial in flight is torn down at its next checkpoint and the run
stays resumable. On its main thread the app installs :func:`labctl.signals.install`, so SIGTERM cancels
every scope in flight; the app then exits (code 143) once the last such worker has cleaned up and handed
its scope back (:meth:`LabctlApp.close_scope`).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive

from labctl import api, signals
from labctl.signals import CancelScope
from labctl.tui.screens.advice import AdviceScreen
from labctl.tui.screens.confirm import ConfirmScreen
from labctl.tui.screens.host import HostScreen
from labctl.tui.screens.labs import LabsScreen
from labctl.tui.screens.live import LiveScreen
from labctl.tui.screens.results import ResultsScreen
from labctl.tui.screens.sweep import SweepScreen

SCREENS = ("host", "labs", "sweep", "results", "advice", "live")


class LabctlApp(App[int]):
    """``db``: the result store; ``profile``: the profile the Sweep and Advice screens use (FILE, or
    the one picked on the Labs screen); ``overrides``: knob -> value applied to it (``--set``);
    ``poll_s``: how often the Sweep screen looks for trials stored by other processes (None: never);
    ``mode``: the first screen; ``handle_signals``: install the SIGTERM handler (off in tests that
    share a process)."""

    CSS_PATH = "app.tcss"
    TITLE = "labctl"
    ENABLE_COMMAND_PALETTE = False
    MODES = {"host": HostScreen, "labs": LabsScreen, "sweep": SweepScreen, "results": ResultsScreen,
             "advice": AdviceScreen, "live": LiveScreen}
    BINDINGS = [
        Binding("h", "switch_mode('host')", "Host"),
        Binding("l", "switch_mode('labs')", "Labs"),
        Binding("s", "switch_mode('sweep')", "Sweep"),
        Binding("r", "switch_mode('results')", "Results"),
        Binding("a", "switch_mode('advice')", "Advice"),
        Binding("v", "switch_mode('live')", "Live", show=False),  # a reconf or soak watched (not in the footers)
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    ]

    profile: reactive[Path | None] = reactive(None)
    run_id: reactive[int | None] = reactive(None)  # the run Results and Advice show (None: the newest)
    stored: reactive[int] = reactive(0)  # counts trials seen landing in the store

    def __init__(self, db: str | Path = api.DEFAULT_DB, profile: str | Path | None = None,
                 overrides: dict[str, Any] | None = None, profiles_dir: str | Path = "domains",
                 poll_s: float | None = 1.0, mode: str = "host", handle_signals: bool = True) -> None:
        if mode not in SCREENS:
            raise ValueError(f"mode {mode!r}: not a screen (allowed: {', '.join(SCREENS)})")
        self.DEFAULT_MODE = mode  # read by App.__init__
        super().__init__()
        self.db = Path(db)
        self.overrides = dict(overrides or {})
        self.profiles_dir = Path(profiles_dir)
        self.poll_s = poll_s
        self.set_reactive(LabctlApp.profile, Path(profile) if profile is not None else None)
        self.scopes: set[CancelScope] = set()
        self.quitting = False
        self.exit_code = 0
        self._handle_signals = handle_signals
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous_sigterm: Any = None

    # -- work in flight ------------------------------------------------------------------------------

    def open_scope(self) -> CancelScope:
        """A cancel scope for measuring work; the worker hands it back with :meth:`close_scope`."""
        scope = CancelScope()
        self.scopes.add(scope)
        return scope

    def close_scope(self, scope: CancelScope) -> None:
        self.scopes.discard(scope)
        if self.quitting and not self.scopes:
            self.exit(self.exit_code, return_code=self.exit_code)

    @property
    def busy(self) -> bool:
        """Measuring work (and its clean-up) is in flight."""
        return bool(self.scopes)

    def stop_work(self, why: str) -> None:
        """Cancel every scope in flight and exit once the workers have cleaned up."""
        self.quitting = True
        for scope in list(self.scopes):
            scope.cancel()
        if not self.scopes:
            self.exit(self.exit_code, return_code=self.exit_code)
        else:
            self.notify(f"{why}: tearing down the trial in flight, then quitting", timeout=30)

    # -- signals -------------------------------------------------------------------------------------

    def on_mount(self) -> None:
        if self._handle_signals:
            self._loop = asyncio.get_running_loop()
            self._previous_sigterm = signal.getsignal(signal.SIGTERM)
            signals.install(on_terminate=self._on_sigterm)

    def on_unmount(self) -> None:
        # however the app ends, no measuring work outlives it: a worker thread still in a trial tears
        # it down at its next checkpoint (and the loop's executor, which waits for it, can close)
        for scope in list(self.scopes):
            scope.cancel()
        if self._handle_signals and self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)

    def _on_sigterm(self) -> None:
        """Called in the signal handler (the scopes are already cancelled): hand over to the loop."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._terminate)

    def _terminate(self) -> None:
        self.exit_code = 143
        self.stop_work("SIGTERM")

    # -- quitting ------------------------------------------------------------------------------------

    async def action_quit(self) -> None:
        if not self.busy:
            self.exit(0)
            return
        if self.quitting:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_work("quitting")

        self.push_screen(ConfirmScreen("A sweep is running. Cancel it (the trial in flight is torn down; the run "
                                       "can be resumed) and quit?", yes="Cancel and quit", no="Keep running"),
                         answered)
