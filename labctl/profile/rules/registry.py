"""The rule registry: ``Rule`` (id, reason, source, check), ``RULES`` in the order the rules are declared, the
``@rule`` decorator, and the helpers every rule words its problems with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from labctl.errors import Problem
from labctl.profile.schema import Profile


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    source: str
    check: Callable[[Profile, frozenset[int]], Iterable[Problem]]


RULES: list[Rule] = []


def rule(rule_id: str, reason: str, source: str):
    def register(func: Callable[[Profile, frozenset[int]], Iterable[Problem]]):
        RULES.append(Rule(rule_id, reason, source, func))
        return func

    return register


def err(path: str, message: str) -> Problem:
    return Problem(path, message)


def warn(path: str, message: str) -> Problem:
    return Problem(path, message, severity="warning")


def out_of_range(path: str, value: int | float, low: int | float, high: int | float, unit: str = "") -> Iterator[Problem]:
    if not low <= value <= high:
        yield err(path, f"{value}{unit} is out of range (allowed: {low}..{high}{unit})")
