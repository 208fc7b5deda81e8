"""How a run orders and repeats its trials."""

from __future__ import annotations

from typing import Iterator

from labctl.errors import Problem
from labctl.profile.rules.registry import out_of_range, rule, warn
from labctl.profile.schema import Profile


@rule("order", "A random order within each repeat is seeded, so the run can say how to reproduce it.",
      "labctl sweep ordering (Python random.Random(seed))")
def _order(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.seed is not None and p.order != "random":
        yield warn("seed", f"seed has no effect with order {p.order} (it applies to order random)")
    if p.seed is not None:
        yield from out_of_range("seed", p.seed, 0, 2**32 - 1)


@rule("repeat", "Repeats give the noise estimate every comparison needs; more than 100 is a typo.",
      "labctl report statistics")
def _repeat(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from out_of_range("repeat", p.repeat, 1, 100)
