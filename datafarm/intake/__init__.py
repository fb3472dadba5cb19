"""Intake: reading what a user hands datafarm (request.yaml, the calibration clip folder) and turning
every defect into an `InputError` that names file, line, field, what was expected, and a fix."""

from datafarm.intake.check import check_request
from datafarm.intake.clip import validate_clip
from datafarm.intake.load import load_model, problems_from_validation_error, validate_document
from datafarm.intake.request import load_request
from datafarm.intake.yaml_source import YamlDocument, read_yaml

__all__ = [
    "check_request",
    "YamlDocument",
    "load_model",
    "load_request",
    "problems_from_validation_error",
    "read_yaml",
    "validate_clip",
    "validate_document",
]
