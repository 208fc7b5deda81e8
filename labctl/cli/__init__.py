"""The labctl command line (Typer): ``labctl.cli:main`` is the console script."""

from labctl.cli.app import app, main, run

__all__ = ["app", "main", "run"]
