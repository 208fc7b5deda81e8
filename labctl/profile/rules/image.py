"""A user's image guest: ``guest.image``, ``guest.boot``, the agent's bound, ``workload.forwarder`` and its
``workload.command`` template."""

from __future__ import annotations

import os
from typing import Iterator

from labctl.errors import Problem
from labctl.profile.rules.registry import err, rule, warn
from labctl.profile.schema import Profile


@rule("guest-image", "A user's image boots as a libvirt guest (one guest between labctl's generator and sink, the "
      "testpmd vswitch) and is reached through the QEMU guest agent; its forwarder (testpmd or a command) is a DPDK "
      "program on virtio-net PCI devices fed by vhost-user; a command template is split into an argv and only named "
      "fields are filled (never a shell). The file itself is read by qemu-img, never judged by its name.",
      "libvirt domain XML disks and direct kernel boot (https://libvirt.org/formatdomain.html#hard-drives-floppy-"
      "disks-cdroms, #direct-kernel-boot); QEMU guest agent (https://www.qemu.org/docs/master/interop/"
      "qemu-ga-ref.html); qemu-img info (https://www.qemu.org/docs/master/tools/qemu-img.html); Python shlex")
def _guest_image(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    from labctl.profile import template, userimage

    g, w = p.guest, p.workload
    if g.image is None:
        if g.boot is not None:
            yield err("guest.boot", "direct kernel boot is for a user's image (allowed: set guest.image, or leave "
                                     "guest.boot out for the appliance)")
        if w.forwarder != "appliance":
            yield err("workload.forwarder", f"{w.forwarder} runs the image's own forwarder (allowed: appliance "
                                             "without guest.image)")
    else:
        if p.backend != "libvirt":
            yield err("guest.image", "a disk image boots only as a libvirt guest (allowed: backend libvirt)")
        if not os.path.isabs(g.image):
            yield err("guest.image", f"{g.image!r} is not an absolute path (allowed: /path/to/image.qcow2)")
        elif os.path.exists(g.image):
            try:
                userimage.probe(g.image)
            except userimage.ImageProblem as exc:
                yield err("guest.image", str(exc))
        else:
            yield warn("guest.image", f"{g.image} does not exist yet (a run needs it; `labctl image guest --out "
                                       f"{g.image}` builds one)")
        if w.forwarder == "appliance":
            yield err("workload.forwarder", "an image guest runs its own forwarder (allowed: testpmd, command)")
        if p.topology != "pvp" or w.kind != "forward" or p.vswitch.kind != "testpmd":
            yield err("guest.image", "an image guest is measured as pvp forwarding through the testpmd vswitch "
                                      "(allowed: topology pvp, workload.kind forward, vswitch.kind testpmd)")
        for i, nic in enumerate(g.nics):
            if nic.backend != "vhostuser" or nic.model != "virtio":
                yield err(f"guest.nics.{i}.backend", "the image's DPDK forwarder runs on virtio-net fed by vhost-user "
                                                      "(allowed: backend vhostuser, model virtio)")
        if not 10 <= g.agent_timeout_s <= 3600:
            yield err("guest.agent_timeout_s", f"{g.agent_timeout_s:g} is out of range (allowed: 10..3600)")
        if g.boot is not None:
            for key in ("kernel", "initrd"):
                value = getattr(g.boot, key)
                if value is not None and not os.path.isabs(value):
                    yield err(f"guest.boot.{key}", f"{value!r} is not an absolute path (allowed: /path/to/file)")
    if w.forwarder == "command":
        if not w.command:
            yield err("workload.command", "forwarder command needs a template (allowed: e.g. 'dpdk-l2fwd -l {cores} "
                                           "-a {pci0} -a {pci1} -- -p 0x3')")
        else:
            try:
                template.split(w.command)
            except template.TemplateProblem as exc:
                yield err("workload.command", str(exc))
    elif w.command is not None:
        yield err("workload.command", "a template is for forwarder command (allowed: leave it out)")
