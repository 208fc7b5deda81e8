"""labctl's libvirt qemu drop-in for vhost pinning: installed for the domains labctl applied to,
removed with the last one, never over a file labctl did not write; the script pins a domain's vhost
threads on "started" and does nothing else."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from labctl.domain_edit import hook
from labctl.errors import UserError

A = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
B = "6695eb01-f6a4-8304-79aa-97f2502e193f"


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    monkeypatch.setenv("LABCTL_HOOK_DIR", str(hooks / "qemu.d"))
    monkeypatch.setenv("LABCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(hook, "QEMU_PID_DIRS", (tmp_path / "run",))
    return hooks


def test_install_writes_an_executable_root_dropin_and_the_list(dirs):
    hook.install(A, "1", name="web1")
    path = dirs / "qemu.d" / "labctl-vhost-pin"
    mode = path.stat().st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o755 and path.stat().st_uid == os.geteuid()
    text = path.read_text()
    assert text.startswith("#!/usr/bin/python3\n" + hook.MARKER + "\n")
    compile(text, str(path), "exec")
    assert hook.installed()
    assert hook.domains() == {A: {"name": "web1", "cpuset": "1"}}
    assert sorted(p.name for p in (dirs / "qemu.d").iterdir()) == ["labctl-vhost-pin"]  # no temporary left


def test_second_domain_then_removal_one_by_one(dirs):
    hook.install(A, "0-1", name="a")
    hook.install(B, "1,0", name="b")
    assert hook.domains() == {A: {"name": "a", "cpuset": "0-1"}, B: {"name": "b", "cpuset": "0-1"}}
    assert hook.remove(A) is True
    assert hook.installed() and list(hook.domains()) == [B]
    assert hook.remove(A) is False
    assert hook.remove(B.upper()) is True
    assert not hook.installed() and not hook.list_path().exists()
    assert list((dirs / "qemu.d").iterdir()) == []
    assert hook.remove(B) is False


def test_a_foreign_file_of_that_name_is_refused_and_nothing_written(dirs):
    (dirs / "qemu.d").mkdir()
    foreign = dirs / "qemu.d" / "labctl-vhost-pin"
    foreign.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(UserError, match="labctl did not write it") as info:
        hook.install(A, "1")
    assert "\n" not in str(info.value)
    assert foreign.read_text() == "#!/bin/sh\nexit 0\n"
    assert not hook.list_path().exists() and not hook.installed()
    assert hook.remove(A) is False and foreign.exists()


def test_a_symlink_of_that_name_is_refused(dirs, tmp_path):
    (dirs / "qemu.d").mkdir()
    target = tmp_path / "target"
    target.write_text(hook.MARKER)
    (dirs / "qemu.d" / "labctl-vhost-pin").symlink_to(target)
    with pytest.raises(UserError):
        hook.install(A, "1")
    assert target.read_text() == hook.MARKER


def test_the_users_hook_and_other_dropins_are_untouched(dirs):
    user_main = dirs / "qemu"
    user_main.write_text("#!/bin/sh\necho user\n")
    user_main.chmod(0o755)
    (dirs / "qemu.d").mkdir()
    other = dirs / "qemu.d" / "10-isolate"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o700)
    before = {p: (p.read_text(), p.stat().st_mode, p.stat().st_mtime_ns) for p in (user_main, other)}
    hook.install(A, "1")
    hook.remove(A)
    assert {p: (p.read_text(), p.stat().st_mode, p.stat().st_mtime_ns) for p in (user_main, other)} == before


def test_a_bad_cpuset_is_one_line_and_writes_nothing(dirs):
    with pytest.raises(UserError, match="guest.pinning.vhost"):
        hook.install(A, "1-")
    assert not hook.installed() and not hook.list_path().exists()


def test_reinstall_is_idempotent(dirs):
    hook.install(A, "1")
    path = dirs / "qemu.d" / "labctl-vhost-pin"
    first = path.stat().st_ino
    hook.install(A, "1")
    assert path.stat().st_ino == first  # unchanged content: not rewritten


# --- the script itself, run as libvirt runs it -----------------------------------------------------------

FAKE_QEMU = textwrap.dedent("""
    import os, sys, threading, time
    ready = threading.Event()
    def worker():
        tid = threading.get_native_id()
        with open(f"/proc/self/task/{tid}/comm", "w") as f:
            f.write(f"vhost-{os.getpid()}")
        print(tid, flush=True)
        ready.set()
        time.sleep(60)
    threading.Thread(target=worker, daemon=True).start()
    ready.wait()
    time.sleep(60)
""")


@pytest.fixture
def fake_qemu(tmp_path):
    """A process with one thread named like a vhost-net worker (vhost-<pid>), all CPUs allowed."""
    proc = subprocess.Popen([sys.executable, "-c", FAKE_QEMU], stdout=subprocess.PIPE, text=True)
    tid = int(proc.stdout.readline())
    yield proc.pid, tid
    proc.kill()
    proc.wait()


def run_hook(name: str, operation: str, uuid: str) -> subprocess.CompletedProcess:
    xml = f"<domain type='qemu'><name>{name}</name><uuid>{uuid}</uuid></domain>"
    return subprocess.run([str(hook.hook_path()), name, operation, "begin", "-"], input=xml, text=True,
                          capture_output=True, timeout=30)


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")


@needs_two_cpus
def test_the_dropin_pins_a_listed_domains_vhost_threads_on_started(fake_qemu, tmp_path):
    pid, tid = fake_qemu
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "web1.pid").write_text(f"{pid}\n")
    cpu = max(os.sched_getaffinity(0))
    hook.install(A, str(cpu), name="web1")
    assert hook.vhost_threads(pid) == [tid]
    assert run_hook("web1", "start", A).returncode == 0
    assert os.sched_getaffinity(tid) == os.sched_getaffinity(0)  # not on "start": the threads do not exist yet
    done = run_hook("web1", "started", A)
    assert done.returncode == 0, done.stderr
    assert os.sched_getaffinity(tid) == {cpu}
    assert os.sched_getaffinity(pid) == os.sched_getaffinity(0)  # only the vhost thread


@needs_two_cpus
def test_the_dropin_leaves_other_domains_alone(fake_qemu, tmp_path):
    pid, tid = fake_qemu
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "other.pid").write_text(f"{pid}\n")
    hook.install(A, str(max(os.sched_getaffinity(0))), name="web1")
    assert run_hook("other", "started", B).returncode == 0
    assert os.sched_getaffinity(tid) == os.sched_getaffinity(0)


@needs_two_cpus
def test_pin_now_uses_the_dropins_code(fake_qemu):
    pid, tid = fake_qemu
    cpu = min(os.sched_getaffinity(0))
    assert hook.pin_now(pid, str(cpu)) == [tid]
    assert os.sched_getaffinity(tid) == {cpu}


def test_libvirtd_sees_hooks_by_their_age(dirs, monkeypatch):
    monkeypatch.setattr(hook, "_daemon_start", lambda: time.time() - 3600)
    hook.install(A, "0")
    assert hook.libvirtd_sees_hooks() is False  # written after libvirtd started: it has not looked
    monkeypatch.setattr(hook, "_daemon_start", lambda: time.time() + 1)
    assert hook.libvirtd_sees_hooks() is True
    monkeypatch.setattr(hook, "_daemon_start", lambda: None)
    assert hook.libvirtd_sees_hooks() is True
