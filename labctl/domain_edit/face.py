"""The api-level functions of ``labctl apply`` and ``labctl advise --emit`` (re-exported by
:mod:`labctl.api`): argument checks first, one line and exit 2 for bad input, nothing written before every
check passed; then one call into the module that does the work. The advice itself is made by the api
(``api.advise``) and handed in: this package does not import the advisor."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from labctl.domain_edit.changes import Changes, changes_from_advice, changes_from_profile, changes_from_settings
from labctl.domain_edit.edit import EditResult, apply_changes
from labctl.errors import UserError
from labctl.safefs import write_atomic
from labctl.profile.knobs import parse_assignment

__all__ = ["resolve_changes", "apply_xml", "apply_domain", "verify_domain", "undo_domain", "emit_advice", "check_emit_form",
           "MAX_XML_BYTES"]

#: The largest domain XML file ``--xml`` reads (libvirt's own limit for a domain's XML is 10 MiB).
MAX_XML_BYTES = 10 * 1024 * 1024


def resolve_changes(knobs: Sequence[str] = (), profile: str | Path | None = None, advice: Any = None,
                    nic: str | None = None) -> tuple[Changes, list[str]]:
    """The change set from a tuned profile (``--profile``) or advice (``--run``), with ``--set`` knobs on top;
    returns it with the notes on what the advice left out. UserError when nothing is asked."""
    if profile is not None and advice is not None:
        raise UserError("--profile and --run: give one source of settings (allowed: --profile FILE, --run N, "
                        "and --set on top of either)")
    base: Changes | None = None
    notes: list[str] = []
    if profile is not None:
        base = changes_from_profile(profile, nic)
    elif advice is not None:
        base, notes = changes_from_advice(advice, nic)
    settings: list[tuple[str, Any]] = [parse_assignment(k) for k in (base.knobs() if base else [])]
    settings += [parse_assignment(k) for k in knobs]
    changes = changes_from_settings(settings, nic)
    if changes.empty:
        if advice is not None:
            raise UserError("--run: the advice recommends nothing labctl apply sets "
                            f"({'; '.join(notes) or 'no recommendation'})")
        raise UserError("nothing to apply (allowed: --set KNOB=VALUE, --profile FILE, --run N)")
    return changes, notes


def _read_xml(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_XML_BYTES:
            raise UserError(f"--xml {path}: larger than {MAX_XML_BYTES // 1048576} MiB (allowed: a domain XML)")
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"--xml {path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"--xml {path}: a directory (allowed: a domain XML file)") from None
    except PermissionError:
        raise UserError(f"--xml {path}: not readable") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--xml {path}: not UTF-8 text (allowed: a domain XML file)") from None


def _write_atomically(path: Path, text: str) -> None:
    """``text`` to ``path`` through :func:`labctl.safefs.write_atomic`, keeping the mode of a file it replaces."""
    write_atomic(path, text, path.stat().st_mode & 0o7777 if path.exists() else 0o644)


def apply_xml(xml_in: str | Path, out: str | Path | None, knobs: Sequence[str] = (), profile: str | Path | None = None,
              advice: Any = None, nic: str | None = None, dry_run: bool = False) -> EditResult:
    """Apply the settings to the domain XML file ``xml_in``; write ``out`` (atomically; it may be ``xml_in``)
    unless ``dry_run``. The result's lines start with what the advice left out. Every check (the XML, the
    knobs, the interfaces and vCPUs they name, ``out``'s directory) passes before anything is written."""
    source = Path(xml_in)
    if out is None and not dry_run:
        raise UserError("--xml needs --out FILE (the domain XML to write; it may be the input) or --dry-run")
    target = Path(out) if out is not None else None
    if target is not None and (target.is_dir() or not target.parent.is_dir()):
        raise UserError(f"--out {target}: not a file in an existing directory")
    if target is not None and not os.access(target.parent, os.W_OK):
        raise UserError(f"--out {target}: its directory is not writable")
    changes, notes = resolve_changes(knobs, profile, advice, nic)
    result = apply_changes(_read_xml(source), changes, source=f"--xml {source}")
    result.lines[:0] = notes
    result.diff = result.diff.replace("--- a/domain.xml", f"--- {source}", 1).replace(
        "+++ b/domain.xml", f"+++ {target or source}", 1)
    if not dry_run and target is not None and (result.changed or target.resolve() != source.resolve()):
        _write_atomically(target, result.xml)
    return result


def apply_domain(name: str, uri: str | None = None, knobs: Sequence[str] = (), profile: str | Path | None = None,
                 advice: Any = None, nic: str | None = None, restart: bool = False, dry_run: bool = False,
                 live: bool = False):
    """Apply the settings to the defined domain ``name`` (``labctl.domain_edit.live.apply_live``: the original
    saved first, ``defineXML``, live pins, ``live``: the running domain's changed NICs swapped in place,
    ``restart`` if asked). Returns its LiveResult."""
    from labctl.domain_edit.live import apply_live

    changes, notes = resolve_changes(knobs, profile, advice, nic)
    result = apply_live(name, uri, changes, restart=restart, dry_run=dry_run, live=live)
    result.edit.lines[:0] = notes
    return result


def verify_domain(name: str, uri: str | None = None) -> list[str]:
    """Requested against negotiated (guest agent) or configured (QEMU's device properties) per NIC."""
    from labctl.domain_edit.verify import verify

    return verify(name, uri)


def undo_domain(name: str, uri: str | None = None) -> str:
    """Restore the domain XML saved before labctl's first change (and remove labctl's hook for it)."""
    from labctl.domain_edit.live import undo

    return undo(name, uri)


def check_emit_form(form: str) -> None:
    """``--emit FORM``: one of libvirt, nova, kubevirt, ansible (UserError naming the allowed forms)."""
    from labctl.domain_edit.emit import FORMS

    if form not in FORMS:
        raise UserError(f"--emit {form}: not a form labctl writes (allowed: {', '.join(FORMS)})")


def emit_advice(form: str, knobs: Sequence[str] = (), profile: str | Path | None = None, advice: Any = None,
                nic: str | None = None) -> str:
    """The settings in a deployment form: ``libvirt``, ``nova``, ``kubevirt`` or ``ansible``."""
    from labctl.domain_edit.emit import emit

    check_emit_form(form)
    changes, notes = resolve_changes(knobs, profile, advice, nic)
    return emit(form, changes, notes)
