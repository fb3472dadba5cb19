"""The verifier's checks, one module each (DESIGN.md's table), registered by check name."""

from datafarm.artifacts.admission import VerifierCheck
from datafarm.verifiers.checks import (
    appearance,
    background,
    events,
    geometry,
    layout,
    objects,
    temporal,
    views,
)
from datafarm.verifiers.checks.base import REGISTRY, CheckContext, CheckFunction

REGISTRY.update({
    VerifierCheck.objects: objects.run,
    VerifierCheck.geometry: geometry.run,
    VerifierCheck.events: events.run,
    VerifierCheck.views: views.run,
    VerifierCheck.appearance: appearance.run,
    VerifierCheck.temporal: temporal.run,
    VerifierCheck.background: background.run,
    VerifierCheck.layout: layout.run,
})

PARAMETERS: dict[VerifierCheck, tuple[str, ...]] = {
    check: module.PARAMETERS for check, module in (
        (VerifierCheck.objects, objects), (VerifierCheck.geometry, geometry), (VerifierCheck.events, events),
        (VerifierCheck.views, views), (VerifierCheck.appearance, appearance), (VerifierCheck.temporal, temporal),
        (VerifierCheck.background, background), (VerifierCheck.layout, layout))
}
"""Check -> the settings it reads (K's defaults must give exactly these)."""

__all__ = ["PARAMETERS", "REGISTRY", "CheckContext", "CheckFunction"]
