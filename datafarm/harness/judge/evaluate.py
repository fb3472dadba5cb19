"""Judge a trajectory with a spec J: ordered stages with hold times and time limits, the success
condition at the end, and the global invariants. The verdict's stage timings are the task labels y.

Stage semantics. Stage k begins when stage k-1 completes (stage 0 at t = 0) and completes at the
first step where its condition has held continuously for `hold_s`, counting from the stage's start
at the earliest, and no later than `time_limit_s` after its start. A stage may complete at the very
step its predecessor did (when its condition already holds and `hold_s` is 0). The success condition
must hold at the last step; `contact_count` without a window counts from the last stage's start there.

`stage_skipped` fires when a later stage's condition (evaluated from the episode start) completes,
hold included, strictly before an earlier stage has. `success_too_brief` fires when success holds at
the end but for less than `min_hold_s` (held time = last step's time minus the run's first step's).
"""

from __future__ import annotations

import numpy as np

from datafarm.artifacts.judge import (
    JudgeSpec,
    JudgeStage,
    JudgeVerdict,
    StageTiming,
    SuccessTooBrief,
    Violation,
)
from datafarm.errors import InputError, Problem
from datafarm.harness.judge.invariants import CHECKS
from datafarm.harness.judge.predicates import Conditions, describe, held_for
from datafarm.harness.judge.scene import TIME_EPS, Scene, UnknownBody
from datafarm.harness.judge.trajectory import Trajectory

MAX_REASONS = 3
"""How many violations the reason spells out (the verdict lists them all)."""


def spec_problems(spec: JudgeSpec, traj: Trajectory, conds: Conditions | None = None) -> list[Problem]:
    """What in `spec` cannot be evaluated on this scene (unknown bodies, parts, joints, readings)."""
    conds = conds if conds is not None else Conditions(Scene(traj))
    problems = []
    where = [(f"stages[{i}].condition", s.condition) for i, s in enumerate(spec.stages)] + [("success", spec.success)]
    for field, cond in where:
        try:
            conds.evaluate(cond)
        except UnknownBody as e:
            problems.append(Problem(str(e), field=field, expected="body references that name G's objects, parts, arms, `robot` or `table`"))
    return problems


def evaluate(spec: JudgeSpec, traj: Trajectory) -> JudgeVerdict:
    """J's verdict on `traj`. Raises InputError when J names what the scene does not have."""
    scene = Scene(traj)
    conds = Conditions(scene)
    problems = spec_problems(spec, traj, conds)
    if problems:
        raise InputError(problems)
    digest = spec.sha256()
    broken = _non_finite(traj)
    if broken:
        first = spec.stages[0].name
        return JudgeVerdict(passed=False, stage_reached=first, reason=f"the recording is unusable: {broken}",
                            stages=[StageTiming(name=first, start_s=0.0, end_s=None)], judge_sha256=digest)
    times = traj.times
    invariants = {inv.shortcut: inv for inv in spec.invariants}
    violations: list[Violation] = []
    for name, inv in invariants.items():
        check = CHECKS.get(name)
        if check is not None:
            violations.extend(check(scene, inv))

    timings, ends, failure = _run_stages(spec, conds, times)
    last_start = traj.index_at(timings[-1].start_s)
    if "stage_skipped" in invariants:
        violations.extend(_skips(spec, conds, times, ends))

    success = conds.evaluate(spec.success, last_start)
    success_failure = None
    held_end = 0.0
    if success[-1]:
        held_end = float(held_for(success, times)[-1])
        brief = invariants.get("success_too_brief")
        if isinstance(brief, SuccessTooBrief) and held_end < brief.min_hold_s - TIME_EPS:
            began = float(times[-1] - held_end)
            violations.append(Violation(shortcut="success_too_brief", time_s=max(0.0, began), detail=(
                f"success held {held_end:.2f} s at the end (from {began:.2f} s), less than {brief.min_hold_s:.2f} s")))
    else:
        false_now = [describe(c) for c in getattr(spec.success, "all", [spec.success])
                     if not conds.evaluate(c, last_start)[-1]]
        success_failure = (f"the success condition does not hold at the end ({traj.duration:.2f} s): "
                           f"false: {'; '.join(false_now)}")

    too_long = None
    if traj.duration > spec.time_limit_s + TIME_EPS:
        too_long = f"the episode lasted {traj.duration:.2f} s, longer than the {spec.time_limit_s:.2f} s limit"

    violations.sort(key=lambda v: v.time_s)
    passed = not violations and failure is None and success_failure is None and too_long is None
    if passed:
        done = ", ".join(f"{t.name} at {t.end_s:.2f} s" for t in timings)
        reason = f"passed: all {len(timings)} stages completed ({done}); success held {held_end:.2f} s at the end"
    else:
        parts = [f"{v.shortcut} at {v.time_s:.2f} s: {v.detail}" for v in violations[:MAX_REASONS]]
        if len(violations) > MAX_REASONS:
            parts.append(f"and {len(violations) - MAX_REASONS} more violations")
        parts += [text for text in (failure, success_failure, too_long) if text]
        reason = "; ".join(parts)
    return JudgeVerdict(passed=passed, stage_reached=timings[-1].name, reason=reason, stages=timings,
                        violations=violations, judge_sha256=digest)


def _run_stages(spec: JudgeSpec, conds: Conditions, times: np.ndarray) -> tuple[list[StageTiming], list[int], str | None]:
    """Walk the stages in order: their timings, completion step indices, and why the walk stopped (or None)."""
    timings: list[StageTiming] = []
    ends: list[int] = []
    start = 0
    n = len(spec.stages)
    for k, stage in enumerate(spec.stages):
        mask = conds.evaluate(stage.condition, start)
        held = held_for(mask, times, since=start)
        ok = held >= stage.hold_s - TIME_EPS
        ok[:start] = False
        if stage.time_limit_s is not None:
            ok &= times - times[start] <= stage.time_limit_s + TIME_EPS
        done = np.flatnonzero(ok)
        start_s = float(times[start])
        if not done.size:
            timings.append(StageTiming(name=stage.name, start_s=max(0.0, start_s), end_s=None))
            return timings, ends, _why_not(stage, k, n, conds, held, start, times)
        end = int(done[0])
        timings.append(StageTiming(name=stage.name, start_s=max(0.0, start_s), end_s=max(0.0, float(times[end]))))
        ends.append(end)
        start = end
    return timings, ends, None


def _why_not(stage: JudgeStage, k: int, n: int, conds: Conditions, held: np.ndarray, start: int, times: np.ndarray) -> str:
    """Why stage `stage` (index k of n) did not complete after it began at step `start`."""
    head = f"stage '{stage.name}' ({k + 1} of {n}) did not complete"
    best = float(held[start:].max())
    if best < 0:
        missing = conds.never_held(stage.condition, start, len(times) - 1)
        why = f"its condition never held after the stage began at {times[start]:.2f} s"
        return f"{head}: {why}" + (f"; never true: {'; '.join(missing)}" if missing else "")
    if best >= stage.hold_s - TIME_EPS and stage.time_limit_s is not None:
        return f"{head} within its {stage.time_limit_s:.2f} s limit (it began at {times[start]:.2f} s)"
    return f"{head}: its condition held at most {best:.2f} s at a time, it must hold {stage.hold_s:.2f} s"


def _skips(spec: JudgeSpec, conds: Conditions, times: np.ndarray, ends: list[int]) -> list[Violation]:
    """Later stages whose condition completed before an earlier stage had."""
    out = []
    never = len(times)
    completed = ends + [never] * (len(spec.stages) - len(ends))
    for j, stage in enumerate(spec.stages[1:], start=1):
        mask = conds.evaluate(stage.condition, 0)
        ok = np.flatnonzero(held_for(mask, times) >= stage.hold_s - TIME_EPS)
        if not ok.size:
            continue
        reached = int(ok[0])
        k = next((i for i in range(j) if completed[i] > reached), None)
        if k is None:
            continue
        earlier = spec.stages[k].name
        when = "never completed" if completed[k] == never else f"completed at {times[completed[k]]:.2f} s"
        out.append(Violation(shortcut="stage_skipped", time_s=max(0.0, float(times[reached])), detail=(
            f"stage '{stage.name}' was reached at {times[reached]:.2f} s before stage '{earlier}' completed "
            f"('{earlier}' {when})")))
    return out


def _non_finite(traj: Trajectory) -> str | None:
    """Where the recording holds NaN or infinity, or None when it is all finite."""
    arrays: dict[str, np.ndarray] = {"times": traj.times}
    for name, t in traj.objects.items():
        arrays.update({f"{name} pose": t.pose, f"{name} linear velocity": t.linear_velocity,
                       f"{name} angular velocity": t.angular_velocity})
    for name, a in traj.arms.items():
        arrays.update({f"{name} joint positions": a.positions, f"{name} joint velocities": a.velocities})
    arrays.update({f"scale {k}": v for k, v in traj.scale_readings.items()})
    arrays.update({f"joint {k}": v for k, v in traj.joint_values.items()})
    for name, arr in arrays.items():
        bad = ~np.isfinite(arr)
        if bad.any():
            row = int(np.flatnonzero(bad.reshape(len(arr), -1).any(axis=1))[0])
            return f"non-finite {name} at row {row}"
    return None
