"""Speed benchmarks (run as scripts: `.venv/bin/python benchmarks/sim.py`)."""
