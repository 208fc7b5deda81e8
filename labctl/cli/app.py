"""The labctl command line: a thin Typer face over :mod:`labctl.api` (argument parsing and printing).

``run(argv)`` maps every error to one line and an exit code: a :class:`~labctl.errors.UserError` exits
2, a :class:`~labctl.errors.LabFault` 1 (results already stored are kept), SIGINT 130, SIGTERM 143,
and nothing prints a traceback (``LABCTL_DEBUG=1`` shows one for internal errors).
"""

from __future__ import annotations

import os
import sys
import typer

from labctl import __version__, api
from labctl.cli import advice, bisect, compare, domains, host, lab, measure, results, trend, tui
from labctl.cli.fleet import fleet_app
from labctl.cli import live
from labctl.errors import Interrupted, LabError

app = typer.Typer(no_args_is_help=True, help="QEMU/KVM lab automation and virtio-net tuning advisor.")


def _version(value: bool) -> None:
    if value:
        typer.echo(api.version_line(__version__))
        raise typer.Exit()


@app.callback()
def main_options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                              help="print the version and the commit it was built from, and exit")) -> None:
    """QEMU/KVM lab automation and virtio-net tuning advisor."""


for module in (lab, measure, results, advice, domains, host, compare, tui):
    module.register(app)
trend.register(app)
bisect.register(app)
live.register(app)  # labctl reconf, labctl soak
app.add_typer(fleet_app, name="fleet")


def run(argv: list[str] | None = None) -> int:
    """Run one command; LabErrors become one line and their exit code. Never prints a traceback."""
    try:
        code = app(args=argv, prog_name="labctl", standalone_mode=False)
    except LabError as exc:
        typer.echo(str(exc) if ": " in str(exc) else f"labctl: {exc}", err=True)
        return exc.exit_code
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", getattr(exc, "code", 0))
        if code == 130:  # typer turns Ctrl-C into a silent exit 130
            typer.echo("labctl: interrupted", err=True)
        return code if isinstance(code, int) else 1
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("labctl: interrupted", err=True)
        return 130
    except Interrupted as exc:
        typer.echo(f"labctl: {exc.message}", err=True)
        return exc.exit_code
    except Exception as exc:  # click usage errors and anything unexpected
        if isinstance(exc, typer.TyperException) and hasattr(exc, "show"):
            exc.show()  # usage errors: click's message, exit 2
            return getattr(exc, "exit_code", 2)
        if os.environ.get("LABCTL_DEBUG"):
            raise
        typer.echo(f"labctl: internal error: {type(exc).__name__}: {exc} (LABCTL_DEBUG=1 shows the traceback)", err=True)
        return 1
    if code == 130:  # typer turns Ctrl-C into Exit(130), which click returns in non-standalone mode
        typer.echo("labctl: interrupted", err=True)
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run())
