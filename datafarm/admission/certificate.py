"""The admission certificate (`certificate.json` in the task folder): what `datafarm admit` writes when
a dataset is complete, unmodified, fully recorded and reviewed.

Its `dataset_sha256` is the digest a trainer pins: sha256 (canonical JSON) of the episodes sorted by
id, each as `{episode_id, admission_sha256, files}` (q's file hash and the hash of every episode
file). Any change to any admitted byte changes it.
"""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from datafarm.artifacts.base import Artifact
from datafarm.artifacts.episode import EpisodePath
from datafarm.artifacts.ledger_entry import Sha256Hex
from datafarm.hashing import sha256_json

CERTIFICATE_FILE = "certificate.json"
"""The certificate's file name in the task folder."""


class CertifiedEpisode(Artifact):
    """One admitted episode as the certificate covers it."""

    episode_id: str = Field(min_length=1)
    """The episode (its folder under `episodes/`)."""
    seed_index: int = Field(ge=0)
    """Index of its admission seed."""
    admission_sha256: Sha256Hex
    """sha256 of its `admission.json` (q), as the ledger's admission event recorded it."""
    files: dict[EpisodePath, Sha256Hex]
    """sha256 of every other file of the episode folder, by relative path (equal to q's `files`)."""

    def digest_item(self) -> dict[str, object]:
        """What the dataset digest hashes for this episode."""
        return {"episode_id": self.episode_id, "admission_sha256": self.admission_sha256, "files": dict(self.files)}


def dataset_digest(episodes: list[CertifiedEpisode]) -> str:
    """sha256 over the episodes sorted by id: (episode id, q hash, file hashes) each."""
    return sha256_json([e.digest_item() for e in sorted(episodes, key=lambda e: e.episode_id)])


class AdmissionCertificate(Artifact):
    """`certificate.json`: the admitted dataset's digest and what it was admitted under."""

    dataset_sha256: Sha256Hex
    """`dataset_digest(episodes)`."""
    n: int = Field(ge=1)
    """Episodes admitted (B's n)."""
    episodes: list[CertifiedEpisode]
    """Every admitted episode, sorted by id."""
    k_version: str = Field(min_length=1)
    """Capability-layer version the task was compiled with (`capability.lock`)."""
    k_sha256: Sha256Hex
    """That version's content hash."""
    judge_sha256: Sha256Hex
    """Hash of the frozen J every episode was judged by."""
    verifier_spec_sha256: Sha256Hex
    """Hash of `verifier/spec.json` every episode was verified under."""
    verifier_calibration_sha256: Sha256Hex
    """Hash of `verifier/calibration.json`."""
    admission_seeds_used: int = Field(ge=0)
    """Admission seeds run (0 .. this - 1, no gaps), rejected ones included."""
    ledger_head_sha256: Sha256Hex
    """`hash` of the ledger's last entry when the dataset was checked (the certification event follows it)."""
    ledger_entries: int = Field(ge=1)
    """Entries in the ledger when the dataset was checked."""
    datafarm_version: str = Field(min_length=1)
    """Version of the datafarm that certified it."""
    certified_at: AwareDatetime
    """When it was certified."""

    def digest_matches(self) -> bool:
        """True when `dataset_sha256` is the digest of `episodes`."""
        return self.dataset_sha256 == dataset_digest(self.episodes)
