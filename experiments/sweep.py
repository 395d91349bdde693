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
import time

from contracts.exits import ExitCode

HELP = __doc__ + """
Top-level keys: action=run|plan|status|collect|cancel  dry_run=false|true  sweep_id=ID  output_dir=DIR
  preflight=static|container|off  mode=train|validate  repeats=N|auto  pack=false|true  detach=false|true
  allow_dirty=false|true  max_gpu_hours=N  hang_action=cancel|flag  control=false|true  max_blocks=N
  block_seed=N  practical_threshold=0.02
Groups: model=tiny_moe|qwen3_30b_a3b|qwen3_235b_a22b|deepseek_v3  cluster=local|local_slurm|h100_slurm|b200_slurm|
  gb200_slurm  container=<profile>  sweep=isolation|full|nightly
Axes: dispatcher=alltoall,allgather,deepep,hybridep,ncclep  overlap=on,off  delay_wgrad=on,off
  Any model./cluster. field can be set (model.seq_length=8192) or swept (model.expert_model_parallel_size=8,16).
"""


def main(argv: list[str] | None = None) -> int:
    """Parse overrides, dispatch the action and return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(HELP)
        return ExitCode.OK
    from contracts.errors import ContractError

    try:
        rc = int(_dispatch(argv))
    except ContractError as e:  # ConfigError, ManifestError (2); launchers' LaunchError: a bad profile (2) or the
        print(f"error: {e}", file=sys.stderr)  # scheduler/transport failing (5)
        rc = e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        rc = ExitCode.INTERRUPTED
    from contracts.exits import meaning

    print(f"exit code {rc}: {meaning(rc)}", file=sys.stderr)  # once, the code the process exits with
    return rc


def _dispatch(argv: list[str]) -> int:
    action = _peek_action(argv)
    if action in ("status", "collect", "cancel") or (action == "run" and _peek(argv, "sweep_id")):
        from experiments.conductor.actions import run_action  # the planner is not imported (issue 17)

        return run_action(action, argv)
    from experiments import timeline
    from experiments.plan import make_plan, write_plan
    from experiments.report_plan import print_plan

    timeline.reset()
    if action == "plan":
        from launchers import render_server

        render_server.start()  # NeMo-Run imports in a child while Hydra composes, for a template not yet cached
    if action == "run" and (_peek(argv, "cluster") or "local") == "local":
        from launchers import preload

        preload.start()  # likely a local validate sweep: torch and Megatron-Core import from now on (issue 17)
    plan = make_plan(argv)
    timeline.mark("planned")
    if plan.settings.effective_action == "plan":
        from launchers import preload

        preload.stop()
        try:
            out = write_plan(plan, argv)
        finally:
            from launchers import render_server

            render_server.stop()
        print_plan(plan, out)
        return ExitCode.OK
    from experiments.conductor.actions import run_new
    from experiments.conductor.backends import preload_validate

    preload_validate(plan)  # kept only for a local validate sweep; started now when the guess above missed it
    return run_new(plan, argv)


def _peek(argv: list[str], key: str) -> str | None:
    for a in argv:
        if a.startswith(f"{key}="):
            return a.split("=", 1)[1]
    return None


def _peek_action(argv: list[str]) -> str:
    if (_peek(argv, "dry_run") or "").lower() == "true":
        return "plan"
    return _peek(argv, "action") or "run"


EXIT_WAIT_S = 2.0  # s the command waits for its ending local jobs before it exits (exit_now)


def exit_now(rc: int) -> None:
    """End the process with ``rc``. When its child processes end within ``EXIT_WAIT_S`` (a finished sweep's local
    jobs are just exiting), the atexit handlers run, the output is flushed and the interpreter's teardown is
    skipped (``os._exit``): freeing the modules and objects of a sweep took 0.5-1.3 s on a 2-core login node
    after the last line was printed (issue 17). With a child still alive the exit is the normal one, so that
    NeMo-Run's schedulers end their jobs as they always do."""
    import atexit

    from launchers import preload, render_server
    from launchers.exitwatch import ExitWatch, children, running

    preload.stop()  # helpers that no job uses (a sweep refused before its launch) end now, not after the wait
    render_server.stop()
    watch = ExitWatch()
    watch.add("children", running(children()))
    deadline = time.monotonic() + EXIT_WAIT_S
    while running(children()) and time.monotonic() < deadline:
        watch.wait(max(0.0, deadline - time.monotonic()))
    watch.close()
    if running(children()):
        sys.exit(rc)
    atexit._run_exitfuncs()
    from contracts.procexit import exit_without_teardown

    exit_without_teardown(rc)


if __name__ == "__main__":
    exit_now(main())
