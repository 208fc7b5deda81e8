"""The lab table (labctl.lab.table): every shape a valid profile can take has exactly one row, every row is
reached by a valid profile and names a class that provides MeasuredLab and a check that can be called, and reading
the table (and making an embedded lab) imports no libvirt."""

from __future__ import annotations

import inspect
import itertools
import subprocess
import sys

import pytest

from labctl.errors import PlanError
from labctl.lab.interface import MeasuredLab
from labctl.lab.plan import derive
from labctl.lab.table import LABS, Shape, lab_row
from labctl.profile.load import load_profile
from labctl.profile.rules import check_profile
from labctl.profile.schema import Profile
from tests.conftest import CPUS, DOMAINS
from tests.unit.lab.test_interface import LABS as INTERFACE_LABS, build, problems

ALL_SHAPES = [Shape(*combo) for combo in itertools.product(("embedded", "libvirt"), ("pvp", "vm2vm"),
                                                           ("testpmd", "ovs-dpdk"), ("dpdk", "kernel"), (False, True))]


def candidate_profiles():
    """Every profile that differs in what decides a shape or whether it is allowed: backend, topology, vswitch
    kind, workload kind (the stack), an image or not, and the NICs' backend and count."""
    for backend, topology, vswitch, kind, image, nic_backend, nics in itertools.product(
            ("embedded", "libvirt"), ("pvp", "vm2vm"), ("testpmd", "ovs-dpdk"), ("forward", "tcp_stream", "tcp_rr"),
            (None, "/var/lib/labctl/images/absent.qcow2"), ("vhostuser", "tap", "network"), (1, 2)):
        guest = {"nics": [{"backend": nic_backend}] * nics, **({"image": image} if image else {})}
        workload = {"kind": kind, **({"forwarder": "testpmd"} if image else {})}
        yield Profile.model_validate({"name": "t", "backend": backend, "topology": topology,
                                      "vswitch": {"kind": vswitch}, "workload": workload, "guest": guest})


def valid_plans():
    for profile in candidate_profiles():
        if not [p for p in check_profile(profile, CPUS) if p.severity == "error"]:
            yield derive(profile)


def test_every_shape_a_valid_profile_takes_has_exactly_one_row_and_every_row_is_reached():
    assert len({row.shape for row in LABS}) == len(LABS)  # no shape twice
    reached = set()
    for plan in valid_plans():
        shape = Shape.of(plan)
        assert [row for row in LABS if row.shape == shape] == [lab_row(plan)], shape
        reached.add(shape)
    assert reached == {row.shape for row in LABS}  # no row a valid profile never takes
    refused = [shape for shape in ALL_SHAPES if shape not in reached]
    assert len(refused) == len(ALL_SHAPES) - len(LABS) > 0


def test_a_shape_without_a_row_is_one_plan_error_naming_it():
    plan = derive(load_profile(DOMAINS / "tcp-rr.yaml", cpus=CPUS).profile)
    from dataclasses import replace

    with pytest.raises(PlanError) as err:
        lab_row(replace(plan, lab="embedded"))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("backend embedded, topology pvp, vswitch.kind testpmd, stack kernel: no lab measures this "
                           "(allowed: backend embedded, topology pvp, vswitch.kind testpmd, stack dpdk; ")


@pytest.mark.parametrize("row", LABS, ids=lambda r: str(r.shape))
def test_every_row_names_a_measured_lab_and_a_check(row, tmp_path):
    cls = row.lab_class()
    stem, provided = INTERFACE_LABS[cls]  # tests/unit/lab/test_interface.py checks every protocol it provides
    assert MeasuredLab in provided
    assert problems(cls, build(cls, stem, tmp_path), MeasuredLab) == []
    shipped = derive(load_profile(DOMAINS / f"{stem}.yaml", cpus=CPUS).profile)
    assert lab_row(shipped).lab_class() is cls  # the class's own shipped profile is measured by it
    check = row.checker()
    if row.shape.backend == "embedded":
        assert check is None  # the socket paths only (labctl.measure.labs.check_socket_paths)
    else:
        assert list(inspect.signature(check).parameters)[:2] == ["plan", "uri"]


def test_every_lab_class_has_a_row():
    assert {row.lab_class() for row in LABS} == set(INTERFACE_LABS)


def test_reading_the_table_and_making_an_embedded_lab_import_no_libvirt():
    code = ("import sys\n"
            "from labctl.lab.table import lab_row\n"
            "from labctl.measure.labs import embedded_lab\n"
            "from labctl.lab.ledger import LabState\n"
            "from labctl.lab.plan import derive\n"
            "from labctl.profile.load import load_profile\n"
            f"plan = derive(load_profile({str(DOMAINS / 'quick.yaml')!r}, cpus=frozenset({{0, 1}})).profile)\n"
            "lab = embedded_lab(plan, LabState(plan.name, sys.argv[1]), [])\n"
            "print(type(lab).__name__, sorted(m for m in sys.modules if m.split('.')[0] == 'libvirt'))\n")
    done = subprocess.run([sys.executable, "-c", code, "/nonexistent/state.json"], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["EmbeddedLab", "[]"]
