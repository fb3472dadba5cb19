"""`datafarm render TASK --episode ID` on a real compiled task (tests.admission.dataset): the episode is
rendered again with the task's R as a new render entry, its previous render, verification and review
are kept in attempts/<id>/rerender/ (recorded, byte for byte), `compile --resume` verifies, reviews and
admits the new render, and an admitted or unknown episode is refused with nothing changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datafarm.admission.admit import admit
from datafarm.artifacts.ledger_entry import LedgerEvent
from datafarm.artifacts.stages import Stage
from datafarm.cli import app
from datafarm.compiler import compile_request
from datafarm.errors import StateError
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.pipeline import RERENDER_LABEL, rerender_episode
from datafarm.renderers.video import read_video
from datafarm.sim.episode_io import read_episode
from datafarm.taskdir import TaskDir
from tests.admission.dataset import SLOW_COMPILE, cameras, episodes

pytestmark = SLOW_COMPILE  # needs the session's compile (tests/admission/conftest.py)

RENDERED = ("obs", "sim", "render.json", "verification.json", "review.json")
"""What a re-render replaces or makes stale in the episode folder."""


def _snapshot(folder: Path) -> dict[str, str]:
    files = [p for name in RENDERED for p in ([folder / name] if (folder / name).is_file() else
                                              sorted((folder / name).rglob("*")) if (folder / name).is_dir() else [])]
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in files if p.is_file()}


def test_a_rerender_keeps_the_old_render_and_resume_admits_the_new_one(compiled, tmp_path: Path) -> None:
    out = tmp_path / "out"
    task = TaskDir(shutil.copytree(compiled.reviewed, out / compiled.reviewed.name, symlinks=True))
    folder = episodes(task.root)[0]
    eid = folder.name
    old = _snapshot(folder)
    assert {"render.json", "verification.json", "review.json"} <= set(old)
    ledger = Ledger(task.ledger)
    before = len(list(ledger.entries()))

    result = CliRunner().invoke(app, ["render", str(task.root), "--episode", eid])
    assert result.exit_code == 0, result.output

    kept = task.attempts_dir / eid / RERENDER_LABEL
    assert {rel: sha256_file(kept / rel) for rel in old} == old  # every old file, byte for byte
    assert not (folder / "verification.json").exists() and not (folder / "review.json").exists()
    steps = read_episode(folder).recording.steps
    for camera in cameras(folder):
        for kind in ("obs", "sim"):
            frames, _ = read_video(folder / kind / f"{camera}.mp4")
            assert len(frames) == steps, f"{kind}/{camera}.mp4"
    new = list(ledger.entries())[before:]
    assert [(e.stage, e.event) for e in new] == [(Stage.render, LedgerEvent.note), (Stage.render, LedgerEvent.render),
                                                 (Stage.render, LedgerEvent.route)]
    assert new[2].route_to == Stage.verify  # reopens verify, review and admit for compile --resume
    assert new[0].details["layers"] == ["render", "verify", "review"] and new[0].details["episode_id"] == eid
    assert set(new[1].outputs) == {f"episodes/{eid}/{rel}" for rel in _snapshot(folder)}
    assert ledger.verify().ok

    resumed = compile_request(compiled.request, output=out, resume=True)
    assert resumed.pipeline.stopped_at is None, resumed.pipeline.stop_reason
    report = admit(task.root, write_certificate=False)
    assert report.ok, report.render()
    assert (folder / "verification.json").is_file() and (folder / "review.json").is_file()

    # now admitted: rendering it again would break the certified dataset, so it is refused
    count = len(list(ledger.entries()))
    with pytest.raises(StateError, match="admitted"):
        rerender_episode(task, eid)
    result = CliRunner().invoke(app, ["render", str(task.root), "--episode", "adm-9999-nothing"])
    assert result.exit_code == StateError.exit_code and "not a live episode" in result.output
    assert eid in result.output  # the live episodes are listed
    assert len(list(ledger.entries())) == count
    assert admit(task.root, write_certificate=False).ok
