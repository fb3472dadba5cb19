"""Resume after SIGKILL (issue 8, item 8): `datafarm compile` run as a subprocess is killed with
SIGKILL in the middle of the expert, rollout, render and verify stages, and `datafarm compile
--resume` is run after each kill until the task is done. The ledger written before each kill stays
a prefix of the final ledger, the ledger verifies, nothing the killed runs left half-done is
counted, no episode is produced, rendered, verified, reviewed or admitted twice, and `datafarm
admit` certifies the dataset.

One chain of kills on one task (n=1, a private copy of the nest_cups example) keeps it to about one
compile's time plus the work each kill throws away: 518 s measured on 2 cores shared with other work
(load about 5), most of it the verifier's calibration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"
DATAFARM = str(Path(sys.executable).with_name("datafarm"))
pytestmark = pytest.mark.slow

Entries = list[dict]
KillWhen = Callable[[Path, Entries], bool]


def complete_lines(ledger: Path) -> list[bytes]:
    """The ledger's complete lines (a line torn by the kill is not part of what was written)."""
    if not ledger.is_file():
        return []
    data = ledger.read_bytes()
    return data[: data.rfind(b"\n") + 1].splitlines(keepends=True)


def entries_of(lines: list[bytes]) -> Entries:
    """The entries of complete ledger lines."""
    return [json.loads(line) for line in lines]


def started(stage: str) -> KillWhen:
    """Kill as soon as `stage` has started."""
    return lambda task, new: any(e["event"] == "stage_started" and e["stage"] == stage for e in new)


def dev_rollout_done(task: Path, new: Entries) -> bool:
    """Kill in the expert stage, after its first dev rollout (the author is iterating)."""
    return any(e["event"] == "rollout" and e["stage"] == "expert" for e in new)


def rendering(task: Path, new: Entries) -> bool:
    """Kill while an episode's videos are being written (in its scratch folder)."""
    return any(p.is_file() for p in task.glob("episodes/*/.render-*/obs/*.mp4"))


KILLS: list[tuple[str, KillWhen]] = [
    ("expert", dev_rollout_done),
    ("rollout", started("rollout")),
    ("render", rendering),
    ("verify", started("verify")),
]


def wait_gone(group: int, timeout: float = 30.0) -> None:
    """Wait until no process of the killed compile's process group is left (its rollout workers end
    with it); fail if one outlives `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"processes of the killed compile (group {group}) still run {timeout:.0f} s after the kill")


def run_until(cmd: list[str], task_of: Callable[[], Path | None], when: KillWhen, log: Path) -> list[bytes]:
    """Start `cmd`, SIGKILL it once `when(task folder, ledger entries it appended)` holds, wait for its
    processes to be gone, and return the ledger's complete lines at that moment."""
    task = task_of()
    known = len(complete_lines(task / "ledger.jsonl")) if task else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            task = task or task_of()
            new = entries_of(complete_lines(task / "ledger.jsonl")[known:]) if task else []
            if task and when(task, new):
                break
            if proc.poll() is not None:
                pytest.fail(f"compile ended (exit {proc.returncode}) before the kill point; see {log}:\n"
                            + log.read_text()[-3000:])
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wait_gone(proc.pid)
    return complete_lines(task / "ledger.jsonl")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a datafarm command to its end."""
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=1200, **kw)


@pytest.mark.timeout(2400)
def test_compile_killed_at_several_stages_resumes_to_an_admitted_dataset(tmp_path):
    example = tmp_path / "nest_cups"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("runs"))
    request = example / "request.yaml"
    request.write_text(re.sub(r"^episodes: \d+", "episodes: 1", request.read_text(), flags=re.MULTILINE))
    out = tmp_path / "out"
    log = tmp_path / "compile.log"

    def task_of() -> Path | None:
        # not compile's staging folder (`.<id>.partial-<pid>`), renamed into place once written
        found = [p for p in out.glob("*") if not p.name.startswith(".") and (p / "ledger.jsonl").is_file()] \
            if out.is_dir() else []
        return found[0] if found else None

    compile_cmd = [DATAFARM, "compile", str(request), "--out", str(out)]
    snapshots: list[tuple[str, list[bytes]]] = []
    for number, (stage, when) in enumerate(KILLS):
        cmd = compile_cmd + (["--resume"] if number else [])
        lines = run_until(cmd, task_of, when, log)
        running = [e["stage"] for e in entries_of(lines) if e["event"] == "stage_started"]
        assert running and running[-1] == stage, f"killed in {running[-1:]} instead of {stage}"
        snapshots.append((stage, lines))

    done = run(compile_cmd + ["--resume"])
    assert done.returncode == 0, done.stdout + done.stderr
    task = task_of()
    final = complete_lines(task / "ledger.jsonl")
    assert final == (task / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    for stage, lines in snapshots:
        assert final[: len(lines)] == lines, f"the ledger written before the kill in {stage} was changed"
    verified = run([DATAFARM, "ledger", "verify", str(task)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    admitted = run([DATAFARM, "admit", str(task)])
    assert admitted.returncode == 0, admitted.stdout + admitted.stderr
    assert (task / "certificate.json").is_file()

    entries = entries_of(final)
    resumes = [e for e in entries if e["event"] == "resume"]
    assert len(resumes) == len(KILLS)
    (episode,) = [p.name for p in (task / "episodes").iterdir()]

    def count(event: str, stage: str | None = None, outcome: str | None = None) -> int:
        return sum(1 for e in entries if e["event"] == event and e["details"].get("episode_id") == episode
                   and (stage is None or e["stage"] == stage) and (outcome is None or e["outcome"] == outcome))

    # produced, rendered, verified, reviewed and admitted once: work a kill cut short was never counted
    assert count("rollout", "rollout") == 1
    assert count("render", "render") == 1
    assert count("check", "verify") == 1
    assert count("review", "review") == 1
    assert count("admission", "admit", "ok") == 1
    passing = [e["details"]["admission_index"] for e in entries
               if e["event"] == "rollout" and e["stage"] == "rollout" and e["outcome"] == "ok"]
    assert passing == [0]

    # the render killed half-way left its scratch videos: kept in attempts/, recorded, not counted
    asides = [e for e in entries if e["details"].get("action") == "set_aside" and e["details"].get("episode_id") == episode]
    assert asides and all(key.startswith(f"episodes/{episode}/") for e in asides for key in e["inputs"])
    kept = task / asides[0]["details"]["folder"]
    assert any(p.suffix == ".mp4" for p in kept.rglob("*")), sorted(kept.rglob("*"))
    assert not list((task / "episodes" / episode).glob(".*"))
