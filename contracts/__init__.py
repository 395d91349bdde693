"""The ground floor: the contracts every stage and the payload share (docs/CONTRACTS.md).

Standard library only, so the payload can import it inside any training container. Nothing here imports a stage;
every stage (``launchers/``, ``analysis/``, ``experiments/``) imports from here.

Modules:
    statuses   manifest statuses, run outcomes, comparison verdicts, roles, modes (``StrEnum``: they serialise
               to the strings of docs/CONTRACTS.md §4)
    exits      the one exit-code table (§5) and how codes combine
    slurm      the one Slurm state map and the one Slurm time-limit parser
    secrets    what a secret is and how it is masked (§10)
    atomic     the one atomic writer (temp file + rename, the user's umask)
    locks      the one file-lock helper (flock: the manifest lock, the lease, the validate hand-over)
    procfs     the one reader of /proc (process start in clock ticks, alive, environment, command line)
    records    Variant, RunRef and the naming rules (§2)
    cluster    the typed cluster profile the launchers take (§9)
    jobs       typed job handles and scheduler states that launchers return
    manifest   the typed manifest.json with load/create/update under the file lock (§3)
    sweepdir   SweepDir: every path of the sweep folder (§3)
    errors     the small exception hierarchy
"""
