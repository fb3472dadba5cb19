"""`datafarm cost` (tokens and dollars per stage and role, one-off adaptation, recurring per admitted
episode) and `datafarm doctor` (provider, model, key present yes/no, --ping), as functions and as
the typer commands the CLI wires in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from datafarm.agents import cost_report, doctor
from datafarm.agents.commands import cost_command, doctor_command
from datafarm.agents.providers.function import BUILTIN_ROLE_FUNCTIONS, _BUILTIN_LOADED
from datafarm.artifacts.ledger_entry import LedgerActor, LedgerCost, LedgerEvent, LedgerOutcome
from datafarm.artifacts.stages import Stage
from datafarm.ledger import Ledger
from tests.agents.conftest import OPENAI_CANARY, make_request, make_task_dir
from tests.agents.loopback import WIRES, LoopbackAPI


def cli() -> typer.Typer:
    """A CLI wired the way datafarm/cli.py wires these commands."""
    app = typer.Typer(add_completion=False)
    app.command(name="cost")(cost_command)
    app.command(name="doctor")(doctor_command)
    return app


def spend(
    ledger: Ledger, stage: Stage, role: str, usd: float, tokens: tuple[int, int] = (1000, 100), model: str = "gpt-4o"
) -> None:
    ledger.append(
        stage=stage,
        event=LedgerEvent.llm_call,
        outcome=LedgerOutcome.ok,
        reason="test",
        actor=LedgerActor(role=role, provider="openai", model=model),
        cost=LedgerCost(input_tokens=tokens[0], output_tokens=tokens[1], usd=usd),
    )


@pytest.fixture
def spent_task(tmp_path: Path):
    tdir = make_task_dir(tmp_path / "task", make_request(budget={"max_usd": 40.0, "max_tokens": 5_000_000}))
    ledger = Ledger(tdir.ledger)
    spend(ledger, Stage.grounding, "author", 3.0)
    spend(ledger, Stage.grounding, "author", 2.0)
    spend(ledger, Stage.contract, "author", 1.5)
    spend(ledger, Stage.judge, "judge_writer", 4.0, model="claude-sonnet-4-5")
    spend(ledger, Stage.expert, "author", 10.5)
    spend(ledger, Stage.render, "author", 5.0)
    for _ in range(4):
        spend(ledger, Stage.review, "reviewer", 0.8, tokens=(500, 50))
    for _ in range(2):
        ledger.append(stage=Stage.admit, event=LedgerEvent.admission, outcome=LedgerOutcome.ok, reason="admitted")
    ledger.append(stage=Stage.admit, event=LedgerEvent.admission, outcome=LedgerOutcome.fail, reason="refused")
    ledger.append(stage=Stage.expert, event=LedgerEvent.llm_call, outcome=LedgerOutcome.skipped, reason="LLM budget exhausted")
    return tdir


def test_cost_report_splits_one_off_and_recurring(spent_task) -> None:
    report = cost_report(spent_task.root)
    assert report.adaptation_usd == pytest.approx(21.0)
    assert report.render_contract_usd == pytest.approx(5.0)
    assert report.recurring_usd == pytest.approx(3.2)
    assert report.admitted == 2 and report.per_episode_usd == pytest.approx(1.6)
    assert report.total_usd == pytest.approx(29.2) and report.budget_stops == 1
    assert (report.budget_usd, report.budget_tokens) == (40.0, 5_000_000)
    assert [(line.stage, line.role, line.calls) for line in report.lines] == [
        ("grounding", "author", 2),
        ("contract", "author", 1),
        ("judge", "judge_writer", 1),
        ("expert", "author", 1),
        ("render", "author", 1),
        ("review", "reviewer", 4),
    ]
    assert report.lines[0].input_tokens == 2000 and report.lines[-1].output_tokens == 200
    assert report.total_tokens == 6 * 1100 + 4 * 550


def test_cost_command_prints_the_report(spent_task) -> None:
    result = CliRunner().invoke(cli(), ["cost", str(spent_task.root)])
    assert result.exit_code == 0, result.output
    assert "one-off adaptation (grounding to expert): $21.0000" in result.output
    assert "render contract: $5.0000" in result.output
    assert "recurring: $3.2000 over 2 admitted episode(s): $1.6000 per episode" in result.output
    assert "judge_writer" in result.output and "openai/claude-sonnet-4-5" in result.output
    data = json.loads(CliRunner().invoke(cli(), ["cost", str(spent_task.root), "--json"]).output)
    assert data["per_episode_usd"] == pytest.approx(1.6) and len(data["lines"]) == 6


def test_cost_without_admitted_episodes_and_without_a_ledger(tmp_path: Path) -> None:
    tdir = make_task_dir(tmp_path / "t", make_request())
    spend(Ledger(tdir.ledger), Stage.grounding, "author", 0.5)
    assert cost_report(tdir.root).per_episode_usd is None
    assert "no episode admitted yet" in "\n".join(cost_report(tdir.root).summary_lines())
    missing = CliRunner().invoke(cli(), ["cost", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "error" in missing.output


def write_request(tmp_path: Path, roles: dict) -> Path:
    path = tmp_path / "request.yaml"
    body = {"task": "nest the cups; success: nested", "clip": "clip-not-here", "episodes": 1, "mode": "sim2real", "roles": roles}
    path.write_text(yaml.safe_dump(body))
    return path


HOSTED = {
    "author": {"provider": "openai", "model": "gpt-4o-mini"},
    "judge_writer": {"provider": "anthropic", "model": "claude-haiku-4-5"},
    "reviewer": {"provider": "builtin", "model": "builtin"},
}


def test_doctor_reports_keys_without_showing_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_BUILTIN_LOADED, "reviewer", lambda request, info: "ok")
    request = make_request(roles=HOSTED)
    report = doctor(request)
    author, judge_writer, reviewer = report.roles
    assert (author.provider, author.model, author.key_env, author.key_present) == (
        "openai",
        "gpt-4o-mini",
        "OPENAI_API_KEY",
        False,
    )
    assert judge_writer.key_env == "ANTHROPIC_API_KEY" and judge_writer.key_present is False
    assert reviewer.key_env is None and reviewer.key_present is None and reviewer.ready
    assert not report.ok and author.problems == ["OPENAI_API_KEY is not set"]

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_CANARY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-" + "x" * 40)
    assert doctor(request).ok
    result = CliRunner().invoke(cli(), ["doctor", str(write_request(tmp_path, HOSTED))])
    assert result.exit_code == 0, result.output
    assert "OPENAI_API_KEY set" in result.output and OPENAI_CANARY not in result.output
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = CliRunner().invoke(cli(), ["doctor", str(write_request(tmp_path, HOSTED)), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert [r["key_present"] for r in data["roles"]] == [True, False, None] and OPENAI_CANARY not in result.output


def test_doctor_says_when_builtin_logic_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulate a role the builtin has no logic for by unregistering the reviewer's.
    monkeypatch.delitem(_BUILTIN_LOADED, "reviewer", raising=False)
    monkeypatch.delitem(BUILTIN_ROLE_FUNCTIONS, "reviewer", raising=False)
    report = doctor(make_request())
    author, reviewer = report.roles[0], report.roles[2]
    assert author.provider == "builtin" and author.ready
    assert reviewer.provider == "builtin" and reviewer.key_present is None
    assert not reviewer.ready and "no logic for the reviewer role" in reviewer.problems[0]


def test_doctor_flags_an_unpriced_model(tmp_path: Path, canary_keys) -> None:
    report = doctor(make_request(roles={"author": {"provider": "openai", "model": "gpt-99"}}))
    assert not report.ok and "gpt-99 has no price" in report.roles[0].problems[0]


def test_doctor_ping_makes_one_minimal_call_per_model(tmp_path: Path, canary_keys, monkeypatch: pytest.MonkeyPatch) -> None:
    openai_wire, anthropic_wire = WIRES
    roles = {
        "author": {"provider": "openai", "model": "gpt-4o-mini"},
        "reviewer": {"provider": "openai", "model": "gpt-4o-mini"},
        "judge_writer": {"provider": "anthropic", "model": "claude-haiku-4-5"},
    }
    with LoopbackAPI([openai_wire.reply("ok")]) as oa, LoopbackAPI([anthropic_wire.reply("ok")]) as an:
        monkeypatch.setenv("OPENAI_BASE_URL", openai_wire.base_url(oa))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_wire.base_url(an))
        result = CliRunner().invoke(cli(), ["doctor", str(write_request(tmp_path, roles)), "--ping", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert all(r["ping"]["ok"] for r in data["roles"])
    assert data["roles"][0]["base_url"] == openai_wire.base_url(oa)
    assert len(oa.requests) == 1 and len(an.requests) == 1  # author and reviewer share one ping
    assert oa.requests[0].body["max_completion_tokens"] == 16
    assert an.requests[0].body["messages"][0]["content"][0]["text"] == "Reply with the single word: ok"


def test_doctor_ping_failure_is_reported_not_raised(tmp_path: Path, canary_keys, monkeypatch: pytest.MonkeyPatch) -> None:
    wire = WIRES[0]
    with LoopbackAPI([wire.error(401, "Incorrect API key provided")]) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pw@" + wire.base_url(api).removeprefix("http://") + "?token=1")
        result = CliRunner().invoke(
            cli(), ["doctor", str(write_request(tmp_path, {"author": HOSTED["author"]})), "--ping", "--json"]
        )
    assert result.exit_code == 1
    author = json.loads(result.output)["roles"][0]
    assert (
        not author["ping"]["ok"]
        and "HTTP 401" in author["ping"]["detail"]
        and "Incorrect API key provided" in author["ping"]["detail"]
    )
    assert "pw" not in author["base_url"] and "token" not in author["base_url"]
    assert len(api.requests) == 1  # a 401 is not retried
