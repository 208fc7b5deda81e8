"""Safe YAML reading for lab profiles: size limit, no aliases, no duplicate keys, line numbers."""

from __future__ import annotations

from typing import Any

import yaml

from labctl.errors import Problem, YamlProblem

MAX_PROFILE_BYTES = 256 * 1024
MAX_DEPTH = 32


def _key_text(node: yaml.Node) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else "<complex key>"


def _walk(node: yaml.Node, path: tuple[str, ...], lines: dict[str, int], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise YamlProblem(Problem(".".join(path), f"nesting deeper than {MAX_DEPTH} levels", line=node.start_mark.line + 1))
    lines.setdefault(".".join(path), node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlProblem(Problem(".".join(path), "mapping keys must be plain scalars", line=key_node.start_mark.line + 1))
            key = _key_text(key_node)
            if key in seen:
                raise YamlProblem(Problem(".".join((*path, key)), "duplicate key", line=key_node.start_mark.line + 1))
            seen.add(key)
            child = (*path, key)
            lines[".".join(child)] = key_node.start_mark.line + 1
            _walk(value_node, child, lines, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, str(index)), lines, depth + 1)


def load_yaml(text: str | bytes) -> tuple[Any, dict[str, int]]:
    """Parse profile text; return the data and a map of dotted path -> 1-based line.

    Raises YamlProblem for anything that is not a small, plain YAML document.
    """
    if isinstance(text, bytes):
        if len(text) > MAX_PROFILE_BYTES:
            raise YamlProblem(Problem("", f"file is {len(text)} bytes; profiles are limited to {MAX_PROFILE_BYTES} bytes"))
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YamlProblem(Problem("", f"not UTF-8 text (byte {exc.start})")) from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PROFILE_BYTES:
        raise YamlProblem(Problem("", f"file is larger than {MAX_PROFILE_BYTES} bytes; profiles are limited to that"))
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = event.start_mark
                raise YamlProblem(Problem("", "YAML anchors and aliases are not allowed in profiles", line=mark.line + 1))
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        if len(nodes) > 1:
            raise YamlProblem(Problem("", "a profile holds exactly one YAML document", line=nodes[1].start_mark.line + 1))
        lines: dict[str, int] = {}
        if nodes and nodes[0] is not None:
            _walk(nodes[0], (), lines, 0)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        reason = (exc.problem or exc.context or "malformed YAML").strip()
        raise YamlProblem(Problem("", f"malformed YAML: {reason}", line=line)) from None
    except yaml.YAMLError as exc:
        raise YamlProblem(Problem("", f"malformed YAML: {str(exc).splitlines()[0]}")) from None
    except RecursionError:
        raise YamlProblem(Problem("", f"nesting deeper than {MAX_DEPTH} levels")) from None
    return data, lines
