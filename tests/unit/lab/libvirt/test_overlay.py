"""The overlay: recorded before qemu-img makes it, the image never written, removed by the ledger."""

from __future__ import annotations

import subprocess

from labctl.digest import sha256_file as sha256_of
from labctl.lab.ledger import kind_of, load_state, teardown
from labctl.lab.libvirt import overlay
from labctl.profile.userimage import probe


def test_overlay_recorded_first_and_removed(tmp_path, monkeypatch):
    image = tmp_path / "img" / "g.qcow2"
    image.parent.mkdir()
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "16M"], check=True)
    before = sha256_of(str(image))
    info = probe(str(image))
    state = load_state("ov")
    seen = []
    real_run = subprocess.run

    def spy(argv, **kw):
        seen.append([r.kind for r in load_state("ov").resources])  # what the ledger on disk held then
        return real_run(argv, **kw)

    monkeypatch.setattr(overlay.subprocess, "run", spy)
    path = overlay.create(state, info, tmp_path / "overlay.qcow2")
    monkeypatch.undo()
    assert seen == [["overlay"]]
    info = subprocess.run(["qemu-img", "info", "-U", "--output=json", str(path)], capture_output=True,
                          text=True, check=True).stdout
    assert str(image) in info and '"backing-filename-format": "qcow2"' in info
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 0 1M", str(path)], check=True,
                   capture_output=True)
    assert sha256_of(str(image)) == before  # the guest's writes land in the overlay
    assert kind_of("overlay").verify(state.find("overlay")[0])
    assert teardown(state) == []
    assert not path.exists() and image.exists() and sha256_of(str(image)) == before
