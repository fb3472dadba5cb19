"""Dev seeds and admission seeds.

Dev seeds are B's `dev_seeds`: the author may ask for rollouts on them while writing the expert.

Admission seeds are held out. The harness derives them from a per-task secret that only it reads:
admission seed i = the first 8 bytes of HMAC-SHA256(secret, "admission:<i>") as a big-endian
integer with the top bit cleared (a 63-bit int, so it is a valid `Variation.seed` and numpy seed).
The secret (32 random bytes, hex) lives in `<task>/harness/secret` (folder 0700, file 0600). It is
never written into B, never mounted into a sandbox (a sandbox sees only the staged controller and
its scratch folder) and never passed to an agent tool. The ledger records only a commitment, the
secret's sha256, when the secret is created; `load_secret` refuses a secret that does not match it,
so a secret swapped after the fact (to steer which scenes admission draws) is caught.

Without the secret the seeds cannot be predicted; with it they are reproducible, which is what
`datafarm audit` needs to re-run admission rollouts.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from datafarm.artifacts.batch import BatchConfig
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.errors import InputError, IntegrityError, Problem, StateError
from datafarm.ledger import Ledger

HARNESS_DIR = "harness"
"""The harness-private folder inside a task folder (never mounted, never shown to an agent)."""
SECRET_FILE = "harness/secret"
"""Where the admission-seed secret lives, relative to the task folder."""
SECRET_BYTES = 32
"""Length of a fresh secret, bytes."""
COMMIT_KEY = "admission_secret_sha256"
"""The ledger details key of the secret's commitment."""
_SEED_MASK = (1 << 63) - 1


def secret_path(task_dir: Path | str) -> Path:
    """`<task>/harness/secret`."""
    return Path(task_dir) / SECRET_FILE


def commitment(secret: bytes) -> str:
    """The hex sha256 of the secret: what the ledger records instead of the secret."""
    return hashlib.sha256(secret).hexdigest()


def admission_seed(secret: bytes, index: int) -> int:
    """Admission seed number `index` (0-based) for `secret`: a 63-bit int from HMAC-SHA256."""
    if index < 0:
        raise ValueError(f"admission seed index must be >= 0, got {index}")
    digest = hmac.new(secret, f"admission:{index}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & _SEED_MASK


def _recorded_commitments(ledger: Ledger) -> list[str]:
    if not ledger.exists():
        return []
    return [str(e.details[COMMIT_KEY]) for e in ledger.entries() if COMMIT_KEY in e.details]


def _write_secret(path: Path) -> bool:
    """Put a fresh secret at `path`: written whole under a temporary name, then linked into place, so a
    kill leaves no secret or a complete one. False when another process put its secret there first."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path.parent, 0o700)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, secrets.token_hex(SECRET_BYTES).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(staging, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(staging)


def create_secret(task_dir: Path | str, ledger: Ledger | None = None) -> str:
    """Create the task's admission secret if it has none, record its commitment in the ledger, and
    return the commitment. Idempotent: an existing secret is kept (and checked against the ledger).
    A whole secret that a kill left without its commitment (killed between putting it in place and the
    ledger entry: nothing can have drawn a seed from it yet) gets its commitment now; IntegrityError
    when the ledger already records admission rollouts."""
    task_dir = Path(task_dir)
    ledger = ledger if ledger is not None else Ledger(task_dir)
    path = secret_path(task_dir)
    created = not path.exists() and _write_secret(path)
    value = load_secret(task_dir, ledger)
    digest = commitment(value)
    if _recorded_commitments(ledger):
        return digest
    if ledger.exists() and any("admission_index" in e.details for e in ledger.entries()):
        raise IntegrityError(f"{path}: the ledger records admission rollouts but no commitment to the secret "
                             "their seeds came from; the secret cannot be vouched for")
    if created:
        reason = "admission seed secret created (the ledger keeps its sha256 only)"
    else:
        reason = ("admission seed secret found without its commitment (a compile killed right after creating "
                  "it); committed now, before any seed is drawn from it")
    ledger.append(Stage.rollout, LedgerEvent.note, LedgerOutcome.info, reason,
                  actor=LedgerActor(role="harness"), details={COMMIT_KEY: digest, "file": SECRET_FILE})
    return digest


def load_secret(task_dir: Path | str, ledger: Ledger | None = None) -> bytes:
    """The task's admission secret. StateError when there is none; IntegrityError when the file is
    readable by others or does not match the commitment the ledger recorded."""
    task_dir = Path(task_dir)
    path = secret_path(task_dir)
    if not path.is_file():
        raise StateError(f"{path}: the task has no admission secret; create it with create_secret")
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise IntegrityError(f"{path} has mode {mode:o}: the admission secret must be private (0600)")
    value = path.read_bytes()
    if len(value) != 2 * SECRET_BYTES or any(c not in b"0123456789abcdef" for c in value):
        raise IntegrityError(f"{path}: not an admission secret ({len(value)} bytes; one is {2 * SECRET_BYTES} "
                             "lowercase hex digits): it was cut short or replaced")
    ledger = ledger if ledger is not None else Ledger(task_dir)
    recorded = _recorded_commitments(ledger)
    if recorded and recorded[-1] != commitment(value):
        raise IntegrityError(f"{path} does not match the admission secret the ledger committed to "
                             f"({recorded[-1][:12]}...): it was replaced")
    return value


def admission_seeds(task_dir: Path | str, count: int, ledger: Ledger | None = None) -> list[int]:
    """The first `count` admission seeds of the task (harness only; never show them to an agent)."""
    secret = load_secret(task_dir, ledger)
    return [admission_seed(secret, i) for i in range(count)]


def dev_seeds(batch: BatchConfig) -> list[int]:
    """B's dev seeds, in B's order."""
    return list(batch.dev_seeds)


def check_dev_seed(batch: BatchConfig, seed: object) -> int:
    """`seed` when it is one of B's dev seeds; InputError otherwise. The refusal says the same thing
    for every seed that is not a dev seed (an admission seed included), so asking reveals nothing."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed not in batch.dev_seeds:
        raise InputError([Problem(f"seed {seed!r} is not one of B's dev seeds", field="seed",
                                  expected=f"one of {list(batch.dev_seeds)}",
                                  hint="rollouts on request are for dev seeds only; admission seeds are held out")])
    return seed
