"""Dev seeds and held-out admission seeds: admission seeds come from a per-task secret only the harness
reads (deterministic for a secret, different across secrets, committed to in the ledger, unreadable
from the sandbox), and the author's `request_rollout` takes dev seeds only and returns only the
verdict summary."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from datafarm.artifacts.expert import ExpertManifest
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import JudgeVerdict, VerdictSummary
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.errors import InputError, IntegrityError, StateError
from datafarm.harness.rollout import request_rollout, run_rollout
from datafarm.harness.seeds import (
    COMMIT_KEY,
    admission_seed,
    admission_seeds,
    check_dev_seed,
    create_secret,
    load_secret,
    secret_path,
)
from datafarm.harness.server import RolloutEnd
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.harness.test_world_rollout_fixtures import (
    ROLLOUT_OPTIONS,
    make_task,
    place_batch,
    write_expert,
)


def test_admission_seeds_are_deterministic_per_secret_and_differ_across_secrets():
    a, b = b"a" * 64, b"b" * 64
    seeds_a = [admission_seed(a, i) for i in range(50)]
    assert seeds_a == [admission_seed(a, i) for i in range(50)]
    assert len(set(seeds_a)) == 50
    assert not set(seeds_a) & {admission_seed(b, i) for i in range(50)}
    assert all(0 <= s < 2**63 for s in seeds_a) and max(seeds_a) > 2**60  # spread over 63 bits
    with pytest.raises(ValueError):
        admission_seed(a, -1)


def test_the_secret_is_private_and_the_ledger_keeps_only_its_commitment(tmp_path):
    ledger = Ledger(tmp_path)
    digest = create_secret(tmp_path, ledger)
    path = secret_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    secret = path.read_bytes()
    assert digest == hashlib.sha256(secret).hexdigest()
    entries = list(ledger.entries())
    assert len(entries) == 1 and entries[0].details[COMMIT_KEY] == digest
    assert secret.decode() not in ledger.path.read_text()
    # idempotent: the same secret, no second commitment
    assert create_secret(tmp_path, ledger) == digest and len(list(ledger.entries())) == 1
    seeds = admission_seeds(tmp_path, 4, ledger)
    assert seeds == admission_seeds(tmp_path, 4, ledger) == [admission_seed(secret, i) for i in range(4)]
    # another task's secret gives other seeds
    other = tmp_path / "other"
    other.mkdir()
    create_secret(other)
    assert not set(seeds) & set(admission_seeds(other, 4))


def test_a_replaced_or_exposed_secret_is_refused(tmp_path):
    with pytest.raises(StateError, match="no admission secret"):
        load_secret(tmp_path)
    create_secret(tmp_path)
    path = secret_path(tmp_path)
    path.chmod(0o644)
    with pytest.raises(IntegrityError, match="must be private"):
        load_secret(tmp_path)
    path.chmod(0o600)
    path.write_bytes(b"0" * 64)  # someone picks the secret to steer which scenes admission draws
    with pytest.raises(IntegrityError, match="replaced"):
        admission_seeds(tmp_path, 2)


def test_a_kill_around_creating_the_secret_leaves_none_or_a_whole_one_that_resume_commits(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path)
    # killed before the secret was linked into place: only a staging file, no secret
    monkeypatch.setattr(os, "link", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        create_secret(tmp_path, ledger)
    monkeypatch.undo()
    assert not secret_path(tmp_path).exists() and not ledger.exists()
    # killed after the link, before the ledger entry: a whole secret without its commitment
    monkeypatch.setattr(Ledger, "append", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        create_secret(tmp_path, ledger)
    monkeypatch.undo()
    secret = secret_path(tmp_path).read_bytes()
    assert not ledger.exists()
    digest = create_secret(tmp_path, ledger)  # what resume does
    assert digest == hashlib.sha256(secret).hexdigest()
    [entry] = ledger.entries()
    assert entry.details[COMMIT_KEY] == digest and "committed now" in entry.reason
    assert admission_seeds(tmp_path, 2, ledger) == [admission_seed(secret, i) for i in range(2)]


def test_a_cut_short_secret_or_one_used_before_its_commitment_is_refused(tmp_path):
    path = secret_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"")
    path.chmod(0o600)
    with pytest.raises(IntegrityError, match="cut short"):
        create_secret(tmp_path)
    path.write_bytes(b"ab" * 32)
    ledger = Ledger(tmp_path)
    ledger.append(Stage.rollout, LedgerEvent.rollout, LedgerOutcome.ok, "TEST FIXTURE: an admission rollout",
                  actor=LedgerActor(role="harness"), details={"admission_index": 0})
    with pytest.raises(IntegrityError, match="no commitment"):
        create_secret(tmp_path, ledger)


def test_only_b_dev_seeds_are_dev_seeds():
    batch = place_batch()
    assert check_dev_seed(batch, 2) == 2
    for bad in (3, -1, True, "0", 2.0):
        with pytest.raises(InputError, match="is not one of B's dev seeds"):
            check_dev_seed(batch, bad)


def test_request_rollout_refuses_admission_and_unlisted_seeds_and_returns_only_the_summary(tmp_path):
    task = make_task(tmp_path / "task", manifest=True)
    admission = admission_seeds(task, 1)[0]
    messages = []
    for seed in (admission, 99):
        with pytest.raises(InputError) as refused:
            request_rollout(task, seed, **ROLLOUT_OPTIONS)
        messages.append(str(refused.value).replace(str(seed), "N"))
    assert messages[0] == messages[1]  # an admission seed is refused exactly like any other seed
    refusals = [e for e in Ledger(task).entries() if e.event.value == "rollout"]
    assert [e.outcome.value for e in refusals] == ["skipped", "skipped"]
    assert not TaskDir(task).attempts_dir.exists()

    summary = request_rollout(task, 1, **ROLLOUT_OPTIONS)
    assert type(summary) is VerdictSummary and not isinstance(summary, JudgeVerdict)
    assert set(summary.model_dump()) == {"passed", "stage_reached", "reason"}
    assert summary.passed, summary.reason
    spec_text = (TaskDir(task).judge_dir / "spec.json").read_text()
    assert "judge_sha256" not in summary.model_dump_json() and spec_text not in summary.reason
    # the author's record of it: the expert manifest's dev runs (only the summary again)
    manifest = load_artifact(ExpertManifest, TaskDir(task).artifact("expert"))
    assert [(r.seed, r.verdict) for r in manifest.dev_runs] == [(1, summary)]
    assert manifest.dev_runs[0].controller_sha256 == manifest.sha256 and manifest.dev_pass_rate() == 1.0


def test_the_secret_the_judge_and_the_ledger_cannot_be_read_from_the_sandbox(tmp_path):
    task = make_task(tmp_path / "task")
    targets = [secret_path(task), TaskDir(task).judge_dir / "spec.json", Ledger(task).path]
    write_expert(task, f"""
        import os
        from datafarm_expert import Harness
        robot = Harness()
        found = []
        for path in {[str(p) for p in targets]!r} + ["../harness/secret", "/in/../harness/secret", "/out/../harness/secret"]:
            try:
                with open(path, "rb") as f:
                    found.append(path + "=" + f.read(8).hex())
            except OSError as error:
                found.append(path + ":" + type(error).__name__)
        robot.done(success=False, note=";".join(found))
        """)
    result = run_rollout(task, 0, "dev", **ROLLOUT_OPTIONS)
    assert result.outcome.ended_by is RolloutEnd.DONE
    outcomes = result.outcome.done_note.split(";")
    assert len(outcomes) == 6 and all("=" not in o and o.endswith(("FileNotFoundError", "PermissionError")) for o in outcomes)
    assert all(p.is_file() for p in targets)
