"""The versioned capability layer K: stage skills, role prompts, render templates, price table.

Each version lives in `k<N>/` with a manifest; see `bundle.py` for loading and integrity checks.
"""

from datafarm.capability.bundle import CapabilityBundle, available_versions, latest_version, load

__all__ = ["CapabilityBundle", "available_versions", "latest_version", "load"]
