"""What each role's tools may read and write in a task folder, enforced on every path a tool touches.

Every path is resolved first (`..` collapsed, symlinks followed) and only then checked, so no
spelling reaches another role's private material: the judge folder is the judge-writer's alone
(the author never sees J), the expert folder is the author's alone (the judge-writer never sees C),
and no tool of any role reads `transcripts/` (the reviewer never sees the author's conversation) or
the ledger. On top of that deny list each role has an allow list of patterns; anything else is
refused. A path outside the task folder is refused unless it lies in an external root granted to the
role (the calibration clip).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal, get_args

RoleName = Literal["author", "judge_writer", "reviewer"]
"""The agent roles (as spelled in a request's `roles`)."""
ROLES: tuple[str, ...] = get_args(RoleName)

PRIVATE_AREAS: dict[str, frozenset[str]] = {
    "judge": frozenset({"judge_writer"}),
    "expert": frozenset({"author"}),
    "transcripts": frozenset(),
    "ledger.jsonl": frozenset(),
    "batch.yaml": frozenset(),
}
"""Top-level entries of a task folder -> the roles whose tools may touch them (none: no role's tools).
Checked before any allow list, so no allow pattern can open them to another role."""

ROLE_ALLOW: dict[str, dict[str, tuple[str, ...]]] = {
    "author": {
        "read": ("grounding.json", "contract.yaml", "sampler.yaml", "render_contract.yaml", "expert/*"),
        "write": ("grounding.json", "contract.yaml", "sampler.yaml", "render_contract.yaml", "expert/*"),
    },
    "judge_writer": {
        "read": ("contract.yaml", "grounding.json"),
        "write": ("judge/draft.json",),
    },
    "reviewer": {
        "read": ("episodes/*/obs/*", "attempts/*/obs/*"),
        "write": ("episodes/*/review.json", "attempts/*/review.json"),
    },
}
"""Per role, `/`-separated patterns (one `*` matches within one path segment) of what its tools may
read and write inside the task folder."""

ROLE_EXTERNAL: dict[str, frozenset[str]] = {
    "author": frozenset({"clip"}),
    "judge_writer": frozenset(),
    "reviewer": frozenset({"clip"}),
}
"""External roots each role may be granted: the judge-writer sees T and G only, never the clip."""


class AccessDenied(Exception):
    """A tool asked for a path its role may not touch; the message says which rule refused it."""


def _matches(rel: str, pattern: str) -> bool:
    parts, pats = rel.split("/"), pattern.split("/")
    return len(parts) == len(pats) and all(fnmatchcase(p, q) for p, q in zip(parts, pats))


def _inside(path: Path, root: Path) -> str | None:
    """`path` relative to `root` as POSIX text when inside it (both resolved), else None."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix()


@dataclass(frozen=True)
class ExternalRoot:
    """A folder outside the task folder a role may read (e.g. the calibration clip)."""

    root: Path
    """The folder."""
    patterns: tuple[str, ...] = ("*",)
    """Which files in it, relative patterns as in ROLE_ALLOW."""


@dataclass(frozen=True)
class RoleAccess:
    """The path guard of one role in one task folder."""

    role: str
    """The role."""
    task_root: Path
    """The task folder."""
    external: Mapping[str, ExternalRoot] = field(default_factory=dict)
    """Named external roots the role may read (`clip`)."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; roles: {', '.join(ROLES)}")
        refused = set(self.external) - ROLE_EXTERNAL[self.role]
        if refused:
            raise ValueError(f"{self.role} may not be granted {', '.join(sorted(refused))}")

    def _check(self, path: Path | str, mode: Literal["read", "write"]) -> Path:
        root = Path(self.task_root).resolve()
        raw = Path(path)
        resolved = (raw if raw.is_absolute() else root / raw).resolve()
        rel = _inside(resolved, root)
        if rel is not None:
            top = rel.split("/", 1)[0]
            owners = PRIVATE_AREAS.get(top)
            if owners is not None and self.role not in owners:
                whose = " and ".join(sorted(owners)) if owners else "no agent role"
                raise AccessDenied(f"{self.role} may not {mode} {rel}: {top} is private to {whose}")
            if rel in ("", ".") or not any(_matches(rel, p) for p in ROLE_ALLOW[self.role][mode]):
                raise AccessDenied(
                    f"{self.role} may not {mode} {rel or 'the task folder itself'}: allowed are "
                    + ", ".join(ROLE_ALLOW[self.role][mode])
                )
            return resolved
        if mode == "read":
            for name, ext in self.external.items():
                ext_rel = _inside(resolved, Path(ext.root).resolve())
                if ext_rel is not None and ext_rel not in ("", ".") and any(_matches(ext_rel, p) for p in ext.patterns):
                    return resolved
        raise AccessDenied(f"{self.role} may not {mode} {path}: it is outside what the role may {mode}")

    def readable(self, path: Path | str) -> Path:
        """The resolved path when the role may read it; AccessDenied otherwise."""
        return self._check(path, "read")

    def writable(self, path: Path | str) -> Path:
        """The resolved path when the role may write it; AccessDenied otherwise."""
        return self._check(path, "write")

    def external_file(self, name: str, rel: str) -> Path:
        """A readable file `rel` inside external root `name` (checked like any other path)."""
        if name not in self.external:
            raise AccessDenied(f"{self.role} has no {name} to read")
        return self.readable(Path(self.external[name].root) / rel)
