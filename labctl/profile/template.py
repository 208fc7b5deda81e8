"""``workload.command``: the user's forwarder as a command template with named fields.

The template is split into an argument list with ``shlex.split`` (POSIX shell word rules, Python's shlex
documentation) and each field (``{pci0}``, ``{cores}``, ...) is filled inside its own argument: nothing is
ever run through a shell. Only the named fields are allowed, written plainly: no attribute or index access,
no format spec or conversion (Python's format-string syntax would otherwise reach into objects).
"""

from __future__ import annotations

import shlex
import string

FIELDS = ("pci0", "pci1", "cores", "rxd", "txd", "burst", "queues")


class TemplateProblem(Exception):
    """Why a template is refused (one line, naming the field and the allowed ones)."""


def _parts(word: str) -> list[tuple[str, str | None]]:
    try:
        parsed = list(string.Formatter().parse(word))
    except ValueError as exc:
        raise TemplateProblem(f"{word!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
    out = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (name not in FIELDS or spec or conversion):
            shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise TemplateProblem(f"{{{shown}}} is not a field (allowed: {', '.join('{' + f + '}' for f in FIELDS)})")
        out.append((literal, name))
    return out


def split(template: str) -> list[str]:
    """The template's words, every field checked."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise TemplateProblem(f"cannot be split into arguments ({exc})") from None
    if not words:
        raise TemplateProblem("is empty (allowed: a command and its arguments)")
    for word in words:
        _parts(word)
    return words


def fields_used(template: str) -> set[str]:
    return {name for word in split(template) for _lit, name in _parts(word) if name}


def fill(template: str, values: dict[str, object]) -> list[str]:
    """The argv: each word with its fields filled (a field without a value: TemplateProblem)."""
    argv = []
    for word in split(template):
        text = []
        for literal, name in _parts(word):
            text.append(literal)
            if name is not None:
                if values.get(name) is None:
                    raise TemplateProblem(f"{{{name}}} has no value in this lab (the guest has fewer NICs?)")
                text.append(str(values[name]))
        argv.append("".join(text))
    return argv
