"""q, the admission record, on a real compiled dataset (tests.admission.dataset).

q of every compiled episode holds J's verdict with J's hash, the verifier's results with the spec and
calibration hashes (a calibration that caught every corruption), the builtin reviewer's verdict with its
evidence, the sha256 of every episode file and the K version; the ledger's admission event carries q's
hash. `write_admission`, given the real inputs of stage 10 (the snapshot before it), writes exactly
that, and refuses (writing nothing) when an input fails, when J was re-frozen, when the verifier spec
changed, when the results are not the episode's own, when a file changed or is not recorded, and when
the expert ran unsandboxed without the explicit policy."""

from __future__ import annotations

import json

import pytest

from datafarm.admission.admit import admit
from datafarm.admission.record import AdmissionRefused, load_admission, write_admission
from datafarm.artifacts.admission import AdmissionRecord, ReviewVerdict, VerifierResults
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import JudgeLock, JudgeSpec
from datafarm.artifacts.ledger_entry import LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.capability.models import CapabilityLock
from datafarm.errors import IntegrityError, StateError
from datafarm.harness.judge import freeze, load_lock
from datafarm.harness.rollout import RolloutReport
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from datafarm.verifiers import load_calibration
from tests.admission.dataset import (
    SLOW_COMPILE,
    episodes,
    flip_byte,
    passing_admission_rollout,
)

pytestmark = SLOW_COMPILE  # every test here needs the session's compile (tests/admission/conftest.py)

SYNTHETIC = "SYNTHETIC (tests/admission): a failing input the pipeline never hands to admission"
"""The label of the inputs these tests construct: stage 10 only ever receives passing ones, so a
failing verdict, failing verifier results or a rejecting review must be made by hand to test the refusal."""


def _inputs(folder):
    """What stage 10 hands to write_admission for an episode: the rollout's verdict, the episode's own
    verification.json and review.json."""
    return (load_artifact(RolloutReport, folder / "rollout.json").verdict,
            load_artifact(VerifierResults, folder / "verification.json"),
            load_artifact(ReviewVerdict, folder / "review.json"))


def _admit(task, folder, **options) -> AdmissionRecord:
    verdict, results, review = _inputs(folder)
    return write_admission(task, folder.name, verdict, load_lock(TaskDir(task).judge_dir), results, review, **options)


def _ledger_lines(task) -> list[bytes]:
    return Ledger(task).path.read_bytes().splitlines()


def test_q_of_every_compiled_episode_holds_the_evidence_that_admitted_it(pristine):
    paths = TaskDir(pristine)
    k = CapabilityLock.model_validate_json(paths.capability_lock.read_text())
    lock = load_artifact(JudgeLock, paths.judge_dir / "lock.json")
    calibration = load_calibration(pristine)
    spec_sha, calibration_sha = (sha256_file(paths.verifier_dir / n) for n in ("spec.json", "calibration.json"))
    assert calibration.passed and calibration.spec_sha256 == spec_sha and not calibration.escaped
    assert all(row.caught for row in calibration.rows if row.applied) and all(cell.passed for cell in calibration.clean.values())
    ledger = list(Ledger(pristine).entries())
    freezes = [e for e in ledger if e.event == LedgerEvent.freeze]
    events = {e.details["episode_id"]: e for e in ledger if e.event == LedgerEvent.admission}
    folders = episodes(pristine)
    assert set(events) == {f.name for f in folders} and len(folders) >= 2
    for folder in folders:
        q = load_admission(folder)
        # J: its verdict passed, with the hash of the J frozen (the ledger's latest freeze) before the expert
        assert q.judge.passed and q.judge.judge_sha256 == lock.spec_sha256 == freezes[-1].details["spec_sha256"]
        assert q.judge == load_artifact(RolloutReport, folder / "rollout.json").verdict
        # verifier: every check of the spec, run under the calibrated spec, is the episode's own verification.json
        assert (q.verifier.spec_sha256, q.verifier.calibration_sha256) == (spec_sha, calibration_sha)
        assert q.verifier.passed and {c.check for c in q.verifier.checks} == set(calibration.clean)
        assert q.verifier == load_artifact(VerifierResults, folder / "verification.json")
        for check in q.verifier.checks:
            assert check.evidence and check.route_to is None
        # reviewer: the builtin reviewer accepted it, every claim with evidence (see test_review.py for what it is)
        assert q.review.accepted and q.review.provider == "builtin" and q.review == load_artifact(ReviewVerdict, folder / "review.json")
        assert all(c.holds and c.evidence for c in q.review.claims)
        # every episode file, with its hash; K and the sandbox
        on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"admission.json"}
        assert set(q.files) == on_disk >= {
            "episode.json", "rollout.json", "contacts.parquet", "data/states.parquet", "data/actions.parquet",
            "data/joint_occupancy.parquet", "render.json", "verification.json", "review.json",
            *(f"{kind}/{camera}.mp4" for kind in ("obs", "sim") for camera in ("front", "left", "right"))}
        assert all(sha256_file(folder / name) == digest for name, digest in q.files.items())
        assert (q.k_version, q.k_sha256) == (k.k_version, k.k_sha256) and q.sandbox == "bwrap"
        # the ledger's admission event carries q's hash (output) and the episode's file hashes (inputs)
        event, rel = events[folder.name], f"episodes/{folder.name}"
        assert (event.stage, event.outcome) == (Stage.admit, LedgerOutcome.ok)
        assert event.outputs == {f"{rel}/admission.json": sha256_file(folder / "admission.json")}
        assert event.inputs == {f"{rel}/{name}": digest for name, digest in q.files.items()}
        assert event.details["seed_index"] == q.seed_index and event.details["k_version"] == k.k_version
        assert (event.details["verifier_spec_sha256"], event.details["verifier_calibration_sha256"]) == (spec_sha, calibration_sha)
    assert Ledger(pristine).verify().ok


def test_write_admission_on_the_inputs_of_stage_10_admits_every_episode(reviewed):
    folders = episodes(reviewed)
    assert not any((f / "admission.json").exists() for f in folders)
    assert not admit(reviewed, write_certificate=False).ok  # nothing admitted yet
    for folder in folders:
        q = _admit(reviewed, folder)
        assert q == load_admission(folder) and q.files == {p: sha256_file(folder / p) for p in q.files}
    report = admit(reviewed)
    assert report.ok, report.render()
    with pytest.raises(StateError, match="already admitted"):
        _admit(reviewed, folders[0])


def test_failing_inputs_are_refused_with_every_reason_and_nothing_is_written(reviewed):
    folder = episodes(reviewed)[0]
    verdict, results, review = _inputs(folder)
    before = _ledger_lines(reviewed)
    failed = verdict.model_copy(update={"passed": False, "reason": f"{SYNTHETIC}: a stage did not complete"})
    broken = [c.model_copy(update={"passed": False, "metric": c.threshold * 3 + 1, "route_to": Stage.render})
              if i < 2 else c for i, c in enumerate(results.checks)]
    rejected = review.model_copy(update={"accepted": False, "route_to": Stage.render})
    with pytest.raises(AdmissionRefused) as refused:
        write_admission(reviewed, folder.name, failed, None, results.model_copy(update={"checks": broken}), rejected)
    text = str(refused.value)
    assert refused.value.exit_code == 4 and isinstance(refused.value, IntegrityError)
    for reason in ("J's verdict failed", f"verifier check {broken[0].check.value} failed (metric",
                   f"verifier check {broken[1].check.value} failed", "the reviewer rejected the episode (routes to render)",
                   "not the one recorded in episode.json",
                   "verification.json: holds other verifier results than those given",
                   "review.json: holds other review verdict than those given"):
        assert reason in text, text
    assert not (folder / "admission.json").exists()
    assert _ledger_lines(reviewed) == before


def test_results_of_another_episode_are_refused(reviewed):
    first, second = episodes(reviewed)[:2]
    verdict, _, _ = _inputs(first)
    _, results, review = _inputs(second)
    with pytest.raises(AdmissionRefused) as refused:
        write_admission(reviewed, first.name, verdict, None, results, review)
    text = str(refused.value)
    assert f"episodes/{first.name}/verification.json: holds other verifier results than those given" in text
    assert f"episodes/{first.name}/review.json: holds other review verdict than those given" in text


def test_a_verdict_from_a_j_that_was_re_frozen_is_refused(reviewed):
    folder = episodes(reviewed)[0]
    paths = TaskDir(reviewed)
    spec = load_artifact(JudgeSpec, paths.judge_dir / "spec.json")
    new_lock = freeze(spec.model_copy(update={"time_limit_s": spec.time_limit_s + 5.0}), paths.judge_dir,
                      Ledger(reviewed), contract=load_artifact(TaskContract, paths.contract),
                      grounding=load_artifact(Grounding, paths.grounding))
    verdict, results, review = _inputs(folder)
    with pytest.raises(AdmissionRefused, match="a later freeze invalidated it") as refused:
        write_admission(reviewed, folder.name, verdict, new_lock, results, review)
    assert "the rollout was judged by another J than the frozen one" in str(refused.value)
    assert not (folder / "admission.json").exists()


def test_verifier_results_under_another_spec_are_refused(reviewed):
    spec = TaskDir(reviewed).verifier_dir / "spec.json"
    body = json.loads(spec.read_text())
    spec.write_text(json.dumps(body, indent=1))  # the same spec, other bytes: no longer the calibrated file
    with pytest.raises(AdmissionRefused, match=r"verifier/spec.json: the verifier ran under"):
        _admit(reviewed, episodes(reviewed)[0])


def test_a_file_changed_after_its_stage_or_never_recorded_is_refused_and_admitted_once_restored(reviewed):
    folder = episodes(reviewed)[0]
    rel = f"episodes/{folder.name}"
    states, video = folder / "data" / "states.parquet", folder / "obs" / "front.mp4"
    originals = {p: p.read_bytes() for p in (states, video)}
    flip_byte(states, at=0.5)
    flip_byte(video, at=0.5)
    (folder / "obs" / "extra.mp4").write_bytes(originals[video])
    with pytest.raises(AdmissionRefused) as refused:
        _admit(reviewed, folder)
    text = str(refused.value)
    assert f"{rel}/data/states.parquet: changed since the rollout wrote it" in text
    assert f"{rel}/obs/front.mp4: differs from the hash ledger.jsonl:" in text  # the render entry's
    assert f"{rel}/obs/extra.mp4: no ledger entry records this file" in text
    for path, data in originals.items():
        path.write_bytes(data)
    (folder / "obs" / "extra.mp4").unlink()
    assert _admit(reviewed, folder).files["obs/front.mp4"] == sha256_file(video)


def test_an_unsandboxed_expert_is_refused_unless_the_policy_allows_it(reviewed):
    used = max(e.details["admission_index"] for e in Ledger(reviewed).entries()
               if e.event == LedgerEvent.rollout and e.details.get("seed_kind") == "admission")
    count = load_artifact(BatchConfig, TaskDir(reviewed).batch).admission_seed_count
    unsafe = passing_admission_rollout(reviewed, range(used + 1, count), sandbox="none", unsafe_no_sandbox=True)
    _, results, review = _inputs(episodes(reviewed)[0])  # it was never rendered, verified or reviewed: refused for that too
    with pytest.raises(AdmissionRefused) as refused:
        write_admission(reviewed, unsafe.episode_id, unsafe.verdict, None, results, review)
    assert "the expert ran without isolation (sandbox none)" in str(refused.value)
    assert "verification.json: missing: the episode was never verified" in str(refused.value)
    with pytest.raises(AdmissionRefused) as allowed:
        write_admission(reviewed, unsafe.episode_id, unsafe.verdict, None, results, review, allow_unsafe_sandbox=True)
    assert "without isolation" not in str(allowed.value) and "never verified" in str(allowed.value)
    assert not (unsafe.folder / "admission.json").exists()


def test_a_crash_between_q_and_its_ledger_event_is_rewritten(reviewed):
    folder = episodes(reviewed)[0]
    stale = folder / "admission.json"
    stale.write_text("{}")  # what a crash after writing q but before the ledger event leaves
    q = _admit(reviewed, folder)
    assert AdmissionRecord.model_validate_json(stale.read_text()) == q
