"""The `datafarm` command as a user runs it: a real subprocess, real exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"
DATAFARM = [sys.executable, "-m", "datafarm.cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["COLUMNS"] = "200"
    return subprocess.run([*DATAFARM, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_help_lists_only_working_commands():
    r = run("--help")
    assert r.returncode == 0
    import typer.main

    from datafarm.cli import app

    listed = set(typer.main.get_command(app).commands)
    assert listed == {"validate", "compile", "schema", "capability", "ledger", "cost", "doctor", "admit", "audit", "render", "studio"}
    for name in listed:
        assert name in r.stdout
    for command in ("validate", "compile", "schema", "capability show", "ledger verify", "ledger show", "ledger repair", "cost", "doctor", "admit", "audit", "render", "studio render", "studio score"):
        assert run(*command.split(), "--help").returncode == 0


def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("datafarm ")


def test_compile_then_ledger_verify_and_show(example):
    r = run("compile", str(example))
    # 0: every stage finished or the rest is not built yet; 5: a stage was rejected (said in the output)
    assert r.returncode in (0, 5), r.stderr
    assert "task folder created:" in r.stdout
    assert ("compile stopped at" in r.stdout) == (r.returncode == 5 or "not implemented yet" in r.stdout)
    task = Path(r.stdout.split("task folder created:")[1].split()[0])
    assert (task / "ledger.jsonl").is_file()

    v = run("ledger", "verify", str(task))
    assert v.returncode == 0, v.stdout + v.stderr
    s = run("ledger", "show", str(task))
    assert s.returncode == 0 and "request" in s.stdout and "grounding" in s.stdout

    again = run("compile", str(example))
    assert again.returncode == 3 and "--resume" in again.stderr
    resumed = run("compile", str(example), "--resume")
    assert resumed.returncode in (0, 5) and "task folder resumed" in resumed.stdout


def test_bad_request_exits_2_with_file_line_field_and_suggestion(example):
    example.write_text(example.read_text().replace("episodes: 4", "epsiodes: 4"))
    r = run("compile", str(example))
    assert r.returncode == 2
    assert "request.yaml:" in r.stderr and "epsiodes" in r.stderr and "episodes" in r.stderr
    assert not (example.parent / "runs").exists()


def test_validate_reports_the_clip(example):
    r = run("validate", str(example))
    assert r.returncode == 0, r.stderr
    for cam in ("front", "left", "right"):
        assert cam in r.stdout
    assert not (example.parent / "runs").exists()


def test_schema_prints_json_schema():
    r = run("schema", "G")
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    assert schema["additionalProperties"] is False
    listing = run("schema")
    assert "grounding" in listing.stdout and "request" in listing.stdout
    bad = run("schema", "groundng")
    assert bad.returncode == 2 and "grounding" in bad.stderr


def test_capability_show():
    r = run("capability", "show")
    assert r.returncode == 0
    assert "k1" in r.stdout and "prices.yaml" in r.stdout and "sha256" in r.stdout
    assert run("capability", "show", "k999").returncode == 2


def test_render_outside_a_task_folder_is_refused_and_writes_nothing(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    for folder in (plain, tmp_path / "missing"):
        r = run("render", str(folder), "--episode", "adm-0000-x")
        assert r.returncode == 2, r.stderr
        assert f"{folder}: no task folder here (no ledger.jsonl)" in r.stderr and "Traceback" not in r.stderr
    assert list(plain.iterdir()) == [] and not (tmp_path / "missing").exists()
