"""Read a YAML file into plain data while keeping the node tree, so any value can be traced back to
its line. Duplicate keys and syntax errors become `InputError`s that name the file and line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from datafarm.errors import InputError, Problem

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class YamlDocument:
    """A parsed YAML file: its data (plain dicts, lists, scalars) and the node tree it came from."""

    path: Path
    """The file the document was read from."""
    data: Any
    """The constructed value (what `yaml.safe_load` would return)."""
    root: Node | None
    """The composed node tree (None for an empty file); nodes carry 0-based start marks."""

    def locate(self, loc: Sequence[str | int]) -> tuple[Node | None, Node | None, int]:
        """Follow `loc` (mapping keys and sequence indices) down the node tree.

        Returns (key node of the last step found, value node of the last step found, how many
        elements of `loc` were found). Stops at the first element that is not there.
        """
        key_node: Node | None = None
        node = self.root
        found = 0
        for part in loc:
            if isinstance(node, MappingNode):
                match = _find_key(node, part)
                if match is None:
                    break
                key_node, node = match
            elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                key_node, node = None, node.value[part]
            else:
                break
            found += 1
        return key_node, node, found

    def line_of(self, loc: Sequence[str | int], *, key: bool = False) -> int | None:
        """1-based line of the value at `loc`, or of its key when `key` or the value is a block.

        For a path that is only partly present (a missing key), the line of the deepest part that
        is present; None when not even the first element is present.
        """
        key_node, node, found = self.locate(loc)
        if node is None or (found == 0 and len(loc) > 0):
            return None
        if key_node is not None and (key or found < len(loc) or not isinstance(node, ScalarNode)):
            return key_node.start_mark.line + 1
        return node.start_mark.line + 1


def _find_key(mapping: MappingNode, part: str | int) -> tuple[Node, Node] | None:
    """The last (key, value) pair of `mapping` whose scalar key spells `part`."""
    match = None
    for key, value in mapping.value:
        if isinstance(key, ScalarNode) and key.value == str(part):
            match = (key, value)
    return match


def _duplicate_keys(root: Node, path: Path) -> list[Problem]:
    """A Problem for every key that appears twice in the same mapping (YAML would keep the last silently)."""
    problems: list[Problem] = []
    seen_nodes: set[int] = set()  # aliases share nodes; visit each once
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, where = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, ScalarNode) else None
                if name is not None and key.tag != _MERGE_TAG:
                    ident = (key.tag, name)
                    line = key.start_mark.line + 1
                    if ident in first_line:
                        problems.append(
                            Problem(
                                f"duplicate key '{name}' (first given on line {first_line[ident]})",
                                file=path,
                                line=line,
                                field=f"{where}{name}",
                                expected="each key once per mapping",
                                hint="remove one of them; YAML would otherwise silently keep the last",
                            )
                        )
                    else:
                        first_line[ident] = line
                child = f"{where}{name}." if name is not None else where
                stack.append((value, child))
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                stack.append((item, f"{where.rstrip('.')}[{i}]."))
    return sorted(problems, key=lambda p: p.line or 0)


def _syntax_problem(err: yaml.YAMLError, path: Path) -> Problem:
    """A Problem for a YAML parse error, with yaml's own line and column (1-based)."""
    mark = getattr(err, "problem_mark", None)
    what = getattr(err, "problem", None) or str(err)
    context = getattr(err, "context", None)
    context_mark = getattr(err, "context_mark", None)
    message = f"YAML syntax error: {what}"
    if context:
        started = ""
        if context_mark is not None and (mark is None or context_mark.line != mark.line):
            started = f" that starts on line {context_mark.line + 1}"
        message += f" ({context}{started})"
    return Problem(
        message,
        file=path,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
        expected="valid YAML (key: value lines, consistent indentation, closed quotes and brackets)",
    )


def read_yaml(path: Path) -> YamlDocument:
    """Parse one YAML file with the safe loader, keeping its node tree for line numbers.

    Raises InputError if the file is missing, unreadable, not valid YAML (with yaml's line and
    column), holds more than one document, or repeats a key within a mapping.
    """
    path = Path(path)
    if not path.exists():
        raise InputError([Problem("file not found", file=path, hint="check the path")])
    if not path.is_file():
        raise InputError([Problem("is a folder, not a file", file=path, expected="a YAML file")])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError([Problem(f"not UTF-8 text ({err.reason} at byte {err.start})", file=path, expected="a UTF-8 YAML file")]) from err
    except OSError as err:
        raise InputError([Problem(f"cannot read: {err.strerror}", file=path)]) from err

    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            duplicates = _duplicate_keys(root, path)
            if duplicates:
                raise InputError(duplicates)
        # construct_document also flattens `<<` merge keys into the node tree, so line lookups
        # see merged keys too.
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as err:
        raise InputError([_syntax_problem(err, path)]) from err
    finally:
        loader.dispose()
    return YamlDocument(path=path, data=data, root=root)
