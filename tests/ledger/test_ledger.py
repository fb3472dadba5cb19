"""The ledger on disk: appends chain correctly, any edit is caught and named, a torn last line is
reported, refused and repaired without losing its bytes, and concurrent processes append safely."""

from __future__ import annotations

import json
import multiprocessing
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from datafarm.errors import InputError, IntegrityError, StateError
from datafarm.hashing import sha256_bytes
from datafarm.ledger import GENESIS_HASH, Ledger, LedgerEntry, ProblemKind
from tests.ledger.helpers import append_many, line_of_each_byte, small_ledger


def _lines(ledger: Ledger) -> list[bytes]:
    return ledger.path.read_bytes().splitlines(keepends=True)


def test_appends_form_a_valid_chain(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path, n=7)
    entries = list(ledger.entries())
    assert [e.seq for e in entries] == list(range(7))
    assert entries[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in zip(entries, entries[1:]))
    assert all(e.hash == e.content_hash() for e in entries)
    assert entries[2].route_to is not None and entries[2].route_to.value == "grounding"
    assert entries[1].cost.input_tokens == 1200 and entries[1].actor.model == "k1"
    report = ledger.verify()
    assert report.ok and report.entries == 7 and report.head_hash == entries[-1].hash
    assert ledger.head() == entries[-1]
    # One JSON object per line, nothing else in the file.
    assert [json.loads(line)["seq"] for line in _lines(ledger)] == list(range(7))


def test_folder_and_file_paths_name_the_same_ledger(tmp_path: Path) -> None:
    Ledger(tmp_path).append("request", "note", "info", "via folder")
    Ledger(tmp_path / "ledger.jsonl").append("request", "note", "info", "via file")
    assert [e.reason for e in Ledger(tmp_path).entries()] == ["via folder", "via file"]


def test_append_returns_what_was_written(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    entry = ledger.append("judge", "freeze", "ok", "frozen", outputs={"judge": "ef" * 32}, details={"k": [1, "a"]})
    assert _lines(ledger) == [entry.to_line()]
    assert entry.time.tzinfo is not None and json.loads(entry.to_line())["time"].endswith("Z")


def test_every_flipped_byte_is_caught_and_named(tmp_path: Path) -> None:
    """Flip each byte of a 5-entry ledger three ways; verify must name the line holding that byte."""
    (tmp_path / "clean").mkdir()
    original = small_ledger(tmp_path / "clean").path.read_bytes()
    line_of = line_of_each_byte(original)
    tampered = Ledger(tmp_path / "tampered")
    tampered.path.parent.mkdir()
    missed = []
    for mask in (0x01, 0x20, 0x80):  # digit/letter change, case or separator change, invalid UTF-8
        for offset in range(len(original)):
            data = bytearray(original)
            data[offset] ^= mask
            tampered.path.write_bytes(bytes(data))
            report = tampered.verify()
            first = report.first_problem
            if report.ok or first is None or first.line != line_of[offset]:
                missed.append((mask, offset, first.render() if first else "no problem"))
    assert not missed, f"{len(missed)} flips not named correctly, e.g. {missed[:5]}"


def test_edit_that_keeps_json_valid_names_the_entry(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    lines = _lines(ledger)
    value = json.loads(lines[2])
    value["reason"] = "IoU fine"  # a plausible forgery: valid JSON, valid schema, old hash
    lines[2] = json.dumps(value, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    ledger.path.write_bytes(b"".join(lines))
    report = ledger.verify()
    assert not report.ok
    assert (report.first_problem.line, report.first_problem.seq) == (3, 2)
    assert report.first_problem.kind is ProblemKind.hash_mismatch
    assert "hash mismatch" in report.first_problem.message


def test_removed_middle_line_is_named(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    lines = _lines(ledger)
    del lines[2]
    ledger.path.write_bytes(b"".join(lines))
    report = ledger.verify()
    assert not report.ok
    first = report.first_problem
    assert (first.line, first.seq) == (3, 3)  # line 3 now holds seq 3: seq 2 is missing
    kinds = {p.kind for p in report.problems if p.line == 3}
    assert kinds == {ProblemKind.seq, ProblemKind.broken_chain}
    assert "seq gap: expected 2" in first.render() or "seq gap: expected 2" in report.problems[1].render()


def test_swapped_lines_are_named(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    lines = _lines(ledger)
    lines[1], lines[2] = lines[2], lines[1]
    ledger.path.write_bytes(b"".join(lines))
    report = ledger.verify()
    assert not report.ok
    assert (report.first_problem.line, report.first_problem.seq) == (2, 2)
    assert all(p.line >= 2 for p in report.problems)


def test_duplicated_line_is_named(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    lines = _lines(ledger)
    lines.insert(3, lines[2])
    ledger.path.write_bytes(b"".join(lines))
    first = ledger.verify().first_problem
    assert (first.line, first.seq) == (4, 2) and "duplicate seq 2" in first.message


def test_torn_last_line_is_reported_refused_and_repaired(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    complete = ledger.path.read_bytes()
    last_start = complete.rstrip(b"\n").rfind(b"\n") + 1
    torn = complete[last_start:-20]  # a crash cut the last write short
    ledger.path.write_bytes(complete[:last_start] + torn)

    report = ledger.verify()
    assert not report.ok and report.torn_tail
    assert report.first_problem.line == 5 and report.first_problem.seq == 4
    assert "torn last line (crash mid-write)" in report.first_problem.message
    assert ledger.has_torn_tail()

    with pytest.raises(IntegrityError, match="torn tail") as refused:
        ledger.append("request", "note", "info", "after the crash")
    assert "repair" in str(refused.value)
    assert ledger.path.read_bytes() == complete[:last_start] + torn  # nothing was written
    with pytest.raises(IntegrityError, match="torn last line"):
        list(ledger.entries())

    repair = ledger.repair_torn_tail(actor={"role": "cli"})
    assert (repair.seq, repair.stage.value, repair.event.value) == (4, "resume", "repair")
    saved = tmp_path / repair.details["saved_to"]
    assert saved.name.startswith("ledger.torn-") and saved.suffix == ".bin"
    assert saved.read_bytes() == torn  # kept, byte for byte
    assert repair.details["torn_bytes"] == len(torn)
    assert repair.details["torn_sha256"] == sha256_bytes(torn) == repair.outputs[saved.name]
    assert repair.details["truncated_at"] == last_start

    after = ledger.verify()
    assert after.ok and after.entries == 5 and not ledger.has_torn_tail()
    assert ledger.append("request", "note", "info", "after the repair").seq == 5
    assert ledger.verify().ok


def test_torn_first_line_is_repaired_to_a_fresh_chain(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.path.write_bytes(b'{"actor":null,"cost"')
    report = ledger.verify()
    assert report.first_problem.line == 1 and report.torn_tail
    entry = ledger.repair_torn_tail()
    assert entry.seq == 0 and entry.prev_hash == GENESIS_HASH and entry.actor.role == "harness"
    assert ledger.verify().ok


def test_repair_without_torn_tail_is_refused(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    before = ledger.path.read_bytes()
    with pytest.raises(StateError, match="nothing to repair"):
        ledger.repair_torn_tail()
    assert ledger.path.read_bytes() == before and not list(tmp_path.glob("*.bin"))


def test_corrupt_last_entry_blocks_append_and_repair(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    data = ledger.path.read_bytes().replace(b"judge frozen", b"judge thawed")  # line 4 of 5
    lines = data.splitlines(keepends=True)
    ledger.path.write_bytes(b"".join(lines[:4]))  # the edited entry is now the last one
    with pytest.raises(IntegrityError, match="last entry is corrupt"):
        ledger.append("request", "note", "info", "x")
    ledger.path.write_bytes(b"".join(lines[:4]) + b'{"torn')
    with pytest.raises(IntegrityError, match="last entry is corrupt"):
        ledger.repair_torn_tail()
    assert ledger.path.read_bytes().endswith(b'{"torn') and not list(tmp_path.glob("*.bin"))


def test_time_going_backwards_is_only_a_warning(tmp_path: Path) -> None:
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    first = LedgerEntry.sealed(seq=0, time=t0, stage="request", event="note", outcome="info", prev_hash=GENESIS_HASH)
    second = LedgerEntry.sealed(
        seq=1, time=t0 - timedelta(seconds=3), stage="request", event="note", outcome="info", prev_hash=first.hash
    )
    ledger = Ledger(tmp_path)
    ledger.path.write_bytes(first.to_line() + second.to_line())
    report = ledger.verify()
    assert report.ok and len(report.warnings) == 1
    assert report.warnings[0].line == 2 and "time goes backwards" in report.warnings[0].message


def test_long_entries_across_read_chunks(tmp_path: Path) -> None:
    """The tail is read backwards in chunks; entries longer than a chunk must still chain."""
    ledger = Ledger(tmp_path)
    for i, size in enumerate([10, 20_000, 5, 9_000, 8_191, 1]):
        ledger.append("render", "render", "ok", "x" * size, details={"i": i})
        assert ledger.head().details["i"] == i
    assert ledger.verify().ok


def test_missing_ledger_and_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError) as missing:
        Ledger(tmp_path / "nope").verify()
    assert missing.value.exit_code == 2 and str(tmp_path / "nope" / "ledger.jsonl") in str(missing.value)
    with pytest.raises(StateError, match="does not exist"):
        Ledger(tmp_path / "nope").append("request", "note", "info")
    assert not (tmp_path / "nope").exists()


def test_empty_ledger_is_valid(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.path.touch()
    report = ledger.verify()
    assert report.ok and report.entries == 0 and ledger.head() is None
    assert ledger.append("request", "note", "info").seq == 0


def test_two_processes_append_500_each(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    ledger = Ledger(tmp_path)
    start = ctx.Barrier(2)  # both begin appending only once both have started up
    workers = [ctx.Process(target=append_many, args=(str(tmp_path), 500, w, start)) for w in (0, 1)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
    assert [p.exitcode for p in workers] == [0, 0]

    entries = list(ledger.entries())
    assert len(entries) == 1000 and [e.seq for e in entries] == list(range(1000))
    report = ledger.verify()
    assert report.ok, report.problems[:3]
    for w in (0, 1):  # each worker's entries all landed, in its own order
        mine = [e.details["i"] for e in entries if e.details["worker"] == w]
        assert mine == list(range(500))
    switches = sum(a.details["worker"] != b.details["worker"] for a, b in zip(entries, entries[1:]))
    assert switches > 1, "the workers never interleaved, so this test proved nothing about locking"
