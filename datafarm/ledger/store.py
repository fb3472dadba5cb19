"""The ledger file: appending entries safely from several processes, reading and checking them,
and repairing a line torn by a crash.

Every write happens under an exclusive `flock` on the ledger file itself, is a single `write` of
one complete line, and is followed by `fsync`; readers take a shared lock for their snapshot, so
they never mistake a write in progress for a torn line. A torn line (bytes after the last newline)
can therefore only come from a crash mid-write; it is reported, refused by `append`, and repaired
only by `repair_torn_tail`, which keeps the bytes and records the repair.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from datafarm.artifacts.ledger_entry import (
    GENESIS_HASH,
    LedgerActor,
    LedgerCost,
    LedgerEntry,
    LedgerEvent,
    LedgerOutcome,
)
from datafarm.artifacts.stages import Stage
from datafarm.errors import InputError, IntegrityError, Problem, StateError
from datafarm.hashing import sha256_bytes
from datafarm.ledger.verify import REPAIR_HINT, VerifyReport, parse_line, verify_bytes

LEDGER_FILENAME = "ledger.jsonl"
"""The ledger's file name inside a task folder."""

_TAIL_CHUNK = 8192


@dataclass(frozen=True)
class _Tail:
    """The end of the ledger file: the last complete line and any torn bytes after it."""

    cut: int
    """Offset just after the last newline (0 when there is none): where complete lines end."""
    last_line: bytes | None
    """The last complete line without its newline; None when there is no complete line."""
    torn: bytes
    """Bytes after the last newline (empty when the file ends cleanly)."""


class Ledger:
    """The append-only, hash-chained ledger L of one task (`<task folder>/ledger.jsonl`)."""

    def __init__(self, path: Path | str) -> None:
        """`path` is a task folder (the ledger is its `ledger.jsonl`) or the `.jsonl` file itself."""
        path = Path(path)
        self.path: Path = path if path.suffix == ".jsonl" else path / LEDGER_FILENAME
        """The ledger file."""

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # ----------------------------------------------------------------- writing

    def append(
        self,
        stage: Stage | str,
        event: LedgerEvent | str,
        outcome: LedgerOutcome | str,
        reason: str = "",
        *,
        actor: LedgerActor | Mapping[str, Any] | None = None,
        inputs: Mapping[str, str] | None = None,
        outputs: Mapping[str, str] | None = None,
        route_to: Stage | str | None = None,
        cost: LedgerCost | Mapping[str, Any] | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> LedgerEntry:
        """Append one entry (seq, time, prev_hash and hash filled in) and return it once it is on disk.

        Creates the ledger file if the folder exists and the file does not. Safe to call from
        several processes at once. Raises IntegrityError if the ledger ends in a torn line or its
        last entry is corrupt (nothing is written then), pydantic's ValidationError for bad fields.
        """
        fields: dict[str, Any] = {
            "stage": stage,
            "event": event,
            "outcome": outcome,
            "reason": reason,
            "actor": actor,
            "inputs": dict(inputs or {}),
            "outputs": dict(outputs or {}),
            "route_to": route_to,
            "cost": cost if cost is not None else LedgerCost(),
            "details": dict(details or {}),
        }
        # Validate before taking the lock, so a bad call never holds up other writers.
        LedgerEntry.sealed(seq=0, time=_now(), prev_hash=GENESIS_HASH, **fields)
        with self._write_locked() as fd:
            return self._append_locked(fd, fields)

    def repair_torn_tail(self, actor: LedgerActor | Mapping[str, Any] | None = None) -> LedgerEntry:
        """Move a torn last line aside and record the repair; returns the `repair` entry.

        The torn bytes are written to `<stem>.torn-<UTC time>.bin` beside the ledger (and fsynced)
        before the ledger is truncated to its last complete line; then a `repair` event (stage
        `resume`) is appended whose details give the bytes' length, sha256, the file they were saved
        to and the offset the ledger was truncated at. Raises StateError when there is no torn tail,
        IntegrityError when the last complete entry is itself corrupt (nothing is changed then).
        """
        actor = actor if actor is not None else LedgerActor(role="harness")
        with self._write_locked() as fd:
            tail = _read_tail(fd)
            if not tail.torn:
                raise StateError(f"{self.path}: nothing to repair, the ledger has no torn last line")
            self._last_entry(tail)  # refuse before touching anything if the chain is broken anyway
            saved = self._save_torn_bytes(tail.torn)
            os.ftruncate(fd, tail.cut)
            os.fsync(fd)
            digest = sha256_bytes(tail.torn)
            return self._append_locked(
                fd,
                {
                    "stage": Stage.resume,
                    "event": LedgerEvent.repair,
                    "outcome": LedgerOutcome.ok,
                    "reason": f"torn last line (crash mid-write): {len(tail.torn)} bytes moved to {saved.name}",
                    "actor": actor,
                    "outputs": {saved.name: digest},
                    "details": {
                        "torn_bytes": len(tail.torn),
                        "torn_sha256": digest,
                        "saved_to": saved.name,
                        "truncated_at": tail.cut,
                    },
                },
            )

    def _append_locked(self, fd: int, fields: dict[str, Any]) -> LedgerEntry:
        """Append under an exclusive lock the caller holds on `fd` (opened O_APPEND)."""
        tail = _read_tail(fd)
        if tail.torn:
            raise IntegrityError(
                f"{self.path}: cannot append, the ledger has a torn tail: the last {len(tail.torn)} bytes "
                f"are a line cut short by a crash mid-write; {REPAIR_HINT}"
            )
        last = self._last_entry(tail)
        entry = LedgerEntry.sealed(
            seq=0 if last is None else last.seq + 1,
            time=_now(),
            prev_hash=GENESIS_HASH if last is None else last.hash,
            **fields,
        )
        line = entry.to_line()
        try:
            written = 0
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)
        except BaseException:
            # A failed write (disk full, signal) must not leave a torn line behind: we hold the lock,
            # so everything past `tail.cut` is ours to take back.
            os.ftruncate(fd, tail.cut)
            raise
        if tail.cut == 0:
            _fsync_dir(self.path.parent)  # the file was just created: make its name durable too
        return entry

    def _last_entry(self, tail: _Tail) -> LedgerEntry | None:
        """Parse and self-check the last complete entry; IntegrityError when it is corrupt."""
        if tail.last_line is None:
            return None
        try:
            return parse_line(tail.last_line)
        except ValueError as e:
            raise IntegrityError(
                f"{self.path}: cannot append, the last entry is corrupt ({e}); "
                f"run `datafarm ledger verify {self.path}` to see every problem"
            ) from None

    def _save_torn_bytes(self, torn: bytes) -> Path:
        """Write the torn bytes to a new file beside the ledger, durably; never overwrite one."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        for attempt in range(1000):
            suffix = "" if attempt == 0 else f"-{attempt}"
            target = self.path.with_name(f"{self.path.stem}.torn-{stamp}{suffix}.bin")
            try:
                out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            try:
                written = 0
                while written < len(torn):
                    written += os.write(out, torn[written:])
                os.fsync(out)
            finally:
                os.close(out)
            _fsync_dir(target.parent)
            return target
        raise StateError(f"{self.path}: could not find a free name for the torn bytes beside the ledger")

    @contextmanager
    def _write_locked(self) -> Iterator[int]:
        """Open the ledger for appending (creating it) and hold an exclusive lock on it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:
            raise StateError(
                f"cannot write the ledger {self.path}: the folder {self.path.parent} does not exist"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

    # ----------------------------------------------------------------- reading

    def exists(self) -> bool:
        """True when the ledger file exists."""
        return self.path.is_file()

    def entries(self) -> Iterator[LedgerEntry]:
        """Every entry in order, parsed (hashes and chain are `verify`'s job).

        Reads the entries that were complete when iteration started. Raises InputError when there is
        no ledger, IntegrityError at a line that is not a valid entry or at a torn last line.
        """
        size = self._stable_size()
        with open(self.path, "rb") as f:
            line_no = 0
            offset = 0
            for raw in f:
                start, offset = offset, offset + len(raw)
                line_no += 1
                if start >= size:
                    return  # appended after iteration started
                if offset > size or not raw.endswith(b"\n"):
                    raise IntegrityError(
                        f"{self.path}: line {line_no} is a torn last line (crash mid-write); {REPAIR_HINT}"
                    )
                try:
                    yield parse_line(raw[:-1])
                except ValueError as e:
                    raise IntegrityError(
                        f"{self.path}: line {line_no} is not a valid ledger entry ({e}); "
                        f"run `datafarm ledger verify {self.path}` to see every problem"
                    ) from None

    def head(self) -> LedgerEntry | None:
        """The last complete entry (None for an empty ledger), read from the end of the file."""
        with self._read_locked() as fd:
            tail = _read_tail(fd)
        if tail.last_line is None:
            return None
        try:
            return parse_line(tail.last_line)
        except ValueError as e:
            raise IntegrityError(f"{self.path}: the last entry is corrupt ({e})") from None

    def has_torn_tail(self) -> bool:
        """True when the ledger ends in a line cut short by a crash (what `repair_torn_tail` fixes)."""
        with self._read_locked() as fd:
            return bool(_read_tail(fd).torn)

    def verify(self) -> VerifyReport:
        """Check every entry, the hash chain, the seq order and the tail; see `VerifyReport`."""
        with self._read_locked() as fd:
            data = _read_all(fd)
        return verify_bytes(data)

    def _stable_size(self) -> int:
        """The file size at a moment when no write is in progress."""
        with self._read_locked() as fd:
            return os.fstat(fd).st_size

    @contextmanager
    def _read_locked(self) -> Iterator[int]:
        """Open the ledger read-only under a shared lock; InputError (exit 2) when it is missing."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise self._missing() from None
        except IsADirectoryError:
            raise self._missing() from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield fd
        finally:
            os.close(fd)

    def _missing(self) -> InputError:
        return InputError(
            [
                Problem(
                    "no ledger here",
                    file=self.path,
                    expected="a task folder holding ledger.jsonl, or the path of a .jsonl ledger",
                    hint="`datafarm compile` writes it when it creates the task folder",
                )
            ]
        )


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(1 << 20, size - offset), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _read_tail(fd: int) -> _Tail:
    """Find the last complete line and any torn bytes by reading backwards from the end."""
    size = os.fstat(fd).st_size
    buf = b""
    start = size  # absolute offset of buf[0]
    while start > 0:
        step = min(_TAIL_CHUNK, start)
        start -= step
        buf = os.pread(fd, step, start) + buf
        last_nl = buf.rfind(b"\n")
        if last_nl != -1 and (start == 0 or buf.rfind(b"\n", 0, last_nl) != -1):
            break
    last_nl = buf.rfind(b"\n")
    if last_nl == -1:
        return _Tail(cut=0, last_line=None, torn=buf)
    line_start = buf.rfind(b"\n", 0, last_nl) + 1  # 0 when the line starts the file
    return _Tail(cut=start + last_nl + 1, last_line=buf[line_start:last_nl], torn=buf[last_nl + 1 :])


def _fsync_dir(path: Path) -> None:
    """fsync a directory so a file created or renamed in it survives a crash."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on directories; the data itself is synced
        if e.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)
