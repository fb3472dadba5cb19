"""The admission models document every field, and a refusal survives pickling (rollout workers send
errors across processes). No dataset needed."""

from __future__ import annotations

import pickle

from datafarm.admission.admit import AdmitProblem, AdmitReport
from datafarm.admission.audit import AuditDifference, AuditReport, StateComparison
from datafarm.admission.certificate import AdmissionCertificate, CertifiedEpisode
from datafarm.admission.record import AdmissionRefused
from datafarm.errors import Problem


def test_every_admission_model_documents_every_field():
    for model in (AdmissionCertificate, CertifiedEpisode, AdmitProblem, AdmitReport, AuditDifference, AuditReport,
                  StateComparison):
        assert all((f.description or "").strip() for f in model.model_fields.values()), model.__name__


def test_a_refusal_survives_pickling():
    refused = AdmissionRefused([Problem("the reviewer rejected the episode")], "episode e: not admitted")
    again = pickle.loads(pickle.dumps(refused))
    assert again.problems == refused.problems and str(again) == str(refused) and again.exit_code == 4
