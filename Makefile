# The two commands of the README: `make demo` and `make test`. Both set up what they need first
# (system packages as root, a virtualenv, the package), idempotently: a second run only checks.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.datafarm-installed
DEMO_OUT ?= build/demo

.PHONY: setup system demo test test-fast examples clean

setup: system $(STAMP)

system:
	@bash scripts/setup-system.sh

# Reinstall only when the dependency list changes; the package itself is installed editable.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@$(BIN)/python -c "import cv2, cv2.aruco, sapien, av, pyarrow" || (echo "dependency import check failed" >&2; exit 1)
	@touch $(STAMP)

# Compiles the example request into a fresh task folder under $(DEMO_OUT) (removed first) through every
# stage, verifies the ledger's hash chain, shows its last entries, and ends with `datafarm admit`, which
# exits 0 only for a complete, unmodified, fully recorded and reviewed dataset. If a stage rejects its
# input (compile exit 5), compile says which and the ledger records it; the ledger is still shown, and
# admit then lists what is missing and fails the demo.
demo: setup
	@rm -rf $(DEMO_OUT)
	$(BIN)/datafarm compile examples/nest_cups/request.yaml --out $(DEMO_OUT) || [ $$? -eq 5 ]
	$(BIN)/datafarm ledger verify $(DEMO_OUT)/*/
	$(BIN)/datafarm ledger show $(DEMO_OUT)/*/ --last 12
	$(BIN)/datafarm admit $(DEMO_OUT)/*/

# The whole suite, slow end-to-end tests included.
test: setup
	$(BIN)/python -m pytest -q --durations=20

# Everything but tests marked slow, for quick iteration.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

# Re-renders every example's calibration clip (and truth.json) with the SAPIEN studio (~100 s here).
examples: setup
	$(BIN)/python -m datafarm.studio.examples

clean:
	rm -rf $(VENV) build .pytest_cache
