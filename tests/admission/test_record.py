"""q, the admission record: written for a real admission rollout with every file hash, J's hash, the
verifier's and reviewer's results, K and the sandbox, and an `admission` ledger event carrying q's
hash; refused (nothing written) when any input fails, when J was re-frozen, when a file changed or
is not recorded, and when the expert ran unsandboxed without the explicit policy."""

from __future__ import annotations

import json

import pytest

from datafarm.admission.admit import admit
from datafarm.admission.record import AdmissionRefused, load_admission, write_admission
from datafarm.artifacts.admission import AdmissionRecord
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.capability.models import CapabilityLock
from datafarm.errors import IntegrityError, StateError
from datafarm.harness.judge import freeze, load_lock
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.admission.dataset import (
    TEST_INPUT,
    admit_rollout,
    new_task,
    rollout,
    synthetic_review,
    synthetic_verifier_results,
)
from tests.harness.test_world_rollout_fixtures import (
    place_contract,
    place_grounding,
    place_judge,
)


def _ledger_lines(task) -> list[bytes]:
    return Ledger(task).path.read_bytes().splitlines()


def test_q_records_every_file_the_judge_verifier_review_k_and_sandbox_and_the_ledger_its_hash(dataset):
    paths = TaskDir(dataset)
    folders = sorted(paths.episodes_dir.iterdir())
    assert len(folders) == 2
    k = CapabilityLock.model_validate_json(paths.capability_lock.read_text())
    lock = load_lock(paths.judge_dir)
    events = [e for e in Ledger(dataset).entries() if e.event == LedgerEvent.admission]
    assert [e.details["seed_index"] for e in events] == [0, 1]
    for folder, event in zip(folders, events):
        q = load_admission(folder)
        on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"admission.json"}
        assert set(q.files) == on_disk >= {"episode.json", "rollout.json", "contacts.parquet", "data/states.parquet",
                                           "data/actions.parquet", "data/joint_occupancy.parquet"}
        assert all(sha256_file(folder / name) == digest for name, digest in q.files.items())
        assert q.judge.passed and q.judge.judge_sha256 == lock.spec_sha256
        assert q.verifier.passed and q.verifier.spec_sha256 == sha256_file(paths.verifier_dir / "spec.json")
        assert q.review.accepted and TEST_INPUT in q.review.claims[0].claim
        assert (q.k_version, q.k_sha256) == (k.k_version, k.k_sha256) and q.sandbox == "bwrap"
        # the ledger event carries q's hash (its output) and the episode's file hashes (its inputs)
        rel = f"episodes/{folder.name}"
        assert (event.stage, event.outcome) == (Stage.admit, LedgerOutcome.ok)
        assert event.outputs == {f"{rel}/admission.json": sha256_file(folder / "admission.json")}
        assert event.inputs == {f"{rel}/{name}": digest for name, digest in q.files.items()}
        assert event.details["episode_id"] == folder.name == q.episode_id
    assert Ledger(dataset).verify().ok


def test_failing_inputs_are_refused_with_every_reason_and_nothing_is_written(dataset):
    result = rollout(dataset, 2)
    before = _ledger_lines(dataset)
    failed = result.verdict.model_copy(update={"passed": False, "reason": "stage 'place_block' did not complete"})
    with pytest.raises(AdmissionRefused) as refused:
        write_admission(dataset, result.episode_id, failed, None,
                        synthetic_verifier_results(dataset, appearance=3.5, layout=2.0), synthetic_review(accepted=False))
    text = str(refused.value)
    assert refused.value.exit_code == 4 and isinstance(refused.value, IntegrityError)
    for reason in ("J's verdict failed", "verifier check appearance failed (metric 3.5", "verifier check layout failed",
                   "the reviewer rejected the episode (routes to render)", "not the one recorded in episode.json"):
        assert reason in text, text
    assert not (result.folder / "admission.json").exists()
    assert _ledger_lines(dataset) == before


def test_a_verdict_from_a_j_that_was_re_frozen_is_refused(dataset):
    result = rollout(dataset, 2)
    changed = place_judge().model_copy(update={"time_limit_s": 25.0})
    new_lock = freeze(changed, TaskDir(dataset).judge_dir, Ledger(dataset), contract=place_contract(),
                      grounding=place_grounding())
    with pytest.raises(AdmissionRefused, match="a later freeze invalidated it") as refused:
        write_admission(dataset, result.episode_id, result.verdict, new_lock, synthetic_verifier_results(dataset),
                        synthetic_review())
    assert "the rollout was judged by another J than the frozen one" in str(refused.value)
    assert not (result.folder / "admission.json").exists()


def test_verifier_results_under_another_spec_are_refused(dataset):
    result = rollout(dataset, 2)
    results = synthetic_verifier_results(dataset)
    (TaskDir(dataset).verifier_dir / "spec.json").write_text(json.dumps({"test_input": TEST_INPUT, "edited": True}))
    with pytest.raises(AdmissionRefused, match=r"verifier/spec.json: the verifier ran under"):
        write_admission(dataset, result.episode_id, result.verdict, None, results, synthetic_review())


def test_a_file_changed_after_the_rollout_or_never_recorded_is_refused_and_a_recorded_render_is_admitted(dataset):
    result = rollout(dataset, 2)
    rel = f"episodes/{result.episode_id}"
    states = result.folder / "data" / "states.parquet"
    data = bytearray(states.read_bytes())
    data[len(data) // 2] ^= 0x01
    states.write_bytes(bytes(data))
    video = result.folder / "obs" / "front.mp4"
    video.parent.mkdir()
    video.write_bytes(b"TEST INPUT: stands in for a rendered video")
    with pytest.raises(AdmissionRefused) as refused:
        admit_rollout(dataset, result)
    text = str(refused.value)
    assert f"{rel}/data/states.parquet: changed since the rollout wrote it" in text
    assert f"{rel}/obs/front.mp4: no ledger entry records this file" in text

    data[len(data) // 2] ^= 0x01
    states.write_bytes(bytes(data))  # restored
    Ledger(dataset).append(Stage.render, LedgerEvent.render, LedgerOutcome.ok, "TEST INPUT: a render event",
                           actor=LedgerActor(role="harness"), outputs={f"{rel}/obs/front.mp4": sha256_file(video)})
    q = admit_rollout(dataset, result)
    assert q.files["obs/front.mp4"] == sha256_file(video)
    with pytest.raises(StateError, match="already admitted"):
        admit_rollout(dataset, result)


def test_an_unsandboxed_expert_is_refused_unless_the_policy_allows_it_and_admit_refuses_it_too(tmp_path):
    task = new_task(tmp_path / "task")
    admit_rollout(task, rollout(task, 0))
    unsafe = rollout(task, 1, sandbox="none", unsafe_no_sandbox=True)
    with pytest.raises(AdmissionRefused, match="ran without isolation"):
        admit_rollout(task, unsafe)
    assert not (unsafe.folder / "admission.json").exists()
    q = admit_rollout(task, unsafe, allow_unsafe_sandbox=True)
    assert q.sandbox == "none"
    event = list(Ledger(task).entries())[-1]
    assert event.details["unsafe_sandbox_allowed"] is True and "WITHOUT a sandbox" in event.reason

    refused = admit(task)
    assert not refused.ok and not (task / "certificate.json").exists()
    assert [(p.kind, p.where) for p in refused.problems] == [("sandbox", f"episodes/{unsafe.episode_id}")]
    assert admit(task, allow_unsafe_sandbox=True).ok


def test_a_crash_between_q_and_its_ledger_event_is_rewritten(dataset):
    result = rollout(dataset, 2)
    stale = result.folder / "admission.json"
    stale.write_text("{}")  # what a crash after writing q but before the ledger event leaves
    q = admit_rollout(dataset, result)
    assert AdmissionRecord.model_validate_json(stale.read_text()) == q


def test_every_admission_model_documents_every_field_and_refusals_survive_pickling():
    import pickle

    from datafarm.admission.admit import AdmitProblem, AdmitReport
    from datafarm.admission.audit import AuditDifference, AuditReport, StateComparison
    from datafarm.admission.certificate import AdmissionCertificate, CertifiedEpisode
    from datafarm.errors import Problem

    for model in (AdmissionCertificate, CertifiedEpisode, AdmitProblem, AdmitReport, AuditDifference, AuditReport,
                  StateComparison):
        assert all((f.description or "").strip() for f in model.model_fields.values()), model.__name__
    refused = AdmissionRefused([Problem("the reviewer rejected the episode")], "episode e: not admitted")
    again = pickle.loads(pickle.dumps(refused))
    assert again.problems == refused.problems and str(again) == str(refused) and again.exit_code == 4
