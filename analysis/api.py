"""The analysis stage's Python API (docs/CONTRACTS.md §7): what the conductor and ``python -m analysis.report`` call.

    summary = report_sweep(sweep_dir, Options(warmup=5, tolerance=0.01, n_boot=2000, hang_min_s=600))
    summary.exit_code, summary.runs, summary.comparisons

``Options`` carries the sweep's ``analysis.*`` settings (warm-up iterations, loss tolerance as a fraction,
bootstrap resamples) and its hang threshold (s). The result is a typed :class:`analysis.measure.results.Summary`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.measure import Summary
from analysis.options import Options, UsageError
from analysis.reportset import print_summary, write_report
from contracts.sweepdir import SweepDir

if TYPE_CHECKING:  # at run time they come from __getattr__ below, on first use
    from analysis.analyze import analyze_files, is_sweep_folder

__all__ = ["Options", "Summary", "UsageError", "analyze_files", "analyze_sweep", "is_sweep_folder", "print_summary",
           "report_sweep", "write_report"]


def analyze_sweep(sweep_dir: Path, warmup: int | None = None, *, options: Options | None = None,
                  write_run_json: bool = True, now: float | None = None) -> Summary:
    """:func:`analysis.analyze.analyze_sweep` with the nightly prior of a ``repeats=auto`` sweep
    (:func:`analysis.history.api.nightly_prior`)."""
    from analysis import analyze
    from analysis.history import nightly_prior

    return analyze.analyze_sweep(Path(sweep_dir), warmup, options=options, write_run_json=write_run_json, now=now,
                                 noise_prior=nightly_prior)


def report_sweep(sweep_dir: Path, options: Options | None = None, *, out: Path | None = None,
                 write: bool = True) -> Summary:
    """Analyse a sweep folder with ``options`` and, unless ``write`` is False, write its report into ``out``
    (default ``<sweep>/report``) and each attempt's ``run.json``. Returns the typed summary.

    Raises:
        UsageError: the folder has no readable manifest, or an option is out of range.
    """
    summary = analyze_sweep(Path(sweep_dir), options=options, write_run_json=write and out is None)
    if write:
        write_report(summary, out or SweepDir(Path(sweep_dir)).report)
    return summary


_LAZY = ("analyze_files", "is_sweep_folder")


def __getattr__(name: str) -> Any:
    """``analyze_files`` and ``is_sweep_folder`` come from :mod:`analysis.analyze` on first use
    (PEP 562): importing this module for ``Options`` or ``Summary`` does not import scipy (about 1 s), which
    ``action=status`` and the plan never use."""
    if name in _LAZY:
        from analysis import analyze

        return getattr(analyze, name)
    raise AttributeError(f"module 'analysis.api' has no attribute {name!r}")


def preload(plots: bool = False) -> None:
    """Import the heavy part of the analysis (the parser and its statistics; with ``plots`` also scipy.stats for
    the comparisons and matplotlib for the plots, which a sweep with timings needs) now. The conductor calls it
    while it waits for its first jobs, so that the imports (1-2 s) run beside them, on another core, instead of
    after them."""
    import analysis.analyze  # noqa: F401

    if plots:
        import scipy.stats  # noqa: F401

        import analysis.plots  # noqa: F401
