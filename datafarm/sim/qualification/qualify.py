"""`qualify`: run the probes a task needs on simulator variants, fewest changes first, and choose
the first variant on which all of them pass (DESIGN.md, stage 2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from datafarm.artifacts.grounding import Grounding
from datafarm.hashing import sha256_json
from datafarm.sim.qualification.library import (
    LoadedLibrary,
    ProbeCall,
    load_probe_library,
    plan_probes,
)
from datafarm.sim.qualification.probes import run_probe
from datafarm.sim.qualification.report import (
    ProbeResult,
    QualificationReport,
    VariantTrial,
)
from datafarm.sim.qualification.variants import (
    SimVariant,
    by_fewest_changes,
    candidate_variants,
)
from datafarm.sim.world.settings import WorldSettings

ProgressHook = Callable[[SimVariant, ProbeResult], None]
"""Called after every probe (e.g. to log it to the ledger or print it)."""


def qualify(grounding: Grounding, needs: str | Sequence[str | ProbeCall], candidates: Sequence[SimVariant] | None = None,
            seed: int = 0, *, roles: Mapping[str, str] | None = None, library: LoadedLibrary | None = None,
            base: WorldSettings | None = None, on_probe: ProgressHook | None = None) -> QualificationReport:
    """Qualify the simulator for a task: the probes `needs` names (a task family from K's probe
    library, or probe names / `ProbeCall`s) run on each candidate variant in order of fewest changes
    (stable among equals); the first variant on which every probe passes is chosen.

    `candidates` defaults to K's list (`candidate_variants`: default, single changes, then pairs).
    `roles` (T's role -> object id, when known) overrides finding roles in G. Every probe runs on
    every variant tried, so the report shows what each variant changed. The search stops early when
    a probe fails as `unreachable` on a variant: its motion has no IK solution in this scene, which
    no variant changes, so the defect lies in G (or the task is beyond the robot's reach).
    Raises InputError for an unknown family or probe, or a role no object of G can play."""
    library = library or load_probe_library()
    calls, notes = plan_probes(grounding, needs, library, roles)
    order = by_fewest_changes(candidates if candidates is not None else candidate_variants(library.library.variants))
    base = base or WorldSettings()
    trials: list[VariantTrial] = []
    chosen: VariantTrial | None = None
    stop_reason = ""
    for variant in order:
        settings = variant.settings(base)
        results = []
        for call in calls:
            result = run_probe(grounding, call, library.thresholds(call.probe), settings, seed)
            results.append(result)
            if on_probe is not None:
                on_probe(variant, result)
        trial = VariantTrial(variant=variant, settings=settings, passed=all(r.passed for r in results), results=results)
        trials.append(trial)
        if trial.passed:
            chosen = trial
            break
        unreachable = [r for r in results if r.failure == "unreachable"]
        if unreachable:
            stop_reason = ("stopped after variant " + variant.name + ": " + "; ".join(
                f"{r.probe} is unreachable ({r.reason})" for r in unreachable)
                + ". No simulator variant changes reachability: check G's object poses and sizes against the robot's reach")
            break
    family = needs if isinstance(needs, str) else None
    if chosen is not None:
        probes = f"all {len(calls)} probes pass" if len(calls) != 1 else "the probe passes"
        reason = (f"variant {chosen.variant.name} ({_describe(chosen.variant)}) is the first of {len(order)} candidates, "
                  f"in order of fewest changes, on which {probes}")
        if len(trials) > 1:
            reason += "; rejected before it: " + "; ".join(f"{t.variant.name} ({_failures(t)})" for t in trials[:-1])
    else:
        reason = stop_reason or (f"none of the {len(order)} candidate variants passes every probe; "
                                 + "; ".join(f"{t.variant.name} ({_failures(t)})" for t in trials[:5])
                                 + (" ..." if len(trials) > 5 else "")
                                 + ". The physical quantities in G (masses, frictions, sizes) are the next suspects")
    return QualificationReport(
        k_version=library.k_version, probe_library_sha256=library.sha256,
        grounding_sha256=sha256_json(grounding.model_dump(mode="json")), family=family, seed=seed, probes=calls,
        notes=notes, trials=trials, chosen=chosen.variant if chosen else None,
        settings=chosen.settings if chosen else None, passed=chosen is not None, reason=reason)


def _describe(variant: SimVariant) -> str:
    if not variant.changes:
        return "no change from the default settings"
    return ", ".join(f"{k} = {v}" for k, v in variant.changes.items())


def _failures(trial: VariantTrial) -> str:
    failed = [r for r in trial.results if not r.passed]
    return "; ".join(f"{r.probe} failed: {r.reason}" for r in failed) or "passed"
