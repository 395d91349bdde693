"""Turn a sweep folder, or loose log files, into a :class:`Summary` (CONTRACTS.md §3, §7).

Sweep folder: ``manifest.json`` (read-only), ``variants/<v>/variant.json``, and per attempt
``variants/<v>/attempt-<k>/{logs/, effective_config.json}``. For each (variant, repeat) the latest attempt counts;
every attempt gets its ``run.json`` next to its logs (atomic write).

The all-to-all time for the overlap ceiling is an optional input: ``profile.json`` (``{"a2a_ms": ...}``) in the
attempt folder, or ``profile.a2a_ms`` in effective_config.json, for the baseline's run.

Loose files: files whose names differ only in ``_<jobid>_<restart>.out`` form one run named after the stem; the
baseline is ``baseline=`` or the run whose effective_config.json (next to the log) requests alltoall with overlap
and delay_wgrad off.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from analysis.files import read_json
from analysis.judge import Expectation, SchedulerInfo, classify, label_from_name
from analysis.logs import group_restart_files, parse_files, restart_key
from analysis.measure import (
    Design,
    RunConfig,
    RunResult,
    Summary,
    backend_rates,
    compare_all,
    compute_stats,
    drift,
    fixed_cost,
    load_or_summarize,
)
from analysis.options import Options, UsageError
from contracts.atomic import write_json
from contracts.errors import ManifestError
from contracts.manifest import Manifest
from contracts.records import DEFAULT_ALLOW_ADJUST
from contracts.slurm import TIMEOUT_KEYS as SLURM_TIMEOUT_KEYS
from contracts.slurm import parse_time_limit
from contracts.sweepdir import SweepDir

NOT_LOGS = frozenset({".json", ".png", ".jpg", ".svg", ".html", ".md", ".yaml", ".yml", ".py", ".sh", ".db",
                      ".sqlite", ".pt", ".pdf", ".csv"})


def _int(value: Any) -> int | None:
    try:
        return int(str(value)) if value is not None and str(value).strip() not in ("", "None", "null") else None
    except ValueError:
        return None


def _seconds(value: Any) -> float | None:
    """A recorded duration (s) as a float; None for anything else (absent, null, text, a bool)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def log_files(folder: Path) -> list[Path]:
    """Non-hidden files under ``folder`` that may be logs, ordered by restart then name. Dangling or looping
    symlinks are kept, so that the run reports them as unreadable instead of silently missing them."""
    found = [p for p in folder.rglob("*") if (p.is_symlink() or p.is_file()) and not p.is_dir()
             and not p.name.startswith(".") and p.suffix not in NOT_LOGS]
    return sorted(found, key=lambda p: (restart_key(p)[1], str(p)))


def analyze_run(
    files: Sequence[Path],
    *,
    name: str,
    variant: str,
    attempt: int | None = None,
    repeat: int | None = None,
    expect: Expectation | None = None,
    effective: dict[str, Any] | None = None,
    variant_json: dict[str, Any] | None = None,
    scheduler: SchedulerInfo | None = None,
    group: dict[str, Any] | None = None,
    role: str | None = None,
    last_log_age_s: float | None = None,
    a2a_ms: float | None = None,
    held: tuple[float, float | None] | None = None,
    options: Options = Options(),  # noqa: B008 - a frozen dataclass, never mutated
    display_root: Path | None = None,
) -> RunResult:
    """Parse, measure and classify one attempt (files in restart order). Never raises for bad log content.

    ``held``: (launched, ended) epoch s of the attempt from the conductor (``conductor.json``), for the split of its
    GPU time (:mod:`analysis.measure.fixed_cost`)."""
    expect = expect or Expectation()
    log = parse_files(files) if files else None
    eff = (effective or {}).get("effective") or {}
    settings = (variant_json or {}).get("settings") or expect.settings or {}
    cluster = (variant_json or {}).get("cluster") or {}
    hardware = (effective or {}).get("hardware") or {}
    env = {**((variant_json or {}).get("env") or {}), **((effective or {}).get("env") or {})}
    log_cfg = log.config if log else {}
    series = log.series if log else None
    line_gbs = int(series.global_batch_size[series.global_batch_size > 0][0]) if series is not None and (
        series.global_batch_size > 0).any() else None
    config = RunConfig(
        global_batch_size=_int(eff.get("global_batch_size")) or _int(settings.get("global_batch_size")) or line_gbs
        or _int(log_cfg.get("global_batch_size")),
        seq_length=_int(eff.get("seq_length")) or _int(settings.get("seq_length")) or _int(log_cfg.get("seq_length")),
        world_size=_int(hardware.get("world_size")) or _int(cluster.get("world_size")) or _int(log_cfg.get("world_size")),
        cuda_device_max_connections=None if env.get("CUDA_DEVICE_MAX_CONNECTIONS") is None
        else str(env["CUDA_DEVICE_MAX_CONNECTIONS"]),
    )
    train_iters = (_int(eff.get("train_iters")) or expect.train_iters or (log.train_iters if log else None)
                   or _int(log_cfg.get("train_iters")))
    stats = None
    if series is not None and len(series):
        stats = compute_stats(series, warmup=options.warmup, train_iters=train_iters,
                              global_batch_size=config.global_batch_size, seq_length=config.seq_length,
                              world_size=config.world_size, restart_first_iterations=log.restart_first_iterations,
                              n_boot=options.n_boot, seed=options.seed)
    median = stats.step_time.median if stats and stats.step_time else None
    verdict = classify(log, scheduler=scheduler, expect=expect, effective=effective,
                       steady_iterations=stats.steady if stats else None, median_step_ms=median,
                       last_log_age_s=last_log_age_s, hang_min_s=options.hang_min_s)
    # numbers of an invalid variant belong to what really ran, not to its label (CASES C05): kept in details only
    keep_numbers = verdict.status in ("ok", "ok_with_warning", "failed", "incomplete")
    keep_numbers = keep_numbers and stats is not None and stats.sufficient
    details = dict(verdict.details)
    if verdict.status == "invalid_variant" and stats is not None and stats.step_time is not None:
        details["measured_not_as_labelled"] = {
            "step_time_ms": stats.step_time.median, "tflops_per_gpu": stats.tflops.median if stats.tflops else None}
    requested = expect.requested or {}
    hosts = tuple(dict.fromkeys([*(hardware.get("hostnames") or []), *verdict.hosts]))
    shown = [str(Path(f).relative_to(display_root)) if display_root and Path(f).is_relative_to(display_root)
             else str(f) for f in files]
    return RunResult(
        name=name, variant=variant, status=verdict.status, reason=verdict.reason, attempt=attempt, repeat=repeat,
        evidence=verdict.evidence, flags=verdict.flags, hint=verdict.hint, details=details,
        notes=tuple(dict.fromkeys([*verdict.notes, *(stats.notes if stats else ())])),
        iterations_total=stats.total if stats else 0, iterations_steady=stats.steady if stats else 0,
        iterations_skipped=stats.skipped if stats else 0, warmup=stats.warmup if stats else options.warmup,
        train_iters=train_iters,
        step_time=stats.step_time if keep_numbers else None, tflops=stats.tflops if keep_numbers else None,
        tokens=stats.tokens if keep_numbers else None, peak_mem_gb=log.peak_mem_gb if log else None,
        loss_first=stats.loss_first if stats else None, loss_last=stats.loss_last if stats else None,
        hosts=hosts, files=tuple(shown),
        dispatcher=requested.get("dispatcher"), overlap=requested.get("overlap"),
        delay_wgrad=requested.get("delay_wgrad"), group=dict(group or {}), role=role, mode=expect.mode,
        config=config, a2a_ms=a2a_ms or _float(((effective or {}).get("profile") or {}).get("a2a_ms")),
        series=series, steady_mask=stats.steady_mask if stats else None,
        timeline=verdict.timeline, launch=verdict.launch,
        fixed_cost=_fixed_cost(log, held, stats),
    )


def _fixed_cost(log: Any, held: tuple[float, float | None] | None, stats: Any) -> dict[str, Any] | None:
    stamps = fixed_cost.phases(m.text for m in log.markers_of("payload_phase")) if log else {}
    series = log.series if log else None
    fc = fixed_cost.split(stamps, held, series.step_ms if series is not None and len(series) else None,
                          stats.steady_mask if stats else None)
    return fc.to_json() if fc else None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _profile_a2a_ms(path: Path) -> float | None:
    """Optional user input ``profile.json`` in an attempt folder: ``{"a2a_ms": <all-to-all ms per step>}`` from a
    profile of that run (e.g. Nsight Systems); None when absent or unreadable."""
    try:
        return _float(read_json(path).get("a2a_ms"))
    except (OSError, ValueError, AttributeError):
        return None


# -- sweep folders -----------------------------------------------------------------------------------------------
def is_sweep_folder(path: Path) -> bool:
    """A folder holding manifest.json (CONTRACTS §3)."""
    return path.is_dir() and SweepDir(path).manifest.is_file()


def _sweep_info(manifest: Manifest, runs: list[RunResult] | tuple[RunResult, ...] = ()) -> dict[str, Any]:
    """summary.json ``sweep``; a gated variant's ``status`` in ``gates`` is what its runs came out as once it ran
    (``validated``, ``ok``, ...), else its plan status (``gated``, ``skipped``, ``pruned``)."""
    info = {k: getattr(manifest, k) for k in ("sweep_id", "name", "git_sha", "created", "model", "cluster")}
    info["container"] = manifest.container if isinstance(manifest.container, dict) else {}
    # what the report shows of the plan, so that a validate-only or gated sweep explains itself: the mode, the plan's warnings (each once), the stages
    # and each gated variant's decision (why a stage-3 arm ran or was skipped)
    info["mode"] = manifest.mode
    commits: dict[str, list[str]] = {}  # each attempt records the commit that submitted it (a resume may differ)
    for v in manifest.variants:
        for a in v.attempts:
            if a.get("git_sha"):
                commits.setdefault(str(a.get("git_sha")), []).append(f"{v.name} r{a.repeat} a{a.attempt}")
    info["attempt_commits"] = [{"git_sha": sha, "attempts": names} for sha, names in commits.items()]
    info["warnings"] = list(dict.fromkeys(manifest.warnings))
    info["stages"] = [s.to_json() for s in manifest.stages]
    if manifest.extra.get("conformance"):  # the stack's own unit tests (experiments/conformance.py)
        info["conformance"] = manifest.extra["conformance"]
    outcomes: dict[str, list[str]] = {}
    for r in runs:
        outcomes.setdefault(r.variant, []).append(str(r.status))
    info["gates"] = [{"variant": v.name, "stage": v.variant.stage, "gate": v.variant.gate,
                      "status": ", ".join(dict.fromkeys(outcomes[v.name])) if outcomes.get(v.name) and v.attempts
                      else str(v.status),
                      "reason": "; ".join(r for r in v.variant.reasons if r.startswith("gate ")) or None}
                     for v in manifest.variants if v.variant.gate]
    return info


def analyze_sweep(sweep_dir: Path, warmup: int | None = None, *, options: Options | None = None,
                  write_run_json: bool = True, now: float | None = None,
                  noise_prior: Callable[[Manifest, list[str]], Any] | None = None) -> Summary:
    """Analyse a sweep folder: one RunResult per (variant, repeat) (its latest attempt), comparisons inside each
    group, per-backend failure rates. Writes ``run.json`` into every attempt folder unless ``write_run_json`` is
    False. ``noise_prior(manifest, notes)``: the nightly prior on the run-to-run noise of a ``repeats=auto``
    sweep (:func:`analysis.api.nightly_prior`; it may add a note), used when the design states none. Raises
    UsageError when ``sweep_dir`` has no readable manifest.json."""
    options = options or Options(warmup=warmup)
    sd = SweepDir(Path(sweep_dir))
    try:
        manifest = Manifest.load(sd)
    except ManifestError as exc:
        raise UsageError(str(exc)) from exc
    now = time.time() if now is None else now
    runs: list[RunResult] = []
    notes: list[str] = []
    multi = any(len({a.repeat for a in v.attempts}) > 1 for v in manifest.variants)
    signal = _asked_signal(manifest.cluster_config)
    held = fixed_cost.held_times(sd.conductor_json)
    costs: list[fixed_cost.FixedCost | None] = []
    sizes: list[int | None] = []  # each attempt's GPUs (world size), for its GPU-seconds
    for entry in manifest.variants:
        v = entry.variant
        try:
            vjson = read_json(sd.variant_json(v.name))
        except (OSError, ValueError):
            vjson = {}
        requested = {"dispatcher": v.dispatcher, "overlap": v.overlap, "delay_wgrad": v.delay_wgrad, **v.axes}
        expect = Expectation(mode=vjson.get("mode") or manifest.mode or "train", requested=requested,
                             settings=v.settings, allow_adjust=tuple(v.allow_adjust or DEFAULT_ALLOW_ADJUST),
                             train_iters=_int((vjson.get("payload") or {}).get("train_iters")))
        common = dict(variant=v.name, expect=expect, variant_json=vjson, group=v.group, role=str(v.role),
                      options=options, display_root=sd.root)
        if not entry.attempts:
            r = analyze_run([], name=v.name, scheduler=SchedulerInfo(str(v.status)), **common)
            evidence = tuple(v.reasons) if r.status == "pruned" else r.evidence
            runs.append(_replace(r, evidence=evidence))
            continue
        ordered = sorted(entry.attempts, key=lambda a: a.attempt)
        latest = {a.repeat: a for a in ordered}
        for a in ordered:
            ref = a.ref(v.name)
            # the folder the conductor recorded (older manifests numbered attempts per variant, not per repeat)
            adir = (sd.root / a.log_dir).parent if a.log_dir else sd.attempt_dir(ref)
            ldir = adir / "logs"
            files = log_files(ldir) if ldir.is_dir() else []
            try:
                effective = read_json(adir / "effective_config.json")
            except (OSError, ValueError):
                effective = None
            a2a_ms = _profile_a2a_ms(adir / "profile.json")
            breakdown = load_or_summarize(adir, write=write_run_json) if adir.is_dir() else None
            if a2a_ms is None and breakdown and (breakdown.get("comm_ms") or {}).get("alltoall"):
                a2a_ms = breakdown["comm_ms"]["alltoall"]  # measured all-to-all per step, for the overlap ceiling
            age = None
            if a.status.live and files:
                age = now - max(f.stat().st_mtime for f in files)
            name = v.name if not multi else f"{v.name}.r{a.repeat}"
            # a raw Slurm state, when the conductor recorded one, names causes the manifest status cannot
            # (PREEMPTED, NODE_FAIL, OUT_OF_MEMORY)
            # and the cluster's KillWait / SlurmdTimeout / GraceTime, when the conductor read them
            # (experiments/conductor/accounting.py::record_slurm_timeouts), for a stop line that comes late
            waits = a.get("slurm_timeouts") if isinstance(a.get("slurm_timeouts"), dict) else {}
            scheduler = SchedulerInfo(a.get("scheduler_state") or str(a.status), a.exit_code, tuple(a.flags),
                                      signal=signal, **{k: _seconds(waits.get(k)) for k in SLURM_TIMEOUT_KEYS})
            r = analyze_run(files, name=name, attempt=a.attempt, repeat=a.repeat, effective=effective,
                            scheduler=scheduler, last_log_age_s=age, a2a_ms=a2a_ms, held=held.get(ref.task),
                            **common)
            costs.append(fixed_cost.FixedCost.from_json(r.fixed_cost))
            sizes.append(r.config.world_size)
            if breakdown:
                r = _replace(r, step_breakdown=breakdown)
            hours = gpu_hours_of(manifest, v.name, a)
            if hours is not None:
                r = _replace(r, gpu_hours=hours)
            if write_run_json and adir.is_dir():
                write_json(adir / "run.json", r.to_run_json(), strict=True)
            if latest.get(a.repeat) is a:
                runs.append(r)
            else:
                notes.append(f"{v.name}{f'.r{a.repeat}' if multi else ''} attempt-{a.attempt} superseded by a later attempt ({r.status}"
                             + (f": {r.reason})" if r.reason else ")"))
    design_doc = manifest.design or None
    design = Design.from_manifest(design_doc, options.practical_threshold)
    if design.adaptive and design.prior is None and noise_prior is not None:
        design = _replace(design, prior=noise_prior(manifest, notes))
        if design.prior is not None and design_doc is not None:
            design_doc = {**design_doc, "noise_prior": design.prior.to_json()}
    comparisons = compare_all(runs, tolerance=options.tolerance, n_boot=options.n_boot, seed=options.seed,
                              design=design)
    if not any(r.role == "baseline" for r in runs):
        notes.append("no baseline variant in the manifest: speedups not computed")
    if design_doc is not None:
        design_doc = {**design_doc, "blocks": manifest.blocks}
    from analysis.measure import bound_report

    bound = bound_report(manifest.extra.get("bound"), runs, comparisons)
    gpu_time = fixed_cost.total(costs)
    gpu_json = gpu_time.to_json() if gpu_time else None
    cost = fixed_cost.verdict_cost(((c.held_s if c else None, g) for c, g in zip(costs, sizes, strict=True)),
                                   [c.verdict for c in comparisons])
    if gpu_json is not None and cost is not None:
        gpu_json["verdicts"] = cost
    return Summary(_sweep_info(manifest, runs), tuple(runs), comparisons, backend_rates(runs), tuple(notes),
                   tuple(drift(runs)), design_doc, gpu_json, bound)


def gpu_hours_of(manifest: Manifest, variant: str, attempt: Any) -> dict[str, Any] | None:
    """``runs[].gpu_hours`` of one attempt: ``estimate`` (GPU-hours, the plan's ``design.run_gpu_hours`` of the
    variant: nodes x GPUs per node x time limit), ``accounted`` (GPU-hours from ``sacct``, elapsed x allocated
    GPUs, written into the attempt by the conductor after the job ended; None locally or when sacct had no record)
    and ``note`` (which job, how long, how many GPUs). None when neither is known."""
    per = (manifest.design or {}).get("run_gpu_hours") or {}
    est, acc = per.get(variant) if isinstance(per, dict) else None, attempt.get("gpu_hours_accounted")
    est = float(est) if isinstance(est, int | float) and not isinstance(est, bool) else None
    acc = float(acc) if isinstance(acc, int | float) and not isinstance(acc, bool) else None
    if est is None and acc is None:
        return None
    return {"estimate": est, "accounted": acc, "note": attempt.get("gpu_hours_note") if acc is not None else None}


def _asked_signal(cluster: dict[str, Any]) -> str | None:
    """The ``sbatch --signal`` spec the Slurm launcher gave the sweep's jobs: ``TERM@60`` for a Slurm executor
    with a time limit of 10 min or more (the rule of launchers/slurm.py ``signal_spec``), else None."""
    if cluster.get("executor") != "slurm":
        return None
    try:
        limit = parse_time_limit(str(cluster.get("time_limit", "00:30:00")))
    except ValueError:  # (contracts.errors.ConfigError is one)
        return None
    return "TERM@60" if limit >= 600 else None


def _replace(r: RunResult, **changes: Any) -> RunResult:
    from dataclasses import replace

    return replace(r, **changes)


# -- loose files -------------------------------------------------------------------------------------------------
def _effective_for(files: list[Path], runs_in_dir: int) -> dict[str, Any] | None:
    folder = files[0].parent
    stem = restart_key(files[0])[0]
    candidates = [folder / f"{stem}.effective_config.json", folder / f"{stem}_effective_config.json"]
    if runs_in_dir == 1:
        candidates.append(folder / "effective_config.json")
        if folder.name == "logs":
            candidates.append(folder.parent / "effective_config.json")
    for c in candidates:
        if c.is_file():
            try:
                return read_json(c)
            except (OSError, ValueError):
                return None
    return None


def analyze_files(paths: Sequence[Path], *, baseline: str | None = None, warmup: int | None = None,
                  options: Options | None = None) -> Summary:
    """Analyse loose log files or folders of logs (CONTRACTS §7). Raises UsageError for a missing path, a path
    without log files, or a ``baseline`` that names no run."""
    options = options or Options(warmup=warmup)
    files: list[Path] = []
    for p in map(Path, paths):
        if not os.path.lexists(p):
            raise UsageError(f"no such file or folder: {p}")
        if p.is_dir():
            found = log_files(p)
            if not found:
                raise UsageError(f"no log files under {p} (looked for files not ending in {', '.join(sorted(NOT_LOGS))})")
            files.extend(found)
        else:
            files.append(p)
    groups: dict[tuple[Path, str], list[Path]] = {}
    for folder in dict.fromkeys(f.parent for f in files):
        for stem, members in group_restart_files([f for f in files if f.parent == folder]).items():
            groups[(folder, stem)] = members
    stems = [stem for _, stem in groups]
    per_dir = {folder: sum(1 for f, _ in groups if f == folder) for folder, _ in groups}
    runs: list[RunResult] = []
    for (folder, stem), members in groups.items():
        name = stem if stems.count(stem) == 1 else f"{folder.name}/{stem}"
        effective = _effective_for(members, per_dir[folder])
        requested = (effective or {}).get("requested") or label_from_name(stem) or {}
        variant = (effective or {}).get("variant") or name
        is_base = (requested.get("dispatcher") == "alltoall" and requested.get("overlap") is False
                   and requested.get("delay_wgrad") is False)
        expect = Expectation(mode=(effective or {}).get("mode") or "train", requested=requested or None,
                             train_iters=_int(((effective or {}).get("effective") or {}).get("train_iters")))
        group = {k: v for k, v in requested.items() if "." in k}
        runs.append(analyze_run(members, name=name, variant=variant, attempt=(effective or {}).get("attempt"),
                                expect=expect, effective=effective, group=group,
                                role="baseline" if is_base and effective else None, options=options))
    notes: list[str] = []
    if baseline is not None:
        names = {r.name: r.variant for r in runs} | {r.variant: r.variant for r in runs}
        if baseline not in names:
            raise UsageError(f"--baseline {baseline!r} names no run; runs are: {', '.join(sorted({r.name for r in runs}))}")
        base_variant = names[baseline]
        runs = [_replace(r, role="baseline" if r.variant == base_variant else "variant") for r in runs]
        comparisons = compare_all(runs, baseline=base_variant, tolerance=options.tolerance, n_boot=options.n_boot,
                                  seed=options.seed)
    elif any(r.role == "baseline" for r in runs):
        comparisons = compare_all(runs, tolerance=options.tolerance, n_boot=options.n_boot, seed=options.seed)
    else:
        comparisons = ()
        notes.append("no baseline (give --baseline NAME or an effective_config.json next to the log): "
                     "speedups not computed")
    return Summary(None, tuple(runs), comparisons, backend_rates(runs), tuple(notes))
