"""One registry for every provider; keys only from the environment; the builtin provider and the
function-driven test model plug in through the same interface and are recorded the same way."""

from __future__ import annotations

import json

import pytest

from datafarm.agents import FunctionProvider, MissingKeyError, TaskAgents, author_task, create_provider, provider_names
from datafarm.agents.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from datafarm.agents.providers import provider_spec, register_builtin_role
from datafarm.agents.providers.function import BUILTIN_ROLE_FUNCTIONS, _BUILTIN_LOADED
from datafarm.artifacts.request import PROVIDERS
from datafarm.errors import InputError, StateError
from datafarm.ledger import Ledger
from tests.agents.conftest import make_request, valid_grounding


def test_registry_offers_exactly_the_requests_providers() -> None:
    assert provider_names() == sorted(PROVIDERS)
    assert provider_spec("openai").key_env == "OPENAI_API_KEY" and provider_spec("openai").base_url_env == "OPENAI_BASE_URL"
    assert (
        provider_spec("anthropic").key_env == "ANTHROPIC_API_KEY"
        and provider_spec("anthropic").base_url_env == "ANTHROPIC_BASE_URL"
    )
    assert provider_spec("builtin").key_env is None


def test_unknown_provider_names_the_closest() -> None:
    with pytest.raises(InputError, match="did you mean 'openai'"):
        create_provider("opnai", "gpt-4o")


@pytest.mark.parametrize("name, env", [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_hosted_provider_without_key_names_the_variable(name: str, env: str, tmp_path, monkeypatch) -> None:
    # A key in a file the SDK might read is not a key to datafarm.
    (tmp_path / "no-anthropic-config" / "configs").mkdir(parents=True)
    (tmp_path / "no-anthropic-config" / "configs" / "default.json").write_text('{"api_key": "sk-from-a-file-000000000"}')
    with pytest.raises(MissingKeyError) as caught:
        create_provider(name, "some-model", role="author")
    assert f"{env} is not set" in str(caught.value) and "roles.author.provider" in str(caught.value)


def test_builtin_without_role_logic_says_so(monkeypatch) -> None:
    # Simulate a role the builtin has no logic for by unregistering the reviewer's.
    monkeypatch.delitem(_BUILTIN_LOADED, "reviewer", raising=False)
    monkeypatch.delitem(BUILTIN_ROLE_FUNCTIONS, "reviewer", raising=False)
    with pytest.raises(StateError, match="builtin provider has no logic for the reviewer role"):
        create_provider("builtin", "builtin", role="reviewer")


def test_builtin_role_logic_runs_through_the_same_loop(task, monkeypatch) -> None:
    def builtin_author(request: ModelRequest, info) -> ModelResponse:
        return ModelResponse.of(ToolCall("b1", "write_artifact", {"artifact": "G", "content": valid_grounding()}))

    monkeypatch.setitem(_BUILTIN_LOADED, "author", builtin_author)
    result = TaskAgents.open(make_request(), task).author().run(author_task("grounding"))
    record = json.loads(result.transcripts[0].read_text())
    assert (record["provider"], record["model"], record["cost_usd"]) == ("builtin", "builtin", 0.0)
    [entry] = list(Ledger(task.ledger).entries())
    assert entry.actor.provider == "builtin" and entry.cost.usd == 0.0 and entry.cost.input_tokens > 1000


def test_register_builtin_role_is_the_public_way(monkeypatch) -> None:
    monkeypatch.setattr("datafarm.agents.providers.function._BUILTIN_LOADED", {})
    register_builtin_role("judge_writer", lambda request, info: "ok")
    provider = create_provider("builtin", "builtin", role="judge_writer")
    assert provider.name == "builtin" and provider.complete(ModelRequest("", (Message.user("hi"),))).text == "ok"


def test_function_provider_is_named_as_what_it_is() -> None:
    def echo(request: ModelRequest, info) -> str:
        return f"call {info.call_index}: {request.messages[-1].text}"

    provider = FunctionProvider(echo)
    assert (provider.name, provider.model, provider.price_model) == ("function", "function:echo", "builtin")
    first = provider.complete(ModelRequest("sys", (Message.user("hello there"),)))
    second = provider.complete(ModelRequest("sys", (Message.user("again"),)))
    assert (first.text, second.text) == ("call 0: hello there", "call 1: again")
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0 and first.model == "function:echo"
    reported = FunctionProvider(lambda r, i: ModelResponse.of("x", usage=Usage(7, 3))).complete(
        ModelRequest("", (Message.user("y"),))
    )
    assert (reported.usage.input_tokens, reported.usage.output_tokens) == (7, 3)


def test_package_exports_resolve() -> None:
    import datafarm.agents as agents

    assert all(getattr(agents, name) is not None for name in agents.__all__)
    with pytest.raises(AttributeError):
        agents.no_such_name  # noqa: B018
