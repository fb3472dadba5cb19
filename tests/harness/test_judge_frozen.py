"""The frozen judge: J and its hash on disk and in the ledger; the harness refuses any other J; a
re-freeze is a new attempt naming the hash it replaces, and verdicts of the old J are told apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datafarm.artifacts.judge import JudgeLock, JudgeSpec
from datafarm.errors import IntegrityError, StateError
from datafarm.harness.judge import (
    artifact_sha256,
    evaluate,
    freeze,
    freeze_history,
    judge_frozen,
    judged_under,
    load_frozen,
    load_lock,
)
from datafarm.ledger import Ledger
from tests.harness.test_judge_scenes import nest_task

TASK = nest_task()


def frozen(tmp_path: Path, spec: JudgeSpec | None = None) -> tuple[Path, Ledger, JudgeLock]:
    ledger = Ledger(tmp_path)
    judge_dir = tmp_path / "judge"
    lock = freeze(spec or TASK.judge, judge_dir, ledger, contract=TASK.contract, grounding=TASK.grounding)
    return judge_dir, ledger, lock


def stricter() -> JudgeSpec:
    data = TASK.judge.model_dump(mode="json", by_alias=True)
    data["stages"][1]["hold_s"] = 0.5
    return JudgeSpec.model_validate(data)


def test_freeze_writes_spec_lock_and_a_ledger_event_with_the_hash(tmp_path: Path) -> None:
    judge_dir, ledger, lock = frozen(tmp_path)
    digest = TASK.judge.sha256()
    assert (judge_dir / "spec.json").is_file() and (judge_dir / "lock.json").is_file()
    assert lock.spec_sha256 == digest == load_lock(judge_dir).spec_sha256
    assert lock.contract_sha256 == artifact_sha256(TASK.contract)
    assert lock.grounding_sha256 == artifact_sha256(TASK.grounding)
    (entry,) = list(ledger.entries())
    assert (entry.stage.value, entry.event.value, entry.outcome.value) == ("judge", "freeze", "ok")
    assert entry.outputs == {"judge/spec.json": digest}
    assert entry.details["spec_sha256"] == digest and entry.details["previous_spec_sha256"] is None
    assert lock.ledger_seq == entry.seq
    assert ledger.verify().ok
    assert load_frozen(judge_dir, ledger) == TASK.judge


def test_a_spec_edited_after_freezing_is_refused(tmp_path: Path) -> None:
    judge_dir, _, lock = frozen(tmp_path)
    data = json.loads((judge_dir / "spec.json").read_text())
    data["stages"][0]["hold_s"] = 0.0001  # the smallest change
    (judge_dir / "spec.json").write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match=f"froze {lock.spec_sha256}: J changed after it was frozen"):
        load_frozen(judge_dir)
    with pytest.raises(IntegrityError):
        judge_frozen(judge_dir, TASK.good)


def test_a_lock_the_ledger_never_recorded_is_refused(tmp_path: Path) -> None:
    judge_dir, ledger, _ = frozen(tmp_path)
    # someone writes a new spec and a matching lock by hand, without a freeze event
    (judge_dir / "spec.json").write_text(stricter().model_dump_json(by_alias=True))
    lock = load_lock(judge_dir).model_copy(update={"spec_sha256": stricter().sha256()})
    (judge_dir / "lock.json").write_text(lock.model_dump_json())
    assert load_frozen(judge_dir) == stricter()  # the files agree with each other...
    with pytest.raises(IntegrityError, match="but the ledger's latest freeze is"):
        load_frozen(judge_dir, ledger)  # ...but not with the ledger


def test_unfrozen_judge_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="the judge is not frozen"):
        load_frozen(tmp_path / "judge")


def test_refreezing_a_changed_spec_is_a_new_attempt_that_invalidates_old_verdicts(tmp_path: Path) -> None:
    judge_dir, ledger, first = frozen(tmp_path)
    old_verdict = judge_frozen(judge_dir, TASK.good, ledger)
    assert old_verdict.passed and judged_under(old_verdict, first)
    second = freeze(stricter(), judge_dir, ledger, contract=TASK.contract, grounding=TASK.grounding)
    assert second.spec_sha256 != first.spec_sha256
    entries = [e for e in ledger.entries() if e.event.value == "freeze"]
    assert len(entries) == 2
    assert entries[1].details["previous_spec_sha256"] == first.spec_sha256
    assert entries[1].details["attempt"] == 2
    assert "replaces" in entries[1].reason and "invalid" in entries[1].reason
    assert freeze_history(ledger) == [first.spec_sha256, second.spec_sha256]
    assert not judged_under(old_verdict, second)
    assert judged_under(judge_frozen(judge_dir, TASK.good, ledger), second)
    assert load_frozen(judge_dir, ledger) == stricter()


def test_refreezing_the_same_spec_changes_nothing(tmp_path: Path) -> None:
    judge_dir, ledger, first = frozen(tmp_path)
    again = freeze(TASK.judge, judge_dir, ledger, contract=TASK.contract, grounding=TASK.grounding)
    assert again == first
    assert len(list(ledger.entries())) == 1


def test_acceptance_evidence_goes_into_the_freeze_event(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    details = {"accepted": True, "good_passed": True, "rejected": ["teleport"], "escaped": [], "problems": []}
    freeze(TASK.judge, tmp_path / "judge", ledger, contract="ab" * 32, grounding="cd" * 32, acceptance=details)
    (entry,) = list(ledger.entries())
    assert entry.details["acceptance"] == details
    assert entry.inputs == {"contract": "ab" * 32, "grounding": "cd" * 32}


def test_verdicts_carry_the_hash_of_the_judge_that_gave_them() -> None:
    assert evaluate(TASK.judge, TASK.good).judge_sha256 == TASK.judge.sha256()
    assert evaluate(stricter(), TASK.good).judge_sha256 == stricter().sha256() != TASK.judge.sha256()
