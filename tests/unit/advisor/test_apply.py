"""Tests of ``labctl advise --apply`` (advisor.apply): the tuned profile from the advice."""

from __future__ import annotations

import yaml

from tests import datasets
from advisor.apply import apply_advice, write_tuned
from advisor.recommend import advise
from labctl.profile.load import load_profile
from labctl.profile.schema import Profile

QUEUES = "guest.nics.*.queues"


# ------------------------------------------------------------------------------------------------
# --apply


def test_apply_advice_sets_the_values_drops_the_sweep_and_validates():
    profile = dict(datasets.BASE_PROFILE)
    profile["guest"] = {**profile["guest"], "pinning": {"vcpus": {0: "1", 1: "1"}, "vhost": "1"}}
    profile["sweep"] = {QUEUES: [1, 2], "guest.pinning.vhost": ["0", "1"]}
    tuned, notes = apply_advice(profile, advise(datasets.split_pinning()))
    assert "sweep" not in tuned
    assert tuned["name"] == "planted-tuned"
    assert [nic["queues"] for nic in tuned["guest"]["nics"]] == [2, 2]
    assert tuned["guest"]["pinning"]["vhost"] == "0"  # the mutually conditional pair is applied together
    assert sum(n.startswith("applied") for n in notes) == 2
    Profile.model_validate(tuned)


def test_write_tuned_writes_a_valid_profile_with_a_header(tmp_path):
    source = tmp_path / "p.yaml"
    source.write_text(
        "name: quick\nbackend: embedded\nguest:\n  vcpus: 1\n  memory_mib: 512\n"
        "sweep:\n  guest.nics.*.rx_queue_size: [256, 1024]\n  workload.burst: [32, 64]\n", encoding="utf-8")
    out = tmp_path / "tuned.yaml"
    notes = write_tuned(source, advise(datasets.ring_loss()), out)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Tuned by labctl advise from p.yaml.")
    assert "ring-full drops" in text
    data = yaml.safe_load(text)
    assert [nic["rx_queue_size"] for nic in data["guest"]["nics"]] == [1024, 1024]
    assert "sweep" not in data and data["guest"]["vcpus"] == 1
    assert load_profile(out).profile.name == "quick-tuned"
    assert any(n.startswith("applied guest.nics.*.rx_queue_size = 1024") for n in notes)
