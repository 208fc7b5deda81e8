"""``labctl apply --xml IN --out OUT`` and ``labctl advise --emit``: the offline path, and bad inputs as one
line, exit 2 and no OUT written."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT

NOVA = ROOT / "tests" / "golden" / "domain_edit" / "nova.xml"
BOMB = ('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<domain><name>&b;</name></domain>')


def test_apply_writes_out_and_prints_the_diff_and_lines(cli, tmp_path):
    out = tmp_path / "out.xml"
    code, stdout, stderr = cli("apply", "--xml", str(NOVA), "--out", str(out), "--set", "guest.nics.*.queues=2",
                               "--set", "guest.pinning.vcpus.0=1")
    assert code == 0, stderr
    assert '-      <driver name="vhost" queues="4" rx_queue_size="1024"/>' in stdout
    assert '+      <driver name="vhost" queues="2" rx_queue_size="1024"/>' in stdout
    assert "interface 1 (hostdev, fa:16:3e:ab:cd:ef, model none): skipped, type hostdev" in stdout
    assert stdout.rstrip().endswith(f"wrote {out}")
    assert '<vcpupin vcpu="0" cpuset="1"/>' in out.read_text()
    code, stdout, _ = cli("apply", "--xml", str(out), "--out", str(out), "--set", "guest.nics.*.queues=2",
                          "--set", "guest.pinning.vcpus.0=1")
    assert code == 0 and "unchanged: the domain already has these settings" in stdout and "---" not in stdout


def test_dry_run_writes_nothing(cli, tmp_path):
    out = tmp_path / "out.xml"
    code, stdout, _ = cli("apply", "--xml", str(NOVA), "--out", str(out), "--set", "guest.nics.*.queues=2", "--dry-run")
    assert code == 0 and "+      <driver" in stdout and "dry run: nothing written" in stdout
    assert not out.exists()


def test_in_place_keeps_the_file_mode(cli, tmp_path):
    path = tmp_path / "d.xml"
    shutil.copy(NOVA, path)
    path.chmod(0o640)
    assert cli("apply", "--xml", str(path), "--out", str(path), "--set", "guest.hugepages=true")[0] == 0
    assert "<hugepages/>" in path.read_text() and path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.xml"]


@pytest.mark.parametrize("text, args, message", [
    ("<network><name>n</name></network>", [], "not a libvirt domain (root element <network>, allowed: <domain>)"),
    ("<domain><name>x</domain>", [], "not well-formed XML"),
    (BOMB, [], "a DOCTYPE or entity declaration is not allowed"),
    (None, ["--set", "guest.pinning.vcpus.9=1"], "guest.pinning.vcpus.9: the domain has 4 vCPU(s) (allowed: 0..3)"),
    (None, ["--set", "guest.nics.*.mtu=9000"], "guest.nics.*.mtu: not a knob labctl apply sets (allowed: "),
    (None, ["--set", "guest.nics.7.queues=2"], "guest.nics.7: the domain has 2 interface(s) (allowed: 0..1 or *)"),
])
def test_bad_input_is_one_line_exit_2_and_no_out(cli, tmp_path, text, args, message):
    source = tmp_path / "in.xml"
    source.write_text(text if text is not None else NOVA.read_text())
    out = tmp_path / "out.xml"
    code, stdout, stderr = cli("apply", "--xml", str(source), "--out", str(out),
                               *(args or ["--set", "guest.nics.*.queues=2"]))
    assert code == 2 and message in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists() and stdout == ""


@pytest.mark.parametrize("args, message", [
    (["--xml", "nope.xml", "--out", "o.xml", "--set", "guest.nics.*.queues=2"], "--xml nope.xml: no such file"),
    (["--xml", str(NOVA), "--set", "guest.nics.*.queues=2"], "--xml needs --out FILE"),
    (["--xml", str(NOVA), "--out", "o.xml"], "nothing to apply (allowed: --set KNOB=VALUE, --profile FILE, --run N)"),
    (["dom", "--xml", str(NOVA)], "name a domain or give --xml FILE"),
    (["--verify"], "--verify: name a defined domain"),
])
def test_bad_arguments(cli, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, stderr = cli("apply", *args)
    assert code == 2 and message in stderr
    assert not (tmp_path / "o.xml").exists()


def test_emit_with_an_unknown_form_is_refused_before_the_advice(cli, tmp_path):
    code, _, stderr = cli("advise", "--db", str(tmp_path / "none.db"), "--emit", "chef")
    assert code == 2 and "--emit chef: not a form labctl writes (allowed: libvirt, nova, kubevirt, ansible)" in stderr


def test_a_tuned_profile_applies_its_nics_and_pins(cli, tmp_path, write_profile):
    profile = write_profile("name: t\nguest:\n  vcpus: 2\n  nics:\n"
                            "    - {backend: tap, queues: 2, rx_queue_size: 512}\n"
                            "  pinning: {vcpus: {0: 1}}\n")
    out = tmp_path / "out.xml"
    code, stdout, stderr = cli("apply", "--xml", str(NOVA), "--out", str(out), "--profile", str(profile))
    assert code == 0, stderr
    assert '+      <driver name="vhost" queues="2" rx_queue_size="512" tx_queue_size="256"/>' in stdout
    assert '+    <vcpupin vcpu="0" cpuset="1"/>' in stdout
    assert "XML" not in stderr


def test_malformed_xml_message_names_the_line_once(cli, tmp_path):
    source = tmp_path / "in.xml"
    source.write_text("<domain>\n<name>x</domain>\n")
    code, _, stderr = cli("apply", "--xml", str(source), "--out", str(tmp_path / "o.xml"), "--set", "guest.hugepages=true")
    assert code == 2 and "<string>" not in stderr and stderr.startswith(f"--xml {source}: not well-formed XML: ")
