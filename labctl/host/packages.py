"""Which of labctl's Debian packages this host lacks, and the one apt command that installs them.

The list is ``scripts/apt-packages.txt`` (the one list: ``scripts/setup-host.sh`` and the fleet's
``playbooks/roles/labctl`` read it too; a package carries it under ``labctl/_shipped/``): package names
separated by blanks, ``#`` starts a comment. dpkg says what is installed: ``dpkg-query --show
--showformat='${Package} ${db:Status-Status}\\n' NAME...`` prints ``NAME installed`` for an installed
package (dpkg-query(1)); a name dpkg has never seen is reported on stderr and makes it exit 1.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

from labctl import shipped

LIST = "scripts/apt-packages.txt"


def parse_list(text: str) -> list[str]:
    """The package names of the list's text, in order, each once."""
    names: list[str] = []
    for line in text.splitlines():
        for name in line.split("#", 1)[0].split():
            if name not in names:
                names.append(name)
    return names


def listed() -> list[str]:
    """The names in labctl's package list (the package's copy, else the checkout's)."""
    return parse_list(shipped.tree_path(LIST).read_text(encoding="utf-8"))


def installed(names: list[str]) -> set[str] | None:
    """The names dpkg reports installed; None where dpkg-query is missing or fails to answer."""
    if not names or shutil.which("dpkg-query") is None:
        return None
    try:
        done = subprocess.run(["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\n", *names],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1):
        return None
    return {line.split()[0].split(":")[0] for line in done.stdout.splitlines()
            if line.strip().endswith(" installed")}


@dataclass(frozen=True)
class Packages:
    """The list's names, the ones missing, and whether dpkg could be asked."""

    names: list[str]
    missing: list[str] = field(default_factory=list)
    known: bool = True  # False: no dpkg-query (not a Debian host), nothing could be checked

    @property
    def command(self) -> str:
        """The one line that installs every missing package ('' when none is missing)."""
        if not self.missing:
            return ""
        return "apt-get install --no-install-recommends " + " ".join(shlex.quote(n) for n in self.missing)

    def describe(self) -> str:
        if not self.known:
            return f"cannot tell: dpkg-query is not available (labctl's list: {len(self.names)} Debian packages)"
        if not self.missing:
            return f"all {len(self.names)} of labctl's Debian packages are installed"
        return f"{len(self.missing)} of {len(self.names)} missing: {', '.join(self.missing)}"

    def to_dict(self) -> dict:
        return {"listed": len(self.names), "missing": list(self.missing), "known": self.known,
                "command": self.command}


def check(names: list[str] | None = None) -> Packages:
    """The host's state against labctl's package list (or ``names``)."""
    names = listed() if names is None else names
    have = installed(names)
    if have is None:
        return Packages(names, [], known=False)
    return Packages(names, [n for n in names if n not in have])
