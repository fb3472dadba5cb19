"""The compiler's stages after the request: each stage's producer, the component that accepts its
output, and the ledger entries that record both (DESIGN.md, "The compiler: stages and their checkers").

`run_pipeline` walks the stages in order and skips those the ledger already records as finished, so
`compile --resume` continues where a run stopped. A stage whose producer is not built yet is recorded
as `stage_not_implemented` and stops the pipeline; so does a rejected stage, recorded with the stage
it routes back to. Nothing is reported as done that was not done.

Order note: qualification (stage 2) runs after the contract (stage 3) here, because the probes a task
needs are chosen from its family and roles, which the contract names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import datafarm
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.request import Request
from datafarm.artifacts.stages import Stage
from datafarm.errors import DatafarmError
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir

ORDER: tuple[Stage, ...] = (
    Stage.grounding,
    Stage.contract,
    Stage.qualification,
    Stage.judge,
    Stage.expert,
    Stage.rollout,
    Stage.render,
    Stage.verify,
    Stage.review,
    Stage.admit,
)
"""The order compile runs the stages in (see the module docstring on qualification)."""

HARNESS = LedgerActor(role="harness", provider="datafarm", model=datafarm.__version__)


class StageRejected(DatafarmError):
    """A stage's output was refused by its checker (or its producer could not make one)."""

    exit_code = 5

    def __init__(self, stage: Stage, reason: str, route_to: Stage | None = None) -> None:
        self.stage = stage
        self.reason = reason
        self.route_to = route_to or stage
        super().__init__(f"{stage.value} rejected: {reason} (routes back to {self.route_to.value})")


class StageNotBuilt(DatafarmError):
    """The producer of a stage does not exist yet in this version of datafarm."""

    def __init__(self, stage: Stage, reason: str) -> None:
        self.stage = stage
        self.reason = reason
        super().__init__(f"{stage.value}: {reason}")


@dataclass
class PipelineContext:
    """What every stage runner gets: the request, the task folder, its ledger and its agents."""

    request: Request
    """The validated request (absolute paths)."""
    task: TaskDir
    """The task folder."""
    ledger: Ledger
    """The task's ledger."""
    progress: Callable[[str], None] = lambda message: None
    """Where a stage reports what it is doing (the CLI shows it)."""
    _agents: object | None = None

    @property
    def agents(self):
        """The task's agent roles (opened on first use: it loads the providers)."""
        if self._agents is None:
            import datafarm.agents.builtin  # noqa: F401  (registers the builtin roles)
            from datafarm.agents import TaskAgents

            self._agents = TaskAgents.open(self.request, self.task)
        return self._agents

    def grounding(self) -> Grounding:
        """G as written by the grounding stage."""
        return load_artifact(Grounding, self.task.grounding)

    def contract(self) -> TaskContract:
        """T as written by the contract stage."""
        return load_artifact(TaskContract, self.task.contract)

    def batch(self) -> BatchConfig:
        """B as written after the contract stage."""
        return load_artifact(BatchConfig, self.task.batch)


@dataclass
class PipelineOutcome:
    """Where compile got to."""

    finished: list[Stage] = field(default_factory=list)
    """Stages that finished in this call (not counting those a resume skipped)."""
    skipped_done: list[Stage] = field(default_factory=list)
    """Stages the ledger already recorded as finished (resume)."""
    stopped_at: Stage | None = None
    """The stage that stopped the pipeline, if any."""
    stop_reason: str = ""
    """Why it stopped."""
    not_built: dict[Stage, str] = field(default_factory=dict)
    """Stages not built yet (the first stops the pipeline; the rest are listed, not run)."""


def _finished_stages(ledger: Ledger) -> set[Stage]:
    return {
        e.stage
        for e in ledger.entries()
        if e.event == LedgerEvent.stage_finished and e.outcome == LedgerOutcome.ok
    }


def _hashes(task: TaskDir, paths: list[Path]) -> dict[str, str]:
    return {p.relative_to(task.root).as_posix(): sha256_file(p) for p in paths if p.is_file()}


# --- the stage runners -------------------------------------------------------------------------------


def _author_stage(ctx: PipelineContext, stage: Stage, instructions: str = "", **author_options) -> None:
    """Run one author stage through the agent roles, translating the builtin's refusals."""
    from datafarm.agents import StageFailed, author_task
    from datafarm.agents.builtin import BuiltinRefusal

    try:
        ctx.agents.author(**author_options).run(author_task(stage, instructions))
    except BuiltinRefusal as e:
        if e.kind == "not_built":
            raise StageNotBuilt(stage, str(e)) from None
        raise StageRejected(stage, str(e), Stage(e.route_to)) from None
    except StageFailed as e:
        raise StageRejected(stage, str(e)) from None


def run_grounding(ctx: PipelineContext) -> list[Path]:
    """Stage 1: the author writes G from the clip; the reprojection check accepts it."""
    _author_stage(ctx, Stage.grounding)
    try:
        from datafarm.grounding_check import check_grounding
    except ImportError:
        raise StageNotBuilt(Stage.grounding, "the grounding check (reprojection IoU) is not built yet") from None
    report = check_grounding(ctx.task.grounding, Path(ctx.request.clip))
    if not report.passed:
        raise StageRejected(Stage.grounding, report.reason)
    return [ctx.task.grounding]


def run_contract(ctx: PipelineContext) -> list[Path]:
    """Stage 3: the author writes T and S; B comes from the request."""
    from datafarm.agents.builtin import default_batch

    _author_stage(ctx, Stage.contract)
    if not ctx.task.batch.is_file():
        save_artifact(default_batch(ctx.request), ctx.task.batch)
    return [ctx.task.contract, ctx.task.sampler, ctx.task.batch]


def run_qualification(ctx: PipelineContext) -> list[Path]:
    """Stage 2: K's probes for the task's family on simulator variants, fewest changes first."""
    from datafarm.sim.qualification import qualify, write_qualification

    contract = ctx.contract()
    report = qualify(ctx.grounding(), contract.family, roles=dict(contract.roles),
                     on_probe=lambda variant, result: ctx.progress(f"probe {result.probe} on {variant.name}: "
                                                                   f"{'pass' if result.passed else 'fail'}"))
    path = write_qualification(report, ctx.task.qualification)
    if not report.passed:
        raise StageRejected(Stage.qualification, report.reason, Stage.grounding)
    return [path]


def run_judge(ctx: PipelineContext) -> list[Path]:
    """Stage 4: the judge-writer writes J; the harness accepts it only if it rejects the canned
    shortcuts of a scripted good episode, then freezes it (hash in the ledger)."""
    from datafarm.agents import StageFailed, judge_task
    from datafarm.agents.builtin import BuiltinRefusal
    from datafarm.agents.tools import JUDGE_DRAFT
    from datafarm.harness.judge import accept_judge, canned_shortcuts, freeze
    from datafarm.harness.judge.reference_episode import good_episode
    from datafarm.harness.seeds import create_secret

    try:
        ctx.agents.judge_writer().run(judge_task())
    except BuiltinRefusal as e:
        if e.kind == "not_built":
            raise StageNotBuilt(Stage.judge, str(e)) from None
        raise StageRejected(Stage.judge, str(e), Stage(e.route_to)) from None
    except StageFailed as e:
        raise StageRejected(Stage.judge, str(e)) from None
    grounding, contract = ctx.grounding(), ctx.contract()
    spec = load_artifact(JudgeSpec, ctx.task.root / JUDGE_DRAFT)
    good = good_episode(grounding, contract)
    report = accept_judge(spec, good, canned_shortcuts(good, grounding, contract), contract=contract)
    if not report.accepted:
        raise StageRejected(Stage.judge, report.reason)
    freeze(spec, ctx.task.judge_dir, ctx.ledger, contract=contract, grounding=grounding,
           acceptance=report.ledger_details())
    create_secret(ctx.task.root, ctx.ledger)
    return [ctx.task.judge_dir / "spec.json", ctx.task.judge_dir / "lock.json"]


def run_expert(ctx: PipelineContext) -> list[Path]:
    """Stage 5: the author writes C and iterates on dev seeds until B's dev pass rate."""
    from datafarm.harness.rollout import request_rollout

    batch = ctx.batch()
    rollout = functools.partial(request_rollout, ctx.task.root, sandbox=ctx.request.sandbox,
                                unsafe_no_sandbox=ctx.request.sandbox == "none")
    _author_stage(ctx, Stage.expert, rollout=rollout, dev_seeds=list(batch.dev_seeds))
    from datafarm.artifacts.expert import ExpertManifest

    manifest = load_artifact(ExpertManifest, ctx.task.artifact("expert"))
    rate = manifest.dev_pass_rate()
    if rate is None or rate < batch.dev_pass_rate:
        raise StageRejected(Stage.expert, f"dev pass rate {'none recorded' if rate is None else f'{rate:.0%}'} is below B's {batch.dev_pass_rate:.0%}")
    return [ctx.task.expert_dir / manifest.entry, ctx.task.artifact("expert")]


def run_admission_rollouts(ctx: PipelineContext) -> list[Path]:
    """Stage 6: fresh, sandboxed, judged rollouts on held-out admission seeds until n pass (within
    B's admission seed count)."""
    from datafarm.harness.rollout import RolloutJob, run_rollouts

    batch = ctx.batch()
    passed: list[Path] = []
    index = 0
    while len(passed) < batch.n and index < batch.admission_seed_count:
        wanted = min(batch.n - len(passed), batch.admission_seed_count - index)
        jobs = [RolloutJob("admission", index=i) for i in range(index, index + wanted)]
        index += wanted
        ctx.progress(f"admission rollouts {jobs[0].index}..{jobs[-1].index} ({len(passed)}/{batch.n} passed so far)")
        for result in run_rollouts(ctx.task.root, jobs, workers=batch.workers, sandbox=ctx.request.sandbox,
                                   unsafe_no_sandbox=ctx.request.sandbox == "none"):
            if result.summary.passed:
                passed.append(result.folder)
    if len(passed) < batch.n:
        raise StageRejected(Stage.rollout, f"only {len(passed)} of {batch.n} admission rollouts passed the judge "
                            f"within {batch.admission_seed_count} admission seeds", Stage.expert)
    return [p / "episode.json" for p in passed]


def run_render(ctx: PipelineContext) -> list[Path]:
    """Stage 7: the author writes R (once); the renderer R names turns every admitted episode not yet
    rendered into obs/ and sim/ videos; each render is a ledger entry recording the files it wrote."""
    if not ctx.task.render_contract.is_file():
        _author_stage(ctx, Stage.render, f"Renderer: {ctx.request.renderer}")
    episodes = sorted(p for p in ctx.task.episodes_dir.glob("*") if (p / "episode.json").is_file())
    for number, episode in enumerate(episodes, 1):
        if (episode / "render.json").is_file():
            continue  # rendered before a resume
        ctx.progress(f"rendering episode {number}/{len(episodes)} ({episode.name})")
        record_render(ctx.task, episode.name, ledger=ctx.ledger)
    return [ctx.task.render_contract]


def record_render(task: TaskDir, episode_id: str, *, ledger: Ledger | None = None, reason: str = ""):
    """Render one episode with the task's R and append a render entry recording every file written."""
    from datafarm.renderers import render_task_episode

    episode = task.episode(episode_id)
    record = render_task_episode(task.root, episode_id)
    written = [p for p in episode.rglob("*")
               if p.is_file() and (p.name == "render.json" or p.relative_to(episode).parts[0] in ("obs", "sim"))]
    (ledger or Ledger(task.ledger)).append(
        stage=Stage.render, event=LedgerEvent.render, outcome=LedgerOutcome.ok,
        reason=reason or f"rendered {episode_id} with {record.renderer}", actor=HARNESS,
        outputs=_hashes(task, written), details={"episode_id": episode_id, "renderer": record.renderer})
    return record


def _rendered_episodes(ctx: PipelineContext) -> list[Path]:
    return sorted(p for p in ctx.task.episodes_dir.glob("*") if (p / "render.json").is_file())


VERIFICATION = "verification.json"
"""The verifier's results for one episode, inside its folder (what q records)."""


def run_verify(ctx: PipelineContext) -> list[Path]:
    """Stage 8: calibrate the verifier spec once (every corruption of an accepted episode caught, the
    clean one passing; a spec that fails is not used), then verify every rendered episode."""
    from datafarm.artifacts.admission import VerifierResults
    from datafarm.verifiers import (
        CalibrationFailed, derive_spec, gather_evidence, load_calibration, load_spec, save_spec, verifier_files,
        verify_episode,
    )

    episodes = _rendered_episodes(ctx)
    if not episodes:
        raise StageRejected(Stage.verify, "no rendered episode to verify", Stage.render)
    calibrated = ctx.task.verifier_dir.joinpath("calibration.json").is_file() and load_calibration(ctx.task.root).passed
    if not calibrated:
        from datafarm.verifiers import calibrate

        spec = derive_spec(ctx.task.root)
        save_spec(ctx.task.root, spec)
        escaped = ""
        for episode in episodes:
            ctx.progress(f"calibrating the verifier on {episode.name}")
            try:
                calibrate(ctx.task.root, episode.name, spec,
                          evidence=gather_evidence(ctx.task.root, episode.name, spec))
                break
            except CalibrationFailed as e:
                escaped = str(e)
        else:
            raise StageRejected(Stage.verify, f"verifier calibration failed: {escaped}", Stage.render)
        ctx.ledger.append(stage=Stage.verify, event=LedgerEvent.check, outcome=LedgerOutcome.ok,
                          reason="verifier spec calibrated: every corruption caught, the clean episode passes",
                          actor=HARNESS, outputs=verifier_files(ctx.task.root))
    spec = load_spec(ctx.task.root)
    failed: list[str] = []
    for number, episode in enumerate(episodes, 1):
        path = episode / VERIFICATION
        if not path.is_file():
            ctx.progress(f"verifying episode {number}/{len(episodes)} ({episode.name})")
            results = verify_episode(ctx.task.root, episode.name, spec)
            save_artifact(results, path)
            files = verifier_files(ctx.task.root, episode.name)
            files[path.relative_to(ctx.task.root).as_posix()] = sha256_file(path)
            ctx.ledger.append(stage=Stage.verify, event=LedgerEvent.check,
                              outcome=LedgerOutcome.ok if results.passed else LedgerOutcome.fail,
                              reason=f"{episode.name}: {'all checks pass' if results.passed else 'checks failed'}",
                              actor=HARNESS, outputs=files, details={"episode_id": episode.name})
        if not load_artifact(VerifierResults, path).passed:
            failed.append(episode.name)
    if failed:
        raise StageRejected(Stage.verify, f"verifier checks failed for {', '.join(failed)}", Stage.render)
    return [ctx.task.verifier_dir / "spec.json", ctx.task.verifier_dir / "calibration.json"]


def run_admit(ctx: PipelineContext) -> list[Path]:
    """Stage 10: write q for every verified and reviewed episode, then check the whole dataset."""
    from datafarm.admission.admit import admit
    from datafarm.admission.record import write_admission
    from datafarm.artifacts.admission import ReviewVerdict, VerifierResults
    from datafarm.harness.judge.frozen import load_lock
    from datafarm.harness.rollout import RolloutReport

    lock = load_lock(ctx.task.judge_dir)
    for episode in _rendered_episodes(ctx):
        if (episode / "admission.json").is_file():
            continue
        report = load_artifact(RolloutReport, episode / "rollout.json")
        write_admission(ctx.task.root, episode.name, report.verdict, lock,
                        load_artifact(VerifierResults, episode / VERIFICATION),
                        load_artifact(ReviewVerdict, episode / "review.json"),
                        allow_unsafe_sandbox=False, actor=HARNESS)
    result = admit(ctx.task.root)
    if not result.ok:
        raise StageRejected(Stage.admit, result.render())
    return [ctx.task.certificate]


def run_review(ctx: PipelineContext) -> list[Path]:
    """Stage 9: the reviewer (its own context: decoded keyframes, real reference frames, a sim-state
    summary; never the author's transcript) gives a verdict per rendered episode. A rejected episode
    is recorded with the stage it routes to."""
    from datafarm.agents import ReviewMaterial, StageFailed, review_task
    from datafarm.agents.builtin.reviewer import state_summary
    from datafarm.artifacts.admission import ReviewVerdict
    from datafarm.artifacts.render_contract import RenderContract

    grounding = ctx.grounding()
    contract = load_artifact(RenderContract, ctx.task.render_contract)
    refs = {c.camera: list(c.frames) for c in contract.cameras}
    written: list[Path] = []
    rejected: list[str] = []
    episodes = _rendered_episodes(ctx)
    for number, episode in enumerate(episodes, 1):
        review_path = episode / "review.json"
        if not review_path.is_file():
            ctx.progress(f"reviewing episode {number}/{len(episodes)} ({episode.name})")
            summary = state_summary(episode, grounding, reference_frames=refs)
            try:
                ctx.agents.reviewer(ReviewMaterial(Path("episodes") / episode.name, summary, refs)).run(review_task())
            except StageFailed as e:
                raise StageRejected(Stage.review, f"{episode.name}: {e}") from None
        verdict = load_artifact(ReviewVerdict, review_path)
        ctx.ledger.append(stage=Stage.review, event=LedgerEvent.review,
                          outcome=LedgerOutcome.ok if verdict.accepted else LedgerOutcome.fail,
                          reason=f"{episode.name}: {'accepted' if verdict.accepted else 'rejected'}",
                          route_to=None if verdict.accepted else Stage.render, actor=HARNESS,
                          outputs=_hashes(ctx.task, [review_path]), details={"episode_id": episode.name})
        written.append(review_path)
        if not verdict.accepted:
            rejected.append(episode.name)
    if rejected:
        raise StageRejected(Stage.review, f"the reviewer rejected {', '.join(rejected)}", Stage.render)
    return written


RUNNERS: dict[Stage, Callable[[PipelineContext], list[Path]]] = {
    Stage.grounding: run_grounding,
    Stage.contract: run_contract,
    Stage.qualification: run_qualification,
    Stage.judge: run_judge,
    Stage.expert: run_expert,
    Stage.rollout: run_admission_rollouts,
    Stage.render: run_render,
    Stage.verify: run_verify,
    Stage.review: run_review,
    Stage.admit: run_admit,
}
"""Stages compile can run; the others are recorded as not implemented (see NOT_BUILT)."""

NOT_BUILT: dict[Stage, str] = {}
"""Stages whose producers are not built yet, with the issue that builds them."""


def run_pipeline(ctx: PipelineContext, *, stop_after: Stage | None = None) -> PipelineOutcome:
    """Run the stages in ORDER (skipping finished ones), recording each in the ledger; with
    `stop_after`, stop once that stage is done (for callers that drive the stages in steps)."""
    outcome = PipelineOutcome()
    done = _finished_stages(ctx.ledger)
    stages = ORDER if stop_after is None else ORDER[: ORDER.index(stop_after) + 1]
    for position, stage in enumerate(stages):
        if stage in done:
            outcome.skipped_done.append(stage)
            continue
        runner = RUNNERS.get(stage)
        if runner is None:
            _stop_not_built(ctx, outcome, ORDER[position:], NOT_BUILT.get(stage, "not implemented yet"))
            return outcome
        ctx.progress(f"stage {stage.value}")
        ctx.ledger.append(stage=stage, event=LedgerEvent.stage_started, outcome=LedgerOutcome.info,
                          reason=f"{stage.value} started", actor=HARNESS)
        try:
            outputs = runner(ctx)
        except StageNotBuilt as e:
            _stop_not_built(ctx, outcome, ORDER[position:], e.reason)
            return outcome
        except StageRejected as e:
            ctx.ledger.append(stage=stage, event=LedgerEvent.rejection, outcome=LedgerOutcome.fail, reason=e.reason,
                              route_to=e.route_to, actor=HARNESS)
            outcome.stopped_at, outcome.stop_reason = stage, f"rejected: {e.reason} (routes to {e.route_to.value})"
            return outcome
        except DatafarmError as e:
            # A checked failure inside a stage's producer (bad artifact, refused write): recorded as
            # a rejection of this stage, so the ledger says why compile stopped.
            ctx.ledger.append(stage=stage, event=LedgerEvent.rejection, outcome=LedgerOutcome.fail, reason=str(e),
                              route_to=stage, actor=HARNESS)
            outcome.stopped_at, outcome.stop_reason = stage, f"failed: {e}"
            return outcome
        except Exception as e:
            # A bug: record it before it propagates, so the ledger still tells the whole story.
            ctx.ledger.append(stage=stage, event=LedgerEvent.rejection, outcome=LedgerOutcome.error,
                              reason=f"internal error: {type(e).__name__}: {e}", route_to=stage, actor=HARNESS)
            raise
        ctx.ledger.append(stage=stage, event=LedgerEvent.stage_finished, outcome=LedgerOutcome.ok,
                          reason=f"{stage.value} accepted", actor=HARNESS, outputs=_hashes(ctx.task, outputs))
        outcome.finished.append(stage)
    return outcome


def _stop_not_built(ctx: PipelineContext, outcome: PipelineOutcome, rest: tuple[Stage, ...], reason: str) -> None:
    """Record the first unbuilt stage and every later one as not implemented, and stop."""
    first = rest[0]
    for stage in rest:
        why = reason if stage == first else NOT_BUILT.get(stage, f"waits for {first.value}")
        ctx.ledger.append(stage=stage, event=LedgerEvent.stage_not_implemented, outcome=LedgerOutcome.skipped,
                          reason=f"not implemented yet: {why}", actor=HARNESS)
        outcome.not_built[stage] = why
    outcome.stopped_at, outcome.stop_reason = first, f"not implemented yet: {reason}"
