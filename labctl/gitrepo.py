"""A git repository as labctl reads it: revisions resolved to commits, ancestry, a first-parent range,
subjects. Every call is ``git -C REPO ...`` as an argument list (never a shell), with ``--end-of-options``
before a revision the user wrote (a revision that starts with ``-`` is a name, never an option), a bound
on its time, a C locale and no terminal prompt. Used by the profile rules (a recipe's repository and a
build's ``rev``), the recipe builder (``labctl.lab.recipes``) and the bisect (``labctl.measure.bisect``).

Sources: git-rev-parse(1) (``--verify``, ``REV^{commit}``), git-merge-base(1) (``--is-ancestor``: exit 0
yes, 1 no), git-rev-list(1) (``--first-parent``, ``--reverse``, ``A..B``), gitcli(7) (``--end-of-options``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from labctl.errors import GitFailed

GIT_TIMEOUT_S = 120.0
SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def _env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    return {**keep, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}


def run_git(repo: str | Path, *args: str, check: bool = True, timeout_s: float = GIT_TIMEOUT_S
            ) -> subprocess.CompletedProcess[str]:
    """``git -C repo args`` (text out); ``check``: a non-zero exit is :class:`GitFailed` with git's last line."""
    if shutil.which("git") is None:
        raise GitFailed("git is not installed (allowed: apt-get install git)")
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_s, env=_env(), check=False)
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git -C {repo} {' '.join(args[:2])}: no answer within {timeout_s:g} s") from None
    if check and done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        raise GitFailed(f"git -C {repo} {' '.join(args[:2])}: {lines[-1] if lines else f'exit {done.returncode}'}")
    return done


def repo_problem(repo: str) -> str | None:
    """Why ``repo`` is not a git repository labctl can read, or None."""
    if not os.path.isabs(repo):
        return f"{repo[:80]!r} is not an absolute path (allowed: /path/to/a/git/repository)"
    if not os.path.isdir(repo):
        return f"{repo[:80]}: no such directory (allowed: a git repository)"
    try:
        done = run_git(repo, "rev-parse", "--git-dir", check=False)
    except GitFailed as exc:
        return str(exc)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        return f"{repo[:80]}: not a git repository ({lines[-1] if lines else 'git rev-parse failed'})"
    return None


def commit_of(repo: str | Path, rev: str) -> str | None:
    """The full sha of the commit ``rev`` names in ``repo``, or None when it names none."""
    if not rev or "\0" in rev:
        return None
    done = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and SHA.match(sha) else None


def is_ancestor(repo: str | Path, older: str, newer: str) -> bool:
    """True when commit ``older`` is an ancestor of (or is) ``newer``."""
    done = run_git(repo, "merge-base", "--is-ancestor", older, newer, check=False)
    if done.returncode not in (0, 1):
        raise GitFailed(f"git -C {repo} merge-base --is-ancestor: {done.stderr.strip() or done.returncode}")
    return done.returncode == 0


def first_parent_range(repo: str | Path, good: str, bad: str) -> list[str]:
    """The commits of ``good..bad`` along ``bad``'s first parents, oldest first (``bad`` last)."""
    out = run_git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").stdout
    return [line for line in out.split() if SHA.match(line)]


def subjects(repo: str | Path, shas: list[str]) -> dict[str, str]:
    """Each commit's subject line (git log's %s)."""
    if not shas:
        return {}
    out = run_git(repo, "show", "-s", "--format=%H %s", *shas).stdout
    found = {}
    for line in out.splitlines():
        sha, _, subject = line.partition(" ")
        if SHA.match(sha):
            found[sha] = subject
    return found
