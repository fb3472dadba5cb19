"""Read a user's `request.yaml` into a `Request`, with paths resolved against the file's folder."""

from __future__ import annotations

from pathlib import Path

from datafarm.artifacts.request import Request
from datafarm.intake.load import load_model


def load_request(path: Path | str, allow_unsafe_sandbox: bool = False) -> Request:
    """Parse and check a request file.

    Relative `clip`, URDF `robot` and `output` paths are resolved against the request file's folder
    and returned absolute; the clip folder and a URDF file must exist. `sandbox: none` is refused
    unless `allow_unsafe_sandbox` (the CLI's --unsafe-no-sandbox). The clip's contents are checked
    separately by `validate_clip`. Raises InputError listing every problem (file, line, field,
    expected value, closest valid key).
    """
    path = Path(path).absolute()
    context = {"base_dir": path.parent, "allow_unsafe_sandbox": allow_unsafe_sandbox}
    return load_model(Request, path, context=context)
