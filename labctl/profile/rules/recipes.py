"""Recipes: the rules of ``recipes:`` and of builds made by them (``builds: {name: {recipe, rev}}``), each with
its reason and source.

A recipe is checked without building anything: its repository is a git repository, its argv a program
and arguments without NUL bytes, its output a path inside the checkout, its environment names real
variable names. A build's ``rev`` must name a commit of its recipe's repository (``git rev-parse``), so a
typo is one line before any build or trial, not a failed build minutes later.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import PurePosixPath

from labctl.errors import Problem
from labctl.gitrepo import GitFailed, commit_of, repo_problem
from labctl.profile.rules.basics import NAME_PATTERN
from labctl.profile.rules.builds import env_problems
from labctl.profile.rules.registry import err, rule
from labctl.profile.schema import Profile

#: the longest a recipe's build may run (a QEMU or DPDK build from scratch on two cores takes minutes)
MAX_BUILD_S = 24 * 3600.0


@rule("recipes", "A recipe builds a binary labctl then starts as root, from a revision of a git repository: its "
      "argv runs in a clean checkout of that revision as its working directory, never through a shell (no word "
      "splitting, no expansion of what a profile says); its output must stay inside the checkout (an absolute path "
      "or '..' would name a file the revision did not build); its environment is part of the build's cache key, so "
      "it must be real variable names.",
      "execve(2) and Python subprocess (an argument list, cwd); git-clone(1) --shared and git-checkout(1) --detach; "
      "POSIX.1-2017 XBD 8.1 (environment variable names)")
def _recipes(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for name, recipe in p.recipes.items():
        where = f"recipes.{name}"
        if not NAME_PATTERN.match(name):
            yield err(where, f"{name[:40]!r} is not a recipe name (allowed: 1-40 of a-z, 0-9 and '-')")
        problem = repo_problem(recipe.repo)
        if problem:
            yield err(f"{where}.repo", problem)
        if not recipe.argv or not recipe.argv[0]:
            yield err(f"{where}.argv", "empty (allowed: a program and its arguments, e.g. [./build.sh] or "
                                        "[meson-build.sh, --release])")
        elif any("\0" in part for part in recipe.argv):
            yield err(f"{where}.argv", "contains a NUL byte (allowed: text without NUL)")
        else:
            program = recipe.argv[0]
            if os.path.isabs(program) and not os.access(program, os.X_OK):
                yield err(f"{where}.argv", f"{program[:80]} is not an executable file (allowed: an executable, a "
                                            "./path in the checkout, or a program on PATH)")
            elif "/" not in program and shutil.which(program) is None:
                yield err(f"{where}.argv", f"{program[:80]} is not on PATH (allowed: an absolute path, a ./path in "
                                            "the checkout, or a program on PATH)")
        out = PurePosixPath(recipe.output)
        if not recipe.output or out.is_absolute() or ".." in out.parts or "\0" in recipe.output:
            yield err(f"{where}.output", f"{recipe.output[:80]!r} is not a path inside the checkout (allowed: a "
                                          "relative path without '..', e.g. build/app/dpdk-testpmd)")
        yield from env_problems(f"{where}.env", recipe.env)
        if not 1.0 <= recipe.timeout_s <= MAX_BUILD_S:
            yield err(f"{where}.timeout_s", f"{recipe.timeout_s:g} is out of range (allowed: 1..{MAX_BUILD_S:g})")


@rule("recipe-builds", "A build made by a recipe is that recipe's output at one commit: rev must name a commit of "
      "the recipe's repository (resolved before anything is built, so a typo is one line, not a failed build); the "
      "recipe's role is given by its output, so the build cannot also name a path for that role.",
      "git-rev-parse(1) --verify REV^{commit}")
def _recipe_builds(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for name, build in p.builds.items():
        where = f"builds.{name}"
        if build.recipe is None:
            if build.rev is not None:
                yield err(f"{where}.rev", "a revision needs a recipe (allowed: recipe: NAME with rev:, or a path "
                                           "per role)")
            continue
        recipe = p.recipes.get(build.recipe)
        if recipe is None:
            yield err(f"{where}.recipe", f"{build.recipe[:40]!r} is not a recipe (allowed: "
                                          f"{', '.join(p.recipes) or 'none: add recipes:'})")
            continue
        if getattr(build, recipe.role) is not None:
            yield err(f"{where}.{recipe.role}", f"recipe {build.recipe} builds the {recipe.role} (allowed: leave "
                                                 f"{recipe.role} out, or the recipe out)")
        if not build.rev:
            yield err(f"{where}.rev", "required with a recipe (allowed: a commit, tag or branch of "
                                       f"{recipe.repo[:80]})")
        elif repo_problem(recipe.repo) is None:
            try:
                found = commit_of(recipe.repo, build.rev)
            except GitFailed as exc:
                yield err(f"{where}.rev", str(exc))
                continue
            if found is None:
                yield err(f"{where}.rev", f"{build.rev[:80]!r} names no commit of {recipe.repo[:80]} (allowed: a "
                                           "commit, tag or branch that git rev-parse resolves)")
