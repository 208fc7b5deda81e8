"""guest.image, guest.boot, workload.forwarder and workload.command: rules, the image probe, the template."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from labctl.errors import ProfileError
from labctl.profile import template, userimage
from labctl.profile.load import load_profile
from tests.conftest import CPUS

BASE = """name: img
backend: libvirt
guest:
  image: {image}
  nics: [{{backend: vhostuser}}, {{backend: vhostuser}}]
workload:
  forwarder: {forwarder}
{extra}"""


def _qcow2(path, size="16M", backing=None):
    argv = ["qemu-img", "create", "-q", "-f", "qcow2"]
    if backing:
        argv += ["-b", str(backing), "-F", "qcow2"]
    subprocess.run([*argv, str(path), size], check=True)
    return path


def _load(write_profile, image, forwarder="testpmd", extra=""):
    return load_profile(write_profile(BASE.format(image=image, forwarder=forwarder, extra=extra)), cpus=CPUS)


def test_qcow2_image_probed_by_content_not_name(tmp_path, write_profile):
    image = _qcow2(tmp_path / "disk.raw")  # a qcow2 named .raw
    info = userimage.probe(str(image))
    assert info.format == "qcow2" and info.virtual_size == 16 << 20
    assert info.identity.startswith(f"{image.stat().st_size}:") and len(info.sha256_1mib) == 64
    loaded = _load(write_profile, image)
    assert loaded.profile.guest.image == str(image) and not loaded.warnings


def test_a_text_file_is_not_an_image(tmp_path, write_profile):
    text = tmp_path / "notes.qcow2"
    text.write_text("not a disk\n")
    with pytest.raises(ProfileError, match=r"guest\.image: .*not a disk image"):
        _load(write_profile, text)


def test_backing_chain_leaving_the_directory_is_refused(tmp_path, write_profile):
    (tmp_path / "base").mkdir()
    (tmp_path / "top").mkdir()
    base = _qcow2(tmp_path / "base" / "b.qcow2")
    top = _qcow2(tmp_path / "top" / "t.qcow2", backing=base)
    with pytest.raises(ProfileError, match=r"guest\.image: .*backing file .* outside"):
        _load(write_profile, top)
    inside = _qcow2(tmp_path / "base" / "t.qcow2", backing=base)
    assert userimage.probe(str(inside)).backing == (str(base),)


def test_missing_image_is_a_warning_at_validate(tmp_path, write_profile):
    loaded = _load(write_profile, tmp_path / "later.qcow2")
    assert any("labctl image guest" in w.render() for w in loaded.warnings)


@pytest.mark.parametrize("forwarder,extra,field", [
    ("appliance", "", "workload.forwarder"),
    ("command", "", "workload.command"),
    ("command", "  command: l2fwd -a {pci0} -p {portmask}\n", "workload.command"),
    ("testpmd", "  command: l2fwd\n", "workload.command"),
])
def test_forwarder_rules(tmp_path, write_profile, forwarder, extra, field):
    image = _qcow2(tmp_path / "g.qcow2")
    with pytest.raises(ProfileError, match=field.replace(".", r"\.")):
        _load(write_profile, image, forwarder, extra)


def test_unknown_field_names_it_and_the_allowed_ones():
    with pytest.raises(template.TemplateProblem) as info:
        template.split("l2fwd -a {pci0} -p {portmask}")
    assert "{portmask}" in str(info.value) and "{pci1}" in str(info.value)
    with pytest.raises(template.TemplateProblem):
        template.split("x {pci0.__class__}")
    with pytest.raises(template.TemplateProblem):
        template.split("x {cores!r}")


def test_template_fills_each_argument_never_a_shell():
    argv = template.fill("dpdk-l2fwd -l {cores} -a {pci0} -a {pci1} -- -p 0x3 --x='a b;$(id)' --rxd={rxd}",
                         {"cores": "0-1", "pci0": "0000:00:03.0", "pci1": "0000:00:04.0", "rxd": 512})
    assert argv == ["dpdk-l2fwd", "-l", "0-1", "-a", "0000:00:03.0", "-a", "0000:00:04.0", "--", "-p", "0x3",
                    "--x=a b;$(id)", "--rxd=512"]
    with pytest.raises(template.TemplateProblem, match="pci1"):
        template.fill("x {pci1}", {"pci0": "a"})


def test_image_only_on_libvirt(tmp_path, write_profile):
    image = _qcow2(tmp_path / "g.qcow2")
    text = BASE.format(image=image, forwarder="testpmd", extra="").replace("backend: libvirt", "backend: embedded")
    with pytest.raises(ProfileError, match=r"guest\.image: .*libvirt"):
        load_profile(write_profile(text), cpus=CPUS)


def test_boot_without_image_is_refused(write_profile):
    text = "name: x\nbackend: libvirt\nguest:\n  boot: {kernel: /boot/vmlinuz}\n"
    with pytest.raises(ProfileError, match=r"guest\.boot"):
        load_profile(write_profile(text), cpus=CPUS)


def test_an_image_qemus_user_cannot_read_is_refused_naming_the_mode():
    """QEMU runs as libvirt's QEMU user and labctl never chowns the user's image: a 0600 file, or a
    directory QEMU cannot enter, is refused before any boot, with what to change."""
    import os
    import subprocess
    import tempfile

    from labctl.profile.userimage import ImageProblem, check_qemu_reads, probe, qemu_can_read

    with tempfile.TemporaryDirectory(dir="/tmp") as top:  # pytest's tmp_path lies under a 0700 directory
        home = Path(top) / "images"
        home.mkdir()
        os.chmod(top, 0o755)
        os.chmod(home, 0o755)
        image = home / "g.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "16M"], check=True)
        os.chmod(image, 0o644)
        check_qemu_reads(probe(str(image)))  # world-readable, in directories anyone may enter: fine
        os.chmod(image, 0o600)
        with pytest.raises(ImageProblem, match=r"mode 0600\) is not readable by QEMU's user .*chmod o\+r"):
            check_qemu_reads(probe(str(image)))
        os.chmod(image, 0o640)
        os.chown(image, 0, 4242)
        assert qemu_can_read(str(image), 4242) is None and qemu_can_read(str(image), None) is not None
        os.chmod(image, 0o644)
        os.chmod(home, 0o700)
        assert "is not searchable" in (qemu_can_read(str(image), None) or "")
