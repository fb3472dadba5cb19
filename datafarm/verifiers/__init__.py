"""The shared verifier program and its calibration on corrupted episodes. Not implemented yet (issue 8)."""
