"""API keys: read only from environment variables, never written anywhere.

Keys live in the SDK client objects and nowhere else. Everything the agent layer writes or raises
(transcripts, ledger reasons, error messages, log lines) passes through `redact`, which replaces the
current value of every key variable with a marker, so a key echoed back by a provider or a proxy in
an error body cannot reach a file.
"""

from __future__ import annotations

import os
from typing import Any

SECRET_ENV_VARS: set[str] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}
"""Environment variables whose values are secrets (providers add theirs when registered)."""

_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words; real keys are far longer


def register_secret_env(name: str) -> None:
    """Treat the value of environment variable `name` as a secret from now on."""
    SECRET_ENV_VARS.add(name)


def read_key(env_var: str) -> str | None:
    """The key in `env_var`, stripped, or None when unset or blank."""
    value = os.environ.get(env_var, "").strip()
    return value or None


def key_present(env_var: str) -> bool:
    """True when `env_var` holds a non-blank value (the value itself is never returned)."""
    return read_key(env_var) is not None


def _secrets() -> list[tuple[str, str]]:
    found = []
    for name in sorted(SECRET_ENV_VARS):
        value = read_key(name)
        if value and len(value) >= _MIN_SECRET_LEN:
            found.append((name, value))
    # Longest first, so a key that contains another is replaced whole.
    return sorted(found, key=lambda nv: -len(nv[1]))


def redact(text: str) -> str:
    """`text` with the value of every secret environment variable replaced by `[redacted NAME]`."""
    if not text:
        return text
    for name, value in _secrets():
        if value in text:
            text = text.replace(value, f"[redacted {name}]")
    return text


def redact_obj(value: Any) -> Any:
    """`redact` applied to every string inside a JSON-like value (dicts, lists, strings)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)) if isinstance(k, str) else k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_obj(v) for v in value]
    return value
