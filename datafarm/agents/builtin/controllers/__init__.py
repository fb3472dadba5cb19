"""Source of the builtin expert controllers: `runtime.py` (gripper geometry, guarded motions) and
`families.py` (one program per task family). `datafarm.agents.builtin.expert.write_controller`
inlines both into one `expert/controller.py`; datafarm itself never imports them at run time."""

from __future__ import annotations

import ast
from pathlib import Path

INLINE_MARKER = "# ==== INLINE BELOW"
"""Line prefix after which a controller source file is copied into the generated controller."""

HERE = Path(__file__).resolve().parent
"""This folder."""


def inline_source(name: str, *, docstrings: bool = False) -> str:
    """The part of `<name>.py` in this folder that goes into a generated controller. Without
    `docstrings`, the code is re-printed without docstrings and comments (the controller travels in
    the author's conversation, so its size is paid in tokens; the documented source is here)."""
    text = (HERE / f"{name}.py").read_text(encoding="utf-8")
    _, marker, body = text.partition(INLINE_MARKER)
    if not marker:
        raise ValueError(f"{name}.py has no {INLINE_MARKER!r} line")
    body = body.split("\n", 1)[1]
    if docstrings:
        return body
    tree = ast.parse(body)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"
