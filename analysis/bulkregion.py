"""The scanner's bulk path over one region of a log whose iteration lines all have the last accepted layout
(:class:`analysis.scanner.Scanner` inherits it): memory and iteration lines found in one ``findall`` pass, the
iteration lines checked and converted together by the Arrow kernels of :mod:`analysis.bulk`. See the speed notes
of :mod:`analysis.scanner`."""

from __future__ import annotations

import re
from itertools import compress

import numpy as np

from analysis.bulk import LayoutKernel, int64_bytes
from analysis.grammar import _LINE_OK_MARKS, _MEM_BULK, ITER_N_RE, ITER_RE, _floats, _Layout, _timestamp


class BulkRegions:
    """Mixin of :class:`analysis.scanner.Scanner` (its state: ``it``, ``total``, ``nonfinite_rows``, ``pending``,
    ``last_off``, ``last_ts``; its per-line path ``_line`` and ``_peak``)."""

    def _fast_region(self, layout: _Layout, buf: bytes, pos: int, end: int, base: int) -> None:
        """[pos, end) when the log's lines so far have ``layout``: memory and iteration lines are found in one pass
        (``ITER_N_RE`` when the region holds no ``\\r``), memory values are read from the joined memory lines, and
        the iteration lines are checked and converted together (:meth:`_add_lines`); when some line does not pass
        there, every line of the region goes through :meth:`_line`, in order."""
        regex = ITER_N_RE if buf.find(b"\r", pos, end) == -1 else ITER_RE
        found = regex.findall(buf, pos, end)  # (unit, memory rest, N, M, rest); b"" for a group not taken
        if not found:
            return
        units, mem_rests, ns, totals, rests = (list(c) for c in zip(*found, strict=True))
        is_iter = list(map(bool, ns))
        if not all(is_iter):  # memory lines among them
            for unit in (b"GB", b"MB"):
                lines = [r for r, u in zip(mem_rests, units, strict=True) if u == unit]
                if lines:
                    self._peak(_MEM_BULK[unit].findall(b"\n".join(lines)), unit)
            ns, totals, rests = (list(compress(c, is_iter)) for c in (ns, totals, rests))
        if not rests:
            return
        if self._add_lines(layout, ns, totals, rests):
            last = self._last_start(regex, buf, pos, end, ns[-1], rests[-1])
        else:
            last = None
            for m in regex.finditer(buf, pos, end):
                _, _, n, total, rest = m.groups()
                if n is not None and self._line(n, total, rest, buf, m.start(), pos, base):
                    last = m.start()
        if last is not None:
            self.last_off = base + last
            self.last_ts = _timestamp(buf, last, pos) or self.last_ts

    @staticmethod
    def _last_start(regex: re.Pattern[bytes], buf: bytes, pos: int, end: int, n: bytes, rest: bytes) -> int:
        """Where the region's last iteration line (``N``, ``rest``) starts: searched from the line that holds the
        last occurrence of its text, or over the whole region when that line is not it."""
        at = buf.rfind(rest, pos, end) if rest else -1
        start = max(pos, buf.rfind(b"\n", pos, at) + 1) if at != -1 else pos
        for lo in (start, pos):
            last = None
            for m in regex.finditer(buf, lo, end):
                if m.group(3) is not None:
                    last = m
            if last is not None and last.group(3) == n and last.group(5) == rest:
                return last.start()
        raise AssertionError("the region's last iteration line was found by findall")  # pragma: no cover

    def _add_lines(self, layout: _Layout, ns: list[bytes], totals: list[bytes], rests: list[bytes]) -> bool:
        """Append the iteration lines ``iteration N/ M |rest`` when every one of them has ``layout``'s keys and
        passes :meth:`_line`'s checks, with the same numbers; False (nothing appended) otherwise.

        The lines are joined with ``\\n``: the joined text holds only the allowed characters, its separators are
        ``:|`` per field and ``\\n`` per line, and its keys are the layout's, so each line's are.
        """
        count, fields = len(rests), len(layout.raw) - 1
        text = b"\n".join(rests)
        if max(map(len, rests)) > 65536:
            return False
        if max(map(len, ns)) > 18 or max(map(len, totals)) > 18:
            return False  # the lines with longer numbers are damaged (:meth:`_line`)
        if layout.kernel is None:
            layout.kernel = LayoutKernel(layout.raw)
        # one pass checks the characters (all allowed), the separators (":|" per field, "\n" per line) and that
        # "(" is only where the keys have it; a "(" in a value ("X (avg Y)") leaves the separators to check alone
        marks = text.translate(None, _LINE_OK_MARKS)
        table = None
        if marks == layout.kernel.marks(count):
            table = layout.kernel.table(text, count)  # Arrow: keys checked, values converted in C++
        elif marks.replace(b"(", b"") != (b":|" * fields + b"\n") * (count - 1) + b":|" * fields:
            return False
        if table is None:  # a key differs, or a value Arrow leaves to ``float`` ("X (avg Y)", "1_0")
            parts = text.replace(b"|", b":").split(b":")
            keys, trail = list(layout.raw[:-1]), layout.raw[-1]
            if parts[0::2] != keys + ([trail + b"\n" + keys[0]] + keys[1:]) * (count - 1) + [trail]:
                return False
            floats = _floats(parts[1::2])
            if floats is None:
                return False
            table = np.array(floats, dtype=np.float64).reshape(count, fields)
        nonfinite = ~np.isfinite(table).all(axis=1)
        finite = table if not nonfinite.any() else table[~nonfinite]
        if np.abs(finite).max(initial=0.0) >= 1e300:
            return False  # a sum of finite values might overflow: _line decides
        row = len(self.it)
        self.nonfinite_rows.frombytes((np.flatnonzero(nonfinite) + row).astype(np.int64).tobytes())
        self.it.frombytes(int64_bytes(ns))
        self.total.frombytes(int64_bytes(totals))
        layout.rows.add(row, count)
        for column, pick in zip(layout.columns, layout.picks, strict=True):
            column.extend(table[:, pick])
        self.pending = None  # the layout has its throughput field: a Step Time line before it is not used
        return True

