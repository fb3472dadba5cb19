"""A small real dataset for the admission tests: the pick-and-place task folder of
tests/harness/test_world_rollout_fixtures.py (G, T, S, B with n=2, J frozen in the ledger, the
admission secret, the scripted expert), its capability.lock, and real admission rollouts run by the
harness in the bwrap sandbox, admitted with `write_admission`.

The verifier (issue 8, items 1-2) and the reviewer (item 3) are not built yet. Their results are
therefore TEST INPUTS, labelled as such wherever they are written: a placeholder
`verifier/spec.json` and `verifier/calibration.json`, verifier results with every check passing,
and a review accepting the episode. They are well-formed values of the real schemas, so admission
treats them exactly as it will treat the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import datafarm
from datafarm import capability
from datafarm.admission.record import write_admission
from datafarm.artifacts.admission import (
    CheckResult,
    Evidence,
    ReviewClaim,
    ReviewVerdict,
    VerifierCheck,
    VerifierResults,
)
from datafarm.harness.judge import load_lock
from datafarm.harness.rollout import RolloutResult, run_rollout
from datafarm.hashing import sha256_file
from datafarm.taskdir import TaskDir
from tests.harness.test_world_rollout_fixtures import ROLLOUT_OPTIONS, make_task

TEST_INPUT = "TEST INPUT (tests/admission): the verifier and reviewer are not built yet"
"""The label every synthetic verifier and reviewer value carries."""

ARM_CHECKS = [c for c in VerifierCheck if c is not VerifierCheck.actions]
"""The checks of an arm-track verifier spec."""


def write_test_verifier_files(task: Path) -> None:
    """Placeholder `verifier/spec.json` and `verifier/calibration.json`, labelled as test inputs."""
    folder = TaskDir(task).verifier_dir
    folder.mkdir(exist_ok=True)
    (folder / "spec.json").write_text(json.dumps({"test_input": TEST_INPUT, "checks": [c.value for c in ARM_CHECKS]}))
    (folder / "calibration.json").write_text(json.dumps({"test_input": TEST_INPUT, "all_corruptions_caught": True}))


def synthetic_verifier_results(task: Path, **failing: float) -> VerifierResults:
    """TEST INPUT: verifier results under the task's placeholder spec, every check passing except
    those named in `failing` (check name -> metric, above the threshold 1.0)."""
    folder = TaskDir(task).verifier_dir
    return VerifierResults(
        spec_sha256=sha256_file(folder / "spec.json"),
        calibration_sha256=sha256_file(folder / "calibration.json"),
        checks=[CheckResult(check=c, passed=c.value not in failing, metric=failing.get(c.value, 0.0), threshold=1.0,
                            evidence=[Evidence(frames=[0], note=TEST_INPUT)],
                            route_to="render" if c.value in failing else None)
                for c in ARM_CHECKS])


def synthetic_review(accepted: bool = True) -> ReviewVerdict:
    """TEST INPUT: the reviewer's verdict, accepting (or rejecting) the episode."""
    return ReviewVerdict(
        accepted=accepted,
        claims=[ReviewClaim(claim=f"{TEST_INPUT}: the block rests on the pad in the last frames of every view",
                            holds=accepted, evidence=[Evidence(frames=[0, 10], note=TEST_INPUT)])],
        provider="test-input", model="synthetic-review", route_to=None if accepted else "render")


def write_capability_lock(task: Path) -> None:
    """capability.lock as compile writes it: the latest released K."""
    lock = capability.load().lock(datafarm.__version__)
    TaskDir(task).capability_lock.write_text(lock.model_dump_json(indent=2) + "\n")


def new_task(root: Path) -> Path:
    """A task folder ready for admission rollouts (no episode yet)."""
    make_task(root)
    write_capability_lock(root)
    write_test_verifier_files(root)
    return root


def rollout(task: Path, index: int, **options) -> RolloutResult:
    """A real admission rollout on seed `index` (it must pass)."""
    result = run_rollout(task, kind="admission", index=index, **{**ROLLOUT_OPTIONS, **options})
    assert result.passed and result.in_episodes, result.summary.reason
    return result


def admit_rollout(task: Path, result: RolloutResult, **options):
    """Write q for a passing rollout with the test verifier results and review."""
    return write_admission(task, result.episode_id, result.verdict, load_lock(TaskDir(task).judge_dir),
                           synthetic_verifier_results(task), synthetic_review(), **options)


def build_dataset(root: Path, indices: tuple[int, ...] = (0, 1)) -> Path:
    """A complete dataset: one admitted episode per admission seed index in `indices`."""
    new_task(root)
    for index in indices:
        admit_rollout(root, rollout(root, index))
    return root
