"""Fixtures shared by the top-level compile and CLI tests."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nest_cups"


def stops_early(request: Path) -> Path:
    """Give the copy a task outside the builtin families (a cloth fold), so compile stops within its
    first stages: these tests are about the task folder and the CLI, not the whole pipeline."""
    text = request.read_text()
    text = re.sub(r"^task: >-\n(  .*\n)+", "task: 'Fold the towel twice. Success: the towel lies folded in quarters.'\n", text,
                  flags=re.MULTILINE)
    request.write_text(text)
    return request


@pytest.fixture
def example(tmp_path) -> Path:
    """A private copy of the nest_cups example (output lands in tmp_path) whose compile stops early."""
    dst = tmp_path / "nest_cups"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("runs"))
    return stops_early(dst / "request.yaml")
