"""The Slurm backend: NeMo-Run ``SlurmExecutor`` jobs submitted through :mod:`launchers.submit` (one Slurm job per
run, or one allocation per block with ``pack=true``), their state from squeue/sacct (:mod:`launchers.track`), on a
login node or through an SSH tunnel. The interface is :class:`launchers.backend.Backend`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.jobs import JobHandle, JobState
from contracts.records import RunRef
from contracts.statuses import ManifestStatus
from launchers.backend import run_spec
from launchers.batch import BatchRequest, batch_label
from launchers.errors import SchedulerError
from launchers.shell import Shell, close_shell
from launchers.spec import RunSpec

SUBMITTER_WAIT_S = 120.0
"""How long a resume waits for a dead conductor's sbatch processes before it looks their jobs up (then kills them)."""


class SlurmBackend:
    """NeMo-Run ``SlurmExecutor`` through the launcher's submit/track modules: every run of a launch is one Slurm
    job of one NeMo-Run experiment (no ``afterok`` chains); state from squeue/sacct; a job that vanished is lost.

    Over an SSH tunnel (``cluster.tunnel.kind=ssh``) squeue/sacct/scancel run on the cluster through the tunnel,
    and the logs and ``out/effective_config.json``, written in the job folder on the cluster (``host_dir``,
    under ``cluster.tunnel.job_dir``), are copied back into the task folder on this machine when read.
    """

    max_concurrent = None
    enforce_time_limit = False
    detaches = True
    batch_validate = False
    chains_collect = True

    def __init__(self, sweep_dir: Path, cluster: ClusterConfig, *, title: str, repo: Path, allow_dirty: bool = False,
                 pack: bool = False, hold_s: float = 0) -> None:
        self.sweep_dir = Path(sweep_dir).resolve()
        self.cluster = cluster
        self.title = title
        self.repo = repo
        self.allow_dirty = allow_dirty
        self.pack = pack
        self.hold_s = hold_s
        self._subs: dict[str, JobHandle] = {}
        self._submitted_at: dict[str, float] = {}
        self._sh: Shell | None = None
        self._accounting_ok = False
        self.remote = cluster.remote

    def _shell(self) -> Shell:
        """Where squeue/sacct/scancel run: here on a login node, through the SSH tunnel otherwise (one connection,
        opened on first use)."""
        if self._sh is None:
            from launchers.shell import shell_for

            self._sh = shell_for(self.cluster)
        return self._sh

    def adopt(self, handles: list[JobHandle]) -> None:
        """Know jobs submitted earlier, by this or another process (status, collect, resume): their handles come
        from the attempts the conductor recorded. They are past the ``lost`` grace period at once."""
        for h in handles:
            self._subs[h.task] = h
            self._submitted_at[h.task] = time.time() - 3600

    def find_submitted(self, refs: list[RunRef]) -> dict[str, JobHandle]:
        """Jobs of ``refs`` that the scheduler has although the caller never recorded them (the conductor died
        between sbatch and its manifest write): looked up by Slurm job name (``moe.`` + :attr:`RunRef.task`) in
        squeue and sacct, and kept only when the job's working folder lies inside this sweep's ``nemo_run/`` (other
        sweeps use the same names): the batch script sbatch was given lies inside this sweep folder (NeMo-Run's home
        is in it). One squeue and one sacct call. Found jobs are adopted. Login node only: over
        SSH the cluster's folders are not this sweep's, so nothing is found (the run is submitted again).

        Raises:
            SchedulerError: squeue or sacct failed.
        """
        if self.remote or self.pack or not refs:  # packed steps share one allocation's name: not looked up
            return {}
        from launchers.procs import wait_for_submitters

        # a dead conductor's sbatch may still be running: it would queue its job after the look-up below
        waited = wait_for_submitters(self.sweep_dir / "nemo_run", SUBMITTER_WAIT_S)
        if waited:
            print(f"note: waited for {len(waited)} sbatch process(es) of the conductor that stopped (pids "
                  f"{', '.join(map(str, waited))}) before looking its jobs up", file=sys.stderr)
        return self.find_items({r.task: run_spec(self.sweep_dir, r, "train", 0).name for r in refs})

    def find_items(self, names: Mapping[str, str]) -> dict[str, JobHandle]:
        """Jobs of this sweep by the name of the item each was submitted as (``key -> item name``, e.g. the fabric
        probe's ``fabric_probe``; Slurm's job name is ``moe.<name>``), in squeue and sacct, whatever their state,
        kept only when sbatch's script lies inside this sweep folder. Found jobs are adopted under their key. Login
        node only (over SSH nothing is found).

        Raises:
            SchedulerError: squeue or sacct failed.
        """
        from launchers.slurm import JOB_NAME_PREFIX
        from launchers.track import find_by_name

        if self.remote or not names:
            return {}
        keys = {f"{JOB_NAME_PREFIX}{name}": key for key, name in names.items()}
        out: dict[str, JobHandle] = {}
        for name, (job_id, script_path) in find_by_name(list(keys), self._shell(), under=self.sweep_dir).items():
            sbatch = Path(script_path)
            if self.sweep_dir not in sbatch.parents:
                continue
            key = keys[name]
            job_dir = sbatch.parent / sbatch.name.removesuffix("_sbatch.sh")  # the task folder beside its script
            script = sbatch.read_text() if sbatch.is_file() else None
            self._subs[key] = out[key] = JobHandle(key, job_id, job_dir=str(job_dir), script=script)
            self._submitted_at[key] = time.time() - 3600
        return out

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobHandle]:
        specs = [run_spec(self.sweep_dir, r, mode, self.hold_s) for r in refs]
        if self.pack:
            return self._submit_packed(refs, specs, pack_label(stage, refs))
        return self.submit_items([r.task for r in refs], specs, batch_label(stage))

    def _accounting(self) -> None:
        """Before this backend's first submission: Slurm accounting must answer (:func:`launchers.track.
        check_accounting`, raises SchedulerError)."""
        if not self._accounting_ok:
            from launchers.track import check_accounting

            check_accounting(self._shell())
            self._accounting_ok = True

    def _submit_packed(self, refs: list[RunRef], specs: list[RunSpec], label: str) -> dict[str, JobHandle]:
        """``pack=true``: the runs go one after another in ONE allocation, each as its own srun step with its own
        log, output folder and time budget (launchers/pack.py); one queue wait for the stage."""
        from launchers.submit import submit_packed

        self._accounting()

        sub = submit_packed(self._request(specs, label), state_dir=self.sweep_dir / "nemo_run", repo=self.repo,
                            allow_dirty=self.allow_dirty, allow_ssh_secrets=self.cluster.allow_ssh_secrets,
                            shell=self._shell())
        by_name = {r.name: r for r in sub.runs}
        out = {}
        for ref, spec in zip(refs, specs, strict=True):
            pr = by_name[spec.name]
            self._subs[ref.task] = out[ref.task] = JobHandle(
                ref.task, sub.job.job_id, job_dir=str(pr.run_dir), pack_step=pr.name, script=sub.job.script,
                host_dir=pr.host_run_dir if self.remote else "")
            self._submitted_at[ref.task] = time.time()
        return out

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobHandle:
        """Queue one RunSpec or JobCommand (e.g. the container preflight) as a Slurm job."""
        return self.submit_items([key], [item], label)[key]

    def submit_items(self, keys: list[str], items: list[Any], label: str) -> dict[str, JobHandle]:
        from launchers.submit import submit_slurm

        self._accounting()

        subs = submit_slurm(self._request(items, label), state_dir=self.sweep_dir / "nemo_run", repo=self.repo,
                            allow_dirty=self.allow_dirty, allow_ssh_secrets=self.cluster.allow_ssh_secrets,
                            shell=self._shell())
        by_name = {s.name: s for s in subs}
        out = {}
        for key, item in zip(keys, items, strict=True):
            s = by_name[item.name]
            # host_dir (the job folder on the cluster) is kept over SSH only, so that action=status|collect in
            # another process can fetch the logs again
            self._subs[key] = out[key] = JobHandle(key, s.job_id, job_dir=str(s.job_dir), script=s.script,
                                                   host_dir=s.host_dir if self.remote else "")
            self._submitted_at[key] = time.time()
        return out

    def submit_collect(self, sweep_id: str, after: list[str], secrets: Mapping[str, str] | None = None,
                       overrides: tuple[str, ...] = ()) -> JobHandle:
        """Queue the sweep's collect as a Slurm job held until every job of ``after`` (Slurm job ids) has ended
        (``--dependency=afterany``, :mod:`launchers.collect_job`); it runs in this checkout, with this interpreter.
        ``secrets`` (name -> value, each name a secret's, CONTRACTS §10) join the profile's secrets: they travel in
        sbatch's environment only, never in the script; ``overrides`` (Hydra overrides, no secret) go on its
        command.

        Raises:
            LaunchConfigError: an SSH profile (the nodes do not have this checkout) or no job ids.
            SchedulerError: sbatch refused the job (its message included).
        """
        from launchers.collect_job import collect_command
        from launchers.submit import submit_collect

        cmd = collect_command(sweep_id, self.sweep_dir, repo=self.repo, overrides=overrides)
        request = self._request([cmd], "collect")
        if secrets:
            cluster = dataclasses.replace(self.cluster, env_vars={**self.cluster.env_vars, **secrets})
            request = dataclasses.replace(request, cluster=cluster)
        sub = submit_collect(request, after=after, state_dir=self.sweep_dir / "nemo_run",
                             repo=self.repo, allow_dirty=self.allow_dirty, shell=self._shell())
        return JobHandle(cmd.name, sub.job_id, job_dir=str(sub.job_dir), script=sub.script)

    def _request(self, items: list[Any], label: str) -> BatchRequest:
        """The batch of ``items`` under ``label`` plus a time stamp (a resubmission never reuses an experiment id)."""
        return BatchRequest(cluster=self.cluster, items=tuple(items), title=self.title,
                            label=f"{label}.{time.time_ns() % 10**9}")

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]:
        from launchers.pack import PackedRun, pack_states
        from launchers.track import states

        plain = {self._subs[r.task].job_id: self._submitted_at[r.task] for r in refs
                 if r.task in self._subs and not self._subs[r.task].pack_step}
        st = states(plain, self._shell()) if plain else {}
        packs: dict[str, list[PackedRun]] = {}
        for r in refs:
            sub = self._subs.get(r.task)
            if sub is not None and sub.pack_step:
                packs.setdefault(sub.job_id, []).append(PackedRun(sub.pack_step, None, Path(sub.job_dir or ".")))
        packed = {(j, name): s for j, runs in packs.items() for name, s in pack_states(j, runs, self._shell()).items()}
        out = {}
        for r in refs:
            sub = self._subs.get(r.task)
            if sub is None:
                out[r.task] = JobState(ManifestStatus.LOST, reason="no job id recorded")
                continue
            out[r.task] = packed[(sub.job_id, sub.pack_step)] if sub.pack_step else st[sub.job_id]
        return out

    def cancel_jobs(self, job_ids: list[str]) -> None:
        """``scancel`` jobs of this sweep that are no run of it (its chained collect job).

        Raises:
            SchedulerError: scancel failed for another reason than an unknown or finished job.
        """
        from launchers.submit import cancel

        cancel(job_ids, self._shell())

    def cancel(self, ref: RunRef) -> None:
        from launchers.pack import cancel_packed_run
        from launchers.submit import cancel

        sub = self._subs.get(ref.task)
        if sub is not None and sub.pack_step:
            cancel_packed_run(sub.job_id, sub.pack_step, self._shell())
        elif sub is not None:
            cancel([sub.job_id], self._shell())

    def exclude_nodes(self, nodes: list[str]) -> None:
        """Every later job of this backend is submitted with ``--exclude`` naming ``nodes`` as well as the profile's
        own ``cluster.exclude``."""
        from dataclasses import replace

        have = [n for n in (self.cluster.exclude or "").split(",") if n]
        self.cluster = replace(self.cluster, exclude=",".join(dict.fromkeys([*have, *nodes])) or None)

    def stop(self, refs: list[RunRef]) -> None:
        """``scancel`` the jobs of ``refs``, each once: with ``pack=true`` the whole allocation holding them, so that
        no later run of it starts (cancelling only the running step would let the next one start).

        Raises:
            SchedulerError: scancel failed for another reason than an unknown or finished job.
        """
        from launchers.submit import cancel

        jobs = list(dict.fromkeys(self._subs[r.task].job_id for r in refs if r.task in self._subs))
        if jobs:
            cancel(jobs, self._shell())

    def log_files(self, ref: RunRef) -> list[Path]:
        """The job's log files on this machine (over SSH: fetched from the cluster first; when the cluster cannot
        be reached, the copies fetched before)."""
        from launchers.track import fetch_log_files, log_files

        sub = self._subs.get(ref.task)
        if sub is None or sub.job_dir is None:
            return []
        if self.remote and sub.host_dir:
            with contextlib.suppress(SchedulerError):
                return fetch_log_files(sub.host_dir, sub.job_id, sub.job_dir, self._shell())
        return log_files(sub.job_dir, sub.job_id)

    def payload_out(self, ref: RunRef) -> Path:
        """The payload's output folder on this machine (over SSH: its ``effective_config.json`` fetched first,
        when the job wrote one)."""
        from launchers.track import fetch_files

        sub = self._subs.get(ref.task)
        if sub is None or not sub.job_dir:
            return self.sweep_dir / "missing"
        out = Path(sub.job_dir) / "out"
        if self.remote and sub.host_dir:
            with contextlib.suppress(SchedulerError):  # no out/ on the cluster: the job wrote nothing
                fetch_files(f"{sub.host_dir}/out", out, self._shell(), lambda n: n == "effective_config.json")
        return out

    def script(self, ref: RunRef) -> str | None:
        sub = self._subs.get(ref.task)
        return sub.script if sub is not None else None

    def wait(self, timeout_s: float) -> bool:
        """Sleep ``timeout_s`` s: Slurm jobs are not this process's children; squeue/sacct tell their end."""
        time.sleep(max(0.0, timeout_s))
        return False

    def finish(self) -> None:
        """Nothing waits for more launches on Slurm; nothing is polled until the next launch either."""
        self.disconnect()

    def disconnect(self) -> None:
        """Close the SSH connection of squeue/sacct/scancel (it opens again on the next use)."""
        close_shell(self._sh)

    def close(self) -> None:
        """The sweep is over: close the SSH connection. Each submission closed its own (:mod:`launchers.submit`)."""
        self.disconnect()


def pack_label(stage: int, refs: list[RunRef]) -> str:
    """The batch label of one packed allocation: ``s<stage>.b<block>.<6 hex>``; the conductor packs one block per
    allocation (the runs of a block share its nodes, so their comparison is paired), and the hash of the attempts' task names keeps two allocations of a stage apart (an
    attempt is never submitted twice), so their ``pack-<label>`` folders never collide."""
    import hashlib

    digest = hashlib.sha256(",".join(sorted(r.task for r in refs)).encode()).hexdigest()[:6]
    return f"s{stage}.b{min(r.repeat for r in refs)}.{digest}"
