"""Trusted harness: owns the simulator, runs the sandboxed expert over a pipe, evaluates the frozen judge.

- `sandbox/`: sandbox providers (bwrap, docker, none) behind one registry.
- `protocol.py`: the length-prefixed JSON message protocol between harness and expert.
- `session.py`: the `SimSession` interface the server drives, and `RobotSession` over a SAPIEN scene.
- `commands.py`: checking and executing each expert command (no command sets object state).
- `server.py`: `run_expert`, one rollout of a controller in a sandbox.
- `judge/`: the declarative judge runtime, freezing and acceptance; `judge/from_recording.py` turns a
  recorded episode into the judge's trajectory.
- `world_session.py`: the `SimSession` over a World built from G, with the Recorder driving physics.
- `seeds.py`: dev seeds from B; admission seeds derived from a per-task secret in `harness/`.
- `rollout.py`: one judged rollout (dev or admission) and parallel batches of them.
"""
