"""Fixtures: one real compile of the example per test session (tests.admission.dataset), in two
snapshots, copied fresh for every test that changes it. Only tests marked slow use them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.admission.dataset import Compiled, compile_example


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """The session's compile (4-8 min on two busy cores; set up inside the first test that needs it,
    hence SLOW_COMPILE's timeout): never modify its folders, use the copies below."""
    return compile_example(tmp_path_factory.mktemp("compiled"))


@pytest.fixture
def pristine(compiled: Compiled) -> Path:
    """The certified task folder itself, for tests that only read it."""
    return compiled.admitted


@pytest.fixture
def dataset(compiled: Compiled, tmp_path: Path) -> Path:
    """A private copy of the certified task folder (file modes kept: the secret stays 0600)."""
    return Path(shutil.copytree(compiled.admitted, tmp_path / compiled.admitted.name, symlinks=True))


@pytest.fixture
def reviewed(compiled: Compiled, tmp_path: Path) -> Path:
    """A private copy of the task folder before stage 10: verified and reviewed, nothing admitted."""
    return Path(shutil.copytree(compiled.reviewed, tmp_path / compiled.reviewed.name, symlinks=True))
