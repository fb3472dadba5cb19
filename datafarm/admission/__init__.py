"""Admission (stage 10): the admission record q of each episode, `datafarm admit` (the delivery
check and its certificate) and `datafarm audit` (re-running a task under its pinned K).

    from datafarm.admission.record import write_admission
    from datafarm.admission.admit import admit
    from datafarm.admission.audit import audit

    q = write_admission(task, episode_id, verdict, lock, verifier_results, review)
    report = admit(task)            # report.ok, report.problems; certificate.json when ok
    report = audit(task, sample=2)  # re-judge, re-simulate, re-verify; report.differences

Modules: `record` (q), `admit` (the delivery check), `certificate` (certificate.json and the
dataset digest), `audit`, `commands` (the typer commands). Nothing is imported here, so that the
CLI's import of `commands` does not load the simulator.
"""
