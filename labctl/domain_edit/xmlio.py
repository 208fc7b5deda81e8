"""A user's domain XML read safely and edited in place, so that only the touched elements change.

Parsing: lxml with entity expansion off, no network, no external DTD, no huge trees
(``resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False``); a DOCTYPE is refused
outright (libvirt never writes one; an internal subset is how an entity-expansion bomb is declared).

Serializing: lxml would rewrite every attribute in double quotes and re-indent what it did not touch,
so :class:`Document` keeps the original text and splices edits into it instead: an attribute set on an
element rewrites only that start tag (existing values replaced where they stand, new attributes appended
in the element's own quoting style), and a new element (quoted as its sibling or parent) is inserted after a sibling or as the last
child, indented like its siblings. Every edit is made on the lxml tree as well, and :meth:`render`
re-parses the spliced text and compares it with that tree (C14N 2.0, comments kept, whitespace-only
text ignored): the text is exactly the tree that the edit logic built, or an error is raised.
Comments, processing instructions, namespaced metadata (Nova's ``<nova:instance>``), unknown elements,
attribute order and the quoting style of everything untouched stay byte for byte.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Iterable

from lxml import etree

from labctl.errors import DomainXmlError

__all__ = ["DomainXmlError", "Document", "NewElement", "parse_domain", "safe_parser"]


def safe_parser() -> etree.XMLParser:
    """lxml's parser with entity expansion, network access, DTD loading and huge trees off."""
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                           remove_blank_text=False, remove_comments=False, remove_pis=False, strip_cdata=False,
                           dtd_validation=False, attribute_defaults=False)


def _parse(data: bytes, source: str) -> etree._ElementTree:
    try:
        tree = etree.ElementTree(etree.fromstring(data, safe_parser()))
    except etree.XMLSyntaxError as exc:
        message = re.sub(r" \(<string>, line \d+\)$", "", str(exc).splitlines()[0] if str(exc) else "syntax error")
        raise DomainXmlError(f"{source}: not well-formed XML: {message}") from None
    if tree.docinfo.internalDTD is not None or tree.docinfo.doctype:
        raise DomainXmlError(f"{source}: a DOCTYPE or entity declaration is not allowed in domain XML "
                             "(entity expansion is off; libvirt never writes one)")
    root = tree.getroot()
    if not isinstance(root.tag, str) or root.tag != "domain":
        raise DomainXmlError(f"{source}: not a libvirt domain (root element <{etree.QName(root).localname}>, "
                             "allowed: <domain>)")
    return tree


# --- the original text's tags -------------------------------------------------------------------------

_TOKEN = re.compile(
    r"<!--.*?-->"
    r"|<!\[CDATA\[.*?\]\]>"
    r"|<\?.*?\?>"
    r"|</(?P<end>[^\s>]+)\s*>"
    r"|<(?P<start>[^\s/>!?]+)(?P<attrs>(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*(?P<slash>/?)>",
    re.DOTALL,
)
_ATTR = re.compile(r"(\s+)([^\s=/>]+)(\s*=\s*)(\"[^\"]*\"|'[^']*')")


@dataclass
class _Span:
    name: str  # the tag as written (with its prefix)
    start: int  # '<' of the start tag
    open_end: int  # just after the start tag's '>'
    self_closing: bool
    close_start: int = -1  # '<' of the end tag
    end: int = -1  # just after the element (end tag, or the self-closing start tag)


def _spans(text: str) -> list[_Span]:
    spans: list[_Span] = []
    stack: list[_Span] = []
    for match in _TOKEN.finditer(text):
        if match.group("start"):
            span = _Span(match.group("start"), match.start(), match.end(), bool(match.group("slash")))
            spans.append(span)
            if span.self_closing:
                span.close_start = span.end = match.end()
            else:
                stack.append(span)
        elif match.group("end"):
            span = stack.pop()
            span.close_start, span.end = match.start(), match.end()
    return spans


@dataclass(frozen=True)
class NewElement:
    """An element to insert: tag, attributes in order, children (no text content)."""

    tag: str
    attrs: tuple[tuple[str, str], ...] = ()
    children: tuple["NewElement", ...] = ()


def _escape(value: str, quote: str) -> str:
    out = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return out.replace(quote, "&quot;" if quote == '"' else "&apos;")


class Document:
    """A domain XML document: its lxml tree (for reading and the edit logic) and its original text
    (for writing). Edits go through :meth:`set_attrs`, :meth:`insert_after` and :meth:`append_child`."""

    def __init__(self, text: str, source: str = "domain XML"):
        self.source = source
        self.original = text
        self.tree = _parse(text.encode("utf-8"), source)
        self.root = self.tree.getroot()
        self._elements = list(self.root.iter(etree.Element))  # keeps lxml's proxies (dict keys) alive
        spans = _spans(text)
        # the prolog has no elements; the n-th start tag is the n-th element in document order
        if len(spans) != len(self._elements):
            raise DomainXmlError(f"{source}: could not map the document's tags ({len(spans)} tags, "
                                 f"{len(self._elements)} elements)")
        self._span = dict(zip(self._elements, spans))
        self._edits: list[tuple[int, int, int, str]] = []  # (start, end, sequence, replacement)
        self._last_after: dict[etree._Element, etree._Element] = {}
        self._filled: set[etree._Element] = set()
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.quote = "'" if text.count("='") >= text.count('="') else '"'
        self.unit = self._indent_unit()

    # --- reading --------------------------------------------------------------------------------------

    def is_new(self, element: etree._Element) -> bool:
        return element not in self._span

    def _indent_of(self, element: etree._Element) -> str | None:
        span = self._span.get(element)
        if span is None:
            return None
        line_start = self.original.rfind("\n", 0, span.start) + 1
        lead = self.original[line_start:span.start]
        return lead if not lead.strip() else None

    def _indent_unit(self) -> str:
        children = [c for c in self.root if isinstance(c.tag, str)]
        root_indent = self._indent_of(self.root) or ""
        if children:
            child = self._indent_of(children[0])
            if child is not None and child.startswith(root_indent) and len(child) > len(root_indent):
                return child[len(root_indent):]
        return "  "

    def child_indent(self, parent: etree._Element) -> str:
        for child in parent:
            if isinstance(child.tag, str) and not self.is_new(child):
                found = self._indent_of(child)
                if found is not None:
                    return found
        return (self._indent_of(parent) or "") + self.unit

    def _quote_of(self, element: etree._Element) -> str:
        span = self._span.get(element)
        if span is not None:
            found = _ATTR.search(self.original, span.start, span.open_end)
            if found:
                return found.group(4)[0]
        return self.quote

    # --- editing --------------------------------------------------------------------------------------

    def _edit(self, start: int, end: int, replacement: str) -> None:
        self._edits.append((start, end, len(self._edits), replacement))

    def set_attrs(self, element: etree._Element, attrs: Iterable[tuple[str, str]]) -> None:
        """Set attributes of an element of the original document: a value already there is replaced where
        it stands, a new attribute is appended after the others in the element's quoting style."""
        span = self._span[element]
        tag_text = self.original[span.start:span.open_end]
        quote = self._quote_of(element)
        found = {m.group(2): m for m in _ATTR.finditer(tag_text)}
        pieces: list[tuple[int, int, str]] = []
        appended = ""
        for name, value in attrs:
            element.set(name, value)
            match = found.get(name)
            if match is not None:
                q = match.group(4)[0]
                pieces.append((match.start(4), match.end(4), f"{q}{_escape(value, q)}{q}"))
            else:
                appended += f" {name}={quote}{_escape(value, quote)}{quote}"
        if appended:
            close = re.search(r"\s*/?>$", tag_text)
            assert close is not None
            pieces.append((close.start(), close.start(), appended))
        for start, end, text in sorted(pieces):
            self._edit(span.start + start, span.start + end, text)

    def _render(self, new: NewElement, indent: str, quote: str) -> str:
        attrs = "".join(f" {k}={quote}{_escape(v, quote)}{quote}" for k, v in new.attrs)
        if not new.children:
            return f"<{new.tag}{attrs}/>"
        inner = "".join(self.newline + indent + self.unit + self._render(c, indent + self.unit, quote)
                        for c in new.children)
        return f"<{new.tag}{attrs}>{inner}{self.newline}{indent}</{new.tag}>"

    @staticmethod
    def _build(new: NewElement) -> etree._Element:
        element = etree.Element(new.tag)
        for key, value in new.attrs:
            element.set(key, value)
        for child in new.children:
            element.append(Document._build(child))
        return element

    def insert_after(self, sibling: etree._Element, new: NewElement) -> etree._Element:
        """Insert ``new`` after ``sibling`` (an element of the original document), on its own line with
        the sibling's indentation; several inserts after one sibling keep their order."""
        span = self._span[sibling]
        indent = self._indent_of(sibling)
        if indent is None:
            indent = self.child_indent(sibling.getparent())
        element = self._build(new)
        anchor = self._last_after.get(sibling, sibling)
        tail = anchor.tail
        anchor.addnext(element)
        anchor.tail, element.tail = tail, None
        self._last_after[sibling] = element
        self._edit(span.end, span.end, self.newline + indent + self._render(new, indent, self._quote_of(sibling)))
        return element

    def append_child(self, parent: etree._Element, new: NewElement) -> etree._Element:
        """Insert ``new`` as the last child of ``parent`` (an element of the original document)."""
        return self.append_children(parent, [new])[0]

    def append_children(self, parent: etree._Element, items: list[NewElement]) -> list[etree._Element]:
        """Insert ``items`` in order as the last children of ``parent`` (an element of the original
        document): after its last element child, or into it when it has none (a self-closing one opened)."""
        children = [c for c in parent if isinstance(c.tag, str) and not self.is_new(c)]
        if children:
            return [self.insert_after(children[-1], new) for new in items]
        if parent in self._filled:
            raise RuntimeError("one insert into an empty element: give every child at once")
        self._filled.add(parent)
        span = self._span[parent]
        indent = self.child_indent(parent)
        parent_indent = self._indent_of(parent) or ""
        quote = self._quote_of(parent)
        text = "".join(self.newline + indent + self._render(new, indent, quote) for new in items)
        elements = [self._build(new) for new in items]
        for element in elements:
            parent.append(element)
        if span.self_closing:
            tag_text = self.original[span.start:span.open_end]
            close = re.search(r"\s*/>$", tag_text)
            assert close is not None
            self._edit(span.start + close.start(), span.open_end,
                       f">{text}{self.newline}{parent_indent}</{span.name}>")
        elif "\n" not in (parent.text or ""):
            self._edit(span.open_end, span.open_end, f"{text}{self.newline}{parent_indent}")
        else:
            self._edit(span.open_end, span.open_end, text)
        return elements

    # --- writing --------------------------------------------------------------------------------------

    @property
    def edit_count(self) -> int:
        return len(self._edits)

    def render(self) -> str:
        """The original text with every edit spliced in, checked against the edited tree."""
        out: list[str] = []
        position = 0
        for start, end, _seq, replacement in sorted(self._edits):
            if start < position:
                raise RuntimeError(f"overlapping edits in {self.source} at offset {start}")
            out.append(self.original[position:start])
            out.append(replacement)
            position = end
        out.append(self.original[position:])
        text = "".join(out)
        if self._edits:
            spliced = _parse(text.encode("utf-8"), self.source)
            if _canonical(spliced.getroot()) != _canonical(self.root):
                raise RuntimeError(f"the edited text of {self.source} does not match the edited tree")
        return text


def _canonical(root: etree._Element) -> bytes:
    clone = copy.deepcopy(root)
    for element in clone.iter():
        if element.text is not None and not element.text.strip() and isinstance(element.tag, str):
            element.text = None
        if element.tail is not None and not element.tail.strip():
            element.tail = None
    return etree.tostring(clone, method="c14n2", with_comments=True)


def parse_domain(text: str, source: str = "domain XML") -> Document:
    """``text`` as a :class:`Document`; :class:`DomainXmlError` (one line, exit 2) if it is malformed, declares
    entities or a DOCTYPE, or is not a ``<domain>``."""
    return Document(text, source)
