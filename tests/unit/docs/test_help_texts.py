"""Every CLI argument and option, and every profile field, has a help text: the docs' reference and the man
page are made from them, so a missing one is a hole in the docs (docs/hooks/reference.py)."""

from __future__ import annotations

import inspect

import pytest
import typer
from pydantic import BaseModel

from labctl.cli.app import app
from labctl.profile import schema


def _params():
    def walk(command, path):
        for param in command.params:
            yield f"{path} {'/'.join(getattr(param, 'opts', None) or [param.name])}", param
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, f"{path} {name}")

    return list(walk(typer.main.get_command(app), "labctl"))


PARAMS = _params()
MODELS = [m for _, m in inspect.getmembers(schema, inspect.isclass)
          if issubclass(m, BaseModel) and m.__module__ == schema.__name__]
FIELDS = [(f"{m.__name__}.{name}", field) for m in MODELS for name, field in m.model_fields.items()]


def test_the_walk_sees_the_commands_and_the_fields():
    names = {name for name, _ in PARAMS}
    assert "labctl sweep --until" in names and "labctl fleet sweep -i/--inventory" in names and "labctl run file" in names
    assert len(PARAMS) > 100 and len(FIELDS) > 60
    assert {"Profile.sweep", "Nic.rx_queue_size", "Workload.rate"} <= {name for name, _ in FIELDS}


@pytest.mark.parametrize("name, param", PARAMS, ids=[name for name, _ in PARAMS])
def test_every_cli_argument_and_option_has_help(name, param):
    assert (getattr(param, "help", None) or "").strip(), f"{name}: no help text (typer.Option(..., help=...))"


@pytest.mark.parametrize("name, field", FIELDS, ids=[name for name, _ in FIELDS])
def test_every_profile_field_has_a_description(name, field):
    assert (field.description or "").strip(), f"{name}: no description (a docstring under the field)"


def test_a_field_without_text_is_caught():
    class Bare(schema.Model):
        described: int = 1
        """a text"""
        bare: int = 2

    assert Bare.model_fields["described"].description == "a text"
    assert Bare.model_fields["bare"].description is None
