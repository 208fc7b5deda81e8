"""labctl.paths.cache_dir: where labctl's builds (the appliance, guest images) are cached."""

from __future__ import annotations

from pathlib import Path


def test_cache_dirs_of_labctls_builds(monkeypatch, tmp_path):
    """The appliance's and the guest image's caches: each its own variable, else /var/cache/labctl/NAME as
    root (QEMU's user reads it), else the user's XDG cache."""
    import os

    from labctl import paths
    from labctl.lab.libvirt.appliance.cache import default_cache_dir as appliance_dir
    from labctl.lab.libvirt.guestimage.cache import default_cache_dir as image_dir

    monkeypatch.setenv("LABCTL_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("LABCTL_IMAGE_CACHE_DIR", str(tmp_path / "i"))
    assert (appliance_dir(), image_dir()) == (tmp_path / "a", tmp_path / "i")
    monkeypatch.delenv("LABCTL_CACHE_DIR")
    monkeypatch.delenv("LABCTL_IMAGE_CACHE_DIR")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert (appliance_dir(), image_dir()) == (Path("/var/cache/labctl/appliance"), Path("/var/cache/labctl/images"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir("LABCTL_NONE_SUCH", "images") == tmp_path / "xdg" / "labctl" / "images"
