"""``check_profile``: every rule on a profile, then every configuration of its sweep."""

from __future__ import annotations

from labctl.errors import Problem
from labctl.profile.rules.registry import RULES, err
from labctl.profile.schema import Profile


MAX_SWEEP_CONFIGS = 4096


def check_profile(profile: Profile, cpus: frozenset[int], with_sweep: bool = True) -> list[Problem]:
    """Run every rule; with_sweep also validates every configuration of the sweep matrix."""
    problems: list[Problem] = []
    for item in RULES:
        problems.extend(item.check(profile, cpus))
    if with_sweep and profile.sweep and not any(p.severity == "error" for p in problems):
        # the sweep's configurations are checked once the profile itself is valid: its own errors
        # would only come back once per configuration
        problems.extend(_check_sweep(profile, cpus))
    return problems


def _check_sweep(profile: Profile, cpus: frozenset[int]) -> list[Problem]:
    from labctl.profile.knobs import crossed, with_knobs
    from labctl.errors import KnobError
    from labctl.profile.schema import Profile as ProfileModel
    from pydantic import ValidationError

    problems: list[Problem] = []
    total = 1
    for knob, values in profile.sweep.items():
        path = f"sweep.{knob}"
        if not values:
            problems.append(err(path, "an empty list of values (allowed: one or more values)"))
        if len(values) != len(set(map(repr, values))):
            problems.append(err(path, "a value appears twice"))
        total *= max(len(values), 1)
    if total > MAX_SWEEP_CONFIGS:
        problems.append(err("sweep", f"{total} configurations (allowed: at most {MAX_SWEEP_CONFIGS})"))
    if problems:
        return problems
    base = profile.model_dump()
    seen: set[str] = set()
    for knobs in crossed(profile.sweep):
        try:
            data = with_knobs(base, knobs)
            candidate = ProfileModel.model_validate(data)
        except KnobError as exc:
            message = str(exc)
            knob = message.split(":", 1)[0]
            problems.append(err(f"sweep.{knob}", message.split(": ", 1)[-1]))
            break
        except ValidationError as exc:
            for error in exc.errors():
                loc = ".".join(str(x) for x in error["loc"])
                knob = next((k for k in knobs if loc.startswith(k.replace("*", "0")) or k.endswith(loc)), loc)
                key = f"{knob}:{error['msg']}"
                if key not in seen:
                    seen.add(key)
                    problems.append(err(f"sweep.{knob}", f"value {knobs.get(knob)!r}: {error['msg']}"))
            continue
        setting = ", ".join(f"{k}={v}" for k, v in knobs.items())
        for problem in check_profile(candidate, cpus, with_sweep=False):
            if problem.severity != "error":
                continue
            key = f"{problem.path}:{problem.message}"
            if key not in seen:
                seen.add(key)
                problems.append(err(f"sweep ({setting}) {problem.path}", problem.message))
    return problems
