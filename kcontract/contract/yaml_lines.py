"""YAML loading that keeps the line of every mapping key and sequence item, keyed by field path: one pass of the
C parser (libyaml, where PyYAML has it) composed into nodes without recursion, so no nesting can exhaust a stack."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml
from yaml.reader import Reader

from kcontract.errors import ContractError

_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_DROPPED = {_TAG + t for t in ("bool", "float", "timestamp")}
MAX_VALUES = 100_000  # values a document may expand to (aliases counted each time they are used)
MAX_DEPTH = 50  # collections nested in one another at most (the parser recurses once per level)


class LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The safe loader (libyaml's parser where present) with YAML 1.2 booleans (true/false only), `1e-3` floats
    and dates left as text."""


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
    """Parse one YAML document; a character YAML refuses, syntax errors, nesting past MAX_DEPTH, a field given
    twice and exotic tags are ContractErrors."""
    _check_characters(file, text)
    loader = LineLoader(text)
    try:
        node = _compose(file, loader)
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


_CONTROL_NAMES = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM "
                  "SUB ESC FS GS RS US").split() + ["DEL"] + ("PAD HOP BPH NBH IND NEL SSA ESA HTS HTJ VTS PLD PLU RI "
                                                               "SS2 SS3 DCS PU1 PU2 STS CCH MW SPA EPA SOS SGCI SCI CSI "
                                                               "ST OSC PM APC").split()


def _check_characters(file: str, text: str) -> None:
    """A ContractError at the line and column of the first character YAML does not allow (PyYAML's own test)."""
    found = Reader.NON_PRINTABLE.search(text)
    if found is None:
        return
    at, code = found.start(), ord(found.group())
    line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    escape = f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04X}"
    what = (f"a control character, U+{code:04X} ({_CONTROL_NAMES[code if code < 0x20 else code - 0x5F]}), where YAML "
            f"allows none" if code < 0x20 or 0x7F <= code <= 0x9F else f"a character YAML does not allow, U+{code:04X}")
    raise ContractError(file, line, "", f"{what}: delete it, or write it as {escape} inside a double-quoted string",
                        column=column)


def _compose(file: str, loader: LineLoader) -> yaml.Node | None:
    """The document's root node, composed from the parser's events with a stack of open collections (no recursion);
    nesting deeper than MAX_DEPTH is refused where it starts. As PyYAML composes: one document, anchors once."""
    loader.get_event()  # the stream's start
    if loader.check_event(yaml.StreamEndEvent):
        return None
    loader.get_event()  # the document's start
    anchors: dict[str, yaml.Node] = {}
    open_: list[list] = []  # [collection node, a mapping's key awaiting its value]
    get_event = loader.get_event
    while True:
        event = get_event()
        kind = type(event)
        if kind in _ENDS:
            node = open_.pop()[0]
            node.end_mark = event.end_mark
        elif kind is yaml.AliasEvent:
            node = _alias(event, anchors)
        else:
            node = _node(event, _NODES[kind], loader, anchors)
            if kind is not yaml.ScalarEvent:
                open_.append([node, None])
                if len(open_) > MAX_DEPTH:
                    raise ContractError(file, event.start_mark.line + 1, "", f"collections nested at most {MAX_DEPTH} "
                                        f"deep", f"deeper ones, from column {event.start_mark.column + 1}")
                continue
        if not open_:
            break
        parent = open_[-1]
        if parent[0].id == "sequence":
            parent[0].value.append(node)
        elif parent[1] is None:
            parent[1] = node
        else:
            parent[0].value.append((parent[1], node))
            parent[1] = None
    loader.get_event()  # the document's end
    if not loader.check_event(yaml.StreamEndEvent):
        raise yaml.composer.ComposerError("expected a single document in the stream", node.start_mark,
                                          "but found another document", loader.get_event().start_mark)
    return node


_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_NODES = {yaml.ScalarEvent: yaml.ScalarNode, yaml.SequenceStartEvent: yaml.SequenceNode,
          yaml.MappingStartEvent: yaml.MappingNode}


def _alias(event: yaml.AliasEvent, anchors: dict[str, yaml.Node]) -> yaml.Node:
    """The node an alias names."""
    if event.anchor not in anchors:
        raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
    return anchors[event.anchor]


def _node(event: yaml.Event, kind: type[yaml.Node], loader: LineLoader, anchors: dict[str, yaml.Node]) -> yaml.Node:
    """The node a scalar or collection-start event begins, its tag resolved and its anchor recorded."""
    tag = event.tag
    if kind is yaml.ScalarNode:
        if tag is None or tag == "!":
            tag = loader.resolve(kind, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
    else:
        if tag is None or tag == "!":
            tag = loader.resolve(kind, None, event.implicit)
        node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
    if event.anchor is not None:
        if event.anchor in anchors:
            raise yaml.composer.ComposerError(f"found duplicate anchor {event.anchor!r}; first occurrence",
                                              anchors[event.anchor].start_mark, "second occurrence", event.start_mark)
        anchors[event.anchor] = node
    return node


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
