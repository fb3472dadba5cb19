"""The shared verifier (stage 8) and its calibration on corrupted episodes (DESIGN.md, "Verifier and
its calibration").

One program, configured per task by a spec derived from T, G, R and K's verifier defaults:

- `derive_spec(task_dir | (T, G, R)) -> VerifierSpec`; `save_spec` / `load_spec` (`verifier/spec.json`);
- `calibrate(task_dir, episode_id, spec) -> CalibrationReport`: every corruption of an accepted
  episode caught by its check and the clean episode passing, written to `verifier/calibration.json`
  (raises `CalibrationFailed` naming the corruptions that escaped; such a spec is not used);
- `verify_episode(task_dir, episode_id, spec=None) -> VerifierResults`: the checks on one rendered
  episode, evidence crops in `episodes/<id>/verifier/`;
- `reverify(task_dir, episode_id, stored) -> VerifierResults`: the audit's re-run, writing nothing.
"""

from datafarm.verifiers.calibration import calibrate
from datafarm.verifiers.corruptions import CORRUPTIONS, Corruption
from datafarm.verifiers.evidence import SimEvidence, gather_evidence
from datafarm.verifiers.report import (
    CALIBRATION_FILE,
    CalibrationFailed,
    CalibrationReport,
    load_calibration,
)
from datafarm.verifiers.spec import (
    SPEC_FILE,
    VerifierSpec,
    derive_spec,
    load_spec,
    save_spec,
)
from datafarm.verifiers.verify import (
    reverify,
    run_checks,
    verifier_files,
    verify_episode,
)

__all__ = [
    "CALIBRATION_FILE", "CORRUPTIONS", "SPEC_FILE", "CalibrationFailed", "CalibrationReport", "Corruption",
    "SimEvidence", "VerifierSpec", "calibrate", "derive_spec", "gather_evidence", "load_calibration", "load_spec",
    "reverify", "run_checks", "save_spec", "verifier_files", "verify_episode",
]
