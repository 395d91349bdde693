"""End a process without the interpreter's teardown, once everything it writes is written (issue 17).

Freeing the modules and objects of a process that holds torch, Megatron-Core, pyarrow or matplotlib one by one
takes from 0.1 s (a report) to seconds (the validate fork server) on a 2-core machine, after the last line was
printed. The callers use this only when every file they write is written and closed (atomically:
:mod:`contracts.atomic`) and no child is left that the normal exit would end.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def exit_without_teardown(code: int) -> NoReturn:
    """Flush stdout and stderr, then end this process with ``code`` (``os._exit``: no atexit handlers, no object
    finalisers, no buffered file left unflushed but those two)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or replaced by None
            pass
    os._exit(code)
