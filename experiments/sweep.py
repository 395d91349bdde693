"""``python -m experiments.sweep [Hydra overrides]``: the single entry point (CONTRACTS §1).

    python -m experiments.sweep action=plan                       # what would run, and why not
    python -m experiments.sweep                                   # run the default sweep (tiny_moe, local)
    python -m experiments.sweep cluster=local_slurm sweep=isolation
    python -m experiments.sweep model=qwen3_30b_a3b cluster=h100_slurm dispatcher=alltoall,deepep overlap=on,off
    python -m experiments.sweep action=status sweep_id=20261129-160000Z-a1b2c3

Exit codes (CONTRACTS §5): 0 ok, 2 usage/config error, 3 a run failed, 4 regression or loss divergence,
5 scheduler/infrastructure error, 130 interrupted, 1 internal error.
"""

from __future__ import annotations

import sys

from contracts.exits import ExitCode, in_print_order

HELP = __doc__ + """
Top-level keys: action=run|plan|status|collect|cancel  dry_run=false|true  sweep_id=ID  output_dir=DIR
  preflight=static|container|off  mode=train|validate  repeats=N|auto  pack=false|true  detach=false|true
  collect_job=true|false  allow_dirty=false|true  max_gpu_hours=N  hang_action=cancel|flag  control=false|true
  max_blocks=N  block_seed=N  practical_threshold=0.02
Groups (one option per file of conf/<group>/):
  {groups}
Axes: dispatcher=alltoall,allgather,deepep,hybridep,ncclep  overlap=on,off  delay_wgrad=on,off
  Any model./cluster. field can be set (model.seq_length=8192) or swept (model.expert_model_parallel_size=8,16).
"""


def main(argv: list[str] | None = None) -> int:
    """The CLI: ``-h``/``--help``/``help`` prints the keys (flags, as Hydra's own apps take them, before any
    override is read); else the overrides are composed once and the composed action runs. Returns the exit code
    (CONTRACTS §5) instead of exiting; ``python -m experiments.sweep`` exits with it through ``sys.exit``."""
    in_print_order()  # the exit line below stays the last line when stdout and stderr share a file
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        from experiments.compose import group_options

        print(HELP.replace("{groups}", "\n  ".join(f"{g}={'|'.join(group_options(g))}"
                                                  for g in ("model", "cluster", "container", "sweep", "precision"))))
        return ExitCode.OK
    from contracts.errors import ContractError
    from experiments.conductor import signals
    from experiments.conductor.ending import Ended

    signals.install()  # SIGTERM and SIGHUP (a closed terminal) stop the conductor as Ctrl-C does (CONTRACTS §5)
    try:
        ended = _dispatch(argv)
    except ContractError as e:  # ConfigError, ManifestError (2); launchers' LaunchError: a bad profile (2) or the
        print(f"error: {e}", file=sys.stderr)  # scheduler/transport failing (5)
        ended = Ended(e.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        ended = Ended(ExitCode.INTERRUPTED)
    finally:
        signals.restore()
    print(ended.line(), file=sys.stderr)  # once: the code the process exits with, and what the command did
    return int(ended.code)


def _dispatch(argv: list[str]):  # noqa: ANN202 - experiments.conductor.ending.Ended (imported lazily)
    """Compose the command line once (Hydra's grammar: ``action=status``, ``"action='status'"`` and
    ``'action="status"'`` are one value) and run the composed action. Returns its exit code and last line."""
    from experiments import timeline
    from experiments.compose import compose_overrides
    from experiments.settings import SweepSettings

    timeline.reset()
    composed = compose_overrides(argv)
    settings = SweepSettings.from_cfg(composed.base)
    action = settings.effective_action
    if action in ("status", "collect", "cancel") or (action == "run" and settings.sweep_id):
        from experiments.conductor.actions import run_action  # an existing sweep: the planner is not needed

        return run_action(action, composed)
    from experiments.plan import make_plan, write_plan
    from experiments.report_plan import print_plan

    plan = make_plan(composed)
    timeline.mark("planned")
    if action == "plan":
        from experiments.conductor.ending import after_plan

        root = write_plan(plan, argv)
        print_plan(plan, root)
        return after_plan(str(root), len(plan.runs))
    from experiments.conductor.actions import run_new

    return run_new(plan, argv)


if __name__ == "__main__":
    sys.exit(main())
