"""The judge runtime: J evaluated over a recorded trajectory, frozen by hash, and accepted only if it
rejects the harness's canned shortcut trajectories.

    geometry = SceneGeometry.from_grounding(G)
    traj = Trajectory(times=..., control_hz=..., geometry=geometry, objects=..., arms=..., contacts=...)
    verdict = evaluate(J, traj)                                    # JudgeVerdict; .stages are the labels y
    report = accept_judge(J, good, canned_shortcuts(good, G, T), contract=T)
    lock = freeze(J, task / "judge", ledger, contract=T, grounding=G, acceptance=report.ledger_details())
    verdict = judge_frozen(task / "judge", traj, ledger)           # refuses a J that differs from its lock
"""

from datafarm.harness.judge.acceptance import (
    AcceptanceReport,
    ShortcutOutcome,
    accept_judge,
)
from datafarm.harness.judge.evaluate import evaluate, spec_problems
from datafarm.harness.judge.frozen import (
    artifact_sha256,
    freeze,
    freeze_history,
    judge_frozen,
    judged_under,
    load_frozen,
    load_lock,
)
from datafarm.harness.judge.geometry import (
    ObjectShape,
    SceneGeometry,
    TableGeometry,
    object_shape,
)
from datafarm.harness.judge.shortcuts import (
    SHORTCUT_NAMES,
    canned_shortcuts,
    contract_judge,
    goal_object,
)
from datafarm.harness.judge.trajectory import ArmTrack, Contact, ObjectTrack, Trajectory

__all__ = [
    "SHORTCUT_NAMES",
    "AcceptanceReport",
    "ArmTrack",
    "Contact",
    "ObjectShape",
    "ObjectTrack",
    "SceneGeometry",
    "ShortcutOutcome",
    "TableGeometry",
    "Trajectory",
    "accept_judge",
    "artifact_sha256",
    "canned_shortcuts",
    "contract_judge",
    "evaluate",
    "freeze",
    "freeze_history",
    "goal_object",
    "judge_frozen",
    "judged_under",
    "load_frozen",
    "load_lock",
    "object_shape",
    "spec_problems",
]
