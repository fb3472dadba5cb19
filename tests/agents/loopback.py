"""A real HTTP server on 127.0.0.1 (port 0) that replays scripted replies in each provider's wire
format, so the official SDKs run their whole request path (httpx2, headers, JSON, errors) in tests.

`LoopbackAPI([...replies])` serves replies in order, one per request, and records every request
(path, headers with lower-case names, parsed JSON body). A reply may be slow (`delay_s`) to make the
client time out. The builders below write the documented JSON shapes of OpenAI Chat Completions and
Anthropic Messages responses and errors.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP answer."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class LoopbackAPI:
    """Threaded loopback server replaying `replies` (a list, or a function of the request)."""

    def __init__(self, replies: list[Reply] | Callable[[Recorded], Reply]) -> None:
        self._script = replies if callable(replies) else list(replies)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                recorded = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = api._next(recorded)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if isinstance(reply.body, (bytes, str)) else json.dumps(reply.body)
                data = payload.encode() if isinstance(payload, str) else payload
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if callable(self._script):
                return self._script(recorded)
            if not self._script:
                return Reply({"error": {"message": "loopback script exhausted", "type": "test_error"}}, status=599)
            return self._script.pop(0)

    @property
    def url(self) -> str:
        """Base URL, e.g. `http://127.0.0.1:40123`."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def remaining(self) -> int:
        """Scripted replies not served yet."""
        return 0 if callable(self._script) else len(self._script)

    def __enter__(self) -> LoopbackAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- OpenAI Chat Completions wire format ---------------------------------------------------------------

_ids = itertools.count(1)


def openai_completion(
    text: str | None = None,
    tool_calls: list[tuple[str, dict[str, Any] | str]] | None = None,
    *,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    model: str = "gpt-4o-mini-2024-07-18",
) -> dict[str, Any]:
    """A `chat.completion` object; `tool_calls` as (name, arguments) (a str is sent as is)."""
    calls = [
        {
            "id": f"call_{next(_ids):04d}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for name, args in (tool_calls or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "service_tier": "default",
        "system_fingerprint": "fp_loopback",
    }


def openai_error(status: int, message: str, kind: str, code: str | None = None, **headers: str) -> Reply:
    """An OpenAI error reply: `{"error": {"message", "type", "param", "code"}}`."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(body, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


# --- Anthropic Messages wire format ----------------------------------------------------------------------


def anthropic_message(
    text: str | None = None,
    tool_uses: list[tuple[str, dict[str, Any]]] | None = None,
    *,
    input_tokens: int = 100,
    output_tokens: int = 20,
    model: str = "claude-sonnet-4-5-20250929",
) -> dict[str, Any]:
    """A `message` object with text and/or tool_use blocks."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, args in tool_uses or []:
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": args})
    return {
        "id": f"msg_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tool_uses else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_error(status: int, message: str, kind: str, **headers: str) -> Reply:
    """An Anthropic error reply: `{"type": "error", "error": {"type", "message"}, "request_id"}`."""
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": f"req_{next(_ids):06d}"}
    return Reply(body, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


# --- one interface over both wire formats, for tests parametrized by provider -------------------------


@dataclass(frozen=True)
class Wire:
    """How one provider's API looks on the wire: replies to script, and what to read from requests."""

    provider: str
    model: str
    path: str

    def base_url(self, api: LoopbackAPI) -> str:
        """The base URL the SDK gets (OpenAI's includes /v1, Anthropic's does not)."""
        return api.url + "/v1" if self.provider == "openai" else api.url

    def reply(
        self,
        text: str | None = None,
        calls: list[tuple[str, dict[str, Any]]] | None = None,
        *,
        tokens_in: int = 1000,
        tokens_out: int = 200,
    ) -> Reply:
        """A 200 answer with text and/or tool calls."""
        if self.provider == "openai":
            return Reply(openai_completion(text, list(calls or []), prompt_tokens=tokens_in, completion_tokens=tokens_out))
        return Reply(anthropic_message(text, list(calls or []), input_tokens=tokens_in, output_tokens=tokens_out))

    def error(self, status: int, message: str, **headers: str) -> Reply:
        """An error answer with the provider's type for `status`."""
        if self.provider == "openai":
            kind = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests", 500: "server_error"}.get(
                status, "server_error"
            )
            return openai_error(status, message, kind, **headers)
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            429: "rate_limit_error",
            500: "api_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return anthropic_error(status, message, kind, **headers)

    def tool_results(self, body: dict[str, Any]) -> dict[str, str]:
        """Tool call id -> the text of its result, as sent in a request body."""
        out: dict[str, str] = {}
        for m in body["messages"]:
            if self.provider == "openai" and m["role"] == "tool":
                out[m["tool_call_id"]] = m["content"]
            if self.provider == "anthropic" and m["role"] == "user" and isinstance(m["content"], list):
                for block in m["content"]:
                    if block["type"] == "tool_result":
                        out[block["tool_use_id"]] = "\n".join(c.get("text", "") for c in block["content"] if c["type"] == "text")
        return out

    def images(self, body: dict[str, Any]) -> list[str]:
        """Base64 data of every image in a request body (data URLs stripped)."""
        found: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                if value.get("type") == "image_url":
                    found.append(value["image_url"]["url"].split(",", 1)[1])
                elif value.get("type") == "image":
                    found.append(value["source"]["data"])
                else:
                    for v in value.values():
                        walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        walk(body["messages"])
        return found

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        """Names of the tools offered in a request body."""
        if self.provider == "openai":
            return [t["function"]["name"] for t in body.get("tools", [])]
        return [t["name"] for t in body.get("tools", [])]


WIRES = (
    Wire("openai", "gpt-4o-mini", "/v1/chat/completions"),
    Wire("anthropic", "claude-haiku-4-5", "/v1/messages"),
)
"""Both providers, with a cheap model each that K's price table prices."""
