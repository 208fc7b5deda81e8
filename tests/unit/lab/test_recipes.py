"""Builds from git revisions: a recipe's argv in a clean checkout (never a shell), the cache keyed by commit,
recipe and environment, ccache in the build's environment, the log kept, a failed build naming its commit."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from labctl.errors import BuildError, PlanError, ProfileError
from labctl.lab import recipes
from labctl.lab.builds import resolve
from labctl.lab.plan import derive
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS
from tests.factories import git_history

CPUS = frozenset({0, 1})

#: the recipe's build script, committed in the repository: it counts its runs, keeps what it was given
#: (its arguments, its environment) and writes the "binary" the revision's speed.txt names
BUILD = """#!/bin/sh
set -e
echo run >> "$COUNTER"
[ ! -e broken ] || { echo "error: this revision does not compile" >&2; exit 3; }
mkdir -p out
{ printf '#!/bin/sh\\n# speed %s\\n' "$(cat speed.txt)"
  for a in "$@"; do printf '# arg %s\\n' "$a"; done
  env | sed 's/^/# env /'
  printf 'exec true\\n'; } > out/fwd
chmod 755 out/fwd
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("LABCTL_BUILD_CACHE_DIR", str(tmp_path / "cache"))
    shas = git_history(tmp_path / "src", [{"build.sh": BUILD, "speed.txt": "1\n"}, {"speed.txt": "2\n"},
                                          {"broken": "x\n", "_subject": "break the build"}])
    return tmp_path / "src", shas


def spec(repo: Path, rev: str, counter: Path, argv=("./build.sh",), **env) -> recipes.RecipeBuild:
    return recipes.RecipeBuild("fwd", str(repo), rev, tuple(argv), "out/fwd", "forwarder",
                               tuple(sorted({"COUNTER": str(counter), **env}.items())), 60.0)


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_a_build_runs_once_per_commit_recipe_and_environment(repo, tmp_path):
    src, shas = repo
    counter = tmp_path / "count"
    first = recipes.build(spec(src, shas[0], counter))
    assert first.built_now and first.commit == shas[0] and runs(counter) == 1
    assert "# speed 1" in first.path.read_text() and os.stat(first.path).st_mode & 0o777 == 0o755
    manifest = json.loads((first.path.parent.parent / "manifest.json").read_text())
    assert manifest["commit"] == shas[0] and manifest["sha256"] and manifest["build_s"] >= 0
    assert "exit 0" in (first.path.parent.parent / "build.log").read_text()
    again = recipes.build(spec(src, "main~2", counter))  # another name of the same commit: the cache
    assert not again.built_now and again.path == first.path and runs(counter) == 1
    other = recipes.build(spec(src, shas[1], counter))
    assert other.path != first.path and "# speed 2" in other.path.read_text() and runs(counter) == 2
    flags = recipes.build(spec(src, shas[0], counter, CFLAGS="-O3"))  # the recipe's environment is in the key
    assert flags.built_now and flags.path != first.path and runs(counter) == 3
    assert not list((recipes.root() / "fwd").glob(".build-*"))  # the checkout is gone with its work directory


def test_argv_is_never_a_shell_and_the_environment_is_small_with_ccache(repo, tmp_path, monkeypatch):
    src, shas = repo
    monkeypatch.setenv("SECRET_OF_LABCTL", "x")
    built = recipes.build(spec(src, shas[0], tmp_path / "count", argv=("./build.sh", "a; touch pwned", "$HOME")))
    lines = built.path.read_text().splitlines()
    assert [ln[6:] for ln in lines if ln.startswith("# arg ")] == ["a; touch pwned", "$HOME"]
    assert not (src / "pwned").exists() and not (tmp_path / "pwned").exists()
    env = dict(ln[6:].split("=", 1) for ln in lines if ln.startswith("# env ") and "=" in ln)
    assert env["LABCTL_COMMIT"] == shas[0] and env["COUNTER"] == str(tmp_path / "count") and env["LC_ALL"] == "C"
    assert "SECRET_OF_LABCTL" not in env and "LABCTL_BUILD_CACHE_DIR" not in env  # labctl's environment is not the build's
    if shutil.which("ccache") and recipes.CCACHE_LINKS.is_dir():
        assert env["PATH"].startswith(f"{recipes.CCACHE_LINKS}:") and env["CCACHE_DIR"] == str(recipes.root() / "ccache")
        basedir = env["CCACHE_BASEDIR"]  # the checkout, in the build's own work directory
        assert basedir.startswith(str(recipes.root() / "fwd" / ".build-")) and basedir.endswith("/checkout")


def test_a_failed_build_names_the_commit_and_keeps_its_log(repo, tmp_path):
    src, shas = repo
    counter = tmp_path / "count"
    with pytest.raises(BuildError) as caught:
        recipes.build(spec(src, shas[2], counter))
    message = str(caught.value)
    assert "\n" not in message and shas[2][:12] in message and "exit 3" in message
    assert "this revision does not compile" in message
    assert caught.value.commit == shas[2] and Path(caught.value.log).is_file()
    assert "error: this revision does not compile" in Path(caught.value.log).read_text()
    assert recipes.cached(spec(src, shas[2], counter)) is None  # nothing published: asked again, built again
    with pytest.raises(BuildError):
        recipes.build(spec(src, shas[2], counter))
    assert runs(counter) == 2


def test_a_build_that_outlives_its_timeout_is_stopped(repo, tmp_path):
    src, shas = repo
    slow = recipes.RecipeBuild("slow", str(src), shas[0], ("sleep", "30"), "out/fwd", "forwarder", (), 1.0)
    with pytest.raises(BuildError, match="signal 9"):
        recipes.build(slow)
    assert "timed out after 1 s" in Path(recipes.root() / "slow" / "failed").glob("*.log").__next__().read_text()


def _profile(tmp_path: Path, src: Path, counter: Path, rev: str, **extra) -> Path:
    data = yaml.safe_load((DOMAINS / "vnf.yaml").read_text())
    data["recipes"] = {"fwd": {"repo": str(src), "argv": ["./build.sh"], "output": "out/fwd", "role": "forwarder",
                               "env": {"COUNTER": str(counter)}, **extra}}
    data["builds"] = {"stock": {}, "mine": {"recipe": "fwd", "rev": rev}}
    data["build"] = "mine"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_recipe_build_resolves_to_its_cached_output_and_records_its_commit(repo, tmp_path):
    from labctl.measure.labs import check_measurable

    src, shas = repo
    counter = tmp_path / "count"
    loaded = load_profile(_profile(tmp_path, src, counter, "main~1"), cpus=CPUS)
    plan = derive(loaded.profile)
    assert plan.build.recipe is not None and plan.build.gives("forwarder") and not plan.build.gives("vswitch")
    with pytest.raises(PlanError, match=r"builds.mine: recipe fwd at main~1 \(commit [0-9a-f]{12}\) is not built yet"):
        resolve(plan.build, "forwarder")
    check_measurable(loaded.profile)  # builds it before anything is measured
    program = resolve(plan.build, "forwarder")
    record = program.record()
    assert record["commit"] == shas[1] and record["recipe"] == "fwd" and record["build"] == "mine"
    assert "# speed 2" in Path(program.path).read_text()
    check_measurable(loaded.profile)
    assert runs(counter) == 1
    assert "recipes.fwd" not in " ".join(loaded.data)  # the recipes table is not a knob
    from labctl.profile.knobs import flatten

    assert not any(k.startswith(("recipes", "builds")) for k in flatten(loaded.profile.model_dump()))


@pytest.mark.parametrize("change, field", [
    ({"rev": "no-such-branch"}, "builds.mine.rev"),
    ({"recipe": "nope"}, "builds.mine.recipe"),
    ({"forwarder": "/usr/bin/dpdk-testpmd"}, "builds.mine.forwarder"),
    ({"recipe": None}, "builds.mine.rev"),
    ({"repo": "/nowhere"}, "recipes.fwd.repo"),
    ({"output": "../escape"}, "recipes.fwd.output"),
    ({"argv": []}, "recipes.fwd.argv"),
    ({"argv": ["no-such-program-here"]}, "recipes.fwd.argv"),
    ({"env": {"1BAD": "x"}}, "recipes.fwd.env"),
])
def test_bad_recipes_and_recipe_builds_are_one_line_naming_the_field(repo, tmp_path, change, field):
    src, shas = repo
    path = _profile(tmp_path, src, tmp_path / "count", shas[1])
    data = yaml.safe_load(path.read_text())
    target = data["builds"]["mine"] if field.startswith("builds") else data["recipes"]["fwd"]
    for key, value in change.items():
        if value is None:
            target.pop(key)
        else:
            target[key] = value
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError) as caught:
        load_profile(path, cpus=CPUS)
    assert any(p.path == field and "allowed" in p.message for p in caught.value.problems), caught.value.problems
    assert not (tmp_path / "count").exists()  # nothing was built


def test_the_ci_example_profile_is_valid_but_for_the_paths_of_the_lab_host(tmp_path):
    """ci/recipes/dpdk-bisect.example.yaml names paths on a lab host: here only those are refused."""
    from tests.conftest import ROOT

    with pytest.raises(ProfileError) as caught:
        load_profile(ROOT / "ci" / "recipes" / "dpdk-bisect.example.yaml", cpus=CPUS)
    assert {p.path for p in caught.value.problems} == {"recipes.dpdk.repo", "recipes.dpdk.argv"}
