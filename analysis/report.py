"""``python -m analysis.report PATH... [--out DIR] [--baseline NAME] [--warmup N]`` (CONTRACTS.md §7).

A PATH is a sweep folder (report to ``<sweep>/report/`` unless ``--out``) or log files / folders of logs (report
to ``--out``, default ``./report``). Writes summary.json, report.md, report.html and the PNG plots, each atomically.

Exit codes (CONTRACTS §5): 0 every kept run good; 3 a run failed / incomplete / insufficient / invalid; 4 no bad
run but a slower verdict or a loss divergence; 2 usage error (missing path, unknown baseline, bad option, ``--out``
naming a file or a path under a file, a sweep folder that cannot be written without ``--out``; nothing is
written); 5 the report cannot be written (``--out`` on a read-only file system, a full disk: "... was not written
(<reason>)"); 1 bug.

A thin CLI beside the Python API (:mod:`analysis.api`), over the same functions (:mod:`analysis.analyze`,
:mod:`analysis.reportset`). Only ``--out`` (or, without it, ``<sweep>/report/``) is
written: with ``--out`` a sweep folder is read only, so a colleague's read-only sweep can be analysed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.options import Options, UsageError
from contracts.atomic import BadTarget, check_target
from contracts.exits import ExitCode, combine, in_print_order

__all__ = ["main"]


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit; main() returns exit code 2 itself
        raise _ArgError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m analysis.report", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", metavar="PATH", help="sweep folder(s), log files or folders of logs")
    p.add_argument("--out", type=Path, help="report folder (default <sweep>/report, or ./report for loose logs)")
    p.add_argument("--baseline", help="loose logs: the run (file stem) every other run is compared with")
    p.add_argument("--warmup", type=int, help="warm-up iterations to drop (default max(3, 10%% of the iterations))")
    p.add_argument("--tolerance", type=float, default=0.02, help="loss-parity tolerance (default 0.02 = 2%%)")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the intervals (default 2000)")
    p.add_argument("--hang-min-s", type=float, default=600,
                   help="suspected hang: no new iteration for max(this, 5 x median step) seconds (default 600)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


def _check_out(out: Path | None, sweeps: list[Path]) -> None:
    """Where the report goes must be a folder this process can write, before anything is analysed or written.

    Raises:
        UsageError: ``--out`` names a file or a path under a file; or, without ``--out``, a sweep folder (or its ``report/``) is not
            writable (a colleague's sweep, a read-only mount): the message names it and the fix, ``--out DIR``.
    """
    if out is not None:
        try:
            check_target(out, "--out", folder=True)
        except BadTarget as exc:
            raise UsageError(str(exc)) from None
        return
    for s in sweeps:
        for folder in (s, s / "report"):
            if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
                raise UsageError(f"{folder} is not writable (read-only file system or permissions), and without "
                                 f"--out the report and each attempt's run.json are written into the sweep "
                                 f"folder; pass --out DIR to write the report elsewhere (the sweep is then only "
                                 f"read)")


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI; returns the exit code (CONTRACTS §5) instead of exiting, so the sweep can call it in-process."""
    in_print_order()
    parser = _parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        paths = [Path(p) for p in args.paths]
        for p in paths:
            if not p.exists():
                raise UsageError(f"no such file or folder: {p}")
        options = Options(warmup=args.warmup, tolerance=args.tolerance, n_boot=args.bootstrap,
                          hang_min_s=args.hang_min_s)
        from analysis.analyze import analyze_files, analyze_sweep, is_sweep_folder

        sweeps = [p for p in paths if is_sweep_folder(p)]
        if sweeps and len(sweeps) != len(paths):
            raise UsageError("give sweep folders alone, or log files and folders alone, not both")
        if len(sweeps) > 1 and args.out:
            raise UsageError("--out needs a single sweep folder")
        if sweeps and args.baseline:
            raise UsageError("--baseline is for loose log files; a sweep's baseline comes from its manifest")
        _check_out(args.out, sweeps)
        from analysis.history import nightly_prior

        jobs = ([(analyze_sweep(s, options=options, write_run_json=args.out is None, noise_prior=nightly_prior),
                  args.out or s / "report")
                 for s in sweeps] if sweeps
                else [(analyze_files(paths, baseline=args.baseline, options=options), args.out or Path("report"))])
    except (_ArgError, UsageError) as exc:
        print(f"analysis.report: error: {exc}", file=sys.stderr)
        if isinstance(exc, _ArgError):
            parser.print_usage(sys.stderr)
        return ExitCode.USAGE
    except OSError as exc:  # a full disk while each attempt's run.json is written: nothing read is lost
        print(f"analysis.report: error: writing into the sweep failed: {exc}; free space and run it again",
              file=sys.stderr)
        return ExitCode.INFRA
    from analysis.reportset import print_summary, write_report

    codes = []
    for summary, out in jobs:
        try:
            write_report(summary, out)
        except OSError as exc:  # a full disk: the old report is whole (analysis/reportset.py)
            print(f"analysis.report: error: {exc}", file=sys.stderr)
            codes.append(ExitCode.INFRA)
            continue
        if not args.quiet:
            print_summary(summary, out)
        codes.append(summary.exit_code)
    return int(combine(*codes))


if __name__ == "__main__":
    sys.exit(main())
