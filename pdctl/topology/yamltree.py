"""YAML text -> plain Python data plus the file position of every key and value.

PyYAML's composed node tree keeps line/column marks that its constructed objects lose; walking the tree
ourselves lets every later error say `file:line:col`, and lets us reject what `yaml.safe_load` silently
accepts (duplicate keys: the last one would win without a word).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from pdctl.errors import UserError

PathKey = tuple[str | int, ...]

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Alias expansion bound: a "billion laughs" document must fail fast, not exhaust memory.
MAX_NODES = 20_000
# Input limits: a topology is a few KiB; these bound the time and memory of reading a hostile or broken file
# (a 50 MB file took minutes and GBs, a 1 MB string 24 s), and are checked before anything is built.
MAX_FILE_BYTES = 1 << 20  # 1 MiB
MAX_SCALAR_CHARS = 64 << 10  # 64 KiB
MAX_DEPTH = 64


@dataclass
class Positions:
    """1-based (line, column) of each value and each mapping key, by key path."""

    values: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    keys: dict[PathKey, tuple[int, int]] = field(default_factory=dict)

    def value_at(self, path: PathKey) -> tuple[int, int] | None:
        """Position of the value at `path`, or of its nearest ancestor that exists in the file."""
        for end in range(len(path), -1, -1):
            pos = self.values.get(tuple(path[:end]))
            if pos is not None:
                return pos
        return None

    def key_at(self, path: PathKey) -> tuple[int, int] | None:
        """Position of the key naming `path` (falls back to the value / ancestors)."""
        return self.keys.get(tuple(path)) or self.value_at(path)


def format_path(path: PathKey) -> str:
    """('nodes', 0, 'gpu') -> 'nodes[0].gpu'; () -> '(top level)'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def located(source: str, pos: tuple[int, int] | None, path: PathKey | None, message: str) -> str:
    """One error line: 'source:line:col: key.path: message' (parts that are unknown are left out); a value
    given on the command line is located at its option ('--set prefill.tp=x: prefill.tp: ...')."""
    label = getattr(pos, "label", None)  # pdctl.topology.overrides.OverrideMark
    where = label if label else source if pos is None else f"{source}:{pos[0]}:{pos[1]}"
    if path is None:
        return f"{where}: {message}"
    return f"{where}: {format_path(path)}: {message}"


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Walker:
    """Builds data + positions from a composed node tree, enforcing the rules in the module docstring."""

    def __init__(self, source: str, text_paths: frozenset[PathKey] = frozenset()) -> None:
        self.source = source
        self.text_paths = text_paths
        self.positions = Positions()
        self.constructor = SafeConstructor()
        self.count = 0
        self.stack: set[int] = set()

    def fail(self, node: yaml.Node, path: PathKey, message: str) -> UserError:
        return UserError(located(self.source, _mark(node), path, message))

    def walk(self, node: yaml.Node, path: PathKey) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, path, f"document too large (over {MAX_NODES} nodes after alias expansion)")
        self.positions.values.setdefault(path, _mark(node))
        if id(node) in self.stack:
            raise self.fail(node, path, "recursive alias (a node that contains itself)")
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        self.stack.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                if node.tag != _SEQ_TAG:
                    raise self.fail(node, path, f"unsupported YAML tag {node.tag!r}; expected a plain list")
                return [self.walk(item, path + (i,)) for i, item in enumerate(node.value)]
            if isinstance(node, yaml.MappingNode):
                if node.tag != _MAP_TAG:
                    raise self.fail(node, path,
                                    f"unsupported YAML tag {node.tag!r}; expected a plain mapping")
                return self.mapping(node, path)
        finally:
            self.stack.discard(id(node))
        raise self.fail(node, path, "unsupported YAML node")

    def scalar(self, node: yaml.ScalarNode, path: PathKey) -> Any:
        if path in self.text_paths and node.style is None and node.tag == "tag:yaml.org,2002:int" and ":" in node.value:
            return node.value  # YAML 1.1 base-60 integer (4:00:00): the user wrote a time, keep the text
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError, TypeError) as exc:
            detail = getattr(exc, "problem", None) or str(exc)
            raise self.fail(node, path, f"invalid value {node.value!r}: {detail}") from None

    def key(self, node: yaml.Node, path: PathKey) -> str | int:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, path, "mapping keys must be plain names, not lists or mappings")
        value = self.scalar(node, path)
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            # Keep it printable and hashable; the model then reports it as an unknown key.
            return str(node.value)
        return value if isinstance(value, str) else str(value)

    def mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            key = self.key(key_node, path)
            child = path + (key,)
            if key in out:
                first = self.positions.keys.get(child)
                where = f" (first at line {first[0]})" if first else ""
                raise self.fail(key_node, child, f"duplicate key {key!r}{where}")
            self.positions.keys[child] = _mark(key_node)
            out[key] = self.walk(value_node, child)
        for merge in merges:  # YAML merge keys (<<: *anchor): explicit keys win, earlier merges win
            sources = merge.value if isinstance(merge, yaml.SequenceNode) else [merge]
            for src in sources:
                if not isinstance(src, yaml.MappingNode):
                    raise self.fail(src, path, "a merge key (<<) needs a mapping or a list of mappings")
                merged = self.walk(src, path + ("<<",))
                for key, val in merged.items():
                    if key not in out:
                        out[key] = val
                        self.positions.keys.setdefault(path + (key,), _mark(src))
                        self.positions.values.setdefault(path + (key,), _mark(src))
        return out


def too_big(source: str, size: int) -> UserError:
    """The error of an input over MAX_FILE_BYTES (`size` bytes), naming the first byte past the limit."""
    return UserError(f"{source}: {size} bytes, over the {MAX_FILE_BYTES // 1024} KiB limit of a topology file "
                     f"(byte {MAX_FILE_BYTES + 1} onwards); a topology is a few KiB of YAML")


def check_limits(text: str, source: str) -> None:
    """Fail fast (UserError with file:line:col) on a scalar over MAX_SCALAR_CHARS or nesting over MAX_DEPTH.

    Walks the parser's event stream lazily (libyaml when present), so the first violation stops the read; a
    syntax error is left to the full parse, which reports it with PyYAML's wording."""
    size = len(text.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        raise too_big(source, size)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise UserError(located(source, _event_mark(event), None,
                                            f"nesting deeper than {MAX_DEPTH} levels"))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_SCALAR_CHARS:
                raise UserError(located(source, _event_mark(event), None,
                                        f"a value of {len(event.value)} characters, over the "
                                        f"{MAX_SCALAR_CHARS // 1024} KiB limit of one topology value"))
    except yaml.MarkedYAMLError as exc:  # libyaml stops far-too-deep flow nesting itself: same verdict
        if "nesting depth" in str(exc.problem or "") and exc.problem_mark is not None:
            mark = (exc.problem_mark.line + 1, exc.problem_mark.column + 1)
            raise UserError(located(source, mark, None, f"nesting deeper than {MAX_DEPTH} levels")) from None
    except yaml.YAMLError:
        return  # a syntax error: the full parse reports it in PyYAML's words


def _event_mark(event: yaml.Event) -> tuple[int, int]:
    return event.start_mark.line + 1, event.start_mark.column + 1


def parse_yaml(text: str, source: str, *, text_paths: frozenset[PathKey] = frozenset()) -> tuple[Any, Positions]:
    """Parse one YAML document into (data, positions); every problem is a UserError naming file:line:col.
    Plain scalars at TEXT_PATHS that YAML would read as base-60 integers (4:00:00) are kept as written."""
    check_limits(text, source)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = (mark.line + 1, mark.column + 1) if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        context = f" ({exc.context})" if exc.context and exc.problem else ""
        raise UserError(located(source, pos, None, f"YAML syntax error: {problem}{context}")) from None
    except yaml.YAMLError as exc:  # e.g. ReaderError: characters YAML does not allow
        raise UserError(f"{source}: YAML error: {exc}") from None
    except RecursionError:
        raise UserError(f"{source}: YAML nesting too deep") from None
    if root is None:
        raise UserError(
            f"{source}: the file is empty; expected a topology mapping (name:, model:, nodes:, ...)"
        )
    walker = _Walker(source, text_paths)
    try:
        data = walker.walk(root, ())
    except RecursionError:
        raise UserError(f"{source}: YAML nesting too deep") from None
    return data, walker.positions
