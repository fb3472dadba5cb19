"""The frozen judge: J written to `judge/spec.json`, its hash to `judge/lock.json` and to the ledger.

The harness judges only with the frozen spec (`load_frozen`, `judge_frozen`): a spec whose hash
differs from the lock is refused (IntegrityError), and so is a lock the ledger never recorded.
Re-freezing a changed spec is a new ledger attempt whose details name the hash it replaces; a
verdict carries the hash that judged it, so `judged_under(verdict, lock)` tells which episodes the
change invalidated.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.io import load_artifact, save_artifact
from datafarm.artifacts.judge import JudgeLock, JudgeSpec, JudgeVerdict
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.errors import InputError, IntegrityError, StateError
from datafarm.harness.judge.evaluate import evaluate
from datafarm.harness.judge.trajectory import Trajectory
from datafarm.hashing import sha256_json
from datafarm.ledger import Ledger

SPEC_FILE = "spec.json"
"""J's file inside the judge folder."""
LOCK_FILE = "lock.json"
"""The lock's file inside the judge folder."""


def artifact_sha256(value: Artifact | str) -> str:
    """The content hash of an artifact (canonical JSON of its fields), or `value` itself when it is already a hex digest."""
    if isinstance(value, str):
        return value
    return sha256_json(value.model_dump(mode="json", by_alias=True))


def freeze_history(ledger: Ledger) -> list[str]:
    """Spec hashes of every `freeze` event in the ledger, oldest first (empty without a ledger)."""
    if not ledger.exists():
        return []
    return [str(e.details.get("spec_sha256")) for e in ledger.entries() if e.event == LedgerEvent.freeze]


def freeze(
    spec: JudgeSpec,
    judge_dir: Path | str,
    ledger: Ledger,
    *,
    contract: Artifact | str,
    grounding: Artifact | str,
    actor: LedgerActor | Mapping[str, Any] | None = None,
    acceptance: Mapping[str, Any] | None = None,
) -> JudgeLock:
    """Freeze J: write `judge/spec.json`, append a `freeze` event (stage `judge`) and write `judge/lock.json`.

    `contract` and `grounding` are T and G (or their sha256); the lock records their hashes.
    `acceptance` (e.g. `AcceptanceReport.ledger_details()`) is stored in the event's details.
    Freezing the spec that is already frozen returns the existing lock and writes nothing. A
    different spec is a new attempt: its event's details give `previous_spec_sha256` and `attempt`.
    """
    judge_dir = Path(judge_dir)
    digest = spec.sha256()
    lock_path = judge_dir / LOCK_FILE
    history = freeze_history(ledger)
    if lock_path.is_file() and history and history[-1] == digest:
        lock = load_artifact(JudgeLock, lock_path)
        if lock.spec_sha256 == digest and (judge_dir / SPEC_FILE).is_file():
            load_frozen(judge_dir)  # the files on disk must still agree
            return lock
    previous = history[-1] if history else None
    contract_sha, grounding_sha = artifact_sha256(contract), artifact_sha256(grounding)
    save_artifact(spec, judge_dir / SPEC_FILE)
    details: dict[str, Any] = {
        "spec_sha256": digest,
        "previous_spec_sha256": previous,
        "attempt": len(history) + 1,
        "stages": [s.name for s in spec.stages],
        "invariants": [i.shortcut for i in spec.invariants],
    }
    if acceptance is not None:
        details["acceptance"] = dict(acceptance)
    reason = "judge frozen" if previous is None else (
        f"judge re-frozen (attempt {len(history) + 1}): replaces {previous[:12]}; episodes judged by it are invalid")
    entry = ledger.append(
        Stage.judge, LedgerEvent.freeze, LedgerOutcome.ok, reason,
        actor=actor if actor is not None else LedgerActor(role="harness"),
        inputs={"contract": contract_sha, "grounding": grounding_sha},
        outputs={"judge/spec.json": digest},
        details=details,
    )
    lock = JudgeLock(spec_sha256=digest, contract_sha256=contract_sha, grounding_sha256=grounding_sha,
                     frozen_at=datetime.now(timezone.utc), ledger_seq=entry.seq)
    save_artifact(lock, lock_path)
    return lock


def load_lock(judge_dir: Path | str) -> JudgeLock:
    """The lock of a judge folder; StateError when J was never frozen."""
    path = Path(judge_dir) / LOCK_FILE
    if not path.is_file():
        raise StateError(f"{path}: the judge is not frozen (no lock); freeze J before judging with it")
    return load_artifact(JudgeLock, path)


def load_frozen(judge_dir: Path | str, ledger: Ledger | None = None) -> JudgeSpec:
    """The frozen J. Refuses (IntegrityError) a spec whose hash differs from the lock, and, when
    `ledger` is given, a lock that is not the ledger's latest freeze."""
    judge_dir = Path(judge_dir)
    lock = load_lock(judge_dir)
    spec_path = judge_dir / SPEC_FILE
    try:
        spec = load_artifact(JudgeSpec, spec_path)
    except InputError as e:
        raise IntegrityError(f"{spec_path}: the frozen judge spec no longer loads ({e})") from None
    digest = spec.sha256()
    if digest != lock.spec_sha256:
        raise IntegrityError(
            f"{spec_path} has sha256 {digest} but {judge_dir / LOCK_FILE} froze {lock.spec_sha256}: J changed after "
            "it was frozen; the harness judges only with the frozen J (re-freezing is a new ledger attempt and "
            "invalidates the episodes judged by the old one)"
        )
    if ledger is not None:
        history = freeze_history(ledger)
        if not history or history[-1] != lock.spec_sha256:
            latest = history[-1] if history else "none"
            raise IntegrityError(
                f"{judge_dir / LOCK_FILE} froze {lock.spec_sha256} but the ledger's latest freeze is {latest}"
            )
    return spec


def judge_frozen(judge_dir: Path | str, traj: Trajectory, ledger: Ledger | None = None) -> JudgeVerdict:
    """Judge `traj` with the frozen J of `judge_dir` (refusing a J that differs from its lock)."""
    return evaluate(load_frozen(judge_dir, ledger), traj)


def judged_under(verdict: JudgeVerdict, lock: JudgeLock) -> bool:
    """True when `verdict` came from the J that `lock` froze; False means a later freeze invalidated it."""
    return verdict.judge_sha256 == lock.spec_sha256
