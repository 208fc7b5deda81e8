"""What every screen shares: calling :mod:`labctl.api` in a thread worker and getting the answer back
on the app's thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker

from labctl import api
from labctl.signals import CancelScope

if TYPE_CHECKING:
    from labctl.tui.app import LabctlApp


def error_text(exc: BaseException) -> str:
    """One line for the user, as the CLI would print it."""
    if isinstance(exc, api.Interrupted):
        return exc.message
    if isinstance(exc, api.LabError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


class LabScreen(Screen):
    """A screen of the TUI. Nothing is focused at first, so every key of the footer works at once;
    ``escape`` leaves an input field."""

    AUTO_FOCUS = ""
    BINDINGS = [Binding("escape", "blur", "Leave field", show=False)]

    @property
    def lab(self) -> "LabctlApp":
        return self.app  # type: ignore[return-value]

    def action_blur(self) -> None:
        self.set_focus(None)

    def call_api(self, fn: Callable[..., Any], *args: Any, done: Callable[[Any], None],
                 failed: Callable[[BaseException], None] | None = None, group: str = "api",
                 owns: CancelScope | None = None, exclusive: bool = True, **kwargs: Any) -> Worker:
        """Run ``fn(*args, **kwargs)`` in a thread worker; ``done(result)`` or ``failed(exception)``
        then run on the app's thread (default for failures: a notification). ``owns``: the cancel
        scope of the work, handed back to the app when the worker ends (after ``done``/``failed``)."""
        app = self.lab
        on_error = failed or (lambda exc: app.notify(error_text(exc), severity="error", timeout=8))

        def work() -> None:
            try:
                try:
                    result = fn(*args, **kwargs)
                except (Exception, api.Interrupted) as exc:  # noqa: BLE001: every failure is shown, none kills the app
                    app.call_from_thread(on_error, exc)
                else:
                    app.call_from_thread(done, result)
            except RuntimeError:
                pass  # the app has already gone
            finally:
                if owns is not None:
                    try:
                        app.call_from_thread(app.close_scope, owns)
                    except RuntimeError:
                        pass

        return self.run_worker(work, thread=True, group=group, exclusive=exclusive, exit_on_error=False,
                               name=getattr(fn, "__name__", "api call"))
