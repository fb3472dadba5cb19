"""Trusted harness: owns the simulator, runs the sandboxed expert over a pipe, evaluates the frozen judge.

- `sandbox/`: sandbox providers (bwrap, docker, none) behind one registry.
- `protocol.py`: the length-prefixed JSON message protocol between harness and expert.
- `session.py`: the `SimSession` interface the server drives, and `RobotSession` over a SAPIEN scene.
- `commands.py`: checking and executing each expert command (no command sets object state).
- `server.py`: `run_expert`, one rollout of a controller in a sandbox.
- `judge/`: the declarative judge runtime, freezing and acceptance.
"""
