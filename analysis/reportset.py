"""The report's outputs: the report folder (:func:`write_report`: summary.json, report.md, report.html and the
plots) written as a set (docs/CONTRACTS.md §3): every file into a temporary folder beside it, then renamed into
place, so that a reader sees the old report or the new one, never a mix, and a full disk leaves the old report
whole; and the summary on the console (:func:`print_summary`). The Python API (:mod:`analysis.api`) and the CLI
(:mod:`analysis.report`) both call them.

Files another stage owns in the folder (the conductor's ``history.json`` and ``history.html``) are carried into
the new folder (hard links where the file system allows) so the swap does not lose them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from contracts.atomic import dumps, write_bytes

if TYPE_CHECKING:
    from analysis.measure import Summary

CARRIED = ("history.json", "history.html")  # the conductor's files in report/ (CONTRACTS §3)


class ReportWriteError(OSError):
    """The report could not be written (a full disk, a read-only folder); the previous report is left whole.
    An ``OSError``, so every caller that turns a failed write into exit code 5 handles it."""


def write_report(summary: Summary, out_dir: Path,
                 images: Callable[[Summary], dict[str, bytes]] | None = None) -> list[Path]:
    """Write summary.json, report.md, report.html and the plots into ``out_dir`` (created); returns the paths.

    ``images(summary)`` gives the plots as ``{file name: PNG bytes}`` (default: ``analysis.plots.all_plots``,
    drawn here). The folder is written as a set (:func:`write_set`): into a temporary folder
    beside it, renamed into place, so a reader sees the old report or the new one, never a mix.

    Raises:
        ReportWriteError: an ``OSError`` naming the folder and the reason (a full disk); the old report is whole.
    """
    out_dir = Path(out_dir)
    from analysis.render import document, to_html, to_markdown

    if images is None:
        from analysis.plots import all_plots as images
    pngs = images(summary)
    blocks = document(summary, pngs)
    files = dict(pngs)
    files["report.md"] = to_markdown(blocks).encode()
    files["report.html"] = to_html(blocks, pngs).encode()
    files["summary.json"] = dumps(summary.to_json(), strict=True).encode()
    return write_set(out_dir, files)


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


def write_set(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Replace the folder ``out_dir`` by one holding exactly ``files`` (name -> bytes, in order: the last is written
    last) plus the :data:`CARRIED` files it had. Returns the paths of ``files`` in their final place.

    Raises:
        ReportWriteError: names the folder and the reason; ``out_dir`` is as it was and no temporary folder is
            left behind.
    """
    out_dir = Path(out_dir)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=parent))
    except OSError as e:
        raise ReportWriteError(e.errno, f"the report {out_dir} was not written ({e.strerror or e})") from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        for name, data in files.items():
            write_bytes(tmp / name, data)
        for name in CARRIED:
            _carry(out_dir / name, tmp / name)
        _swap(tmp, out_dir)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ReportWriteError(e.errno, f"the report {out_dir} was not replaced ({e.strerror or e}); the previous "
                               "report there is whole. Free space and write it again") from None
    return [out_dir / name for name in files]


def _carry(src: Path, dst: Path) -> None:
    if not src.is_file():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _swap(new: Path, out_dir: Path) -> None:
    """Put ``new`` at ``out_dir``: the old folder is renamed aside first and put back if the second rename fails,
    then removed."""
    if not out_dir.exists():
        os.rename(new, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
    os.rmdir(old)
    os.rename(out_dir, old)
    try:
        os.rename(new, out_dir)
    except OSError:
        os.rename(old, out_dir)
        raise
    with contextlib.suppress(OSError):
        shutil.rmtree(old)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
