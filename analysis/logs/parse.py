"""Streaming parser for Megatron-LM and Megatron-Bridge training logs (FACTS.md §6, CONTRACTS.md §7).

It reads bytes in chunks and keeps only per-iteration records (columnar arrays), the peak memory, a few config
fields and a bounded set of failure-marker lines, so its memory grows with iterations, not with log bytes.

Lines it understands (sources: Megatron-LM ``training_log``, Megatron-Bridge ``train_utils``, the real logs in
tests/analysis/fixtures):

- iteration lines ``[ts] iteration N/ M | key: value | ... |`` with an optional timestamp, an optional throughput
  field (``throughput per GPU (TFLOP/s/GPU): X`` or ``compute per GPU (TFLOP/s/GPU): X (avg Y)``), any extra loss
  keys (keys may contain spaces), any prefix before ``iteration`` (``[rankN]:``, ``[defaultN]:``, ``N: ``), ANSI
  colour codes, and ``\\r`` progress output (``\\r`` ends a line like ``\\n``);
- memory lines ``memory (MB) | ... | max allocated: X |`` (MiB, divided by 1024) and the Bridge variant
  ``memory (GB) | ... | mem-max-allocated-gigabytes: X |``; the peak is the largest max-allocated value of any rank;
- the Bridge line ``Step Time : 12.78s GPU utilization: 528.1MODEL_TFLOP/s/GPU`` (spacing varies). It is paired with
  the iteration line that follows it, so a step is never counted twice; its numbers are used only when the log has
  no iteration lines (step time) or the iteration line has no throughput field (TFLOP/s/GPU);
- config dumps (Bridge ``key: value  (Mcore default: ...)``, Megatron-LM ``key ........ value``) for CONFIG_KEYS;
- failure markers (``analysis.logs.markers``), kept as bounded evidence.

Damage rules: an iteration line is dropped and counted in ``damaged_lines`` unless every character is one that a
Megatron iteration line can hold (ASCII letters, digits, `` _/().,+-:|``), each ``|``-separated field is one
``key: number`` pair (optionally ``(avg number)``), the line ends with ``|`` and it has the elapsed-time field.
A line cut right after a ``|`` is dropped when other lines of the log start with the same keys and go on; a line
with another print glued after a ``|`` (``grammar._GLUE_RE``) keeps the fields before it (``IterationSeries.partial``).
Truncated lines, another rank's output or binary bytes spliced into the line therefore never yield a number.
When several lines give the same iteration number, the last one wins (a later restart file re-ran it).

Speed: failure markers are searched in every byte before a file's first iteration line (set-up errors) and in the
regions (chunks of complete lines) that end within the last ``tail_bytes`` of each file (a fatal error ends the
stream); in between only the iteration, memory and Step Time patterns run. Lines over 1 MiB without a line end are
dropped and counted. A regular file is read up to its size when it was opened (a log that is still being written
is parsed as it was then).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from analysis.logs.grammar import CONFIG_KEYS, EXTRA_PREFIX, MAX_LINE
from analysis.logs.records import IterationRecord, IterationSeries, ParsedLog
from analysis.logs.scanner import Scanner

__all__ = [
    "CONFIG_KEYS",
    "IterationRecord",
    "IterationSeries",
    "ParsedLog",
    "group_restart_files",
    "parse_files",
    "parse_iteration_line",
    "parse_lines",
    "restart_key",
]

CHUNK_BYTES = 2 << 20  # fits the L2 cache with its temporaries: about 2% faster than 4 MiB (benchmarks/parse.py)
TAIL_BYTES = 32 << 20  # failure markers are searched in this many trailing bytes of each file

_RESTART_RE = re.compile(r"^(?P<stem>.+?)_(?P<job>\d+)_(?P<restart>\d+)\.out$")
_INT_COLUMNS = ("train_iters", "skipped", "nan_iterations", "global_batch_size")


def _series(scanner: Scanner) -> tuple[IterationSeries, str | None]:
    scanner.drop_truncated()
    cols = scanner.columns()
    it = cols.pop("iteration")
    if it.size == 0 and len(scanner.step_only):
        # No iteration lines at all: the Bridge Step Time lines are the steps, numbered 1..n.
        n = len(scanner.step_only)
        it = np.arange(1, n + 1, dtype=np.int64)
        cols = {k: np.full(n, np.nan) for k in cols if not k.startswith(EXTRA_PREFIX)}
        cols["train_iters"] = np.full(n, -1.0)
        cols["step_ms"] = np.array(scanner.step_only, dtype=np.float64)
        cols["tflops"] = np.array(scanner.step_only_tflops, dtype=np.float64)
        cols["nonfinite"] = np.zeros(n, dtype=bool)
        cols["partial"] = np.zeros(n, dtype=bool)
        source = "step_time_line" if np.isfinite(cols["tflops"]).any() else None
    else:
        if it.size > 1 and not (it[1:] > it[:-1]).all():  # (no int64 temporary of the size of the column)
            # one record per iteration number; the later line (a later restart) wins
            _, rev_idx = np.unique(it[::-1], return_index=True)
            order = np.sort(it.size - 1 - rev_idx)
            order = order[np.argsort(it[order], kind="stable")]
            it = it[order]
            cols = {k: v[order] for k, v in cols.items()}
        from_steps = len(scanner.step_tflops_rows) > 0
        from_lines = scanner.tflops_from_lines
        source = "mixed" if from_steps and from_lines else "iteration_line" if from_lines else (
            "step_time_line" if from_steps else None
        )
    ints = {}
    for k in _INT_COLUMNS:  # one float column at a time is converted and freed (peak memory)
        values = cols.pop(k)
        ints[k] = _as_int64(values) if values.dtype.kind == "f" else values
        del values
    extras = {k.removeprefix(EXTRA_PREFIX): v for k, v in cols.items() if k.startswith(EXTRA_PREFIX)}
    series = IterationSeries(
        iteration=it,
        step_ms=cols["step_ms"],
        tflops=cols["tflops"],
        lm_loss=cols["lm_loss"],
        grad_norm=cols["grad_norm"],
        nonfinite=cols["nonfinite"],
        extra_losses=extras,
        partial=cols["partial"] if cols["partial"].any() else None,
        **ints,
    )
    return series, source


def _result(scanner: Scanner, files: Sequence[str], notes: list[str], unreadable: list[str]) -> ParsedLog:
    series, source = _series(scanner)
    markers = sorted((m for first, last in scanner.kept.values() for m in (*first, *last)), key=lambda m: m.offset)
    if scanner.damaged:
        notes.append(f"{scanner.damaged} damaged iteration line(s) dropped (truncated, interleaved or binary)")
    if scanner.overlong:
        notes.append(f"{scanner.overlong} line(s) longer than {MAX_LINE} bytes skipped")
    for name in scanner.nul_files:
        notes.append(f"binary data (NUL bytes) in {name or 'input'}")
    totals = series.train_iters
    last = totals.size - 1 if totals.size and totals[-1] > 0 else (np.flatnonzero(totals > 0)[-1:].tolist() or [-1])[0]
    return ParsedLog(
        files=tuple(files),
        series=series,
        train_iters=int(totals[last]) if last >= 0 else None,
        peak_mem_gb=scanner.peak_gb,
        memory_lines=scanner.memory_lines,
        config=dict(scanner.config),
        markers=tuple(markers),
        marker_counts=dict(scanner.counts),
        first_iteration_offset=scanner.first_off,
        last_iteration_offset=scanner.last_off,
        first_timestamp=scanner.first_ts,
        last_timestamp=scanner.last_ts,
        damaged_lines=scanner.damaged,
        step_time_lines=scanner.step_lines,
        tflops_source=source,
        restart_first_iterations=tuple(scanner.file_first_iters[1:]),
        bytes_read=scanner.base,
        notes=tuple(notes),
        unreadable=tuple(unreadable),
    )


def parse_files(paths: Sequence[str | Path], *, tail_bytes: int = TAIL_BYTES) -> ParsedLog:
    """Parse the log files of one run, in the order given (see :func:`group_restart_files` for restarts).

    Unreadable files are listed in ``unreadable`` with the OS error and empty files get a note; bad content never
    raises. ``tail_bytes``: how many trailing bytes of each file are searched for failure markers.
    """
    scanner = Scanner(tail_bytes)
    notes: list[str] = []
    unreadable: list[str] = []
    names = [str(p) for p in paths]
    for name in names:
        read = 0
        try:
            with open(name, "rb") as fh:
                info = os.fstat(fh.fileno())
                size = info.st_size if stat.S_ISREG(info.st_mode) else None  # a pipe: read to its end
                scanner.begin_file(name, size)
                while (size is None or read < size) and (chunk := fh.read(_want(read, size))):
                    read += len(chunk)
                    scanner.feed(chunk)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            unreadable.append(f"{name}: {reason}")
            notes.append(f"cannot read {name}: {reason}")
            if not read:
                scanner.begin_file(name, 0)
        scanner.end_file()  # what was read of it (all of it, nothing, or up to a read error)
        if read == 0 and not any(u.startswith(f"{name}: ") for u in unreadable):
            notes.append(f"empty file {name}")
    return _result(scanner, names, notes, unreadable)


def _want(read: int, size: int | None) -> int:
    """Bytes of the next read at file position ``read``: up to the next multiple of ``CHUNK_BYTES`` (so that the
    regions, and with them the result, do not depend on the file system's reads), at most to ``size``."""
    want = CHUNK_BYTES - read % CHUNK_BYTES
    return want if size is None else min(want, size - read)


def _as_int64(values: np.ndarray) -> np.ndarray:
    """A float column of counts as int64, -1 (unknown) where a value is NaN, infinite or beyond int64 (a
    zero-stride view of one value stays one)."""
    if values.size and values.strides == (0,):
        return np.broadcast_to(_as_int64(values[:1].copy()), values.shape)
    known = np.abs(values) < 2.0**63  # False for NaN and infinities
    if known.all():
        return values.astype(np.int64)
    return np.where(known, values, -1).astype(np.int64)


def _encode(line: str) -> bytes:
    """A str line as the bytes it was read from (``surrogateescape``), or UTF-8 with replacement for a surrogate
    that no decoding gives (U+D800..U+DC7F, U+DD00..U+DFFF)."""
    try:
        return line.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return line.encode("utf-8", "replace")


def parse_lines(lines: Iterable[str | bytes], *, name: str = "<lines>", tail_bytes: int = TAIL_BYTES) -> ParsedLog:
    """Parse an iterable of log lines (str or bytes, with or without line ends) as one file called ``name``."""
    raws = []
    for line in lines:
        raw = _encode(line) if isinstance(line, str) else bytes(line)
        raws.append(raw if raw.endswith((b"\n", b"\r")) else raw + b"\n")
    scanner = Scanner(tail_bytes)
    scanner.begin_file(name, sum(map(len, raws)))
    batch: list[bytes] = []
    size = 0
    for raw in raws:  # fed in batches of whole lines of at least CHUNK_BYTES
        batch.append(raw)
        size += len(raw)
        if size >= CHUNK_BYTES:
            scanner.feed(b"".join(batch))
            batch, size = [], 0
    if batch:
        scanner.feed(b"".join(batch))
    scanner.end_file()
    return _result(scanner, [name], [], [])


def _value(array: np.ndarray, i: int, cast=float):
    v = array[i]
    if (array.dtype.kind == "f" and np.isnan(v)) or (array.dtype.kind == "i" and v < 0):
        return None
    return cast(v)


def parse_iteration_line(line: str | bytes) -> IterationRecord | None:
    """Parse a single iteration line (any prefix, optional timestamp); None when it is not one or is damaged."""
    log = parse_lines([line])
    s = log.series
    if len(s) != 1 or log.step_time_lines:
        return None
    losses = {k: float(v[0]) for k, v in s.extra_losses.items() if not np.isnan(v[0])}
    if not np.isnan(s.lm_loss[0]):
        losses["lm loss"] = float(s.lm_loss[0])
    return IterationRecord(
        iteration=int(s.iteration[0]),
        train_iters=int(s.train_iters[0]),
        step_ms=float(s.step_ms[0]),
        tflops=_value(s.tflops, 0),
        lm_loss=_value(s.lm_loss, 0),
        grad_norm=_value(s.grad_norm, 0),
        skipped=_value(s.skipped, 0, int),
        nan_iterations=_value(s.nan_iterations, 0, int),
        global_batch_size=_value(s.global_batch_size, 0, int),
        losses=losses,
        timestamp=log.first_timestamp,
    )


def restart_key(path: str | Path) -> tuple[str, int, int]:
    """(run stem, restart, job id) of a log named ``<stem>_<jobid>_<restart>.out`` (NeMo-Run/Slurm, FACTS §5).

    Other names give (file stem, -1, -1), so they sort before every restart file of the same stem.
    """
    name = Path(path).name
    m = _RESTART_RE.match(name)
    if m:
        return m.group("stem"), int(m.group("restart")), int(m.group("job"))
    return Path(name).stem, -1, -1


def group_restart_files(paths: Iterable[str | Path]) -> dict[str, list[Path]]:
    """Group log files whose names differ only in the restart suffix; each group is ordered by restart, then job id.

    The key is the run name (the file stem without the suffix), CONTRACTS §7.
    """
    groups: dict[str, list[tuple[int, int, str, Path]]] = {}
    for p in paths:
        stem, restart, job = restart_key(p)
        groups.setdefault(stem, []).append((restart, job, str(p), Path(p)))
    return {stem: [t[3] for t in sorted(items)] for stem, items in groups.items()}
