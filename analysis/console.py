"""Console output that reads well at any width (rich): the one place that decides the width and how a table is
drawn, for the analysis summary, the plan table and the conductor's run table.

- On a terminal the terminal's width is used; elsewhere (cron, ``| tee``) ``COLUMNS`` when set, else 200 columns
  (rich would fall back to 80 and cut every variant name).
- A table whose rows fit is a rich table whose name column never wraps or is cut; one that does not fit folds into a
  list: the row's name on a line, then ``header: value`` lines.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

PIPE_WIDTH = 200


def make_console(**kwargs: Any) -> Any:
    """A rich Console of the width above (characters)."""
    from rich.console import Console

    probe = Console(**kwargs)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(width=PIPE_WIDTH, **kwargs)


def _plain(cell: str) -> str:
    from rich.errors import MarkupError
    from rich.text import Text

    try:
        return Text.from_markup(cell).plain
    except MarkupError:
        return cell


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int, title: str | None = None,
          name_cols: int = 1) -> Any:
    """A renderable for ``rows``: a rich Table when it fits in ``width`` characters, else a list (see module).

    ``name_cols``: how many leading columns are names (never wrapped or cut).
    """
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    cols = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    widths = [max([len(h), *(len(_plain(c)) for c in col)]) for h, col in zip(headers, cols, strict=True)]
    need = sum(widths) + 3 * len(headers) + 1
    names = sum(widths[:name_cols]) + 3 * name_cols + 1
    if need <= width or not rows:
        t = Table(title=title)
        for i, h in enumerate(headers):
            if i < name_cols:
                t.add_column(h, no_wrap=True, min_width=widths[i])
            else:
                t.add_column(h, overflow="fold")
        for r in rows:
            t.add_row(*r)
        return t
    if names + 20 <= width and need - width < sum(widths[name_cols:]) // 3:
        t = Table(title=title)  # nearly fits: keep the table, fold only the other columns
        for i, h in enumerate(headers):
            t.add_column(h, no_wrap=i < name_cols, min_width=widths[i] if i < name_cols else None, overflow="fold")
        for r in rows:
            t.add_row(*r)
        return t
    parts: list[Any] = [Text(title, style="bold")] if title else []
    for r in rows:
        parts.append(Text.from_markup(" ".join(f"[bold]{c}[/]" for c in r[:name_cols])))
        for h, c in zip(headers[name_cols:], r[name_cols:], strict=True):
            if _plain(c) not in ("", "-"):
                parts.append(Text.from_markup(f"  {h}: {c}"))
    return Group(*parts)
