"""Shared fixtures of the agent tests: a task folder for the example request (its real calibration
clip), canary API keys, fast retry settings, and valid artifacts to write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from datafarm.agents.providers.base import ProviderSettings
from datafarm.agents.retry import RetryPolicy
from datafarm.artifacts.request import Request
from datafarm.taskdir import TaskDir

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CLIP = REPO / "examples" / "nest_cups" / "clip"

OPENAI_CANARY = "sk-proj-CANARY0penai0000000000000000000000000000000042"
ANTHROPIC_CANARY = "sk-ant-api03-CANARYanthropic00000000000000000000000000000042"

ENV_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
    "OPENAI_LOG",
    "ANTHROPIC_LOG",
    "ANTHROPIC_CUSTOM_HEADERS",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key or base URL leaks in from the developer's shell; SDK config lookups point at an empty folder."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "no-anthropic-config"))


@pytest.fixture
def canary_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Both providers' keys set to recognizable canaries."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_CANARY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_CANARY)
    return {"openai": OPENAI_CANARY, "anthropic": ANTHROPIC_CANARY}


def fast_settings(timeout_s: float = 5.0, attempts: int = 3) -> ProviderSettings:
    """Settings whose retries wait milliseconds, so the retry tests stay fast."""
    return ProviderSettings(
        timeout_s=timeout_s,
        max_output_tokens=2048,
        retry=RetryPolicy(max_attempts=attempts, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.01),
    )


def make_request(roles: dict[str, Any] | None = None, budget: dict[str, Any] | None = None) -> Request:
    """The example request (nest the red cup in the blue cup) with the given roles and budget."""
    body: dict[str, Any] = {
        "task": "Pick up the red cup and place it inside the blue cup. Success: the red cup is fully nested in the blue cup.",
        "clip": str(EXAMPLE_CLIP),
        "episodes": 2,
        "mode": "sim2real",
    }
    if roles:
        body["roles"] = roles
    if budget:
        body["budget"] = budget
    return Request.model_validate(body)


def make_task_dir(root: Path, request: Request) -> TaskDir:
    """A task folder holding the request's copy (the ledger is created by the first append)."""
    root.mkdir(parents=True, exist_ok=True)
    tdir = TaskDir(root)
    tdir.request.write_text(yaml.safe_dump(request.model_dump(mode="json"), sort_keys=False))
    return tdir


def valid_grounding() -> dict[str, Any]:
    """A valid grounding G of the nest-cups scene (the artifact tests' builder)."""
    from tests.artifacts.test_schemas import nest_grounding

    return nest_grounding().model_dump(mode="json", by_alias=True)


def invalid_grounding() -> dict[str, Any]:
    """A grounding with three mistakes a model might make: a missing table, an unknown key, a wrong tag."""
    g = valid_grounding()
    del g["table"]
    g["objects"][0]["colour_name"] = "blue"
    g["objects"][1]["pose_tag"] = "guessed"
    return g


@pytest.fixture
def task(tmp_path: Path) -> TaskDir:
    """A fresh task folder for the example request (builtin roles)."""
    return make_task_dir(tmp_path / "task", make_request())
