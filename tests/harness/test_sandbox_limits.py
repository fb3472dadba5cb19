"""SandboxLimits: documented, validated, and roomy enough by default for a numpy controller."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from datafarm.harness.sandbox import SandboxLimits, SandboxResult
from tests.harness.sandbox_helpers import provider_or_skip, write_program


@pytest.mark.parametrize("model", [SandboxLimits, SandboxResult])
def test_every_field_is_documented(model):
    for name, field in model.model_fields.items():
        assert field.description, f"{model.__name__}.{name} has no description"


@pytest.mark.parametrize(
    "bad", [{"processes": 2}, {"cpu_seconds": 0}, {"cpu_seconds": 1.5}, {"memory_bytes": 1 << 20}, {"wall_seconds": -1}, {"cpu_limit": 3}]
)
def test_nonsense_limits_are_refused(bad):
    with pytest.raises(ValidationError):
        SandboxLimits(**bad)


@pytest.mark.parametrize("name", ["bwrap", "none"])
def test_default_limits_run_a_numpy_controller(name, tmp_path):
    provider = provider_or_skip(name)
    script = write_program(tmp_path / "program", """
    import numpy as np
    a = np.random.default_rng(0).normal(size=(200, 200))
    print(round(float(np.linalg.norm(a @ a.T)), 3))
    """)
    limits = SandboxLimits(wall_seconds=60)  # the defaults, with a test-sized deadline
    stdout, result = provider.run(tmp_path / "program", ["python", script], out_dir=tmp_path / "out", limits=limits)
    assert result.ok, result
    assert float(stdout) > 0
