"""`datafarm compile`: validate the request and clip, create (or resume) the task folder, then run
the pipeline's stages (datafarm/pipeline.py), recording each in the ledger. One compile at a time
works on a task folder (`compile_lock`); `--resume` continues one that was stopped or killed.

Stages that are not built yet are recorded as such and named to the user; nothing is reported as
done that was not done.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import datafarm
from datafarm import capability
from datafarm.artifacts.ledger_entry import Actor, LedgerEvent, Outcome
from datafarm.artifacts.stages import Stage
from datafarm.capability.models import CapabilityLock
from datafarm.errors import IntegrityError, StateError
from datafarm.hashing import sha256_file
from datafarm.intake import check_request
from datafarm.ledger import Ledger
from datafarm.pipeline import PipelineContext, PipelineOutcome, run_pipeline
from datafarm.taskdir import TaskDir, task_id

CLI_ACTOR = Actor(role="cli", provider="datafarm", model=datafarm.__version__)


@dataclass
class CompileResult:
    """What one `compile` call did, for the CLI to report."""

    task_dir: TaskDir
    """The task folder."""
    created: bool
    """True when this call created the folder, False when it resumed an existing one."""
    written: list[Path] = field(default_factory=list)
    """Files this call wrote or appended to."""
    pipeline: PipelineOutcome = field(default_factory=PipelineOutcome)
    """What the stages after the request did (finished, stopped, not built yet)."""
    repaired_torn_tail: bool = False
    """True when resume found and recorded a torn last ledger line."""


def _request_copy(request_path: Path, request, clip_sha256: str) -> str:
    """The validated request with absolute paths and the clip's sha256 added, as YAML. Paths are made
    absolute so the copy means the same thing from inside the task folder."""
    body = request.model_dump(mode="json")
    body["clip_sha256"] = clip_sha256
    header = f"# Copy of {request_path.resolve()} as compiled by datafarm {datafarm.__version__}.\n"
    return header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)


def compile_request(
    request_path: Path,
    *,
    resume: bool = False,
    allow_unsafe_sandbox: bool = False,
    output: Path | None = None,
    progress: Callable[[str], None] = lambda message: None,
    run_stages: bool = True,
) -> CompileResult:
    """Compile `request_path` into its task folder (see module docstring); `progress` receives a line
    per step of long work. With `run_stages=False` only the task folder is created or resumed (for
    callers that drive `datafarm.pipeline` themselves)."""
    request_path = Path(request_path)
    request, clip = check_request(request_path, allow_unsafe_sandbox=allow_unsafe_sandbox)
    bundle = capability.load()

    fingerprint = {"request": request.model_dump(mode="json", exclude={"output"}), "clip_sha256": clip.sha256}
    out_root = (Path(output) if output is not None else Path(request.output)).resolve()
    tdir = TaskDir(out_root / task_id(request.task, fingerprint))

    if tdir.root.exists():
        if not resume:
            raise StateError(
                f"{tdir.root} already exists; nothing was changed. Run again with --resume to continue it, "
                "or set `output:` (or --out) to another folder for a fresh compile."
            )
        with compile_lock(tdir):
            result = _resume(tdir, bundle, clip.sha256)
            if run_stages:
                result.pipeline = _run(tdir, request, progress)
        return result
    if resume:
        raise StateError(f"--resume given but {tdir.root} does not exist; run without --resume to create it")
    result = _create(tdir, request_path, request, clip, bundle)
    if run_stages:
        with compile_lock(tdir):
            result.pipeline = _run(tdir, request, progress)
    return result


def _run(tdir: TaskDir, request, progress: Callable[[str], None]) -> PipelineOutcome:
    context = PipelineContext(request=request, task=tdir, ledger=Ledger(tdir.ledger), progress=progress)
    return run_pipeline(context)


LOCK_FILE = "compile.lock"
"""The lock one compile holds on its task folder, in the harness-private folder."""


@contextmanager
def compile_lock(tdir: TaskDir) -> Iterator[None]:
    """Hold the task folder's compile lock (StateError when another compile holds it). The lock is
    the kernel's (flock), so a compile killed with SIGKILL releases it; its rollout workers do not
    inherit it and end with it (datafarm.harness.rollout)."""
    tdir.harness_dir.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(tdir.harness_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateError(f"{tdir.root}: another `datafarm compile` is running on this task folder; "
                             "wait for it to end (or end it) before resuming") from None
        yield
    finally:
        os.close(fd)


def _create(tdir: TaskDir, request_path: Path, request, clip, bundle) -> CompileResult:
    """Write the new task folder under a temporary name and rename it into place, so a failure never
    leaves a half-written task folder behind."""
    tdir.root.parent.mkdir(parents=True, exist_ok=True)
    staging = tdir.root.parent / f".{tdir.root.name}.partial-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        stage_dir = TaskDir(staging)
        stage_dir.request.write_text(_request_copy(request_path, request, clip.sha256), encoding="utf-8")
        lock = bundle.lock(datafarm.__version__)
        stage_dir.capability_lock.write_text(lock.model_dump_json(indent=2) + "\n", encoding="utf-8")

        ledger = Ledger(stage_dir.ledger)
        ledger.append(
            stage=Stage.request,
            event=LedgerEvent.stage_finished,
            outcome=Outcome.ok,
            reason="request and calibration clip validated",
            actor=CLI_ACTOR,
            inputs={"request.yaml": sha256_file(request_path), "clip": clip.sha256},
            outputs={"request.yaml": sha256_file(stage_dir.request), "capability.lock": sha256_file(stage_dir.capability_lock)},
            details={
                "task": request.task,
                "episodes": request.episodes,
                "mode": request.mode,
                "cameras": [c.name for c in clip.cameras],
                "clip_frames": clip.frames,
                "k_version": lock.k_version,
                "k_sha256": lock.k_sha256,
            },
        )
        os.replace(staging, tdir.root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return CompileResult(task_dir=tdir, created=True, written=[tdir.request, tdir.capability_lock, tdir.ledger])


def _resume(tdir: TaskDir, bundle, clip_sha256: str) -> CompileResult:
    """Continue an existing task folder: check its lock, repair a torn ledger tail (recorded, never
    dropped), record the resume, and run what is not done."""
    lock = CapabilityLock.model_validate_json(tdir.capability_lock.read_text())
    if lock.k_sha256 != bundle.sha256:
        raise IntegrityError(
            f"{tdir.capability_lock}: task was compiled under capability {lock.k_version} ({lock.k_sha256[:12]}), "
            f"installed is {bundle.version} ({bundle.sha256[:12]}); resume needs the same K"
        )
    ledger = Ledger(tdir.ledger)
    repaired = False
    report = ledger.verify()
    if report.torn_tail:
        ledger.repair_torn_tail(actor=CLI_ACTOR)
        repaired = True
        report = ledger.verify()
    if not report.ok:
        raise IntegrityError(f"{tdir.ledger}: ledger fails verification; refusing to resume:\n" + report.render())
    ledger.append(
        stage=Stage.resume,
        event=LedgerEvent.resume,
        outcome=Outcome.info,
        reason="compile --resume",
        actor=CLI_ACTOR,
        inputs={"clip": clip_sha256},
    )
    return CompileResult(task_dir=tdir, created=False, written=[tdir.ledger], repaired_torn_tail=repaired)
