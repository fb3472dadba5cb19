"""Reading the admission-seed secret for admission and audit (the only readers besides the harness).

Like `datafarm.harness.seeds.load_secret`, the secret is checked against the commitment the ledger
recorded; unlike it, the commitment is read from a `LedgerView`, so one damaged ledger line does not
stop admission from listing the dataset's other problems.
"""

from __future__ import annotations

from datafarm.admission.ledger_view import LedgerView
from datafarm.harness.seeds import COMMIT_KEY, SECRET_FILE, commitment, secret_path
from datafarm.taskdir import TaskDir


def read_secret(paths: TaskDir, view: LedgerView) -> tuple[bytes | None, list[tuple[str, str]]]:
    """(the secret or None, [(where, problem)]). A secret that does not match the ledger's latest
    commitment is withheld (None): seeds derived from it would prove nothing."""
    path = secret_path(paths.root)
    if not path.is_file():
        return None, [(SECRET_FILE, "missing: the admission seeds cannot be derived")]
    value = path.read_bytes()
    problems: list[tuple[str, str]] = []
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        problems.append((SECRET_FILE, f"has mode {mode:o}: the admission secret must be private (0600)"))
    recorded = [str(ln.detail(COMMIT_KEY)) for ln in view.lines if COMMIT_KEY in ln.entry.details]
    if not recorded:
        return value, [*problems, ("ledger.jsonl", "the ledger holds no commitment to the admission secret")]
    if recorded[-1] != commitment(value):
        return None, [*problems, (SECRET_FILE, "does not match the commitment the ledger recorded: the secret was replaced")]
    return value, problems
