"""The original domain XML: kept once, atomically, restored byte for byte, forgotten on undo."""

from __future__ import annotations

import os

import pytest

from labctl.domain_edit import originals

UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
XML = "<domain type='qemu'>\n  <!-- the user's comment -->\n  <name>web1</name>\n</domain>\n"


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("LABCTL_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_saved_once_the_first_original_stays():
    assert originals.save(UUID, "web1", XML) is True
    assert originals.save(UUID, "web1", XML.replace("web1", "changed")) is False
    kept = originals.load(UUID)
    assert kept == originals.Original(uuid=UUID, name="web1", xml=XML)


def test_uuid_forms_are_one_key():
    assert originals.save(UUID.upper(), "web1", XML)
    assert originals.load(UUID).xml == XML
    assert originals.save("{" + UUID + "}", "web1", "<other/>") is False


def test_written_atomically_no_temporary_left(state):
    originals.save(UUID, "web1", XML)
    names = sorted(p.name for p in (state / "domain-originals").iterdir())
    assert names == [f"{UUID}.json"]
    assert oct((state / "domain-originals" / f"{UUID}.json").stat().st_mode & 0o777) == "0o600"


def test_a_stale_temporary_of_this_pid_does_not_block(state):
    directory = state / "domain-originals"
    directory.mkdir(parents=True)
    (directory / f".{UUID}.json.{os.getpid()}.tmp").write_text("half")
    assert originals.save(UUID, "web1", XML)
    assert sorted(p.name for p in directory.iterdir()) == [f"{UUID}.json"]


def test_remove_and_nothing_kept():
    assert originals.load(UUID) is None
    assert originals.remove(UUID) is False
    originals.save(UUID, "web1", XML)
    assert [o.name for o in originals.kept()] == ["web1"]
    assert originals.remove(UUID) is True
    assert originals.load(UUID) is None and originals.kept() == []


def test_a_symlink_at_the_original_is_not_followed(state, tmp_path):
    directory = state / "domain-originals"
    directory.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("secret")
    (directory / f"{UUID}.json").symlink_to(target)
    assert originals.save(UUID, "web1", XML) is False  # never written through
    assert target.read_text() == "secret"
    with pytest.raises(Exception, match="cannot read"):
        originals.load(UUID)


def test_a_bad_uuid_is_refused():
    with pytest.raises(ValueError):
        originals.save("../../etc/passwd", "x", XML)
