"""YAML loading that keeps the line of every mapping key and sequence item, keyed by field path."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from kcontract.errors import ContractError

_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_DROPPED = {_TAG + t for t in ("bool", "float", "timestamp")}
MAX_VALUES = 100_000  # values a document may expand to (aliases counted each time they are used)
MAX_DEPTH = 50  # collections nested in one another at most (the parser recurses once per level)


class LineLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans (true/false only), `1e-3` floats and dates left as text."""


LineLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
LineLoader.add_implicit_resolver(
    _TAG + "bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
LineLoader.add_implicit_resolver(
    _TAG + "float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


@dataclass
class LoadedYaml:
    """A parsed document and the 1-based line of each field path ("" is the document itself)."""

    data: object
    lines: dict[str, int]


def join(path: str, part: str | int) -> str:
    """Extend a field path: `a` + `b` -> `a.b`, `a` + 2 -> `a[2]`."""
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


def line_of(lines: dict[str, int], parts: list[str | int]) -> int | None:
    """The line of the deepest prefix of `parts` that the document has."""
    paths = [""]
    for part in parts:
        paths.append(join(paths[-1], part))
    for path in reversed(paths):
        if path in lines:
            return lines[path]
    return None


def load_yaml(file: str, text: str) -> LoadedYaml:
    """Parse one YAML document; syntax errors, a field given twice and exotic tags are ContractErrors."""
    _check_depth(file, text)
    loader = LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return LoadedYaml(None, {})
        lines = {"": node.start_mark.line + 1}
        _walk(file, node, "", lines, set(), [0])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        what = ", ".join(part for part in (error.context, error.problem) if part)
        raise ContractError(file, line, "", f"not valid YAML: {what}") from None
    except yaml.YAMLError as error:
        raise ContractError(file, None, "", f"not valid YAML: {error}") from None
    finally:
        loader.dispose()
    return LoadedYaml(data, lines)


def _check_depth(file: str, text: str) -> None:
    """A ContractError where collections nest deeper than MAX_DEPTH, read from the scanner's tokens (which, unlike
    the parser, does not recurse); syntax errors are left to the parser."""
    opening = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockSequenceStartToken,
               yaml.BlockMappingStartToken)
    closing = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)
    depth = 0
    try:
        for token in yaml.scan(text, Loader=LineLoader):
            if isinstance(token, opening):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ContractError(file, token.start_mark.line + 1, "", f"collections nested at most "
                                        f"{MAX_DEPTH} deep", f"deeper ones, from column {token.start_mark.column + 1}")
            elif isinstance(token, closing):
                depth -= 1
    except yaml.YAMLError:
        return


def _key_text(node: yaml.Node) -> str:
    """A mapping key as it appears in field paths."""
    return str(node.value) if isinstance(node, yaml.ScalarNode) else f"<{node.id} key>"


def _walk(file: str, node: yaml.Node, path: str, lines: dict[str, int], active: set[int], count: list[int]) -> None:
    """Record lines under `path`, rejecting a field given twice, tags beyond plain YAML and alias bombs."""
    count[0] += 1
    if count[0] > MAX_VALUES:
        raise ContractError(file, node.start_mark.line + 1, "",
                            f"a document of at most {MAX_VALUES:,} values; with its aliases expanded it holds more "
                            f"(nested YAML aliases?): write the values out, or alias less")
    if node.tag not in _PLAIN_TAGS:
        raise ContractError(file, node.start_mark.line + 1, path,
                            "a plain value (text, number, true/false, list or mapping)",
                            f"a {node.tag.replace(_TAG, '!!')} value")
    if id(node) in active:  # an alias that contains itself
        raise ContractError(file, node.start_mark.line + 1, path, "a value that does not contain itself")
    active = active | {id(node)}
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = join(path, index)
            lines[child] = item.start_mark.line + 1
            _walk(file, item, child, lines, active, count)
    elif isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        merged: list[yaml.Node] = []
        for key, value in node.value:
            if key.tag == _TAG + "merge":
                merged.append(value)
                continue
            name = _key_text(key)
            if name in seen:
                raise ContractError(file, key.start_mark.line + 1, path, "each key once", f"{name!r} twice")
            seen.add(name)
            child = join(path, name)
            lines[child] = key.start_mark.line + 1
            _walk(file, value, child, lines, active, count)
        for source in merged:  # `<<: *anchor` fields count where they were written, unless overridden
            for mapping in source.value if isinstance(source, yaml.SequenceNode) else [source]:
                if not isinstance(mapping, yaml.MappingNode):
                    continue  # the constructor reports it
                for key, value in mapping.value:
                    child = join(path, _key_text(key))
                    if _key_text(key) not in seen:
                        seen.add(_key_text(key))
                        lines[child] = key.start_mark.line + 1
                        _walk(file, value, child, lines, active, count)
