"""Trusted harness: owns the simulator, runs sandboxed experts (`sandbox/`), evaluates the frozen judge.

Built so far: the sandbox providers. The expert pipe protocol and rollouts come with issue 4.
"""
