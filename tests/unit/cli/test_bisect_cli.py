"""``labctl bisect``'s bad input: one line naming the option (and what is allowed), exit 2, before any build
and before the store is created."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import DOMAINS
from tests.factories import git_history

BUILD = """#!/bin/sh
echo "$LABCTL_COMMIT" >> "$COUNTER"
mkdir -p out && printf '#!/bin/sh\\nexec true\\n' > out/fwd && chmod 755 out/fwd
"""


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("LABCTL_BUILD_CACHE_DIR", str(tmp_path / "cache"))
    shas = git_history(tmp_path / "src", [{"build.sh": BUILD}, {"a": "1\n"}, {"a": "2\n"}])
    data = yaml.safe_load((DOMAINS / "vnf.yaml").read_text())
    data["recipes"] = {"fwd": {"repo": str(tmp_path / "src"), "argv": ["./build.sh"], "output": "out/fwd",
                               "role": "forwarder", "env": {"COUNTER": str(tmp_path / "count")}}}
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(data))
    return profile, shas


@pytest.mark.parametrize("args, first", [
    (["--good", "v0.0-nope", "--bad", "main"], "--good v0.0-nope: not a revision of "),
    (["--good", "main~2", "--bad", "deadbeef"], "--bad deadbeef: not a revision of "),
    (["--good", "main", "--bad", "main~2"], "--good main: not an ancestor of --bad main~2 (allowed: "),
    (["--good", "main~1", "--bad", "main~1"], "--bad main~1: the same commit as --good main~1 (allowed: "),
    (["--bad", "main"], "--good: required (allowed: "),
    (["--good", "main~2", "--bad", "main", "--budget", "5"], "--budget 5: less than the "),
    (["--good", "main~2", "--bad", "main", "--threshold", "0"], "--threshold 0: out of range (allowed: "),
    (["--good", "main~2", "--bad", "main", "--metric", "speed"], "--metric speed: "),
    (["--good", "main~2", "--bad", "main", "--step-blocks", "2"], "--step-blocks 2: out of range (allowed: 3..100"),
    (["--good", "main~2", "--bad", "main", "--html", "x.txt"], "--html x.txt: the page is written as HTML"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_build(cli, setup, tmp_path, args, first):
    profile, _shas = setup
    db = tmp_path / "b.db"
    code, out, err = cli("bisect", str(profile), "--recipe", "fwd", *args, "--db", str(db))
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(first) and "allowed" in lines[0], lines
    assert not (tmp_path / "count").exists() and not db.exists()


def test_an_unknown_recipe_names_the_profiles(cli, setup, tmp_path):
    profile, _shas = setup
    code, _, err = cli("bisect", str(profile), "--recipe", "dpdk", "--good", "main~2", "--bad", "main",
                       "--db", str(tmp_path / "b.db"))
    assert code == 2 and err.strip() == "--recipe dpdk: not a recipe of vnf (allowed: fwd)"


def test_bisect_show_without_a_bisect_says_so(cli, tmp_path):
    from labctl.results.store import Store

    Store(tmp_path / "e.db").close()
    code, _, err = cli("bisect-show", "--db", str(tmp_path / "e.db"))
    assert code == 2 and "holds no bisect (allowed: run labctl bisect first)" in err
