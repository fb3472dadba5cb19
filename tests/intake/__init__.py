"""Tests of reading request.yaml and calibration clips."""
