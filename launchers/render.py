"""The exact job script of one run, for ``variants/<name>/job.sh`` (CONTRACTS §3), without submitting.

Slurm: NeMo-Run's own sbatch text, made by NeMo-Run's dry run through the same batch builder that submits
(:mod:`launchers.batch`), in a scratch NEMORUN_HOME whose path is then replaced by the sweep's (NeMo-Run's
``Experiment.dryrun`` prints the script and deletes its folder, so it is captured here instead). Local: the
command line the LocalExecutor runs. Secret values never appear: they are not in the script to begin with, and
any that would be are masked as ``***`` (CONTRACTS §10).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from launchers.batch import DEFAULT_TITLE, Batch, BatchRequest, Item, slurm_batch
from launchers.envvars import JobEnv, cluster_env, mask_text
from launchers.errors import LaunchConfigError
from launchers.home import nemo_run, nemorun_home, nemorun_home_path, no_stdin
from launchers.spec import RunSpec
from launchers.templates import TemplateCache

__all__ = ["DEFAULT_TITLE", "JobScripts", "render_collect_script", "render_job_script", "render_slurm_batch"]


def render_slurm_batch(request: BatchRequest, *, state_dir: str | Path) -> dict[str, str]:
    """Task name -> sbatch script text NeMo-Run would submit for ``request`` (one Slurm job per item).

    ``state_dir`` is the sweep's ``nemo_run/`` (it need not exist). Imports NeMo-Run (about 4 s the first time).

    Raises:
        LaunchConfigError: see :func:`launchers.batch.slurm_batch`.
    """
    return _render(lambda run, home: slurm_batch(run, request, home=home), state_dir, request.job_env)


def _render(build: Callable[[Any, Path], Batch], state_dir: str | Path, env: JobEnv) -> dict[str, str]:
    """Dry-run ``build(run, home)``'s batch in a scratch NEMORUN_HOME; return its scripts with the sweep's paths."""
    real_home = nemorun_home_path(state_dir)
    scratch = Path(tempfile.mkdtemp(prefix="moe-render-"))
    try:
        with nemorun_home(scratch / "home") as home, no_stdin():
            run = nemo_run()
            batch = build(run, home)
            with run.Experiment(batch.title, id=batch.exp_id, log_level="ERROR", clean_mode=True,
                                enable_goodbye_message=False, skip_status_at_exit=True) as exp:
                for task in batch.tasks:
                    exp.add(task.script, executor=task.executor, name=task.name)
                exp.dryrun(log=False, delete_exp_dir=False)
            texts = {t.name: (batch.exp_dir / f"{t.name}_sbatch.sh").read_text() for t in batch.tasks}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    secrets = env.secret_values()
    return {name: mask_text(text.replace(str(home), str(real_home)), secrets) for name, text in texts.items()}


def render_job_script(cluster: ClusterConfig, item: Item, *, state_dir: str | Path, cwd: str | Path | None = None,
                      label: str = "s1", **fields: Any) -> str:
    """The job script of one run or command: sbatch text on Slurm, the command line on the local executor.

    ``cluster``: the typed profile; ``item``: a :class:`launchers.spec.RunSpec` (or JobCommand); ``state_dir``: the
    sweep's ``nemo_run/``; ``cwd``: the folder a local run is started in (default this process's); ``label`` and
    further keyword arguments: the fields of the :class:`launchers.batch.BatchRequest` of this one item (``title``,
    ``python``, ``env``, ``time_limit_s``, ``srun_args``, ``gpus``).

    Raises:
        LaunchConfigError: the profile or the item cannot be launched (names the field and the fix).
        TypeError: a keyword that is not a field of BatchRequest.
    """
    request = BatchRequest(cluster=cluster, items=(item,), label=label, **fields)
    if cluster.is_local:
        from launchers.local import render_local

        return render_local(request, state_dir=state_dir, cwd=cwd)
    return render_slurm_batch(request, state_dir=state_dir)[item.name]


# the variant name a template is rendered for: a valid task name (launchers.spec.check_task_name) that no sweep path,
# profile or environment holds (its variant file sits in the sweep's variants/ folder while the template renders)
_SENTINEL = "Zq7tmplvariantZq7"


class JobScripts:
    """Job scripts of many runs, rendered once per shape: :func:`render_job_script`'s text, byte for byte.

    Every run that differs only in its variant name has one shape (the cluster, the attempt, repeat, mode, hold and
    the keyword arguments); its script is rendered once, by NeMo-Run's dry run, for a placeholder variant, and each
    run's script is that text with the placeholder replaced by the variant's name. This is exact because a variant
    name holds only ``[A-Za-z0-9_.-]`` (:func:`launchers.spec.check_task_name`), which ``shlex.quote`` and
    NeMo-Run leave as they are, and the name enters the script only as text (paths, job and task names); a
    template without the placeholder, or an item that is not a RunSpec, is rendered in full. About 51 ms per
    NeMo-Run dry run, about 0.05 ms per substitution (benchmarks/plan.py). A template rendered once is kept on disk
    (:mod:`launchers.templates`, keyed by every input), so a later plan of the same shape imports no NeMo-Run.
    tests/launchers/test_render_fast.py checks the equality against the full dry run, quoting cases included.
    """

    def __init__(self) -> None:
        self._templates: dict[str, str | None] = {}

    def render(self, cluster: ClusterConfig, item: Any, *, state_dir: str | Path, before_full: Callable[[], object] | None = None,
               **kwargs: Any) -> str:
        """The job script of ``item`` as :func:`render_job_script` renders it (same arguments and errors).

        ``before_full``: called before a run is rendered in full (no template for its shape, or not a RunSpec), the
        one case that reads the item's variant file: the planner writes that file only then."""
        if not isinstance(item, RunSpec):
            return self._full(cluster, item, state_dir, before_full, kwargs)
        key = repr((cluster, item.attempt, item.repeat, item.mode, item.hold_s, str(state_dir),
                    sorted(kwargs.items())))
        if key not in self._templates:
            self._templates[key] = self._template(cluster, item, state_dir, kwargs)
        template = self._templates[key]
        if template is None:
            return self._full(cluster, item, state_dir, before_full, kwargs)
        secrets = (kwargs.get("env") or cluster_env(cluster)).secret_values()
        return mask_text(template.replace(_SENTINEL, item.variant), secrets)

    @staticmethod
    def _full(cluster: Any, item: Any, state_dir: str | Path, before: Callable[[], object] | None,
              kwargs: dict[str, Any]) -> str:
        if before is not None:
            before()
        return render_job_script(cluster, item, state_dir=state_dir, **kwargs)

    def _template(self, cluster: Any, item: RunSpec, state_dir: str | Path, kwargs: dict[str, Any]) -> str | None:
        """The placeholder's script, its variant file next to the real one's (``<sweep>/variants/<placeholder>/``,
        removed again), so that every path in it and every check of a path is the real variant's but for the name."""
        variants = item.variant_json.parent.parent
        if variants.name != "variants" or not variants.is_dir():
            return None
        fake = variants / _SENTINEL / "variant.json"
        placeholder = dataclasses.replace(item, variant=_SENTINEL, variant_json=fake)
        cached = TemplateCache(Path(os.path.abspath(state_dir)).parent, variants.parent,
                               (cluster, placeholder, str(state_dir), sorted(kwargs.items())),
                               kwargs.get("env") or cluster_env(cluster))
        text = cached.load()  # no NeMo-Run import when this shape was rendered before
        if text is not None:
            return text
        try:
            fake.parent.mkdir(exist_ok=True)
            fake.write_text("{}")
            text = render_job_script(cluster, placeholder, state_dir=state_dir, **kwargs)
        except LaunchConfigError:
            return None  # each run is rendered in full, so that its error names the real variant
        finally:
            shutil.rmtree(fake.parent, ignore_errors=True)
        if _SENTINEL not in text:
            return None
        cached.store(text)
        return text

    def close(self) -> None:
        """Forget the templates."""
        self._templates.clear()


def render_collect_script(request: BatchRequest, *, after: list[str], state_dir: str | Path) -> str:
    """The sbatch text of the collect job of ``request`` held behind Slurm jobs ``after``, as
    :func:`launchers.submit.submit_collect` submits it (without submitting). Errors as
    :func:`launchers.collect_job.collect_batch`."""
    from launchers.collect_job import collect_batch

    texts = _render(lambda run, home: collect_batch(run, request, home=home, after=after), state_dir,
                    request.job_env)
    return texts[request.items[0].name]
