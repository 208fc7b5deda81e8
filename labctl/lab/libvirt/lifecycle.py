"""Bringing a libvirt lab up and down, and reporting what is up. The CLI and TUI call only this."""

from __future__ import annotations

import time
from dataclasses import replace, dataclass, field
from pathlib import Path
from typing import Any, Callable

from labctl import signals
from labctl.lab.libvirt import hypervisor
from labctl.events import OnEvent, notify
from labctl.lab.builds import emulator_of
from labctl.lab.libvirt.domain import appliance_forwarder, give_to_qemu, render_context
from labctl.lab.libvirt.domxml import RenderContext, render
from labctl.lab.plan import LabPlan, derive
from labctl.errors import HypervisorError, LabError, UserError
from labctl.host.facts import kvm_status
from labctl.lab.libvirt.negotiation import compare_nics
from labctl.signals import stoppable
from labctl.host.threads import dpdk_worker_pins, qemu_pid, qemu_thread_pins
from labctl.lab.pins import pin_mismatches
from labctl.profile.load import LoadedProfile
from labctl.profile.schema import Profile
from labctl.lab.ledger import LabState, all_states, locked, teardown
from labctl.dpdk.runtime import start_recorded
from labctl.lab.embedded.vswitch import vswitch_testpmd
from labctl.safefs import remove_stale



@dataclass
class UpResult:
    name: str
    domain: str
    uri: str
    domain_type: str
    state: str
    nics: list[dict[str, Any]] = field(default_factory=list)
    pins: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    serial_log: str | None = None
    boot_s: float | None = None
    workload: dict[str, Any] | None = None  # the guest forwarder's final counters (workload mode)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def render_profile(profile: Profile, uri: str | None = None, guest: str = "a") -> str:
    """The domain XML of the profile's guest (``guest`` ``b``: vm2vm's guest B)."""
    if guest not in ("a", "b"):
        raise UserError(f"--guest {guest}: not a guest (allowed: a, b)")
    plan = derive(profile)
    if guest == "b":
        if plan.topology != "vm2vm":
            raise UserError(f"--guest b: only a vm2vm profile has a guest B (topology {plan.topology}; allowed: a)")
        plan = plan.peer()
    return render(plan, replace(render_context(uri or profile.libvirt_uri), emulator=emulator_of(plan)))


def appliance_cmdline(plan: LabPlan, appliance: Any, mode: str) -> str:
    """The guest's kernel command line: ``verify`` reports the NICs; ``workload`` runs the plan's guest
    forwarder (the same testpmd application arguments as the embedded lab's) for the plan's duration."""
    macs = ",".join(nic.mac for nic in plan.nics)
    if mode == "verify":
        return appliance.cmdline("verify", macs=macs)
    return appliance.cmdline("workload", macs=macs, testpmd=",".join(plan.forwarder.options().argv()),
                             duration=int(plan.duration_s))


def up(loaded: LoadedProfile, uri: str | None = None, mode: str = "verify", boot_timeout_s: float = 300.0,
       on_event: OnEvent | None = None) -> UpResult:
    """Define and start the guest; on a real hypervisor boot the appliance and report what it got."""
    profile = loaded.profile
    if profile.backend != "libvirt":
        raise UserError(f"{loaded.source}: backend: embedded profiles have no domain to bring up "
                        "(allowed: libvirt; use `labctl run` for embedded)")
    if mode not in ("verify", "workload"):
        raise UserError(f"--mode {mode}: not a boot mode (allowed: verify, workload)")

    def phase(text: str) -> None:
        notify(on_event, "phase", lab=profile.name, message=text)

    uri = uri or profile.libvirt_uri
    real = not uri.startswith("test:")
    plan = derive(profile)
    if real and plan.image is not None:
        return _up_image(loaded, plan, uri, mode, phase)
    appliance = None
    if real:
        from labctl.lab.libvirt.appliance import cache as appliance_mod

        carried = appliance_forwarder(plan)  # a build's forwarder, checked: the appliance carries it
        appliance = appliance_mod.cached(forwarder=carried)
        if appliance is None:
            phase("building the workload appliance (first use; cached afterwards)")
            appliance = appliance_mod.build(forwarder=carried)
    ctx = render_context(uri, appliance_cmdline(plan, appliance, mode) if appliance else None, appliance)
    xml = render(plan, replace(ctx, emulator=emulator_of(plan)))
    with stoppable(), locked(profile.name) as state:
        if state.find("domain") or hypervisor.lookup(uri, profile.domain_name) is not None:
            raise UserError(f"{profile.name}: already up on {uri} (run `labctl down {loaded.source}` first)")
        state.info.update({"profile": profile.name, "source": loaded.source, "uri": uri,
                           "domain_type": ctx.domain_type, "pins_requested": plan.pins.requested(),
                           "mode": mode})
        state.save()
        try:
            result = _create(state, plan, uri, xml, ctx, real, boot_timeout_s, phase)
        except BaseException:
            teardown(state)
            raise
    result.warnings = [w.render() for w in loaded.warnings] + result.warnings
    if ctx.domain_type == "qemu":
        result.warnings.append(f"KVM is not usable here ({kvm_status().reason}): the guest runs under TCG; "
                               "its figures are functional, not representative")
    return result


def _up_image(loaded: LoadedProfile, plan: LabPlan, uri: str, mode: str, phase: Callable[[str], None]) -> UpResult:
    """``labctl up`` of a user's image: the vswitch (draining what the guest sends), the overlay, the domain,
    the agent's answer, the NICs as the guest negotiated them. The forwarder is a trial's (``labctl run``)."""
    from labctl.lab.libvirt.domain import GuestDomain
    from labctl.lab.libvirt.image_guest import ImageDomain, check_image

    if mode != "verify":
        raise UserError(f"--mode {mode}: an image guest's forwarder runs in trials (allowed: verify; use `labctl run`)")
    check_image(plan, uri)
    profile = loaded.profile
    with stoppable(), locked(profile.name) as state:
        if state.find("domain") or hypervisor.lookup(uri, profile.domain_name) is not None:
            raise UserError(f"{profile.name}: already up on {uri} (run `labctl down {loaded.source}` first)")
        state.info.update({"profile": profile.name, "source": loaded.source, "uri": uri,
                           "pins_requested": plan.pins.requested(), "mode": mode, "image": plan.image.path})
        state.save()
        domain = ImageDomain(plan, state, uri, phase)
        vswitch: dict[str, int] = {}
        started = time.monotonic()
        try:
            domain.boot(lambda: vswitch.update(pid=_start_vswitch(state, plan)), for_dpdk=False)
        except BaseException:
            domain.close()
            teardown(state)
            raise
        state.info.update(domain_type=domain.domain_type, nics=domain.negotiated, guest=domain.ready)
        pins: dict[str, Any] = {"requested": state.info["pins_requested"],
                                "applied": read_applied_pins(plan.domain_name, domain.dom, vswitch.get("pid"))}
        pins["mismatches"] = pin_mismatches(pins["requested"], pins["applied"])
        state.info["pins_applied"] = pins["applied"]
        state.save()
        result = UpResult(plan.name, plan.domain_name, uri, domain.domain_type, hypervisor.domain_state(domain.dom),
                          nics=domain.negotiated, pins=pins, serial_log=str(plan.dirs.serial_log),
                          boot_s=time.monotonic() - started)
    result.warnings = [w.render() for w in loaded.warnings] + GuestDomain.record_warnings(domain)  # no trial
    return result


def _create(state: LabState, plan: LabPlan, uri: str, xml: str, ctx: RenderContext, real: bool,
            boot_timeout_s: float, phase: Callable[[str], None]) -> UpResult:
    state.make_dirs(plan.dirs.run, plan.dirs.log)
    serial = plan.dirs.serial_log
    remove_stale(serial)
    vswitch_pid = None
    if real:
        if any(n.backend == "network" for n in plan.nics):
            state.record("network", "default", uri=uri, started=False)
            if hypervisor.ensure_network(uri, "default"):
                state.update(state.find("network")[0], started=True)
            else:
                state.forget(state.find("network")[0])  # it was running before labctl: not ours to stop
        for nic in plan.nics:
            if nic.tap is not None:
                state.record("tap", nic.tap)
        if plan.vhostuser_nics:
            phase("starting the vswitch (vhost-user servers)")
            vswitch_pid = _start_vswitch(state, plan)
    state.record("domain", plan.domain_name, uri=uri)
    phase(f"defining and starting {plan.domain_name}")
    started = time.monotonic()
    dom = hypervisor.define_and_start(uri, xml)
    pins: dict[str, Any] = {"requested": state.info["pins_requested"]}
    if real:
        pins["applied"] = read_applied_pins(plan.domain_name, dom, vswitch_pid)
        state.info["pins_applied"] = pins["applied"]
        state.save()
        pins["mismatches"] = pin_mismatches(pins["requested"], pins["applied"])
    result = UpResult(plan.name, plan.domain_name, uri, ctx.domain_type, hypervisor.domain_state(dom),
                      pins=pins, serial_log=str(serial) if real else None)
    if real:
        phase(f"waiting for the guest's report on {serial}")
        report = wait_for_report(serial, boot_timeout_s, dom)
        result.boot_s = time.monotonic() - started
        if report.errors:
            result.warnings.extend(f"guest: {e.get('stage')}: {e.get('message')}" for e in report.errors)
        result.nics = compare_nics(plan, report.nics)
        final = report.final_stats
        if final:
            result.workload = final
            state.info["workload"] = final
        result.state = hypervisor.domain_state(dom)
        state.info["nics"] = result.nics
        state.save()
    return result


def _start_vswitch(state: LabState, plan: LabPlan) -> int:
    """The host side of the vhost-user NICs; sockets handed to QEMU's group with mode 0660."""
    sockets = [nic.socket for nic in plan.vhostuser_nics]
    for sock in sockets:
        state.record("path", str(sock))
    # verify: drain whatever the guest sends; workload: generate and sink traffic (flowgen)
    mode = "flowgen" if state.info.get("mode") == "workload" else "rxonly"
    vswitch = vswitch_testpmd(plan, None, forward_mode=mode, stats_period_s=10)
    pid = start_recorded(state, vswitch, daemon=True)  # outlives labctl; `labctl down` stops it
    vswitch.wait_paths(sockets)
    give_to_qemu(sockets)
    return pid


def _vswitch_pid(state: LabState) -> int | None:
    for resource in state.find("process"):
        if resource.data.get("role") == "vswitch":
            return int(resource.ident)
    return None


def read_applied_pins(domain: str, dom: Any, vswitch_pid: int | None) -> dict[str, Any]:
    applied: dict[str, Any] = {"libvirt": hypervisor.domain_pins(dom)}
    pid = qemu_pid(domain)
    if pid:
        applied["threads"] = qemu_thread_pins(pid)
    if vswitch_pid:
        applied["vswitch"] = dpdk_worker_pins("vswitch", vswitch_pid)
    return applied


def wait_for_report(serial: Path, timeout_s: float, dom: Any):
    """Read the serial log until the appliance says LABCTL-DONE (or the domain stops)."""
    from labctl.lab.libvirt.appliance.console import parse_console

    deadline = time.monotonic() + timeout_s
    while True:
        text = serial.read_text(errors="replace") if serial.exists() else ""
        report = parse_console(text)
        if report.done:
            return report
        try:
            active = dom.isActive()
        except Exception:  # noqa: BLE001 - a vanished domain is "not active"
            active = False
        if not active:
            text = serial.read_text(errors="replace") if serial.exists() else ""
            report = parse_console(text)
            if report.done or report.nics:
                return report
            raise HypervisorError(f"{dom.name()} stopped before reporting (serial log {serial})")
        if time.monotonic() > deadline:
            raise HypervisorError(f"{dom.name()}: no report within {timeout_s:.0f} s (serial log {serial})")
        signals.sleep(0.5)


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
                active = dom.isActive()
                entry.update(domain=dom.name(), state=hypervisor.domain_state(dom),
                             pins={"requested": state.info.get("pins_requested"),
                                   "applied": (read_applied_pins(dom.name(), dom, _vswitch_pid(state)) if active
                                               else state.info.get("pins_applied")),
                                   "applied_source": "live threads" if active else "read at `labctl up`"},
                             nics=state.info.get("nics", []))
        labs[state.name] = entry
    if uri:
        for found in hypervisor.labctl_domains(uri):
            if found["profile"] not in labs:
                labs[found["profile"]] = {"name": found["profile"], "uri": uri, "domain": found["domain"],
                                          "state": found["state"], "resources": [],
                                          "note": "no state file: `labctl down` with its profile removes it"}
    return sorted(labs.values(), key=lambda e: e["name"])


def lab_name_of(target: str) -> str:
    """`labctl down` accepts a profile file or a lab name (the profile's `name`)."""
    from labctl.profile.rules import NAME_PATTERN

    path = Path(target)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        from labctl.profile.load import load_profile

        return load_profile(path).profile.name
    if not NAME_PATTERN.match(target):
        raise UserError(f"{target}: neither a profile file nor a lab name (allowed: a-z, 0-9 and '-', "
                        "as in a profile's name)")
    return target
