"""The sandbox provider registry: names -> provider factories, and which ones work here."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from datafarm.errors import input_error

from .provider import Availability, SandboxError, SandboxProvider

DEFAULT_PROVIDER = "bwrap"
"""The provider used when a task or the CLI names none."""

_factories: dict[str, Callable[..., SandboxProvider]] = {}


def register(name: str, factory: Callable[..., SandboxProvider], *, replace: bool = False) -> None:
    """Make `factory(**options)` available as provider `name`; refuses to shadow a name unless
    `replace=True`."""
    if name in _factories and not replace:
        raise ValueError(f"sandbox provider {name!r} is already registered")
    _factories[name] = factory


def names() -> list[str]:
    """Registered provider names, in registration order."""
    return list(_factories)


def _factory(name: str) -> Callable[..., SandboxProvider]:
    try:
        return _factories[name]
    except KeyError:
        close = difflib.get_close_matches(name, names(), n=1)
        raise input_error(
            f"unknown sandbox provider {name!r}",
            field="sandbox",
            expected=" | ".join(names()),
            hint=f"did you mean {close[0]!r}?" if close else None,
        ) from None


def get(name: str = DEFAULT_PROVIDER, *, require_available: bool = True, **options: object) -> SandboxProvider:
    """The provider `name`, constructed with `options` (e.g. `unsafe=True` for `none`, `image=` for
    `docker`). Raises InputError for an unknown name and SandboxError, with the provider's reason,
    when it cannot run here (unless `require_available=False`)."""
    provider = _factory(name)(**options)
    if require_available:
        provider.require_available()
    return provider


def available() -> dict[str, Availability]:
    """Every registered provider's availability here, with its reason. `none` is constructed with
    `unsafe=True` only to ask; it always reports `isolated=False`."""
    statuses: dict[str, Availability] = {}
    for name in names():
        options = {"unsafe": True} if name == "none" else {}
        try:
            statuses[name] = _factory(name)(**options).availability()
        except (SandboxError, OSError, ValueError) as error:
            statuses[name] = Availability(name=name, available=False, isolated=True, reason=str(error))
    return statuses
