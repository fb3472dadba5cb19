"""The compiler's stages after the request: each stage's producer, the component that accepts its
output, and the ledger entries that record both (DESIGN.md, "The compiler: stages and their checkers").

`run_pipeline` runs the first stage the ledger does not record as finished, again and again, so
`compile --resume` continues where a run stopped (even one killed with SIGKILL). A stage whose
producer is not built yet is recorded as `stage_not_implemented` and stops the pipeline.

Rejection routing. A rejected stage is recorded (`rejection`, with the stage it routes to) and the
work goes back to that stage while B's retry budget for it (`batch.retries`; DEFAULT_RETRIES before
B exists) is not spent; each route is a `route` entry (attempt k of the budget). A route to stage R
makes R and every stage after it unfinished again, so resume re-enters R too. Budget spent, or a
rejection no retry can change (a deterministic builtin's refusal, a verifier spec that fails
calibration): compile stops with the reason.

- Per-episode routes (a verifier check or the reviewer names `render`): only the failing episodes
  are redone. Their render, verification and review are set aside into `attempts/<id>/render-<k>/`
  (recorded: a `note` entry with every file's hash; nothing is deleted) and rendered again with a new
  render seed (recorded in the render entry), then verified and reviewed again. B's render budget
  is per episode: an episode whose budget is spent is rejected as a whole (its folder moves to
  `attempts/<id>/`, a `rejection` entry says why) and the rollout stage runs further admission seeds
  to replace it (a route to `rollout`).
- Routes to an earlier global stage (grounding, qualification, contract, judge, expert): every
  episode made under the old artifacts and not yet admitted is superseded (moved to `attempts/`,
  recorded); for grounding, qualification and contract, R and the calibrated verifier spec are
  set aside too, since they are derived from G and T. J is re-frozen only when the judge stage
  itself runs again and writes another J (`freeze` keeps the history admission checks).

Resume after SIGKILL. Every runner is idempotent on re-entry, and before each stage `_settle`
brings the task folder in line with the ledger: a move recorded but not finished is finished; an
episode folder, render, verification, review or q that the ledger does not record (a rollout or
render killed half-way, a file written just before the kill) is set aside, recorded, and redone,
never counted; an episode made before a route that supersedes it is moved out. Admitted work (an
episode whose q the ledger records) is never moved or redone.

Order note: qualification (stage 2) runs after the contract (stage 3) here, because the probes a task
needs are chosen from its family and roles, which the contract names.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import datafarm
from datafarm.admission.files import REVIEW_FILE, VERIFICATION_FILE
from datafarm.artifacts.batch import DEFAULT_RETRIES, BatchConfig
from datafarm.artifacts.contract import TaskContract
from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeSpec
from datafarm.artifacts.ledger_entry import (
    LedgerActor,
    LedgerEntry,
    LedgerEvent,
    LedgerOutcome,
)
from datafarm.artifacts.request import Request
from datafarm.artifacts.stages import Stage
from datafarm.errors import DatafarmError, InputError, Problem, StateError
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

GLOBAL_STAGES: tuple[Stage, ...] = (Stage.grounding, Stage.contract, Stage.qualification, Stage.judge, Stage.expert)
"""Stages whose artifacts every episode is made from: a route to one supersedes the episodes made so far."""
DERIVED_FROM_G_AND_T: tuple[Stage, ...] = (Stage.grounding, Stage.contract, Stage.qualification)
"""Routes to these also set R and the calibrated verifier spec aside (both are derived from G and T)."""


class StageRejected(DatafarmError):
    """A stage's output was refused by its checker (or its producer could not make one).

    `route_to` is the earliest stage responsible (default: the stage itself). `episodes` names, for a
    rejection of some episodes only (verify, review), each failing episode with the stage it routes to
    and why. `final` says no retry can change the outcome (compile stops whatever the budget)."""

    exit_code = 5

    def __init__(self, stage: Stage, reason: str, route_to: Stage | None = None, *,
                 episodes: Mapping[str, tuple[Stage, str]] | None = None, final: bool = False) -> None:
        self.stage = stage
        self.reason = reason
        self.route_to = route_to or stage
        self.episodes = dict(episodes or {})
        self.final = final
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

    def retry_budgets(self) -> dict[Stage, int]:
        """B's retry budget per stage a rejection can return to (DEFAULT_RETRIES before B exists)."""
        if self.task.batch.is_file():
            return dict(self.batch().retries)
        return dict(DEFAULT_RETRIES)


@dataclass
class PipelineOutcome:
    """Where compile got to."""

    finished: list[Stage] = field(default_factory=list)
    """Stages that finished in this call, in order (a stage re-entered after a route appears again)."""
    skipped_done: list[Stage] = field(default_factory=list)
    """Stages the ledger already recorded as finished (resume)."""
    stopped_at: Stage | None = None
    """The stage that stopped the pipeline, if any."""
    stop_reason: str = ""
    """Why it stopped."""
    not_built: dict[Stage, str] = field(default_factory=dict)
    """Stages not built yet (the first stops the pipeline; the rest are listed, not run)."""
    routes: list[str] = field(default_factory=list)
    """Every route taken in this call, in words (the ledger has them as `route` entries)."""


def finished_stages(entries: Iterable[LedgerEntry]) -> set[Stage]:
    """Stages the ledger records as finished and not re-opened since: a `route` to stage R makes R and
    every stage after it in ORDER unfinished again."""
    done: set[Stage] = set()
    for e in entries:
        if e.event == LedgerEvent.stage_finished and e.outcome == LedgerOutcome.ok and e.stage in ORDER:
            done.add(e.stage)
        elif e.event == LedgerEvent.route and e.route_to in ORDER:
            done -= set(ORDER[ORDER.index(e.route_to):])
    return done


def _hashes(task: TaskDir, paths: list[Path]) -> dict[str, str]:
    return {p.relative_to(task.root).as_posix(): sha256_file(p) for p in paths if p.is_file()}


def _rel(task: TaskDir, path: Path) -> str:
    return path.relative_to(task.root).as_posix()


# --- what the ledger says about each episode -------------------------------------------------------

VERIFICATION = VERIFICATION_FILE
"""The verifier's results for one episode, inside its folder (what q records; named in admission.files)."""
REVIEW = REVIEW_FILE
"""The reviewer's verdict for one episode, inside its folder (named in admission.files)."""
ADMISSION = "admission.json"
"""q, inside the episode folder."""

LAYERS: tuple[str, ...] = ("render", "verify", "review", "admission")
"""What the stages after the rollout add to an episode folder, in order; each depends on the one before."""
LAYER_FILES: dict[str, tuple[str, ...]] = {
    "render": ("render.json", "obs", "sim"),
    "verify": (VERIFICATION, "verifier"),
    "review": (REVIEW,),
    "admission": (ADMISSION,),
}
"""Each layer's files and folders in the episode folder; the first is the file its ledger entry records."""

SET_ASIDE = "set_aside"
"""Details `action` of a note that moves some of a live episode's files to `attempts/<id>/<label>/`."""
SET_ASIDE_TASK = "set_aside_task"
"""Details `action` of a note that moves R and the verifier spec aside after a route to G or T."""
REMOVALS: tuple[str, ...] = ("reject", "supersede", "surplus", "interrupted_rollout")
"""Details `action` of entries that move a whole episode folder out of `episodes/`."""
UNRECORDED_ATTEMPT = "unrecorded_attempt"
"""Details `action` of a note that records an attempt folder a killed rollout left without its entry."""


@dataclass
class EpisodeBook:
    """What the ledger says about one episode id, read in ledger order."""

    episode_id: str
    rollout: LedgerEntry | None = None
    """The passing admission rollout that wrote `episodes/<id>`."""
    recorded: dict[str, LedgerEntry] = field(default_factory=dict)
    """Layer -> the entry that recorded its current files (cleared when the layer is set aside)."""
    render_routes: int = 0
    """Routes that sent this episode back to render (its render attempt is this + 1)."""
    render_stale: bool = False
    """A route to render came after the current render: set it aside and render again."""
    set_asides: int = 0
    """How many times some of its files were set aside (numbers the folders)."""
    removed: LedgerEntry | None = None
    """The entry that took the whole folder out of `episodes/` (rejected, superseded...)."""

    @property
    def admitted(self) -> bool:
        """True when the ledger records its q (admitted work is never moved or redone)."""
        return "admission" in self.recorded

    @property
    def admission_index(self) -> int | None:
        """The admission seed index of its rollout."""
        index = self.rollout.details.get("admission_index") if self.rollout is not None else None
        return index if isinstance(index, int) and not isinstance(index, bool) else None


def _layer_of(entry: LedgerEntry) -> str | None:
    if entry.event == LedgerEvent.render and entry.stage == Stage.render:
        return "render"
    if entry.event == LedgerEvent.check and entry.stage == Stage.verify:
        return "verify"
    if entry.event == LedgerEvent.review:
        return "review"
    if entry.event == LedgerEvent.admission and entry.stage == Stage.admit and entry.outcome == LedgerOutcome.ok:
        return "admission"
    return None


def episode_books(entries: Iterable[LedgerEntry]) -> dict[str, EpisodeBook]:
    """Episode id -> its book, for every episode id the ledger names."""
    books: dict[str, EpisodeBook] = {}
    for e in entries:
        eid = e.details.get("episode_id")
        if not isinstance(eid, str):
            continue
        book = books.setdefault(eid, EpisodeBook(eid))
        action = e.details.get("action")
        if (e.event == LedgerEvent.rollout and e.stage == Stage.rollout and e.outcome == LedgerOutcome.ok
                and e.details.get("folder") == f"episodes/{eid}"):
            book.rollout = e
        elif (layer := _layer_of(e)) is not None:
            book.recorded[layer] = e
        elif e.event == LedgerEvent.route and e.route_to == Stage.render:
            book.render_routes += 1
            book.render_stale = True
        elif action == SET_ASIDE:
            book.set_asides += 1
            for layer in e.details.get("layers") or []:
                book.recorded.pop(str(layer), None)
            if "render" in (e.details.get("layers") or []):
                book.render_stale = False
        elif action in REMOVALS:
            book.removed = e
    return books


def render_seed(episode_id: str, attempt: int) -> int:
    """The render seed of render attempt `attempt` >= 2 of an episode (attempt 1 renders with z's
    seed). Derived from the episode id, not from z, so the ledger can show it without showing an
    admission seed."""
    digest = hashlib.sha256(f"datafarm render seed/{episode_id}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class AdmissionTally:
    """Admission rollouts as the ledger records them, against the current J and expert."""

    judge_sha: str | None
    """The J of the latest freeze."""
    expert_seq: int
    """Seq of the latest `stage_finished` of the expert (-1: none): later rollouts ran the current C."""
    ran: frozenset[int]
    """Admission indices with any rollout entry."""
    passed: frozenset[int]
    """Indices that passed under the current J (never run again: the same scene twice)."""
    ran_current_expert: frozenset[int]
    """Indices the current C already ran (any outcome)."""
    failures: int
    """Admission rollouts that failed under the current C and J."""


def admission_tally(entries: Iterable[LedgerEntry]) -> AdmissionTally:
    """Read the admission rollouts, the latest freeze and the latest expert from the ledger."""
    judge_sha, expert_seq = None, -1
    rollouts: list[LedgerEntry] = []
    for e in entries:
        if e.event == LedgerEvent.freeze:
            judge_sha = str(e.details.get("spec_sha256"))
        elif e.event == LedgerEvent.stage_finished and e.stage == Stage.expert and e.outcome == LedgerOutcome.ok:
            expert_seq = e.seq
        elif (e.event == LedgerEvent.rollout and e.stage == Stage.rollout
              and e.details.get("seed_kind") == "admission" and isinstance(e.details.get("admission_index"), int)):
            rollouts.append(e)
    ran, passed, current, failures = set(), set(), set(), 0
    for e in rollouts:
        index = int(e.details["admission_index"])  # type: ignore[arg-type]
        ran.add(index)
        under_j = e.inputs.get("judge/spec.json") == judge_sha
        if e.outcome == LedgerOutcome.ok and under_j:
            passed.add(index)
        if e.seq > expert_seq:
            current.add(index)
            if e.outcome != LedgerOutcome.ok and under_j and "episode_id" in e.details:
                failures += 1
    return AdmissionTally(judge_sha, expert_seq, frozenset(ran), frozenset(passed), frozenset(current), failures)


# --- moving work aside, recorded first -------------------------------------------------------------
#
# A move is recorded before it is made (the entry lists every file with its hash, where it was and
# where it goes) and then made; `_finish_move` makes whatever a recorded move has not made yet, so a
# SIGKILL between the two is finished on resume. Nothing is deleted.


def _files(folder: Path) -> list[Path]:
    """Every file (and link) below `folder`, sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_symlink() or p.is_file())


def _record_move(ctx: PipelineContext | _Folder, stage: Stage, files: list[Path], source: Path, dest: Path, *,
                 action: str, reason: str, event: LedgerEvent = LedgerEvent.note,
                 outcome: LedgerOutcome = LedgerOutcome.info, route_to: Stage | None = None,
                 details: Mapping[str, object] | None = None) -> LedgerEntry:
    """Record moving `files` (below `source`) to the same places below `dest`, then move them."""
    task = ctx.task
    inputs, outputs = {}, {}
    for path in files:
        digest = sha256_file(path) if path.is_file() else hashlib.sha256(os.readlink(path).encode()).hexdigest()
        inputs[_rel(task, path)] = digest
        outputs[_rel(task, dest / path.relative_to(source))] = digest
    entry = ctx.ledger.append(
        stage=stage, event=event, outcome=outcome, reason=reason, actor=HARNESS, route_to=route_to,
        inputs=inputs, outputs=outputs,
        details={**(details or {}), "action": action, "from": _rel(task, source), "folder": _rel(task, dest)})
    _finish_move(task, entry)
    return entry


def _finish_move(task: TaskDir, entry: LedgerEntry) -> None:
    """Make the moves `entry` recorded that are not made yet (a file still at its place with its
    recorded hash, nothing at its destination), prune the folders left empty and leave the reason
    beside the moved files."""
    source, dest = str(entry.details["from"]), str(entry.details["folder"])
    moved = False
    for rel, digest in entry.inputs.items():
        src = task.root / rel
        dst = task.root / dest / (rel if source in ("", ".") else Path(rel).relative_to(source))
        if os.path.lexists(dst) or not os.path.lexists(src):
            continue
        same = (sha256_file(src) if src.is_file() and not src.is_symlink()
                else hashlib.sha256(os.readlink(src).encode()).hexdigest() if src.is_symlink() else None)
        if same != digest:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        moved = True
    src_root = task.root / source
    keep = src_root if entry.details.get("action") in (SET_ASIDE, SET_ASIDE_TASK) else src_root.parent
    for rel in entry.inputs:
        _prune_empty(task.root / rel, stop=keep)
    note = task.root / dest / "reason.json"
    if (moved or (task.root / dest).is_dir()) and not note.exists():
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(json.dumps({"reason": entry.reason, "action": entry.details.get("action"),
                                    "stage": entry.stage.value, "route_to": entry.route_to.value if entry.route_to else None,
                                    "ledger_seq": entry.seq, "from": source}, indent=2) + "\n", encoding="utf-8")


def _prune_empty(path: Path, *, stop: Path) -> None:
    """Remove the folders above `path` that are empty, up to (not including) `stop`."""
    folder = path.parent
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _aside_folder(task: TaskDir, episode_id: str, label: str) -> Path:
    """`attempts/<id>/<label>`, numbered on past any folder of that name already there."""
    base = task.attempts_dir / episode_id
    folder, n = base / label, 1
    while folder.exists():
        n += 1
        folder = base / f"{label}.{n}"
    return folder


def _set_aside(ctx: PipelineContext | _Folder, stage: Stage, episode_id: str, files: list[Path], label: str, reason: str,
               layers: Iterable[str], **details: object) -> LedgerEntry:
    """Move some files of a live episode to `attempts/<id>/<label>/`, recorded (a `note`)."""
    folder = ctx.task.episode(episode_id)
    return _record_move(ctx, stage, files, folder, _aside_folder(ctx.task, episode_id, label), action=SET_ASIDE,
                        reason=reason, details={"episode_id": episode_id, "layers": list(layers), **details})


def remove_episode(ctx: PipelineContext, stage: Stage, episode_id: str, action: str, reason: str, *,
                   route_to: Stage | None = None, **details: object) -> LedgerEntry:
    """Move a whole episode folder from `episodes/` into `attempts/<id>/` (beside any attempts set aside
    before), recorded as a `rejection` naming the episode: rejected attempts stay, with their reason."""
    folder = ctx.task.episode(episode_id)
    if action not in REMOVALS:
        raise ValueError(f"unknown removal {action!r}")
    event = LedgerEvent.note if action == "interrupted_rollout" else LedgerEvent.rejection
    outcome = LedgerOutcome.info if action == "interrupted_rollout" else LedgerOutcome.fail
    entry = _record_move(ctx, stage, _files(folder), folder, ctx.task.attempts_dir / episode_id, action=action,
                         reason=reason, event=event, outcome=outcome, route_to=route_to,
                         details={"episode_id": episode_id, **details})
    _remove_empty_tree(folder)
    return entry


def _remove_empty_tree(folder: Path) -> None:
    """Remove `folder` if it holds folders only (no file, no link): nothing of value is lost."""
    if not folder.is_dir() or folder.is_symlink() or _files(folder):
        return
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        sub.rmdir()
    folder.rmdir()


# --- bringing the task folder in line with the ledger ----------------------------------------------


def _is_hidden(path: Path, folder: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(folder).parts)


def _latest_global_route(entries: list[LedgerEntry], targets: tuple[Stage, ...]) -> LedgerEntry | None:
    routes = [e for e in entries if e.event == LedgerEvent.route and e.route_to in targets
              and "episode_id" not in e.details]
    return routes[-1] if routes else None


def _settle(ctx: PipelineContext, stage: Stage) -> None:
    """Bring the task folder in line with the ledger before `stage` runs (see the module docstring);
    every move is recorded first. Idempotent: a second call finds nothing to do."""
    task = ctx.task
    entries = list(ctx.ledger.entries())
    # 1. moves recorded but not (all) made: a kill between the record and the move
    for e in entries:
        if e.details.get("action") in (SET_ASIDE, SET_ASIDE_TASK, *REMOVALS) and "from" in e.details:
            _finish_move(task, e)
    books = episode_books(entries)

    # 2. a route to a global stage supersedes the episodes made before it (not admitted ones)
    route = _latest_global_route(entries, GLOBAL_STAGES)
    if route is not None:
        for eid, book in sorted(books.items()):
            if (book.rollout is not None and book.removed is None and not book.admitted
                    and book.rollout.seq < route.seq and task.episode(eid).is_dir()):
                remove_episode(ctx, stage, eid, "supersede",
                               f"{eid}: made under the artifacts a route back to {route.route_to.value} "
                               f"(ledger seq {route.seq}) replaces; superseded, kept in attempts/",
                               route_to=route.route_to, route_seq=route.seq)
    # ... and one to G or T sets R and the calibrated verifier spec aside (derived from them)
    route = _latest_global_route(entries, DERIVED_FROM_G_AND_T)
    if route is not None and not any(e.details.get("action") == SET_ASIDE_TASK and e.details.get("route_seq") == route.seq
                                     for e in entries):
        # recorded even when there is nothing to move yet, so an R written after the route is kept
        stale = [p for p in (task.render_contract, *_files(task.verifier_dir)) if os.path.lexists(p)]
        dest = task.attempts_dir / f"route-{route.seq}-{route.route_to.value}"
        _record_move(ctx, stage, stale, task.root, dest, action=SET_ASIDE_TASK,
                     reason=f"R and the verifier spec are derived from G and T, which the route back to "
                            f"{route.route_to.value} (ledger seq {route.seq}) redoes: "
                            + (f"set aside to {_rel(task, dest)}, made again" if stale else "none made yet"),
                     details={"route_seq": route.seq})
        _remove_empty_tree(task.verifier_dir)

    books = episode_books(ctx.ledger.entries())
    # 3. episode folders no passing rollout entry wrote: a rollout killed between its rename and its entry
    if task.episodes_dir.is_dir():
        for folder in sorted(task.episodes_dir.iterdir()):
            eid = folder.name
            if not folder.is_dir() or folder.is_symlink():
                continue  # not an episode folder: admission names it, nothing here to redo
            if folder.name.startswith("."):  # a rollout's staging folder: kept in attempts/, never counted
                dest = task.attempts_dir / folder.name
                ctx.ledger.append(stage=stage, event=LedgerEvent.note, outcome=LedgerOutcome.info, actor=HARNESS,
                                  reason=f"episodes/{folder.name}: staging folder of a rollout that was killed "
                                         "half-way; moved to attempts/, not counted",
                                  details={"action": UNRECORDED_ATTEMPT, "folder": _rel(task, dest)})
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(folder, dest)
                continue
            book = books.get(eid)
            if book is not None and book.removed is not None:
                # a removed episode's folder is back or not empty: what is left joins it, kept apart
                if _files(folder):
                    _record_move(ctx, stage, _files(folder), folder, _aside_folder(task, eid, "leftover"),
                                 action=str(book.removed.details.get("action")), event=LedgerEvent.rejection,
                                 outcome=LedgerOutcome.fail,
                                 reason=f"episodes/{eid}: files left after the episode was moved out "
                                        f"(ledger seq {book.removed.seq}); kept in attempts/",
                                 details={"episode_id": eid})
                _remove_empty_tree(folder)
            elif book is None or book.rollout is None:
                remove_episode(ctx, stage, eid, "interrupted_rollout",
                               f"episodes/{eid}: written by a rollout that was killed before the ledger recorded it; "
                               "moved to attempts/, not counted (its admission seed runs again)")
    # ... and attempt folders nothing records (a dev or failed rollout killed the same way)
    mentioned = {str(v) for e in ctx.ledger.entries() for v in (e.details.get("episode_id"), e.details.get("folder"))
                 if v}
    if task.attempts_dir.is_dir():
        for folder in sorted(task.attempts_dir.iterdir()):
            if folder.name.startswith(".") or folder.name in mentioned or _rel(task, folder) in mentioned:
                continue
            ctx.ledger.append(stage=stage, event=LedgerEvent.note, outcome=LedgerOutcome.info, actor=HARNESS,
                              reason=f"attempts/{folder.name}: written by a rollout that was killed before the ledger "
                                     "recorded it; kept, not counted",
                              details={"action": UNRECORDED_ATTEMPT, "episode_id": folder.name,
                                       "folder": _rel(task, folder)})

    # 4. each live episode: leftovers of a killed write, layers the ledger does not record, a stale render
    books = episode_books(list(ctx.ledger.entries()))
    for eid, book in sorted(books.items()):
        folder = task.episode(eid)
        if book.rollout is None or book.removed is not None or book.admitted or not folder.is_dir():
            continue
        hidden = [p for p in _files(folder) if _is_hidden(p, folder)]
        if hidden:
            _set_aside(ctx, stage, eid, hidden, "interrupted",
                       f"{eid}: files a write killed half-way left (temporary names); set aside, not counted", [])
        for sub in sorted((p for p in folder.rglob(".*") if p.is_dir()), key=lambda p: -len(p.parts)):
            _remove_empty_tree(sub)  # a killed render's empty scratch folders: nothing in them to keep
        bad = _first_unrecorded_layer(task, book)
        if bad is None:
            continue
        layers = LAYERS[LAYERS.index(bad):]
        files = _layer_files(folder, layers)
        if bad == "render" and book.render_stale and "render" in book.recorded:
            label = f"render-{book.render_routes}"
            why = (f"{eid}: render attempt {book.render_routes} was routed back to render; its render, verification "
                   f"and review are set aside to attempts/{eid}/{label}/ and it is rendered again")
        elif not files:
            continue
        else:
            label = "interrupted"
            present = [layer for layer in layers if any(os.path.lexists(folder / n) for n in LAYER_FILES[layer])]
            why = (f"{eid}: its {', '.join(present)} files are not what the ledger recorded (a stage killed before "
                   "it recorded them) or were made from an earlier version of what they depend on; set aside and "
                   "redone, not counted")
        if files:
            _set_aside(ctx, stage, eid, files, label, why, layers)
        else:  # nothing on disk to move (a render that is gone): the layer still has to be redone
            ctx.ledger.append(stage=stage, event=LedgerEvent.note, outcome=LedgerOutcome.info, actor=HARNESS,
                              reason=why, details={"action": SET_ASIDE, "episode_id": eid, "layers": list(layers)})


def _layer_files(folder: Path, layers: Iterable[str]) -> list[Path]:
    """The files of `layers` (LAYER_FILES) present in the episode folder `folder`."""
    return [p for layer in layers for name in LAYER_FILES[layer]
            for p in ([folder / name] if (folder / name).is_file() else _files(folder / name))]


def _first_unrecorded_layer(task: TaskDir, book: EpisodeBook) -> str | None:
    """The first layer of a live episode whose files the ledger does not record as they are, that a
    route made stale, or that was recorded before the layer it depends on (a verification of an
    earlier render); every later layer goes with it. None when all is as recorded."""
    folder = task.episode(book.episode_id)
    missing, after = False, -1
    for layer in LAYERS:
        names = LAYER_FILES[layer]
        present = any(os.path.lexists(folder / name) for name in names)
        entry = book.recorded.get(layer)
        if layer == "render" and book.render_stale:
            return layer
        if not present:
            if entry is not None and layer != "admission":
                return layer  # recorded but gone: redo it (and what depends on it)
            missing = True
            continue
        key = folder / names[0]
        recorded = entry.outputs.get(f"episodes/{book.episode_id}/{names[0]}") if entry is not None else None
        if missing or not key.is_file() or recorded != sha256_file(key) or entry is None or entry.seq < after:
            return layer
        after = entry.seq
    return None


def live_episodes(ctx: PipelineContext) -> list[EpisodeBook]:
    """The episodes in `episodes/` a passing admission rollout under the current J wrote, not removed
    (after `_settle`, every folder there), by admission index."""
    entries = list(ctx.ledger.entries())
    judge = admission_tally(entries).judge_sha
    books = [b for b in episode_books(entries).values()
             if b.rollout is not None and b.removed is None and ctx.task.episode(b.episode_id).is_dir()
             and (judge is None or b.rollout.inputs.get("judge/spec.json") == judge)]
    return sorted(books, key=lambda b: (b.admission_index if b.admission_index is not None else 1 << 30, b.episode_id))


def _require_full_set(ctx: PipelineContext, stage: Stage) -> list[EpisodeBook]:
    """The live episodes; a rejection routing to rollout when fewer than B's n are left (an episode
    rejected as a whole whose route was not recorded before a kill)."""
    live, n = live_episodes(ctx), ctx.batch().n
    if len(live) < n:
        raise StageRejected(stage, f"{len(live)} of B's n={n} episodes are left in episodes/; the rollout stage "
                            "runs further admission seeds to replace the others", Stage.rollout)
    return live


# --- the stage runners -------------------------------------------------------------------------------


def _refused(stage: Stage, refusal) -> StageRejected:
    """A builtin agent's refusal as a rejection no retry changes (the builtin is deterministic)."""
    return StageRejected(stage, f"{refusal} (the builtin {refusal.kind}: it is deterministic, so a retry gives the "
                         "same answer)", Stage(refusal.route_to), final=True)


def _author_stage(ctx: PipelineContext, stage: Stage, instructions: str = "", **author_options) -> None:
    """Run one author stage through the agent roles, translating the builtin's refusals."""
    from datafarm.agents import StageFailed, author_task
    from datafarm.agents.builtin import BuiltinRefusal

    try:
        ctx.agents.author(**author_options).run(author_task(stage, instructions))
    except BuiltinRefusal as e:
        if e.kind == "not_built":
            raise StageNotBuilt(stage, str(e)) from None
        raise _refused(stage, e) from None
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
    shortcuts of a scripted good episode, then freezes it (hash in the ledger). Freezing the J that is
    already frozen writes nothing: a J is re-frozen only when the judge-writer wrote another one."""
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
        raise _refused(Stage.judge, e) from None
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
    """Stage 6: fresh, sandboxed, judged rollouts on held-out admission seeds until n episodes pass.

    Read from the ledger, so a re-entry (resume, or a route back here to replace a rejected episode)
    continues: an index that passed under the current J never runs again, one the current C already
    ran is not run again by it (a new C may retry an index an older C failed), and an index a killed
    run left without an entry runs again (admission requires every index up to the highest used to
    have an outcome; a passing one beyond n is set aside as surplus, whatever it shows). More than
    B.retries[rollout] failures under the current C, or no index left to run, route to the expert."""
    from datafarm.harness.rollout import RolloutJob, run_rollouts

    batch = ctx.batch()
    budget = batch.retries[Stage.rollout]
    count = batch.admission_seed_count
    outputs: list[Path] = []
    while True:
        tally = admission_tally(ctx.ledger.entries())
        live = live_episodes(ctx)
        need = batch.n - len(live)
        gaps = [i for i in range(max(tally.ran, default=-1)) if i not in tally.ran]
        if need <= 0 and not gaps:
            break
        if need > 0 and tally.failures > budget:
            raise StageRejected(Stage.rollout, f"{tally.failures} admission rollouts of the current expert failed the "
                                f"judge; B tolerates {budget} before the expert is revised", Stage.expert)
        candidates = [i for i in range(count) if i not in tally.passed and i not in tally.ran_current_expert]
        if need > 0 and not candidates:
            retry = [i for i in range(count) if i not in tally.passed]
            raise StageRejected(
                Stage.rollout, f"{len(live)} of {batch.n} episodes passed and no admission seed is left for this "
                f"expert among B's {count}" + ("" if retry else "; every seed already passed once, so a new expert "
                                               "cannot help either"), Stage.expert, final=not retry)
        jobs = sorted(set(gaps) | set(candidates[:max(need, 0)]))
        ctx.progress(f"admission rollouts #{', #'.join(map(str, jobs))} ({len(live)}/{batch.n} passed so far)")
        results = run_rollouts(ctx.task.root, [RolloutJob("admission", index=i) for i in jobs], workers=batch.workers,
                               sandbox=ctx.request.sandbox, unsafe_no_sandbox=ctx.request.sandbox == "none")
        keep = batch.n - len(live)
        for result in sorted((r for r in results if r.in_episodes), key=lambda r: r.admission_index or 0):
            if keep > 0:
                keep -= 1
                outputs.append(result.folder / "episode.json")
            else:  # decided by position alone, never by what the episode shows
                remove_episode(ctx, Stage.rollout, result.episode_id, "surplus",
                               f"{result.episode_id}: admission seed #{result.admission_index} ran to fill a gap a "
                               f"killed run left, after B's n={batch.n} episodes had passed; set aside as surplus")
    return outputs or [ctx.task.episode(b.episode_id) / "episode.json" for b in live_episodes(ctx)]


def run_render(ctx: PipelineContext) -> list[Path]:
    """Stage 7: the author writes R (once; again after a route to G or T set it aside); the renderer R
    names renders every live episode that has no render yet: render attempt k > 1 (after a route back
    here) with a new render seed. Each render is a ledger entry recording the files it wrote."""
    if not ctx.task.render_contract.is_file():
        _author_stage(ctx, Stage.render, f"Renderer: {ctx.request.renderer}")
    live = _require_full_set(ctx, Stage.render)
    todo = [b for b in live if not (ctx.task.episode(b.episode_id) / "render.json").is_file()]
    for number, book in enumerate(todo, 1):
        attempt = book.render_routes + 1
        seed = render_seed(book.episode_id, attempt) if attempt > 1 else None
        ctx.progress(f"rendering episode {number}/{len(todo)} ({book.episode_id}, render attempt {attempt})")
        record_render(ctx.task, book.episode_id, ledger=ctx.ledger, seed=seed, attempt=attempt)
    return [ctx.task.render_contract]


def record_render(task: TaskDir, episode_id: str, *, ledger: Ledger | None = None, reason: str = "",
                  seed: int | None = None, attempt: int | None = None):
    """Render one episode with the task's R (`seed`: the render seed, default z's) and append a render
    entry recording every file written, the render attempt and a seed other than z's."""
    from datafarm.renderers import render_task_episode

    episode = task.episode(episode_id)
    record = render_task_episode(task.root, episode_id, seed=seed)
    written = [p for p in episode.rglob("*")
               if p.is_file() and (p.name == "render.json" or p.relative_to(episode).parts[0] in ("obs", "sim"))]
    details: dict[str, object] = {"episode_id": episode_id, "renderer": record.renderer}
    if attempt is not None:
        details["render_attempt"] = attempt
    if seed is not None:  # z's own seed is an admission seed: never shown in the ledger
        details["render_seed"] = seed
    what = f" (render attempt {attempt}, render seed {seed})" if seed is not None else ""
    (ledger or Ledger(task.ledger)).append(
        stage=Stage.render, event=LedgerEvent.render, outcome=LedgerOutcome.ok,
        reason=reason or f"rendered {episode_id} with {record.renderer}{what}", actor=HARNESS,
        outputs=_hashes(task, written), details=details)
    return record


@dataclass
class _Folder:
    """A task folder and its ledger: what moving files aside needs (no request, no agents)."""

    task: TaskDir
    ledger: Ledger


RERENDER_LABEL = "rerender"
"""Folder under `attempts/<id>/` that `datafarm render --episode` moves an episode's old render to."""


def rerender_episode(task: TaskDir, episode_id: str):
    """`datafarm render TASK --episode ID`: render one live episode again with the task's R as it is now
    (after R was changed, say), as a new render entry in the ledger. Its current render and the
    verification and review made of it are first moved to `attempts/<id>/rerender[.k]/`, recorded, so
    nothing is lost and `datafarm compile --resume` verifies and reviews the new render. Holds the
    task's compile lock. StateError, with nothing changed, for an episode that is not live (no passing
    admission rollout wrote it, or it was moved out) or that is admitted (its q records its videos)."""
    from datafarm.compiler import compile_lock

    ledger = Ledger(task.ledger)
    if not ledger.exists():  # not a task folder: nothing is written there, not even the lock
        raise InputError([Problem(f"no task folder here (no {task.ledger.name}); give the folder `datafarm "
                                  "compile` created (it prints its path)", file=task.root)])
    with compile_lock(task):
        books = episode_books(ledger.entries())
        book, folder = books.get(episode_id), task.episode(episode_id)
        live = sorted(b.episode_id for b in books.values()
                      if b.rollout is not None and b.removed is None and task.episode(b.episode_id).is_dir())
        if book is None or book.rollout is None or book.removed is not None or not folder.is_dir():
            raise StateError(f"{folder}: not a live episode of this task (the ledger records no passing admission "
                             "rollout that wrote it, or it was moved to attempts/); nothing was changed. Live episodes: "
                             + (", ".join(live) or "none"))
        if book.admitted:
            raise StateError(f"{folder}: admitted ({ADMISSION} records the sha256 of its videos); rendering it again "
                             "would take it out of the certified dataset, so nothing was changed. To render the task "
                             "differently, compile its request again into another folder (--out)")
        layers = ("render", "verify", "review")
        files = _layer_files(folder, layers)
        if files:
            _set_aside(_Folder(task, ledger), Stage.render, episode_id, files, RERENDER_LABEL,
                       f"{episode_id}: rendered again on request (datafarm render --episode); its render, "
                       "verification and review are kept in attempts/", layers)
        record = record_render(task, episode_id, ledger=ledger, reason=f"{episode_id}: rendered again on request "
                               "(datafarm render --episode) with the task's R as it is now")
        # reopens verify and the stages after it for `compile --resume`; an episode's route, so no
        # stage's retry budget is spent on it
        ledger.append(stage=Stage.render, event=LedgerEvent.route, outcome=LedgerOutcome.info, route_to=Stage.verify,
                      reason=f"{episode_id}: rendered again on request; compile --resume verifies, reviews and "
                             "admits the new render", actor=HARNESS,
                      details={"episode_id": episode_id, "action": RERENDER_LABEL})
        return record


def _earliest(stages: Iterable[Stage | None], default: Stage) -> Stage:
    known = [s for s in stages if s in ORDER]
    return min(known, key=ORDER.index) if known else default


def _calibrated(ctx: PipelineContext) -> bool:
    """True when `verifier/calibration.json` passed and the ledger recorded it and the spec as they are."""
    from datafarm.verifiers import load_calibration

    calibration, spec = ctx.task.verifier_dir / "calibration.json", ctx.task.verifier_dir / "spec.json"
    if not (calibration.is_file() and spec.is_file()):
        return False
    try:
        if not load_calibration(ctx.task.root).passed:
            return False
    except InputError:
        return False
    recorded = [e for e in ctx.ledger.entries() if e.event == LedgerEvent.check and e.stage == Stage.verify
                and "episode_id" not in e.details and e.outcome == LedgerOutcome.ok]
    return bool(recorded) and recorded[-1].outputs.get("verifier/calibration.json") == sha256_file(calibration) \
        and recorded[-1].outputs.get("verifier/spec.json") == sha256_file(spec)


CALIBRATION_ESCAPE_TRIES = 2
"""Episodes calibration is tried on while corruptions escape the spec: an escape on one episode can be
that episode's (too little motion to shift), on two it is the spec's (a calibration takes minutes)."""


def _calibrate(ctx: PipelineContext, episodes: list[str]) -> None:
    """Calibrate the verifier spec on the first episode whose clean render passes and catches every
    corruption (a spec that fails is not used). None does: episodes whose clean render failed are routed
    back to render; if corruptions escaped on CALIBRATION_ESCAPE_TRIES episodes (or on every episode
    tried), the spec is at fault: no retry changes that."""
    from datafarm.verifiers import (
        CalibrationFailed,
        calibrate,
        derive_spec,
        gather_evidence,
        save_spec,
        verifier_files,
    )

    spec = derive_spec(ctx.task.root)
    save_spec(ctx.task.root, spec)
    clean_failed: dict[str, tuple[Stage, str]] = {}
    escaped: list[str] = []
    for eid in episodes:
        ctx.progress(f"calibrating the verifier on {eid}")
        try:
            report = calibrate(ctx.task.root, eid, spec, evidence=gather_evidence(ctx.task.root, eid, spec))
        except CalibrationFailed as e:
            summary = e.report.summary().replace("\n", "; ")
            ctx.ledger.append(stage=Stage.verify, event=LedgerEvent.note, outcome=LedgerOutcome.fail,
                              reason=f"verifier calibration on {eid} failed: {summary}", actor=HARNESS,
                              details={"calibration_episode": eid, "escaped": list(e.report.escaped),
                                       "clean_failures": [c.value for c in e.report.clean_failures]})
            if e.report.clean_failures:
                checks = ", ".join(c.value for c in e.report.clean_failures)
                clean_failed[eid] = (Stage.render, f"its clean render fails check(s) {checks} in calibration")
            else:
                escaped.append(f"on {eid}: {summary}")
                if len(escaped) >= CALIBRATION_ESCAPE_TRIES:
                    break
            continue
        ctx.ledger.append(stage=Stage.verify, event=LedgerEvent.check, outcome=LedgerOutcome.ok,
                          reason=f"verifier spec calibrated on {eid}: every corruption caught"
                                 + (f" but {', '.join(report.not_applicable)} (not applicable to it: their checks not "
                                    "exercised)" if report.not_applicable else "") + ", the clean episode passes",
                          actor=HARNESS, outputs=verifier_files(ctx.task.root),
                          details={"calibration_episode": eid, "not_applicable": list(report.not_applicable)})
        return
    if escaped:
        raise StageRejected(Stage.verify, "the verifier spec failed calibration (not used): " + " | ".join(escaped),
                            Stage.verify, final=True)
    raise StageRejected(Stage.verify, "verifier calibration found no clean episode: "
                        + "; ".join(f"{e}: {why}" for e, (_, why) in clean_failed.items()), Stage.render,
                        episodes=clean_failed)


def run_verify(ctx: PipelineContext) -> list[Path]:
    """Stage 8: calibrate the verifier spec once (every corruption of an accepted episode caught, the
    clean one passing; a spec that fails is not used), then verify every live episode not verified
    yet. A failing episode routes to the earliest stage its failed checks name."""
    from datafarm.artifacts.admission import VerifierResults
    from datafarm.verifiers import load_spec, verifier_files, verify_episode

    live = _require_full_set(ctx, Stage.verify)
    missing = [b.episode_id for b in live if not (ctx.task.episode(b.episode_id) / "render.json").is_file()]
    if missing:
        raise StageRejected(Stage.verify, f"not rendered: {', '.join(missing)}", Stage.render)
    if not _calibrated(ctx):
        _calibrate(ctx, [b.episode_id for b in live])
    spec = load_spec(ctx.task.root)
    failed: dict[str, tuple[Stage, str]] = {}
    for number, book in enumerate(live, 1):
        eid = book.episode_id
        path = ctx.task.episode(eid) / VERIFICATION
        if not path.is_file():
            ctx.progress(f"verifying episode {number}/{len(live)} ({eid})")
            results = verify_episode(ctx.task.root, eid, spec)
            save_artifact(results, path)
            files = verifier_files(ctx.task.root, eid)
            files[_rel(ctx.task, path)] = sha256_file(path)
            bad = [c for c in results.checks if not c.passed]
            ctx.ledger.append(stage=Stage.verify, event=LedgerEvent.check,
                              outcome=LedgerOutcome.ok if results.passed else LedgerOutcome.fail,
                              reason=f"{eid}: " + ("all checks pass" if results.passed else "checks failed: " + ", ".join(
                                  f"{c.check.value} (metric {c.metric:g}, threshold {c.threshold:g})" for c in bad)),
                              actor=HARNESS, outputs=files, details={"episode_id": eid})
        results = load_artifact(VerifierResults, path)
        if not results.passed:
            bad = [c for c in results.checks if not c.passed]
            failed[eid] = (_earliest((c.route_to for c in bad), Stage.render),
                           "verifier check(s) failed: " + ", ".join(c.check.value for c in bad))
    if failed:
        raise StageRejected(Stage.verify, "; ".join(f"{e}: {why}" for e, (_, why) in failed.items()),
                            _earliest((r for r, _ in failed.values()), Stage.render), episodes=failed)
    return [ctx.task.verifier_dir / "spec.json", ctx.task.verifier_dir / "calibration.json"]


def run_review(ctx: PipelineContext) -> list[Path]:
    """Stage 9: the reviewer (its own context: decoded keyframes, real reference frames, a sim-state
    summary; never the author's transcript) gives a verdict per live episode not reviewed yet. A
    rejected episode routes to the stage the verdict names (render or expert)."""
    from datafarm.agents import ReviewMaterial, StageFailed, review_task
    from datafarm.agents.builtin.reviewer import state_summary
    from datafarm.artifacts.admission import ReviewVerdict
    from datafarm.artifacts.render_contract import RenderContract

    live = _require_full_set(ctx, Stage.review)
    grounding = ctx.grounding()
    contract = load_artifact(RenderContract, ctx.task.render_contract)
    refs = {c.camera: list(c.frames) for c in contract.cameras}
    written: list[Path] = []
    rejected: dict[str, tuple[Stage, str]] = {}
    for number, book in enumerate(live, 1):
        eid = book.episode_id
        episode = ctx.task.episode(eid)
        review_path = episode / REVIEW
        if not review_path.is_file():
            ctx.progress(f"reviewing episode {number}/{len(live)} ({eid})")
            summary = state_summary(episode, grounding, reference_frames=refs)
            try:
                ctx.agents.reviewer(ReviewMaterial(Path("episodes") / eid, summary, refs)).run(review_task())
            except StageFailed as e:
                raise StageRejected(Stage.review, f"{eid}: {e}") from None
            verdict = load_artifact(ReviewVerdict, review_path)
            ctx.ledger.append(stage=Stage.review, event=LedgerEvent.review,
                              outcome=LedgerOutcome.ok if verdict.accepted else LedgerOutcome.fail,
                              reason=f"{eid}: {'accepted' if verdict.accepted else 'rejected'}",
                              route_to=None if verdict.accepted else (verdict.route_to or Stage.render), actor=HARNESS,
                              outputs=_hashes(ctx.task, [review_path]), details={"episode_id": eid})
        verdict = load_artifact(ReviewVerdict, review_path)
        written.append(review_path)
        if not verdict.accepted:
            failed = [c.claim for c in verdict.claims if not c.holds]
            rejected[eid] = (verdict.route_to or Stage.render,
                             "the reviewer rejected it" + (f" ({'; '.join(failed)})" if failed else ""))
    if rejected:
        raise StageRejected(Stage.review, "; ".join(f"{e}: {why}" for e, (_, why) in rejected.items()),
                            _earliest((r for r, _ in rejected.values()), Stage.render), episodes=rejected)
    return written


def run_admit(ctx: PipelineContext) -> list[Path]:
    """Stage 10: write q for every verified and reviewed episode the ledger does not record as
    admitted yet, then check the whole dataset."""
    from datafarm.admission.admit import admit
    from datafarm.admission.record import write_admission
    from datafarm.artifacts.admission import ReviewVerdict, VerifierResults
    from datafarm.harness.judge.frozen import load_lock
    from datafarm.harness.rollout import RolloutReport

    lock = load_lock(ctx.task.judge_dir)
    for book in live_episodes(ctx):
        if book.admitted:
            continue
        episode = ctx.task.episode(book.episode_id)
        report = load_artifact(RolloutReport, episode / "rollout.json")
        write_admission(ctx.task.root, book.episode_id, report.verdict, lock,
                        load_artifact(VerifierResults, episode / VERIFICATION),
                        load_artifact(ReviewVerdict, episode / REVIEW),
                        allow_unsafe_sandbox=False, actor=HARNESS)
    result = admit(ctx.task.root)
    if not result.ok:
        raise StageRejected(Stage.admit, result.render())
    return [ctx.task.certificate]


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


# --- the pipeline: stages, rejections and routes ------------------------------------------------------


def run_pipeline(ctx: PipelineContext, *, stop_after: Stage | None = None) -> PipelineOutcome:
    """Run the first unfinished stage in ORDER until every stage is finished (with `stop_after`: up to
    that stage, for callers that drive the stages in steps), following the routes rejections take
    within B's budgets; every step is recorded in the ledger. See the module docstring."""
    outcome = PipelineOutcome()
    stages = ORDER if stop_after is None else ORDER[: ORDER.index(stop_after) + 1]
    first = True
    while True:
        done = finished_stages(ctx.ledger.entries())
        if first:
            outcome.skipped_done = [s for s in stages if s in done]
            first = False
        pending = [s for s in stages if s not in done]
        if not pending:
            return outcome
        stage = pending[0]
        runner = RUNNERS.get(stage)
        if runner is None:
            _stop_not_built(ctx, outcome, ORDER[ORDER.index(stage):], NOT_BUILT.get(stage, "not implemented yet"))
            return outcome
        ctx.progress(f"stage {stage.value}")
        ctx.ledger.append(stage=stage, event=LedgerEvent.stage_started, outcome=LedgerOutcome.info,
                          reason=f"{stage.value} started", actor=HARNESS)
        try:
            _settle(ctx, stage)
            outputs = runner(ctx)
        except StageNotBuilt as e:
            _stop_not_built(ctx, outcome, ORDER[ORDER.index(stage):], e.reason)
            return outcome
        except StageRejected as e:
            details: dict[str, object] = {}
            if e.episodes:
                details["episodes"] = {eid: {"route_to": r.value, "reason": why} for eid, (r, why) in e.episodes.items()}
            if e.final:
                details["final"] = True
            ctx.ledger.append(stage=stage, event=LedgerEvent.rejection, outcome=LedgerOutcome.fail, reason=e.reason,
                              route_to=e.route_to, actor=HARNESS, details=details)
            stop = _route(ctx, stage, e, outcome)
            if stop is not None:
                outcome.stopped_at, outcome.stop_reason = stage, stop
                return outcome
            continue
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


def _route(ctx: PipelineContext, stage: Stage, rejection: StageRejected, outcome: PipelineOutcome) -> str | None:
    """Follow a rejection: record the route(s) it takes and what they set aside, or say why compile
    stops (None: go on with the first unfinished stage)."""
    said = f"rejected: {rejection.reason} (routes to {rejection.route_to.value})"
    if rejection.final:
        return f"{said}; no retry can change this"
    budgets = ctx.retry_budgets()
    episodes = rejection.episodes
    if episodes and rejection.route_to == Stage.render and all(r == Stage.render for r, _ in episodes.values()):
        return _route_episodes(ctx, stage, rejection, budgets, outcome)
    return _route_global(ctx, stage, rejection.route_to, rejection.reason, budgets, outcome)


def _route_global(ctx: PipelineContext, stage: Stage, target: Stage, reason: str, budgets: Mapping[Stage, int],
                  outcome: PipelineOutcome, **details: object) -> str | None:
    """One route back to `target` within B's budget for it (routes counted over the whole ledger)."""
    said = f"rejected: {reason} (routes to {target.value})"
    if target not in budgets:
        return f"{said}; B has no retry budget for {target.value}, so compile stops"
    used = sum(1 for e in ctx.ledger.entries()
               if e.event == LedgerEvent.route and e.route_to == target and "episode_id" not in e.details)
    budget = budgets[target]
    if used >= budget:
        return f"{said}; B's retry budget for {target.value} is spent ({used} of {budget} routes used)"
    words = f"{stage.value} -> {target.value}: attempt {used + 1} of {budget}"
    ctx.ledger.append(stage=stage, event=LedgerEvent.route, outcome=LedgerOutcome.info, route_to=target,
                      reason=f"route {words}: {reason}", actor=HARNESS,
                      details={"attempt": used + 1, "budget": budget, "from": stage.value, **details})
    outcome.routes.append(words)
    ctx.progress(f"route {words}")
    return None


def _route_episodes(ctx: PipelineContext, stage: Stage, rejection: StageRejected, budgets: Mapping[Stage, int],
                    outcome: PipelineOutcome) -> str | None:
    """Per-episode routes to render: each failing episode is rendered again while its render budget
    lasts; one whose budget is spent is rejected as a whole and the rollout stage replaces it."""
    budget = budgets.get(Stage.render, 0)
    books = episode_books(ctx.ledger.entries())
    replace: list[str] = []
    for eid, (_, why) in sorted(rejection.episodes.items()):
        used = books[eid].render_routes if eid in books else 0
        if used < budget:
            words = f"{stage.value} -> render for {eid}: attempt {used + 1} of {budget}"
            ctx.ledger.append(stage=stage, event=LedgerEvent.route, outcome=LedgerOutcome.info, route_to=Stage.render,
                              reason=f"route {words}: {why}; rendered again (render attempt {used + 2}, a new render seed)",
                              actor=HARNESS, details={"episode_id": eid, "attempt": used + 1, "budget": budget,
                                                      "from": stage.value, "render_attempt": used + 2})
            outcome.routes.append(words)
            ctx.progress(f"route {words}")
        else:
            remove_episode(ctx, stage, eid, "reject",
                           f"{eid}: {why}; its render budget is spent ({used} of {budget} re-renders): rejected as a "
                           "whole, kept in attempts/ with its renders", route_to=Stage.rollout)
            replace.append(eid)
    if replace:
        return _route_global(ctx, stage, Stage.rollout, f"replace {', '.join(replace)} (rejected as a whole) with "
                             "episodes from further admission seeds", budgets, outcome, replaces=replace)
    return None


def _stop_not_built(ctx: PipelineContext, outcome: PipelineOutcome, rest: tuple[Stage, ...], reason: str) -> None:
    """Record the first unbuilt stage and every later one as not implemented, and stop."""
    first = rest[0]
    for stage in rest:
        why = reason if stage == first else NOT_BUILT.get(stage, f"waits for {first.value}")
        ctx.ledger.append(stage=stage, event=LedgerEvent.stage_not_implemented, outcome=LedgerOutcome.skipped,
                          reason=f"not implemented yet: {why}", actor=HARNESS)
        outcome.not_built[stage] = why
    outcome.stopped_at, outcome.stop_reason = first, f"not implemented yet: {reason}"
