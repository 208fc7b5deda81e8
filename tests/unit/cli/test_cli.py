"""The CLI's contract: exit codes, one line per problem, no tracebacks."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import DOMAINS, ROOT, shipped_profiles


def test_validate_ok(cli):
    code, out, err = cli("validate", *map(str, shipped_profiles()))
    assert code == 0
    assert out.count(": ok") == len(shipped_profiles())


def test_validate_reports_each_problem_and_exits_2(cli, write_profile):
    path = write_profile("name: x\nguest:\n  nics:\n    - {backend: tap, tx_queue_size: 1024}\n  vcpus: 0\n")
    code, out, err = cli("validate", str(path), str(DOMAINS / "quick.yaml"))
    assert code == 2
    lines = err.strip().splitlines()
    assert any(line.startswith(f"{path}: line 4: guest.nics.0.tx_queue_size:") for line in lines)
    assert any("guest.vcpus" in line for line in lines)
    assert "quick.yaml: ok" in out


def test_render_bad_file_one_line_exit_2(cli, tmp_path):
    code, out, err = cli("render", str(tmp_path / "missing.yaml"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot read" in err


def test_render_set_override(cli):
    code, out, _ = cli("render", str(DOMAINS / "quick.yaml"), "--set", "guest.nics.*.queues=2")
    assert code == 0 and out.count('queues="2"') == 2


def test_render_bad_set(cli):
    code, _, err = cli("render", str(DOMAINS / "quick.yaml"), "--set", "novalue")
    assert code == 2 and "KNOB=VALUE" in err


def test_usage_error_exit_2(cli):
    code, _, err = cli("render")
    assert code == 2 and "Missing argument" in err


def test_console_script_no_traceback_on_garbage(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_bytes(b"name: x\nguest: {nics: [{queues: !!binary 'AAA'}]}\n")
    proc = subprocess.run([sys.executable, "-m", "labctl.cli", "validate", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.strip()


def test_doctor_json(cli):
    import json

    code, out, _ = cli("doctor", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["accel"] in ("kvm", "tcg") and data["cpus"] and "embedded" in data["backends"]
    assert set(data["versions"]) == {"libvirt", "qemu", "dpdk"}


def test_advise_plan_and_replay_cli(cli, tmp_path):
    import json as _json

    from tests.datasets import search_grid
    from labctl.results.interchange import record_to_line

    code, out, _ = cli("advise", "--plan", str(DOMAINS / "quick.yaml"), "--json")
    plan = _json.loads(out)
    assert code == 0 and plan["vswitch_pmd"] and plan["vswitch_pmd"] not in plan["vcpus"].values()
    code, _, err = cli("advise", "--plan", str(DOMAINS / "l2fwd-vhostuser.yaml"))
    assert code == 2 and "needs" in err and "NUMA node" in err
    records = search_grid(seed=0)
    path = tmp_path / "grid.jsonl"
    path.write_text("".join(_json.dumps(record_to_line(r)) + "\n" for r in records))
    code, out, _ = cli("tune", "--replay", str(path), "--budget", "20", "--seed", "3", "--json")
    data = _json.loads(out)
    assert code == 0 and data["trials_used"] <= 20 and data["best_config"] and len(data["history"]) == data["trials_used"]
    code2, out2, _ = cli("tune", "--replay", str(path), "--budget", "20", "--seed", "3", "--json")
    assert _json.loads(out2) == data  # the same seed gives the same search
    code, text, _ = cli("tune", "--replay", str(path), "--budget", "20", "--seed", "3")
    knobs = " ".join(f"{k}={v}" for k, v in data["best_config"].items())
    assert code == 0 and text.startswith(f"best: {knobs} (median ") and f"{data['trials_used']} trials used" in text
    code, _, err = cli("tune", "--budget", "5")
    assert code == 2 and "--replay" in err
    code, _, err = cli("advise", "--db", str(tmp_path / "missing.db"))
    assert code == 2 and "no such result store" in err
    code, _, err = cli("advise", "--apply", str(DOMAINS / "quick.yaml"))
    assert code == 2 and "--out" in err


def test_bad_input_creates_nothing(cli, tmp_path, write_profile):
    db = tmp_path / "new.db"
    on_test_driver = write_profile((DOMAINS / "tap-kernel.yaml").read_text() + "uri: test:///default\n")
    for command in ("sweep", "run"):
        code, _, err = cli(command, str(on_test_driver), "--db", str(db)) if command == "sweep" else \
            cli(command, str(on_test_driver))
        assert code == 2 and "test driver runs no guest" in err and not db.exists()
    mixed = write_profile("name: mixed\nguest:\n  nics: [{backend: vhostuser}, {backend: tap}]\n", "mixed.yaml")
    code, _, err = cli("sweep", str(mixed), "--db", str(db))
    assert code == 2 and err.startswith("guest.nics: ") and not db.exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"config": {}, "metrics": {"mpps": "fast"}}\n')
    code, _, err = cli("import", str(bad), "--db", str(db))
    assert code == 2 and "bad.jsonl:1" in err and not db.exists()
    code, _, err = cli("down", "../../etc")
    assert code == 2 and "neither a profile file nor a lab name" in err
    assert not (tmp_path.parent / "etc.lock").exists()
    code, out, _ = cli("down", "never-up")
    assert code == 0 and "nothing to remove" in out and not list((tmp_path / "state").glob("never-up*"))
    code, _, err = cli("up", str(DOMAINS / "tap-kernel.yaml"), "--timeout", "-5")
    assert code == 2 and "--timeout" in err
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite" * 100)
    code, _, err = cli("report", "--db", str(junk))
    assert code == 2 and "not a labctl result store" in err and len(err.strip().splitlines()) == 1


def test_out_paths_checked_before_work(cli, tmp_path):
    from labctl.results.store import Store

    db = tmp_path / "s.db"
    Store(db).close()
    code, _, err = cli("export", "--db", str(db), "--out", str(tmp_path / "missing" / "x.jsonl"))
    assert code == 2 and "--out" in err
    code, _, err = cli("plot", "--db", str(db), "--by", "x", "--out", str(tmp_path / "missing" / "x.png"))
    assert code == 2 and "--out" in err and not (tmp_path / "missing").exists()


def test_version_and_shell_completion(cli):
    from labctl import __version__, api

    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == api.version_line(__version__)  # the version and the commit it was built from
    assert out.startswith(f"labctl {__version__} (commit ")
    code, out, _ = cli("--help")
    assert code == 0 and "--install-completion" in out and "--show-completion" in out


def test_help_paragraphs_are_one_line_each():
    """Typer's rich help prints a docstring's line breaks as they are (the first paragraph's in the command list
    of `labctl --help`, the later ones' in `COMMAND --help`), so a wrapped paragraph shows ragged: each paragraph
    of a command's docstring is one line."""
    import inspect

    import typer.main

    from labctl.cli.app import app

    def commands(group, path=()):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, path + (name,))
            else:
                yield " ".join(path + (name,)), command

    ragged = []
    for name, command in commands(typer.main.get_command(app)):
        paragraphs = inspect.cleandoc(command.help or "").partition("\f")[0].split("\n\n")
        ragged += [f"{name}: {paragraph[:40]!r}" for paragraph in paragraphs if "\n" in paragraph.strip()]
    assert not ragged, ragged


def test_sweep_order_is_checked_before_any_work(cli, tmp_path):
    db = tmp_path / "order.db"
    code, _, err = cli("sweep", str(DOMAINS / "quick.yaml"), "--db", str(db), "--order", "bogus")
    assert code == 2 and err.strip() == "--order bogus: not an order (allowed: interleaved, random)"
    assert not db.exists()


def test_sweep_swap_is_checked_before_the_profile_is_read_and_sets_the_field(cli, tmp_path):
    db = tmp_path / "swap.db"
    code, _, err = cli("sweep", str(tmp_path / "missing.yaml"), "--db", str(db), "--swap", "reboot")
    assert code == 2 and err.strip() == "--swap reboot: not a way to reach a configuration (allowed: hotplug, boot)"
    code, _, err = cli("tune", str(DOMAINS / "quick.yaml"), "--budget", "4", "--db", str(db), "--swap", "reboot")
    assert code == 2 and err.strip() == "--swap reboot: not a way to reach a configuration (allowed: hotplug, boot)"
    assert not db.exists()
    from labctl.cli.measure import _knobs

    assert _knobs(None, None, "boot") == {"swap": "boot"}
