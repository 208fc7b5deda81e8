"""Unix socket paths over the kernel's 107 bytes are refused before anything starts, naming the setting."""

from __future__ import annotations

import os

from labctl.lab.plan import derive
from labctl.measure.labs import UNIX_PATH_MAX, unix_sockets
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS


def test_a_run_directory_too_long_for_the_sockets_is_refused_in_one_line(cli, tmp_path, monkeypatch):
    run_dir = tmp_path / ("r" * 90)
    monkeypatch.setenv("LABCTL_RUN_DIR", str(run_dir))
    code, out, err = cli("run", str(DOMAINS / "quick.yaml"))
    assert code == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and line.startswith(f"LABCTL_RUN_DIR: {run_dir} is too long for the lab's unix sockets")
    assert f"allowed: at most {UNIX_PATH_MAX}" in line
    assert not run_dir.exists()  # nothing created


def test_every_socket_of_an_ovs_vm2vm_plan_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("LABCTL_RUN_DIR", "/run/x")
    plan = derive(load_profile(DOMAINS / "vm2vm.yaml", {"vswitch.kind": "ovs-dpdk"}, cpus=None).profile)
    names = sorted(p.name for p in unix_sockets(plan))
    assert names == sorted(["vhost-0.sock", "vhost-1.sock", "vhost-b0.sock", "vhost-b1.sock", "db.sock",
                            "ovsdb-server.ctl", "ovs-vswitchd.ctl"])
    assert all(len(os.fsencode(p)) <= UNIX_PATH_MAX for p in unix_sockets(plan))


def test_every_build_a_libvirt_sweep_names_is_checked_before_anything_starts(tmp_path, monkeypatch):
    """A guest's forwarder build is checked (the appliance must be able to carry it) for every build of the
    sweep, not only the profile's own: a bad one refuses the sweep up front, not at its trial."""
    import shutil

    import yaml

    from labctl.lab.libvirt import guest
    from labctl.measure.labs import check_measurable
    from tests.factories import build_binary

    os.chmod(tmp_path, 0o755)
    copy = build_binary(tmp_path / "b", copy_of=shutil.which("dpdk-testpmd"))
    data = yaml.safe_load((DOMAINS / "guest-vhostuser.yaml").read_text())
    data["builds"] = {"base": {}, "copy": {"forwarder": str(copy)}}
    data["sweep"] = {"build": ["base", "copy"]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    checked = []
    monkeypatch.setattr(guest, "check_measurable", lambda plan, uri: checked.append(plan.build.label))
    check_measurable(load_profile(path, cpus=None).profile)
    assert checked[1:] == ["base", "copy"]  # after the profile's own plan, every build of the sweep
