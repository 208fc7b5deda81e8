from __future__ import annotations

import pytest

from labctl.errors import KnobError
from labctl.profile.knobs import crossed, flatten, get_knob, parse_assignment, set_knob, with_knobs
from labctl.profile.schema import Profile


def base():
    return Profile(name="k").model_dump()


def test_set_and_get():
    data = base()
    set_knob(data, "guest.nics.1.queues", 4)
    assert get_knob(data, "guest.nics.1.queues") == 4 and get_knob(data, "guest.nics.0.queues") == 1


def test_wildcard_sets_all():
    data = with_knobs(base(), {"guest.nics.*.rx_queue_size": 1024})
    assert [n["rx_queue_size"] for n in data["guest"]["nics"]] == [1024, 1024]


def test_new_pinning_entry():
    data = with_knobs(base(), {"guest.pinning.vcpus.1": "0"})
    assert Profile.model_validate(data).guest.pinning.vcpus == {1: "0"}


@pytest.mark.parametrize("path,needle", [("guest.nics.5.queues", "out of range"), ("guest.nics.x.queues", "index"),
                                         ("gust.vcpus", "no such knob"), ("guest.vcpus.x", "no fields"),
                                         ("", "dotted path"), ("sweep.x", "sweep")])
def test_bad_paths(path, needle):
    with pytest.raises(KnobError, match=needle):
        set_knob(base(), path, 1)


def test_parse_assignment_types():
    assert parse_assignment("workload.burst=64") == ("workload.burst", 64)
    assert parse_assignment("guest.hugepages=true") == ("guest.hugepages", True)
    assert parse_assignment("workload.mode=mac") == ("workload.mode", "mac")
    with pytest.raises(KnobError):
        parse_assignment("workload.burst")
    with pytest.raises(KnobError):
        parse_assignment("workload.burst=[1,2]")


def test_crossed_order_and_count():
    combos = list(crossed({"a": [1, 2], "b": ["x", "y", "z"]}))
    assert len(combos) == 6 and combos[0] == {"a": 1, "b": "x"} and combos[1] == {"a": 1, "b": "y"}
    assert list(crossed({})) == [{}]


def test_flatten_includes_defaults_and_skips_sweep():
    flat = flatten(Profile(name="k", sweep={"workload.burst": [1]}).model_dump())
    assert flat["guest.nics.0.rx_queue_size"] == 256 and flat["workload.burst"] == 32
    assert not any(k.startswith("sweep") for k in flat)
