"""The grammar of the lines the parser reads (FACTS §6): Megatron iteration lines and their key layouts, memory
lines, Bridge Step Time lines, timestamps, config echo lines; the numbers they hold. Used by :mod:`analysis.logs.scanner`."""

from __future__ import annotations

import operator
import re
import struct
from array import array
from dataclasses import dataclass

import numpy as np

from analysis.logs.bulk import LayoutKernel

MAX_LINE = 1 << 20  # a line with no \n or \r within 1 MiB is dropped
MARKERS_KEPT = 8  # per marker kind: the first and the last MARKERS_KEPT lines are kept

_NUM = rb"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# "iteration N/ M | ..." (Megatron training_log) and "[Rank 0] (after N iterations) memory (MB) | ..." in one pass
ITER_RE = re.compile(rb"iteration(?:s\)\s*memory \(([MG]B)\)([^\r\n]*)|[ \t]+(\d+)[ \t]*/[ \t]*(\d+)[ \t]*\|([^\r\n]*))")
# Bridge: "Step Time : 12.78s GPU utilization: 528.1MODEL_TFLOP/s/GPU" (spacing and the MODEL_ prefix vary)
_STEP_RE = re.compile(
    rb"Step Time\s*:\s*(" + _NUM + rb")\s*s(?![\w.])(?:\s*GPU utilization\s*:\s*(" + _NUM + rb")\s*(?:MODEL_)?TFLOP/s/GPU)?"
)
# a max-allocated value counts only when the field is closed by "|" (a truncated number is never read)
_MEM_MB_RE = re.compile(rb"\|\s*max allocated:\s*(" + _NUM + rb")\s*\|")
_MEM_GB_RE = re.compile(rb"mem-max-allocated-gigabytes:\s*(" + _NUM + rb")\s*\|")
_TS_RE = re.compile(rb"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)\][ \t]*$")
_ANSI_B = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
# every character an intact Megatron iteration line can hold after "iteration N/ M |"
_LINE_OK = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 _/().,+-:|\t"
_NAN = float("nan")
# translate() deletes these: of a text with only allowed characters, ":|\n(" remain, and nothing else
_LINE_OK_MARKS = _LINE_OK.replace(b":", b"").replace(b"|", b"").replace(b"(", b"")
# ITER_RE for a region without "\r" (there ``[^\r\n]`` is ``[^\n]``, which the regex engine scans about twice as fast)
ITER_N_RE = re.compile(ITER_RE.pattern.replace(rb"[^\r\n]", rb"[^\n]"))
_WS = rb"[ \t\f\v]*"  # a blank inside one line (``\s`` of _MEM_GB_RE / _MEM_MB_RE applied to one line's text)
# _MEM_GB_RE / _MEM_MB_RE over the "\n"-joined rests of memory lines: the first value of each line, like ``search``
# on the line (the match then takes the rest of the line, and a blank never crosses a line)
_MEM_BULK = {
    b"GB": re.compile(rb"mem-max-allocated-gigabytes:" + _WS + b"(" + _NUM + b")" + _WS + rb"\|[^\n]*"),
    b"MB": re.compile(rb"\|" + _WS + b"max allocated:" + _WS + b"(" + _NUM + b")" + _WS + rb"\|[^\n]*"),
}
_INFS = (float("inf"), float("-inf"))
# where a glued print starts after an iteration line's "|" (analysis.logs.scanner.Scanner._glued): a bracket of a rank,
# timestamp or c10/glog header ("[rank0]:", "[default3]:", "[2026-...]", "[W1121 17:30:14.409 TCPStore.cpp:141]"),
# srun's "N: " label, a bare glog header ("E1121 17:30:14.409 ..."), a Python logging level or exception line, one
# of Megatron's "> " prints, a Slurm line, or another iteration line. Megatron's own fields never start so (each is
# " key: value |" with a lower-case key), so a print cut into the middle of a field is never taken for glue.
_GLUE_RE = re.compile(
    rb"\|[ \t]*(?=\[[^\]\r\n|]{0,80}\]|\d+:[ \t]|[IWEF]\d{4} \d\d:\d\d:\d\d|iteration[ \t]+\d+[ \t]*/"
    rb"|(?:Traceback|INFO|WARNING|ERROR|DEBUG|CRITICAL|FATAL)\b|[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b"
    rb"|> |\*\*\* |srun: |slurmstepd: |NCCL )")
# any other print glued right after a "|": Megatron prints each field as " key: value |" (a blank first), so a "|"
# followed at once by anything but a blank or the line's end ends the record at its last complete field
PRINT_AFTER_FIELD_RE = re.compile(rb"\|(?=[^ \t|\r\n])")
# ... or after the last "|" a "word: text" whose text is no number: a print ("| wandb: WARNING ..."), where a field
# cut in its middle ("| lm loss: 2.3", "| lm lo", "| grad no[rank0]: ...") holds a number, no colon, or a bracket
# before its colon
PRINT_AFTER_LAST_RE = re.compile(rb"\|(?=[ \t]+[A-Za-z_][\w .-]*:[ \t]*(?![-+]?(?:\d|\.\d|nan|inf))[^\s|][^|]*$)",
                                 re.I)

# Megatron field names -> column names (Megatron-LM training_log; CASES C10 for the renamed throughput label)
STANDARD_FIELDS: tuple[tuple[str, bytes], ...] = (
    ("step_ms", b"elapsed time per iteration (ms)"),
    ("lm_loss", b"lm loss"),
    ("grad_norm", b"grad norm"),
    ("skipped", b"number of skipped iterations"),
    ("nan_iterations", b"number of nan iterations"),
    ("global_batch_size", b"global batch size"),
)
_TFLOPS_SUFFIX = b"(TFLOP/s/GPU)"  # "throughput per GPU (TFLOP/s/GPU)" and "compute per GPU (TFLOP/s/GPU)"
_NOT_LOSSES = frozenset((b"lm loss", b"loss scale"))  # "loss scale" is the fp16 scaler, not a loss
EXTRA_PREFIX = "loss:"

CONFIG_KEYS = (
    "moe_token_dispatcher_type",
    "moe_flex_dispatcher_backend",
    "overlap_moe_expert_parallel_comm",
    "delay_wgrad_compute",
    "moe_shared_expert_overlap",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "num_moe_experts",
    "moe_router_topk",
    "global_batch_size",
    "micro_batch_size",
    "seq_length",
    "train_iters",
    "world_size",
    "data_parallel_size",
    "recompute_granularity",
    "cuda_graph_impl",
)
# Bridge "  key: 'value'  (Mcore default: ...)" and Megatron-LM "  key ............ value" dumps
_CONFIG_RE = re.compile(
    rb"(?<![\w.])(" + b"|".join(k.encode() for k in CONFIG_KEYS) + rb")[ \t]*(?::|\.{3,})[ \t]*([^\r\n]*)"
)
_CONFIG_VALUE_RE = re.compile(r"^'?([^'\s]*)'?")


def _num(v: bytes) -> float:
    """A field value as float; ``X (avg Y)`` gives X after checking that Y is a number too."""
    if b"(" in v:
        head, _, avg = v.partition(b"(")
        float(avg.strip(b" \t)").removeprefix(b"avg"))
        v = head
    return float(v)


def _floats(values: list[bytes]) -> list[float] | None:
    """The field values as floats (see :func:`_num`); None when one is not a number."""
    try:
        return list(map(float, values))
    except ValueError:
        try:
            return [_num(v) for v in values]
        except ValueError:
            return None


class Rows:
    """The rows (line numbers among a stream's accepted iteration lines) of one layout, in increasing order, held as
    runs ``[start, stop)``: 16 bytes per run instead of 8 per row (one run for a log of one layout)."""

    __slots__ = ("n", "runs")

    def __init__(self) -> None:
        self.runs = array("q")  # start, stop, start, stop, ...
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def add(self, start: int, count: int = 1) -> None:
        """Append rows ``start .. start + count - 1`` (after every row held)."""
        if len(self.runs) and self.runs[-1] == start:
            self.runs[-1] = start + count
        else:
            self.runs.extend((start, start + count))
        self.n += count

    def numbers(self) -> np.ndarray:
        """The rows as an int64 array."""
        runs = np.frombuffer(self.runs, np.int64).reshape(-1, 2) if len(self.runs) else np.zeros((0, 2), np.int64)
        lengths = runs[:, 1] - runs[:, 0]
        return np.repeat(runs[:, 0] - np.cumsum(lengths) + lengths, lengths) + np.arange(self.n, dtype=np.int64)


_DOUBLE, _BITS = struct.Struct("<d"), struct.Struct("<q")  # a float's bits, to compare values bit for bit


class Column:
    """A column of float64 (``dtype`` "d") or int64 ("q") values, appended one at a time or in blocks, held
    compactly: a block of one repeated value (bit for bit) as that value and a count, every other value in one
    growing array. Constant columns (batch size, skipped and NaN counts, a constant extra loss, the total
    iterations) so cost nothing per row, and :meth:`take` hands a column over without a copy (memory grows with
    the varying values only, so that a log of several GB fits)."""

    __slots__ = ("blocks", "dense", "dtype", "n", "run")

    def __init__(self, dtype: str = "d") -> None:
        self.dtype = dtype
        self.dense = array(dtype)  # the values not in a constant block, in order
        self.blocks: list[list[int | None]] = []  # [bits of the repeated value, or None for dense values, count]
        self.n = 0  # values in blocks
        self.run: list = [None, 0, 0.0]  # values appended one at a time, not yet in a block: [bits, count, value]

    def __len__(self) -> int:
        return self.n + self.run[1]

    def _np(self) -> type:
        return np.float64 if self.dtype == "d" else np.int64

    def append(self, value: float) -> None:
        bits = _BITS.unpack(_DOUBLE.pack(value))[0] if self.dtype == "d" else value
        run = self.run
        if run[1] and run[0] == bits:
            run[1] += 1
        else:
            self._commit()
            self.run = [bits, 1, value]

    def _commit(self) -> None:
        bits, count, value = self.run
        if not count:
            return
        self.run = [None, 0, 0.0]
        last = self.blocks[-1] if self.blocks else None
        if count > 1 or (last is not None and last[0] == bits):
            self._count(bits, count)
        else:
            self.dense.append(value)
            self._count(None, 1)

    def _count(self, bits: int | None, count: int) -> None:
        if self.blocks and self.blocks[-1][0] == bits:
            self.blocks[-1][1] += count
        else:
            self.blocks.append([bits, count])
        self.n += count

    def extend(self, values: np.ndarray) -> None:
        """Append a block of values (an array of ``dtype``'s kind)."""
        if not values.size:
            return
        bits = values.view(np.int64)
        first = int(bits[0])
        last = self.blocks[-1][0] if self.blocks else None
        if (values.size > 1 or first in (self.run[0], last)) and (bits == first).all():
            if self.run[1] and self.run[0] == first:
                self._count(first, self.run[1])
                self.run = [None, 0, 0.0]
            self._commit()
            self._count(first, values.size)
        else:
            self._commit()
            self.dense.frombytes(memoryview(np.ascontiguousarray(values, self._np())).cast("B"))  # (no copy between)
            self._count(None, values.size)

    def take(self) -> np.ndarray:
        """All values as one array: a view of the dense values when there is no constant block, a read-only
        zero-stride view of one value (``np.broadcast_to``, no memory per row) when the column is one constant
        block; the column is empty afterwards."""
        self._commit()
        dense = np.frombuffer(self.dense, self._np()) if len(self.dense) else np.zeros(0, self._np())
        blocks, n = self.blocks, self.n
        self.dense, self.blocks, self.n = array(self.dtype), [], 0
        if all(bits is None for bits, _ in blocks):
            return dense
        if len(blocks) == 1:
            return np.broadcast_to(np.array([blocks[0][0]], np.int64).view(self._np()), (n,))
        out = np.empty(n, self._np())
        out_bits = out.view(np.int64)
        at = used = 0
        for bits, count in blocks:
            if bits is None:
                out[at:at + count] = dense[used:used + count]
                used += count
            else:
                out_bits[at:at + count] = bits
            at += count
        return out



@dataclass(slots=True)
class _Layout:
    """One key sequence of iteration lines and the columns picked from it: ``columns[j]`` holds the values of
    ``names[j]`` (float64, one per row of ``rows``)."""

    keys: tuple[bytes, ...]  # stripped Megatron keys of the line, in order
    names: tuple[str, ...]  # column names, in getter order
    getter: object  # callable: list of floats (+ NaN sentinel) -> tuple in ``names`` order
    has_tflops: bool
    rows: Rows
    columns: list[Column]
    raw: tuple[bytes, ...] = ()  # the keys as split from the line, with the text after the last "|"
    picks: tuple[int, ...] = ()  # the field of each column, in ``names`` order
    kernel: LayoutKernel | None = None  # the bulk path's Arrow kernels, made on first use
    quiet: bool | None = None  # its lines hold no failure-marker needle (analysis.logs.scanner._quiet)
    glued: bool = False  # the heads of glued lines (fields up to the glued print): partial rows, never "truncated"

    def clear(self) -> None:
        """Forget the rows and values."""
        self.rows = Rows()
        self.columns = [Column() for _ in self.names]


def _make_layout(keys: list[bytes]) -> _Layout | None:
    """Columns for a key sequence; None when it lacks the elapsed-time field (then the line is damaged)."""
    stripped = [k.strip() for k in keys[:-1]]
    if any(b"\t" in k for k in stripped):
        return None  # a tab inside a field name is damage (Megatron separates fields with ' | ', never tabs)
    index: dict[bytes, int] = {}
    for i, k in enumerate(stripped):
        index.setdefault(k, i)
    if b"elapsed time per iteration (ms)" not in index:
        return None
    names: list[str] = []
    picks: list[int] = []
    for name, key in STANDARD_FIELDS:
        if key in index:
            names.append(name)
            picks.append(index[key])
    tflops = next((i for k, i in index.items() if k.endswith(_TFLOPS_SUFFIX)), None)
    if tflops is not None:
        names.append("tflops")
        picks.append(tflops)
    for k, i in index.items():
        if b"loss" in k and k not in _NOT_LOSSES:
            names.append(EXTRA_PREFIX + k.decode())
            picks.append(i)
    getter = operator.itemgetter(*picks) if len(picks) > 1 else (lambda f, i=picks[0]: (f[i],))
    return _Layout(tuple(stripped), tuple(names), getter, tflops is not None, Rows(), [Column() for _ in names],
                   tuple(keys), tuple(picks))


def _timestamp(buf: bytes, at: int, pos: int) -> str | None:
    m = _TS_RE.search(buf, max(pos, at - 48), at)
    return m.group(1).decode() if m else None
