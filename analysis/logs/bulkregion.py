"""The scanner's bulk path over one region of a log whose iteration lines all have the last accepted layout
(:class:`analysis.logs.scanner.Scanner` inherits it): memory and iteration lines found by :func:`analysis.logs.locate.locate`
(or one ``findall`` pass where it leaves the region to the regex), the iteration lines checked and converted
together by the Arrow kernels of :mod:`analysis.logs.bulk`. See the speed notes of :mod:`analysis.logs.scanner`."""

from __future__ import annotations

import math
import re
from itertools import compress

import numpy as np

from analysis.logs.bulk import LayoutKernel, int64_bytes
from analysis.logs.grammar import _LINE_OK_MARKS, _MEM_BULK, ITER_N_RE, ITER_RE, _floats, _Layout, _timestamp
from analysis.logs.locate import Located, gather, locate
from analysis.logs.markers import NEEDLE_RE


class BulkRegions:
    """Mixin of :class:`analysis.logs.scanner.Scanner` (its state: ``it``, ``total``, ``nonfinite_rows``, ``pending``,
    ``last_off``, ``last_ts``, ``peak_gb``, ``memory_lines``; its per-line path ``_line``)."""

    def _fast_region(self, layout: _Layout, buf: bytes, pos: int, end: int, base: int) -> None:
        """[pos, end) when the log's lines so far have ``layout``: memory and iteration lines are found in one pass
        (:func:`analysis.logs.locate.locate` when the region holds no ``\\r``, else ``ITER_RE``), memory values are read
        from the joined memory lines, and the iteration lines are checked and converted together
        (:meth:`_add_lines`); when some line does not pass there, every line of the region goes through
        :meth:`_line`, in order."""
        cr = buf.find(b"\r", pos, end) != -1
        found = None if cr else locate(buf, pos, end)
        if found is None:
            self._regex_region(layout, ITER_RE if cr else ITER_N_RE, buf, pos, end, base)
            return
        for unit, rests in found.memory.items():
            self._peak(_MEM_BULK[unit].findall(rests), unit)
        count = found.at.size
        if not count:
            return
        row = len(self.it)
        self.quiet = found.start[:0], found.lo[:0], found.newlines  # (for the tail's marker scan)
        if self._add_lines(layout, found.n, found.total, _rests(buf, found), count):
            last = int(found.at[-1])
            if _quiet(layout):  # the marker scan of the tail may leave out these lines, but those with NaN or Inf
                finite = np.ones(count, bool)
                nonfinite = np.frombuffer(self.nonfinite_rows, np.int64)
                finite[nonfinite[np.searchsorted(nonfinite, row):] - row] = False
                self.quiet = found.start[finite], found.lo[finite], found.newlines
        else:
            last = self._each_line(ITER_N_RE, buf, pos, end, base)
        self._last_at(buf, last, pos, base)

    def _regex_region(self, layout: _Layout, regex: re.Pattern[bytes], buf: bytes, pos: int, end: int,
                      base: int) -> None:
        """:meth:`_fast_region` by one ``findall`` of ``regex``."""
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
        if (max(map(len, rests)) <= 65536 and max(map(len, ns)) <= 18 and max(map(len, totals)) <= 18
                and self._add_lines(layout, np.frombuffer(int64_bytes(ns), np.int64),
                                    np.frombuffer(int64_bytes(totals), np.int64), b"\n".join(rests), len(rests))):
            # (a longer rest or number: the line is damaged or glued, :meth:`_line` decides)
            last = self._last_start(regex, buf, pos, end, ns[-1], rests[-1])
        else:
            last = self._each_line(regex, buf, pos, end, base)
        self._last_at(buf, last, pos, base)

    def _each_line(self, regex: re.Pattern[bytes], buf: bytes, pos: int, end: int, base: int) -> int | None:
        """Every iteration line of [pos, end) through :meth:`_line`, in order; where the last one accepted starts."""
        last = None
        for m in regex.finditer(buf, pos, end):
            _, _, n, total, rest = m.groups()
            if n is not None and self._line(n, total, rest, buf, m.start(), pos, base):
                last = m.start()
        return last

    def _last_at(self, buf: bytes, last: int | None, pos: int, base: int) -> None:
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

    def _add_lines(self, layout: _Layout, ns: np.ndarray, totals: np.ndarray, text, count: int) -> bool:
        """Append ``count`` iteration lines ``iteration N/ M |rest`` (``ns``, ``totals``: int64 N and M, at most
        18 digits each; ``text``: the rests joined with ``\\n``, bytes-like, each at most 65,536 bytes) when every
        one of them has ``layout``'s keys and passes :meth:`_line`'s checks, with the same numbers; False (nothing
        appended) otherwise.

        The Arrow kernel (:meth:`analysis.logs.bulk.LayoutKernel.table`) checks the keys and converts the values; when
        it refuses, the joined text must hold only the allowed characters with the separators ``:|`` per field
        and ``\\n`` per line, and its keys must be the layout's, so each line's are (split and ``float``)."""
        fields = len(layout.raw) - 1
        if layout.kernel is None:
            layout.kernel = LayoutKernel(layout.raw)
        table = layout.kernel.table(text, count)  # Arrow: keys checked, values converted in C++
        if table is None:  # a key differs, or a value Arrow leaves to ``float`` ("X (avg Y)", "1_0"), or damage
            text = bytes(text)
            marks = text.translate(None, _LINE_OK_MARKS)
            if marks.replace(b"(", b"") != (b":|" * fields + b"\n") * (count - 1) + b":|" * fields:
                return False
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
        self.it.frombytes(ns.astype(np.int64).tobytes())
        self.total.extend(totals.astype(np.int64))
        layout.rows.add(row, count)
        for column, pick in zip(layout.columns, layout.picks, strict=True):
            column.extend(table[:, pick])
        self.pending = None  # the layout has its throughput field: a Step Time line before it is not used
        return True

    def _peak(self, values: list[bytes], unit: bytes) -> None:
        """Take max-allocated values of memory lines (``unit`` GB or MB, Megatron's "MB" being MiB) into the peak;
        a negative or infinite value (damage: no allocator reports one) is not a reading."""
        read = np.array(list(map(float, values)), np.float64)
        read = read[(read >= 0.0) & (read < math.inf)]
        if read.size:
            value = float(read.max()) / (1.0 if unit == b"GB" else 1024.0)
            self.memory_lines += int(read.size)
            if self.peak_gb is None or value > self.peak_gb:
                self.peak_gb = value


def _quiet(layout: _Layout) -> bool:
    """True when an iteration line of ``layout`` with finite values holds no failure-marker needle after its
    header: its keys, each followed by ``: 0 |``, and the text after the last ``|`` hold none (a finite value
    holds digits, a sign, ``.`` and ``e`` or ``E``, and no needle is made of those or spans a ``|``)."""
    if layout.quiet is None:
        template = b"".join(k + b": 0 |" for k in layout.raw[:-1]) + layout.raw[-1]
        layout.quiet = NEEDLE_RE.search(template.lower()) is None
    return layout.quiet


def _rests(buf: bytes, found: Located):
    """The located iteration lines' rests joined with ``\\n`` (a buffer over one copy)."""
    joined = gather(buf, found.lo, found.hi + 1)
    return joined.slice(0, joined.size - 1)
