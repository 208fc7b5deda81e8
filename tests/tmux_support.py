"""Driving a terminal program in tmux for the tests: a private tmux server (its own socket, no user
configuration, no status line, so the pane is the whole window), keys sent with ``send-keys`` and the
screen read with ``capture-pane``. Every wait polls the pane until what is wanted shows, with a timeout.

tmux (Debian package ``tmux``, in scripts/apt-packages.txt) is the terminal: what a user sees at
80x24 is what ``capture-pane -p`` prints, the program running on a real pty with its own process.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

import pytest

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (scripts/setup-host.sh installs it)")
_ids = itertools.count()


class Pane:
    """One program in a detached tmux session of ``size`` (columns, lines); ``pid`` is the program's. The
    pane stays after the program exits (``remain-on-exit``), so its exit status can be read."""

    def __init__(self, argv: Sequence[str], cwd: str | Path, size: tuple[int, int] = (80, 24),
                 env: dict[str, str] | None = None, config_dir: str | Path | None = None) -> None:
        assert TMUX is not None
        self.socket = f"labctl-test-{os.getpid()}-{next(_ids)}"
        self.size = size
        environment = dict(os.environ if env is None else env)
        environment.setdefault("TERM", "xterm-256color")
        environment.pop("TMUX", None)  # a server of its own even when the tests themselves run inside tmux
        for sized in ("COLUMNS", "LINES"):  # Textual takes these over the terminal's own size: the pane's size rules
            environment.pop(sized, None)
        conf = Path(config_dir or "/tmp") / f"{self.socket}.conf"
        # the server's global environment is the one it starts with: the program gets exactly ``environment``
        conf.write_text("set -g remain-on-exit on\nset -g status off\nset -g default-terminal tmux-256color\n"
                        "set -g history-limit 0\n")
        self._conf = conf
        self._tmux("-f", str(conf), "new-session", "-d", "-s", "app", "-x", str(size[0]), "-y", str(size[1]),
                   "-c", str(cwd), "--", *argv, env=environment)
        pid, socket_path = self._tmux("display-message", "-p", "-t", "app",
                                      "#{pane_pid} #{socket_path}").stdout.strip().split(" ", 1)
        self.pid, self._socket_path = int(pid), Path(socket_path)

    def _tmux(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, check=check, env=env,
                              timeout=30)

    # -- reading and typing --------------------------------------------------------------------------

    def capture(self) -> str:
        """The pane's text as the user sees it now (trailing blanks of each line removed)."""
        shown = self._tmux("capture-pane", "-p", "-t", "app").stdout
        return "\n".join(line.rstrip() for line in shown.splitlines())

    def send(self, *keys: str) -> None:
        """Keys as tmux names them (``Enter``, ``Tab``, ``Down``, ``q``), one ``send-keys`` each."""
        for key in keys:
            self._tmux("send-keys", "-t", "app", key)

    def wait_for(self, *texts: str, timeout: float = 20.0, absent: Sequence[str] = ()) -> str:
        """Poll the pane until every one of ``texts`` is on it (and none of ``absent``); returns the screen."""
        return self.wait_until(lambda screen: all(t in screen for t in texts) and not any(a in screen for a in absent),
                               f"{list(texts)} on the screen" + (f", {list(absent)} not" if absent else ""), timeout)

    def wait_until(self, predicate: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            if self.exited() is not None:
                screen = self.capture()
                raise AssertionError(f"the program exited ({self.exited()}) waiting for {what}; its screen:\n{screen}")
            screen = self.capture()
            if predicate(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; the screen:\n{screen}")

    # -- the program ---------------------------------------------------------------------------------

    def exited(self) -> int | None:
        """The program's exit status once it has exited (None while it runs).

        tmux marks the pane dead when it reaps the program, but Debian's tmux 3.3a can miss that
        SIGCHLD: when the pty closes it removes the utmp record through libutempter, which forks its
        helper and waits for it with SIGCHLD at its default (ignored), so a SIGCHLD arriving then is
        lost and the program stays a zombie that tmux never reaps. A zombie has exited: its status is
        field 52 of /proc/PID/stat (``exit_code``, as waitpid(2) reports it, Linux 3.5+)."""
        dead, status = self._tmux("display-message", "-p", "-t", "app",
                                  "#{pane_dead} #{pane_dead_status}").stdout.split(" ", 1)
        if dead == "1" and status.strip():
            return int(status)
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except FileNotFoundError:
            return None  # reaped between the two reads: tmux has it now
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 (state) onwards
        if fields[0] != "Z":
            return None
        code = int(fields[52 - 3])
        return code >> 8 if code & 0x7F == 0 else 128 + (code & 0x7F)

    def wait_exit(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.exited()
            if status is not None:
                return status
            time.sleep(0.05)
        raise AssertionError(f"the program did not exit within {timeout:g} s; its screen:\n{self.capture()}")

    def close(self) -> None:
        """Stop the tmux server (and with it a program still running: SIGHUP)."""
        self._tmux("kill-server", check=False)
        self._conf.unlink(missing_ok=True)
        self._socket_path.unlink(missing_ok=True)  # tmux leaves its socket behind after kill-server

    def __enter__(self) -> "Pane":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
