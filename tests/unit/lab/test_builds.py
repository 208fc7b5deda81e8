"""The one resolver of a lab's binaries: paths (symlinks resolved), env per process, sha256, versions."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from labctl.errors import PlanError
from labctl.lab import builds
from labctl.lab.plan import BuildPlan, derive
from labctl.profile.load import validate_data

TESTPMD = shutil.which("dpdk-testpmd")
needs_testpmd = pytest.mark.skipif(TESTPMD is None, reason="dpdk-testpmd not installed")


def script(tmp_path, name, text, mode=0o755):
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_a_build_binary_is_resolved_hashed_and_versioned(tmp_path):
    qemu = script(tmp_path, "qemu", "#!/bin/sh\necho 'QEMU emulator version 9.9.9 (patched)'\necho second\n")
    (tmp_path / "link").symlink_to(qemu)
    program = builds.resolve(BuildPlan(label="p", qemu=str(tmp_path / "link")), "qemu")
    assert program.path == qemu and program.requested == str(tmp_path / "link")
    assert program.record() == {"path": qemu, "sha256": hashlib.sha256(open(qemu, "rb").read()).hexdigest(),
                                "version": "QEMU emulator version 9.9.9 (patched)", "build": "p",
                                "requested": str(tmp_path / "link")}


def test_the_hash_is_cached_by_path_size_and_mtime(tmp_path):
    path = script(tmp_path, "x", "#!/bin/sh\n")
    first = builds.sha256_of(path)
    with open(path, "a") as handle:
        handle.write("# changed\n")
    assert builds.sha256_of(path) != first  # the size changed: hashed again


def test_a_path_that_went_bad_since_validation_is_refused(tmp_path):
    path = script(tmp_path, "fwd", "#!/bin/sh\n", mode=0o757)
    with pytest.raises(PlanError, match=r"^builds\.p\.forwarder: .* is world-writable"):
        builds.resolve(BuildPlan(label="p", forwarder=path), "forwarder")


def test_env_goes_to_the_build_s_own_roles_only():
    plan = BuildPlan(label="p", forwarder="/opt/x/dpdk-testpmd", env=(("LD_LIBRARY_PATH", "/opt/x/lib"),))
    assert plan.env_for("forwarder") == {"LD_LIBRARY_PATH": "/opt/x/lib"}
    assert plan.env_for("vswitch") == {} and plan.env_for("qemu") == {}
    only_env = BuildPlan(label="plugins", env=(("RTE_EAL_PMD_PATH", "/opt/pmds"),))
    assert only_env.env_for("vswitch") == only_env.env_for("forwarder") == {"RTE_EAL_PMD_PATH": "/opt/pmds"}
    # and never labctl's own environment
    program = builds.Program("forwarder", "/bin/true", (("LD_LIBRARY_PATH", "/opt/x/lib"),))
    assert program.environ({"PATH": "/bin"}) == {"PATH": "/bin", "LD_LIBRARY_PATH": "/opt/x/lib"}
    assert os.environ.get("LD_LIBRARY_PATH") != "/opt/x/lib"


@needs_testpmd
def test_dpdk_version_comes_from_eal_without_a_runtime_dir(tmp_path):
    program = builds.resolve(BuildPlan(), "forwarder")
    assert program.path == os.path.realpath(TESTPMD) and program.build is None
    assert builds.version_of(program).startswith("DPDK ")


def test_the_build_is_in_the_domain_key_but_not_its_label(tmp_path):
    path = script(tmp_path, "qemu", "#!/bin/sh\n")
    base = {"name": "k", "guest": {"nics": [{}, {}]}, "builds": {"a": {}, "b": {}, "q": {"qemu": path}}}
    key = {b: derive(validate_data({**base, "build": b}, "p", cpus=frozenset({0, 1})).profile).domain_key()
           for b in ("a", "b", "q")}
    plain = derive(validate_data({"name": "k", "guest": {"nics": [{}, {}]}}, "p", cpus=frozenset({0, 1})).profile)
    assert key["a"] == key["b"] == plain.domain_key() != key["q"]
