"""Prompts for video models, rendered only from K's render templates (`render_templates/*.j2`).

The pipeline fills the variables it owns (`PIPELINE_VARIABLES`: views, layout, robot, task, scene,
objects, ood variation) from G, R, the request and the canvas layout; R may add values for the
template's other variables (`renderer.template_variables`, plain text). R can never supply a template
(its schema rejects any template or prompt key), and it may not set a pipeline variable either:
that would let a task rewrite what K's template says about the episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jinja2.meta
import jinja2.sandbox

from datafarm.artifacts.grounding import Grounding
from datafarm.artifacts.render_contract import RenderContract
from datafarm.capability.bundle import CapabilityBundle, latest_with
from datafarm.errors import InputError, Problem
from datafarm.hashing import sha256_bytes
from datafarm.renderers.layout import CanvasLayout

VIDEO_PROMPT = "render_templates/video_prompt.j2"
"""K's template for the video-model prompt."""
PIPELINE_VARIABLES = ("view_count", "layout", "robot", "task", "scene", "objects", "variation")
"""Template variables the pipeline fills; R may not set them."""

_ROBOTS = {"piper": "a single AgileX PiPER arm", "piper-dual": "two AgileX PiPER arms side by side",
           "urdf": "the lab's robot arm", "ue-character": "a first-person character"}


@dataclass(frozen=True)
class RenderedPrompt:
    """A prompt and where it came from."""

    text: str
    """The prompt."""
    template: str
    """Template path inside K."""
    k_version: str
    """K version (folder name) of the template."""
    template_sha256: str
    """sha256 of the template's text."""
    unused_variables: list[str] = field(default_factory=list)
    """R's template variables that the template does not read (kept for the record; harmless)."""


class TemplateSource:
    """K's render templates: a released bundle, or a K folder (a draft) read in the same strict,
    sandboxed Jinja2 environment the bundle uses."""

    def __init__(self, source: CapabilityBundle | Path | str | None = None) -> None:
        if source is None:
            source = latest_with(VIDEO_PROMPT)
        if isinstance(source, CapabilityBundle):
            self.root, self.version = source.root, source.version
        else:
            self.root = Path(source)
            self.version = self.root.name
        self._env = jinja2.sandbox.SandboxedEnvironment(
            loader=jinja2.FileSystemLoader(str(self.root)), undefined=jinja2.StrictUndefined,
            autoescape=False, keep_trailing_newline=True)

    def source_text(self, template: str) -> str:
        """The template's text (InputError when K has no such template)."""
        path = self.root / template
        if not path.is_file():
            raise InputError([Problem(f"capability {self.version} has no render template {template!r}", file=path)])
        return path.read_text(encoding="utf-8")

    def variables(self, template: str) -> set[str]:
        """Names the template reads."""
        return set(jinja2.meta.find_undeclared_variables(self._env.parse(self.source_text(template))))

    def render(self, template: str, variables: dict[str, object]) -> str:
        """Render with `variables`; a variable the template needs and nobody gave is an InputError."""
        text = self.source_text(template)
        try:
            return self._env.from_string(text).render(**variables)
        except jinja2.UndefinedError as err:
            raise InputError([Problem(f"render template variable missing: {err.message}", file=self.root / template,
                                      hint="add it under renderer.template_variables in render_contract.yaml")]) from err


def robot_words(grounding: Grounding) -> str:
    """The robot in words, for prompts."""
    return _ROBOTS.get(grounding.robot.kind, grounding.robot.kind)


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in rgb)


def object_words(contract: RenderContract, grounding: Grounding) -> str:
    """`red cup: matte plastic, colour #c82828; ...` from R's target appearance (G's nouns name them)."""
    parts = []
    for oid, look in contract.appearance.objects.items():
        try:
            nouns = grounding.object(oid).nouns
        except KeyError:
            nouns = []
        name = nouns[0] if nouns else oid.replace("_", " ")
        material = f"{look.material}, " if look.material else ""
        parts.append(f"{name}: {material}colour {_hex(look.colour)}")
    return "; ".join(parts)


def variation_words(applied: dict[str, object]) -> str:
    """`tablecloth red_check, light colour warm` (empty when nothing varies)."""
    return ", ".join(f"{axis.replace('_', ' ')} {value}" for axis, value in sorted(applied.items()))


def video_prompt(contract: RenderContract, grounding: Grounding, layout: CanvasLayout, task: str,
                 applied_variations: dict[str, object], templates: TemplateSource | None = None,
                 template: str = VIDEO_PROMPT) -> RenderedPrompt:
    """The video-model prompt of one episode from K's template (see the module docstring).

    InputError when R sets a pipeline variable or the template needs a variable nobody gave."""
    templates = templates or TemplateSource()
    given = contract.renderer.template_variables
    owned = sorted(set(given) & set(PIPELINE_VARIABLES))
    if owned:
        raise InputError([Problem(
            f"renderer.template_variables may not set {', '.join(owned)}: the pipeline fills these from G, R and the episode",
            field="renderer.template_variables", expected=f"only other variables of K's {template}")])
    variables: dict[str, object] = {
        "view_count": len(layout.tiles), "layout": layout.describe(), "robot": robot_words(grounding),
        "task": task.strip().rstrip("."), "scene": contract.appearance.scene.strip().rstrip("."),
        "objects": object_words(contract, grounding),
        "variation": variation_words(applied_variations), **given}
    text = templates.render(template, variables)
    read = templates.variables(template)
    return RenderedPrompt(text=" ".join(text.split()), template=template, k_version=templates.version,
                          template_sha256=sha256_bytes(templates.source_text(template).encode("utf-8")),
                          unused_variables=sorted(set(given) - read))
