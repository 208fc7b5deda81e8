"""The docs' reference pages, made from the code each time the site is built, so they cannot drift.

An MkDocs hook (``mkdocs.yml``: ``hooks:``): :func:`on_files` adds the generated pages to the site as
files that exist only in the build (MkDocs 1.6 ``File.generated``), nothing is written into ``docs/``:

* ``reference/cli.md``: every command of the Typer app (through its Click command tree) with its help and
  every argument and option (names, type, default, help);
* ``reference/profile.md``: every field of the profile schema (pydantic models from ``Profile`` down: path,
  type, default, description);
* ``reference/rules.md``: every rule of the registry (``labctl.profile.rules.RULES``) with its reason and
  source, in the order a profile's problems are reported;
* ``reference/metrics.md``: the metric registry (``labctl.results.metrics.METRICS``);
* ``reference/knobs.md``: every knob path a profile has, and how a running guest takes it (live, swap, boot), from
  the plan's own classification (``labctl.lab.plan.knob_kind``).

Run as a script it writes the man page ``labctl(1)`` (roff, from the same Click tree):
``python docs/hooks/reference.py --man build/docs/labctl.1`` (``make docs`` does).
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import re
import types
import typing
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel

PAGES = ("cli", "profile", "rules", "metrics", "knobs")


# --- the CLI ---------------------------------------------------------------------------------------------

def cli_tree():
    """The Click command of labctl's Typer app."""
    import typer

    from labctl.cli.app import app

    return typer.main.get_command(app)


def commands(group, path: str = "labctl") -> Iterator[tuple[str, Any]]:
    """(full name, command) for every command, depth first, groups before their commands, sorted by name."""
    yield path, group
    for name in sorted(getattr(group, "commands", {})):
        sub = group.commands[name]
        if getattr(sub, "hidden", False):
            continue
        yield from commands(sub, f"{path} {name}")


def _clean(text: str | None) -> str:
    """A help text as plain text: Typer's rich markup is not used here; Click's \\b markers dropped."""
    return re.sub(r"\s*\x08\s*", " ", (text or "").strip())


def param_rows(command) -> list[dict[str, str]]:
    rows = []
    for p in command.params:
        if p.name == "help":
            continue
        kind = p.param_type_name  # option | argument
        names = ", ".join(p.opts + list(getattr(p, "secondary_opts", []))) if kind == "option" else p.name.upper()
        metavar = getattr(p, "metavar", None) or _param_type(p)
        default = p.default
        shown = "" if default in (None, (), []) or callable(default) or kind == "argument" else str(default)
        if hasattr(default, "value"):
            shown = str(default.value)
        rows.append({"kind": kind, "names": names, "type": str(metavar), "default": shown,
                     "required": "yes" if p.required else "", "help": _clean(getattr(p, "help", ""))})
    return rows


def _param_type(p) -> str:
    """A parameter's type in words, from its annotation (Typer keeps it in ``type_descriptor``)."""
    annotation = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    if annotation is None:
        return "text"
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if annotation is bool:
        return "flag"
    if typing.get_origin(annotation) in (list, tuple):
        inner = typing.get_args(annotation)
        return f"{getattr(inner[0], '__name__', 'text') if inner else 'text'}, repeatable"
    return {"Path": "path", "str": "text", "int": "integer", "float": "number"}.get(
        getattr(annotation, "__name__", ""), getattr(annotation, "__name__", "text"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cli_page() -> str:
    out = ["# The command line", "",
           "Made from the code of `labctl`'s Typer app each time the docs are built: every command, argument "
           "and option with its help. `labctl COMMAND --help` prints the same.", ""]
    for name, command in commands(cli_tree()):
        level = "##" if name.count(" ") <= 1 else "###"
        out += [f"{level} `{name}`", ""]
        if command.help:
            out += [_clean(command.help).replace("\n\n", "\n\n"), ""]
        rows = param_rows(command)
        if hasattr(command, "commands"):
            subs = [n for n in sorted(command.commands) if not getattr(command.commands[n], "hidden", False)]
            if name != "labctl":
                out += ["Commands: " + ", ".join(f"`{name} {s}`" for s in subs), ""]
        if rows:
            out += ["| argument or option | type | default | help |", "|---|---|---|---|"]
            for r in rows:
                required = " (required)" if r["required"] and r["kind"] == "option" else ""
                out.append(f"| `{_cell(r['names'])}`{required} | {_cell(r['type'])} | {_cell(r['default'])} | "
                           f"{_cell(r['help'])} |")
            out.append("")
    return "\n".join(out)


# --- the profile schema ----------------------------------------------------------------------------------

def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map {_type_name(args[0])} -> {_type_name(args[1])}" if args else "map"
    if annotation is type(None):
        return "null"
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation))


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "see below"
        return f"`{value!r}`" if value not in ({}, []) else "empty"
    return f"`{field.default!r}`" if field.default is not None else "`None`"


def schema_models() -> list[tuple[str, type[BaseModel]]]:
    """(path, model) from ``Profile`` down, in field order, each model once (a list's items as ``[]``)."""
    from labctl.profile.schema import Profile

    seen: set[type] = set()
    out: list[tuple[str, type[BaseModel]]] = []

    def visit(path: str, model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        out.append((path, model))
        for name, field in model.model_fields.items():
            for sub in _models(field.annotation):
                many = typing.get_origin(field.annotation) in (list,) or "list" in str(field.annotation)
                visit(f"{path}.{name}{'.*' if many else ''}".lstrip("."), sub)

    visit("", Profile)
    return out


def profile_page() -> str:
    out = ["# The profile", "",
           "A lab profile is a YAML file (`domains/*.yaml`) checked against this schema, then against the "
           "[rules](rules.md). Made from the pydantic models each time the docs are built: every field with its "
           "type, default and description. Unknown fields are refused (`extra='forbid'`), types are strict "
           "(`1024`, not `\"1024\"`).", ""]
    for path, model in schema_models():
        title = path or "top level"
        out += [f"## {model.__name__}", "", f"At `{title}`." if path else "The top level of the file.", ""]
        if model.__doc__ and "Usage docs" not in model.__doc__:
            out += [" ".join(model.__doc__.split()), ""]
        out += ["| field | type | default | description |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            out.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | "
                       f"{_cell(field.description or '')} |")
        out.append("")
    return "\n".join(out)


# --- rules, metrics, knobs -------------------------------------------------------------------------------

def rules_page() -> str:
    from labctl.profile.rules import RULES

    out = ["# The rules", "",
           "Every constraint on a profile's values, each with its reason and its source, in the order a "
           "profile's problems are reported (`labctl validate`). Made from the rule registry "
           "(`labctl/profile/rules/`) each time the docs are built.", "",
           "| rule | why | source |", "|---|---|---|"]
    for r in RULES:
        out.append(f"| `{r.id}` | {_cell(r.reason)} | {_cell(r.source)} |")
    return "\n".join(out) + "\n"


def metrics_page() -> str:
    from labctl.results.metrics import METRICS

    out = ["# The metrics", "",
           "Every metric a trial record can hold, from the metric registry (`labctl/results/metrics.py`). "
           "*better* says which way a comparison counts as an improvement; a metric with none is never judged. "
           "`labctl report --metric`, `labctl compare --metric` and `--verdict-metric` take these names "
           "(and the aliases).", "",
           "| metric | unit | better | kind | what | aliases |", "|---|---|---|---|---|---|"]
    for m in METRICS.values() if isinstance(METRICS, dict) else METRICS:
        name = f"{m.name}.*" if m.family else m.name
        aliases = ", ".join(f"`{a}`" for a in m.aliases)
        out.append(f"| `{name}` | {m.unit} | {m.direction} | {m.kind} | {_cell(m.label)} | {aliases} |")
    return "\n".join(out) + "\n"


def knob_paths() -> list[str]:
    """Every scalar field of the profile as a knob path (``--set PATH=VALUE``, a sweep's key)."""
    from labctl.profile.knobs import NOT_CONFIG

    paths = []
    for path, model in schema_models():
        for name, field in model.model_fields.items():
            full = f"{path}.{name}".lstrip(".")
            if full.split(".")[0] in (*NOT_CONFIG, "repeat") or list(_models(field.annotation)):
                continue
            paths.append(full)
    return paths


def knobs_page() -> str:
    from labctl.lab import plan

    out = ["# The knobs", "",
           "Every setting of a profile is a knob: `--set PATH=VALUE` on a command line, a key of a profile's "
           "`sweep:`. A NIC's knobs take `*` for every NIC (`guest.nics.*.queues`) or an index "
           "(`guest.nics.0.queues`); a vCPU's pin its index (`guest.pinning.vcpus.0`).", "",
           "*On a running guest* says how a libvirt guest takes a new value of the knob between two trials, from "
           "the plan's own classification (`labctl.lab.plan.knob_kind`, with the default `swap: hotplug`): "
           "`live` (applied to the running guest per trial: the forwarder's settings, vCPU and emulator pins, "
           "the TCP sessions), `swap` (its NICs swapped in place, no boot: [hot-swap](../how-to/hot-swap.md); "
           "`swap: boot` or `--swap boot` makes these boots) or `boot` (a new domain, or a restart of its host "
           "side), so a sweep orders its trials for the fewest boots. The embedded lab starts afresh every "
           "trial.", "",
           "| knob | on a running guest | description |", "|---|---|---|"]
    descriptions = {f"{p}.{n}".lstrip("."): f.description for p, m in schema_models() for n, f in m.model_fields.items()}
    for path in knob_paths():
        out.append(f"| `{path}` | {plan.knob_kind(path)} | {_cell(descriptions.get(path) or '')} |")
    return "\n".join(out) + "\n"


GENERATORS = {"cli": cli_page, "profile": profile_page, "rules": rules_page, "metrics": metrics_page,
              "knobs": knobs_page}


def on_files(files, config):  # the MkDocs hook
    from mkdocs.structure.files import File

    for name in PAGES:
        files.append(File.generated(config, f"reference/{name}.md", content=GENERATORS[name]()))
    return files


# --- the man page ----------------------------------------------------------------------------------------

def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.splitlines())


def man_page() -> str:
    from labctl import __version__

    root = cli_tree()
    date = datetime.date.today().isoformat()
    out = [f'.TH LABCTL 1 "{date}" "labctl {__version__}" "User Commands"', ".SH NAME",
           "labctl \\- " + _roff(_clean(root.help).split("\n")[0]), ".SH SYNOPSIS",
           ".B labctl", "[\\fB\\-\\-version\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]",
           ".SH DESCRIPTION", _roff("labctl measures how virtio-net settings change a guest's forwarding (rings, "
                                    "queues, pins, bursts, builds) in labs it brings up on this host, and "
                                    "recommends settings from the trials it stored. Every command prints one "
                                    "line and exits 2 for bad input, 1 for a lab fault."),
           ".SH COMMANDS"]
    for name, command in commands(root):
        if name == "labctl":
            continue
        out += [".SS " + _roff(name), _roff(_clean(command.help) or "")]
        for r in param_rows(command):
            out += [".TP", f"\\fB{_roff(r['names'])}\\fR" + (f" \\fI{_roff(r['type'])}\\fR" if r["type"] != "flag" else ""),
                    _roff(r["help"] + (f" (default: {r['default']})" if r["default"] else ""))]
    out += [".SH EXIT STATUS", "0 success; 1 a lab fault (results already stored are kept) or, for compare, a "
            "regression; 2 bad input (one line names the field and the allowed values); 130 cancelled; "
            "143 terminated.",
            ".SH ENVIRONMENT", ".TP", "\\fBLABCTL_STATE_DIR\\fR, \\fBLABCTL_RUN_DIR\\fR, \\fBLABCTL_LOG_DIR\\fR",
            "where labctl keeps its state, sockets and logs.", ".TP", "\\fBLABCTL_LABGEN\\fR",
            "a labgen executable to use instead of the one labctl was built with.",
            ".SH SEE ALSO", "The documentation site (\\fBmake docs\\fR in a checkout) and \\fBlabctl COMMAND "
            "\\-\\-help\\fR."]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="labctl's generated docs: the man page, or a reference page")
    parser.add_argument("--man", type=Path, help="write labctl(1) here")
    parser.add_argument("--page", choices=PAGES, help="print one reference page (Markdown)")
    args = parser.parse_args()
    if args.man:
        args.man.parent.mkdir(parents=True, exist_ok=True)
        args.man.write_text(man_page(), encoding="utf-8")
        print(f"wrote {args.man}")
    if args.page:
        print(GENERATORS[args.page]())


if __name__ == "__main__":
    main()
