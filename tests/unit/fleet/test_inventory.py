"""Inventories are checked before anything runs: a UserError (exit 2) naming the inventory."""

from __future__ import annotations

import pytest

from labctl.errors import UserError
from labctl.fleet.inventory import hosts_of, inventory_hosts


def test_hosts_of_a_yaml_inventory(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts:\n    a: {ansible_host: 10.0.0.1}\n  children:\n    lab:\n      hosts:\n        b:\n")
    assert inventory_hosts(path) == ["a", "b"]


def test_hosts_of_an_ini_inventory(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("[lab]\nx ansible_connection=local\ny\n")
    assert inventory_hosts(path) == ["x", "y"]


@pytest.mark.parametrize("text, problem", [
    ("all:\n  hosts: [\n", "cannot be parsed: "),
    ("all:\n  hosts: {}\n", "holds no hosts"),
])
def test_bad_inventories_name_themselves(tmp_path, text, problem):
    path = tmp_path / "bad.yml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        inventory_hosts(path)
    message = str(caught.value)
    assert message.startswith(f"inventory {path}: ") and problem in message and "\n" not in message
    assert caught.value.exit_code == 2


def test_a_missing_inventory(tmp_path):
    with pytest.raises(UserError, match=f"^inventory {tmp_path}/nope.yml: no such file or directory$"):
        inventory_hosts(tmp_path / "nope.yml")


def test_hosts_of_merges_groups_and_hostvars():
    listing = {"_meta": {"hostvars": {"a": {}}}, "all": {"children": ["ungrouped", "g"]},
               "ungrouped": {"hosts": ["b"]}, "g": {"hosts": ["a", "c"]}}
    assert hosts_of(listing) == ["a", "b", "c"]
