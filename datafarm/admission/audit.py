"""`datafarm audit TASK_DIR`: re-run a task's admission under its pinned K and report every difference.

1. K: refuses (IntegrityError) unless the installed bundle of the version in `capability.lock`
   hashes to the lock's sha256 (re-running under another K proves nothing).
2. J: refuses unless `judge/spec.json` hashes to its lock and that lock is the ledger's latest freeze.
3. Re-judge: every admitted episode's stored trajectory (its Parquet files, read back) is judged
   again with the frozen J; the verdict, stage times (labels y) and violations must equal q's.
4. Re-simulate: a sample of the admitted episodes (all by default) is run again from its admission
   seed: z drawn again from the task secret and compared with the stored z (equal up to Z_TOLERANCE),
   a fresh world of the stored z, the expert run once in its sandbox, recorded in a temporary folder
   (never in the task folder). The
   states, actions, contacts and joint occupancy must equal the stored ones (SAPIEN on the CPU is
   deterministic: bit-identical, so the default tolerance is 0); the fresh recording is judged too.
5. Re-verify: the verifier (`datafarm.verifiers.reverify`) re-run on every admitted episode's stored
   videos under the task's calibrated spec; its checks, pass/fail and metrics must equal q's. A task
   whose episodes were admitted under a verifier spec that is now missing is a difference (nothing
   can be re-verified), as is a verifier that cannot run on a stored video.

The outcome is appended to the ledger (stage audit, event check) unless `record=False`.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from pydantic import AwareDatetime, Field

from datafarm.admission.files import ADMISSION_FILE
from datafarm.admission.ledger_view import LedgerView
from datafarm.admission.record import VERIFIER_SPEC, load_capability_lock
from datafarm.admission.secret import read_secret
from datafarm.artifacts.admission import AdmissionRecord, VerifierResults
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.io import load_artifact
from datafarm.artifacts.judge import JudgeSpec, JudgeVerdict
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.sampler import Variation
from datafarm.artifacts.stages import Stage
from datafarm.capability import bundle as k_bundle
from datafarm.capability.models import CapabilityLock
from datafarm.errors import DatafarmError, InputError, IntegrityError, input_error
from datafarm.harness import sandbox as sandbox_registry
from datafarm.harness.judge import evaluate
from datafarm.harness.judge.from_recording import (
    ArmLimits,
    grounding_limits,
    robot_limits,
    trajectory_from_episode,
    trajectory_from_recording,
)
from datafarm.harness.judge.frozen import load_frozen
from datafarm.harness.rollout import RolloutTask
from datafarm.harness.sandbox import SandboxLimits, SandboxProvider
from datafarm.harness.seeds import admission_seed
from datafarm.harness.server import RolloutLimits, run_expert
from datafarm.harness.world_session import WorldSession
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.sim.episode_io import make_record, read_episode, write_episode
from datafarm.sim.recording import Recording
from datafarm.sim.world import WorldSettings, build_world, sample_variation
from datafarm.taskdir import TaskDir

AuditCheck = Literal["episode", "rejudge", "resimulate", "reverify"]
"""Which step of the audit found a difference."""

RECORDING_ARRAYS: tuple[str, ...] = (
    "joint_targets", "gripper_targets", "joint_positions", "joint_velocities", "joint_efforts", "gripper_openings",
    "end_effectors", "objects", "scale_readings", "joint_values",
)
"""The per-step arrays of a recording compared by re-simulation (actions a, then states x)."""
_LAYOUT: tuple[str, ...] = ("joints", "grippers", "object_ids", "scale_ids", "joint_value_names")


class Reverifier(Protocol):
    """The audit's re-verification: re-run the verifier on an admitted episode's stored videos."""

    def __call__(self, task_dir: Path, episode_id: str, stored: VerifierResults) -> VerifierResults:
        """Fresh results for `episodes/<episode_id>` (`stored` is what q recorded)."""
        ...


def default_reverifier() -> Reverifier | None:
    """`datafarm.verifiers.reverify` when the verifier provides it, else None."""
    try:
        from datafarm.verifiers import reverify  # type: ignore[attr-defined]
    except ImportError:
        return None
    return reverify


# --- the report -----------------------------------------------------------------------------------


class AuditDifference(Artifact):
    """One thing the audit could not reproduce."""

    check: AuditCheck
    """The step that found it."""
    episode_id: str | None = None
    """The episode it concerns (null for the whole task)."""
    message: str
    """What differs: the stored value and the reproduced one."""

    def render(self) -> str:
        """`[check] episode: message`."""
        return f"[{self.check}] {self.episode_id or '(task)'}: {self.message}"


class StateComparison(Artifact):
    """A re-simulated admission seed compared with the stored episode."""

    episode_id: str
    """The admitted episode."""
    seed_index: int = Field(ge=0)
    """Its admission seed index."""
    ended_by: str
    """How the re-run controller's rollout ended (`done` when it claimed done)."""
    steps_stored: int = Field(ge=0)
    """Control steps stored."""
    steps_resimulated: int = Field(ge=0)
    """Control steps of the re-run."""
    max_abs_difference: dict[str, float] = Field(default_factory=dict)
    """Per recorded array (RECORDING_ARRAYS): largest |stored - re-simulated| over the common steps."""
    contacts_identical: bool
    """Whether the contact events k are equal."""
    occupancy_identical: bool
    """Whether the joint occupancy rows are equal."""
    identical: bool
    """True when everything compared is equal within the tolerance (and the step counts agree)."""


class AuditReport(Artifact):
    """What `audit` re-ran and every difference it found."""

    task_dir: str
    """The task folder audited."""
    k_version: str
    """The pinned K version (installed hash verified equal)."""
    k_sha256: str
    """Its content hash."""
    judge_sha256: str
    """The frozen J's hash."""
    rejudged: list[str] = Field(default_factory=list)
    """Episodes re-judged from their stored trajectory."""
    resimulated: list[StateComparison] = Field(default_factory=list)
    """Admission seeds re-simulated, with the comparison."""
    reverified: list[str] = Field(default_factory=list)
    """Episodes re-verified on their stored videos."""
    differences: list[AuditDifference] = Field(default_factory=list)
    """Every difference found."""
    notes: list[str] = Field(default_factory=list)
    """Steps skipped and why (e.g. no verifier spec), and other remarks."""
    audited_at: AwareDatetime
    """When the audit ran."""

    @property
    def ok(self) -> bool:
        """True when nothing differs."""
        return not self.differences

    def render(self) -> str:
        """A summary line, the re-simulation table, notes and every difference."""
        head = "AUDIT OK" if self.ok else f"AUDIT FAILED: {len(self.differences)} difference(s)"
        summary = (f"{head}: {self.task_dir} under K {self.k_version} ({self.k_sha256[:12]}), J {self.judge_sha256[:12]}; "
                   f"re-judged {len(self.rejudged)}, re-simulated {len(self.resimulated)}, re-verified {len(self.reverified)}")
        lines = [summary]
        for c in self.resimulated:
            worst = max(c.max_abs_difference.values(), default=0.0)
            lines.append(f"  re-simulated {c.episode_id} (seed #{c.seed_index}): {c.steps_resimulated}/{c.steps_stored} steps, "
                         f"max |difference| {worst:.3g}, {'identical' if c.identical else 'DIFFERS'}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  {d.render()}" for d in self.differences]
        return "\n".join(lines)


# --- comparisons ----------------------------------------------------------------------------------


def verdict_differences(stored: JudgeVerdict, fresh: JudgeVerdict, *, tolerance_s: float = 0.0) -> list[str]:
    """How `fresh` differs from `stored`: pass/fail, stage reached, every stage's start and end,
    violations, J's hash; the reason only when nothing else differs."""
    out: list[str] = []
    if stored.judge_sha256 != fresh.judge_sha256:
        out.append(f"judged by J {stored.judge_sha256[:12]}... in q, {fresh.judge_sha256[:12]}... now")
    if stored.passed != fresh.passed:
        out.append(f"q says {'passed' if stored.passed else 'failed'}, re-judged "
                   f"{'passed' if fresh.passed else 'failed'}: {fresh.reason}")
    if stored.stage_reached != fresh.stage_reached:
        out.append(f"stage reached: {stored.stage_reached} in q, {fresh.stage_reached} re-judged")
    fresh_stages = {s.name: s for s in fresh.stages}
    for s in stored.stages:
        f = fresh_stages.pop(s.name, None)
        if f is None:
            out.append(f"stage {s.name} is in q but was not entered when re-judged")
            continue
        for edge in ("start_s", "end_s"):
            a, b = getattr(s, edge), getattr(f, edge)
            if (a is None) != (b is None) or (a is not None and abs(a - b) > tolerance_s):
                out.append(f"stage {s.name} {edge.removesuffix('_s')}: {_when(a)} in q, {_when(b)} re-judged")
    for name in fresh_stages:
        out.append(f"stage {name} was entered when re-judged but is not in q")
    old = sorted((v.shortcut, v.time_s) for v in stored.violations)
    new = sorted((v.shortcut, v.time_s) for v in fresh.violations)
    if old != new:
        out.append(f"violations: {old or 'none'} in q, {new or 'none'} re-judged")
    if not out and stored.reason != fresh.reason:
        out.append(f"reason: {stored.reason!r} in q, {fresh.reason!r} re-judged")
    return out


def _when(time_s: float | None) -> str:
    return "never" if time_s is None else f"{time_s} s"


def compare_recordings(stored: Recording, fresh: Recording, episode_id: str, seed_index: int, ended_by: str,
                       *, tolerance: float = 0.0) -> tuple[StateComparison, list[str]]:
    """Compare a re-simulated recording with the stored one, array by array over the common steps."""
    problems: list[str] = []
    for name in _LAYOUT:
        if getattr(stored, name) != getattr(fresh, name):
            problems.append(f"{name}: {getattr(stored, name)} stored, {getattr(fresh, name)} re-simulated")
    steps = min(stored.steps, fresh.steps)
    if stored.steps != fresh.steps:
        problems.append(f"{stored.steps} steps stored, {fresh.steps} re-simulated")
    worst: dict[str, float] = {}
    for name in RECORDING_ARRAYS:
        a, b = getattr(stored, name)[:steps], getattr(fresh, name)[:steps]
        if a.shape != b.shape:
            problems.append(f"{name}: shape {a.shape} stored, {b.shape} re-simulated")
            continue
        if a.size == 0:
            worst[name] = 0.0
            continue
        same_nan = np.isnan(a) == np.isnan(b)
        diff = np.abs(np.where(np.isnan(a) | np.isnan(b), 0.0, a - b))
        worst[name] = float(diff.max())
        if not same_nan.all():
            problems.append(f"{name}: NaN in different places")
        if worst[name] > tolerance:
            first = int(np.argwhere(diff > tolerance)[0][0])
            problems.append(f"{name}: differs by up to {worst[name]:.6g} (first at step {first})")
    contacts = stored.contacts == fresh.contacts
    if not contacts:
        problems.append(f"contact events k: {len(stored.contacts)} stored, {len(fresh.contacts)} re-simulated, not equal")
    occupancy = stored.occupancy == fresh.occupancy
    if not occupancy:
        problems.append("joint occupancy differs")
    comparison = StateComparison(episode_id=episode_id, seed_index=seed_index, ended_by=ended_by,
                                 steps_stored=stored.steps, steps_resimulated=fresh.steps, max_abs_difference=worst,
                                 contacts_identical=contacts, occupancy_identical=occupancy, identical=not problems)
    return comparison, problems


def verifier_differences(stored: VerifierResults, fresh: VerifierResults, *, tolerance: float = 1e-9) -> list[str]:
    """How re-run verifier results differ from q's: spec and calibration, checks, pass/fail, metrics."""
    out = []
    if (stored.spec_sha256, stored.calibration_sha256) != (fresh.spec_sha256, fresh.calibration_sha256):
        out.append("the verifier re-ran under another spec or calibration than q's")
    old = {c.check.value: c for c in stored.checks}
    new = {c.check.value: c for c in fresh.checks}
    if set(old) != set(new):
        out.append(f"checks: {sorted(old)} in q, {sorted(new)} re-run")
    for name in sorted(set(old) & set(new)):
        a, b = old[name], new[name]
        if a.passed != b.passed:
            out.append(f"check {name}: {'passed' if a.passed else 'failed'} in q, {'passed' if b.passed else 'failed'} re-run")
        if abs(a.metric - b.metric) > tolerance:
            out.append(f"check {name}: metric {a.metric:g} in q, {b.metric:g} re-run")
    return out


Z_TOLERANCE = 1e-9
"""Largest difference between a stored z value and the same value drawn again from its admission seed
that still counts as equal. Drawing z goes through small matrix products whose last bit can differ
between processes (seen: one camera quaternion 1 ulp apart); a scene picked by hand differs by far more."""


def variation_differences(stored: Variation, drawn: Variation, *, tolerance: float = Z_TOLERANCE,
                          limit: int = 8) -> list[str]:
    """Where z drawn again from the admission seed differs from the stored z: each value (by its path,
    e.g. `object_poses.red_cup.position[0]`) that differs by more than `tolerance` (numbers) or at all
    (anything else); at most `limit`, then a count of the rest."""
    out: list[str] = []

    def walk(a: object, b: object, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                where = f"{path}.{key}" if path else str(key)
                if key not in a or key not in b:
                    out.append(f"{where}: {'drawn but not stored' if key not in a else 'stored but not drawn'}")
                else:
                    walk(a[key], b[key], where)
        elif isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif (isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool)
              and not isinstance(b, bool)):
            if not abs(a - b) <= tolerance:  # also true for NaN on either side
                out.append(f"{path}: {a!r} stored, {b!r} drawn")
        elif a != b:
            out.append(f"{path}: {a!r} stored, {b!r} drawn")

    walk(stored.model_dump(mode="json"), drawn.model_dump(mode="json"), "")
    return out if len(out) <= limit else [*out[:limit], f"and {len(out) - limit} more value(s)"]


# --- refusals -------------------------------------------------------------------------------------


def check_capability(paths: TaskDir) -> CapabilityLock:
    """The task's K lock, after checking the installed bundle of that version hashes to it; IntegrityError otherwise."""
    lock = load_capability_lock(paths)
    root = k_bundle.BUNDLES_DIR / lock.k_version
    if not root.is_dir():
        raise IntegrityError(f"{paths.capability_lock}: the task is pinned to K {lock.k_version}, which is not installed "
                             f"(no {root}); audit runs only under the pinned K")
    installed = k_bundle.compute_manifest_hash(root)
    if installed != lock.k_sha256:
        raise IntegrityError(f"{paths.capability_lock}: the task is pinned to K {lock.k_version} {lock.k_sha256}, but the "
                             f"installed {lock.k_version} ({root}) hashes to {installed}; audit refuses to run under a "
                             "different K (install the pinned release)")
    return lock


def _frozen_spec(paths: TaskDir, view: LedgerView) -> JudgeSpec:
    """The frozen J, refusing one that differs from its lock or is not the ledger's latest freeze."""
    spec = load_frozen(paths.judge_dir)
    latest = view.latest_freeze()
    if latest != spec.sha256():
        raise IntegrityError(f"{paths.judge_dir}: J {spec.sha256()[:12]}... is not the ledger's latest freeze "
                             f"({(latest or 'none')[:12]}); audit re-judges only with the frozen J")
    return spec


# --- re-simulation --------------------------------------------------------------------------------


def _settings(paths: TaskDir, notes: list[str]) -> WorldSettings | None:
    """The qualified simulator variant's settings (what rollouts build worlds with), if qualified."""
    if not paths.qualification.is_file():
        notes.append("no qualification.json: re-simulating with the default physics settings")
        return None
    from datafarm.sim.qualification.report import read_qualification

    return read_qualification(paths.qualification).settings


def _provider(name: str, sandbox: str | SandboxProvider | None, allow_unsafe: bool) -> SandboxProvider | None:
    """The provider to re-run in: `sandbox` when given, else the one the episode ran in; None when
    that is `none` and the unsafe policy was not given."""
    if isinstance(sandbox, SandboxProvider):
        return sandbox
    name = sandbox or name
    if name == "none":
        return sandbox_registry.get("none", unsafe=True) if allow_unsafe else None
    return sandbox_registry.get(name)


# --- the audit ------------------------------------------------------------------------------------


def audit(
    task_dir: Path | str,
    *,
    sample: int | None = None,
    sample_seed: int = 0,
    tolerance: float = 0.0,
    sandbox: str | SandboxProvider | None = None,
    allow_unsafe_sandbox: bool = False,
    limits: RolloutLimits | None = None,
    sandbox_limits: SandboxLimits | None = None,
    api_dir: Path | None = None,
    work_dir: Path | None = None,
    reverify: Reverifier | None = None,
    record: bool = True,
) -> AuditReport:
    """Audit a task folder (see the module docstring) and return every difference.

    `sample`: how many admitted episodes to re-simulate (None: all; chosen with `sample_seed`).
    `tolerance`: largest |difference| accepted between stored and re-simulated arrays (0: bit-identical).
    `sandbox`: provider to re-run the expert in (default: the one each episode ran in; `none` only
    with `allow_unsafe_sandbox`). `limits` default to T's time limit. `work_dir` keeps each
    re-simulated episode (`<work_dir>/<id>/`, never inside the task folder); by default it lives in
    a temporary folder that is removed. `reverify` replaces the verifier's re-run
    (`datafarm.verifiers.reverify`).
    Raises IntegrityError when the installed K differs from the lock or J differs from its freeze;
    InputError for a bad argument."""
    paths = TaskDir(Path(task_dir))
    if not paths.root.is_dir():
        raise input_error("not a task folder", file=paths.root, expected="a folder written by `datafarm compile`")
    if work_dir is not None:
        work_dir = Path(work_dir).resolve()
        if work_dir.is_relative_to(paths.root.resolve()):
            raise input_error("the audit's work folder must lie outside the task folder (audit never writes into it)",
                              field="work_dir", file=work_dir)
    if sample is not None and sample < 0:
        raise input_error(f"sample {sample} is negative", field="sample", expected="a count >= 0, or all")
    k = check_capability(paths)
    ledger = Ledger(paths.root)
    view = LedgerView.read(ledger.path)
    spec = _frozen_spec(paths, view)
    judge_sha = spec.sha256()
    differences: list[AuditDifference] = []
    notes: list[str] = []

    def differ(check: AuditCheck, episode_id: str | None, message: str) -> None:
        differences.append(AuditDifference(check=check, episode_id=episode_id, message=message))

    # the admitted episodes
    admitted: list[tuple[Path, AdmissionRecord]] = []
    if paths.episodes_dir.is_dir():
        for folder in sorted(p for p in paths.episodes_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            try:
                admitted.append((folder, load_artifact(AdmissionRecord, folder / ADMISSION_FILE)))
            except InputError as e:
                differ("episode", folder.name, f"no valid admission record, not audited: {e.problems[0].message}")
    if not admitted:
        notes.append("no admitted episode to audit")
    task = RolloutTask.load(paths.root, settings=_settings(paths, notes))
    limits_by_arm: dict[str, ArmLimits] | None = grounding_limits(task.grounding) if admitted else None

    # re-judge every stored trajectory
    rejudged: list[str] = []
    for folder, q in admitted:
        try:
            fresh = evaluate(spec, trajectory_from_episode(folder, task.grounding, limits_by_arm))
        except DatafarmError as e:
            differ("rejudge", folder.name, f"the stored trajectory cannot be judged: {e}")
            continue
        except (ValueError, KeyError, IndexError) as e:  # a tampered file that still parses but does not fit
            differ("rejudge", folder.name, f"the stored trajectory cannot be judged: {type(e).__name__}: {e}")
            continue
        rejudged.append(folder.name)
        for message in verdict_differences(q.judge, fresh):
            differ("rejudge", folder.name, message)

    # re-simulate a sample of the admission seeds
    chosen = list(admitted)
    if sample is not None and sample < len(chosen):
        chosen = random.Random(sample_seed).sample(chosen, sample)
    chosen.sort(key=lambda item: item[1].seed_index)
    if sample is not None and sample < len(admitted):
        notes.append(f"re-simulated a sample of {len(chosen)} of {len(admitted)} admitted episodes "
                     f"(seed indices {[q.seed_index for _, q in chosen]}, sample seed {sample_seed})")
    resimulated: list[StateComparison] = []
    secret = None
    if chosen:
        secret, secret_problems = read_secret(paths, view)
        for where, message in secret_problems:
            differ("resimulate", None, f"{where}: {message}")
    for folder, q in chosen if secret is not None else []:
        comparison = _resimulate(paths, task, spec, folder, q, secret, differ, notes, tolerance=tolerance,
                                 sandbox=sandbox, allow_unsafe=allow_unsafe_sandbox, limits=limits,
                                 sandbox_limits=sandbox_limits, api_dir=api_dir, work_dir=work_dir)
        if comparison is not None:
            resimulated.append(comparison)

    # re-verify on the stored videos
    reverified: list[str] = []
    reverifier = reverify if reverify is not None else default_reverifier()
    if admitted and not (paths.root / VERIFIER_SPEC).is_file():
        differ("reverify", None, f"{VERIFIER_SPEC} is missing: the admitted episodes were verified under a spec that "
               "is gone, so none can be re-verified")
    elif admitted and reverifier is None:
        notes.append("verifier not re-run: this datafarm has no verifier program (datafarm.verifiers.reverify)")
    elif admitted:
        for folder, q in admitted:
            try:
                fresh_results = reverifier(paths.root, folder.name, q.verifier)
            except DatafarmError as e:
                differ("reverify", folder.name, f"the verifier could not re-run: {e}")
                continue
            except Exception as e:  # noqa: BLE001 - a tampered video may break the decoder: a difference, not a crash
                differ("reverify", folder.name, f"the verifier could not re-run on the stored videos: "
                       f"{type(e).__name__}: {e}")
                continue
            reverified.append(folder.name)
            for message in verifier_differences(q.verifier, fresh_results):
                differ("reverify", folder.name, message)

    report = AuditReport(task_dir=str(paths.root), k_version=k.k_version, k_sha256=k.k_sha256, judge_sha256=judge_sha,
                         rejudged=rejudged, resimulated=resimulated, reverified=reverified, differences=differences,
                         notes=notes, audited_at=datetime.now(UTC))
    if record:
        _record(ledger, report)
    return report


def _resimulate(paths: TaskDir, task: RolloutTask, spec: JudgeSpec, folder: Path, q: AdmissionRecord, secret: bytes,
                differ, notes: list[str], *, tolerance: float, sandbox, allow_unsafe: bool,
                limits: RolloutLimits | None, sandbox_limits: SandboxLimits | None, api_dir: Path | None,
                work_dir: Path | None) -> StateComparison | None:
    """Run admission seed `q.seed_index` again and compare it with the stored episode."""
    eid = folder.name
    try:
        stored = read_episode(folder)
    except DatafarmError as e:
        differ("resimulate", eid, f"the stored episode cannot be read: {e}")
        return None
    drawn = sample_variation(task.grounding, task.sampler, admission_seed(secret, q.seed_index))
    for message in variation_differences(stored.record.variation, drawn):
        differ("resimulate", eid, f"the stored z is not what admission seed #{q.seed_index} draws: {message}")
    # the world the rollout built: z as stored (JSON keeps every float exactly), checked against the seed just above
    variation = stored.record.variation
    controller = task.expert_dir / task.entry
    if not controller.is_file() or sha256_file(controller) != stored.record.expert_sha256:
        differ("resimulate", eid, f"the expert {controller.relative_to(paths.root)} is not the controller that produced "
               "the episode; not re-simulated")
        return None
    provider = _provider(q.sandbox, sandbox, allow_unsafe)
    if provider is None:
        notes.append(f"{eid} not re-simulated: it ran without a sandbox and the unsafe-sandbox policy was not given")
        return None
    world = build_world(task.grounding, variation, settings=task.settings)
    session = WorldSession(world, control_hz=task.control_hz)
    # run_dir None: run_expert stages the program in a temporary folder of its own and removes it
    kept = work_dir / eid if work_dir is not None else None
    outcome = run_expert(task.expert_dir, session, provider, limits or RolloutLimits(max_sim_seconds=task.time_limit_s),
                         sandbox_limits, entry=task.entry, run_dir=kept / "run" if kept else None, api_dir=api_dir)
    fresh = session.recorder.finish()
    verdict = None
    if fresh.steps:
        verdict = evaluate(spec, trajectory_from_recording(fresh, task.grounding, variation, robot_limits(world)))
    if kept is not None and verdict is not None:
        record = make_record(fresh, episode_id=eid, robot=task.grounding.robot.kind, variation=variation,
                             verdict=verdict, expert_sha256=stored.record.expert_sha256)
        write_episode(kept / "episode", record, fresh)
    if not outcome.completed:
        differ("resimulate", eid, f"the re-run did not finish: {outcome.ended_by.value}: {outcome.reason}")
    comparison, problems = compare_recordings(stored.recording, fresh, eid, q.seed_index, outcome.ended_by.value,
                                              tolerance=tolerance)
    for message in problems:
        differ("resimulate", eid, message)
    if verdict is None:
        differ("resimulate", eid, "the re-run recorded nothing to judge")
    else:
        for message in verdict_differences(q.judge, verdict):
            differ("resimulate", eid, f"re-simulated verdict: {message}")
    return comparison


def _record(ledger: Ledger, report: AuditReport) -> None:
    """Append the audit's outcome to the ledger (a note in the report when the ledger refuses)."""
    try:
        ledger.append(
            Stage.audit, LedgerEvent.check, LedgerOutcome.ok if report.ok else LedgerOutcome.fail,
            "audit reproduced every admitted episode" if report.ok
            else f"audit found {len(report.differences)} difference(s): {report.differences[0].render()}",
            actor=LedgerActor(role="audit"),
            details={"k_version": report.k_version, "judge_sha256": report.judge_sha256,
                     "rejudged": report.rejudged, "resimulated": [c.episode_id for c in report.resimulated],
                     "reverified": report.reverified, "differences": len(report.differences),
                     "notes": report.notes[:20]})
    except DatafarmError as e:
        report.notes.append(f"the audit could not be recorded in the ledger: {e}")
