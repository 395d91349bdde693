"""Severity and phase of a finding: the log level of its lines, and whether it came after training ended.

Log levels, read from the line's own header after any launcher prefix (``[rank3]:``, ``[default3]:``, srun's
``3: ``):

- glog / c10 headers ``W1121 17:30:14.409846 4242 file.cpp:141]``, PyTorch's bracketed form
  ``[W1121 17:30:14.409846000 TCPStore.cpp:141]`` and its older undated one ``[W socket.cpp:464]``
  (c10/util/Logging.cpp: ``I`` info, ``W`` warning, ``E`` error, ``F`` fatal);
- Python logging (``WARNING:name:msg``, ``[WARNING]``, ``... - WARNING - ...``, ``WARNING 2026-...``) and the
  warnings module (``UserWarning: ...``, ``FutureWarning: ...``);
- NCCL prints its failures at WARN (``host:pid:tid [0] file.cc:123 NCCL WARN ...``; nccl src/include/debug.h has no
  ERROR level), so ``NCCL WARN`` is an error, not a warning.

A line without a level (a Python exception line, Slurm's ``error:`` lines) counts as an error. A finding is
warning-level when every one of its lines is.

Phase: in a run whose log reaches its final iteration, a finding after the last iteration line (Megatron's
``[after training is done]``, the final checkpoint save, the process-group teardown) is teardown. There a
warning-level finding is noise (PyTorch's TCPStore ``recvValue failed ... Connection reset by peer`` and
ProcessGroupNCCL's ``Failed to check the "should dump" flag on TCPStore`` are printed at W when the store's server
rank exits first) and does not make a good run a warning; an error-level finding there still does, and the exit
(a non-zero code, a signal, a kill) always speaks for itself (:mod:`analysis.judge.classify`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

WARNING, ERROR, INFO = "warning", "error", "info"

# launcher prefixes: "[rank3]:", "[default3]:", srun's "3: ", any number of them, and a leading timestamp bracket
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s*|\d+:\s+|\[\d{4}-\d\d-\d\d[ T][\d:.,]+\]\s*)+")
_GLOG = re.compile(r"^\[?([IWEF])(?:\d{4} \d\d:\d\d:\d\d| [\w.-]+\.(?:cpp|cc|cu|h|hpp):\d+\])")
_PY_LEVEL = re.compile(r"^(?:\[[^\]]{0,40}\]\s*)*\[?(WARNING|WARN|ERROR|CRITICAL|FATAL|INFO|DEBUG)\]?(?=[:\s\]])"
                       r"|\s-\s(WARNING|ERROR|CRITICAL|INFO|DEBUG)\s-\s|\[(WARNING|ERROR|CRITICAL|INFO|DEBUG)\]")
_PY_WARNING = re.compile(r"\b(?:User|Future|Deprecation|Runtime|Resource)?Warning: ")
_LEVELS = {"I": INFO, "W": WARNING, "E": ERROR, "F": ERROR, "WARNING": WARNING, "WARN": WARNING, "ERROR": ERROR,
           "CRITICAL": ERROR, "FATAL": ERROR, "INFO": INFO, "DEBUG": INFO}
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+')


def line_level(text: str) -> str:
    """The level of one log line: "info", "warning" or "error" (module docstring); "error" when it has none."""
    body = _PREFIX.sub("", text.strip(), count=1)
    if "NCCL WARN" in body:
        return ERROR
    g = _GLOG.match(body)
    if g:
        return _LEVELS[g.group(1)]
    p = _PY_LEVEL.search(body)
    if p:
        return _LEVELS[next(x for x in p.groups() if x)]
    if _PY_WARNING.search(body) and not re.search(r"\b\w*(?:Error|Exception): ", body):
        return WARNING
    return ERROR


def finding_level(lines: Iterable[str]) -> str:
    """"warning" when every line that is not a traceback frame is at most a warning, else "error"."""
    levels = [line_level(t) for t in lines if not _FRAME.match(_PREFIX.sub("", t.strip(), count=1))]
    return WARNING if levels and all(lv != ERROR for lv in levels) else ERROR


def is_teardown_noise(reason: str, lines: Iterable[str]) -> bool:
    """True when a finding seen after training ended is noise: not a reason that is the exit itself (a signal, a
    task exit code, the scheduler's kill or a hang), and either warning-level lines only, or a network finding whose
    every line is the key-value store's or a socket's peer going away (``STORE_TEARDOWN``: the store's server, rank
    0's agent, exits first; PyTorch torch/csrc/distributed/c10d/TCPStore.cpp, socket.cpp), whatever its level."""
    if reason.split(":", 1)[0] in EXIT_REASONS:
        return False
    lines = [t for t in lines if not _FRAME.match(_PREFIX.sub("", t.strip(), count=1))]
    if reason == "nccl_error" and lines and all(STORE_TEARDOWN.search(t) for t in lines):
        return True
    return finding_level(lines) == WARNING


# the store / socket wording of a peer that went away (TCPStore.cpp recvValue/sendBytes, ProcessGroupNCCL's
# heartbeat "should dump" check, socket.cpp)
STORE_TEARDOWN = re.compile(r"Connection reset by peer|Broken pipe|Connection closed by peer|TCPStore|recvValue"
                            r"|sendBytes|recvBytes|should dump|heartbeat", re.I)


# reasons that are how the run ended, never noise: analysis.judge.classify keeps them after training too
EXIT_REASONS = frozenset({"killed_by_signal", "task_exit_code", "slurm_time_limit", "cancelled", "suspected_hang",
                          "preempted", "node_failure", "host_oom", "hang_at_exit"})
