"""Validate the runs of one stage in one process: the local validate-mode job behind the LocalBackend.

Usage::

    python -m experiments.payload.validate_runs RUNS_JSON [--follow IDLE_S]

``RUNS_JSON`` holds ``{"runs": [{"variant_json": ..., "out_dir": ..., "attempt": k, "log": ..., "exit": ...}]}``.
Megatron-Core and Megatron-Bridge are imported once (about 4 s each time otherwise); then each run is validated
as ``python -m experiments.train VARIANT_JSON OUT_DIR --mode validate --attempt K`` would: the same lines (its
start line, ``[payload] validate <v>: pass|fail``, the loud lines, ``[payload] error ...`` on a diagnosed error,
``[payload] exit <code>``) go to its own ``log`` (and to this process's output), the same
``OUT_DIR/effective_config.json`` is written, and its exit code goes to ``exit`` (``{"exit_code": N}``, written
last: the run is finished once it exists). Holds (``hold_s``) are not supported here: such runs are single jobs.

``--follow IDLE_S``: once RUNS_JSON is done, the process stays for later launches of the same sweep (a gated
stage opened after the first one was analysed), so that one process validates every run of a local validate sweep
and the libraries are imported once per sweep. The launcher hands it more runs as ``more-<n>.json`` (n = 1, 2,
...) next to RUNS_JSON and ends it with a ``done`` file. After ``IDLE_S`` seconds (s) without either, it writes
``closed`` and exits. The ``lock`` file (:func:`contracts.locks.locked`) orders the two sides: the launcher writes a
``more-<n>.json`` only while holding it and only when ``closed`` is absent, and this process writes ``closed`` only
while holding it and only when no ``more-<n>.json`` is waiting, so a handed-over run is never lost
(:class:`launchers.validate_batch.ValidateBatch`).

Exit code: 0 when every run exited 0, else the first nonzero run exit code; 10 for a bad RUNS_JSON.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from contracts.locks import locked
from experiments.payload import errors, runtime_info
from experiments.payload.effective import write_atomic
from experiments.payload.errors import BridgeMissing, PayloadError
from experiments.payload.outcome import amend_with_error, write_effective
from experiments.payload.runtime_info import say
from experiments.payload.spec import load_variant


class _Tee:
    """A text stream writing to two streams (this process's output and one run's log)."""

    def __init__(self, a: TextIO, b: TextIO) -> None:
        self.a, self.b = a, b

    def write(self, text: str) -> int:
        self.a.write(text)
        self.b.write(text)
        return len(text)

    def flush(self) -> None:
        self.a.flush()
        self.b.flush()

    def close(self) -> None:
        """Nothing to close: a library's log handler that captured this stream closes it at exit (absl does)."""


def _bridge(image: str | None, cache: dict[str | None, tuple[Any, str | None]]) -> tuple[Any, str | None]:
    """(the loaded Megatron-Bridge or None, why not), once per container image."""
    if image not in cache:
        from experiments.payload.bridge_api import load_bridge

        try:
            cache[image] = (load_bridge(image), None)
        except BridgeMissing as e:
            cache[image] = (None, str(e).split(";")[0])
    return cache[image]


def run_one(run: dict[str, Any], cache: dict[str | None, tuple[Any, str | None]]) -> int:
    """Validate one run as ``experiments.train --mode validate`` does (see the module docstring); its exit code."""
    from experiments.payload.cli import _WROTE_OWN_DOCUMENT, error_document
    from experiments.payload.outcome import loud
    from experiments.payload.validate import validate

    out_dir = Path(run["out_dir"]).resolve()
    spec = None
    try:
        spec = load_variant(Path(run["variant_json"]).resolve()).with_overrides("validate", int(run["attempt"]))
        out_dir.mkdir(parents=True, exist_ok=True)
        say(f"[payload] {spec.mode} {spec.name} attempt={spec.attempt} rank={runtime_info.rank()} out={out_dir}")
        api, why = _bridge(spec.container.get("image"), cache)
        v = validate(spec, api, why_no_bridge=why if api is None else None)
        write_effective(out_dir, v.doc)
        say(f"[payload] validate {spec.name}: {v.verdict}")
        for line in loud(spec, v):
            say(line)
        code = errors.OK if v.verdict == "pass" else errors.CHECK_FAILED
    except PayloadError as e:
        say(e.line())
        code = e.code
        if spec is not None and e.code not in _WROTE_OWN_DOCUMENT:
            if not amend_with_error(out_dir, f"payload: {e.kind} ({e.code}): {e}"):
                write_effective(out_dir, error_document(spec, e))
    except Exception as e:  # noqa: BLE001  (one run's bug must not stop the others)
        traceback.print_exc()
        say(f"[payload] error {errors.INTERNAL} internal: {type(e).__name__}: {e}")
        code = errors.INTERNAL
    say(f"[payload] exit {code}")
    return code


FOLLOW_POLL_S = 0.05  # seconds between looks for more-<n>.json or done while following


def _runs(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["runs"]


def _next_file(root: Path, n: int, idle_s: float) -> Path | None:
    """``more-<n>.json`` once it appears; None on ``done`` or after ``idle_s`` without it (then ``closed`` is
    written under the lock, see the module docstring)."""
    more = root / f"more-{n}.json"
    deadline = time.monotonic() + idle_s
    while True:
        if more.exists():
            return more
        if (root / "done").exists():
            return None
        if time.monotonic() >= deadline:
            with locked(root / "lock"):
                if more.exists():
                    return more
                write_atomic(root / "closed", {"after_idle_s": idle_s})
            return None
        time.sleep(FOLLOW_POLL_S)


def _validate(runs: list[dict[str, Any]], cache: dict[str | None, tuple[Any, str | None]]) -> int:
    first = errors.OK
    for run in runs:
        Path(run["log"]).parent.mkdir(parents=True, exist_ok=True)
        with open(run["log"], "w", encoding="utf-8") as log:
            with contextlib.redirect_stdout(_Tee(sys.__stdout__, log)), \
                    contextlib.redirect_stderr(_Tee(sys.__stderr__, log)):
                code = run_one(run, cache)
        write_atomic(Path(run["exit"]), {"exit_code": code})
        first = first or code
    return first


def main(argv: list[str] | None = None) -> int:
    """Validate the runs (module docstring); the exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        path = Path(args[0])
        runs = _runs(path)
        idle_s = float(args[args.index("--follow") + 1]) if "--follow" in args else None
    except (IndexError, OSError, ValueError, KeyError, TypeError) as e:
        say(f"[payload] error {errors.BAD_VARIANT_FILE} bad_runs_file: usage: validate_runs RUNS_JSON "
            f"[--follow IDLE_S] ({e})")
        return errors.BAD_VARIANT_FILE
    cache: dict[str | None, tuple[Any, str | None]] = {}
    first = _validate(runs, cache)
    n = 1
    while idle_s is not None:
        more = _next_file(path.parent, n, idle_s)
        if more is None:
            break
        try:
            runs = _runs(more)
        except (OSError, ValueError, KeyError, TypeError) as e:
            say(f"[payload] error {errors.BAD_VARIANT_FILE} bad_runs_file: {more}: {e}")
            return errors.BAD_VARIANT_FILE
        code = _validate(runs, cache)  # always: a failed earlier run must not skip the runs handed over
        first = first or code
        n += 1
    return first


if __name__ == "__main__":
    sys.exit(main())
