"""Trusted harness: owns the simulator, runs sandboxed experts, evaluates the frozen judge. Not implemented yet (issue 4)."""
