"""Loading profiles from files: bad input of every kind gives named, one-line problems."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labctl.errors import ProfileError
from labctl.profile.load import load_profile
from labctl.profile.yamlsrc import MAX_PROFILE_BYTES

CPUS = frozenset({0, 1})


def load_problems(write_profile, text: str):
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(text), cpus=CPUS)
    return info.value.problems


def test_shipped_profiles_load(tmp_path):
    from tests.conftest import shipped_profiles

    names = set()
    for path in shipped_profiles():
        loaded = load_profile(path, cpus=CPUS)
        names.add(loaded.profile.name)
    assert {"quick", "l2fwd-vhostuser", "tap-kernel"} <= names


def test_wrong_type_names_field_and_line(write_profile):
    [problem] = load_problems(write_profile, "name: x\nguest:\n  vcpus: four\n")
    assert problem.path == "guest.vcpus" and problem.line == 3
    assert "expected an integer" in problem.message and "'four'" in problem.message


@pytest.mark.parametrize("value", ["true", "2.5", "'2'", "[2]", "{a: 1}", "null"])
def test_vcpus_must_be_an_integer(write_profile, value):
    [problem] = load_problems(write_profile, f"name: x\nguest:\n  vcpus: {value}\n")
    assert problem.path == "guest.vcpus"


def test_typo_in_key_lists_allowed(write_profile):
    [problem] = load_problems(write_profile, "name: x\nguest:\n  nics:\n    - backend: tap\n      queus: 2\n")
    assert problem.path == "guest.nics.0.queus" and problem.line == 5
    assert "unknown key" in problem.message and "queues" in problem.message


def test_bad_literal_lists_allowed(write_profile):
    [problem] = load_problems(write_profile, "name: x\nbackend: kvm\n")
    assert problem.path == "backend" and "'libvirt' or 'embedded'" in problem.message


def test_missing_name(write_profile):
    [problem] = load_problems(write_profile, "backend: libvirt\n")
    assert problem.path == "name" and "missing" in problem.message


def test_several_problems_each_reported(write_profile):
    problems = load_problems(write_profile, "name: x\nguest:\n  nics:\n    - {backend: tap, tx_queue_size: 1024, rx_queue_size: 300}\n")
    assert sorted(p.path for p in problems) == ["guest.nics.0.rx_queue_size", "guest.nics.0.tx_queue_size"]


@pytest.mark.parametrize("text,needle", [
    ("name: [unclosed\n", "malformed YAML"),
    ("name: x\n  bad: indent\n", "malformed YAML"),
    ("\t- tab\n", "malformed YAML"),
    ("a: &x [1]\nb: *x\n", "anchors"),
    ("name: x\nname: y\n", "duplicate key"),
    ("- a\n- b\n", "YAML mapping"),
    ("", "YAML mapping"),
    ("just a string\n", "YAML mapping"),
    ("name: x\n---\nname: y\n", "exactly one YAML document"),
    ("? [a, b]\n: 1\n", "plain scalars"),
    ("x: !!python/object:os.system echo\n", "malformed YAML"),
])
def test_malformed_yaml(write_profile, text, needle):
    problems = load_problems(write_profile, text)
    assert len(problems) == 1 and needle in problems[0].message


def test_malformed_yaml_reports_line(write_profile):
    [problem] = load_problems(write_profile, "name: x\nguest:\n  vcpus: 2\n  nics: [\n")
    assert problem.line is not None and problem.line >= 4


def test_enormous_file_is_refused_without_parsing(write_profile):
    text = "name: x\n" + "# padding\n" * (MAX_PROFILE_BYTES // 10 + 10)
    [problem] = load_problems(write_profile, text)
    assert "limited to" in problem.message


def test_billion_laughs_is_refused(write_profile):
    text = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b]\n"
    [problem] = load_problems(write_profile, text)
    assert "aliases" in problem.message


def test_deep_nesting_is_refused(write_profile):
    [problem] = load_problems(write_profile, "name: x\nsweep: " + "[" * 200 + "]" * 200 + "\n")
    assert "nesting" in problem.message or "sweep" in problem.path


def test_binary_file(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage\x80")
    with pytest.raises(ProfileError) as info:
        load_profile(path, cpus=CPUS)
    assert "UTF-8" in info.value.problems[0].message


def test_directory_and_missing_file(tmp_path):
    with pytest.raises(ProfileError, match="directory"):
        load_profile(tmp_path, cpus=CPUS)
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "nope.yaml", cpus=CPUS)


def test_integer_cpuset_is_accepted(write_profile):
    loaded = load_profile(write_profile("name: x\nguest:\n  pinning: {vcpus: {0: 1}, emulator: 0}\n"), cpus=CPUS)
    assert loaded.profile.guest.pinning.vcpus == {0: "1"} and loaded.profile.guest.pinning.emulator == "0"


def test_overrides_apply_and_validate(write_profile):
    path = write_profile("name: x\nguest:\n  nics: [{backend: tap}]\n")
    loaded = load_profile(path, {"guest.nics.0.queues": 2}, cpus=CPUS)
    assert loaded.profile.guest.nics[0].queues == 2
    with pytest.raises(ProfileError, match="tx_queue_size"):
        load_profile(path, {"guest.nics.0.tx_queue_size": 1024}, cpus=CPUS)
    with pytest.raises(ProfileError, match="no such knob"):
        load_profile(path, {"guest.nic.0.queues": 2}, cpus=CPUS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_text_is_accepted_or_reported(write_profile, text):
    """Whatever the bytes, loading either succeeds or raises ProfileError: never anything else."""
    try:
        load_profile(write_profile(text), cpus=CPUS)
    except ProfileError as exc:
        assert exc.problems and all(p.message for p in exc.problems)


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["name", "backend", "uri", "guest", "workload", "sweep", "repeat", "x"]),
                       yaml_values, max_size=6))
def test_any_structure_is_accepted_or_reported(write_profile, data):
    import yaml

    try:
        load_profile(write_profile(yaml.safe_dump(data)), cpus=CPUS)
    except ProfileError as exc:
        assert exc.problems
