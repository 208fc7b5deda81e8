"""Bringing a libvirt lab up and down, and reporting what is up. The CLI and TUI call only this."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hypervisor
from .domxml import RenderContext, render
from .errors import LabError, UserError
from .host import kvm_status
from .profiles import LoadedProfile
from .spec import Profile
from .state import LabState, all_states, load_state, locked, teardown


def run_dir() -> Path:
    return Path(os.environ.get("LABCTL_RUN_DIR", "/run/labctl"))


def log_dir() -> Path:
    return Path(os.environ.get("LABCTL_LOG_DIR", "/var/log/labctl"))


@dataclass
class UpResult:
    name: str
    domain: str
    uri: str
    domain_type: str
    state: str
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def render_context(profile: Profile, uri: str) -> RenderContext:
    kvm = kvm_status()
    return RenderContext(domain_type=hypervisor.domain_type_for(uri, kvm.usable),
                         run_dir=run_dir(), log_dir=log_dir())


def render_profile(profile: Profile, uri: str | None = None) -> str:
    return render(profile, render_context(profile, uri or profile.libvirt_uri))


def up(loaded: LoadedProfile, uri: str | None = None) -> UpResult:
    profile = loaded.profile
    if profile.backend != "libvirt":
        raise UserError(f"{loaded.source}: backend: embedded profiles have no domain to bring up "
                        "(allowed: libvirt; use `labctl run` for embedded)")
    uri = uri or profile.libvirt_uri
    ctx = render_context(profile, uri)
    xml = render(profile, ctx)
    with locked(profile.name) as state:
        if state.find("domain") or hypervisor.lookup(uri, profile.domain_name) is not None:
            raise UserError(f"{profile.name}: already up on {uri} (run `labctl down {loaded.source}` first)")
        state.info.update({"profile": profile.name, "source": loaded.source, "uri": uri,
                           "domain_type": ctx.domain_type})
        try:
            _create(state, profile, uri, xml, ctx)
        except BaseException:
            teardown(state)
            raise
        dom = hypervisor.lookup(uri, profile.domain_name)
        warnings = [w.render() for w in loaded.warnings]
        if ctx.domain_type == "qemu":
            warnings.append(f"KVM is not usable here ({kvm_status().reason}): the guest runs under TCG; "
                            "its figures are functional, not representative")
        return UpResult(profile.name, profile.domain_name, uri, ctx.domain_type,
                        hypervisor.domain_state(dom) if dom else "missing", warnings)


def _create(state: LabState, profile: Profile, uri: str, xml: str, ctx: RenderContext) -> None:
    for directory in (ctx.run_dir / profile.name, ctx.log_dir / profile.name):
        state.record("dir", str(directory))
        directory.mkdir(parents=True, exist_ok=True)
    state.record("domain", profile.domain_name, uri=uri)
    hypervisor.define_and_start(uri, xml)


def down(name: str, uri: str | None = None) -> list[str]:
    """Remove everything recorded for lab ``name``; a second call is a no-op. Returns what was removed."""
    with locked(name) as state:
        removed = [f"{r.kind} {r.ident}" for r in reversed(state.resources)]
        failures = teardown(state)
        uri = uri or state.info.get("uri")
        if uri and hypervisor.lookup(uri, f"labctl-{name}") is not None:
            # the state file was lost (or never written): the domain name still identifies it
            hypervisor.remove_domain(uri, f"labctl-{name}")
            removed.append(f"domain labctl-{name}")
    if failures:
        raise LabError(f"{name}: could not remove: {'; '.join(failures)}")
    return removed


def status(uri: str | None = None) -> list[dict[str, Any]]:
    labs: dict[str, dict[str, Any]] = {}
    for state in all_states():
        lab_uri = state.info.get("uri")
        entry = {"name": state.name, "uri": lab_uri, "domain": None, "state": "not defined",
                 "resources": [{"kind": r.kind, "ident": r.ident} for r in state.resources]}
        if lab_uri and state.find("domain"):
            dom = hypervisor.lookup(lab_uri, f"labctl-{state.name}")
            if dom is not None:
                entry.update(domain=dom.name(), state=hypervisor.domain_state(dom),
                              pins={"requested": state.info.get("pins_requested"),
                                    "applied": hypervisor.domain_pins(dom) if dom.isActive() else None})
        labs[state.name] = entry
    if uri:
        for found in hypervisor.labctl_domains(uri):
            if found["profile"] not in labs:
                labs[found["profile"]] = {"name": found["profile"], "uri": uri, "domain": found["domain"],
                                          "state": found["state"], "resources": [],
                                          "note": "no state file: `labctl down` with its profile removes it"}
    return sorted(labs.values(), key=lambda e: e["name"])


def lab_name_of(target: str) -> str:
    """`labctl down` accepts a profile file or a lab name."""
    path = Path(target)
    if path.suffix in (".yaml", ".yml") or path.exists():
        from .profiles import load_profile

        return load_profile(path).profile.name
    if load_state(target).resources or target:
        return target
    raise UserError(f"{target}: neither a profile file nor a lab name")
