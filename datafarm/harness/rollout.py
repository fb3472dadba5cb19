"""Rollouts (stages 5 and 6): the expert C run once, fresh, on one seed, judged by the frozen J.

One rollout:
1. z = sample_variation(G, S, seed): a dev seed from B, or admission seed i derived from the task's
   secret (`datafarm.harness.seeds`; callers name admission rollouts by their index i only).
2. A fresh World from G and z, and a `WorldSession` whose `Recorder` records every control step.
3. `expert/controller.py` run once in the sandbox (`run_expert`): one continuous execution, nothing
   reused from another run (new world, new process, new staging folder).
4. The recording -> `Trajectory` -> verdict of the frozen J (`judge_frozen`: a J whose hash differs
   from its lock, or a lock the ledger does not have as its latest freeze, is refused). The rollout
   passes only when the controller finished by claiming done *and* J passed; the judge, not the
   controller's claim, decides.
5. Files: the episode (a, x, k, y, z: `write_episode`, whose record carries the verdict; its stage
   timings are the labels y) plus `rollout.json` (how the rollout ended, the verdict, the reason)
   go to `episodes/<id>/` for a passing admission rollout, to `attempts/<id>/` otherwise (dev
   rollouts always). The folder appears whole (written aside, then renamed).
6. One ledger entry, event `rollout`: stage `expert` for a dev rollout (stage 5 iterates on dev
   seeds), stage `rollout` for an admission rollout (stage 6); inputs: controller file, expert folder
   and staged program hashes, the J hash, the variation hash; outputs: every file written; details:
   the seed kind, the dev seed or the admission *index* (never an admission seed's value: the ledger
   is shown in reports; the seed itself is in the episode record's z, which only the harness,
   admission and audit read), how the rollout ended, the stage reached, the reason.

`request_rollout(task_dir, dev_seed)` is the author's call: dev seeds only, and it returns only the
`VerdictSummary` (pass/fail, stage reached, reason), never J. `run_rollouts` runs several rollouts in
parallel processes (spawn context; the ledger is multi-process safe) that end with the process that
started them, so a killed compile leaves no rollout behind to write into the task folder.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.expert import DevRun, ExpertManifest
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeVerdict, VerdictSummary
from datafarm.artifacts.ledger_entry import (
    LedgerActor,
    LedgerEntry,
    LedgerEvent,
    LedgerOutcome,
)
from datafarm.artifacts.sampler import SamplerSpec, Variation
from datafarm.artifacts.stages import Stage
from datafarm.errors import (
    DatafarmError,
    InputError,
    IntegrityError,
    Problem,
    StateError,
    input_error,
)
from datafarm.harness import sandbox as sandbox_registry
from datafarm.harness.judge.from_recording import (
    robot_limits,
    trajectory_from_recording,
)
from datafarm.harness.judge.frozen import judge_frozen, load_frozen
from datafarm.harness.sandbox import SandboxLimits, SandboxProvider
from datafarm.harness.seeds import (
    HARNESS_DIR,
    admission_seed,
    check_dev_seed,
    load_secret,
)
from datafarm.harness.server import (
    RolloutEnd,
    RolloutLimits,
    RolloutOutcome,
    run_expert,
)
from datafarm.harness.world_session import WorldSession
from datafarm.hashing import sha256_file, sha256_json, sha256_tree
from datafarm.ledger import Ledger
from datafarm.sim.episode_io import make_record, write_episode
from datafarm.sim.world import WorldSettings, build_world, sample_variation
from datafarm.taskdir import TaskDir

RolloutKind = Literal["dev", "admission"]
"""dev: a seed from B the author may use; admission: a held-out seed derived from the task secret."""
REPORT_FILE = "rollout.json"
"""The rollout report's file name inside the episode or attempt folder."""
_HARNESS = LedgerActor(role="harness")


# --- the task a rollout runs -----------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutTask:
    """Everything a rollout reads, explicitly (`RolloutTask.load(task_dir)` reads it from a task folder)."""

    root: Path
    """The task folder: `episodes/`, `attempts/` and (for admission) `harness/secret` are here."""
    grounding: Grounding
    """G."""
    sampler: SamplerSpec
    """S."""
    batch: BatchConfig
    """B: dev seeds and the admission seed count."""
    control_hz: float
    """Control rate of the episode (T's `control_hz`)."""
    time_limit_s: float
    """Simulated-time limit of the episode (T's `time_limit_s`)."""
    judge_dir: Path
    """The frozen J (`spec.json` + `lock.json`)."""
    expert_dir: Path
    """C's folder; its `entry` runs in the sandbox."""
    entry: str = "controller.py"
    """The controller file inside `expert_dir`."""
    settings: WorldSettings | None = None
    """Physics settings (the qualified simulator variant); None for the defaults."""
    ledger_path: Path | None = None
    """The ledger; None for `<root>/ledger.jsonl`."""

    @classmethod
    def load(cls, task_dir: Path | str, *, settings: WorldSettings | None = None) -> RolloutTask:
        """Read G, S, B, T (rate and time limit) and the expert's entry from a task folder. Without
        explicit `settings`, worlds use the physics settings qualification chose (`qualification.json`),
        or the defaults when the task has not been qualified."""
        paths = TaskDir(Path(task_dir))
        if settings is None and paths.qualification.is_file():
            from datafarm.sim.qualification import read_qualification

            settings = read_qualification(paths.qualification).settings
        contract = load_artifact(TaskContract, paths.contract)
        entry = "controller.py"
        manifest = paths.artifact("expert")
        if manifest.is_file():
            entry = load_artifact(ExpertManifest, manifest).entry
        return cls(root=paths.root, grounding=load_artifact(Grounding, paths.grounding),
                   sampler=load_artifact(SamplerSpec, paths.sampler), batch=load_artifact(BatchConfig, paths.batch),
                   control_hz=contract.control_hz, time_limit_s=contract.time_limit_s, judge_dir=paths.judge_dir,
                   expert_dir=paths.expert_dir, entry=entry, settings=settings)

    @property
    def ledger(self) -> Ledger:
        """The task's ledger."""
        return Ledger(self.ledger_path if self.ledger_path is not None else self.root)


# --- what a rollout leaves behind ------------------------------------------------------------------


class RolloutReport(Artifact):
    """`rollout.json` in an episode or attempt folder: how one rollout went."""

    episode_id: str
    """The folder's name."""
    kind: RolloutKind
    """dev or admission."""
    seed: int | None = None
    """The dev seed; null for an admission rollout (its z, with the seed, is in episode.json)."""
    admission_index: int | None = None
    """Which admission seed (0-based) for an admission rollout; null for dev."""
    passed: bool
    """True when the controller claimed done and the frozen J passed the episode."""
    stage_reached: str | None
    """The furthest stage J saw entered; null when nothing was recorded or judged."""
    reason: str
    """Why it passed or failed, in one paragraph."""
    verdict: JudgeVerdict | None
    """J's verdict on the recorded episode (null when nothing could be judged)."""
    outcome: RolloutOutcome
    """How the controller's run ended (sandbox, protocol, limits)."""
    steps: int = Field(ge=0)
    """Control steps recorded."""
    judge_sha256: str
    """The frozen J's hash."""
    expert_sha256: str
    """Hash of the controller file."""
    expert_tree_sha256: str
    """Hash of the whole expert folder (controller, parameters, notes)."""
    variation_sha256: str
    """`sha256_json` of z."""
    started_at: datetime
    """When the rollout began (UTC)."""
    wall_seconds: float = Field(ge=0)
    """Wall-clock length of the whole rollout (world, run, judge, files), seconds."""
    files: dict[str, str] = Field(default_factory=dict)
    """Data files written (path relative to the folder -> sha256); rollout.json itself excluded."""


@dataclass(frozen=True)
class RolloutResult:
    """What `run_rollout` returns to the harness (never hand it to the author: use `summary`)."""

    episode_id: str
    """The episode or attempt id."""
    kind: RolloutKind
    """dev or admission."""
    folder: Path
    """`episodes/<id>` (a passing admission rollout) or `attempts/<id>`."""
    summary: VerdictSummary
    """Pass/fail, stage reached, reason: all the author may see."""
    verdict: JudgeVerdict | None
    """J's full verdict (harness, admission and audit only)."""
    outcome: RolloutOutcome
    """How the controller's run ended."""
    ledger_entry: LedgerEntry
    """The ledger entry recording the rollout."""
    seed: int | None = None
    """The dev seed; None for admission rollouts."""
    admission_index: int | None = None
    """The admission seed index; None for dev rollouts."""
    files: dict[str, str] = field(default_factory=dict)
    """Paths relative to the task folder -> sha256 of every file written."""

    @property
    def passed(self) -> bool:
        """True when the rollout passed."""
        return self.summary.passed

    @property
    def in_episodes(self) -> bool:
        """True when the episode went to `episodes/` (a passing admission rollout)."""
        return self.folder.parent.name == "episodes"


# --- one rollout -----------------------------------------------------------------------------------


def _provider(sandbox: str | SandboxProvider, unsafe_no_sandbox: bool) -> SandboxProvider:
    if isinstance(sandbox, SandboxProvider):
        return sandbox
    if sandbox == "none":
        if not unsafe_no_sandbox:
            raise input_error("the `none` sandbox gives no isolation; it needs unsafe_no_sandbox=True "
                              "(`--unsafe-no-sandbox`), and the ledger records it", field="sandbox")
        return sandbox_registry.get("none", unsafe=True)
    return sandbox_registry.get(sandbox)


def _resolve_seed(task: RolloutTask, kind: str, seed: int | None, index: int | None) -> int:
    if kind == "dev":
        if index is not None:
            raise input_error("a dev rollout takes a dev seed, not an admission index", field="index")
        return check_dev_seed(task.batch, seed)
    if kind == "admission":
        if seed is not None:
            raise input_error("an admission rollout is named by its index; the harness derives the seed",
                              field="seed", expected="seed=None, index=i")
        count = task.batch.admission_seed_count
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise input_error(f"admission index {index!r} outside 0..{count - 1} (B's admission_seed_count {count})",
                              field="index")
        return admission_seed(load_secret(task.root, task.ledger), index)
    raise input_error(f"unknown rollout kind {kind!r}", field="kind", expected="dev | admission")


def _episode_id(kind: str, seed: int | None, index: int | None) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dt%H%M%S")
    label = f"dev-s{seed}" if kind == "dev" else f"adm-{index:04d}"
    return f"{label}-{stamp}-{uuid.uuid4().hex[:6]}"


def _refuse_admitted_again(ledger: Ledger, index: int | None, judge_sha: str) -> None:
    """StateError when admission seed `index` already gave a passing episode under this J: running
    it again would put the same scene into the dataset twice."""
    for entry in ledger.entries():
        if (entry.event == LedgerEvent.rollout and entry.stage == Stage.rollout and entry.outcome == LedgerOutcome.ok
                and entry.details.get("admission_index") == index and entry.inputs.get("judge/spec.json") == judge_sha):
            raise StateError(f"admission seed #{index} already gave episode {entry.details.get('episode_id')} "
                             f"(ledger entry {entry.seq}); each admission seed is run until it passes, once")


def _file_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != REPORT_FILE}


def _judge(task: RolloutTask, recording: Any, variation: Variation, world: Any) -> tuple[JudgeVerdict | None, str | None]:
    """J's verdict on the recording, or (None, why not)."""
    if recording.steps < 1:
        return None, "nothing was recorded (no control step was simulated)"
    traj = trajectory_from_recording(recording, task.grounding, variation, robot_limits(world.robot))
    try:
        return judge_frozen(task.judge_dir, traj, task.ledger), None
    except InputError as error:
        return None, f"the frozen judge cannot evaluate this scene: {error}"
    except DatafarmError as error:  # J changed (or was re-frozen) while the expert ran
        return None, f"the frozen judge was refused: {error}"


def _decide(outcome: RolloutOutcome, verdict: JudgeVerdict | None,
            judge_problem: str | None) -> tuple[bool, str, JudgeVerdict | None]:
    """(passed, reason, the verdict as recorded) from how the run ended and what J said."""
    if verdict is None:
        lead = f"{outcome.ended_by.value}: {outcome.reason}" if not outcome.completed else "the controller claimed done"
        return False, f"{lead}; not judged: {judge_problem}", None
    if outcome.completed:
        return verdict.passed, verdict.reason, verdict
    reason = (f"the rollout ended before the controller claimed done ({outcome.ended_by.value}: {outcome.reason}); "
              f"on what was recorded, the judge says: {verdict.reason}")
    # the record keeps J's stage timings (labels y) but not a pass: the run itself failed
    return False, reason, verdict.model_copy(update={"passed": False, "reason": reason})


def _ledger_outcome(outcome: RolloutOutcome, passed: bool, judged: bool) -> LedgerOutcome:
    if outcome.ended_by in (RolloutEnd.HARNESS_ERROR, RolloutEnd.SANDBOX_ERROR):
        return LedgerOutcome.error
    if outcome.completed and not judged:
        return LedgerOutcome.error
    return LedgerOutcome.ok if passed else LedgerOutcome.fail


def run_rollout(
    task: RolloutTask | Path | str,
    seed: int | None = None,
    kind: RolloutKind = "dev",
    *,
    index: int | None = None,
    sandbox: str | SandboxProvider = sandbox_registry.DEFAULT_PROVIDER,
    unsafe_no_sandbox: bool = False,
    limits: RolloutLimits | None = None,
    sandbox_limits: SandboxLimits | None = None,
    api_dir: Path | None = None,
) -> RolloutResult:
    """Run the expert once on one seed, judge it with the frozen J, write the episode or attempt
    folder and the ledger entry; see the module docstring.

    A dev rollout takes `seed` (one of B's dev seeds); an admission rollout takes `index` (0 ..
    B.admission_seed_count - 1) and derives its seed from the task secret. `limits` default to T's
    time limit as the simulated-time limit. Raises InputError for a bad seed, index or sandbox
    name, IntegrityError/StateError when J is not frozen or differs from its lock (the refusal is
    recorded in the ledger first), StateError for an admission index that already passed under
    this J; everything the controller does ends in the result instead.
    """
    task = task if isinstance(task, RolloutTask) else RolloutTask.load(task)
    started = time.monotonic()
    started_at = datetime.now(UTC)
    ledger = task.ledger
    true_seed = _resolve_seed(task, kind, seed, index)
    stage = Stage.expert if kind == "dev" else Stage.rollout
    who = {"seed_kind": kind, **({"seed": true_seed} if kind == "dev" else {"admission_index": index})}
    provider = _provider(sandbox, unsafe_no_sandbox)
    controller = task.expert_dir / task.entry
    if not controller.is_file():
        raise InputError([Problem(f"the expert's controller {controller} does not exist", file=controller)])
    try:
        spec = load_frozen(task.judge_dir, ledger)
    except DatafarmError as error:
        ledger.append(stage, LedgerEvent.rollout, LedgerOutcome.error, f"rollout refused: {error}",
                      actor=_HARNESS, details=who)
        raise
    judge_sha = spec.sha256()
    if kind == "admission":
        _refuse_admitted_again(ledger, index, judge_sha)
    expert_sha, tree_sha = sha256_file(controller), sha256_tree(task.expert_dir)

    variation = sample_variation(task.grounding, task.sampler, true_seed)
    world = build_world(task.grounding, variation, settings=task.settings)
    session = WorldSession(world, control_hz=task.control_hz)
    limits = limits or RolloutLimits(max_sim_seconds=task.time_limit_s)
    outcome = run_expert(task.expert_dir, session, provider, limits, sandbox_limits, entry=task.entry, api_dir=api_dir)
    recording = session.recorder.finish()
    verdict, judge_problem = _judge(task, recording, variation, world)
    passed, reason, recorded = _decide(outcome, verdict, judge_problem)
    admitted = kind == "admission" and passed

    episode_id = _episode_id(kind, true_seed if kind == "dev" else None, index)
    paths = TaskDir(task.root)
    final = (paths.episodes_dir if admitted else paths.attempts_dir) / episode_id
    partial = final.parent / f".{episode_id}.partial"
    partial.mkdir(parents=True)
    try:
        if recorded is not None:
            record = make_record(recording, episode_id=episode_id, robot=task.grounding.robot.kind,
                                 variation=variation, verdict=recorded, expert_sha256=expert_sha)
            write_episode(partial, record, recording)
        files = _file_hashes(partial)
        report = RolloutReport(
            episode_id=episode_id, kind=kind, seed=true_seed if kind == "dev" else None,
            admission_index=index if kind == "admission" else None, passed=passed,
            stage_reached=recorded.stage_reached if recorded is not None else None, reason=reason,
            verdict=recorded, outcome=outcome, steps=recording.steps, judge_sha256=judge_sha,
            expert_sha256=expert_sha, expert_tree_sha256=tree_sha,
            variation_sha256=sha256_json(variation.model_dump(mode="json")), started_at=started_at,
            wall_seconds=round(time.monotonic() - started, 3), files=files)
        save_artifact(report, partial / REPORT_FILE)
        os.replace(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise

    rel = final.relative_to(task.root).as_posix()
    outputs = {f"{rel}/{name}": digest for name, digest in files.items()}
    outputs[f"{rel}/{REPORT_FILE}"] = sha256_file(final / REPORT_FILE)
    sandbox_result = outcome.sandbox
    entry = ledger.append(
        stage, LedgerEvent.rollout, _ledger_outcome(outcome, passed, verdict is not None), reason,
        actor=_HARNESS,
        inputs={"expert/" + task.entry: expert_sha, "expert": tree_sha, "judge/spec.json": judge_sha,
                "variation": report.variation_sha256,
                **({"program": outcome.program_sha256} if outcome.program_sha256 else {})},
        outputs=outputs,
        details={
            **who, "episode_id": episode_id, "folder": rel, "passed": passed,
            "stage_reached": report.stage_reached, "ended_by": outcome.ended_by.value,
            "claimed_success": outcome.claimed_success, "steps": recording.steps,
            "sim_time": outcome.sim_time, "refusals": outcome.refusals,
            "sandbox": sandbox_result.provider if sandbox_result is not None else getattr(provider, "name", "?"),
            "isolated": sandbox_result.isolated if sandbox_result is not None else provider.isolated,
            "wall_seconds": report.wall_seconds,
        })
    summary = VerdictSummary(passed=passed, stage_reached=report.stage_reached or spec.stages[0].name, reason=reason)
    return RolloutResult(episode_id=episode_id, kind=kind, folder=final, summary=summary, verdict=recorded,
                         outcome=outcome, ledger_entry=entry, seed=true_seed if kind == "dev" else None,
                         admission_index=index if kind == "admission" else None, files=outputs)


# --- the author's call -----------------------------------------------------------------------------


def request_rollout(task_dir: Path | str, dev_seed: int, **options: Any) -> VerdictSummary:
    """The author's rollout request: run the current expert on `dev_seed` and return only the
    verdict summary (pass/fail, stage reached, reason), never J.

    Refuses (InputError, recorded in the ledger) any seed that is not one of B's dev seeds, with the
    same message whatever the seed is, admission seeds included. The run is appended to the expert
    manifest's `dev_runs` (when `expert/manifest.json` exists). `options` go to `run_rollout`
    (sandbox, limits), never to the author."""
    task = RolloutTask.load(task_dir)
    try:
        check_dev_seed(task.batch, dev_seed)
    except InputError as refusal:
        task.ledger.append(Stage.expert, LedgerEvent.rollout, LedgerOutcome.skipped,
                           f"rollout request refused: {refusal.problems[0].message}",
                           actor=LedgerActor(role="author"), details={"seed_kind": "dev", "requested_seed": repr(dev_seed)[:40]})
        raise
    started_at, started = datetime.now(UTC), time.monotonic()
    result = run_rollout(task, dev_seed, "dev", **options)
    _record_dev_run(task.root, dev_seed, result, started_at, time.monotonic() - started)
    return result.summary


def _record_dev_run(root: Path, seed: int, result: RolloutResult, at: datetime, seconds: float) -> None:
    """Append the run to `expert/manifest.json`'s dev runs (the author's only record of its verdicts;
    the ledger is the trusted one). Nothing to do without a manifest or with one that does not load."""
    manifest_path = TaskDir(root).artifact("expert")
    if not manifest_path.is_file():
        return
    lock = root / HARNESS_DIR / "manifest.lock"  # not in expert/: that would change the expert's hash
    lock.parent.mkdir(mode=0o700, exist_ok=True)
    with open(lock, "a") as handle:  # one read-modify-write of the manifest at a time
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            manifest = load_artifact(ExpertManifest, manifest_path)
        except InputError:
            return
        controller = result.ledger_entry.inputs.get(f"expert/{manifest.entry}")
        if controller is None:
            return
        manifest.dev_runs.append(DevRun(seed=seed, verdict=result.summary, controller_sha256=controller,
                                        parameters_sha256=manifest.parameters_sha256(), at=at,
                                        duration_s=round(seconds, 3)))
        save_artifact(manifest, manifest_path)


# --- several at once ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutJob:
    """One rollout to run: a dev seed, or an admission index."""

    kind: RolloutKind
    """dev or admission."""
    seed: int | None = None
    """The dev seed (dev only)."""
    index: int | None = None
    """The admission seed index (admission only)."""


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker (and with it, through bwrap's --die-with-parent, the expert
    it runs) as soon as the process that started it is gone. A compile killed with SIGKILL must not
    leave rollouts running that would append to the ledger while `compile --resume` runs the same
    admission seeds again."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _run_job(task_dir: str, job: RolloutJob, options: Mapping[str, Any]) -> RolloutResult | tuple[str, str, str]:
    """One job in a worker process. An error comes back as (class name, exit code, message): some
    of datafarm's errors (InputError) do not survive pickling, and a worker must not break the pool."""
    try:
        return run_rollout(Path(task_dir), job.seed, job.kind, index=job.index, **options)
    except Exception as error:  # noqa: BLE001 - re-raised in the parent
        return (type(error).__name__, str(getattr(error, "exit_code", 1)), str(error))


def _raise_job_error(job: RolloutJob, name: str, message: str) -> None:
    what = f"rollout {job.kind} {job.seed if job.kind == 'dev' else f'#{job.index}'}"
    if name == "InputError":
        raise InputError([Problem(f"{what}: {message}")])
    for cls in (IntegrityError, StateError):
        if name == cls.__name__:
            raise cls(f"{what}: {message}")
    raise RuntimeError(f"{what} failed: {name}: {message}")


def run_rollouts(task_dir: Path | str, jobs: Sequence[RolloutJob], *, workers: int = 2,
                 fresh_process: bool = True, **options: Any) -> list[RolloutResult]:
    """Run `jobs` in parallel in up to `workers` processes (spawn context); results in `jobs` order.

    With `fresh_process` (the default) every rollout gets a process of its own that ends with it,
    so its simulator starts from nothing (admission rollouts are fresh processes). `options` go to
    `run_rollout` and must be picklable (limits; a sandbox provider by name). A job that raises
    (a bad seed, a J that differs from its lock) is raised here, after every job has finished."""
    if not jobs:
        return []
    context = multiprocessing.get_context("spawn")
    pool_options: dict[str, Any] = {"max_tasks_per_child": 1} if fresh_process else {}
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs))), mp_context=context,
                             initializer=_die_with_parent, initargs=(os.getpid(),), **pool_options) as pool:
        futures = [pool.submit(_run_job, str(task_dir), job, dict(options)) for job in jobs]
        outputs = [f.result() for f in futures]
    for job, output in zip(jobs, outputs):
        if isinstance(output, tuple):
            _raise_job_error(job, output[0], output[2])
    return [output for output in outputs if isinstance(output, RolloutResult)]
