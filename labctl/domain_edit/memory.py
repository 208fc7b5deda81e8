"""``<memoryBacking><hugepages/>``: the guest's memory backed by hugepages, and optionally its page size
(``<page size=... unit='KiB'/>``), nothing else of ``<memoryBacking>`` touched (libvirt "Domain XML format",
Memory Backing). vhost-user needs the guest memory shared with the backend (``<access mode='shared'/>`` or
a NUMA cell's ``memAccess='shared'``): that is kept as it is, and a line says when a vhost-user domain
has neither.
"""

from __future__ import annotations

from labctl.domain_edit.changes import Changes
from labctl.domain_edit.xmlio import Document, NewElement

__all__ = ["apply_hugepages", "page_kib"]

_UNITS = {"b": 1 / 1024, "bytes": 1 / 1024, "k": 1, "kib": 1, "kb": 1000 / 1024, "m": 1024, "mib": 1024,
          "mb": 1000 ** 2 / 1024, "g": 1024 ** 2, "gib": 1024 ** 2, "gb": 1000 ** 3 / 1024}


def page_kib(size: str | None, unit: str | None) -> int | None:
    """A ``<page size= unit=>`` in KiB (libvirt's default unit is KiB)."""
    try:
        return int(int(size or "") * _UNITS[(unit or "KiB").lower()])
    except (ValueError, KeyError):
        return None


def _shared(doc: Document) -> bool:
    access = doc.root.find("memoryBacking/access")
    if access is not None and access.get("mode") == "shared":
        return True
    return any(c.get("memAccess") == "shared" for c in doc.root.findall("cpu/numa/cell"))


def apply_hugepages(doc: Document, changes: Changes) -> list[str]:
    """Add hugepages (and the asked page size) to ``<memoryBacking>``; one line per change or no change."""
    want = changes.hugepages
    if want is None:
        return []
    size = want.page_size_kib
    page = NewElement("page", (("size", str(size)), ("unit", "KiB"))) if size else None
    backing = doc.root.find("memoryBacking")
    lines: list[str] = []
    if backing is None:
        element = NewElement("memoryBacking", (), (NewElement("hugepages", (), (page,) if page else ()),))
        anchor = doc.root.find("currentMemory")
        anchor = anchor if anchor is not None else doc.root.find("memory")
        if anchor is not None:
            doc.insert_after(anchor, element)
        else:
            doc.append_child(doc.root, element)
        lines.append("memoryBacking: added hugepages" + (f" ({size} KiB pages)" if size else ""))
    else:
        hugepages = backing.find("hugepages")
        if hugepages is None:
            doc.append_child(backing, NewElement("hugepages", (), (page,) if page else ()))
            lines.append("memoryBacking: added hugepages" + (f" ({size} KiB pages)" if size else ""))
        elif page is None:
            lines.append("memoryBacking: hugepages already there")
        else:
            pages = [p for p in hugepages.findall("page") if p.get("nodeset") is None]
            if pages and page_kib(pages[0].get("size"), pages[0].get("unit")) == size:
                lines.append(f"memoryBacking: hugepages already {size} KiB pages")
            elif pages:
                was = f"{pages[0].get('size')} {pages[0].get('unit') or 'KiB'}"
                attrs = [("size", str(size))] + ([("unit", "KiB")] if pages[0].get("unit") is not None else [])
                doc.set_attrs(pages[0], attrs)
                lines.append(f"memoryBacking: hugepage size {was} -> {size} KiB")
            elif hugepages.findall("page"):
                lines.append(f"memoryBacking: hugepages has per-node pages; {size} KiB left to the user")
            else:
                doc.append_child(hugepages, page)
                lines.append(f"memoryBacking: hugepages now {size} KiB pages")
    if doc.root.findall("devices/interface[@type='vhostuser']") and not _shared(doc):
        lines.append("memoryBacking: note: vhost-user interfaces need <access mode='shared'/> (or a NUMA cell "
                     "with memAccess='shared'); the domain has neither and labctl does not add it")
    return lines
