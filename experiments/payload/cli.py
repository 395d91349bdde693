"""The payload's command line (``python -m experiments.train``); see :mod:`experiments.train` for the exit codes."""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from experiments.payload import caches, errors, phases, runtime_info
from experiments.payload.effective import read_effective
from experiments.payload.errors import PayloadError
from experiments.payload.outcome import Outcome, amend_with_error, assemble, loud, write_effective
from experiments.payload.runtime_info import say
from experiments.payload.spec import MODES, VariantSpec, load_variant

HEARTBEAT_S = 5.0  # seconds between hold heartbeat lines
# Errors raised after effective_config.json was written with the real effective values: keep that document.
_WROTE_OWN_DOCUMENT = (errors.CHECK_FAILED, errors.MISMATCH, errors.ENV_MISMATCH, errors.TRAINING_FAILED)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.train",
                                description="Run one sweep variant: train it, or validate its config.")
    p.add_argument("variant_json", help="path of the variant.json the planner wrote (schema_version 1)")
    p.add_argument("out_dir", help="folder for effective_config.json; nothing is written elsewhere")
    p.add_argument("--mode", choices=MODES, help="override the variant's mode")
    p.add_argument("--attempt", type=int, help="attempt number k (recorded in effective_config.json)")
    p.add_argument("--hold-s", type=float, dest="hold_s",
                   help="hold this many seconds before exiting (tests of cancel / time limits); default payload.hold_s")
    p.add_argument("--hold-at", choices=("start", "end"), dest="hold_at",
                   help="hold before the work (a job stopped mid-run) or after it (default payload.hold_at, end)")
    return p.parse_args(argv)


def hold(seconds: float, step_s: float = 0.5, beat_s: float = HEARTBEAT_S) -> None:
    """Sleep ``seconds`` in small steps, printing ``[payload] hold: <done>/<total> s`` every ``beat_s`` seconds."""
    start = time.monotonic()
    say(f"[payload] hold: 0/{seconds:g} s")
    next_beat = beat_s
    while (done := time.monotonic() - start) < seconds:
        time.sleep(min(step_s, seconds - done))
        if time.monotonic() - start >= next_beat:
            say(f"[payload] hold: {min(next_beat, seconds):g}/{seconds:g} s")
            next_beat += beat_s
    say(f"[payload] hold: done after {seconds:g} s")


def error_document(spec: VariantSpec, err: PayloadError) -> dict[str, Any]:
    """An effective_config.json for a run that stopped on a diagnosed error (effective = requested)."""
    out = Outcome(effective=read_effective(SimpleNamespace(**spec.settings), None, {"train_iters": spec.train_iters}),
                  failures=[f"payload: {err.kind} ({err.code}): {err}"],
                  warnings=["effective = requested: the config was never built"],
                  not_run=["every library check: the run stopped before the config was built"])
    return assemble(spec, out, hostnames=[runtime_info.local_hostname()], target=spec.mode == "validate",
                    written_at="error").doc


def run_validate(spec: VariantSpec, out_dir: Path, api: Any = None) -> int:
    """Validate one variant, write its document (rank 0), print one line; returns 0 (pass) or 1 (fail)."""
    from experiments.payload import world as launched
    from experiments.payload.validate import validate

    w = launched.join()  # the real world size: a gloo group over every rank when torchrun started several
    if w.joined:
        say(f"[payload] world: {w.world_size} rank(s) over {len(w.ranks_per_node)} node(s) {w.ranks_per_node} "
            f"({w.backend}; nodelist {w.nodelist})")
    try:
        v = validate(spec, api)
        world_problems = list(w.problems)
        if w.joined and spec.world_size and w.world_size != spec.world_size:
            world_problems.append(f"the job launched {w.world_size} ranks but the variant's world size is "
                                  f"{spec.world_size}")
        v.doc["hardware"].update(w.hardware())
        if world_problems:
            v.doc["checks"]["messages"] += [f"payload: {p}" for p in world_problems]
            v.doc["checks"]["verdict"] = "fail"
            v = dataclasses.replace(v, verdict="fail")
        if w.rank == 0:
            write_effective(out_dir, v.doc)
    finally:
        launched.leave()
    say(f"[payload] validate {spec.name}: {v.verdict}")
    for line in loud(spec, v):
        say(line)
    return errors.OK if v.verdict == "pass" else errors.CHECK_FAILED


def run(spec: VariantSpec, out_dir: Path) -> int:
    """Dispatch on the mode. Train mode works inside ``out_dir`` so that stray relative writes stay there. The
    HybridEP variables are unset first on an arm that is not hybridep (spec.drop_foreign_env)."""
    from experiments.payload.spec import drop_foreign_env

    gone = drop_foreign_env(spec.dispatcher)
    if gone:
        say(f"[payload] {spec.dispatcher} arm: unset {', '.join(gone)} (HybridEP variables, hybridep arms only)")
    if spec.mode == "validate":
        return run_validate(spec, out_dir)
    from experiments.payload.train_run import run_train

    os.chdir(out_dir)
    run_train(spec, out_dir)
    return errors.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (table in :mod:`experiments.train`)."""
    args = parse_args(argv)
    phases.stamp_start()
    out_dir = Path(args.out_dir).resolve()
    spec: VariantSpec | None = None
    code = errors.OK
    held = False
    try:
        spec = load_variant(Path(args.variant_json).resolve()).with_overrides(args.mode, args.attempt, args.hold_s)
        out_dir.mkdir(parents=True, exist_ok=True)
        say(f"[payload] {spec.mode} {spec.name} attempt={spec.attempt} rank={runtime_info.rank()} out={out_dir}")
        if spec.mode == "train":  # before torch is imported: each library reads its cache variable at its start
            set_ = caches.use_caches(Path(args.variant_json), out_dir)
            if set_ and runtime_info.rank() == 0:
                say("[payload] caches: " + ", ".join(f"{k}={v}" for k, v in set_.items()))
        if (args.hold_at or spec.hold_at) == "start" and spec.hold_s > 0:
            hold(spec.hold_s)
            held = True
        code = run(spec, out_dir)
    except PayloadError as e:
        say(e.line())
        code = e.code
        if spec is not None and runtime_info.rank() == 0 and e.code not in _WROTE_OWN_DOCUMENT:
            if not amend_with_error(out_dir, f"payload: {e.kind} ({e.code}): {e}"):
                write_effective(out_dir, error_document(spec, e))
    except KeyboardInterrupt:
        say("[payload] interrupted")
        return errors.INTERRUPTED
    except Exception as e:
        traceback.print_exc()
        say(f"[payload] error {errors.INTERNAL} internal: {type(e).__name__}: {e}")
        code = errors.INTERNAL
    seconds = args.hold_s if args.hold_s is not None else (spec.hold_s if spec else 0.0)
    if seconds and seconds > 0 and not held:
        try:
            hold(seconds)
        except KeyboardInterrupt:
            say("[payload] interrupted during hold")
            return errors.INTERRUPTED
    phases.stamp("exit")
    say(f"[payload] exit {code}")
    return code
