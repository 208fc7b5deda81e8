"""Loading lab profiles: file -> YAML -> schema -> rules, with every problem on its own line."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from labctl.host.cpuset import online_cpus
from labctl.errors import KnobError, Problem, ProfileError
from labctl.profile.knobs import set_knob
from labctl.profile.rules import check_profile
from labctl.profile.schema import Profile
from labctl.errors import YamlProblem
from labctl.profile.yamlsrc import load_yaml


@dataclass
class LoadedProfile:
    profile: Profile
    source: str
    warnings: list[Problem] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _model_fields_at(loc: tuple[Any, ...]) -> list[str] | None:
    """The field names allowed at ``loc`` (a location inside Profile), for 'unknown key' messages."""
    model: Any = Profile
    keyed = False  # the part before named a map of models (builds): this part is one of its keys
    for part in loc:
        if keyed or isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            keyed = False
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        keyed = typing.get_origin(annotation) is dict
        for candidate in (annotation, *typing.get_args(annotation)):
            inner = typing.get_args(candidate)
            for sub in (candidate, *inner):
                if isinstance(sub, type) and issubclass(sub, BaseModel):
                    model = sub
                    break
            else:
                continue
            break
        else:
            return None
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return None


_KIND = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
    "bool_parsing": "true or false", "string_type": "a string", "list_type": "a list",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
}


def schema_problems(exc: ValidationError, lines: dict[str, int]) -> list[Problem]:
    problems: list[Problem] = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        kind = error["type"]
        if kind == "extra_forbidden":
            allowed = _model_fields_at(loc[:-1])
            message = f"unknown key {str(loc[-1])!r}" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "literal_error":
            message = f"{_short(error['input'])} is not allowed (allowed: {error['ctx']['expected']})"
        elif kind in _KIND:
            message = f"expected {_KIND[kind]}, got {type(error['input']).__name__} {_short(error['input'])}"
        else:
            message = error["msg"]
        # dict keys that fail validation show as "[key]" entries in loc
        path = ".".join(str(x).replace("[key]", "") for x in loc if x != "[key]")
        problems.append(Problem(path, message, line=lines.get(path)))
    return problems


def validate_data(data: Any, source: str, lines: dict[str, int] | None = None,
                  cpus: frozenset[int] | None = None) -> LoadedProfile:
    lines = lines or {}
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ProfileError(source, [Problem("", f"a profile is a YAML mapping with name, backend, guest, ...; this is {kind}", line=1)])
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(source, schema_problems(exc, lines)) from None
    problems = check_profile(profile, cpus if cpus is not None else online_cpus())
    problems = [p if p.line is not None else replace(p, line=lines.get(p.path)) for p in problems]
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ProfileError(source, errors)
    return LoadedProfile(profile, source, [p for p in problems if p.severity == "warning"], data)


#: The CPUs a profile that runs on other hosts (a fleet's) has its pins checked against: every CPU number
#: Linux allows (CONFIG_NR_CPUS at most 8192), since each host checks the pins against its own CPUs.
ANY_CPU = frozenset(range(8192))


def load_profile(path: str | Path, overrides: dict[str, Any] | None = None,
                 cpus: frozenset[int] | None = None) -> LoadedProfile:
    """Read, parse and validate one profile; ``overrides`` are knob=value settings applied first;
    ``cpus``: the CPUs its pins may name (None: this host's online CPUs; :data:`ANY_CPU`: any)."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except IsADirectoryError:
        raise ProfileError(source, [Problem("", "is a directory, not a profile file")]) from None
    except OSError as exc:
        raise ProfileError(source, [Problem("", f"cannot read: {exc.strerror}")]) from None
    try:
        data, lines = load_yaml(raw)
    except YamlProblem as exc:
        raise ProfileError(source, [exc.problem]) from None
    if overrides:
        if not isinstance(data, dict):
            raise ProfileError(source, [Problem("", "a profile is a YAML mapping")])
        base = Profile.model_validate(data).model_dump() if _valid(data) else data
        for knob, value in overrides.items():
            try:
                set_knob(base, knob, value)
            except KnobError as exc:
                raise ProfileError(source, [Problem("", f"--set {exc}")]) from None
        data = base
    return validate_data(data, source, lines, cpus)


def _valid(data: dict[str, Any]) -> bool:
    try:
        Profile.model_validate(data)
    except ValidationError:
        return False
    return True
