"""Arrow kernels behind the scanner's bulk path (``analysis.logs.scanner.Scanner._add_lines``).

The iteration lines of one region that share a layout are joined with ``\\n``; numpy finds the separators, an
Arrow string array over the joined bytes (no copy) holds the keys and values, and pyarrow.compute kernels check the
keys and convert the values to float64 in C++, so no Python object is made per field (the pure-Python split and
``float`` per value cost about half of the parse time of a typical log; benchmarks/parse.py).

The answer is the one the per-line path gives, or ``None`` and the caller decides on its own:
- the text is cut after every ``:`` and ``|``, and every key part must equal the layout's key, byte for byte
  (which makes the separators, and the characters outside the values, those the per-line checks allow);
- Arrow's string-to-double cast (fast_float, correctly rounded like Python's ``float``) accepts a subset of what
  ``float`` accepts, with the same value, except ``nan(...)``; values holding ``(`` (also Megatron's
  ``X (avg Y)``) are therefore left to the caller, as are values Arrow refuses (``1_000``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def int64_bytes(digits: list[bytes]) -> bytes:
    """Native int64 bytes of decimal digit strings (``\\d+``, at most 18 digits each: the caller checks), as
    ``array("q").frombytes`` takes them; the values are ``int``'s."""
    return pc.cast(pa.array(digits, pa.binary(), memory_pool=POOL), pa.int64(), memory_pool=POOL).to_numpy().tobytes()


def _pool() -> pa.MemoryPool:
    """The Arrow memory pool of the parser's kernels: jemalloc, which returns freed pages to the system (Arrow's
    default, mimalloc, kept 15-25 MB more resident at 1 GB: peak RSS 124 vs 110 MB), or the system allocator
    where the wheel has no jemalloc; the same speed."""
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # pragma: no cover  (a build without jemalloc)
        return pa.system_memory_pool()


POOL = _pool()


def indices(values: np.ndarray) -> pa.Array:
    """An Arrow int64 array over ``values`` (int64, contiguous), without a copy and without pyarrow's numpy
    conversion, which imports ``numpy.ma`` on its first use (about 7 ms of each parsing process)."""
    values = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(values)])


class LayoutKernel:
    """Expected keys and take-indices of one layout, grown on demand for regions of up to ``capacity`` lines.

    ``raw``: the layout's keys as split from a line (``Layout.raw``): the field keys, then the text after the last
    ``|`` (usually empty).
    """

    def __init__(self, raw: tuple[bytes, ...]) -> None:
        self.keys = list(raw[:-1])
        self.trail = raw[-1]
        self.fields = len(self.keys)
        self.capacity = 0
        self.expected: pa.Array | None = None
        self.even: np.ndarray = np.zeros(0, np.int64)
        self.odd: np.ndarray = np.zeros(0, np.int64)

    def _grow(self, count: int) -> None:
        cap = max(count, 2 * self.capacity, 256)
        # the expected parts: this layout's keys for the first line, then for each further line the text after the
        # previous line's last "|" and "\n" before its first key; taken from the f + 1 distinct ones (no Python
        # string per part)
        unit = self.keys + [self.trail + b"\n" + self.keys[0]]
        small = pa.array([k.decode("ascii") + ":" for k in unit], pa.large_string(), memory_pool=POOL)  # with ":"
        line = np.arange(self.fields, dtype=np.int64)
        later = line.copy()
        later[0] = self.fields
        self.expected = pc.take(small, indices(np.concatenate([line, np.tile(later, cap - 1)])), memory_pool=POOL)
        n = cap * self.fields
        self.even = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
        self.odd = np.arange(1, 2 * n, 2, dtype=np.int64)
        self.capacity = cap

    def table(self, text, count: int) -> np.ndarray | None:
        """The values of ``count`` joined lines as a (count, fields) float64 array; None when a key differs from the
        layout's or some value is not one Arrow converts exactly as ``float`` does (then the caller decides).

        ``text`` (bytes-like): the lines' text after ``iteration N/ M |``, joined with ``\\n``. An answer here
        means what the per-line checks ask: the text is cut after every ``:`` and ``|`` into ``2 * fields`` parts
        per line; every key part equals the layout's key with its ``:`` (so the keys, their separators and the
        text between two lines are the layout's, all allowed characters); every value part, trimmed of blanks and
        its closing ``|``, is a number Arrow reads. Arrow reads only digits, signs, ``.``, ``e`` and the letters of
        ``nan``/``inf``/``infinity``, all allowed characters, and ``nan(...)``, which ``float`` refuses: a NaN
        whose text holds ``(`` is left to the caller (so is ``X (avg Y)``).
        """
        if count > self.capacity:
            self._grow(count)
        n = count * self.fields
        # the parts, without a copy: a string array over ``text`` cut after every ":" and "|", so that it holds
        # "key:", " value |", "key:", ..., " value |", then the text after the last "|"
        data = np.frombuffer(text, dtype=np.uint8)
        cuts = np.flatnonzero((data == 58) | (data == 124))  # ":" and "|"
        if len(cuts) != 2 * n:
            return None
        offsets = np.empty(2 * n + 2, dtype=np.int64)
        offsets[0], offsets[-1] = 0, len(text)
        np.add(cuts, 1, out=offsets[1:-1])
        buffer = text if isinstance(text, pa.Buffer) else pa.py_buffer(text)
        parts = pa.Array.from_buffers(pa.large_string(), 2 * n + 1, [None, pa.py_buffer(offsets), buffer])
        keys = pc.take(parts, indices(self.even[: n + 1]), memory_pool=POOL)
        if not pc.all(pc.equal(keys.slice(0, n), self.expected.slice(0, n), memory_pool=POOL), memory_pool=POOL).as_py():
            return None
        if memoryview(text)[int(offsets[-2]):] != self.trail:  # the bytes after the last "|"
            return None
        values = pc.ascii_trim(pc.take(parts, indices(self.odd[:n]), memory_pool=POOL), " \t|", memory_pool=POOL)  # " value |" -> "value"
        try:
            floats = pc.cast(values, pa.float64(), memory_pool=POOL).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:
            return None
        nan = np.flatnonzero(np.isnan(floats))
        if nan.size and any(b"(" in v for v in values.take(indices(nan)).cast(pa.large_binary()).to_pylist()):
            return None  # "nan(...)": float refuses it
        return floats.reshape(count, self.fields)
