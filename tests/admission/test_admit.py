"""`datafarm admit`: a clean dataset is certified (exit 0, certificate.json with the dataset digest);
each tampering is caught and named: a flipped byte in any episode file, a deleted episode, a removed
or edited ledger line, J changed after freezing, an unrecorded episode folder, a skipped seed."""

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
from datafarm.artifacts.io import load_artifact
from datafarm.harness.judge import freeze
from datafarm.harness.rollout import run_rollout
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir
from tests.admission.dataset import admit_rollout, build_dataset, rollout
from tests.harness.test_world_rollout_fixtures import (
    ROLLOUT_OPTIONS,
    place_contract,
    place_grounding,
    place_judge,
)

EPISODE_FILES = ["episode.json", "rollout.json", "contacts.parquet", "data/actions.parquet", "data/states.parquet",
                 "data/joint_occupancy.parquet", "admission.json"]


def _episodes(task):
    return sorted(TaskDir(task).episodes_dir.iterdir())


def _refused(task, **options):
    """Admit `task`, which must fail: no certificate, and the problems as rendered lines."""
    report = admit(task, **options)
    assert not report.ok and report.certificate is None, report.render()
    assert not (task / CERTIFICATE_FILE).exists()
    with pytest.raises(AdmissionRefused):
        report.raise_for_problems()
    return [p.render() for p in report.problems]


def _has(lines, *parts):
    """True when one line contains every part."""
    return any(all(part in line for part in parts) for line in lines)


def _cli():
    app = typer.Typer()
    app.command()(admit_command)
    return app


def test_a_clean_dataset_is_certified_with_its_digest_and_the_ledger_records_it(dataset):
    head = Ledger(dataset).head()
    report = admit(dataset)
    assert report.ok and report.problems == [], report.render()
    certificate = load_artifact(AdmissionCertificate, dataset / CERTIFICATE_FILE)
    assert certificate == report.certificate and certificate.n == 2 == len(certificate.episodes)
    assert certificate.digest_matches() and certificate.admission_seeds_used == 2
    assert certificate.ledger_head_sha256 == head.hash and certificate.ledger_entries == head.seq + 1
    assert certificate.judge_sha256 == load_admission(_episodes(dataset)[0]).judge.judge_sha256
    for folder, item in zip(_episodes(dataset), certificate.episodes):
        assert item.episode_id == folder.name and item.admission_sha256 == sha256_file(folder / "admission.json")
        assert item.files == load_admission(folder).files
    # the certification is the ledger's newest entry, with the certificate's hash
    last = Ledger(dataset).head()
    assert (last.stage.value, last.event.value) == ("admit", "stage_finished") and last.prev_hash == head.hash
    assert last.outputs == {CERTIFICATE_FILE: sha256_file(dataset / CERTIFICATE_FILE)}
    assert Ledger(dataset).verify().ok
    # the digest covers every byte: another dataset of other episodes has another digest
    other = certificate.episodes[0].model_copy(update={"admission_sha256": "0" * 64})
    assert dataset_digest([other, certificate.episodes[1]]) != certificate.dataset_sha256
    # and admitting again is reproducible
    assert admit(dataset).certificate.dataset_sha256 == certificate.dataset_sha256


def test_the_command_exits_0_with_the_digest_and_4_with_every_problem(dataset):
    ok = CliRunner().invoke(_cli(), [str(dataset)])
    assert ok.exit_code == 0, ok.output
    assert "ADMITTED: 2 episodes, dataset sha256" in ok.output
    shutil.rmtree(_episodes(dataset)[1])
    (TaskDir(dataset).judge_dir / "spec.json").write_text("{}")
    bad = CliRunner().invoke(_cli(), [str(dataset), "--check"])
    assert bad.exit_code == 4
    assert "NOT ADMITTED" in bad.output and "[complete]" in bad.output and "[judge]" in bad.output
    as_json = CliRunner().invoke(_cli(), [str(dataset), "--json"])
    assert as_json.exit_code == 4 and json.loads(as_json.output)["ok"] is False


@pytest.mark.parametrize("name", EPISODE_FILES)
def test_one_flipped_byte_in_any_episode_file_is_named(dataset, name):
    folder = _episodes(dataset)[1]
    path = folder / name
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x20
    path.write_bytes(bytes(data))
    lines = _refused(dataset)
    where = f"episodes/{folder.name}/{name}"
    if name == "admission.json":  # q itself: its hash no longer matches the ledger's admission event (or it no longer parses)
        assert _has(lines, "[modified]", where), lines
    else:
        assert _has(lines, "[modified]", where, "differs from q's"), lines
    assert not any(_episodes(dataset)[0].name in line for line in lines), lines  # the other episode is fine


def test_a_deleted_episode_is_named(dataset):
    gone = _episodes(dataset)[0]
    shutil.rmtree(gone)
    lines = _refused(dataset)
    assert _has(lines, "[complete] episodes:", "incomplete: 1 of B's n=2"), lines
    assert _has(lines, "[complete] ledger.jsonl:", f"admits episode {gone.name}, but episodes/{gone.name} is missing"), lines
    assert _has(lines, "[recorded]", f"passed as episode {gone.name}, which has no outcome"), lines


def test_a_removed_ledger_line_is_named(dataset):
    path = Ledger(dataset).path
    lines = path.read_bytes().splitlines(keepends=True)
    del lines[2]  # the rollout of the first episode
    path.write_bytes(b"".join(lines))
    found = _refused(dataset)
    assert _has(found, "[ledger] ledger.jsonl:3", "seq gap"), found
    assert _has(found, "[recorded]", "no rollout entry for episode"), found


def test_an_edited_ledger_line_is_named(dataset):
    path = Ledger(dataset).path
    lines = path.read_bytes().splitlines(keepends=True)
    entry = json.loads(lines[3])
    assert entry["event"] == "admission"
    entry["details"]["seed_index"] = 2
    lines[3] = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    found = _refused(dataset)
    assert _has(found, "[ledger] ledger.jsonl:4 (seq 3)", "hash mismatch"), found


def test_a_judge_changed_after_freezing_is_named(dataset):
    spec_path = TaskDir(dataset).judge_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["time_limit_s"] = 99.0
    spec_path.write_text(json.dumps(spec))
    found = _refused(dataset)
    assert _has(found, "[judge] judge/spec.json", "J changed after it was frozen"), found


def test_a_judge_re_frozen_after_admission_invalidates_every_episode(dataset):
    freeze(place_judge().model_copy(update={"time_limit_s": 25.0}), TaskDir(dataset).judge_dir, Ledger(dataset),
           contract=place_contract(), grounding=place_grounding())
    found = _refused(dataset)
    for folder in _episodes(dataset):
        assert _has(found, "[judge]", f"episodes/{folder.name}:", "a later freeze invalidated it"), found


def test_an_unrecorded_episode_folder_is_named(dataset):
    source = _episodes(dataset)[0]
    extra = TaskDir(dataset).episodes_dir / "adm-0002-20990101t000000-abcdef"
    shutil.copytree(source, extra)
    found = _refused(dataset)
    assert _has(found, "[recorded]", f"episodes/{extra.name}:", "unrecorded episode folder"), found
    assert _has(found, "[complete]", "3 admitted episodes, B asks for n=2"), found


def test_a_partial_folder_a_lost_attempt_and_an_unrecorded_attempt_are_named(dataset):
    dev = run_rollout(dataset, 0, "dev", **ROLLOUT_OPTIONS)  # dev rollouts are kept in attempts/
    assert admit(dataset, write_certificate=False).ok
    shutil.rmtree(dev.folder)
    (TaskDir(dataset).episodes_dir / ".adm-0002-x.partial").mkdir()
    (TaskDir(dataset).attempts_dir / "adm-0002-forged").mkdir()
    found = _refused(dataset)
    assert _has(found, "[complete] episodes/.adm-0002-x.partial", "partial episode folder"), found
    assert _has(found, "[recorded] ledger.jsonl:", f"attempts/{dev.episode_id} is missing"), found
    assert _has(found, "[recorded] attempts/adm-0002-forged", "no ledger entry records this attempt"), found
    assert len(found) == 3, found


@pytest.mark.slow
def test_a_skipped_admission_seed_is_named(tmp_path):
    task = build_dataset(tmp_path / "task", indices=(0, 2))  # seed #1 was never run: a scene picked by hand
    found = _refused(task)
    skipped = ("[seeds] ledger.jsonl: admission seed #1 has no attempt in the ledger although seeds up to #2 "
               "were run: seeds run in order, none skipped")
    assert found == [skipped], found


@pytest.mark.slow
def test_an_unadmitted_episode_and_a_missing_attempt_are_named(dataset):
    pending = rollout(dataset, 2)  # passed J but was never verified, reviewed or admitted
    found = _refused(dataset)
    assert _has(found, "[recorded]", f"episodes/{pending.episode_id}:", "never admitted"), found
    assert _has(found, "[recorded]", f"seed #2 passed as episode {pending.episode_id}, which has no outcome"), found
    admit_rollout(dataset, pending)
    assert _has(_refused(dataset), "[complete]", "3 admitted episodes, B asks for n=2")
