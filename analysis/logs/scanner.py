"""The chunked byte scanner behind ``analysis.logs.parse`` (formats and damage rules: see that module's docstring),
with its bulk path over a region whose iteration lines all have the last accepted layout.

Speed notes (benchmarks/parse.py):
- after a file's first iteration line, a region without ``\r`` is located with numpy (:mod:`analysis.logs.locate`:
  the aligned words of ``iteration``, header templates, memory lines by their head), else (and where that cannot
  decide) by one regex pass that finds iteration *and* memory lines (``ITER_N_RE``/``ITER_RE``); the memory values
  are read by one regex pass over the memory lines; ``Step Time`` lines are read only while some iteration line
  lacks its throughput (then they are paired with iteration lines);
- iteration lines of one log share a key sequence (a "layout"); the lines of a region that all have the last
  accepted layout are joined, and Arrow kernels compare the keys and cast the values (``analysis.logs.bulk``; where
  Arrow refuses, one ``translate`` checks characters and separators, then a split and ``float``); a region where
  some line fails the per-line checks goes through the per-line path (a damaged line costs speed, not numbers);
- failure markers (and config lines) are searched before a file's first iteration line and in the regions that end
  within the file's last ``tail_bytes`` (``analysis.logs.markers.MarkerBag.scan``: one RE2 pass over distinct lines, the
  accepted iteration lines that cannot hold a needle left out), while the region's bytes are in the cache.
Memory: per row 8 bytes of iteration number plus 8 per varying column (``grammar.Column``; constant columns
and the layouts' rows cost nothing per row), and one chunk of log bytes, so that a log of several GB fits.
"""

from __future__ import annotations

import math
import re
from array import array
from itertools import compress

import numpy as np

from analysis.logs.bulk import LayoutKernel, int64_bytes
from analysis.logs.grammar import (
    _ANSI_B,
    _CONFIG_RE,
    _CONFIG_VALUE_RE,
    _GLUE_RE,
    _INFS,
    _LINE_OK,
    _LINE_OK_MARKS,
    _MEM_BULK,
    _MEM_GB_RE,
    _MEM_MB_RE,
    _NAN,
    _STEP_RE,
    ITER_N_RE,
    ITER_RE,
    MARKERS_KEPT,  # noqa: F401  (re-exported: the bound on kept markers, read by the tests)
    MAX_LINE,
    PRINT_AFTER_FIELD_RE,
    PRINT_AFTER_LAST_RE,
    STANDARD_FIELDS,
    Column,
    _floats,
    _Layout,
    _make_layout,
    _timestamp,
)
from analysis.logs.locate import Located, gather, locate
from analysis.logs.markers import NEEDLE_RE, MarkerBag, clean_line

_GLUED = b"\x00glued"  # the key of a glued head's layout in ``Scanner.layouts`` (no real key holds a NUL byte)


class Scanner:
    """Chunked scanner state. Call :meth:`begin_file`, :meth:`feed` (any chunking), :meth:`end_file` per file."""

    def __init__(self, tail_bytes: int) -> None:
        self.tail_bytes = tail_bytes
        self.it = array("q")
        self.total = Column("q")  # the M of "iteration N/ M", per row
        self.layouts: dict[tuple[bytes, ...], _Layout] = {}
        self._last_keys: list[bytes] | None = None
        self._last_layout: _Layout | None = None
        self._layout_without_tflops = False  # then Step Time lines must be paired with iteration lines
        self._fast: _Layout | None = None  # the layout of the last accepted line, when it has a throughput field
        self.nonfinite_rows = array("q")  # rows with a NaN or Inf value in any field
        self.partial_rows = array("q")  # rows read from a glued line's head (its later fields unknown)
        self.tflops_from_lines = False  # set by columns()
        self.step_tflops_rows = array("q")  # rows whose throughput comes from a paired Step Time line
        self.step_tflops_vals = array("d")
        self.step_only = array("d")  # every Step Time line (ms, TFLOP/s/GPU), used when there are no iteration lines
        self.step_only_tflops = array("d")
        self.pending: float | None = None  # TFLOP/s/GPU of an unpaired Step Time line (NaN when absent)
        self.peak_gb: float | None = None
        self.memory_lines = 0
        self.config: dict[str, str] = {}
        self.bag = MarkerBag()  # the failure markers kept (set-up, then tails, file after file)
        self.kept, self.counts = self.bag.kept, self.bag.counts
        self.damaged = 0
        self.step_lines = 0
        self.first_off: int | None = None
        self.last_off: int | None = None
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        self.file_first_iters: list[int] = []
        self.overlong = 0
        self.nul_files: list[str] = []
        self.base = 0  # stream offset of the next byte fed
        self.begin_file("")

    # -- file boundaries -------------------------------------------------------------------------------------
    def begin_file(self, name: str, size: int | None = None) -> None:
        """Start file ``name`` of ``size`` bytes at the current stream offset. The regions that end within its last
        ``tail_bytes`` get the failure-marker scan; with ``size`` None (a pipe, or a stream fed directly), every
        region after the file's first iteration line does."""
        self.file = name
        self.file_base = self.base
        self.tail_from = None if size is None else self.base + size - self.tail_bytes  # (a stream offset)
        self.in_setup = True
        self.file_has_iter = False
        self._first_at = 0  # where the file's first iteration line starts in the buffer that holds it
        self.carry = b""
        self.carry_base = self.base
        self.skip_line = False

    def end_file(self) -> None:
        """End the file: read its last line when it has no line end."""
        if self.carry and not self.skip_line:
            line = self.carry + b"\n"
            self._checked(line, 0, len(line), self.carry_base)
        self.carry = b""

    # -- byte input ------------------------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        start = 0
        base = self.base
        self.base += len(data)
        if self.carry or self.skip_line:
            i = data.find(b"\n")
            if i == -1:
                i = data.find(b"\r")
            if i == -1:
                self._grow_carry(data, base)
                return
            if not self.skip_line:
                line = self.carry + data[: i + 1]
                self._checked(line, 0, len(line), self.carry_base)
            self.skip_line = False
            self.carry = b""
            start = i + 1
        cut = data.rfind(b"\n") + 1
        if cut <= start:
            self._grow_carry(data[start:], base + start)
            return
        self._checked(data, start, cut, base)
        if cut < len(data):
            self.carry = data[cut:]
            self.carry_base = base + cut
            if len(self.carry) > MAX_LINE:
                self._grow_carry(b"", base + cut)

    def _grow_carry(self, data: bytes, base: int) -> None:
        if self.skip_line:
            return
        if not self.carry:
            self.carry_base = base
        self.carry += data
        if len(self.carry) <= MAX_LINE:
            return
        cut = self.carry.rfind(b"\r") + 1  # \r-only progress output: cut at the last \r
        if cut:
            self._checked(self.carry, 0, cut, self.carry_base)
            self.carry_base += cut
            self.carry = self.carry[cut:]
        if len(self.carry) > MAX_LINE:
            self.overlong += 1
            self.carry = b""
            self.skip_line = True

    # -- one region of complete lines ------------------------------------------------------------------------
    def _checked(self, buf: bytes, pos: int, end: int, base: int) -> None:
        """Process [pos, end) without its lines longer than MAX_LINE (no \n or \r within 1 MiB): those are
        dropped and counted, wherever the chunk boundaries fall."""
        start = p = pos
        while end - p > MAX_LINE:
            window = p + MAX_LINE
            q = buf.rfind(b"\n", p, window)
            if q == -1:
                q = buf.rfind(b"\r", p, window)
            if q != -1:
                p = q + 1
                continue
            if p > start:
                self._region(buf, start, p, base)
            self.overlong += 1
            ends = [i for i in (buf.find(b"\n", window, end), buf.find(b"\r", window, end)) if i != -1]
            p = start = (min(ends) + 1) if ends else end
        if end > start:
            self._region(buf, start, end, base)

    def _region(self, buf: bytes, pos: int, end: int, base: int) -> None:
        if buf.find(b"\x00", pos, end) != -1 and self.file not in self.nul_files:
            self.nul_files.append(self.file)
        self.quiet = None  # set by the bulk path: lines of the region that hold no marker, its "\n"
        self._iterations(buf, pos, end, base)
        if self.in_setup:
            # markers and config lines before the file's first iteration line; the rest of the region is tail
            stop = max(pos, buf.rfind(b"\n", pos, self._first_at) + 1) if self.file_has_iter else end
            self.bag.scan(buf, pos, stop, base, self.file)
            for m in _CONFIG_RE.finditer(buf, pos, stop):
                key = m.group(1).decode()
                if key not in self.config:
                    value = _CONFIG_VALUE_RE.match(clean_line(m.group(2)))
                    self.config[key] = value.group(1) if value else ""
            self.in_setup = not self.file_has_iter
            if self.in_setup or stop == end:
                return
            pos = stop
        if self.tail_from is not None and base + end <= self.tail_from:
            return  # the region ends before the file's last ``tail_bytes``: no marker scan
        quiet = self.quiet
        if quiet is not None and quiet[2].size and quiet[2][0] < pos:  # (lines before the first iteration line)
            quiet = (*(v[quiet[0] >= pos] for v in quiet[:2]), quiet[2][quiet[2] >= pos])
        self.bag.scan(buf, pos, end, base, self.file, quiet)

    def _step_lines(self, buf: bytes, pos: int, end: int) -> list[tuple[bytes, bytes]]:
        """The Step Time lines' (seconds, TFLOP/s/GPU or b"") in ``buf[pos:end]``, counted (one ``findall``;
        their positions are found lazily, by :meth:`_iterations`, only as far as they are paired)."""
        found = _STEP_RE.findall(buf, pos, end)
        if not len(self.it):  # Step Time lines become the steps only in a log without iteration lines
            self.step_only.extend([float(s) * 1000.0 for s, _ in found])
            self.step_only_tflops.extend([float(t) if t else _NAN for _, t in found])
        self.step_lines += len(found)
        return found

    def _iterations(self, buf: bytes, pos: int, end: int, base: int) -> None:
        if len(self.it) and not self._layout_without_tflops:
            # every iteration line so far carries its throughput: Step Time lines add nothing and are not read
            # (``step_lines`` counts the lines read; skipping the count saves a pass over the bytes)
            steps: list[tuple[bytes, bytes]] = []
            if self._fast is not None and self.file_has_iter:
                self._fast_region(self._fast, buf, pos, end, base)
                return
        else:
            steps = self._step_lines(buf, pos, end)
        at = _STEP_RE.finditer(buf, pos, end) if steps else iter(())
        step = next(at, None)
        j = 0
        last = None
        for m in ITER_RE.finditer(buf, pos, end):
            unit, mem_rest, n, total, rest = m.groups()
            if n is None:
                self._memory(unit, mem_rest)
                continue
            while step is not None and step.start() < m.start():
                tflops = step.group(2)
                self.pending = float(tflops) if tflops is not None else _NAN
                j += 1
                step = next(at, None)
            if self._line(n, total, rest, buf, m.start(), pos, base):
                last = m
                if self._fast is not None and not self._layout_without_tflops and self.file_has_iter:
                    # the rest of the region as every later region, so that the first region is not read line
                    # by line (about 1,700 lines of a typical log's first 2 MiB)
                    self._last_line(last, buf, pos, base)
                    self._fast_region(self._fast, buf, m.end(), end, base)
                    return
        if j < len(steps):
            self.pending = float(steps[-1][1]) if steps[-1][1] else _NAN
        self._last_line(last, buf, pos, base)

    def _line(self, n: bytes, total: bytes, rest: bytes, buf: bytes, at: int, pos: int, base: int,
              glued: bool = False) -> bool:
        """One iteration line ``iteration N/ M |rest`` starting at ``buf[at]``; False when it is damaged.
        ``glued``: ``rest`` is the head of a line another print was glued to (:meth:`_glued`)."""
        if b"\x1b" in rest:
            rest = _ANSI_B.sub(b"", rest)
        if len(n) > 18 or len(total) > 18:  # int64 holds any 18-digit number; a longer one is damage
            self.damaged += 1
            return False
        if len(rest) > 65536 or rest.translate(None, _LINE_OK):
            return self._glued(n, total, rest, buf, at, pos, base)
        parts = rest.replace(b"|", b":").split(b":")
        if len(parts) != 2 * rest.count(b"|") + 1 or parts[-1].strip():
            # a field without exactly one ':' or text after the last '|' (truncated), unless another print follows
            return self._glued(n, total, rest, buf, at, pos, base)
        keys = parts[0::2]
        layout = self._last_layout if keys == self._last_keys and not glued else self._layout(keys, glued)
        if layout is None:
            self.damaged += 1
            return False
        floats = _floats(parts[1::2])
        if floats is None:
            self.damaged += 1
            return False
        row = len(self.it)
        total_value = sum(floats)
        if total_value != total_value or total_value in _INFS:
            self.nonfinite_rows.append(row)  # "nan"/"inf" printed in some field
        floats.append(_NAN)
        self.it.append(int(n))
        self.total.append(int(total))
        layout.rows.add(row)
        for column, value in zip(layout.columns, layout.getter(floats), strict=True):
            column.append(value)
        if layout.glued:
            self.partial_rows.append(row)
        elif layout.has_tflops:
            self._fast = layout
        pending = self.pending
        if pending is not None:
            if not layout.has_tflops and pending == pending:
                self.step_tflops_rows.append(row)
                self.step_tflops_vals.append(pending)
            self.pending = None
        if not self.file_has_iter:
            self.file_has_iter = True
            self._first_at = at
            self.file_first_iters.append(int(n))
            if self.first_off is None:
                self.first_off = base + at
                self.first_ts = _timestamp(buf, at, pos)
        return True

    def _glued(self, n: bytes, total: bytes, rest: bytes, buf: bytes, at: int, pos: int, base: int) -> bool:
        """An iteration line with another print glued after one of its ``|`` separators, as ranks that share a
        stream print (``... | number of nan iterations: 0 |[rank0]: text`` or ``... |iteration 6/ 10 | ...``). The
        line up to that ``|`` is read when it passes every check on its own; a following glued iteration line is read
        too. Anything else is damage (counted): a print cut into the middle of a field is never read."""
        cut = _GLUE_RE.search(rest) or PRINT_AFTER_FIELD_RE.search(rest) or PRINT_AFTER_LAST_RE.search(rest)
        if cut is None or len(rest) > 65536:
            self.damaged += 1
            return False
        head, tail = rest[: cut.start() + 1], rest[cut.start() + 1:]
        ok = self._line(n, total, head, buf, at, pos, base, glued=True)
        nxt = ITER_RE.search(tail)
        if nxt is not None and nxt.group(3) is not None:
            self._line(nxt.group(3), nxt.group(4), nxt.group(5), buf, at, pos, base)
        return ok

    def _last_line(self, last: re.Match[bytes] | None, buf: bytes, pos: int, base: int) -> None:
        if last is not None:
            self.last_off = base + last.start()
            self.last_ts = _timestamp(buf, last.start(), pos) or self.last_ts

    def _layout(self, keys: list[bytes], glued: bool = False) -> _Layout | None:
        """The layout of a key sequence (cached); None when the sequence lacks the elapsed-time field.

        ``glued``: the keys of a glued line's head. They get a layout of their own (``glued``: its rows are
        partial, never dropped as truncated, and neither make the bulk path's layout nor turn Step Time reading
        on), unless a whole line already has exactly these keys."""
        key = tuple(keys)
        layout = self.layouts.get(key)
        if layout is None and glued:
            layout = self.layouts.get((_GLUED,) + key)
            if layout is None:
                layout = _make_layout(keys)
                if layout is None:
                    return None
                layout.glued = True
                self.layouts[(_GLUED,) + key] = layout
            return layout
        if layout is None:
            layout = _make_layout(keys)
            if layout is None:
                return None
            self.layouts[key] = layout
            self._layout_without_tflops |= not layout.has_tflops
        self._last_keys, self._last_layout = keys, layout
        return layout

    def _memory(self, unit: bytes, rest: bytes) -> None:
        m = (_MEM_GB_RE if unit == b"GB" else _MEM_MB_RE).search(rest)
        if m is not None:
            self._peak([m.group(1)], unit)

    # -- columns ---------------------------------------------------------------------------------------------
    def _truncated(self, layout: _Layout) -> bool:
        """True when ``layout``'s keys are a strict prefix of another layout's keys: its lines were cut at a "|"."""
        n = len(layout.keys)
        return not layout.glued and any(len(o.keys) > n and o.keys[:n] == layout.keys and len(o.rows)
                                        and not o.glued for o in self.layouts.values())

    def drop_truncated(self) -> None:
        """Count the rows of truncated layouts as damaged and forget them (call once, before :meth:`columns`)."""
        for layout in self.layouts.values():
            if len(layout.rows) and self._truncated(layout):
                self.damaged += len(layout.rows)
                layout.clear()

    def columns(self) -> dict[str, np.ndarray]:
        """Raw columns in line order (duplicates not yet removed): iteration, train_iters, the standard fields,
        ``tflops`` and ``loss:<key>`` extra losses; NaN where a line lacks a field. The layouts' values are handed
        over (views where one layout holds every row, the usual log) and the layouts emptied, so that a column
        is freed when its caller drops it."""
        n = len(self.it)
        cols: dict[str, np.ndarray] = {
            "iteration": np.frombuffer(self.it, dtype=np.int64) if n else np.zeros(0, np.int64),
            "train_iters": self.total.take(),
        }
        used = [layout for layout in self.layouts.values() if len(layout.rows)]
        self.tflops_from_lines = any(layout.has_tflops for layout in used)
        standard = [n_ for n_, _ in STANDARD_FIELDS] + ["tflops"]
        if len(used) == 1 and len(used[0].rows) == n:
            # one layout holds every row in line order: its columns are views, no copy
            cols |= {name: values.take() for name, values in zip(used[0].names, used[0].columns, strict=True)}
            used[0].clear()
            for name in standard:
                cols.setdefault(name, np.broadcast_to(np.nan, (n,)))
            covered = None
        else:
            for name in standard:
                cols[name] = np.full(n, np.nan)
            covered = np.zeros(n, dtype=bool)  # rows of dropped (truncated) layouts are not covered
            for layout in used:
                rows = layout.rows.numbers()
                covered[rows] = True
                for name, values in zip(layout.names, layout.columns, strict=True):
                    cols.setdefault(name, np.full(n, np.nan))[rows] = values.take()
                del rows
                layout.clear()  # release the raw columns as we go
        cols["nonfinite"] = np.zeros(n, dtype=bool)
        cols["nonfinite"][np.array(self.nonfinite_rows, dtype=np.int64)] = True
        cols["partial"] = np.zeros(n, dtype=bool)
        cols["partial"][np.array(self.partial_rows, dtype=np.int64)] = True
        if len(self.step_tflops_rows):
            if not cols["tflops"].flags.writeable:
                cols["tflops"] = np.array(cols["tflops"])
            cols["tflops"][np.array(self.step_tflops_rows, dtype=np.int64)] = np.array(self.step_tflops_vals)
        return cols if covered is None or covered.all() else {k: v[covered] for k, v in cols.items()}

    # the bulk path: a region whose iteration lines all have the last accepted layout

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
