"""Live progress of a sweep's runs (rich): variant, attempt, job id, state, iteration / total, last step time.

The iteration and step time come from the tail of each run's log (Megatron iteration line, FACTS §6), read cheaply
(the last 64 KiB) on every poll. On a terminal the table redraws in place; elsewhere (CI, cron) one line is printed
per state change so logs stay readable.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

_ITER = re.compile(rb"iteration\s+(\d+)\s*/\s*(\d+)")
_STEP = re.compile(rb"elapsed time per iteration \(ms\):\s*([0-9.]+)")
TAIL_BYTES = 64 * 1024


@dataclass
class RunView:
    """What the display shows for one run; ``last_change`` is when the iteration last advanced (monotonic s)."""

    task: str
    variant: str
    attempt: int
    repeat: int
    job_id: str | None = None
    state: str = "planned"
    iteration: int | None = None
    total: int | None = None
    step_ms: float | None = None
    step_history: list[float] = field(default_factory=list)
    last_change: float = field(default_factory=time.monotonic)
    note: str = ""


def read_tail(paths: list[Path], nbytes: int = TAIL_BYTES) -> bytes:
    """The last ``nbytes`` of the newest of ``paths`` (b"" when none exists)."""
    existing = [p for p in paths if p.exists()]
    if not existing:
        return b""
    p = max(existing, key=lambda q: q.stat().st_mtime)
    with open(p, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - nbytes))
        return f.read()


def update_from_log(view: RunView, tail: bytes) -> None:
    """Advance ``view`` from a log tail: latest iteration N/M and its step time in ms."""
    its = _ITER.findall(tail)
    if its:
        n, m = int(its[-1][0]), int(its[-1][1])
        if view.iteration is None or n > view.iteration:
            view.last_change = time.monotonic()
        view.iteration, view.total = n, m
    steps = _STEP.findall(tail)
    if steps:
        view.step_ms = float(steps[-1])
        view.step_history = [float(s) for s in steps[-20:]]


def median_step_ms(view: RunView) -> float | None:
    """Median of the recent step times seen in the log, or None."""
    if not view.step_history:
        return None
    s = sorted(view.step_history)
    return s[len(s) // 2]


class Display:
    """Render run views: a rich Live table on a terminal, one line per change otherwise."""

    def __init__(self, title: str, *, static: bool = False) -> None:
        """``static``: no live table; :meth:`close` prints the final table as aligned text (``action=status``: a
        rich table costs about 5 ms per row, 0.5 s for 100 runs)."""
        from analysis.console import make_console

        self.console = make_console()
        self.title = title
        self.live = None
        self.static = static
        self._last: dict[str, tuple] = {}
        if self.console.is_terminal and not static:
            from rich.live import Live

            self.live = Live(console=self.console, refresh_per_second=2, transient=False)
            self.live.start()

    def table(self, views: list[RunView]):
        from analysis.console import table

        rows = []
        for v in views:
            it = f"{v.iteration}/{v.total}" if v.iteration is not None else "-"
            step = f"{v.step_ms:.1f}" if v.step_ms is not None else "-"
            rows.append((v.variant, str(v.repeat), str(v.attempt), v.job_id or "-", v.state, it, step, v.note))
        return table(("variant", "repeat", "attempt", "job id", "state", "iteration", "last step (ms)", "note"), rows,
                     width=self.console.width, title=self.title)

    def update(self, views: list[RunView]) -> None:
        if self.live is not None:
            self.live.update(self.table(views))
            return
        for v in views:
            key = (v.state, v.job_id, v.note)
            if self._last.get(v.task) != key:
                self._last[v.task] = key
                it = f" iteration {v.iteration}/{v.total}" if v.iteration is not None else ""
                step = f" step {v.step_ms:.1f} ms" if v.step_ms is not None else ""
                job = f" job {v.job_id}" if v.job_id else ""
                self.console.print(f"[{time.strftime('%H:%M:%S')}] {v.variant} r{v.repeat} a{v.attempt}{job}: "
                                   f"{v.state}{it}{step}{(' - ' + v.note) if v.note else ''}", highlight=False)

    def close(self, views: list[RunView]) -> None:
        if self.live is not None:
            self.live.update(self.table(views))
            self.live.stop()
        elif self.static:
            self.console.print(self.text_table(views), markup=False, highlight=False, soft_wrap=True)
        else:
            self.console.print(self.table(views))

    def text_table(self, views: list[RunView]) -> str:
        """The table of :meth:`table` as aligned plain text (columns separated by two spaces)."""
        head = ("variant", "repeat", "attempt", "job id", "state", "iteration", "last step (ms)", "note")
        rows = [head] + [(v.variant, str(v.repeat), str(v.attempt), v.job_id or "-", v.state,
                          f"{v.iteration}/{v.total}" if v.iteration is not None else "-",
                          f"{v.step_ms:.1f}" if v.step_ms is not None else "-", v.note) for v in views]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join([self.title, *lines])
