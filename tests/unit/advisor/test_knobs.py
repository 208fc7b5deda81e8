"""Tests of the knob model (advisor.knobs) on planted data sets."""

from __future__ import annotations

from tests import datasets
from advisor.knobs import knob_groups, knob_space

RX = "guest.nics.*.rx_queue_size"
QUEUES = "guest.nics.*.queues"


# ------------------------------------------------------------------------------------------------
# knobs


def test_nic_fields_set_alike_are_one_knob_and_pinning_is_one_knob():
    knobs = {k.name: k for k in knob_groups(datasets.split_pinning())}
    assert set(knobs) == {QUEUES, "guest.pinning"}
    assert knobs[QUEUES].paths == ("guest.nics.0.queues", "guest.nics.1.queues")
    assert knobs["guest.pinning"].paths == ("guest.pinning.vhost",)
    space = knob_space(datasets.split_pinning())
    assert space == {QUEUES: [1, 2], "guest.pinning": [{"guest.pinning.vhost": "0"}, {"guest.pinning.vhost": "1"}]}


def test_nic_fields_that_differ_between_nics_stay_separate():
    records = datasets.queue_rate()
    for r in records[:6]:
        r.config["guest.nics.1.rx_queue_size"] = 512 if r.config["guest.nics.0.rx_queue_size"] != 512 else 256
    names = {k.name for k in knob_groups(records)}
    assert "guest.nics.0.rx_queue_size" in names and "guest.nics.1.rx_queue_size" in names
    assert RX not in names
