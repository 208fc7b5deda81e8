"""The deployment forms (labctl.domain_edit.emit): each says what it cannot express."""

from __future__ import annotations

import pytest
import yaml
from lxml import etree

from labctl.domain_edit.changes import changes_from_knobs
from labctl.domain_edit.emit import emit
from labctl.errors import UserError

KNOBS = ["guest.nics.*.queues=4", "guest.nics.*.rx_queue_size=1024", "guest.nics.*.tx_queue_size=512",
         "guest.pinning.vcpus.0=2", "guest.pinning.emulator=1", "guest.hugepage_size=1G"]
CHANGES = changes_from_knobs(KNOBS)


def test_libvirt_fragment_parses_and_holds_the_settings():
    text = emit("libvirt", CHANGES)
    root = etree.fromstring(f"<fragment>{text}</fragment>".encode())
    assert root.find("driver").attrib == {"queues": "4", "rx_queue_size": "1024", "tx_queue_size": "512"}
    assert root.find("cputune/vcpupin").attrib == {"vcpu": "0", "cpuset": "2"}
    assert root.find("cputune/emulatorpin").get("cpuset") == "1"
    assert root.find("memoryBacking/hugepages/page").attrib == {"size": "1048576", "unit": "KiB"}


def test_nova_settings_and_what_nova_cannot_express():
    text = emit("nova", CHANGES)
    assert "[libvirt]\nrx_queue_size = 1024\ntx_queue_size = 512\n" in text
    assert ("--property hw:vif_multiqueue_enabled=true --property hw:cpu_policy=dedicated --property "
            "hw:emulator_threads_policy=isolate --property hw:mem_page_size=1GB") in text
    assert "# not expressible in Nova: queues 4: Nova has no per-port queue count" in text
    assert "# not expressible in Nova: the vCPU cpusets (0=2)" in text
    assert "# not expressible in Nova: tx_queue_size applies to vhost-user ports only" in text


def test_nova_says_per_port_rings_are_host_wide():
    text = emit("nova", changes_from_knobs(["guest.nics.0.rx_queue_size=512", "guest.nics.1.rx_queue_size=1024"]))
    assert "rx_queue_size = 1024" in text and "rx_queue_size per port (512, 1024)" in text


def test_kubevirt_fragment_and_no_ring_size():
    text = emit("kubevirt", CHANGES)
    data = yaml.safe_load(text)
    assert data == {"spec": {"domain": {"devices": {"networkInterfaceMultiqueue": True},
                                        "cpu": {"dedicatedCpuPlacement": True, "isolateEmulatorThread": True},
                                        "memory": {"hugepages": {"pageSize": "1Gi"}}}}}
    assert "# not expressible in KubeVirt: rx_queue_size 1024: KubeVirt has no ring size setting" in text
    assert "# not expressible in KubeVirt: tx_queue_size 512" in text


def test_ansible_vars_round_trip_to_the_same_changes():
    data = yaml.safe_load(emit("ansible", CHANGES))
    assert data["labctl_apply_domains"] == []
    assert changes_from_knobs(data["labctl_apply_set"]) == CHANGES


def test_notes_are_kept_and_unknown_forms_refused():
    assert emit("nova", CHANGES, ["left out workload.burst = 64: not a domain knob"]).endswith(
        "# left out workload.burst = 64: not a domain knob\n")
    with pytest.raises(UserError, match="allowed: libvirt, nova, kubevirt, ansible"):
        emit("puppet", CHANGES)
