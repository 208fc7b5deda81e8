"""Files labctl makes under its run, state and log directories are never written through a planted
symlink; its directories let only root and QEMU's group in; vhost-user sockets stay 0660 to that group."""

from __future__ import annotations

import grp
import os
import socket
import stat

import pytest

from labctl import platform
from labctl.errors import StateError
from labctl.lab.ledger import locked
from labctl.safefs import give_socket, make_dir, open_new, qemu_gid


def test_a_symlink_at_a_log_path_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0\n")
    log = tmp_path / "log" / "testpmd.log"
    log.parent.mkdir()
    log.symlink_to(victim)
    with pytest.raises(StateError, match="symbolic link"):
        open_new(log)
    assert victim.read_text() == "root:x:0:0\n"


def test_the_state_file_replaces_a_planted_symlink_instead_of_following_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "fx-s.json").symlink_to(victim)
    (state_dir / f".fx-s.json.{os.getpid()}.tmp").symlink_to(victim)  # even at its temporary name
    with pytest.raises(StateError):  # the state file is a symlink: unreadable, refused
        with locked("fx-s"):
            pass
    os.unlink(state_dir / "fx-s.json")
    with locked("fx-s") as state:
        state.record("path", str(tmp_path / "x"))
    assert victim.read_text() == "keep"
    assert not (state_dir / "fx-s.json").is_symlink()


def test_directories_are_0750_and_qemus_where_qemu_needs_them(tmp_path):
    made = make_dir(tmp_path / "run" / "fx-lab", qemu=True)
    for directory in (made, made.parent):
        info = os.stat(directory)
        assert stat.S_IMODE(info.st_mode) == 0o750
        if qemu_gid() is not None:
            assert info.st_gid == grp.getgrnam(platform.QEMU_GROUP).gr_gid
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(StateError, match="symbolic link"):
        make_dir(tmp_path / "link")


def test_a_socket_is_given_to_qemus_group_0660_and_a_symlink_there_is_refused(tmp_path):
    path = tmp_path / "vhost-0.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    give_socket(path, qemu_gid())
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o660
    victim = tmp_path / "victim"
    victim.write_text("x")
    os.chmod(victim, 0o600)
    (tmp_path / "evil.sock").symlink_to(victim)
    with pytest.raises(StateError):
        give_socket(tmp_path / "evil.sock", qemu_gid())
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o600
    server.close()
