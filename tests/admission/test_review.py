"""The builtin reviewer (stage 9) on a real compiled dataset (tests.admission.dataset).

Every admitted episode has a review, written before its admission, whose claims each carry evidence of
the reviewer's own: decoded keyframes of every camera compared with the real reference frames and with
the sim-state summary, fetched through its own tools (never the verifier's crops or numbers). A visibly
wrong render of a real episode (its objects recoloured in the obs/ videos, re-encoded with
datafarm.renderers.video) is rejected by the builtin reviewer and routed back to render."""

from __future__ import annotations

from pathlib import Path

import datafarm.agents.builtin  # noqa: F401  (registers the builtin roles, as compile does)
from datafarm.admission.record import load_admission
from datafarm.agents import ReviewMaterial, TaskAgents, review_task
from datafarm.agents.builtin.reviewer import state_summary
from datafarm.artifacts.admission import ReviewVerdict
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.ledger_entry import LedgerEvent
from datafarm.artifacts.render_contract import RenderContract
from datafarm.artifacts.stages import Stage
from datafarm.intake import check_request
from datafarm.ledger import Ledger
from datafarm.renderers.video import read_video
from datafarm.taskdir import TaskDir
from tests.admission.dataset import SLOW_COMPILE, cameras, episodes, recolour_objects

pytestmark = SLOW_COMPILE  # every test here needs the session's compile (tests/admission/conftest.py)

CLAIMS = ("frames", "views", "background", "appearance", "motion")
"""The builtin reviewer's claims, in its order (each claim's text starts with its name)."""
REVIEWER_TOOLS = {"sim_state_summary", "fetch_rendered_frame", "fetch_reference_frame", "pixel_colour",
                  "region_stats", "find_colour", "write_verdict"}
"""Every tool the reviewer role has: none reads the verifier's results, J or the author's transcript."""


def _claim(verdict: ReviewVerdict, name: str):
    [claim] = [c for c in verdict.claims if c.claim.startswith(f"{name}:")]
    return claim


def _conversations(task) -> dict[str, list]:
    """Episode id -> the reviewer's ledger entries (LLM calls) that led to its review event."""
    out: dict[str, list] = {}
    calls: list = []
    for entry in Ledger(task).entries():
        if entry.actor.role == "reviewer":
            calls.append(entry)
        elif entry.event == LedgerEvent.review:
            out[entry.details["episode_id"]] = calls
            calls = []
    return out


def test_every_admitted_episode_has_a_review_with_evidence_of_its_own(pristine):
    conversations = _conversations(pristine)
    entries = list(Ledger(pristine).entries())
    for folder in episodes(pristine):
        verdict = load_artifact(ReviewVerdict, folder / "review.json")
        assert verdict == load_admission(folder).review
        assert verdict.accepted and verdict.route_to is None and (verdict.provider, verdict.model) == ("builtin", "builtin")
        assert [c.claim.partition(":")[0] for c in verdict.claims] == list(CLAIMS)
        views = cameras(folder)
        frames = len(read_video(folder / "obs" / f"{views[0]}.mp4")[0])
        for claim in verdict.claims:
            assert claim.holds and {e.camera for e in claim.evidence} == set(views), claim
            for evidence in claim.evidence:
                assert evidence.note and evidence.frames and all(0 <= f < frames for f in evidence.frames), evidence
                assert not evidence.crops  # its own looking, not the verifier's crops
                assert "verifier" not in evidence.note.lower()
        # keyframes compared with the real reference frames ...
        for name in ("views", "background"):
            assert all("reference frames" in e.note for e in _claim(verdict, name).evidence), name
        assert all("real colour" in e.note and "(clip frame" in e.note for e in _claim(verdict, "appearance").evidence)
        # ... and with the sim-state summary: each object where the sim puts it, moved as far as the sim moved it
        motion = _claim(verdict, "motion").evidence
        assert all("sim" in e.note for e in motion) and any("moved" in e.note for e in motion)
        # it got them through its own tools: the summary, rendered frames and real reference frames
        calls = conversations[folder.name]
        used = [tool for entry in calls for tool in entry.details.get("tool_calls", [])]
        assert {"sim_state_summary", "fetch_rendered_frame", "fetch_reference_frame", "write_verdict"} <= set(used)
        assert set(used) <= REVIEWER_TOOLS and used.count("fetch_rendered_frame") >= len(views) * 2
        assert {(e.actor.provider, e.stage) for e in calls} == {("builtin", Stage.review)}
        # reviewed before it was admitted
        order = [e.event for e in entries if e.details.get("episode_id") == folder.name]
        assert order.index(LedgerEvent.review) < order.index(LedgerEvent.admission)


def test_a_visibly_wrong_render_is_rejected_by_the_builtin_reviewer(dataset):
    folder = episodes(dataset)[0]
    paths = TaskDir(dataset)
    recolour_objects(folder)
    (folder / "review.json").unlink()  # a fresh review of the changed render
    request, _ = check_request(paths.request)
    references = {c.camera: list(c.frames) for c in load_artifact(RenderContract, paths.render_contract).cameras}
    summary = state_summary(folder, load_artifact(Grounding, paths.grounding), reference_frames=references)
    material = ReviewMaterial(Path("episodes") / folder.name, summary, references)
    TaskAgents.open(request, paths).reviewer(material).run(review_task())
    verdict = load_artifact(ReviewVerdict, folder / "review.json")
    assert not verdict.accepted and verdict.route_to == Stage.render
    appearance = _claim(verdict, "appearance")
    assert not appearance.holds and any("real colour" in e.note for e in appearance.evidence), appearance
    for name in ("frames", "views", "background"):  # it pinpoints the defect: the rest still holds
        assert _claim(verdict, name).holds, (name, [e.note for e in _claim(verdict, name).evidence])
    last = [e for e in Ledger(dataset).entries() if e.actor.role == "reviewer"][-1]
    assert f"episodes/{folder.name}/review.json" in last.outputs
