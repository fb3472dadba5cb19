"""The openai and anthropic providers, through their official SDKs, against a loopback server that
speaks each API's wire format: tool calls and results, images, structured output, and the retry
layer's behaviour on 429, 5xx, timeouts, refused connections and (not retried) 4xx."""

from __future__ import annotations

import base64
import socket
import time

import pytest

from datafarm.agents.errors import ProviderConnectionError, ProviderHTTPError, ProviderTimeout
from datafarm.agents.messages import ImagePart, Message, ModelRequest, TextPart, ToolResult, ToolSpec
from datafarm.agents.providers import create_provider
from datafarm.agents.providers.base import ProviderSettings
from datafarm.agents.retry import RetryPolicy, call_with_retries
from tests.agents.conftest import fast_settings
from tests.agents.loopback import WIRES, LoopbackAPI, Reply, Wire, openai_completion

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
TOOL = ToolSpec(
    "fetch_frame", "Fetch a frame.", {"type": "object", "properties": {"view": {"type": "string"}}, "required": ["view"]}
)
pytestmark = pytest.mark.usefixtures("canary_keys")


def provider(wire: Wire, api: LoopbackAPI, settings: ProviderSettings | None = None):
    s = settings or fast_settings()
    return create_provider(
        wire.provider, wire.model, ProviderSettings(s.timeout_s, s.max_output_tokens, wire.base_url(api), s.retry)
    )


def ask(text: str = "look at the front view") -> ModelRequest:
    return ModelRequest(system="You are a test.", messages=(Message.user(text),), tools=(TOOL,), max_output_tokens=256)


def call(p, request: ModelRequest, settings: ProviderSettings | None = None):
    return call_with_retries(lambda: p.complete(request), (settings or fast_settings()).retry)


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_tool_call_round_trip_with_image_result(wire: Wire) -> None:
    with LoopbackAPI(
        [wire.reply("Looking.", [("fetch_frame", {"view": "front"})], tokens_in=321, tokens_out=45), wire.reply("Done.")]
    ) as api:
        p = provider(wire, api)
        first, retries = call(p, ask())
        assert retries == []
        assert first.text == "Looking."
        [tool_call] = first.tool_calls
        assert (tool_call.name, tool_call.arguments) == ("fetch_frame", {"view": "front"})
        assert (first.usage.input_tokens, first.usage.output_tokens) == (321, 45)

        result = ToolResult(tool_call.id, "fetch_frame", (TextPart("front frame 0"), ImagePart(PNG, label="front frame 0")))
        follow = ModelRequest(
            system="You are a test.",
            messages=(Message.user("look at the front view"), first.as_message(), Message("user", (result,))),
            tools=(TOOL,),
        )
        second, _ = call(p, follow)
        assert second.text == "Done." and not second.tool_calls

    req1, req2 = api.requests
    assert req1.path == wire.path and req1.headers["authorization"].startswith("Bearer ")
    assert wire.tool_names(req1.body) == ["fetch_frame"]
    assert req1.body["model"] == wire.model
    # The tool's result goes back under the call's id, with the image in the provider's image form.
    results = wire.tool_results(req2.body)
    assert list(results) == [tool_call.id] and "front frame 0" in results[tool_call.id]
    assert wire.images(req2.body) == [base64.b64encode(PNG).decode()]
    # The assistant's tool call is replayed as the provider expects it.
    assistant = [m for m in req2.body["messages"] if m["role"] == "assistant"][0]
    if wire.provider == "openai":
        assert assistant["tool_calls"][0]["id"] == tool_call.id
        assert req2.body["messages"][0] == {"role": "system", "content": "You are a test."}
    else:
        assert any(b["type"] == "tool_use" and b["id"] == tool_call.id for b in assistant["content"])
        assert req2.body["system"] == "You are a test."


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_user_images_and_structured_output(wire: Wire) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    with LoopbackAPI([wire.reply('{"ok": true}')]) as api:
        request = ModelRequest(
            system="s",
            messages=(Message.user("what is this?", ImagePart(PNG, label="x")),),
            output_schema=schema,
            output_name="check",
        )
        response, _ = call(provider(wire, api), request)
    assert response.text == '{"ok": true}'
    body = api.requests[0].body
    assert wire.images(body) == [base64.b64encode(PNG).decode()]
    if wire.provider == "openai":
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "check", "schema": schema, "strict": False},
        }
        assert body["max_completion_tokens"] == 4096
    else:
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
        assert body["max_tokens"] == 4096


@pytest.mark.parametrize("status", [429, 500])
@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_transient_errors_are_retried_then_succeed(wire: Wire, status: int) -> None:
    with LoopbackAPI([wire.error(status, "try again later"), wire.reply("fine")]) as api:
        response, retries = call(provider(wire, api), ask())
    assert response.text == "fine"
    assert len(api.requests) == 2
    [retry] = retries
    assert retry.attempt == 1 and f"HTTP {status}" in retry.error and "try again later" in retry.error


def test_anthropic_overloaded_529_is_retried() -> None:
    wire = WIRES[1]
    with LoopbackAPI([wire.error(529, "Overloaded"), wire.reply("fine")]) as api:
        response, retries = call(provider(wire, api), ask())
    assert response.text == "fine" and "HTTP 529 overloaded_error: Overloaded" in retries[0].error


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_retry_after_header_is_honoured(wire: Wire) -> None:
    settings = ProviderSettings(
        timeout_s=5, retry=RetryPolicy(max_attempts=3, initial_wait_s=0.01, max_wait_s=1.0, jitter_s=0.01)
    )
    with LoopbackAPI([wire.error(429, "slow down", retry_after="0.3"), wire.reply("fine")]) as api:
        started = time.monotonic()
        _, retries = call(provider(wire, api, settings), ask(), settings)
        elapsed = time.monotonic() - started
    assert retries[0].wait_s == pytest.approx(0.3) and 0.3 <= elapsed < 2


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_bad_request_is_not_retried_and_shows_the_providers_error(wire: Wire) -> None:
    message = "Invalid schema for function 'fetch_frame': 'view' is not valid under any of the given schemas."
    with LoopbackAPI([wire.error(400, message), wire.reply("never sent")]) as api:
        with pytest.raises(ProviderHTTPError) as caught:
            call(provider(wire, api), ask())
    assert len(api.requests) == 1
    error = caught.value
    assert error.status == 400 and not error.retryable
    assert error.error_type == "invalid_request_error"
    assert str(error) == f"{wire.provider} {wire.model}: HTTP 400 invalid_request_error: {message}"
    assert error.__cause__ is None and error.__context__ is None  # no SDK exception rides along


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_slow_answer_times_out_and_is_retried(wire: Wire) -> None:
    settings = fast_settings(timeout_s=0.3)
    with LoopbackAPI([Reply(wire.reply("late").body, delay_s=1.2), wire.reply("on time")]) as api:
        response, retries = call(provider(wire, api, settings), ask(), settings)
    assert response.text == "on time"
    assert "no answer within the 0.3 s timeout" in retries[0].error


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_timeouts_give_up_after_the_last_attempt(wire: Wire) -> None:
    settings = fast_settings(timeout_s=0.2, attempts=2)
    slow = Reply(wire.reply("late").body, delay_s=0.8)
    with LoopbackAPI([slow, slow]) as api:
        started = time.monotonic()
        with pytest.raises(ProviderTimeout) as caught:
            call(provider(wire, api, settings), ask(), settings)
    assert time.monotonic() - started < 2.0
    assert len(api.requests) == 2 and len(caught.value.retries) == 1


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_refused_connection_is_retried_then_reported(wire: Wire) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("/v1" if wire.provider == "openai" else "")
    settings = fast_settings(attempts=2)
    p = create_provider(wire.provider, wire.model, ProviderSettings(1.0, 256, url, settings.retry))
    with pytest.raises(ProviderConnectionError) as caught:
        call(p, ask(), settings)
    assert "cannot reach the API" in str(caught.value) and len(caught.value.retries) == 1


def test_openai_tool_arguments_that_are_not_json_are_kept_raw() -> None:
    """OpenAI sends arguments as a JSON string, which a model can get wrong (Anthropic sends an object)."""
    wire = WIRES[0]
    with LoopbackAPI([Reply(openai_completion(None, [("fetch_frame", "{not json")]))]) as api:
        response, _ = call(provider(wire, api), ask())
    [bad] = response.tool_calls
    assert bad.arguments is None and bad.raw_arguments == "{not json"


def test_base_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = WIRES[0]
    with LoopbackAPI([wire.reply("via env")]) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", wire.base_url(api))
        p = create_provider("openai", wire.model, fast_settings())
        response, _ = call(p, ask())
    assert response.text == "via env"


def test_tool_call_ids_survive_a_follow_up_with_assistant_text_only() -> None:
    """A conversation whose assistant turn is plain text serializes without tool fields."""
    wire = WIRES[0]
    with LoopbackAPI([wire.reply("ok")]) as api:
        history = (Message.user("hi"), Message("assistant", (TextPart("hello"),)), Message.user("again"))
        call(provider(wire, api), ModelRequest(system="", messages=history))
    messages = api.requests[0].body["messages"]
    assert messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
