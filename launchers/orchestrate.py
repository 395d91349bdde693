"""``action=run|status|collect|cancel``: submit, track, collect, analyse, open gates, resume (CONTRACTS §1-§5).

Flow of ``run``: write the plan -> (``preflight=container``: one validate job first) -> submit the open stages ->
track with live progress -> collect logs and effective configs into ``variants/<v>/attempt-<k>/`` -> analyse ->
open gates and submit the next stage -> final report. ``detach=true`` (Slurm) returns once the jobs are queued;
``action=collect`` finishes such a sweep later, from any shell.

The final state of a run combines the scheduler's state, the exit code and the log's own evidence: the scheduler
state only fills the manifest's scheduling status; the run outcome comes from the analysis (CASES C08).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from contracts.statuses import GOOD_OUTCOMES
from experiments import manifest
from experiments.config import ConfigError
from launchers.attempts import RunRef, latest_attempts, new_attempts, set_attempt, set_variant_status
from launchers.backend import Backend, JobState
from launchers.progress import Display, RunView, median_step_ms, read_tail, update_from_log

EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_INFRA, EXIT_INTERRUPTED = 0, 2, 3, 5, 130
REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------- entry points
def run_new(plan, argv: list[str]) -> int:
    """``action=run`` for a new sweep: write the plan, then submit, track, collect and analyse."""
    from experiments.plan import write_plan
    from experiments.report_plan import print_plan

    sweep_dir = write_plan(plan, argv)
    print_plan(plan, sweep_dir)
    return _drive(sweep_dir, plan.settings, resume=False, cluster=plan.cfg["cluster"])


def run_action(action: str, argv: list[str]) -> int:
    """``status``, ``collect``, ``cancel`` for ``sweep_id=``, and ``run`` with an existing id (resume)."""
    from experiments.compose import compose_overrides
    from experiments.plan import SweepSettings

    cfg = compose_overrides(argv).base
    settings = SweepSettings.from_cfg(cfg)
    sweep_dir = find_sweep(settings)
    if action == "status":
        return show_status(sweep_dir)
    if action == "cancel":
        return cancel_sweep(sweep_dir)
    # only history keys given on this command line override what the sweep was planned with
    given = {a.split("=", 1)[0].lstrip("+").split(".", 1)[1] for a in argv if a.lstrip("+").startswith("history.")}
    history = {k: v for k, v in (cfg.get("history") or {}).items() if k in given}
    return _drive(sweep_dir, settings, resume=True, collect_only=action == "collect", history=history)


def find_sweep(settings) -> Path:
    """The folder of ``sweep_id=`` (``output_dir`` or ``results/*/<id>``). Raises ConfigError if unknown."""
    if settings.output_dir and (Path(settings.output_dir) / "manifest.json").exists():
        return Path(settings.output_dir)
    if not settings.sweep_id:
        raise ConfigError("this action needs sweep_id=<YYYYmmdd-HHMMSSZ-xxxxxx> (or sweep_id=latest, or output_dir= "
                          "of a sweep)")
    if settings.sweep_id == "latest":
        found = sorted(Path(settings.results_root).glob("*/*/manifest.json"), key=lambda p: p.parent.name)
        if not found:
            raise ConfigError(f"sweep_id=latest: no sweep under {settings.results_root}/*/")
        return found[-1].parent
    hits = sorted(Path(settings.results_root).glob(f"*/{settings.sweep_id}/manifest.json"))
    if not hits:
        known = sorted(p.parent.name for p in Path(settings.results_root).glob("*/*/manifest.json"))[-10:]
        raise ConfigError(f"sweep_id={settings.sweep_id} not found under {settings.results_root}/*/. "
                          f"Known sweeps: {', '.join(known) or 'none'}")
    return hits[0].parent


# ----------------------------------------------------------------------------------------------- backends
def make_backend(sweep_dir: Path, m: dict[str, Any], cluster: dict[str, Any] | None = None,
                 strict: bool = True) -> Backend:
    """The backend for the sweep's cluster profile (local or Slurm).

    ``cluster``: the unmasked cluster config of this process' plan; without it (resume, collect, cancel) the
    manifest's is used and every secret it records as ``***`` is taken from this shell's environment.
    """
    from launchers.backend import LocalBackend, SlurmBackend

    cfg = m["config"]
    cluster = job_cluster(cluster or cfg["cluster"], strict)
    hold = float((cfg.get("payload") or {}).get("hold_s") or 0)
    if cluster["executor"] == "local":
        gpus = _first_variant_json(sweep_dir, m)["cluster"]["gpus_per_node"] if m["mode"] == "train" else 0
        return LocalBackend(sweep_dir, cluster, int(gpus or 0), m["name"], hold)
    return SlurmBackend(sweep_dir, {**m, "config": {**cfg, "cluster": cluster}}, REPO, hold)


def job_cluster(cluster: dict[str, Any], strict: bool = True) -> dict[str, Any]:
    """The cluster config jobs get: secret env values masked as ``***`` in the manifest come from this process'
    environment (CONTRACTS §10: they are never written down, so a resume needs them exported).

    Raises:
        ConfigError: a masked secret is not in the environment (names it and how to fix it).
    """
    env = dict(cluster.get("env_vars") or {})
    for k, v in env.items():
        if v == "***":
            if k not in os.environ:
                if not strict:
                    continue
                raise ConfigError(f"cluster.env_vars.{k} is a secret: the sweep recorded it as *** and it is not in "
                                  f"this shell's environment. Export {k} and run the command again")
            env[k] = os.environ[k]
    return {**cluster, "env_vars": env}


def _first_variant_json(sweep_dir: Path, m: dict[str, Any]) -> dict[str, Any]:
    for v in m["variants"]:
        p = sweep_dir / "variants" / v["name"] / "variant.json"
        if p.exists():
            return json.loads(p.read_text())
    return {"cluster": {"gpus_per_node": 0}}


# ----------------------------------------------------------------------------------------------- the driver
def _drive(sweep_dir: Path, settings, resume: bool, collect_only: bool = False,
           history: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> int:
    """Submit/track/collect/analyse a planned sweep folder. ``history``: command-line history settings that
    override the manifest's (``history.url=``, ``history.enabled=true``)."""
    m = manifest.load(sweep_dir)
    try:
        backend = make_backend(sweep_dir, m, cluster)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - infrastructure (sbatch missing, tunnel down)
        print(f"error: cannot set up the executor: {e}", file=sys.stderr)
        return EXIT_INFRA
    views: dict[str, RunView] = {}
    display = Display(f"sweep {m['sweep_id']} ({m['name']}, {m['cluster']}, mode={m['mode']})")
    detach = bool(settings.detach)
    if detach and backend.max_concurrent is not None:
        print("note: the local executor cannot detach (CONTRACTS §1); running attached", file=sys.stderr)
        detach = False
    try:
        if not collect_only:
            if m.get("preflight") == "container" and not resume:
                _container_preflight(sweep_dir, backend, display)
            pending = _runs_to_submit(sweep_dir)
            _track(sweep_dir, backend, pending, views, display, settings, detach)
            if detach:
                display.close(list(views.values()))
                print(f"detached: {len(pending)} run(s) queued. Finish with: python -m experiments.sweep "
                      f"action=collect sweep_id={m['sweep_id']}")
                return EXIT_OK
        else:
            _reattach(sweep_dir, backend, views, display, settings)
        # gates: analyse what ran, open the next stage, run it (a detached collect queues it and returns)
        for _ in range(5):
            _collect_all(sweep_dir, backend, views)
            opened = _open_gates(sweep_dir)
            if not opened:
                break
            _track(sweep_dir, backend, _runs_to_submit(sweep_dir), views, display, settings, detach)
            if detach:
                display.close(list(views.values()))
                print(f"gate opened: next stage queued. Finish with: python -m experiments.sweep action=collect "
                      f"sweep_id={m['sweep_id']}")
                return EXIT_OK
        _collect_all(sweep_dir, backend, views)
    except KeyboardInterrupt:
        display.close(list(views.values()))
        _interrupt(sweep_dir, backend, views)
        return EXIT_INTERRUPTED
    except SubmitError as e:
        display.close(list(views.values()))
        print(f"error: the scheduler refused the submission: {e}", file=sys.stderr)
        return EXIT_INFRA
    display.close(list(views.values()))
    rc = analyse(sweep_dir)
    hist = {**(m["config"].get("history") or {}), **(history or {})}
    if hist.get("enabled"):
        rc = combine_exit_codes(rc, _record_history(sweep_dir, m, hist))
    return rc


def combine_exit_codes(*codes: int) -> int:
    """One exit code for several outcomes (CONTRACTS §5): 3 (failed runs) > 5 > 4 > 2 > 0."""
    for c in (3, 5, 4, 2, 1):
        if c in codes:
            return c
    return 0


def _runs_to_submit(sweep_dir: Path) -> list[tuple[str, int]]:
    """Runs of open stages whose latest attempt is missing or did not succeed (what a resume resubmits)."""
    m = manifest.load(sweep_dir)
    latest = latest_attempts(m)
    status = {v["name"]: v["status"] for v in m["variants"]}
    outcome = _outcomes(sweep_dir)
    todo = []
    for r in m["runs"]:
        key = (r["variant"], r["repeat"])
        if status.get(r["variant"]) != "planned":
            continue
        a = latest.get(key)
        if a is None or a["status"] == "planned":
            todo.append(key)
        elif a["status"] in ("failed", "cancelled", "timeout", "lost") or (
                a["status"] == "succeeded" and outcome.get((key, a["attempt"]), "ok") not in GOOD_OUTCOMES):
            todo.append(key)
    return todo


def _outcomes(sweep_dir: Path) -> dict[tuple[tuple[str, int], int], str]:
    """Run outcomes from the analysis' run.json files: ((variant, repeat), attempt) -> status."""
    out = {}
    for p in Path(sweep_dir).glob("variants/*/attempt-*/run.json"):
        try:
            d = json.loads(p.read_text())
            out[((d["variant"], int(d.get("repeat") or 0)), int(d["attempt"]))] = d["status"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def _track(sweep_dir: Path, backend: Backend, runs: list[tuple[str, int]], views: dict[str, RunView],
           display: Display, settings, detach: bool = False) -> None:
    """Submit ``runs`` (respecting the backend's concurrency) and poll until every one is final.

    ``detach``: return as soon as everything is queued (Slurm only; the jobs go on without this process).
    """
    if not runs:
        return
    m = manifest.load(sweep_dir)
    stage_of = {v["name"]: v["stage"] for v in m["variants"]}
    refs = new_attempts(sweep_dir, runs)
    queue = list(refs)
    active: list[RunRef] = []
    limit = backend.max_concurrent or len(refs)
    time_limit = _time_limit_s(m)
    started: dict[str, float] = {}
    for r in refs:
        views[r.task] = RunView(r.task, r.variant, r.attempt, r.repeat)
    while queue or active:
        if queue and len(active) < limit:
            take = queue[: limit - len(active)]
            del queue[: len(take)]
            for stage in sorted({stage_of[r.variant] for r in take}):
                batch = [r for r in take if stage_of[r.variant] == stage]
                try:
                    launched = backend.launch(batch, m["mode"], stage)
                except ConfigError:
                    raise
                except Exception as e:  # a refused submission: nothing of it is left queued (launchers.submit)
                    for r in batch:
                        set_attempt(sweep_dir, r, status="failed", add_flags=["submit_failed"], note=str(e)[:500])
                        views[r.task].state, views[r.task].note = "failed", f"submit: {e}"[:100]
                    if not isinstance(backend.max_concurrent, int):
                        raise SubmitError(str(e)) from e
                    continue
                for r in batch:
                    st = launched[r.task]
                    set_attempt(sweep_dir, r, status="submitted", job_id=st.job_id, submitted=_now(),
                                job_dir=st.detail or None, **dict(st.record))
                    _write_script(sweep_dir, r, backend.script(r))
                    views[r.task].state, views[r.task].job_id = "submitted", st.job_id
                    started[r.task] = time.monotonic()
                    active.append(r)
        if detach and not queue:
            display.update(list(views.values()))
            return
        polled = backend.poll(active) if active else {}
        for ref in list(active):
            st = polled[ref.task]
            view = views[ref.task]
            update_from_log(view, read_tail(backend.log_files(ref)))
            if st.job_id:
                view.job_id = st.job_id
            if st.status != view.state and st.status in ("running", "submitted"):
                set_attempt(sweep_dir, ref, status=st.status)
            if view.state not in ("timeout", "cancelled"):
                view.state = st.status
            _check_hang_and_limit(sweep_dir, backend, ref, view, settings, started, time_limit)
            if st.final or view.state in ("timeout", "cancelled"):
                final = view.state if view.state in ("timeout", "cancelled") and not st.final else st.status
                if view.state == "timeout":
                    final = "timeout"
                set_attempt(sweep_dir, ref, status=final, exit_code=st.exit_code)
                view.state = final
                if st.detail and final in ("lost", "failed"):
                    view.note = (view.note + " " + st.detail).strip()[:100]
                _collect(sweep_dir, backend, ref)
                active.remove(ref)
        display.update(list(views.values()))
        if queue or active:
            time.sleep(settings.poll_s)


class SubmitError(RuntimeError):
    """The scheduler refused a submission (exit code 5); nothing of that batch is left queued."""


def _write_script(sweep_dir: Path, ref: RunRef, text: str | None) -> None:
    """``job.sh`` as submitted: in the attempt folder, and as the variant's latest (CONTRACTS §3)."""
    if not text:
        return
    for path in (ref.attempt_dir(sweep_dir) / "job.sh", Path(sweep_dir) / "variants" / ref.variant / "job.sh"):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(".job.sh.tmp")
        tmp.write_text(text)
        tmp.replace(path)


def _check_hang_and_limit(sweep_dir, backend, ref, view, settings, started, time_limit) -> None:
    """Suspected hang (CASES C09, rule in analysis.classify.is_suspected_hang): no new iteration for
    max(hang_min_s, 5 x median step). Flagged on the attempt; with ``hang_action=cancel`` the job is cancelled and
    the end of its log is kept by the collection. Locally the orchestrator also enforces ``cluster.time_limit``."""
    from analysis.classify import is_suspected_hang

    if view.state != "running":
        return
    age = time.monotonic() - view.last_change if view.iteration is not None else None
    if is_suspected_hang(age, median_step_ms(view), settings.hang_min_s) and "suspected hang" not in view.note:
        view.note = f"suspected hang: no new iteration for {age:.0f} s"
        set_attempt(sweep_dir, ref, add_flags=["suspected_hang"])
        if settings.hang_action == "cancel":
            backend.cancel(ref)
            view.state = "cancelled"
    if time_limit and backend.enforce_time_limit:
        if time.monotonic() - started.get(ref.task, time.monotonic()) > time_limit:
            backend.cancel(ref)
            view.state, view.note = "timeout", "local time limit reached"
            set_attempt(sweep_dir, ref, add_flags=["time_limit"])


def _time_limit_s(m: dict[str, Any]) -> int | None:
    from launchers.cluster import time_limit_s

    try:
        return time_limit_s(m["config"]["cluster"])
    except Exception:  # noqa: BLE001 - a malformed limit was rejected at plan time; nothing to enforce here
        return None


def _collect(sweep_dir: Path, backend: Backend, ref: RunRef) -> None:
    """Copy the attempt's log files and effective_config.json into ``variants/<v>/attempt-<k>/`` (never
    overwriting a file already collected) and merge the payload's adjustments into the manifest."""
    adir = ref.attempt_dir(sweep_dir)
    logs = adir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    secrets = _secret_values(sweep_dir)
    for src in backend.log_files(ref):
        dst = logs / _log_name(src, ref)
        if src.exists() and not dst.exists():
            _copy_masked(src, dst, secrets)
    eff = backend.payload_out(ref) / "effective_config.json"
    if eff.exists() and not (adir / "effective_config.json").exists():
        shutil.copyfile(eff, adir / "effective_config.json")
        try:
            adj = json.loads(eff.read_text()).get("adjustments") or []
        except ValueError:
            adj = []
        if adj:
            def change(mm: dict[str, Any]) -> None:
                v = manifest.find_variant(mm, ref.variant)
                known = {json.dumps(a, sort_keys=True) for a in v.get("adjustments", [])}
                v["adjustments"] = v.get("adjustments", []) + [a for a in adj if json.dumps(a, sort_keys=True)
                                                               not in known]
            manifest.update(sweep_dir, change)


def _secret_values(sweep_dir: Path) -> list[bytes]:
    """The secret values this process passes to jobs (CONTRACTS §10: never in a log this tool copies). Over SSH
    with ``allow_ssh_secrets=true`` they are written into the job script, whose trace is in the sbatch log."""
    from launchers.envvars import MASK, cluster_env

    values = cluster_env(manifest.load(sweep_dir)["config"]["cluster"]).secret_values()
    return [v.encode() for v in values if v != MASK]


def _copy_masked(src: Path, dst: Path, secrets: list[bytes]) -> None:
    """Copy ``src`` to ``dst`` (temp file + rename) with every secret value replaced by ``***``."""
    data = src.read_bytes()
    for value in secrets:
        data = data.replace(value, b"***")
    tmp = dst.with_name(f".{dst.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(dst)


def _log_name(src: Path, ref: RunRef) -> str:
    if src.name in ("combined.log", "stdout.log", "stderr.log"):
        return f"{ref.task}_{src.parent.name}_{src.name}"
    return src.name


def _collect_all(sweep_dir: Path, backend: Backend, views: dict[str, RunView]) -> None:
    m = manifest.load(sweep_dir)
    for v in m["variants"]:
        for a in v.get("attempts", []):
            if a["status"] in ("succeeded", "failed", "cancelled", "timeout", "lost"):
                _collect(sweep_dir, backend, RunRef(v["name"], a["repeat"], a["attempt"]))


def _reattach(sweep_dir, backend, views, display, settings) -> None:
    """``collect``: wait for the unfinished attempts of a detached sweep (Slurm), updating the manifest."""
    m = manifest.load(sweep_dir)
    live = [(v["name"], a) for v in m["variants"] for a in v.get("attempts", [])
            if a["status"] in ("submitted", "running")]
    refs = [RunRef(n, a["repeat"], a["attempt"]) for n, a in live]
    for r, (_, a) in zip(refs, live, strict=True):
        views[r.task] = RunView(r.task, r.variant, r.attempt, r.repeat, job_id=a.get("job_id"), state=a["status"])
    while refs:
        polled = backend.poll(refs)
        for ref in list(refs):
            st: JobState = polled[ref.task]
            view = views[ref.task]
            update_from_log(view, read_tail(backend.log_files(ref)))
            view.state = st.status
            if st.final:
                set_attempt(sweep_dir, ref, status=st.status, exit_code=st.exit_code)
                _collect(sweep_dir, backend, ref)
                refs.remove(ref)
        display.update(list(views.values()))
        if refs:
            time.sleep(settings.poll_s)


def _interrupt(sweep_dir: Path, backend: Backend, views: dict[str, RunView]) -> None:
    """Ctrl-C (CONTRACTS §5): locally cancel the running runs and mark them cancelled; on Slurm detach."""
    m = manifest.load(sweep_dir)
    local = m["config"]["cluster"]["executor"] == "local"
    for v in m["variants"]:
        for a in v.get("attempts", []):
            if a["status"] in ("submitted", "running", "planned"):
                ref = RunRef(v["name"], a["repeat"], a["attempt"])
                if local:
                    backend.cancel(ref)
                    set_attempt(sweep_dir, ref, status="cancelled", add_flags=["interrupted"])
                    _collect(sweep_dir, backend, ref)
    where = "cancelled the local runs" if local else \
        f"detached; the jobs go on. Finish later with: python -m experiments.sweep action=collect sweep_id={m['sweep_id']}"
    print(f"interrupted: {where}", file=sys.stderr)


def _container_preflight(sweep_dir: Path, backend: Backend, display: Display) -> None:
    """``preflight=container``: one job runs the payload's validate mode for every kept variant, before any
    training job. A variant that fails is marked pruned with the library's message and never trained."""
    from launchers.spec import JobCommand

    m = manifest.load(sweep_dir)
    names = [v["name"] for v in m["variants"] if v["status"] in ("planned", "gated")]
    if not names:
        return
    ref = RunRef("preflight", 0, 1)
    out = (sweep_dir / "preflight").resolve()
    argv = (sys.executable, "-m", "experiments.payload.validate_all",
            *[str((sweep_dir / "variants" / n / "variant.json").resolve()) for n in names], "--out", str(out))
    view = RunView(ref.task, "container preflight", 1, 0, state="submitted")
    st = backend.submit_item(ref.task, JobCommand(name="preflight", argv=argv), "preflight")
    view.job_id = st.job_id
    while not st.final:
        st = backend.poll([ref])[ref.task]
        view.state = st.status
        display.update([view])
        if not st.final:
            time.sleep(1.0)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for src in backend.log_files(ref):
        if src.exists():
            shutil.copyfile(src, logs / _log_name(src, ref))
    pruned = []
    for n in names:
        eff = out / n / "effective_config.json"
        try:
            checks = json.loads(eff.read_text())["checks"]
        except (OSError, ValueError, KeyError):
            checks = {"verdict": "fail", "messages": [f"no effective_config.json from the preflight job ({eff})"]}
        if checks.get("verdict") != "pass":
            msg = "; ".join(checks.get("messages") or ["validate mode failed"])
            set_variant_status(sweep_dir, [n], "pruned", f"[container_preflight] {msg}")
            pruned.append(n)
    if pruned:
        print(f"container preflight pruned: {', '.join(pruned)}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------- gates
def _open_gates(sweep_dir: Path) -> bool:
    """Open gated variants whose gate passed (-> planned), close the rest (-> skipped). True if any opened.

    Gate ``overlap_passed`` (CONTRACTS §2): the same dispatcher's overlap variant (overlap on, delay_wgrad off,
    same group) has every latest run ok/ok_with_warning/validated, its comparison verdict is not ``slower`` and
    its loss parity is not failed. In validate mode there are no timings, so ``validated`` suffices.
    """
    m = manifest.load(sweep_dir)
    gated = [v for v in m["variants"] if v["status"] == "gated"]
    if not gated:
        return False
    summary = _summary(sweep_dir)
    runs = summary.get("runs", []) if summary else []
    comps = {c["variant"]: c for c in (summary.get("comparisons", []) if summary else [])}
    opened, closed = [], []
    for g in gated:
        peer = next((v for v in m["variants"] if v["dispatcher"] == g["dispatcher"] and v["overlap"]
                     and not v["delay_wgrad"] and v.get("group") == g.get("group")), None)
        reason = _gate_reason(peer, runs, comps)
        (closed if reason else opened).append((g["name"], reason))
    if opened:
        set_variant_status(sweep_dir, [n for n, _ in opened], "planned")
    for n, reason in closed:
        set_variant_status(sweep_dir, [n], "skipped", f"gate overlap_passed closed: {reason}")

    def mark(mm: dict[str, Any]) -> None:
        for s in mm.get("stages", []):
            if s.get("gate"):
                s["status"] = "open" if opened else "closed"
    manifest.update(sweep_dir, mark)
    return bool(opened)


def _gate_reason(peer, runs, comps) -> str | None:
    if peer is None:
        return "the sweep has no overlap variant of this dispatcher"
    if peer["status"] == "pruned":
        return f"{peer['name']} was pruned"
    mine = [r for r in runs if r.get("variant") == peer["name"]]
    if not mine:
        return f"{peer['name']} has no analysed run"
    bad = [r for r in mine if r.get("status") not in GOOD_OUTCOMES]
    if bad:
        return f"{peer['name']} run status {bad[0].get('status')} ({bad[0].get('reason')})"
    c = comps.get(peer["name"])
    if c and c.get("verdict") == "slower":
        return f"{peer['name']} is slower than the baseline"
    if c and (c.get("loss_parity") or {}).get("ok") is False:
        return f"{peer['name']} loss diverged from the baseline"
    return None


def _summary(sweep_dir: Path) -> dict[str, Any] | None:
    analyse(sweep_dir, quiet=True)
    p = sweep_dir / "report" / "summary.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------- analysis etc.
def analyse(sweep_dir: Path, quiet: bool = False) -> int:
    """Run the analysis stage on the sweep folder; returns its exit code (CONTRACTS §5)."""
    from analysis.report import main as report_main

    args = [str(sweep_dir)] + (["--quiet"] if quiet else [])
    try:
        return int(report_main(args) or 0)
    except SystemExit as e:  # argparse-style exits
        return int(e.code or 0)


def _record_history(sweep_dir: Path, m: dict[str, Any], hist: dict[str, Any]) -> int:
    """Record the analysed sweep in the history database, judge tonight against the rolling baseline and write
    ``report/history.json`` + ``report/history.html``. Returns 0, 4 (regression) or 2/5 (database problem)."""
    from experiments.manifest import write_json_atomic

    from analysis.history import (
        HistoryConfig,
        HistoryError,
        exit_code_for,
        judge_sweep,
        record_summary,
        write_trend_page,
    )

    url = hist.get("url")
    try:
        res = record_summary(url, sweep_dir)
        for w in res.warnings:
            print(f"history: {w}", file=sys.stderr)
        report = judge_sweep(url, res.sweep_id, config=HistoryConfig.from_mapping(hist))
        write_json_atomic(sweep_dir / "report" / "history.json", report.to_json())
        write_trend_page(url, sweep_dir / "report" / "history.html")
        print(f"history: recorded in {url}; verdicts in {sweep_dir / 'report' / 'history.json'}")
        return report.exit_code
    except HistoryError as e:
        print(f"history: {e}", file=sys.stderr)
        return exit_code_for(e)


def show_status(sweep_dir: Path) -> int:
    """``action=status``: the run table of any sweep, from any shell (scheduler state refreshed for Slurm)."""
    m = manifest.load(sweep_dir)
    views = []
    for v in m["variants"]:
        if not v.get("attempts"):
            views.append(RunView(v["name"], v["name"], 0, 0, state=v["status"],
                                 note="; ".join(v.get("reasons", []))[:100]))
        for a in v.get("attempts", []):
            ref = RunRef(v["name"], a["repeat"], a["attempt"])
            view = RunView(ref.task, v["name"], a["attempt"], a["repeat"], job_id=a.get("job_id"), state=a["status"],
                           note=",".join(a.get("flags", [])))
            logs = sorted((ref.attempt_dir(sweep_dir) / "logs").glob("*"))
            update_from_log(view, read_tail(logs))
            views.append(view)
    d = Display(f"sweep {m['sweep_id']} ({m['name']}, {m['cluster']}, mode={m['mode']})")
    d.close(views)
    return EXIT_OK


def cancel_sweep(sweep_dir: Path) -> int:
    """``action=cancel``: cancel every unfinished job of the sweep and mark it cancelled."""
    m = manifest.load(sweep_dir)
    backend = make_backend(sweep_dir, m, strict=False)  # cancelling needs no secret values
    n = 0
    for v in m["variants"]:
        for a in v.get("attempts", []):
            if a["status"] in ("planned", "submitted", "running"):
                ref = RunRef(v["name"], a["repeat"], a["attempt"])
                backend.cancel(ref)
                set_attempt(sweep_dir, ref, status="cancelled", add_flags=["cancelled_by_user"])
                n += 1
    print(f"cancelled {n} unfinished run(s) of sweep {m['sweep_id']}")
    return EXIT_OK


def _now() -> str:
    from launchers.attempts import now_iso

    return now_iso()
