"""How the input domain XMLs here were made (run from the repository root to make them again).

- ``virt-install.xml``: virt-install (Debian 12's virtinst 4.1) writing, not defining, a guest with four NICs:
    virt-install --connect test:///default --print-xml --name vi-guest --memory 1024 --vcpus 4 \
      --osinfo generic --import --disk none --graphics none \
      --network network=default,model=virtio,mac=52:54:00:11:22:01 \
      --network network=default,model=e1000,mac=52:54:00:11:22:02 \
      --network bridge=br0,model=virtio,mac=52:54:00:11:22:03 \
      --network vhostuser,source.type=unix,source.path=/tmp/x.sock,source.mode=client,model=virtio,driver.queues=2,mac=52:54:00:11:22:04
- ``nova.xml``: written by hand in the shape OpenStack Nova's libvirt driver writes (``nova:instance``
  metadata 1.1, an OVS ``virtualport`` port with ``<driver name="vhost" queues="4" rx_queue_size="1024"/>``,
  an SR-IOV ``hostdev`` port, comments); kept as written, validated with ``virt-xml-validate``.
- ``libvirt-vhostuser.xml``: libvirt 9.0's own output (this script): a domain with two multiqueue vhost-user
  NICs defined on ``test:///default`` and read back with ``XMLDesc()``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import libvirt

DEFINE = """<domain type='test'>
  <name>vhu-mq</name>
  <memory unit='MiB'>1024</memory>
  <vcpu>2</vcpu>
  <memoryBacking><access mode='shared'/></memoryBacking>
  <os><type arch='x86_64'>hvm</type></os>
  <devices>
    <interface type='vhostuser'>
      <mac address='52:54:00:aa:00:01'/>
      <source type='unix' path='/run/vhu/port0.sock' mode='server'/>
      <model type='virtio'/>
      <driver queues='2' rx_queue_size='512' tx_queue_size='512'/>
    </interface>
    <interface type='vhostuser'>
      <mac address='52:54:00:aa:00:02'/>
      <source type='unix' path='/run/vhu/port1.sock' mode='client'/>
      <model type='virtio'/>
      <driver queues='2'/>
    </interface>
  </devices>
</domain>"""


def main() -> None:
    conn = libvirt.open("test:///default")
    domain = conn.defineXML(DEFINE)
    try:
        text = domain.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    finally:
        domain.undefine()
        conn.close()
    (Path(__file__).parent / "libvirt-vhostuser.xml").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
