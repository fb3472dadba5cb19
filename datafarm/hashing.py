"""Content hashes used across datafarm: files, folders (stable order) and canonical JSON."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys, no whitespace and UTF-8, so equal values hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sha256_json(value: Any) -> str:
    """Hex sha256 of `canonical_json(value)`."""
    return sha256_bytes(canonical_json(value))


def sha256_tree(root: Path, exclude: set[str] | None = None) -> str:
    """Hex sha256 over every regular file below `root`, in sorted POSIX relative-path order.

    Each file contributes `<relative path>\\0<sha256 of content>\\n`, so renames, additions and
    edits all change the result. `exclude` lists relative paths to leave out (e.g. a manifest that
    stores this very hash). Caches such as `__pycache__` are skipped.
    """
    exclude = exclude or set()
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in exclude or "__pycache__" in path.parts or rel.endswith(".pyc"):
            continue
        h.update(rel.encode() + b"\0" + sha256_file(path).encode() + b"\n")
    return h.hexdigest()
