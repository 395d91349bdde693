"""The conductor: the top floor that drives a planned sweep (docs/CONTRACTS.md §1-§5).

    plan (experiments.plan) -> drive: submit, track, collect (launchers) -> analyse (analysis.api)
    -> gates -> next stage -> report -> history

Modules: ``drive`` (run a sweep, from the plan to the report), ``tracking`` (launch and poll its jobs round by
round), ``collect`` (copy logs and configs into the attempt folders), ``gates`` (open the next stage of a staged
preset), ``actions`` (status, cancel, collect, resume), ``backends`` (the launcher for the sweep's cluster
profile), ``progress`` (the live table), ``analyse`` (the analysis stage and the nightly history through their
Python APIs), ``preflight`` and ``recover`` (the container preflight, faults around sbatch).

A command reads the manifest once and holds it typed in one :class:`contracts.manifest.ManifestWriter`, which
writes each round's changes in one locked write. Imports only go down: contracts, launchers, analysis.
"""
