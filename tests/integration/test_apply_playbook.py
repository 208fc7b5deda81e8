"""playbooks/apply.yml (role labctl_apply) on this machine through ansible-runner (local connection),
against a domain defined on the real libvirtd: --check changes nothing and reports the change, a run
applies it, a second run reports changed=0, an undo restores the domain, a second undo changes nothing.

labctl on the "host" is this checkout's CLI (``python -m labctl.cli apply``): the diff, one line per live
change, and the last line ``changed: N`` that the role's changed_when reads.
"""

from __future__ import annotations

import subprocess
import sys
import uuid as uuidlib
from pathlib import Path

import pytest
import yaml

from labctl.domain_edit import live, originals
from labctl.lab.libvirt import hypervisor
from tests.conftest import ROOT
from tests.integration.conftest import LIBVIRT_URI, needs_libvirtd
from tests.integration.test_apply_domains import NETWORK_NIC, VIRT_INSTALL

pytestmark = [
    needs_libvirtd,
    pytest.mark.skipif(not (Path(sys.executable).parent / "ansible-playbook").exists()
                       and subprocess.run(["which", "ansible-playbook"], capture_output=True).returncode != 0,
                       reason="ansible-core is not installed"),
]


@pytest.fixture
def domain(request):
    name = f"labctl-it-apply-{uuidlib.uuid4().hex[:8]}"
    nics = NETWORK_NIC.format(mac="52:54:00:5b:00:01")
    dom = hypervisor.define_and_start(LIBVIRT_URI, VIRT_INSTALL.format(name=name, uuid=uuidlib.uuid4(), nics=nics),
                                      start=False)

    def remove():
        found = hypervisor.lookup(LIBVIRT_URI, name)
        if found is not None:
            originals.remove(found.UUIDString())
        hypervisor.remove_domain(LIBVIRT_URI, name)

    request.addfinalizer(remove)
    return dom


def test_apply_playbook_check_apply_again_undo(domain, tmp_path, no_leftovers):
    import ansible_runner

    from labctl.fleet.inventory import ansible_on_path

    exe = [sys.executable, "-m", "labctl.cli"]
    state = tmp_path / "host-state"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"local": {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_remote_tmp": str(tmp_path / "ansible-tmp")}}}}))
    extravars = {"labctl_apply_exe": exe, "labctl_apply_chdir": str(ROOT), "labctl_apply_uri": LIBVIRT_URI,
                 "labctl_apply_env": {"LABCTL_STATE_DIR": str(state), "PYTHONPATH": str(ROOT)},
                 "labctl_apply_domains": [domain.name()],
                 "labctl_apply_set": ["guest.nics.0.queues=2", "guest.nics.0.rx_queue_size=1024",
                                      "guest.pinning.vcpus.0=0", "guest.pinning.emulator=0"]}

    runs = iter(range(100))

    def play(check: bool = False, **overrides) -> dict:
        private = tmp_path / f"runner-{next(runs)}"  # one per run: the runner keeps a --check in env/cmdline
        private.mkdir()
        with ansible_on_path():
            runner = ansible_runner.run(
                private_data_dir=str(private), project_dir=str(ROOT / "playbooks"), playbook="apply.yml",
                inventory=str(inventory), extravars={**extravars, **overrides}, quiet=True,
                **({"cmdline": "--check"} if check else {}),
                envvars={"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local")},
                # without a cancel callback ansible-runner installs its own SIGINT/SIGTERM handlers in this
                # (pytest's main) thread and never restores them: later tests' signals would go to it
                cancel_callback=lambda: False)
        stats = runner.stats or {}
        assert runner.rc == 0 and not stats.get("failures") and not stats.get("dark"), runner.stdout.read()[-3000:]
        return {"changed": stats.get("changed", {}).get("local", 0), "out": runner.stdout.read()}

    before = live.inactive_xml(domain)
    checked = play(check=True)
    assert checked["changed"] == 1 and "rx_queue_size" in checked["out"]  # the diff, printed
    assert live.inactive_xml(domain) == before
    assert not (state / "domain-originals").exists() or not any((state / "domain-originals").iterdir())

    first = play()
    assert first["changed"] == 1
    after = live.inactive_xml(domain)
    assert "rx_queue_size='1024'" in after and "<emulatorpin cpuset='0'/>" in after

    assert play()["changed"] == 0
    assert play(check=True)["changed"] == 0
    assert live.inactive_xml(domain) == after

    assert play(check=True, labctl_apply_undo=True)["changed"] == 0  # check mode never undoes
    assert live.inactive_xml(domain) == after
    assert play(labctl_apply_undo=True)["changed"] == 1
    assert live.inactive_xml(domain) == before
    assert play(labctl_apply_undo=True)["changed"] == 0  # nothing to undo: reported, not failed
