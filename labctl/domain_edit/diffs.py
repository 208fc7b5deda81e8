"""The unified diff ``labctl apply`` prints: the domain XML before and after."""

from __future__ import annotations

import difflib

__all__ = ["unified"]


def unified(before: str, after: str, name: str = "domain.xml") -> str:
    """``diff -u``-style text of ``before`` -> ``after`` (empty when they are equal)."""
    if before == after:
        return ""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{name}", tofile=f"b/{name}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
