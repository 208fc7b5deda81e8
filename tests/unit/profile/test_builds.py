"""builds: and build: the schema, every bad input as one line naming the field, and the knob."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from labctl.errors import ProfileError
from labctl.profile.knobs import flatten
from labctl.profile.load import load_profile, validate_data

TESTPMD = shutil.which("dpdk-testpmd")
needs_testpmd = pytest.mark.skipif(TESTPMD is None, reason="dpdk-testpmd not installed")


def binary(tmp_path, name="dpdk-testpmd", mode=0o755, text="#!/bin/sh\nexit 0\n"):
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def data(**extra):
    base = {"name": "b", "backend": "embedded", "guest": {"vcpus": 1, "nics": [{}, {}]}}
    base.update(extra)
    return base


def problems(d):
    with pytest.raises(ProfileError) as caught:
        validate_data(d, "p.yaml", cpus=frozenset({0, 1}))
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_builds_and_build_validate_and_build_is_a_config_knob(tmp_path):
    path = binary(tmp_path)
    loaded = validate_data(data(builds={"base": {}, "patched": {"forwarder": path, "env": {"LD_LIBRARY_PATH": "/x"}}},
                                build="patched"), "p.yaml", cpus=frozenset({0, 1}))
    assert loaded.profile.builds["patched"].forwarder == path
    config = flatten(loaded.profile.model_dump())
    assert config["build"] == "patched" and not any(k.startswith(("builds", "order", "seed")) for k in config)
    # no build chosen: the config is what it was before builds existed
    assert "build" not in flatten(validate_data(data(), "p.yaml", cpus=frozenset({0})).profile.model_dump())


@pytest.mark.parametrize("case, expected", [
    ("missing", "builds.x.forwarder: {dir}/nowhere: no such file or directory (allowed: an existing executable file)"),
    ("not-executable", "builds.x.forwarder: {dir}/dpdk-testpmd is not executable (allowed: an executable file, e.g. mode 0755)"),
    ("world-writable", "builds.x.forwarder: {dir}/dpdk-testpmd is world-writable (allowed: writable by its owner only, e.g. chmod o-w)"),
    ("directory", "builds.x.forwarder: {dir} is not a regular file (allowed: an executable file)"),
    ("relative", "builds.x.forwarder: 'dpdk-testpmd' is not an absolute path (allowed: /path/to/an/executable)"),
])
def test_a_bad_build_path_is_one_line_naming_the_field(tmp_path, case, expected):
    path = {"missing": lambda: str(tmp_path / "nowhere"), "not-executable": lambda: binary(tmp_path, mode=0o644),
            "world-writable": lambda: binary(tmp_path, mode=0o757), "directory": lambda: str(tmp_path),
            "relative": lambda: "dpdk-testpmd"}[case]()
    assert problems(data(builds={"x": {"forwarder": path}})) == [expected.format(dir=tmp_path)]


def test_a_symlink_is_resolved_and_named(tmp_path):
    target = binary(tmp_path, mode=0o757)
    (tmp_path / "link").symlink_to(target)
    assert problems(data(builds={"x": {"qemu": str(tmp_path / "link")}})) == [
        f"builds.x.qemu: {tmp_path}/link (-> {target}) is world-writable (allowed: writable by its owner only, "
        "e.g. chmod o-w)"]


def test_unknown_build_name_lists_the_allowed_ones(tmp_path):
    assert problems(data(builds={"base": {}, "patched": {}}, build="nope")) == [
        "build: 'nope' is not a build (allowed: base, patched)"]
    assert problems(data(builds={"base": {}}, sweep={"build": ["base", "nope"]})) == [
        "sweep (build=nope) build: 'nope' is not a build (allowed: base)"]


def test_env_keys_are_variable_names():
    assert problems(data(builds={"x": {"env": {"1BAD": "v"}}})) == [
        "builds.x.env: '1BAD' is not an environment variable name (allowed: letters, digits and '_', not starting "
        "with a digit)"]


def test_unknown_build_field_is_refused():
    assert problems(data(builds={"x": {"generator": "/bin/true"}})) == [
        "builds.x.generator: unknown key 'generator' (allowed: qemu, vswitch, forwarder, env, recipe, rev)"]


@needs_testpmd
def test_a_vswitch_build_must_match_the_vswitch_kind(tmp_path):
    not_dpdk = binary(tmp_path, "vs")
    assert problems(data(builds={"x": {"vswitch": not_dpdk}}, build="x")) == [
        f"builds.x.vswitch: {not_dpdk} is neither ovs-vswitchd nor DPDK (allowed: a binary of vswitch.kind testpmd)"]
    ovs = binary(tmp_path, "fake-ovs", text="#!/bin/sh\necho 'ovs-vswitchd (Open vSwitch) 3.1.0'\n")
    assert problems(data(builds={"x": {"vswitch": ovs}}, build="x")) == [
        f"builds.x.vswitch: {ovs} is ovs-vswitchd (allowed: a binary of vswitch.kind testpmd)"]
    # Debian's testpmd is a testpmd vswitch: no problem
    validate_data(data(builds={"x": {"vswitch": TESTPMD}}, build="x"), "p.yaml", cpus=frozenset({0, 1}))


def test_set_build_from_the_command_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data(builds={"base": {}, "patched": {"forwarder": binary(tmp_path)}})))
    assert load_profile(path, {"build": "patched"}, cpus=frozenset({0, 1})).profile.build == "patched"
    with pytest.raises(ProfileError, match=r"build: 'other' is not a build \(allowed: base, patched\)"):
        load_profile(path, {"build": "other"}, cpus=frozenset({0, 1}))


def test_seed_without_random_order_warns():
    loaded = validate_data(data(seed=3), "p.yaml", cpus=frozenset({0, 1}))
    assert [w.path for w in loaded.warnings] == ["seed"]


def test_a_long_path_is_cut_in_the_middle_never_to_a_shorter_path(tmp_path):
    deep = tmp_path.joinpath(*["d" * 40] * 5)
    deep.mkdir(parents=True)
    path = binary(deep, mode=0o644)
    (problem,) = problems(data(builds={"x": {"forwarder": path}}))
    shown = problem.removeprefix("builds.x.forwarder: ").split(" is not executable")[0]
    assert len(path) > 160 and "…" in shown and len(shown) == 161
    assert path.startswith(shown.split("…")[0]) and path.endswith(shown.split("…")[1])
    assert shown.endswith("/dpdk-testpmd")  # the file's name stays
