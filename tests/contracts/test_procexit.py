"""contracts.procexit: the process ends with the code given, its stdout and stderr flushed, no atexit handler run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_code_and_the_buffered_output_survive_and_atexit_does_not_run(tmp_path: Path) -> None:
    code = ("import atexit, sys\n"
            "from contracts.procexit import exit_without_teardown\n"
            "atexit.register(lambda: print('atexit ran'))\n"
            "sys.stdout.write('out line'); sys.stderr.write('err line')\n"  # no newline: still buffered
            "exit_without_teardown(7)\n"
            "print('not reached')\n")
    with open(tmp_path / "out", "w") as out:  # a file, so stdout is block-buffered
        res = subprocess.run([sys.executable, "-c", code], cwd=REPO, stdout=out, stderr=subprocess.PIPE, text=True)
    assert res.returncode == 7
    assert (tmp_path / "out").read_text() == "out line"
    assert res.stderr == "err line"
