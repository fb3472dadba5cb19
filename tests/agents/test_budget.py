"""The per-task token and dollar budget stops a stage cleanly, with a ledger entry, before a call it
cannot pay for; spending already in the ledger counts after a resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from datafarm import capability
from datafarm.agents import BudgetExhausted, FunctionProvider, TaskAgents, TaskBudget, author_task
from datafarm.agents.messages import ModelResponse, ToolCall
from datafarm.agents.providers.base import ProviderSettings
from datafarm.artifacts.ledger_entry import LedgerEvent, LedgerOutcome
from datafarm.errors import InputError
from datafarm.ledger import Ledger
from tests.agents.conftest import fast_settings, make_request, make_task_dir
from tests.agents.loopback import WIRES, LoopbackAPI


def looking_forever(request, info) -> ModelResponse:
    """A model that never writes anything: it keeps listing the views."""
    return ModelResponse.of(ToolCall(f"c{info.call_index}", "list_views", {}))


def test_token_budget_stops_the_stage_with_a_ledger_entry(tmp_path: Path) -> None:
    request = make_request(budget={"max_usd": 10.0, "max_tokens": 30_000})
    tdir = make_task_dir(tmp_path / "task", request)
    agents = TaskAgents.open(request, tdir, providers={"author": FunctionProvider(looking_forever)})
    with pytest.raises(BudgetExhausted, match="LLM budget exhausted") as caught:
        agents.author().run(author_task("grounding"))
    assert caught.value.exit_code == 3
    entries = list(Ledger(tdir.ledger).entries())
    calls = [e for e in entries if e.event == LedgerEvent.llm_call and e.outcome == LedgerOutcome.ok]
    stop = entries[-1]
    assert len(calls) >= 2 and stop.event == LedgerEvent.llm_call and stop.outcome == LedgerOutcome.skipped
    assert stop.details["budget"]["max_tokens"] == 30_000
    assert stop.details["budget"]["spent_tokens"] == sum(e.cost.input_tokens + e.cost.output_tokens for e in calls)
    assert stop.details["budget"]["spent_tokens"] <= 30_000  # refused before the call that would overrun it
    assert len(list((tdir.transcripts_dir / "author").glob("*.json"))) == len(calls)


def test_dollar_budget_through_a_real_sdk_and_resume_keeps_it(tmp_path: Path, canary_keys) -> None:
    wire = WIRES[0]
    request = make_request(
        roles={"author": {"provider": "openai", "model": wire.model}}, budget={"max_usd": 0.004, "max_tokens": 10_000_000}
    )
    tdir = make_task_dir(tmp_path / "task", request)
    per_call = capability.load().price_table().cost_usd(wire.model, 9000, 200)
    replies = [wire.reply(None, [("list_views", {})], tokens_in=9000, tokens_out=200) for _ in range(5)]
    with LoopbackAPI(replies) as api:
        s = fast_settings()
        settings = ProviderSettings(s.timeout_s, 2048, wire.base_url(api), s.retry)
        with pytest.raises(BudgetExhausted, match=r"costs about \$"):
            TaskAgents.open(request, tdir, settings=settings).author().run(author_task("grounding"))
        assert len(api.requests) == 2  # the third call was never sent
        entries = list(Ledger(tdir.ledger).entries())
        assert sum(e.cost.usd for e in entries) == pytest.approx(2 * per_call)
        assert entries[-1].outcome == LedgerOutcome.skipped

        # A resumed task starts from what the ledger says was spent: nothing more is sent.
        resumed = TaskAgents.open(request, tdir, settings=settings)
        assert resumed.budget.state().spent_usd == pytest.approx(2 * per_call)
        with pytest.raises(BudgetExhausted):
            resumed.author().run(author_task("grounding"))
        assert len(api.requests) == 2


def test_budget_refusal_reasons() -> None:
    budget = TaskBudget(max_usd=1.0, max_tokens=1000)
    assert budget.refusal(500, 0.5) is None
    assert "needs about 1500 tokens but 1000 are left" in budget.refusal(1500, 0.1)
    budget.charge(900, 0.99)
    assert "costs about $0.0200 but $0.0100 is left" in budget.refusal(50, 0.02)
    budget.charge(100, 0.0)
    assert budget.remaining_tokens == 0 and "exhausted: spent 1000 of 1000 tokens" in budget.refusal(1, 0.0)


def test_unpriced_model_is_refused_before_any_call(tmp_path: Path, canary_keys) -> None:
    request = make_request(roles={"author": {"provider": "openai", "model": "gpt-99-unpriced"}})
    tdir = make_task_dir(tmp_path / "task", request)
    with pytest.raises(InputError, match="has no price in the capability layer's table"):
        TaskAgents.open(request, tdir).author()
