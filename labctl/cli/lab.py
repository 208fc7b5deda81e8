"""Commands about labs: validate, render, up, down, status, image build, image guest."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.cli.output import phase_printer, print_json, say

URI = typer.Option(None, help="libvirt URI (default: the profile's)")
SET = typer.Option(None, "--set", help="KNOB=VALUE, repeatable")
PROFILE = typer.Argument(..., help="lab profile (YAML)")


def validate(files: List[Path] = typer.Argument(..., help="lab profiles (YAML)")) -> None:
    """Check profiles: prints `FILE: ok` or one line per problem (exit 2)."""
    failed = False
    for result in api.validate(files):
        for problem in result.problems:
            say(problem.render(str(result.path)))
        if result.ok:
            typer.echo(f"{result.path}: ok")
        else:
            failed = True
    if failed:
        raise typer.Exit(2)


def render(file: Path = PROFILE, uri: Optional[str] = URI, set_: Optional[List[str]] = SET,
           guest: str = typer.Option("a", "--guest", help="a | b (guest B of a vm2vm profile)")) -> None:
    """Print the libvirt domain XML for a profile."""
    typer.echo(api.render(api.load(file, api.parse_overrides(set_)), uri, guest), nl=False)


def up(file: Path = PROFILE, uri: Optional[str] = URI,
       mode: str = typer.Option("verify", help="verify: report the NICs and power off; workload: run testpmd"),
       timeout: float = typer.Option(300.0, help="seconds to wait for the guest's report"),
       as_json: bool = typer.Option(False, "--json", help="print one JSON document")) -> None:
    """Define and start the profile's guest; print requested vs negotiated per NIC."""
    result = api.up(api.load(file), uri, mode, timeout, None if as_json else phase_printer)
    if as_json:
        print_json(result.to_dict())
        return
    for warning in result.warnings:
        say(f"warning: {warning}")
    boot = f", report after {result.boot_s:.1f} s" if result.boot_s else ""
    typer.echo(f"{result.domain}: {result.state} on {result.uri} (domain type {result.domain_type}{boot})")
    for line in api.describe_nics(result.nics):
        typer.echo(line)
    if result.workload:
        w = result.workload
        rate = w["tx_packets"] / w["t"] / 1e6 if w.get("t") else 0.0
        tcg = ", TCG" if result.domain_type == "qemu" else ""
        typer.echo(f"guest forwarder: {w['rx_packets']} packets in, {w['tx_packets']} out, {w['tx_dropped']} "
                   f"TX-dropped in {w.get('t', 0):.1f} s (~{rate:.2f} Mpps{tcg})")
    applied = result.pins.get("applied") or {}
    threads = applied.get("threads") or {}
    if threads:
        typer.echo(f"pins: vcpus {threads.get('vcpus')} emulator {threads.get('emulator')} "
                   f"vswitch {applied.get('vswitch') or '-'}")
    for problem in result.pins.get("mismatches") or []:
        say(f"warning: pin not applied: {problem}")


def down(target: str = typer.Argument(..., help="profile file or lab name"),
         uri: Optional[str] = typer.Option(None, help="libvirt URI, if the state file is gone")) -> None:
    """Remove everything labctl created for a lab; a second call is a no-op."""
    result = api.down(target, uri)
    typer.echo(f"{result.name}: removed {len(result.removed)} resources" if result.removed
               else f"{result.name}: nothing to remove")


def status(uri: Optional[str] = typer.Option(None, help="also list labctl domains on this URI"),
           as_json: bool = typer.Option(False, "--json", help="print the labs as JSON")) -> None:
    """List the labs labctl has up."""
    labs = api.status(uri)
    if as_json:
        print_json({"labs": labs})
        return
    if not labs:
        typer.echo("no labs are up")
    for entry in labs:
        typer.echo(f"{entry['name']}: {entry['state']} ({entry['uri']}, {len(entry['resources'])} resources)")


image_app = typer.Typer(help="The workload appliance (kernel + initramfs) the libvirt lab boots, and a guest disk image.", no_args_is_help=True)


@image_app.command("build")
def image_build(force: bool = typer.Option(False, "--force", help="rebuild even when cached"),
                as_json: bool = typer.Option(False, "--json", help="print what was built (or found cached) as JSON")) -> None:
    """Build the appliance from Debian packages, cached by content hash."""
    built = api.build_image(force, None if as_json else phase_printer)
    info = {"key": built.key, "kernel": str(built.kernel), "initrd": str(built.initrd),
            "kernel_version": built.kernel_version, "size_bytes": built.size_bytes, "built": built.built}
    if as_json:
        print_json(info)
    else:
        typer.echo(f"{'built' if built.built else 'cached'}: {built.path} (kernel {built.kernel_version}, "
                   f"{built.size_bytes / 1e6:.1f} MB)")


@image_app.command("guest")
def image_guest(out: Path = typer.Option(..., "--out", help="where to write the qcow2 (a copy of the cached image)"),
                force: bool = typer.Option(False, "--force", help="rebuild, and replace an existing --out"),
                as_json: bool = typer.Option(False, "--json", help="print the image's facts as JSON")) -> None:
    """Build a small Debian 12 guest disk image (its own boot loader and kernel, qemu-guest-agent, DPDK), cached by its inputs, and copy it to --out.

    A starting point for guest.image: boot a copy-on-write overlay of it, never the file itself."""
    built = api.build_guest_image(out, force, None if as_json else phase_printer)
    info = {"out": str(built.out), "image": str(built.path), "kernel": str(built.kernel),
            "initrd": str(built.initrd), "cmdline": built.cmdline, "format": built.format,
            "virtual_size": built.virtual_size, "size_bytes": built.size_bytes, "sha256": built.sha256,
            "kernel_release": built.kernel_release, "kernel_package": built.kernel_package,
            "kernel_package_version": built.kernel_package_version, "dpdk_version": built.dpdk_version,
            "built": built.built}
    if as_json:
        print_json(info)
        return
    typer.echo(f"{'built' if built.built else 'cached'}: {built.path}")
    typer.echo(f"copied to {built.out} ({built.format}, virtual {built.virtual_size >> 20} MiB, "
               f"{built.size_bytes / 1e6:.0f} MB, sha256 {built.sha256[:16]}...)")
    typer.echo(f"kernel {built.kernel_release} ({built.kernel_package} {built.kernel_package_version}), "
               f"dpdk {built.dpdk_version}")
    typer.echo(f"direct kernel boot: kernel {built.kernel} initrd {built.initrd} cmdline '{built.cmdline}'")


def register(app: typer.Typer) -> None:
    for command in (validate, render, up, down, status):
        app.command()(command)
    app.add_typer(image_app, name="image")
