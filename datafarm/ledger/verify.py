"""Checking a ledger's bytes: every line a canonical, schema-valid entry whose hash matches its
content, seq 0, 1, 2, ... without gaps, each `prev_hash` the previous entry's `hash`, and no torn
last line. Problems come in file order, so the first one names the first bad entry."""

from __future__ import annotations

import json
import re
from enum import Enum

from pydantic import Field, ValidationError

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.ledger_entry import GENESIS_HASH, LedgerEntry

_SEQ_IN_RAW_LINE = re.compile(rb'"seq":(\d+)')

REPAIR_HINT = (
    "repair it with `datafarm ledger repair PATH` (or `datafarm compile --resume`), which moves the torn "
    "bytes to ledger.torn-<time>.bin beside the ledger and records the repair in the ledger"
)
"""How to fix a torn tail; quoted by every message that reports one."""


class ProblemKind(str, Enum):
    """The kinds of things verify finds wrong."""

    bad_json = "bad_json"
    schema = "schema"
    hash_mismatch = "hash_mismatch"
    not_canonical = "not_canonical"
    broken_chain = "broken_chain"
    seq = "seq"
    torn_tail = "torn_tail"
    time_backwards = "time_backwards"


class LedgerProblem(Artifact):
    """One thing wrong with one line of the ledger."""

    line: int = Field(ge=1)
    """1-based line number in the ledger file."""
    seq: int | None = None
    """The entry's seq as written on that line, when it can be read; null otherwise."""
    kind: ProblemKind
    """What sort of problem it is."""
    message: str
    """What is wrong, in plain words."""

    def render(self) -> str:
        """`line N (seq S): message`."""
        seq = "?" if self.seq is None else str(self.seq)
        return f"line {self.line} (seq {seq}): {self.message}"


class VerifyReport(Artifact):
    """The result of checking a whole ledger."""

    ok: bool
    """True when there are no problems (warnings do not count)."""
    entries: int = Field(ge=0)
    """Number of complete lines (entries) in the ledger, good or bad; a torn last line is not counted."""
    head_hash: str | None = None
    """`hash` of the last entry when it is readable; null for an empty ledger."""
    problems: list[LedgerProblem] = Field(default_factory=list)
    """Everything wrong, in file order: the first names the first bad entry."""
    warnings: list[LedgerProblem] = Field(default_factory=list)
    """Suspicious but not invalid, e.g. time going backwards (clocks can step)."""

    @property
    def first_problem(self) -> LedgerProblem | None:
        """The problem on the earliest line, or None when the ledger is valid."""
        return self.problems[0] if self.problems else None

    @property
    def torn_tail(self) -> bool:
        """True when the last line was cut short (crash mid-write)."""
        return any(p.kind is ProblemKind.torn_tail for p in self.problems)

    def summary(self) -> str:
        """One line: OK with count and head hash, or the count of problems and the first bad entry."""
        if self.ok:
            head = self.head_hash or "(empty)"
            return f"OK: {self.entries} entries, hash chain valid, head {head}"
        first = self.first_problem
        assert first is not None
        return f"INVALID: {len(self.problems)} problem(s); first bad entry: {first.render()}"

    def render(self) -> str:
        """The summary, then every problem (first bad entry first), then every warning; one per line."""
        lines = [self.summary()]
        lines += [f"  {p.render()}" for p in self.problems]
        lines += [f"  warning: {w.render()}" for w in self.warnings]
        return "\n".join(lines)


def verify_bytes(data: bytes) -> VerifyReport:
    """Check a ledger given as the bytes of its file."""
    *complete, tail = data.split(b"\n")
    problems: list[LedgerProblem] = []
    warnings: list[LedgerProblem] = []
    prev: LedgerEntry | None = None
    prev_line = 0
    prev_readable = True  # false after a line that could not be parsed: its successor can't be chained
    head_hash: str | None = None

    for index, raw in enumerate(complete):
        line_no = index + 1
        entry, line_problems = _check_line(raw, line_no)
        problems.extend(line_problems)
        if entry is None:
            prev, prev_readable, head_hash = None, False, None
            continue
        if prev_readable:
            problems.extend(_check_link(entry, line_no, prev, prev_line))
            if prev is not None and entry.time < prev.time:
                warnings.append(
                    LedgerProblem(
                        line=line_no,
                        seq=entry.seq,
                        kind=ProblemKind.time_backwards,
                        message=f"time goes backwards: {_iso(entry)} is before line {prev_line}'s {_iso(prev)}",
                    )
                )
        prev, prev_line, prev_readable, head_hash = entry, line_no, True, entry.hash

    if tail:
        problems.append(
            LedgerProblem(
                line=len(complete) + 1,
                seq=_raw_seq(tail),
                kind=ProblemKind.torn_tail,
                message=f"torn last line (crash mid-write): {len(tail)} bytes without a trailing newline; "
                + REPAIR_HINT,
            )
        )
    return VerifyReport(
        ok=not problems, entries=len(complete), head_hash=head_hash, problems=problems, warnings=warnings
    )


def parse_line(raw: bytes) -> LedgerEntry:
    """Parse one stored line (without its newline) into an entry; ValueError says what is wrong."""
    entry, problems = _check_line(raw, 1)
    if entry is None or problems:
        raise ValueError("; ".join(p.message for p in problems))
    return entry


def _check_line(raw: bytes, line_no: int) -> tuple[LedgerEntry | None, list[LedgerProblem]]:
    """Parse and self-check one line. Returns the entry (None if unreadable) and its problems."""
    seq = _raw_seq(raw)

    def problem(kind: ProblemKind, message: str, at_seq: int | None = seq) -> LedgerProblem:
        return LedgerProblem(line=line_no, seq=at_seq, kind=kind, message=message)

    if not raw:
        return None, [problem(ProblemKind.bad_json, "bad JSON: empty line")]
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, [problem(ProblemKind.bad_json, f"bad JSON: not UTF-8 ({e.reason} at byte {e.start})")]
    except json.JSONDecodeError as e:
        return None, [problem(ProblemKind.bad_json, f"bad JSON: {e.msg} at column {e.colno}")]
    if not isinstance(value, dict):
        return None, [problem(ProblemKind.bad_json, f"bad JSON: expected an object, found {type(value).__name__}")]
    try:
        entry = LedgerEntry.model_validate(value)
    except ValidationError as e:
        details = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(entry)'}: {err['msg']}" for err in e.errors()[:3]
        )
        return None, [problem(ProblemKind.schema, f"schema violation: {details}")]

    found: list[LedgerProblem] = []
    expected = entry.content_hash()
    if expected != entry.hash:
        found.append(
            problem(
                ProblemKind.hash_mismatch,
                f"hash mismatch (entry content edited): stored hash {entry.hash[:12]}..., "
                f"content hashes to {expected[:12]}...",
                entry.seq,
            )
        )
    elif entry.to_line()[:-1] != raw:
        found.append(
            problem(
                ProblemKind.not_canonical,
                "bytes edited: the line is not the canonical JSON of its own values",
                entry.seq,
            )
        )
    return entry, found


def _check_link(entry: LedgerEntry, line_no: int, prev: LedgerEntry | None, prev_line: int) -> list[LedgerProblem]:
    """Seq and prev_hash of `entry` against the entry before it (None for the first line)."""
    found: list[LedgerProblem] = []

    def problem(kind: ProblemKind, message: str) -> None:
        found.append(LedgerProblem(line=line_no, seq=entry.seq, kind=kind, message=message))

    if prev is None:
        if entry.seq != 0:
            problem(ProblemKind.seq, f"seq gap: the first entry must have seq 0, found {entry.seq}")
        if entry.prev_hash != GENESIS_HASH:
            problem(ProblemKind.broken_chain, "broken chain: the first entry's prev_hash must be 64 zeros")
        return found
    if entry.seq == prev.seq:
        problem(ProblemKind.seq, f"duplicate seq {entry.seq} (line {prev_line} has it too)")
    elif entry.seq != prev.seq + 1:
        problem(ProblemKind.seq, f"seq gap: expected {prev.seq + 1} after line {prev_line}, found {entry.seq}")
    if entry.prev_hash != prev.hash:
        problem(
            ProblemKind.broken_chain,
            f"broken chain: prev_hash {entry.prev_hash[:12]}... is not the hash of line {prev_line} "
            f"(seq {prev.seq}, hash {prev.hash[:12]}...)",
        )
    return found


def _raw_seq(raw: bytes) -> int | None:
    """The seq written on a line, read without parsing it (for naming lines that don't parse)."""
    match = _SEQ_IN_RAW_LINE.search(raw)
    return int(match.group(1)) if match else None


def _iso(entry: LedgerEntry) -> str:
    return entry.model_dump(mode="json")["time"]
