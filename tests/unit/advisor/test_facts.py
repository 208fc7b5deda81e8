"""Tests of the per-trial facts (advisor.facts)."""

from __future__ import annotations

from advisor.facts import pinning_layout


def test_pinning_layout_words():
    assert pinning_layout({"guest.pinning.vhost": "0", "guest.pinning.vcpus.0": "1"}).startswith("split pinning")
    assert pinning_layout({"guest.pinning.vhost": "1", "guest.pinning.vcpus.0": "1"}).startswith("shared pinning")
    assert pinning_layout({"guest.pinning.vhost": None}) == "unpinned"
