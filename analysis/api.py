"""The analysis stage's Python API (docs/CONTRACTS.md §7): what the conductor and ``python -m analysis.report`` call.

    summary = report_sweep(sweep_dir, Options(warmup=5, tolerance=0.01, n_boot=2000, hang_min_s=600))
    summary.exit_code, summary.runs, summary.comparisons

``Options`` carries the sweep's ``analysis.*`` settings (warm-up iterations, loss tolerance as a fraction,
bootstrap resamples) and its hang threshold (s). The result is a typed :class:`analysis.measure.results.Summary`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.measure import Summary
from analysis.options import Options, UsageError
from contracts.atomic import dumps
from contracts.sweepdir import SweepDir

if TYPE_CHECKING:  # at run time they come from __getattr__ below, on first use
    from analysis.analyze import analyze_files, analyze_sweep, is_sweep_folder

__all__ = ["Options", "Summary", "UsageError", "analyze_files", "analyze_sweep", "is_sweep_folder", "print_summary",
           "report_sweep", "write_report"]


def write_report(summary: Summary, out_dir: Path,
                 images: Callable[[Summary], dict[str, bytes]] | None = None) -> list[Path]:
    """Write summary.json, report.md, report.html and the plots into ``out_dir`` (created); returns the paths.

    ``images(summary)`` gives the plots as ``{file name: PNG bytes}`` (default: ``analysis.plots.all_plots``,
    drawn here). The folder is written as a set (:func:`analysis.reportset.write_set`): into a temporary folder
    beside it, renamed into place, so a reader sees the old report or the new one, never a mix.

    Raises:
        ReportWriteError: an ``OSError`` naming the folder and the reason (a full disk); the old report is whole.
    """
    out_dir = Path(out_dir)
    from analysis.render import document, to_html, to_markdown
    from analysis.reportset import write_set

    if images is None:
        from analysis.plots import all_plots as images
    pngs = images(summary)
    blocks = document(summary, pngs)
    files = dict(pngs)
    files["report.md"] = to_markdown(blocks).encode()
    files["report.html"] = to_html(blocks, pngs).encode()
    files["summary.json"] = dumps(summary.to_json(), strict=True).encode()
    return write_set(out_dir, files)


def report_sweep(sweep_dir: Path, options: Options | None = None, *, out: Path | None = None,
                 write: bool = True) -> Summary:
    """Analyse a sweep folder with ``options`` and, unless ``write`` is False, write its report into ``out``
    (default ``<sweep>/report``) and each attempt's ``run.json``. Returns the typed summary.

    Raises:
        UsageError: the folder has no readable manifest, or an option is out of range.
    """
    from analysis.analyze import analyze_sweep

    summary = analyze_sweep(Path(sweep_dir), options=options, write_run_json=write and out is None)
    if write:
        write_report(summary, out or SweepDir(Path(sweep_dir)).report)
    return summary


def print_summary(summary: Summary, out: Path, *, show_exit_code: bool = True) -> None:
    """The run table and the comparisons on the console (rich). ``show_exit_code=False`` when the caller prints
    its own final code (the sweep combines the analysis' code with history and infrastructure codes)."""
    from analysis.console import make_console, table

    console = make_console()
    rows = [(r.name, r.status, r.reason or "", f"{r.step_time.median:.1f}" if r.step_time else "-",
             f"{r.tflops.median:.1f}" if r.tflops else "-") for r in summary.runs]
    console.print(table(("run", "status", "reason", "step ms", "TFLOP/s/GPU"), rows, width=console.width,
                        title=f"analysis -> {out}"))
    for c in summary.comparisons:
        s = c.speedup
        value = "-" if s.value is None else f"{s.value:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"
        tags = (" (control: the noise floor)" if c.control else "") + (" DOUBTFUL" if c.doubtful else "")
        console.print(f"{c.variant} vs {c.baseline}: {value} {c.verdict}{tags}")
    for why in sorted({c.doubtful_reason for c in summary.comparisons if c.doubtful and c.doubtful_reason}):
        console.print(f"warning: every verdict of the group is doubtful: {why}")
    if show_exit_code:
        console.print(f"exit code {summary.exit_code}")


_LAZY = ("analyze_files", "analyze_sweep", "is_sweep_folder")


def __getattr__(name: str) -> Any:
    """``analyze_files``, ``analyze_sweep`` and ``is_sweep_folder`` come from :mod:`analysis.analyze` on first use
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
