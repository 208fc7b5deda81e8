"""The appliance's kernel: apt's answer to what ``linux-image-amd64`` pulls in, the installed versions of
the packages whose files are copied, and fetching the kernel .deb (``apt-get download``; never installed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from labctl.digest import sha256_file
from labctl.errors import ApplianceError
from labctl.lab.libvirt.appliance.key import KeyInputs
from labctl.lab.libvirt.appliance.tools import Progress, run, say

KERNEL_META_PACKAGE = "linux-image-amd64"

# Debian packages whose files are copied into the initramfs (their versions are part of the key).
TOOL_PACKAGES: tuple[str, ...] = (
    "busybox-static",
    "ethtool",
    "dpdk-dev",  # dpdk-testpmd
    "dpdk",
    "librte-eal23",
    "librte-ethdev23",
    "librte-net-virtio23",
    "librte-mempool-ring23",
    "librte-bus-pci23",
    "libc6",
    "coreutils",
    "iperf3",  # the tcp workloads (labctl.workload.tcp)
    "libiperf0",
    "sockperf",
)


APT_LISTS = Path("/var/lib/apt/lists")
APT_CONFIG = Path("/etc/apt")
_RESOLUTION_MEMO = ".apt-resolution.json"


def _apt_record(package: str) -> dict[str, str]:
    """The candidate version's record of ``package`` (``apt-cache show --no-all-versions``)."""
    proc = run(["apt-cache", "show", "--no-all-versions", package], check=False)
    if proc.returncode != 0:
        return {}
    record: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if not line.strip():
            if record:
                break  # the first record is enough
            continue
        if line[0].isspace():
            continue
        k, _, v = line.partition(":")
        record[k.strip()] = v.strip()
    return record


def _apt_fingerprint() -> str:
    """Changes whenever what apt-cache would answer can change (its lists and configuration)."""
    h = hashlib.sha256()
    for base in (APT_LISTS, APT_CONFIG):
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            try:
                st = path.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _resolve_kernel_apt() -> tuple[str, str, str, str] | None:
    meta = _apt_record(KERNEL_META_PACKAGE)
    image = None
    for alt in re.split(r"[,|]", meta.get("Depends", "")):
        name = alt.strip().split(" ")[0]
        if name.startswith("linux-image-"):
            image = name
            break
    if image is None:
        return None
    rec = _apt_record(image)
    if "SHA256" not in rec or "Version" not in rec:
        return None
    return image, rec["Version"], rec["SHA256"], rec.get("Filename", "")


def _resolve_kernel_once(memo_dir: Path | None = None) -> tuple[str, str, str, str] | None:
    """Ask apt-cache (about 1.5 s here), or reuse the answer while apt's lists are unchanged."""
    memo = memo_dir / _RESOLUTION_MEMO if memo_dir is not None else None
    fingerprint = _apt_fingerprint()
    if memo is not None:
        try:
            saved = json.loads(memo.read_text())
            if saved.get("fingerprint") == fingerprint and saved.get("kernel_meta") == \
                    KERNEL_META_PACKAGE:
                return tuple(saved["result"])  # type: ignore[return-value]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    found = _resolve_kernel_apt()
    if found is not None and memo is not None and memo_dir is not None and memo_dir.is_dir():
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fingerprint": fingerprint, "kernel_meta": KERNEL_META_PACKAGE,
                                   "result": list(found)}))
        os.replace(tmp, memo)
    return found


def resolve_kernel(progress: Progress = None, memo_dir: Path | None = None,
                   update_apt: bool = True) -> tuple[str, str, str, str]:
    """(image package, version, SHA-256, pool filename) of the kernel ``linux-image-amd64`` pulls in.

    With ``update_apt``, runs ``apt-get update`` once when the apt lists do not know the packages
    (as root only). ``memo_dir`` keeps apt-cache's answer there while apt's lists are unchanged.
    ``LABCTL_KERNEL_DEB=/path/to/linux-image-*.deb`` uses that file instead (offline builds).
    """
    local = os.environ.get("LABCTL_KERNEL_DEB")
    if local:
        path = Path(local)
        if not path.is_file():
            raise ApplianceError(f"LABCTL_KERNEL_DEB={local}: no such file")
        info = run(["dpkg-deb", "-f", str(path), "Package", "Version"]).stdout
        fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
        return fields.get("Package", path.name), fields.get("Version", ""), sha256_file(path), str(path)
    found = _resolve_kernel_once(memo_dir)
    if found is None and update_apt and os.geteuid() == 0:
        say(progress, "apt lists do not know the kernel: apt-get update")
        run(["apt-get", "update", "-qq"], timeout=900)
        found = _resolve_kernel_once(memo_dir)
    if found is None:
        raise ApplianceError(f"apt cannot resolve {KERNEL_META_PACKAGE} to a kernel image package "
                             "(run apt-get update)")
    return found


def package_versions(packages: Iterable[str] = TOOL_PACKAGES) -> dict[str, str]:
    """Installed versions of ``packages`` (a package that is not installed maps to "")."""
    packages = list(packages)
    proc = run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Status}\n", *packages],
               check=False)
    versions = dict.fromkeys(packages, "")
    for line in proc.stdout.splitlines():
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        name = name.split(":")[0]
        if name in versions and status == "installed":
            versions[name] = version
    return versions


def _fetch_kernel_deb(inputs: KeyInputs, cache_dir: Path, work: Path, progress: Progress) -> Path:
    """The kernel .deb, from the download cache or ``apt-get download``; its SHA-256 is checked."""
    if inputs.kernel_deb_filename.startswith("/"):
        return Path(inputs.kernel_deb_filename)  # LABCTL_KERNEL_DEB
    downloads = cache_dir / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    name = f"{inputs.kernel_package}_{inputs.kernel_deb_version.replace(':', '%3a')}_amd64.deb"
    kept = downloads / name
    if kept.is_file() and sha256_file(kept) == inputs.kernel_deb_sha256:
        say(progress, f"kernel package {name} from the download cache")
        return kept
    dl = work / "download"
    dl.mkdir()
    say(progress, f"apt-get download {inputs.kernel_package}={inputs.kernel_deb_version}")
    run(["apt-get", "download", "-q", f"{inputs.kernel_package}={inputs.kernel_deb_version}"],
        cwd=dl, timeout=1800)
    debs = sorted(dl.glob("*.deb"))
    if len(debs) != 1:
        raise ApplianceError(f"apt-get download left {len(debs)} .deb files")
    got = sha256_file(debs[0])
    if got != inputs.kernel_deb_sha256:
        raise ApplianceError(f"{debs[0].name}: SHA-256 {got} is not the apt index's "
                             f"{inputs.kernel_deb_sha256}")
    for old in downloads.glob("*.deb"):  # keep only the current kernel package
        old.unlink(missing_ok=True)
    tmp = downloads / f".{name}.part"
    shutil.copyfile(debs[0], tmp)
    os.replace(tmp, kept)
    return kept
