"""`datafarm admit` on a real compiled dataset (tests.admission.dataset): compile certified it and admit
reproduces the certificate (exit 0); each tampering is caught and named with a non-zero exit: one
flipped byte in any kind of episode file, a deleted episode, a removed or edited ledger line, J changed
(or re-frozen) after freezing, an unrecorded episode folder, an unadmitted episode, a skipped seed, a
lost or forged attempt, a changed task artifact."""

from __future__ import annotations

import json
import shutil

import pytest
import typer
from typer.testing import CliRunner

from datafarm.admission.admit import admit
from datafarm.admission.certificate import (
    CERTIFICATE_FILE,
    AdmissionCertificate,
    dataset_digest,
)
from datafarm.admission.commands import admit_command
from datafarm.admission.record import AdmissionRefused, load_admission
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.harness.judge import freeze
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.admission.dataset import (
    SLOW_COMPILE,
    episodes,
    flip_byte,
    passing_admission_rollout,
)

pytestmark = SLOW_COMPILE  # every test here needs the session's compile (tests/admission/conftest.py)

EPISODE_FILES = [
    "data/states.parquet", "data/actions.parquet", "data/joint_occupancy.parquet", "contacts.parquet",
    "obs/front.mp4", "sim/left.mp4", "episode.json", "rollout.json", "render.json", "review.json",
    "verification.json", "admission.json",
]
"""One file of each kind an admitted episode holds (data, contacts k, rendered and sim videos, the
records of every stage, q itself)."""


def _refused(task, **options) -> list[str]:
    """Admit `task`, which must fail: no certificate written, exit 4 from the command, and the
    problems as rendered lines (the command prints the same lines)."""
    (task / CERTIFICATE_FILE).unlink(missing_ok=True)
    report = admit(task, write_certificate=False, **options)
    assert not report.ok and report.certificate is None, report.render()
    with pytest.raises(AdmissionRefused):
        report.raise_for_problems()
    lines = [p.render() for p in report.problems]
    result = CliRunner().invoke(_cli(), [str(task), *(["--allow-unsafe-sandbox"] if options.get("allow_unsafe_sandbox") else [])])
    assert result.exit_code == 4, result.output
    assert result.output.startswith("NOT ADMITTED") and all(line in result.output for line in lines), result.output
    assert not (task / CERTIFICATE_FILE).exists()
    return lines


def _has(lines, *parts) -> bool:
    """True when one line contains every part."""
    return any(all(part in line for part in parts) for line in lines)


def _cli():
    app = typer.Typer()
    app.command()(admit_command)
    return app


def _ledger_lines(task) -> list[dict]:
    return [json.loads(line) for line in Ledger(task).path.read_bytes().splitlines()]


def test_compile_certified_the_dataset_and_admit_reproduces_the_certificate(dataset):
    n = load_artifact(BatchConfig, TaskDir(dataset).batch).n
    compiled = load_artifact(AdmissionCertificate, dataset / CERTIFICATE_FILE)
    folders = episodes(dataset)
    assert compiled.n == n == len(folders) == len(compiled.episodes) and compiled.digest_matches()
    head = Ledger(dataset).head()
    result = CliRunner().invoke(_cli(), [str(dataset)])
    assert result.exit_code == 0, result.output
    certificate = load_artifact(AdmissionCertificate, dataset / CERTIFICATE_FILE)
    assert result.output.startswith(f"ADMITTED: {n} episodes, dataset sha256 {certificate.dataset_sha256}")
    assert certificate.dataset_sha256 == compiled.dataset_sha256  # nothing changed: the same digest
    assert certificate.admission_seeds_used == compiled.admission_seeds_used >= n
    assert certificate.ledger_head_sha256 == head.hash and certificate.ledger_entries == head.seq + 1
    for folder, item in zip(folders, certificate.episodes):
        q = load_admission(folder)
        assert item.episode_id == folder.name and item.admission_sha256 == sha256_file(folder / "admission.json")
        assert item.files == q.files and certificate.judge_sha256 == q.judge.judge_sha256
        assert certificate.verifier_spec_sha256 == q.verifier.spec_sha256
        assert (certificate.k_version, certificate.k_sha256) == (q.k_version, q.k_sha256)
    # the certification is the ledger's newest entry, with the certificate's hash
    last = Ledger(dataset).head()
    assert (last.stage.value, last.event.value) == ("admit", "stage_finished") and last.prev_hash == head.hash
    assert last.outputs == {CERTIFICATE_FILE: sha256_file(dataset / CERTIFICATE_FILE)}
    assert Ledger(dataset).verify().ok
    # the digest covers every byte: one other file hash gives another digest
    first = certificate.episodes[0]
    other = first.model_copy(update={"files": {**first.files, "episode.json": "0" * 64}})
    assert dataset_digest([other, *certificate.episodes[1:]]) != certificate.dataset_sha256
    as_json = CliRunner().invoke(_cli(), [str(dataset), "--check", "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output)["certified_episodes"] == n


@pytest.mark.parametrize("name", EPISODE_FILES)
def test_one_flipped_byte_in_any_episode_file_is_named(dataset, name):
    clean, folder = episodes(dataset)[:2]
    flip_byte(folder / name)
    lines = _refused(dataset)
    where = f"episodes/{folder.name}/{name}"
    if name == "admission.json":  # q itself: its hash no longer matches the ledger's admission event (or it no longer parses)
        assert _has(lines, "[modified]", where), lines
    else:
        assert _has(lines, "[modified]", where, "differs from q's"), lines
    assert not any(clean.name in line for line in lines), lines  # the other episode is fine


def test_a_verifier_crop_changed_or_added_is_named(dataset):
    folder = episodes(dataset)[0]
    crop = min((folder / "verifier").glob("*.png"))
    flip_byte(crop, at=0.9)
    (folder / "verifier" / "extra.png").write_bytes(crop.read_bytes())
    lines = _refused(dataset)
    assert _has(lines, "[modified]", f"episodes/{folder.name}/verifier/{crop.name}", "differs from q's"), lines
    assert _has(lines, "[modified]", f"episodes/{folder.name}/verifier/extra.png", "not listed in q"), lines


def test_a_deleted_episode_is_named(dataset):
    n = load_artifact(BatchConfig, TaskDir(dataset).batch).n
    gone = episodes(dataset)[0]
    shutil.rmtree(gone)
    lines = _refused(dataset)
    assert _has(lines, "[complete] episodes:", f"incomplete: {n - 1} of B's n={n}"), lines
    assert _has(lines, "[complete] ledger.jsonl:", f"admits episode {gone.name}, but episodes/{gone.name} is missing"), lines
    assert _has(lines, "[recorded]", f"passed as episode {gone.name}, which has no outcome"), lines


def test_a_removed_ledger_line_is_named(dataset):
    first = episodes(dataset)[0].name
    entries = _ledger_lines(dataset)
    [index] = [i for i, e in enumerate(entries) if e["event"] == "rollout" and e["details"].get("episode_id") == first]
    raw = Ledger(dataset).path.read_bytes().splitlines(keepends=True)
    del raw[index]  # the rollout that produced the first episode
    Ledger(dataset).path.write_bytes(b"".join(raw))
    lines = _refused(dataset)
    assert _has(lines, f"[ledger] ledger.jsonl:{index + 1}", "seq gap"), lines
    assert _has(lines, "[recorded]", f"no rollout entry for episode {first}"), lines


def test_an_edited_ledger_line_is_named(dataset):
    entries = _ledger_lines(dataset)
    index = next(i for i, e in enumerate(entries) if e["event"] == "admission")
    entries[index]["details"]["seed_index"] += 7
    raw = Ledger(dataset).path.read_bytes().splitlines(keepends=True)
    raw[index] = json.dumps(entries[index], sort_keys=True, separators=(",", ":")).encode() + b"\n"
    Ledger(dataset).path.write_bytes(b"".join(raw))
    lines = _refused(dataset)
    assert _has(lines, f"[ledger] ledger.jsonl:{index + 1} (seq {entries[index]['seq']})", "hash mismatch"), lines


def test_a_judge_changed_after_freezing_is_named(dataset):
    spec_path = TaskDir(dataset).judge_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["time_limit_s"] += 1.0
    spec_path.write_text(json.dumps(spec))
    lines = _refused(dataset)
    assert _has(lines, "[judge] judge/spec.json", "J changed after it was frozen"), lines


def test_a_judge_re_frozen_after_admission_invalidates_every_episode(dataset):
    paths = TaskDir(dataset)
    spec = load_artifact(JudgeSpec, paths.judge_dir / "spec.json")
    freeze(spec.model_copy(update={"time_limit_s": spec.time_limit_s + 5.0}), paths.judge_dir, Ledger(dataset),
           contract=load_artifact(TaskContract, paths.contract), grounding=load_artifact(Grounding, paths.grounding))
    lines = _refused(dataset)
    for folder in episodes(dataset):
        assert _has(lines, "[judge]", f"episodes/{folder.name}:", "a later freeze invalidated it"), lines


def test_an_unrecorded_episode_folder_is_named(dataset):
    n = load_artifact(BatchConfig, TaskDir(dataset).batch).n
    source = episodes(dataset)[0]
    extra = TaskDir(dataset).episodes_dir / "adm-0099-20990101t000000-abcdef"
    shutil.copytree(source, extra)
    lines = _refused(dataset)
    assert _has(lines, "[recorded]", f"episodes/{extra.name}:", "unrecorded episode folder"), lines
    assert _has(lines, "[complete]", f"{n + 1} admitted episodes, B asks for n={n}"), lines


def test_a_partial_folder_a_lost_attempt_and_a_forged_attempt_are_named(dataset):
    paths = TaskDir(dataset)
    kept = sorted(p for p in paths.attempts_dir.iterdir() if p.is_dir())
    assert kept, "the compile keeps its dev rollouts in attempts/"
    shutil.rmtree(kept[0])
    (paths.episodes_dir / ".adm-0099-x.partial").mkdir()
    (paths.attempts_dir / "adm-0099-forged").mkdir()
    lines = _refused(dataset)
    assert _has(lines, "[complete] episodes/.adm-0099-x.partial", "partial episode folder"), lines
    assert _has(lines, "[recorded] ledger.jsonl:", f"attempts/{kept[0].name} is missing"), lines
    assert _has(lines, "[recorded] attempts/adm-0099-forged", "no ledger entry records this attempt"), lines
    assert len(lines) == 3, lines


@pytest.mark.parametrize("name", ["batch.yaml", "grounding.json", "render_contract.yaml", "expert/controller.py",
                                  "verifier/spec.json", "transcripts/reviewer/0001.json"])
def test_a_task_file_changed_after_the_ledger_recorded_it_is_named(dataset, name):
    path = dataset / name
    path.write_bytes(path.read_bytes() + b"\n")
    lines = _refused(dataset)
    assert _has(lines, f"[modified] {name}:", "changed after the ledger recorded it"), lines


def test_an_unadmitted_episode_and_a_skipped_seed_are_named(dataset):
    used = load_artifact(AdmissionCertificate, dataset / CERTIFICATE_FILE).admission_seeds_used
    count = load_artifact(BatchConfig, TaskDir(dataset).batch).admission_seed_count
    pending = passing_admission_rollout(dataset, range(used + 1, count))  # seed #used skipped: a scene picked by hand
    index = pending.admission_index
    lines = _refused(dataset)
    assert _has(lines, "[seeds] ledger.jsonl:", f"admission seed #{used} has no attempt in the ledger although seeds up "
                f"to #{index} were run"), lines
    assert _has(lines, "[recorded]", f"episodes/{pending.episode_id}:", "never admitted"), lines
    assert _has(lines, "[recorded]", f"seed #{index} passed as episode {pending.episode_id}, which has no outcome"), lines
