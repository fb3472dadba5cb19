"""Fixtures: one real dataset built per test session (two admission rollouts in the sandbox, both
admitted), copied fresh for every test that changes it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.admission.dataset import build_dataset


@pytest.fixture(scope="session")
def pristine(tmp_path_factory) -> Path:
    """The session's clean dataset: never modify it, use `dataset`."""
    return build_dataset(tmp_path_factory.mktemp("admission") / "task")


@pytest.fixture
def dataset(pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the clean dataset (file modes kept: the secret stays 0600)."""
    return Path(shutil.copytree(pristine, tmp_path / "task", symlinks=True))
