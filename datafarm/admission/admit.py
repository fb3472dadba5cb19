"""`datafarm admit TASK_DIR`: the final delivery check of a dataset, and its certificate.

A dataset is certified (`certificate.json` written, a `stage_finished` event of stage admit appended)
only when every one of these holds; otherwise every problem found is listed, each naming the file,
episode or ledger line it concerns, and nothing is written:

- complete: `episodes/` holds exactly B's n admitted episodes, and nothing else;
- unmodified: every episode file hashes to what q records, q hashes to what the ledger's admission
  event recorded, and that event's inputs are q's file hashes;
- fully recorded: the ledger's hash chain is valid; every episode folder has a passing admission
  rollout and an admission event in the ledger, and every admission event's folder exists; every
  admission seed index used lies within B's count, with no gaps from 0, and each passing one ended in
  an admission or a recorded rejection; every episode's scene (z's seed) is its admission seed's;
  every attempt the ledger names is kept in `attempts/`, and every attempt folder is in the ledger;
- reviewed and verified: every q holds an accepting review whose claims hold, and verifier results
  produced under the task's current `verifier/spec.json` and `verifier/calibration.json`; both are
  the episode's own (`verification.json` and `review.json` in its folder hold the same);
- the task's own files unmodified: every file outside `episodes/` that a ledger entry recorded
  (G, T, S, B, R, C, the verifier spec, transcripts, kept attempts, ...) still hashes to the latest
  hash recorded for it (`certificate.json`, which admit itself rewrites, and the harness-private
  folder aside);
- J unchanged since freezing: `judge/spec.json` hashes to `judge/lock.json`, which is the ledger's
  latest freeze, and every episode was judged by it;
- K: every q names the K of `capability.lock`; no episode's expert ran unsandboxed (unless the
  unsafe-sandbox policy is given explicitly).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

import datafarm
from datafarm.admission.certificate import (
    CERTIFICATE_FILE,
    AdmissionCertificate,
    CertifiedEpisode,
    dataset_digest,
)
from datafarm.admission.files import ADMISSION_FILE, VERIFICATION_FILE, episode_files
from datafarm.admission.ledger_view import LedgerView
from datafarm.admission.record import (
    VERIFIER_CALIBRATION,
    VERIFIER_SPEC,
    AdmissionRefused,
    admission_rollout,
    load_capability_lock,
    own_results_problems,
    review_problems,
    verifier_file_hashes,
)
from datafarm.admission.secret import read_secret
from datafarm.artifacts.admission import AdmissionRecord
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.episode import EpisodeRecord
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeLock, JudgeSpec
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.capability.models import CapabilityLock
from datafarm.errors import (
    DatafarmError,
    InputError,
    IntegrityError,
    Problem,
    input_error,
)
from datafarm.harness.judge.frozen import LOCK_FILE, SPEC_FILE
from datafarm.harness.seeds import admission_seed
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir

ProblemKind = Literal[
    "ledger", "complete", "modified", "recorded", "seeds", "reviewed", "verified", "judge", "capability", "sandbox",
    "task",
]
"""What sort of requirement a problem breaks."""


class AdmitProblem(Artifact):
    """One reason a dataset is not certified."""

    kind: ProblemKind
    """The requirement it breaks (complete, unmodified, fully recorded, ...)."""
    where: str
    """The file, episode folder or ledger line (`ledger.jsonl:N (seq S)`) it concerns, task-relative."""
    message: str
    """What is wrong."""

    def render(self) -> str:
        """`[kind] where: message`."""
        return f"[{self.kind}] {self.where}: {self.message}"


class AdmitReport(Artifact):
    """What `admit` found."""

    task_dir: str
    """The task folder checked."""
    ok: bool
    """True when the dataset passed every check (and the certificate was written, unless asked not to)."""
    n: int | None = None
    """B's n (null when B does not load)."""
    episode_folders: int = Field(ge=0)
    """Folders found under `episodes/`."""
    certified_episodes: int = Field(ge=0)
    """Episodes that passed every per-episode check."""
    problems: list[AdmitProblem] = Field(default_factory=list)
    """Every problem found."""
    certificate: AdmissionCertificate | None = None
    """The certificate, when the dataset passed."""

    def render(self) -> str:
        """A summary line, then every problem."""
        if self.ok and self.certificate is not None:
            c = self.certificate
            head = (f"ADMITTED: {c.n} episodes, dataset sha256 {c.dataset_sha256}, K {c.k_version}, "
                    f"J {c.judge_sha256[:12]}, ledger head {c.ledger_head_sha256[:12]} ({c.ledger_entries} entries)")
        elif self.ok:
            head = f"OK: {self.certified_episodes} episodes pass (certificate not written)"
        else:
            head = f"NOT ADMITTED: {len(self.problems)} problem(s) in {self.task_dir}"
        return "\n".join([head, *(f"  {p.render()}" for p in self.problems)])

    def raise_for_problems(self) -> None:
        """Raise AdmissionRefused (an IntegrityError, exit 4) listing every problem, if there are any."""
        if self.problems:
            raise AdmissionRefused([Problem(p.message, file=Path(p.where), field=p.kind) for p in self.problems],
                                   f"{self.task_dir}: dataset not admitted")


def _why(error: DatafarmError) -> str:
    """An error's message without the absolute path an InputError puts in front."""
    if isinstance(error, InputError):
        return "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in error.problems)
    return str(error)


Add = Callable[[ProblemKind, str, str], None]


# --- task-wide state ------------------------------------------------------------------------------


def _frozen_judge(paths: TaskDir, view: LedgerView, add: Add) -> str | None:
    """The hash of the frozen J (the lock's), after checking the spec and the ledger agree with it."""
    judge = paths.judge_dir.name
    try:
        lock = load_artifact(JudgeLock, paths.judge_dir / LOCK_FILE)
    except InputError as e:
        add("judge", f"{judge}/{LOCK_FILE}", f"J is not frozen or its lock does not load ({_why(e)})")
        return view.latest_freeze()
    try:
        digest = load_artifact(JudgeSpec, paths.judge_dir / SPEC_FILE).sha256()
        if digest != lock.spec_sha256:
            add("judge", f"{judge}/{SPEC_FILE}", f"hashes to {digest[:12]}..., but {judge}/{LOCK_FILE} froze "
                f"{lock.spec_sha256[:12]}...: J changed after it was frozen")
    except InputError as e:
        add("judge", f"{judge}/{SPEC_FILE}", f"the frozen J no longer loads ({_why(e)}): J changed after it was frozen")
    freezes = view.freezes()
    if not freezes:
        add("judge", "ledger.jsonl", "the ledger records no freeze of J")
    elif freezes[-1].detail("spec_sha256") != lock.spec_sha256:
        add("judge", freezes[-1].where, f"the ledger's latest freeze is J {str(freezes[-1].detail('spec_sha256'))[:12]}..., "
            f"but {judge}/{LOCK_FILE} froze {lock.spec_sha256[:12]}...")
    at_seq = [ln for ln in freezes if ln.entry.seq == lock.ledger_seq]
    if freezes and (not at_seq or at_seq[0].detail("spec_sha256") != lock.spec_sha256):
        add("judge", f"{judge}/{LOCK_FILE}", f"names ledger seq {lock.ledger_seq} as its freeze, but that entry does not "
            "freeze this J")
    return lock.spec_sha256


# --- one episode ----------------------------------------------------------------------------------


def _check_episode(
    paths: TaskDir,
    folder: Path,
    view: LedgerView,
    add: Add,
    *,
    judge_sha: str | None,
    k: CapabilityLock | None,
    verifier_now: dict[str, str | None],
    secret: bytes | None,
    allow_unsafe_sandbox: bool,
) -> CertifiedEpisode | None:
    """Every per-episode check; the certified form of the episode when all of them pass."""
    name = folder.name
    rel = f"{paths.episodes_dir.name}/{name}"
    found: list[str] = []

    def problem(kind: ProblemKind, where: str, message: str) -> None:
        found.append(message)
        add(kind, where, message)

    q_path = folder / ADMISSION_FILE
    admissions = view.admissions_of(name)
    if not q_path.is_file():
        if not view.mentions(name) and not view.mentions(rel):
            problem("recorded", rel, "unrecorded episode folder: no ledger entry names it")
        else:
            problem("recorded", rel, "no admission record (admission.json): the episode was never admitted")
        return None
    try:
        q = load_artifact(AdmissionRecord, q_path)
    except InputError as e:
        problem("modified", f"{rel}/{ADMISSION_FILE}", f"q does not validate ({_why(e)})")
        return None
    if q.episode_id != name:
        problem("modified", f"{rel}/{ADMISSION_FILE}", f"q admits episode {q.episode_id}, not {name}")

    # unmodified: files vs q, q vs the ledger
    files, odd = episode_files(folder)
    for file, message in odd:
        problem("modified", f"{rel}/{file}", message)
    for file in sorted(set(q.files) - set(files)):
        problem("modified", f"{rel}/{file}", "listed in q but missing")
    for file in sorted(set(files) - set(q.files)):
        problem("modified", f"{rel}/{file}", "not listed in q (added after admission)")
    for file in sorted(set(files) & set(q.files)):
        if files[file] != q.files[file]:
            problem("modified", f"{rel}/{file}", f"sha256 {files[file][:12]}... differs from q's {q.files[file][:12]}...")
    q_sha = sha256_file(q_path)
    if not admissions:
        if not view.mentions(name):
            problem("recorded", rel, "unrecorded episode folder: no ledger entry names it")
        else:
            problem("recorded", rel, "the ledger has no admission event for this episode")
    else:
        event = admissions[-1]
        if len(admissions) > 1:
            problem("recorded", event.where, f"episode {name} was admitted {len(admissions)} times")
        recorded = event.entry.outputs.get(f"{rel}/{ADMISSION_FILE}")
        if recorded != q_sha:
            problem("modified", f"{rel}/{ADMISSION_FILE}", f"sha256 {q_sha[:12]}... differs from the "
                    f"{(recorded or 'none')[:12]}... the admission event {event.where} recorded")
        inputs = {key[len(rel) + 1:]: digest for key, digest in event.entry.inputs.items() if key.startswith(f"{rel}/")}
        if inputs != dict(q.files):
            changed = sorted(set(inputs.items()) ^ set(q.files.items()))
            problem("modified", event.where, f"the admission event recorded other file hashes than q lists "
                    f"({', '.join(sorted({c[0] for c in changed}))})")

    # fully recorded: the rollout that made it
    rollout, why = admission_rollout(view, name, rel)
    for message in why:
        problem("recorded", rollout.where if rollout else rel, message)
    if rollout is not None and rollout.detail("admission_index") != q.seed_index:
        problem("seeds", f"{rel}/{ADMISSION_FILE}", f"q names admission seed #{q.seed_index}, the rollout "
                f"({rollout.where}) #{rollout.detail('admission_index')}")
    record: EpisodeRecord | None = None
    try:
        record = load_artifact(EpisodeRecord, folder / "episode.json")
    except InputError as e:
        problem("modified", f"{rel}/episode.json", f"does not load ({_why(e)})")
    if record is not None:
        if secret is not None and record.variation.seed != admission_seed(secret, q.seed_index):
            problem("seeds", f"{rel}/episode.json", f"z was not drawn from admission seed #{q.seed_index}")
        if record.verdict != q.judge:
            problem("judge", f"{rel}/episode.json", "J's verdict in episode.json differs from q's")

    # judged by the frozen J, under the task's K, verified, reviewed, sandboxed
    if judge_sha is not None and q.judge.judge_sha256 != judge_sha:
        problem("judge", rel, f"judged by J {q.judge.judge_sha256[:12]}..., but the frozen J is {judge_sha[:12]}...: "
                "a later freeze invalidated it")
    if rollout is not None and judge_sha is not None and rollout.entry.inputs.get("judge/spec.json") != judge_sha:
        problem("judge", rollout.where, f"the rollout of {name} ran under another J than the frozen one")
    if k is not None and (q.k_version, q.k_sha256) != (k.k_version, k.k_sha256):
        problem("capability", f"{rel}/{ADMISSION_FILE}", f"admitted under K {q.k_version} {q.k_sha256[:12]}..., "
                f"the task is locked to {k.k_version} {k.k_sha256[:12]}...")
    for rel_file, digest in ((VERIFIER_SPEC, q.verifier.spec_sha256), (VERIFIER_CALIBRATION, q.verifier.calibration_sha256)):
        if verifier_now[rel_file] != digest:
            now = verifier_now[rel_file]
            problem("verified", rel, f"verified under {rel_file} {digest[:12]}..., the task's is "
                    f"{now[:12] + '...' if now else 'missing'}")
    for message in review_problems(q.review):
        problem("reviewed", f"{rel}/{ADMISSION_FILE}", message)
    for file, message in own_results_problems(folder, q.verifier, q.review, "q's"):
        problem("verified" if file == VERIFICATION_FILE else "reviewed", f"{rel}/{file}", message)
    if q.sandbox == "none" and not allow_unsafe_sandbox:
        problem("sandbox", rel, "the expert ran without a sandbox; admission refuses such episodes unless the "
                "unsafe-sandbox policy is given explicitly")
    if found:
        return None
    return CertifiedEpisode(episode_id=name, seed_index=q.seed_index, admission_sha256=q_sha, files=files)


# --- the seeds and attempts -----------------------------------------------------------------------


def _seed_problems(paths: TaskDir, view: LedgerView, batch: BatchConfig | None, judge_sha: str | None,
                   add: Add) -> int:
    """Admission seeds: in range, no gaps, each passing one ended in an admission or a rejection.
    Returns how many seed indices were used."""
    by_index: dict[int, list] = {}
    for line in view.admission_rollouts():
        index = line.detail("admission_index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            add("seeds", line.where, f"an admission rollout without a valid seed index ({index!r})")
            continue
        if batch is not None and index >= batch.admission_seed_count:
            add("seeds", line.where, f"admission seed #{index} is beyond B's admission_seed_count "
                f"{batch.admission_seed_count}")
        by_index.setdefault(index, []).append(line)
    if not by_index:
        return 0
    top = max(by_index)
    for index in range(top):
        if index not in by_index:
            add("seeds", "ledger.jsonl", f"admission seed #{index} has no attempt in the ledger although seeds up to "
                f"#{top} were run: seeds run in order, none skipped")
    for index, lines in sorted(by_index.items()):
        passed = [ln for ln in lines if ln.entry.outcome == LedgerOutcome.ok
                  and (judge_sha is None or ln.entry.inputs.get("judge/spec.json") == judge_sha)]
        if len(passed) > 1:
            add("seeds", passed[-1].where, f"admission seed #{index} passed {len(passed)} times under the same J "
                f"(also {', '.join(p.where for p in passed[:-1])}): the same scene twice")
        for line in passed:
            eid = str(line.detail("episode_id"))
            admitted = view.admissions_of(eid) and (paths.episode(eid)).is_dir()
            if not admitted and not view.rejections_of(eid):
                add("recorded", line.where, f"admission seed #{index} passed as episode {eid}, which has no outcome: "
                    "neither admitted (in episodes/, with an admission event) nor rejected in the ledger")
    return top + 1


def _attempt_problems(paths: TaskDir, view: LedgerView, add: Add) -> None:
    """Every attempt the ledger names is kept; every attempt folder is in the ledger."""
    attempts = paths.attempts_dir.name
    for line in view.lines:
        folder = line.detail("folder")
        an_attempt = isinstance(folder, str) and folder.startswith(f"{attempts}/")
        if line.entry.event == LedgerEvent.rollout and an_attempt and not (paths.root / str(folder)).is_dir():
            add("recorded", line.where, f"{folder} is missing: rejected attempts stay in {attempts}/ with their reasons")
    if paths.attempts_dir.is_dir():
        for entry in sorted(paths.attempts_dir.iterdir()):
            if entry.name.startswith("."):
                continue  # a rollout's partial folder: never a recorded attempt, harmless
            if not view.mentions(entry.name) and not view.mentions(f"{attempts}/{entry.name}"):
                add("recorded", f"{attempts}/{entry.name}", "no ledger entry records this attempt")


# --- the task's own files ------------------------------------------------------------------------

UNCHECKED_TOP = ("ledger.jsonl", CERTIFICATE_FILE)
"""Top-level names the task-file check leaves alone: the ledger is checked by its hash chain, the
certificate is admit's own output (rewritten by every certification)."""


def _task_file_problems(paths: TaskDir, view: LedgerView, add: Add) -> None:
    """Every file outside `episodes/` (checked per episode against q) and the harness-private folder
    that some ledger entry recorded must still hash to the latest hash recorded for it. Files the
    ledger never recorded (e.g. transcript images, named by their own hash) are not judged here."""
    recorded = view.recorded_outputs("")
    skip = {*UNCHECKED_TOP, paths.episodes_dir.name, paths.harness_dir.name}
    for path in sorted(paths.root.rglob("*")):
        rel = path.relative_to(paths.root).as_posix()
        if rel.split("/", 1)[0] in skip or rel not in recorded or path.is_symlink() or not path.is_file():
            continue
        digest, line = recorded[rel]
        now = sha256_file(path)
        if now != digest:
            add("modified", rel, f"sha256 {now[:12]}... differs from the {digest[:12]}... {line.where} recorded: "
                "changed after the ledger recorded it")


# --- the whole dataset ----------------------------------------------------------------------------


def admit(
    task_dir: Path | str,
    *,
    allow_unsafe_sandbox: bool = False,
    write_certificate: bool = True,
    actor: LedgerActor | None = None,
    now: datetime | None = None,
) -> AdmitReport:
    """Check a task folder's dataset (see the module docstring) and, when it passes, write
    `certificate.json` and append the certification to the ledger.

    Returns the report (its `problems` list every problem; `raise_for_problems` turns them into an
    IntegrityError, exit 4). InputError when `task_dir` is not a folder. `allow_unsafe_sandbox`
    admits episodes whose expert ran unsandboxed; `write_certificate=False` only checks."""
    paths = TaskDir(Path(task_dir))
    if not paths.root.is_dir():
        raise input_error("not a task folder", file=paths.root, expected="a folder written by `datafarm compile`")
    problems: list[AdmitProblem] = []

    def add(kind: ProblemKind, where: str, message: str) -> None:
        problems.append(AdmitProblem(kind=kind, where=where, message=message))

    ledger = Ledger(paths.root)
    head_hash, entries = None, 0
    if not ledger.exists():
        add("ledger", "ledger.jsonl", "missing: nothing of how the dataset was made is recorded")
    else:
        verified = ledger.verify()
        head_hash, entries = verified.head_hash, verified.entries
        for p in verified.problems:
            add("ledger", f"ledger.jsonl:{p.line} (seq {'?' if p.seq is None else p.seq})", p.message)
    view = LedgerView.read(ledger.path)

    batch: BatchConfig | None = None
    try:
        batch = load_artifact(BatchConfig, paths.batch)
    except InputError as e:
        add("task", paths.batch.name, f"B does not load ({_why(e)})")
    k: CapabilityLock | None = None
    try:
        k = load_capability_lock(paths)
    except IntegrityError as e:
        add("capability", paths.capability_lock.name, str(e).partition(": ")[2] or str(e))
    judge_sha = _frozen_judge(paths, view, add)
    verifier_now = verifier_file_hashes(paths)
    for rel_file, digest in verifier_now.items():
        if digest is None:
            add("verified", rel_file, "missing: the verifier configuration the episodes were verified under is gone")
    secret, secret_problems = read_secret(paths, view)
    for where, message in secret_problems:
        add("seeds", where, message)

    # episodes
    certified: list[CertifiedEpisode] = []
    folders: list[Path] = []
    if paths.episodes_dir.is_dir():
        for entry in sorted(paths.episodes_dir.iterdir()):
            where = f"{paths.episodes_dir.name}/{entry.name}"
            if entry.name.startswith("."):
                add("complete", where, "a partial episode folder left by an interrupted rollout")
            elif entry.is_symlink() or not entry.is_dir():
                add("complete", where, "not an episode folder")
            else:
                folders.append(entry)
    for folder in folders:
        done = _check_episode(paths, folder, view, add, judge_sha=judge_sha, k=k, verifier_now=verifier_now,
                              secret=secret, allow_unsafe_sandbox=allow_unsafe_sandbox)
        if done is not None:
            certified.append(done)
    for line in view.admissions():
        eid = str(line.detail("episode_id"))
        if not paths.episode(eid).is_dir():
            add("complete", line.where, f"admits episode {eid}, but {paths.episodes_dir.name}/{eid} is missing")
    seeds_used = _seed_problems(paths, view, batch, judge_sha, add)
    _attempt_problems(paths, view, add)
    _task_file_problems(paths, view, add)
    if batch is not None:
        admitted = [f for f in folders if (f / ADMISSION_FILE).is_file()]
        if len(admitted) < batch.n:
            add("complete", paths.episodes_dir.name, f"incomplete: {len(admitted)} of B's n={batch.n} episodes admitted")
        elif len(admitted) > batch.n:
            add("complete", paths.episodes_dir.name, f"{len(admitted)} admitted episodes, B asks for n={batch.n}")

    report = AdmitReport(task_dir=str(paths.root), ok=not problems, n=batch.n if batch else None,
                         episode_folders=len(folders), certified_episodes=len(certified), problems=problems)
    if problems or not write_certificate:
        return report
    assert batch is not None and k is not None and judge_sha is not None and head_hash is not None
    spec_sha, calibration_sha = verifier_now[VERIFIER_SPEC], verifier_now[VERIFIER_CALIBRATION]
    assert spec_sha is not None and calibration_sha is not None
    episodes = sorted(certified, key=lambda e: e.episode_id)
    try:
        certificate = AdmissionCertificate(
            dataset_sha256=dataset_digest(episodes), n=batch.n, episodes=episodes, k_version=k.k_version,
            k_sha256=k.k_sha256, judge_sha256=judge_sha, verifier_spec_sha256=spec_sha,
            verifier_calibration_sha256=calibration_sha, admission_seeds_used=seeds_used,
            ledger_head_sha256=head_hash, ledger_entries=entries, datafarm_version=datafarm.__version__,
            certified_at=now or datetime.now(UTC))
    except ValidationError as e:  # e.g. a hash that is not hex: report it, never half-certify
        add("task", CERTIFICATE_FILE, f"the certificate does not validate: {e.errors()[0]['msg']}")
        return report.model_copy(update={"ok": False, "problems": problems})
    path = save_artifact(certificate, paths.root / CERTIFICATE_FILE)
    ledger.append(Stage.admit, LedgerEvent.stage_finished, LedgerOutcome.ok,
                  f"dataset certified: {batch.n} episodes, dataset sha256 {certificate.dataset_sha256}",
                  actor=actor or LedgerActor(role="admission"), outputs={CERTIFICATE_FILE: sha256_file(path)},
                  details={"dataset_sha256": certificate.dataset_sha256, "n": batch.n,
                           "ledger_head_sha256": head_hash, "episodes": [e.episode_id for e in episodes]})
    return report.model_copy(update={"certificate": certificate})
