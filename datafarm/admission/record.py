"""Writing q, the admission record of one episode (`episodes/<id>/admission.json`, stage 10).

`write_admission` is the last gate an episode passes. It takes the results of the checks that came
before it as inputs (J's verdict and the lock it must have been judged under, the verifier's
results, the reviewer's verdict) and refuses, writing nothing, unless all of them passed and the
episode is exactly what the ledger recorded:

- J: the verdict passed, came from the J of `lock`, `lock` is `judge/lock.json`, the spec still
  hashes to it and it is the ledger's latest freeze; the verdict is the one in `episode.json`.
- verifier: every check passed, under the spec and calibration now in `verifier/` (by file hash),
  and the results are the episode's own (`episodes/<id>/verification.json`, as stage 8 wrote them).
- review: accepted, every claim it makes holds, and it is the episode's own (`review.json`).
- the episode: a passing admission rollout wrote it (ledger `rollout` entry, stage rollout,
  outcome ok); every file the rollout recorded is unchanged; every later file (renders, crops) is
  recorded by some ledger entry's outputs (`episodes/<id>/<path>`) with the same hash.
- the sandbox the expert ran in isolated it; `none` only with `allow_unsafe_sandbox`, recorded.

On success it writes q (sha256 of every episode file, K from `capability.lock`, the sandbox), then
appends an `admission` event (stage admit) whose inputs are the episode's file hashes and whose
output is q's file hash: what `admit` checks the dataset against.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from datafarm.admission.files import (
    ADMISSION_FILE,
    REVIEW_FILE,
    VERIFICATION_FILE,
    episode_files,
)
from datafarm.admission.ledger_view import LedgerView, Line
from datafarm.artifacts.admission import AdmissionRecord, ReviewVerdict, VerifierResults
from datafarm.artifacts.episode import EpisodeRecord
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeLock, JudgeVerdict
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.request import Sandbox
from datafarm.artifacts.stages import Stage
from datafarm.capability.models import CapabilityLock
from datafarm.errors import DatafarmError, IntegrityError, Problem, StateError
from datafarm.harness.judge.frozen import judged_under, load_frozen, load_lock
from datafarm.harness.rollout import REPORT_FILE, RolloutReport
from datafarm.hashing import sha256_file
from datafarm.ledger import Ledger
from datafarm.taskdir import TaskDir

VERIFIER_SPEC = "verifier/spec.json"
"""The verifier spec, relative to the task folder."""
VERIFIER_CALIBRATION = "verifier/calibration.json"
"""The verifier calibration, relative to the task folder."""
ADMISSION_ACTOR = LedgerActor(role="admission")
"""Who writes admission events."""
_SANDBOXES: tuple[str, ...] = get_args(Sandbox)


class AdmissionRefused(IntegrityError):
    """An episode (or dataset) is not admitted; `problems` lists every reason. CLI exit code 4."""

    def __init__(self, problems: list[Problem], what: str = "not admitted") -> None:
        self.problems = list(problems)
        """Everything that stands in the way."""
        self.what = what
        """What was refused, e.g. `episode adm-0001-...: not admitted`."""
        super().__init__(self.render())

    def render(self) -> str:
        """The headline, then one problem per line."""
        return "\n".join([f"{self.what}: {len(self.problems)} problem(s)", *(f"  {p.render()}" for p in self.problems)])

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self):
        return (type(self), (self.problems, self.what))


def load_capability_lock(paths: TaskDir) -> CapabilityLock:
    """The task's `capability.lock`; IntegrityError naming it when it is missing or unreadable."""
    try:
        return CapabilityLock.model_validate_json(paths.capability_lock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IntegrityError(f"{paths.capability_lock}: missing; the task does not say which K it was compiled with") from None
    except ValidationError as e:
        raise IntegrityError(f"{paths.capability_lock}: not a capability lock ({e.error_count()} error(s): "
                             f"{e.errors()[0]['msg']})") from None


def verifier_file_hashes(paths: TaskDir) -> dict[str, str | None]:
    """sha256 of `verifier/spec.json` and `verifier/calibration.json` (None for a missing file)."""
    return {rel: sha256_file(paths.root / rel) if (paths.root / rel).is_file() else None
            for rel in (VERIFIER_SPEC, VERIFIER_CALIBRATION)}


def verifier_problems(paths: TaskDir, results: VerifierResults) -> list[tuple[str, str]]:
    """[(file, why)]: how `results` were not produced under the task's current verifier spec and calibration."""
    current = verifier_file_hashes(paths)
    problems = []
    for rel, recorded in ((VERIFIER_SPEC, results.spec_sha256), (VERIFIER_CALIBRATION, results.calibration_sha256)):
        now = current[rel]
        if now is None:
            problems.append((rel, f"missing; the verifier results were produced under {recorded[:12]}..."))
        elif now != recorded:
            problems.append((rel, f"the verifier ran under {recorded[:12]}..., the file is now {now[:12]}..."))
    return problems


def review_problems(review: ReviewVerdict) -> list[str]:
    """Why `review` does not accept the episode."""
    if not review.accepted:
        route = f" (routes to {review.route_to.value})" if review.route_to else ""
        return [f"the reviewer rejected the episode{route}"]
    return [f"the review accepts the episode but its claim {c.claim!r} does not hold" for c in review.claims if not c.holds]


def own_results_problems(folder: Path, verifier_results: VerifierResults, review: ReviewVerdict,
                         whose: str = "those given") -> list[tuple[str, str]]:
    """[(file, why)]: how `verifier_results` and `review` are not the ones stages 8 and 9 wrote into the
    episode folder (`verification.json`, `review.json`): missing, unreadable, or different (`whose`
    names the compared values in messages, e.g. `q's`). Results carry no episode id, so this is
    what ties q's evidence to its own episode."""
    problems: list[tuple[str, str]] = []
    for name, model, given, what, stage in (
        (VERIFICATION_FILE, VerifierResults, verifier_results, "verifier results", "verified"),
        (REVIEW_FILE, ReviewVerdict, review, "review verdict", "reviewed"),
    ):
        path = folder / name
        if not path.is_file():
            problems.append((name, f"missing: the episode was never {stage}"))
            continue
        try:
            stored = load_artifact(model, path)
        except DatafarmError as e:
            problems.append((name, f"does not load ({type(e).__name__}): the episode's {what} cannot be read"))
            continue
        if stored != given:
            problems.append((name, f"holds other {what} than {whose}: q's evidence must be the episode's own"))
    return problems


def sandbox_of(rollout: Line) -> tuple[str, bool]:
    """(sandbox provider name, isolated) of a rollout event."""
    name = str(rollout.detail("sandbox") or "?")
    return name, bool(rollout.detail("isolated")) and name != "none"


def admission_rollout(view: LedgerView, episode_id: str, rel: str) -> tuple[Line | None, list[str]]:
    """The passing admission rollout that wrote `episodes/<id>`, or (None, why not)."""
    rollouts = view.rollouts_of(episode_id)
    if not rollouts:
        return None, [f"the ledger has no rollout entry for episode {episode_id}: it was not produced by the harness"]
    line = rollouts[-1]
    entry = line.entry
    problems = []
    if len(rollouts) > 1:
        problems.append(f"the ledger has {len(rollouts)} rollout entries for episode {episode_id} "
                        f"({', '.join(r.where for r in rollouts)})")
    if entry.stage != Stage.rollout or line.detail("seed_kind") != "admission":
        problems.append(f"{line.where}: episode {episode_id} came from a {line.detail('seed_kind')} rollout; "
                        "only admission seeds are admitted")
    if entry.outcome != LedgerOutcome.ok:
        problems.append(f"{line.where}: the rollout of episode {episode_id} ended {entry.outcome.value}, not ok")
    if line.detail("folder") != rel:
        problems.append(f"{line.where}: the rollout wrote {line.detail('folder')}, not {rel}")
    if not isinstance(line.detail("admission_index"), int):
        problems.append(f"{line.where}: the rollout does not name its admission seed index")
    return line, problems


def unrecorded_files(view: LedgerView, rel: str, files: Mapping[str, str], rollout: Line) -> list[tuple[str, str]]:
    """[(file, why)]: files of `rel` (`episodes/<id>`) that differ from what the rollout recorded, that the
    rollout recorded but are missing, or that no ledger entry recorded at all."""
    prefix = f"{rel}/"
    written = {name[len(prefix):]: digest for name, digest in rollout.entry.outputs.items() if name.startswith(prefix)}
    later = view.recorded_outputs(prefix)
    problems = []
    for name in sorted(set(written) - set(files)):
        problems.append((f"{rel}/{name}", f"recorded by the rollout ({rollout.where}) but missing"))
    for name, digest in sorted(files.items()):
        if name in written:
            if written[name] != digest:
                problems.append((f"{rel}/{name}", f"changed since the rollout wrote it ({rollout.where})"))
        elif name not in later:
            problems.append((f"{rel}/{name}", "no ledger entry records this file"))
        elif later[name][0] != digest:
            problems.append((f"{rel}/{name}", f"differs from the hash {later[name][1].where} recorded"))
    return problems


def write_admission(
    task_dir: Path | str,
    episode_id: str,
    verdict: JudgeVerdict,
    lock: JudgeLock | None,
    verifier_results: VerifierResults,
    review: ReviewVerdict,
    *,
    allow_unsafe_sandbox: bool = False,
    actor: LedgerActor | None = None,
    now: datetime | None = None,
) -> AdmissionRecord:
    """Write q for `episodes/<episode_id>` and append its `admission` ledger event; see the module
    docstring for what is checked.

    `lock` is the judge lock the caller judged under (None: `judge/lock.json`). With
    `allow_unsafe_sandbox` an episode whose expert ran in the `none` sandbox is admitted, and the
    ledger event records that the policy allowed it. Raises AdmissionRefused (exit 4) listing every
    problem, having written nothing; StateError when the episode is already admitted (a ledger
    admission event names it). An `admission.json` without a ledger event (a crash between the two
    writes) is rewritten.
    """
    paths = TaskDir(Path(task_dir))
    rel = f"{paths.episodes_dir.name}/{episode_id}"
    folder = paths.episode(episode_id)
    what = f"episode {episode_id}: not admitted"
    if not folder.is_dir():
        raise AdmissionRefused([Problem("no such episode folder", file=Path(rel))], what)
    ledger = Ledger(paths.root)
    report = ledger.verify()
    if not report.ok:
        raise AdmissionRefused([Problem(f"the ledger fails verification: {p.render()}", file=Path("ledger.jsonl"))
                                for p in report.problems], what)
    view = LedgerView.read(ledger.path)
    if done := view.admissions_of(episode_id):
        raise StateError(f"episode {episode_id} is already admitted ({done[-1].where})")

    problems: list[Problem] = []

    def problem(message: str, file: str | None = None) -> None:
        problems.append(Problem(message, file=Path(file) if file else None))

    # the checks that came before: J, verifier, reviewer
    if not verdict.passed:
        problem(f"J's verdict failed: {verdict.reason}")
    for check in verifier_results.checks:
        if not check.passed:
            route = f", routes to {check.route_to.value}" if check.route_to else ""
            problem(f"verifier check {check.check.value} failed (metric {check.metric:g}, threshold {check.threshold:g}{route})")
    for file, message in verifier_problems(paths, verifier_results):
        problem(message, file)
    for message in review_problems(review):
        problem(message)
    for name, message in own_results_problems(folder, verifier_results, review):
        problem(message, f"{rel}/{name}")

    # J: frozen, unchanged, and the one that judged
    current: JudgeLock | None = None
    try:
        current = load_lock(paths.judge_dir)
        load_frozen(paths.judge_dir, ledger)
    except DatafarmError as e:
        problem(str(e), "judge/lock.json")
    lock = lock if lock is not None else current
    if lock is not None:
        if current is not None and lock.spec_sha256 != current.spec_sha256:
            problem(f"the lock given froze {lock.spec_sha256[:12]}..., judge/lock.json froze {current.spec_sha256[:12]}...",
                    "judge/lock.json")
        if not judged_under(verdict, lock):
            problem(f"the verdict came from J {verdict.judge_sha256[:12]}..., not the frozen J {lock.spec_sha256[:12]}...: "
                    "a later freeze invalidated it")

    # the episode as the harness wrote it
    try:
        record = load_artifact(EpisodeRecord, folder / "episode.json")
    except DatafarmError as e:
        record = None
        problem(f"episode.json does not load: {e}", f"{rel}/episode.json")
    if record is not None and record.verdict != verdict:
        problem("the verdict given is not the one recorded in episode.json", f"{rel}/episode.json")
    rollout, rollout_problems = admission_rollout(view, episode_id, rel)
    for message in rollout_problems:
        problem(message)
    files, file_problems = episode_files(folder)
    for name, message in file_problems:
        problem(message, f"{rel}/{name}")
    seed_index = -1
    sandbox, isolated = "?", False
    if rollout is not None:
        seed_index = rollout.detail("admission_index") if isinstance(rollout.detail("admission_index"), int) else -1
        if lock is not None and rollout.entry.inputs.get("judge/spec.json") != lock.spec_sha256:
            problem(f"{rollout.where}: the rollout was judged by another J than the frozen one")
        for file, message in unrecorded_files(view, rel, files, rollout):
            problem(message, file)
        try:
            report_file = load_artifact(RolloutReport, folder / REPORT_FILE)
            if report_file.admission_index != seed_index:
                problem(f"rollout.json names admission seed {report_file.admission_index}, the ledger {seed_index}",
                        f"{rel}/{REPORT_FILE}")
        except DatafarmError as e:
            problem(f"rollout.json does not load: {e}", f"{rel}/{REPORT_FILE}")
        sandbox, isolated = sandbox_of(rollout)
        if sandbox not in _SANDBOXES:
            problem(f"{rollout.where}: the expert ran in sandbox {sandbox!r}, not one of {', '.join(_SANDBOXES)}")
        elif not isolated and not allow_unsafe_sandbox:
            problem(f"{rollout.where}: the expert ran without isolation (sandbox {sandbox}); admission refuses it "
                    "unless the unsafe-sandbox policy is given explicitly")
    try:
        k = load_capability_lock(paths)
    except IntegrityError as e:
        k = None
        problem(str(e), "capability.lock")

    if problems or lock is None or k is None or rollout is None:
        raise AdmissionRefused(problems or [Problem("missing inputs")], what)

    try:
        record_q = AdmissionRecord(
            episode_id=episode_id, seed_index=seed_index, judge=verdict, verifier=verifier_results, review=review,
            files=files, k_version=k.k_version, k_sha256=k.k_sha256, sandbox=sandbox,
            admitted_at=now or datetime.now(UTC))
    except ValidationError as e:
        raise AdmissionRefused([Problem(f"q does not validate: {err['msg']}", field=".".join(map(str, err["loc"])))
                                for err in e.errors()], what) from None
    path = folder / ADMISSION_FILE
    save_artifact(record_q, path)
    q_sha = sha256_file(path)
    details: dict[str, Any] = {
        "episode_id": episode_id, "folder": rel, "seed_index": seed_index, "admission_sha256": q_sha,
        "judge_sha256": verdict.judge_sha256, "verifier_spec_sha256": verifier_results.spec_sha256,
        "verifier_calibration_sha256": verifier_results.calibration_sha256,
        "reviewer": f"{review.provider}/{review.model}", "k_version": k.k_version, "k_sha256": k.k_sha256,
        "sandbox": sandbox, "isolated": isolated, "rollout_seq": rollout.entry.seq,
    }
    if not isolated:
        details["unsafe_sandbox_allowed"] = True
    try:
        ledger.append(
            Stage.admit, LedgerEvent.admission, LedgerOutcome.ok,
            f"admitted: J, {len(verifier_results.checks)} verifier checks and the review passed"
            + ("; expert ran WITHOUT a sandbox (allowed by the unsafe-sandbox policy)" if not isolated else ""),
            actor=actor or ADMISSION_ACTOR,
            inputs={f"{rel}/{name}": digest for name, digest in files.items()},
            outputs={f"{rel}/{ADMISSION_FILE}": q_sha},
            details=details,
        )
    except BaseException:
        path.unlink(missing_ok=True)  # no q without its ledger event
        raise
    return record_q


def load_admission(folder: Path) -> AdmissionRecord:
    """q of an episode folder (InputError naming the file when it is missing or invalid)."""
    return load_artifact(AdmissionRecord, folder / ADMISSION_FILE)
