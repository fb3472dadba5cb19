"""datafarm: an agentic compiler for robot training data.

A request (calibration clip, task sentence, episode count, mode) is compiled into a per-task
simulation pipeline whose episodes are admitted only through independent checks; see DESIGN.md.
"""

__version__ = "0.1.0"
