"""A canary API key, used for a whole role conversation against the real SDKs (with a retried 429, a
401 and a timeout whose error bodies echo the key back), appears in no file under the task folder,
no log line and no exception message."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

import pytest

from datafarm.agents import ProviderError, TaskAgents, author_task, doctor
from datafarm.agents.providers.base import ProviderSettings
from datafarm.agents.retry import RetryPolicy
from tests.agents.conftest import make_request, make_task_dir, valid_grounding
from tests.agents.loopback import WIRES, LoopbackAPI, Reply, Wire


def _exception_text(error: BaseException) -> str:
    """Everything a user could see of an exception: message, repr, traceback, chained exceptions, retries."""
    text = str(error) + repr(error) + "".join(traceback.format_exception(error))
    for retry in getattr(error, "retries", []):
        text += retry.error
    return text


def _files_text(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.provider)
def test_canary_key_never_leaves_the_sdk(wire: Wire, tmp_path: Path, canary_keys, caplog: pytest.LogCaptureFixture) -> None:
    key = canary_keys[wire.provider]
    caplog.set_level(logging.DEBUG)
    request = make_request(
        roles={r: {"provider": wire.provider, "model": wire.model} for r in ("author", "judge_writer", "reviewer")}
    )
    tdir = make_task_dir(tmp_path / "task", request)
    settings = lambda api, timeout=5.0: ProviderSettings(  # noqa: E731
        timeout, 2048, wire.base_url(api), RetryPolicy(max_attempts=2, initial_wait_s=0.01, max_wait_s=0.02, jitter_s=0.01)
    )
    errors: list[BaseException] = []

    # 1. a whole stage: a 429 echoing the key (retried), a frame, an invalid write, a valid write
    script = [
        wire.error(429, f"Rate limit reached for key {key}"),
        wire.reply(None, [("fetch_frame", {"view": "front", "frame": 0})]),
        wire.reply(None, [("write_artifact", {"artifact": "G", "content": {"api_key": key}})]),
        wire.reply(None, [("write_artifact", {"artifact": "G", "content": valid_grounding()})]),
    ]
    with LoopbackAPI(script) as api:
        result = TaskAgents.open(request, tdir, settings=settings(api)).author().run(author_task("grounding"))
    assert result.written["grounding"].ok
    assert any(r.headers["authorization"] == f"Bearer {key}" for r in api.requests)  # the key did reach the API

    # 2. a 401 whose body echoes the key (a misbehaving proxy), not retried
    with LoopbackAPI([wire.error(401, f"Incorrect API key provided: {key}")]) as api:
        with pytest.raises(ProviderError) as caught:
            TaskAgents.open(request, tdir, settings=settings(api)).author().run(author_task("contract"))
    assert "HTTP 401" in str(caught.value) and f"[redacted {wire.provider.upper()}_API_KEY]" in str(caught.value)
    errors.append(caught.value)

    # 3. timeouts until the attempts run out
    slow = Reply(wire.reply("late").body, delay_s=0.6)
    with LoopbackAPI([slow, slow]) as api:
        with pytest.raises(ProviderError) as caught:
            TaskAgents.open(request, tdir, settings=settings(api, timeout=0.2)).author().run(author_task("contract"))
    errors.append(caught.value)

    # 4. doctor's ping with the same 401
    with LoopbackAPI([wire.error(401, f"invalid x-api-key {key}")]) as api:
        report = doctor(request, ping=True, settings=settings(api))
    assert not report.ok and "HTTP 401" in report.roles[0].ping.detail
    doctor_text = str(report.to_json())

    assert key.encode() not in _files_text(tdir.root)
    assert (tdir.transcripts_dir / "author").is_dir() and len(list(tdir.transcripts_dir.rglob("*.json"))) == 5
    for error in errors:
        assert key not in _exception_text(error)
    assert key not in doctor_text
    logged = [r for r in caplog.records]
    assert logged, "the SDKs and datafarm log at DEBUG; nothing captured means the test is blind"
    for record in logged:
        line = record.getMessage() + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
        assert key not in line, f"key in a log line of {record.name}"
