"""Calls to the real providers, only when their key is in the environment (never in CI by default:
CI sets no key; set DATAFARM_LIVE=1 as well when CI is set). One minimal doctor ping and one short
tool-call round trip per provider, with the cheapest priced model (override with
DATAFARM_LIVE_OPENAI_MODEL / DATAFARM_LIVE_ANTHROPIC_MODEL)."""

from __future__ import annotations

import os

import pytest

from datafarm.agents import create_provider, doctor
from datafarm.agents.messages import Message, ModelRequest, ToolSpec
from datafarm.agents.providers.base import ProviderSettings
from tests.agents.conftest import make_request

LIVE = {
    "openai": ("OPENAI_API_KEY", os.environ.get("DATAFARM_LIVE_OPENAI_MODEL", "gpt-4o-mini")),
    "anthropic": ("ANTHROPIC_API_KEY", os.environ.get("DATAFARM_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5")),
}
_KEYS = {name: os.environ.get(env) for name, (env, _) in LIVE.items()}  # read before the env-cleaning fixture


@pytest.fixture
def live_key(request, monkeypatch: pytest.MonkeyPatch) -> str:
    provider = request.param
    env, _ = LIVE[provider]
    if not _KEYS[provider]:
        pytest.skip(f"{env} not set: no live call to {provider}")
    if os.environ.get("CI") and os.environ.get("DATAFARM_LIVE") != "1":
        pytest.skip("live calls in CI need DATAFARM_LIVE=1")
    monkeypatch.setenv(env, _KEYS[provider])
    return provider


@pytest.mark.live
@pytest.mark.parametrize("live_key", list(LIVE), indirect=True)
def test_live_ping_and_tool_call(live_key: str) -> None:
    provider_name = live_key
    model = LIVE[provider_name][1]
    roles = {r: {"provider": provider_name, "model": model} for r in ("author", "judge_writer", "reviewer")}
    report = doctor(make_request(roles=roles), ping=True)
    assert report.ok, report.to_json()

    provider = create_provider(provider_name, model, ProviderSettings(timeout_s=60, max_output_tokens=200))
    tool = ToolSpec(
        "record_colour",
        "Record a colour name.",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    request = ModelRequest(
        system="You answer only by calling tools.",
        messages=(Message.user("Call record_colour with the colour of a clear daytime sky."),),
        tools=(tool,),
        max_output_tokens=200,
    )
    response = provider.complete(request)
    assert response.tool_calls and response.tool_calls[0].name == "record_colour"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
