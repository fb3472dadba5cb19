"""`datafarm ledger verify|show|repair` as a user runs them: output and exit codes."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from datafarm.ledger import Ledger
from datafarm.ledger.commands import app
from tests.ledger.helpers import REASONS, small_ledger

runner = CliRunner()


def test_verify_ok_prints_count_and_head(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "OK: 5 entries" in result.stdout and ledger.head().hash in result.stdout
    assert len(result.stdout.strip().splitlines()) == 1


def test_verify_names_first_bad_entry_first_and_exits_4(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    lines = ledger.path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"1200", b"1201")  # inflate a token count
    del lines[3]  # and drop an entry
    ledger.path.write_bytes(b"".join(lines))
    result = runner.invoke(app, ["verify", str(ledger.path)])
    assert result.exit_code == 4
    out = result.stdout
    assert "line 2 (seq 1): hash mismatch" in out
    assert "line 4 (seq 4): seq gap" in out
    assert out.index("line 2 (seq 1)") < out.index("line 4 (seq 4)")
    assert "first bad entry: line 2 (seq 1)" in out


def test_verify_reports_torn_last_line(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    ledger.path.write_bytes(ledger.path.read_bytes()[:-7])
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 4
    assert "line 5 (seq 4): torn last line (crash mid-write)" in result.stdout
    assert "repair" in result.stdout


def test_missing_ledger_exits_2_naming_the_path(tmp_path: Path) -> None:
    for command in ("verify", "show", "repair"):
        result = runner.invoke(app, [command, str(tmp_path / "task")])
        assert result.exit_code == 2, (command, result.output)
        assert str(tmp_path / "task" / "ledger.jsonl") in result.stderr.replace("\n", "")
        assert "no ledger here" in result.stderr


def test_show_prints_a_table(tmp_path: Path) -> None:
    small_ledger(tmp_path)
    result = runner.invoke(app, ["show", str(tmp_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for heading in ("seq", "time (UTC)", "stage", "event", "actor", "outcome", "reason", "route to", "cost"):
        assert heading in out
    for reason in REASONS:
        assert reason in out
    assert "author (builtin/k1)" in out and "$0.000015 1200+300 tok" in out and "rejection" in out


def test_show_filters_by_stage_and_last(tmp_path: Path) -> None:
    small_ledger(tmp_path, n=10)
    result = runner.invoke(app, ["show", str(tmp_path), "--stage", "grounding", "--last", "2"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "grounding" in line]
    assert len(rows) == 2 and "llm_call" in rows[0] and "rejection" in rows[1]
    assert REASONS[0] not in result.stdout  # the request stage is filtered out
    bad = runner.invoke(app, ["show", str(tmp_path), "--stage", "nowhere"])
    assert bad.exit_code == 2


def test_show_on_torn_ledger_shows_what_it_can_then_exits_4(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    ledger.path.write_bytes(ledger.path.read_bytes()[:-7])
    result = runner.invoke(app, ["show", str(tmp_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 4
    assert REASONS[3] in result.stdout and "torn last line" in result.stderr


def test_repair_then_verify(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path)
    ledger.path.write_bytes(ledger.path.read_bytes()[:-7])
    result = runner.invoke(app, ["repair", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "moved to ledger.torn-" in result.stdout
    assert len(list(tmp_path.glob("ledger.torn-*.bin"))) == 1
    assert runner.invoke(app, ["verify", str(tmp_path)]).exit_code == 0
    assert Ledger(tmp_path).head().actor.role == "cli"
    again = runner.invoke(app, ["repair", str(tmp_path)])
    assert again.exit_code == 3 and "nothing to repair" in again.stderr
