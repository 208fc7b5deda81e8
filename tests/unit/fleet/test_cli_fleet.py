"""labctl fleet (the Typer sub-app): progress lines, the per-host table or JSON, exit codes; sweep()'s
checks of its input before any host is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import labctl.fleet as fleet
from labctl.cli.fleet import fleet_app
from labctl.errors import NotAStoreError, ProfileError, UserError
from labctl.fleet import FleetRun, HostEvent, HostResult, HostStats, Merged
from tests.conftest import DOMAINS


def fake_run(tmp_path: Path, kind: str = "sweep", bad: bool = True) -> FleetRun:
    hosts = [HostResult("h1", "ok", None, HostStats(ok=9, changed=7), tmp_path / "hosts/h1", tmp_path / "h1.jsonl")]
    if bad:
        hosts += [HostResult("h3", "failed", "labctl sweep: p.yaml: line 8: bad (exit 2)",
                             HostStats(ok=5, changed=4, failures=1, skipped=2), tmp_path / "hosts/h3"),
                  HostResult("h4", "unreachable", "unreachable at Work directory: Failed to connect",
                             HostStats(unreachable=1), tmp_path / "hosts/h4")]
    return FleetRun(kind=kind, ident="RUN", data_dir=tmp_path / "RUN", playbook=Path("sweep.yml"),
                    status="failed" if bad else "successful", rc=4 if bad else 0, hosts=hosts,
                    merged=[Merged("h1", 1, 2, tmp_path / "h1.jsonl")] if kind == "sweep" else [])


@pytest.fixture
def fake_sweep(monkeypatch, tmp_path):
    calls = {}

    def sweep(profile, inventory, db, *, command, args, data_dir, on_event):
        calls.update(profile=profile, inventory=inventory, db=db, command=command, args=list(args))
        if on_event is not None:
            on_event(HostEvent("h1", "labctl sweep", "started"))
            on_event(HostEvent("h1", "Export", "skipped"))
            on_event(HostEvent("h3", "labctl sweep", "failed", "p.yaml: bad (exit 2)"))
        return fake_run(tmp_path, bad=calls.get("bad", True))

    monkeypatch.setattr(fleet, "sweep", sweep)
    return calls


def test_sweep_table_progress_and_exit_1(fake_sweep, tmp_path):
    result = CliRunner().invoke(fleet_app, ["sweep", "p.yaml", "-i", "hosts.yml", "--db", "f.db",
                                            "--command", "tune", "--arg", "--budget", "--arg", "12"])
    assert result.exit_code == 1
    assert fake_sweep == {"profile": Path("p.yaml"), "inventory": Path("hosts.yml"), "db": Path("f.db"),
                          "command": "tune", "args": ["--budget", "12"]}
    assert result.stderr.splitlines() == ["h1: labctl sweep: started", "h3: labctl sweep: failed: p.yaml: bad (exit 2)"]
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["host", "status", "ok", "changed", "unreachable", "failures", "skipped"]
    assert lines[1].split() == ["h1", "ok", "9", "7", "0", "0", "0"]
    assert lines[2].split() == ["h3", "failed", "5", "4", "0", "1", "2"]
    assert lines[3].split() == ["h4", "unreachable", "0", "0", "1", "0", "0"]
    assert "h3: labctl sweep: p.yaml: line 8: bad (exit 2)" in lines
    assert "h1: 2 trials merged as run 1" in lines


def test_sweep_json_is_one_document(fake_sweep):
    result = CliRunner().invoke(fleet_app, ["sweep", "p.yaml", "-i", "hosts.yml", "--json"])
    assert result.exit_code == 1 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert {h["host"]: (h["status"], h["stats"]["failures"]) for h in doc["hosts"]} == {
        "h1": ("ok", 0), "h3": ("failed", 1), "h4": ("unreachable", 0)}
    assert doc["merged"][0]["host"] == "h1"


def test_all_good_exits_0(fake_sweep):
    fake_sweep["bad"] = False
    result = CliRunner().invoke(fleet_app, ["sweep", "p.yaml", "-i", "hosts.yml"])
    assert result.exit_code == 0, result.output


def test_prepare_shows_the_kernel_plan(monkeypatch, tmp_path):
    def prepare(inventory, *, hugepages, build_appliance, reboot, data_dir, on_event):
        run = fake_run(tmp_path, kind="prepare", bad=False)
        run.hosts[0].facts["labctl_kernel_plan"] = {"missing": ["hugepagesz=2M"], "applied": False}
        assert (hugepages, build_appliance, reboot) == (64, False, False)
        return run

    monkeypatch.setattr(fleet, "prepare", prepare)
    result = CliRunner().invoke(fleet_app, ["prepare", "-i", "hosts.yml", "--hugepages", "64", "--no-appliance"])
    assert result.exit_code == 0
    assert "h1: kernel arguments to add: hugepagesz=2M (--reboot applies them)" in result.stdout


def test_a_bad_inventory_is_a_user_error(tmp_path):
    result = CliRunner().invoke(fleet_app, ["prepare", "-i", str(tmp_path / "nope.yml")])
    assert isinstance(result.exception, UserError) and result.exception.exit_code == 2
    assert str(result.exception) == f"inventory {tmp_path / 'nope.yml'}: no such file or directory"


def test_sweep_checks_its_input_before_any_host(tmp_path, write_profile):
    inventory = tmp_path / "hosts.yml"  # never read: every check below comes first
    with pytest.raises(UserError, match="--command dance: not a fleet command"):
        fleet.sweep(DOMAINS / "quick.yaml", inventory, None, command="dance")
    with pytest.raises(ProfileError):
        fleet.sweep(write_profile("name: x\nbackend: embedded\nguest: {vcpus: 0}\n"), inventory, None)
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("hello\n")
    with pytest.raises(NotAStoreError):
        fleet.sweep(DOMAINS / "quick.yaml", inventory, not_a_store)
    with pytest.raises(UserError, match="cannot write there"):
        fleet.sweep(DOMAINS / "quick.yaml", inventory, tmp_path / "no" / "such" / "dir.db")
    assert not list(tmp_path.glob("out"))


def test_sweep_leaves_a_profiles_pins_to_its_hosts(tmp_path):
    """The pins name the lab hosts' CPUs: CPUs this controller lacks are no error here (each host checks)."""
    far = tmp_path / "far.yaml"
    far.write_text((DOMAINS / "quick.yaml").read_text().replace('vcpus: {0: "1"}', 'vcpus: {0: "100"}')
                   .replace('vhost: "0"', 'vhost: "101"'))
    with pytest.raises(ProfileError, match="host CPU 100 is not online"):
        from labctl.api import load

        load(far)  # a local command checks them against this host
    with pytest.raises(UserError, match="no such file") as caught:
        fleet.sweep(far, tmp_path / "hosts.yml", None)  # the profile passed; the inventory is next
    assert not isinstance(caught.value, ProfileError)
