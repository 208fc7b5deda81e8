"""Builds as knobs on real labs: an A/B of forwarder builds on the embedded lab with a planted effect, and a
QEMU build that re-defines a libvirt guest with its <emulator>.

Never a throughput threshold: the planted handicap is judged by ``labctl compare --by build`` (its
statistics), and the records are checked for what ran (paths, hashes, versions, labels).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from labctl.results.store import Store
from tests.conftest import DOMAINS
from tests.integration.conftest import LIBVIRT_URI, needs_dpdk, needs_libvirtd
from tests.factories import build_binary

TESTPMD = "/usr/bin/dpdk-testpmd"
#: The planted handicap: 16 times the noisy-mode reads per packet domains/vnf.yaml asks (128). Options after
#: the command line's "--" are testpmd's and the last of a repeated option wins, so appended ones override.
SLOW_READS = 2048


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def builds(tmp_path) -> dict[str, Path]:
    """``same``: a byte-identical copy of Debian's testpmd; ``slow``: a /bin/sh wrapper that execs it with
    the handicap; each named dpdk-testpmd (so leftover checks find its processes), root-owned, mode 0755."""
    os.chmod(tmp_path, 0o755)
    return {"same": build_binary(tmp_path / "builds" / "same", copy_of=TESTPMD),
            "slow": build_binary(tmp_path / "builds" / "slow",
                                 script=f'exec {TESTPMD} "$@" --noisy-lkup-num-reads={SLOW_READS}')}


def ab_profile(tmp_path: Path, builds: dict[str, Path], repeat: int = 3) -> Path:
    data = yaml.safe_load((DOMAINS / "vnf.yaml").read_text())
    data["name"] = "it-builds"
    data["workload"].update(duration_s=2, warmup_s=0.5)
    data["builds"] = {"base": {}, "same": {"forwarder": str(builds["same"])}, "slow": {"forwarder": str(builds["slow"])}}
    data["sweep"] = {"build": ["base", "same", "slow"]}
    data["repeat"] = repeat
    path = tmp_path / "builds.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@needs_dpdk
def test_a_three_build_sweep_alternates_and_records_every_binary(no_leftovers, tmp_path, builds, cli):
    # 5 repeats: with two candidates judged together (family-wise 97.5% per interval) fewer trials a side
    # cannot reach a verdict by chance alone (compare.repeats_needed)
    profile = ab_profile(tmp_path, builds, repeat=5)
    db = tmp_path / "ab.db"
    code, out, err = cli("sweep", str(profile), "--db", str(db))
    assert code == 0, err
    with Store(db) as store:
        run_id = store.latest_run_id()
        plan = store.plan(run_id)
        records = store.trials(run_id, status=None)
        info = store.run(run_id)["info"]
    # builds alternate within every repeat: A B C A B C A B C, never all of one build first
    assert [e["config"]["build"] for e in plan] == ["base", "same", "slow"] * 5
    assert info["order"] == "interleaved"
    assert len(records) == 15 and all(r.status == "ok" for r in records), [r.error for r in records]
    assert [r.config["build"] for r in records] == ["base", "same", "slow"] * 5
    debian = _sha256(Path(TESTPMD))
    for record in records:
        forwarder = record.env.binaries["forwarder"]
        assert forwarder["build"] == record.config["build"]
        assert forwarder["version"].startswith("DPDK 22.11")
        if record.config["build"] == "slow":
            assert forwarder["path"] == str(builds["slow"]) and forwarder["sha256"] == _sha256(builds["slow"])
        elif record.config["build"] == "same":
            assert forwarder["path"] == str(builds["same"]) and forwarder["sha256"] == debian
        else:
            assert forwarder["path"] == os.path.realpath(TESTPMD) and forwarder["sha256"] == debian
        assert "builds.slow.forwarder" not in record.config  # the table is not a knob; the binaries are recorded
    # the per-patch verdict: slow (16x the noisy reads per packet) a regression, the copy neither
    code, out, err = cli("compare", "--db", str(db), "--run", str(run_id), "--by", "build", "--baseline", "base",
                         "--format", "json")
    assert code == 1, (out, err)  # a regression
    verdicts = {row["candidate_value"]: row["verdict"] for row in json.loads(out)["verdicts"]}
    assert verdicts["slow"] == "regression", out
    assert verdicts["same"] not in ("regression", "progression"), out
    code, out, err = cli("compare", "--db", str(db), "--run", str(run_id), "--by", "build", "--baseline", "base",
                         "--format", "post")
    assert code == 1 and "build: base vs slow" in out and "regression" in out, (out, err)


@needs_dpdk
@pytest.mark.parametrize("case", ["missing", "not-executable", "world-writable", "unknown-name"])
def test_a_bad_build_is_one_line_and_exit_2_with_nothing_started(no_leftovers, tmp_path, builds, cli, case):
    profile = ab_profile(tmp_path, builds, repeat=1)
    data = yaml.safe_load(profile.read_text())
    if case == "missing":
        data["builds"]["same"]["forwarder"] = str(tmp_path / "nowhere" / "dpdk-testpmd")
    elif case == "not-executable":
        os.chmod(builds["same"], 0o644)
    elif case == "world-writable":
        os.chmod(builds["same"], 0o757)
    else:
        data["sweep"]["build"] = ["base", "nope"]
    profile.write_text(yaml.safe_dump(data))
    db = tmp_path / "bad.db"
    for command in (("run", str(profile), "--set", "build=same"), ("sweep", str(profile), "--db", str(db))):
        if case == "unknown-name" and command[0] == "run":
            command = ("run", str(profile), "--set", "build=nope")
        code, out, err = cli(*command)
        assert code == 2, (command, out, err)
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert len(lines) == 1, lines
        assert ("build" in lines[0]) and ("allowed" in lines[0]), lines[0]
    assert not db.exists()


QEMU = "/usr/bin/qemu-system-x86_64"


@needs_libvirtd  # a marker, so that without libvirtd the test skips before clean_lab (which asks libvirtd) runs
def test_a_qemu_build_redefines_the_domain_with_its_emulator(clean_lab, tmp_path, cli):
    """A wrapper around the host's emulator as build ``wrapped``: `labctl up` defines and boots the domain with
    that <emulator> (libvirt's live XML says so), `labctl down` leaves nothing."""
    import libvirt

    wrapper = build_binary(Path(os.environ["LABCTL_RUN_DIR"]).parent / "qemu-build", "qemu-wrapped",
                           script=f'exec {QEMU} "$@"')
    data = yaml.safe_load((DOMAINS / "guest-vhostuser.yaml").read_text())
    data.update(name="it-qbuild", uri=LIBVIRT_URI, builds={"wrapped": {"qemu": str(wrapper)}}, build="wrapped")
    data.pop("sweep", None)
    profile = tmp_path / "qbuild.yaml"
    profile.write_text(yaml.safe_dump(data))
    code, out, err = cli("up", str(profile))
    try:
        assert code == 0, err
        conn = libvirt.open(LIBVIRT_URI)
        try:
            xml = conn.lookupByName("labctl-it-qbuild").XMLDesc(0)
        finally:
            conn.close()
        assert f"<emulator>{wrapper}</emulator>" in xml
    finally:
        down = cli("down", str(profile))
        assert down[0] == 0, down[2]
