"""Simulator qualification (DESIGN.md stage 2): the harness runs K's scripted probes (grasp-and-lift,
slide, nest, open and close a drawer, weigh, strike a drum) on simulator variants in order of fewest
changes from the default settings and picks the first variant on which every probe the task needs
passes; the report of every variant and probe tried is `qualification.json`."""

from datafarm.sim.qualification.library import (
    LoadedLibrary,
    ProbeCall,
    ProbeLibrary,
    load_probe_library,
    plan_probes,
)
from datafarm.sim.qualification.probes import PROBES, run_probe
from datafarm.sim.qualification.qualify import qualify
from datafarm.sim.qualification.report import (
    QUALIFICATION_FILE,
    ProbeResult,
    QualificationReport,
    VariantTrial,
    read_qualification,
    write_qualification,
)
from datafarm.sim.qualification.variants import (
    DEFAULT_VARIANT,
    SimVariant,
    by_fewest_changes,
    candidate_variants,
)

__all__ = [
    "DEFAULT_VARIANT",
    "PROBES",
    "QUALIFICATION_FILE",
    "LoadedLibrary",
    "ProbeCall",
    "ProbeLibrary",
    "ProbeResult",
    "QualificationReport",
    "SimVariant",
    "VariantTrial",
    "by_fewest_changes",
    "candidate_variants",
    "load_probe_library",
    "plan_probes",
    "qualify",
    "read_qualification",
    "run_probe",
    "write_qualification",
]
