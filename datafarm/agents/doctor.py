"""`datafarm doctor`: for each role of a request, the provider and model it will use, whether the
provider's key is in the environment (yes or no: never the key), whether K prices the model, the
base URL when it is not the provider's default, and with `ping` one minimal call per distinct
provider and model."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from datafarm import capability
from datafarm.agents.access import ROLES
from datafarm.agents.errors import ProviderError
from datafarm.agents.messages import Message, ModelRequest
from datafarm.agents.providers.base import ProviderSettings, create_provider, provider_spec
from datafarm.agents.retry import RetryPolicy, call_with_retries
from datafarm.agents.secrets import key_present, redact
from datafarm.artifacts.request import Request
from datafarm.capability.bundle import CapabilityBundle
from datafarm.errors import DatafarmError

PING_PROMPT = "Reply with the single word: ok"


@dataclass(frozen=True)
class PingResult:
    """The outcome of one minimal call."""

    ok: bool
    """True when the provider answered."""
    latency_s: float
    """Seconds the call took."""
    detail: str
    """The answer's first words and the model that gave them, or why it failed (keys redacted)."""


@dataclass
class RoleCheck:
    """What doctor found for one role."""

    role: str
    """The role."""
    provider: str
    """Configured provider."""
    model: str
    """Configured model."""
    description: str = ""
    """What the provider is."""
    key_env: str | None = None
    """Environment variable of the key; None when the provider needs none."""
    key_present: bool | None = None
    """Whether that variable is set (None when no key is needed)."""
    base_url: str | None = None
    """Base URL when overridden (credentials and query removed)."""
    priced: bool = False
    """Whether K's price table prices the model."""
    problems: list[str] = field(default_factory=list)
    """What stands in the way of using the role."""
    ping: PingResult | None = None
    """Result of `--ping`, when asked."""

    @property
    def ready(self) -> bool:
        """True when nothing stands in the way (and the ping, if made, answered)."""
        return not self.problems and (self.ping is None or self.ping.ok)

    def to_json(self) -> dict[str, Any]:
        """As printed by `--json`."""
        return {
            "role": self.role,
            "provider": self.provider,
            "model": self.model,
            "key_env": self.key_env,
            "key_present": self.key_present,
            "base_url": self.base_url,
            "priced": self.priced,
            "problems": self.problems,
            "ping": None
            if self.ping is None
            else {"ok": self.ping.ok, "latency_s": round(self.ping.latency_s, 3), "detail": self.ping.detail},
            "ready": self.ready,
        }


@dataclass
class DoctorReport:
    """Doctor's findings for every role."""

    roles: list[RoleCheck]
    """One per role, in request order."""
    k_version: str
    """K whose price table was consulted."""

    @property
    def ok(self) -> bool:
        """True when every role is ready."""
        return all(r.ready for r in self.roles)

    def to_json(self) -> dict[str, Any]:
        """As printed by `--json`."""
        return {"ok": self.ok, "k_version": self.k_version, "roles": [r.to_json() for r in self.roles]}


def _public_url(url: str | None) -> str | None:
    """`url` without user info, query or fragment (they may carry credentials)."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _ping(check: RoleCheck, settings: ProviderSettings) -> PingResult:
    t0 = time.monotonic()
    failure: str | None = None
    try:
        provider = create_provider(check.provider, check.model, settings, role=check.role)
        request = ModelRequest(system="", messages=(Message.user(PING_PROMPT),), max_output_tokens=16)
        response, _ = call_with_retries(
            lambda: provider.complete(request), settings.retry, what=f"doctor {check.provider}/{check.model}"
        )
    except (ProviderError, DatafarmError) as error:
        failure = redact(str(error))
    latency = time.monotonic() - t0
    if failure is not None:
        return PingResult(False, latency, failure)
    words = " ".join(response.text.split()[:8]) or f"(no text; stop reason {response.stop_reason or 'unknown'})"
    return PingResult(True, latency, redact(f"{response.model or check.model} answered: {words}"))


def doctor(
    request: Request,
    *,
    ping: bool = False,
    settings: ProviderSettings | None = None,
    bundle: CapabilityBundle | None = None,
) -> DoctorReport:
    """Check every role of `request` (see module docstring). Never raises for a missing key or a
    failed ping: those are findings in the report."""
    bundle = bundle or capability.load()
    prices = bundle.price_table()
    settings = settings or ProviderSettings(timeout_s=30.0, retry=RetryPolicy(max_attempts=2, initial_wait_s=1.0, jitter_s=0.5))
    checks: list[RoleCheck] = []
    pings: dict[tuple[str, str], PingResult] = {}
    for role in ROLES:
        config = getattr(request.roles, role)
        check = RoleCheck(role=role, provider=config.provider, model=config.model)
        spec = provider_spec(config.provider)
        check.description = spec.description
        check.key_env = spec.key_env
        if spec.key_env:
            check.key_present = key_present(spec.key_env)
            if not check.key_present:
                check.problems.append(f"{spec.key_env} is not set")
        if config.provider == "builtin":
            try:
                create_provider("builtin", config.model, settings, role=role)
            except DatafarmError as error:
                check.problems.append(str(error))
        check.base_url = _public_url(spec.base_url(settings))
        price_model = "builtin" if config.provider == "builtin" else config.model
        check.priced = price_model in prices.models
        if not check.priced:
            check.problems.append(f"{config.model} has no price in K {bundle.version}'s table (cost cannot be accounted)")
        if ping and config.provider != "builtin" and not check.problems:
            key = (config.provider, config.model)
            if key not in pings:
                pings[key] = _ping(check, settings)
            check.ping = pings[key]
        checks.append(check)
    return DoctorReport(roles=checks, k_version=bundle.version)
