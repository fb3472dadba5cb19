"""`datafarm compile`: the task folder it creates, what it refuses, and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from datafarm.capability import load as load_k
from datafarm.compiler import compile_lock, compile_request
from datafarm.errors import InputError, IntegrityError, StateError
from datafarm.hashing import sha256_tree
from datafarm.ledger import Ledger
from datafarm.pipeline import ORDER

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"


def test_compile_creates_the_task_folder(example):
    result = compile_request(example)
    root = result.task_dir.root
    assert result.created
    assert root.parent == example.parent / "runs"
    assert {"capability.lock", "ledger.jsonl", "request.yaml"} <= {p.name for p in root.iterdir()}

    copy = yaml.safe_load((root / "request.yaml").read_text())
    assert copy["clip_sha256"] == sha256_tree(example.parent / "clip")
    assert Path(copy["clip"]).is_absolute()

    lock = json.loads((root / "capability.lock").read_text())
    k = load_k()
    assert (lock["k_version"], lock["k_sha256"]) == (k.version, k.sha256)

    ledger = Ledger(root)
    report = ledger.verify()
    assert report.ok, report.render()
    entries = list(ledger.entries())
    assert entries[0].stage.value == "request" and entries[0].outcome.value == "ok"
    # The stages after the request run in pipeline order until one stops; the stop is in the ledger
    # (a rejection with the stage it routes to, or the stages not built yet).
    finished = [e.stage for e in entries if e.event.value == "stage_finished" and e.stage.value != "request"]
    assert finished == list(ORDER[: len(finished)]) == result.pipeline.finished
    stop = result.pipeline.stopped_at
    if stop is not None:
        assert stop == ORDER[len(finished)]
        stopping = [e for e in entries if e.stage == stop and e.event.value in ("rejection", "stage_not_implemented")]
        assert stopping, f"no ledger entry says why compile stopped at {stop.value}"


def test_task_id_is_stable_and_existing_folder_is_not_overwritten(example):
    first = compile_request(example)
    before = (first.task_dir.ledger).read_bytes()
    with pytest.raises(StateError, match="--resume"):
        compile_request(example)
    assert first.task_dir.ledger.read_bytes() == before


def test_resume_appends_and_keeps_the_chain(example):
    first = compile_request(example)
    n = len(list(Ledger(first.task_dir.root).entries()))
    again = compile_request(example, resume=True)
    assert again.task_dir.root == first.task_dir.root and not again.created
    entries = list(Ledger(first.task_dir.root).entries())
    assert len(entries) > n and entries[n].event.value == "resume"
    assert Ledger(first.task_dir.root).verify().ok


def test_resume_repairs_a_torn_ledger_and_records_it(example):
    first = compile_request(example)
    with open(first.task_dir.ledger, "ab") as f:
        f.write(b'{"seq": 99, "tor')  # a crash mid-write
    result = compile_request(example, resume=True)
    assert result.repaired_torn_tail
    saved = list(first.task_dir.root.glob("ledger.torn-*"))
    assert len(saved) == 1 and saved[0].read_bytes() == b'{"seq": 99, "tor'
    assert any(e.event.value == "repair" for e in Ledger(first.task_dir.root).entries())
    assert Ledger(first.task_dir.root).verify().ok


def test_resume_refuses_an_edited_ledger(example):
    first = compile_request(example)
    lines = first.task_dir.ledger.read_text().splitlines(keepends=True)
    assert '"seq":1,' in lines[1]
    lines[1] = lines[1].replace('"seq":1,', '"seq":7,', 1)
    first.task_dir.ledger.write_text("".join(lines))
    with pytest.raises(IntegrityError, match="refusing to resume"):
        compile_request(example, resume=True)


def test_resume_refuses_a_different_capability(example):
    first = compile_request(example)
    lock = json.loads(first.task_dir.capability_lock.read_text())
    lock["k_sha256"] = "0" * 64
    first.task_dir.capability_lock.write_text(json.dumps(lock))
    with pytest.raises(IntegrityError, match="resume needs the same K"):
        compile_request(example, resume=True)


def test_resume_without_a_task_folder_is_refused(example):
    with pytest.raises(StateError, match="does not exist"):
        compile_request(example, resume=True)
    assert not (example.parent / "runs").exists() or not any((example.parent / "runs").iterdir())


def test_bad_request_writes_nothing(example):
    text = example.read_text().replace("episodes: 4", "epsiodes: 4")
    example.write_text(text)
    with pytest.raises(InputError) as e:
        compile_request(example)
    assert "episodes" in str(e.value)
    assert not (example.parent / "runs").exists()


def test_a_changed_clip_is_a_different_task(example):
    first = compile_request(example)
    clip_yaml = example.parent / "clip" / "clip.yaml"
    clip_yaml.write_text(clip_yaml.read_text() + "\n# edited\n")
    second = compile_request(example)
    assert second.task_dir.root != first.task_dir.root


def test_one_compile_at_a_time_per_task_folder(example):
    first = compile_request(example, run_stages=False)
    n = len(list(Ledger(first.task_dir.root).entries()))
    # another compile is running on this folder
    with compile_lock(first.task_dir), pytest.raises(StateError, match="another `datafarm compile` is running"):
        compile_request(example, resume=True, run_stages=False)
    assert len(list(Ledger(first.task_dir.root).entries())) == n  # refused before it wrote anything
    again = compile_request(example, resume=True, run_stages=False)  # the lock went with its holder
    assert not again.created
