"""Judge acceptance (DESIGN stage 4): a new J is accepted only if it is well-formed for the scene,
passes a trajectory that does the task properly, and rejects every canned shortcut trajectory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.contract import TaskContract, judge_gaps
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.errors import InputError
from datafarm.harness.judge.evaluate import evaluate, spec_problems
from datafarm.harness.judge.trajectory import Trajectory


class ShortcutOutcome(Artifact):
    """How the judge treated one canned shortcut trajectory."""

    name: str
    """Shortcut name (`teleport`, `stage_skipped`, `success_too_brief`, `penetration`)."""
    rejected: bool
    """True when the judge failed it, as it must."""
    stage_reached: str
    """The furthest stage the judge saw it enter."""
    reason: str
    """The judge's reason (why it failed it, or its pass summary when it escaped)."""
    violations: list[str] = Field(default_factory=list)
    """Shortcuts the judge's invariants saw in it."""


class AcceptanceReport(Artifact):
    """Whether a judge J is fit to freeze, and the evidence."""

    accepted: bool
    """True when J is well-formed, passes the good trajectory and rejects every shortcut."""
    judge_sha256: Sha256Hex
    """Hash of the J examined."""
    good_passed: bool
    """Whether J passed the good trajectory."""
    good_reason: str
    """J's reason on the good trajectory."""
    shortcuts: list[ShortcutOutcome]
    """One outcome per canned shortcut."""
    escaped: list[str]
    """Names of the shortcuts J let pass."""
    problems: list[str]
    """What makes J ill-formed: names it cannot resolve, parts of T it leaves out."""
    reason: str
    """One line: accepted, or why not."""

    def ledger_details(self) -> dict[str, Any]:
        """A compact JSON form for the ledger's `freeze`/`rejection` event details."""
        return {
            "accepted": self.accepted,
            "good_passed": self.good_passed,
            "rejected": [s.name for s in self.shortcuts if s.rejected],
            "escaped": self.escaped,
            "problems": self.problems,
        }


def accept_judge(
    spec: JudgeSpec,
    good: Trajectory,
    shortcuts: Sequence[tuple[str, Trajectory]],
    contract: TaskContract | None = None,
) -> AcceptanceReport:
    """Examine J: well-formed (and, given T, covering T's stages and forbidden shortcuts), passing
    `good`, rejecting every trajectory of `shortcuts` (from `canned_shortcuts`)."""
    digest = spec.sha256()
    unresolved = [p.render() for p in spec_problems(spec, good)]
    if unresolved:
        return _ill_formed(digest, unresolved)
    problems = judge_gaps(contract, spec) if contract is not None else []
    if not shortcuts:
        problems.append("no shortcut trajectories to test the judge on")
    try:
        good_verdict = evaluate(spec, good)
        outcomes = []
        for name, traj in shortcuts:
            verdict = evaluate(spec, traj)
            outcomes.append(ShortcutOutcome(
                name=name, rejected=not verdict.passed, stage_reached=verdict.stage_reached, reason=verdict.reason,
                violations=sorted({v.shortcut for v in verdict.violations})))
    except InputError as e:  # a shortcut's scene lacks something J names
        return _ill_formed(digest, [*problems, str(e)])
    escaped = [o.name for o in outcomes if not o.rejected]
    accepted = good_verdict.passed and not escaped and not problems
    if accepted:
        reason = f"accepted: passes the good trajectory and rejects all {len(outcomes)} shortcuts"
    else:
        why = []
        if not good_verdict.passed:
            why.append(f"fails the good trajectory ({good_verdict.reason})")
        if escaped:
            why.append(f"lets through the shortcut(s) {', '.join(escaped)}")
        why += problems
        reason = "refused: " + "; ".join(why)
    return AcceptanceReport(accepted=accepted, judge_sha256=digest, good_passed=good_verdict.passed,
                            good_reason=good_verdict.reason, shortcuts=outcomes, escaped=escaped, problems=problems,
                            reason=reason)


def _ill_formed(digest: str, problems: list[str]) -> AcceptanceReport:
    return AcceptanceReport(accepted=False, judge_sha256=digest, good_passed=False, good_reason="not evaluated",
                            shortcuts=[], escaped=[], problems=problems, reason="ill-formed: " + "; ".join(problems))
