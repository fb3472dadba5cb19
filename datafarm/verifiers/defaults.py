"""K's verifier defaults (`verifier_defaults.yaml`): per check its metric, direction, threshold, the
stage a failure routes to and its settings, plus settings every check shares.

A task's pinned K supplies the file when it ships one; with no bundle given, the newest release that
ships it does (k2 is the first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from datafarm.artifacts.admission import VerifierCheck
from datafarm.artifacts.base import Artifact
from datafarm.artifacts.common import FiniteFloat
from datafarm.artifacts.stages import Stage
from datafarm.capability.bundle import CapabilityBundle, latest_with
from datafarm.errors import InputError, Problem
from datafarm.hashing import sha256_bytes

DEFAULTS_FILE = "verifier_defaults.yaml"
"""Where a K version keeps the verifier defaults."""

Direction = Literal["max", "min"]
"""How a metric is compared with its threshold: `max` passes when metric <= threshold, `min` when metric >= threshold."""


class CommonSettings(Artifact):
    """Settings every check shares."""

    colour_tolerance: FiniteFloat = Field(gt=0)
    """Largest weighted-Lab distance from one of an object's colours at which a pixel can look like the object."""
    min_object_area_px: FiniteFloat = Field(gt=0)
    """Fewest projected pixels of an object in a view for that view and frame to be judged (at `reference_width`)."""
    mask_margin_px: FiniteFloat = Field(ge=0)
    """Pixels the sim's masks are grown by where "outside every object" is meant (at `reference_width`)."""
    plate_frames: FiniteFloat = Field(ge=1)
    """Frames whose median (outside the sim's foreground) makes the episode's own background plate."""


class CheckDefaults(Artifact):
    """One check's defaults."""

    description: str = Field(min_length=1)
    """What the check verifies, in one sentence."""
    metric: str = Field(min_length=1)
    """What its metric measures."""
    direction: Direction
    """`max`: pass when metric <= threshold; `min`: pass when metric >= threshold."""
    threshold: FiniteFloat
    """The bound the metric is compared with."""
    route_to: Stage
    """The stage a failure routes back to by default (a check may name an earlier one, e.g. grounding
    for an object missing in every view)."""
    parameters: dict[str, FiniteFloat] = Field(default_factory=dict)
    """The check's own settings (names ending `_px` scale with the width, `_area_px` with the area)."""


class VerifierDefaults(Artifact):
    """The whole `verifier_defaults.yaml`."""

    version: int = Field(ge=1)
    """Format version of this file."""
    reference_width: int = Field(gt=0)
    """Video width, pixels, the pixel settings are given for."""
    common: CommonSettings
    """Settings every check shares."""
    checks: dict[VerifierCheck, CheckDefaults] = Field(min_length=1)
    """Defaults per check."""


class LoadedDefaults:
    """Defaults as loaded: the model, the K version that supplied them and the file's sha256."""

    def __init__(self, defaults: VerifierDefaults, k_version: str, sha256: str) -> None:
        self.defaults = defaults
        """The parsed file."""
        self.k_version = k_version
        """K version whose file it is."""
        self.sha256 = sha256
        """sha256 of the file's bytes."""


def parse_defaults(text: str, source: str = DEFAULTS_FILE) -> VerifierDefaults:
    """Parse and validate defaults text; InputError naming the source and the field."""
    try:
        return VerifierDefaults.model_validate(yaml.safe_load(text))
    except yaml.YAMLError as err:
        raise InputError([Problem(f"verifier defaults are not valid YAML: {err}", file=Path(source))]) from None
    except ValidationError as err:
        raise InputError([Problem(e["msg"], file=Path(source), field=".".join(str(p) for p in e["loc"]))
                          for e in err.errors()]) from None


def load_defaults(source: CapabilityBundle | Path | str | None = None) -> LoadedDefaults:
    """The verifier defaults of a K bundle (its own file when it has one, else those of the newest
    release that ships one), of a file path, or (default) of the newest release that ships them."""
    if source is None or (isinstance(source, CapabilityBundle) and not (source.root / DEFAULTS_FILE).is_file()):
        source = latest_with(DEFAULTS_FILE)
    if isinstance(source, CapabilityBundle):
        text, version = source.read_text(DEFAULTS_FILE), source.version
    else:
        path = Path(source)
        if not path.is_file():
            raise InputError([Problem("verifier defaults not found", file=path)])
        text, version = path.read_text(encoding="utf-8"), path.parent.name
    return LoadedDefaults(parse_defaults(text, str(source or DEFAULTS_FILE)), version, sha256_bytes(text.encode("utf-8")))
