"""Builds from git revisions: a recipe's argv run in a clean checkout of one commit, its output kept in a
cache keyed by what made it, so that the resolver (:mod:`labctl.lab.builds`) finds the binary as it finds
any build's.

A build, step by step (:func:`build`; the cache is :class:`~labctl.lab.libvirt.buildcache.BuildCache`, the
appliance's and the guest image's, one directory per recipe):

1. the key: sha256 over the commit, the recipe (argv, output, role), the recipe's environment, and the
   sha256 of the program argv[0] names when it lives outside the checkout (an absolute path, or a program
   on PATH): a changed build script is another build. Found in the cache: done, nothing runs;
2. the recipe directory's lock (one build of a recipe at a time; a killed build's work directory is
   freed and removed);
3. a clean checkout of the commit in a new work directory: ``git clone --shared --no-checkout`` of the
   repository (the clone borrows the repository's objects and writes nothing into it) and ``git checkout
   --detach COMMIT``;
4. ``argv`` run there (its working directory), never through a shell, in a process group of its own
   that dies with labctl, bounded by ``timeout_s``, in a small environment: PATH with ccache's compiler
   links first (``/usr/lib/ccache``: cc, gcc, g++ run through ccache, Debian's ccache package) when
   ccache is installed, HOME, LC_ALL=C, ``CCACHE_DIR`` (the cache's own), ``CCACHE_BASEDIR`` (the
   checkout: its paths hashed relative to it, so a commit built in another work directory hits) and
   ``CCACHE_NOHASHDIR``, ``LABCTL_COMMIT``, then the recipe's ``env``. Everything it prints goes to
   ``build.log``;
5. ``output`` must then be an executable regular file inside the checkout; it is copied (mode 0755)
   into the entry, with ``build.log`` and ``manifest.json`` (commit, recipe, key, the time the build
   took, ccache's hits and misses, the output's sha256), and the entry is published by one rename.
   The checkout goes with the work directory: the output must not need it at run time (DPDK's testpmd
   built by meson links its drivers statically; an output that needs more takes it through the build's
   ``env``). The newest :data:`KEEP_ENTRIES` builds of a recipe are kept.

A failed build (non-zero exit, timeout, no output) is a :class:`~labctl.errors.BuildError` naming the
commit and the log, which is kept in the cache (``failed/COMMIT-KEY.log``); nothing is published, so the
next request builds it again. ``LABCTL_BUILD_CACHE_DIR`` moves the cache (default
``/var/cache/labctl/builds`` for root).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labctl import signals
from labctl.digest import sha256_file
from labctl.errors import BuildError, PlanError
from labctl.gitrepo import commit_of, run_git
from labctl.lab.libvirt.buildcache import BuildCache
from labctl.lab.libvirt.buildtools import Progress, die_with_parent, say, stop_group
from labctl.paths import cache_dir
from labctl.profile.schema import Profile, Recipe

CACHE_VARIABLE = "LABCTL_BUILD_CACHE_DIR"
MANIFEST = "manifest.json"  # an entry's metadata, written last
#: builds of one recipe kept, newest first: a bisect's commits and a sweep's builds stay in the cache
KEEP_ENTRIES = 200
#: Debian's ccache package links cc, gcc, g++ (and their versioned names) to ccache here
CCACHE_LINKS = Path("/usr/lib/ccache")
#: bumped when what goes into a key changes (old entries are then simply not found)
KEY_FORMAT = 1



@dataclass(frozen=True)
class RecipeBuild:
    """One recipe at one revision, as a build names it (frozen: part of the lab plan and its domain key)."""

    name: str
    repo: str
    rev: str
    argv: tuple[str, ...]
    output: str
    role: str
    env: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 3600.0

    @classmethod
    def of(cls, name: str, recipe: Recipe, rev: str) -> "RecipeBuild":
        return cls(name, recipe.repo, rev, tuple(recipe.argv), recipe.output, recipe.role,
                   tuple(sorted(recipe.env.items())), recipe.timeout_s)

    def commit(self) -> str:
        """The full sha ``rev`` names now (a branch may have moved since the profile was validated)."""
        found = commit_of(self.repo, self.rev)
        if found is None:
            raise PlanError(f"recipes.{self.name}: {self.rev[:80]!r} names no commit of {self.repo} (allowed: a "
                            "commit, tag or branch that git rev-parse resolves)")
        return found


@dataclass(frozen=True)
class Built:
    """A build in the cache: the output's path, the commit, the key, and whether this call built it."""

    path: Path
    commit: str
    key: str
    manifest: dict[str, Any]
    built_now: bool = False


def root() -> Path:
    return cache_dir(CACHE_VARIABLE, "builds")


def _program_identity(argv0: str) -> str | None:
    """The sha256 of the program argv[0] names outside the checkout (None: it is the checkout's own)."""
    if argv0.startswith("./") or ("/" in argv0 and not os.path.isabs(argv0)):
        return None  # a path in the checkout: the commit already says what it is
    found = argv0 if os.path.isabs(argv0) else shutil.which(argv0)
    return sha256_file(found) if found and os.path.isfile(found) else None


def key_of(spec: RecipeBuild, commit: str) -> str:
    """What a build is, as a cache key: the commit, the recipe, its environment, its program outside the
    checkout (module docstring, step 1)."""
    what = {"format": KEY_FORMAT, "commit": commit, "argv": list(spec.argv), "output": spec.output, "role": spec.role,
            "env": dict(spec.env), "program": _program_identity(spec.argv[0])}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _load(entry: Path, built: bool) -> Built | None:
    """A complete entry (its manifest written last, its output there) as a :class:`Built`, else None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    output = entry / "output" / Path(str(manifest.get("output", ""))).name
    return Built(output, manifest["commit"], manifest["key"], manifest, built) if output.is_file() else None


def _cache(spec: RecipeBuild) -> BuildCache[Built]:
    return BuildCache(root() / spec.name, _load, MANIFEST, BuildError, keep=KEEP_ENTRIES, mode=0o755)


def cached(spec: RecipeBuild, commit: str | None = None) -> Built | None:
    """The build of ``spec`` at ``commit`` (default: what its rev names now) when the cache holds it."""
    commit = commit or spec.commit()
    return _cache(spec).lookup(key_of(spec, commit))


def output_path(spec: RecipeBuild, label: str | None) -> tuple[str, str]:
    """The cached output of a build made by a recipe (the resolver's question) and its commit; a build not
    made yet is a one-line :class:`PlanError` (labctl builds before it measures: :func:`prepare`)."""
    commit = spec.commit()
    found = cached(spec, commit)
    if found is None:
        raise PlanError(f"builds.{label}: recipe {spec.name} at {spec.rev} (commit {commit[:12]}) is not built yet "
                        f"(labctl builds it before measuring; {root()} holds none for it)")
    return str(found.path), commit


def build(spec: RecipeBuild, commit: str | None = None, progress: Progress = None) -> Built:
    """The output of ``spec`` at ``commit`` (default: its rev), from the cache or built now (module docstring)."""
    commit = commit or spec.commit()
    key = key_of(spec, commit)
    root().mkdir(parents=True, exist_ok=True)
    root().chmod(0o755)  # QEMU (libvirt-qemu) runs a qemu build's emulator from here
    return _cache(spec).build(key, lambda work, entry: _make(spec, commit, key, work, entry, progress),
                              progress=progress)


def _make(spec: RecipeBuild, commit: str, key: str, work: Path, entry: Path, progress: Progress) -> dict[str, Any]:
    """Build ``commit`` in a checkout under ``work``; fill ``entry`` (output, log); return the manifest."""
    checkout = work / "checkout"
    log_path = entry / "build.log"
    started = time.monotonic()
    say(progress, f"recipe {spec.name}: building {commit[:12]}" + ("" if commit.startswith(spec.rev) else f" ({spec.rev})"))
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"# labctl recipe {spec.name}: commit {commit} ({spec.rev}), key {key}\n"
                  f"# argv {json.dumps(list(spec.argv))} in a clean checkout; output {spec.output}\n")
        log.flush()
        run_git(spec.repo, "clone", "--quiet", "--shared", "--no-checkout", "--", spec.repo, str(checkout))
        run_git(checkout, "checkout", "--quiet", "--detach", commit)
        before = _ccache_stats()
        code = _run(spec, commit, checkout, log)
        after = _ccache_stats()
        took = time.monotonic() - started
        log.write(f"# exit {code} after {took:.1f} s\n")
    if code != 0:
        raise _failure(spec, commit, key, log_path, f"exit {code}" if code >= 0 else f"signal {-code}")
    output = checkout / spec.output
    problem = _output_problem(checkout, output)
    if problem:
        raise _failure(spec, commit, key, log_path, problem)
    (entry / "output").mkdir(mode=0o755)
    kept = entry / "output" / output.name
    shutil.copyfile(output, kept)
    os.chmod(kept, 0o755)
    manifest = {"recipe": spec.name, "repo": spec.repo, "rev": spec.rev, "commit": commit, "key": key,
                "argv": list(spec.argv), "output": spec.output, "role": spec.role, "env": dict(spec.env),
                "built_at": time.time(), "build_s": round(took, 1), "sha256": sha256_file(kept),
                "ccache": _ccache_delta(before, after)}
    compiled = manifest["ccache"] and manifest["ccache"]["hits"] + manifest["ccache"]["misses"]
    say(progress, f"recipe {spec.name}: built {commit[:12]} in {took:.0f} s"
                  + (f" (ccache: {manifest['ccache']['hits']} hits, {manifest['ccache']['misses']} misses)"
                     if compiled else ""))
    return manifest


def _run(spec: RecipeBuild, commit: str, work: Path, log) -> int:
    """The recipe's argv in ``work``; its exit code (negative: the signal that ended it)."""
    try:
        proc = subprocess.Popen(list(spec.argv), cwd=work, env=_environment(spec, commit, work), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=die_with_parent())
    except OSError as exc:
        log.write(f"# cannot start {spec.argv[0]}: {exc.strerror}\n")
        return 127
    deadline = time.monotonic() + spec.timeout_s
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                stop_group(proc)
                log.write(f"# timed out after {spec.timeout_s:g} s (recipes.{spec.name}.timeout_s)\n")
                return -9
            signals.sleep(0.2)
    except BaseException:
        stop_group(proc)  # SIGINT, SIGTERM, a face's cancel: nothing keeps building after labctl stops
        raise
    return int(proc.returncode)


def _environment(spec: RecipeBuild, commit: str, work: Path) -> dict[str, str]:
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "LC_ALL": "C", "LABCTL_COMMIT": commit}
    if shutil.which("ccache") and CCACHE_LINKS.is_dir():
        env.update(PATH=f"{CCACHE_LINKS}:{path}", CCACHE_DIR=str(root() / "ccache"), CCACHE_BASEDIR=str(work),
                   CCACHE_NOHASHDIR="true")
    env.update(dict(spec.env))
    return env


def _ccache_stats() -> dict[str, int] | None:
    """ccache's counters for the cache's own ccache directory (``--print-stats``), None without ccache."""
    if not shutil.which("ccache"):
        return None
    try:
        done = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, timeout=30,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CCACHE_DIR": str(root() / "ccache")},
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    stats = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isdigit():
            stats[name.strip()] = int(value)
    return stats


def _ccache_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    if before is None or after is None:
        return None
    hits = sum(after.get(k, 0) - before.get(k, 0) for k in ("direct_cache_hit", "preprocessed_cache_hit"))
    return {"hits": hits, "misses": after.get("cache_miss", 0) - before.get("cache_miss", 0)}


def _output_problem(work: Path, output: Path) -> str | None:
    try:
        real = output.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"no output {output.relative_to(work)} after the build"
    if not real.is_relative_to(work.resolve()):
        return f"output {output.relative_to(work)} leads out of the checkout ({real})"
    info = real.stat()
    if not stat.S_ISREG(info.st_mode) or not info.st_mode & 0o111:
        return f"output {output.relative_to(work)} is not an executable file"
    return None


def _failure(spec: RecipeBuild, commit: str, key: str, log_path: Path, why: str) -> BuildError:
    """Keep the log (``RECIPE/failed/COMMIT-KEY.log``) and say what failed, naming the commit and the log."""
    failed = root() / spec.name / "failed"
    failed.mkdir(mode=0o755, exist_ok=True)
    kept = failed / f"{commit[:12]}-{key[:8]}.log"
    shutil.copyfile(log_path, kept)
    lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip() and not ln.startswith("# ")]
    errors = [ln for ln in lines if "error" in ln.lower()]  # the first compiler error, not make's summary
    last = f": {(errors or lines)[0 if errors else -1].strip()[:160]}" if lines else ""
    rev = "" if commit.startswith(spec.rev) else f" ({spec.rev})"
    return BuildError(f"recipe {spec.name}: the build of commit {commit[:12]}{rev} failed ({why}{last}); log {kept}",
                      commit=commit, log=str(kept))


def profile_builds(profile: Profile) -> dict[str, RecipeBuild]:
    """Every build of ``profile`` made by a recipe that its trials may run (its ``build`` and the builds
    its sweep names), by build name."""
    names = {profile.build, *profile.sweep.get("build", [])} - {None}
    out = {}
    for name in sorted(map(str, names)):
        b = profile.builds.get(name)
        if b is not None and b.recipe is not None and b.rev is not None and b.recipe in profile.recipes:
            out[name] = RecipeBuild.of(b.recipe, profile.recipes[b.recipe], b.rev)
    return out


def prepare(profile: Profile, progress: Progress = None) -> dict[str, Built]:
    """Build (or find in the cache) every recipe build ``profile`` may run, before anything is measured; a
    failed build is a :class:`BuildError` naming the commit and the log."""
    return {name: build(spec, progress=progress) for name, spec in profile_builds(profile).items()}
