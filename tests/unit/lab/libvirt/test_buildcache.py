"""The content-addressed build cache (labctl.lab.libvirt.buildcache) on its own: hit, miss, force, two builders at
once, a failed, an interrupted and a killed build, the entries kept. The build is a small function writing a file:
the cache is what is under test (the appliance's and the guest image's real builds are the integration tests')."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from labctl.errors import ApplianceError, GuestImageError
from labctl.lab.libvirt import buildtools
from labctl.lab.libvirt.appliance import tools as appliance_tools
from labctl.lab.libvirt.buildcache import BuildCache
from labctl.lab.libvirt.guestimage import tools as guestimage_tools

META = "entry.json"


@dataclass(frozen=True)
class Thing:
    path: Path
    text: str
    built: bool


def load(path: Path, built: bool) -> Thing | None:
    try:
        json.loads((path / META).read_text())
        return Thing(path, (path / "thing").read_text(), built)
    except (OSError, ValueError):
        return None


def cache_in(directory: Path, **kw) -> BuildCache[Thing]:
    return BuildCache(directory, load, META, ApplianceError, entry_prefix="thing-", build_prefix=".build-thing-", **kw)


class Maker:
    """A build: scratch in the work directory, ``thing`` in the entry; counts its calls."""

    def __init__(self, text: str = "made"):
        self.text = text
        self.works: list[Path] = []

    def __call__(self, work: Path, entry: Path) -> dict:
        self.works.append(work)
        (work / "scratch").write_text("scratch")
        (entry / "thing").write_text(self.text)
        return {"text": self.text}


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".build-"))


def test_a_miss_builds_and_publishes_then_the_same_key_is_a_hit(tmp_path):
    cache, make, said = cache_in(tmp_path / "c"), Maker(), []
    first = cache.build("k1", make, progress=said.append)
    assert first == Thing(tmp_path / "c" / "thing-k1", "made", True)
    assert json.loads((first.path / META).read_text()) == {"text": "made"}
    assert not make.works[0].exists() and leftovers(cache.directory) == []  # the work directory went
    second = cache.build("k1", Maker("other"), progress=said.append)
    assert second == Thing(first.path, "made", False) and len(make.works) == 1
    assert said[-1] == f"cache hit {first.path}"
    assert cache.lookup("k1") == second and cache.lookup("k2") is None
    third = cache.build("k2", make)
    assert third.built and third.path.name == "thing-k2" and len(make.works) == 2


def test_force_rebuilds_and_replaces_the_entry_whole(tmp_path):
    cache = cache_in(tmp_path)
    cache.build("k", Maker("old"))
    (tmp_path / "thing-k" / "stale-file").write_text("of the old entry")
    forced = cache.build("k", Maker("new"), force=True)
    assert forced.built and forced.text == "new"
    assert sorted(p.name for p in forced.path.iterdir()) == [META, "thing"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("thing-")] == ["thing-k"]
    assert leftovers(tmp_path) == []


def test_a_half_entry_under_the_key_is_no_hit_and_is_replaced(tmp_path):
    cache = cache_in(tmp_path)
    half = tmp_path / "thing-k"
    half.mkdir()
    (half / "thing").write_text("half: no metadata")
    assert cache.lookup("k") is None
    built = cache.build("k", Maker())
    assert built.built and built.text == "made" and not (half / "stale").exists()


def test_a_second_builder_waits_for_the_first_and_reuses_its_entry(tmp_path):
    cache = cache_in(tmp_path)
    make = Maker()
    second_waits = threading.Event()

    def slow(work: Path, entry: Path) -> dict:
        assert second_waits.wait(30), "the second builder never waited for the lock"
        return make(work, entry)

    results: dict[str, Thing] = {}
    first = threading.Thread(target=lambda: results.update(first=cache.build("k", slow)))
    first.start()
    while first.is_alive() and not list(tmp_path.glob(".build-thing-*")):  # until the first holds the lock
        first.join(0.01)
    said: list[str] = []

    def progress(text: str) -> None:
        said.append(text)
        if text.startswith("waiting for another build"):
            second_waits.set()

    reused = cache.build("k", Maker("never"), progress=progress)
    first.join(30)
    assert said[0] == f"waiting for another build in {tmp_path} (lock .lock)"
    assert said[-1].startswith(f"cache hit {tmp_path / 'thing-k'}")
    assert results["first"].built and not reused.built and reused.path == results["first"].path
    assert len(make.works) == 1 and reused.text == "made"


@pytest.mark.parametrize("failure", [GuestImageError("mmdebstrap failed"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_build_leaves_no_entry_and_no_work_dir(tmp_path, failure):
    cache = cache_in(tmp_path)
    works = []

    def failing(work: Path, entry: Path) -> dict:
        works.append(work)
        (entry / "thing").write_text("half")
        raise failure

    with pytest.raises(type(failure)):
        cache.build("k", failing)
    assert works and not works[0].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]
    assert cache.lookup("k") is None
    assert cache.build("k", Maker()).built  # and the next build is not hindered


KILLED_BUILDER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from labctl.errors import ApplianceError
    from labctl.lab.libvirt.buildcache import BuildCache

    def make(work, entry):
        (entry / "thing").write_text("half")
        # a tool that outlives its builder, still working in the build directory (as a chroot's dpkg would)
        tool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=work,
                                start_new_session=True)
        print(work, tool.pid, flush=True)
        time.sleep(120)

    BuildCache(Path(sys.argv[1]), lambda path, built: None, "entry.json", ApplianceError, entry_prefix="thing-",
               build_prefix=".build-thing-").build("k", make)
""")


def test_a_killed_builds_work_dir_and_its_tool_are_cleaned_up_by_the_next_build(tmp_path):
    builder = subprocess.Popen([sys.executable, "-c", KILLED_BUILDER, str(tmp_path)], stdout=subprocess.PIPE,
                               text=True)
    tool_pid = None
    try:
        line = builder.stdout.readline().split()
        assert line, "the builder did not start its build"
        work, tool_pid = Path(line[0]), int(line[1])
        builder.send_signal(signal.SIGKILL)
        builder.wait(10)
        assert work.is_dir() and (work / "entry" / "thing").exists() and psutil.pid_exists(tool_pid)
        said: list[str] = []
        maker = Maker()

        def make_after_the_clean_up(work_dir: Path, entry: Path) -> dict:
            assert not work.exists(), "the killed build's leftovers are still there when the next build starts"
            return maker(work_dir, entry)

        built = cache_in(tmp_path).build("k", make_after_the_clean_up, progress=said.append)
        assert built.built and built.text == "made"
        assert not work.exists() and leftovers(tmp_path) == []
        assert f"removed a killed build's {work} (freed: process {tool_pid})" in said
        assert not psutil.pid_exists(tool_pid) or psutil.Process(tool_pid).status() == psutil.STATUS_ZOMBIE
    finally:
        builder.kill()
        builder.wait()
        if tool_pid is not None and psutil.pid_exists(tool_pid):
            os.kill(tool_pid, signal.SIGKILL)


def test_only_the_newest_entries_are_kept(tmp_path):
    cache = cache_in(tmp_path, keep=2)
    for n in range(4):
        entry = cache.build(f"k{n}", Maker(str(n)))
        os.utime(entry.path / META, (n + 1, n + 1))  # oldest first, whatever the clock's resolution
    assert sorted(p.name for p in tmp_path.glob("thing-*")) == ["thing-k2", "thing-k3"]
    assert [e.text for _path, e in cache.entries()] == ["2", "3"]


def test_the_mode_is_given_to_the_directory_and_every_entry(tmp_path):
    directory = tmp_path / "images"
    entry = cache_in(directory, mode=0o755).build("k", Maker())
    assert oct(directory.stat().st_mode & 0o777) == oct(entry.path.stat().st_mode & 0o777) == "0o755"


# --- the tools, one set for both builders --------------------------------------------------------------------

def test_each_builder_gets_its_own_error_from_the_one_runner():
    for tools, error in ((appliance_tools, ApplianceError), (guestimage_tools, GuestImageError)):
        with pytest.raises(error, match="^labctl-no-such-tool-x is not installed"):
            tools.run(["labctl-no-such-tool-x"])
        with pytest.raises(error) as failed:
            tools.run([sys.executable, "-c", "import sys; print('out'); sys.stderr.write('first\\nlast words\\n\\n');"
                       " sys.exit(3)"])
        text = str(failed.value)
        assert text.startswith(f"{sys.executable} -c ") and text.endswith("failed (3): last words")


def test_the_runner_names_the_command_quoted_and_clipped_and_takes_cwd_and_input(tmp_path):
    assert buildtools.command_text(["a b", "c"]) == "'a b' c"
    long = buildtools.command_text(["mmdebstrap", "--include=" + ",".join(["pkg"] * 100)])
    assert len(long) == buildtools.COMMAND_SHOWN + 4 and long.endswith(" ...")
    assert buildtools.run(["pwd"], cwd=tmp_path).stdout.strip() == str(tmp_path)
    assert buildtools.run(["cat"], input_text="abc").stdout == "abc"
    assert buildtools.run(["false"], check=False).returncode == 1


def test_a_timed_out_tool_names_its_command_and_is_stopped(tmp_path):
    with pytest.raises(ApplianceError, match=r"^\S+ -c 'import time; time.sleep\(60\)' timed out after 0.5 s$"):
        appliance_tools.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    alive = [p for p in psutil.process_iter(["cmdline", "status"])
             if p.info["cmdline"] == [sys.executable, "-c", "import time; time.sleep(60)"]
             and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert alive == []
