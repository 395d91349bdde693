"""benchmarks/parse.py on small generated logs: it prints figures for this tree and, with --against, for another git
revision's analysis package, runs alternating (a smoke test of the script, not a speed assertion)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # benchmarks a second tree
def test_parse_benchmark_against_a_revision(tmp_path):
    out = subprocess.run([sys.executable, "benchmarks/parse.py", "--mb", "2", "--repeats", "2", "--against", "HEAD",
                          "--keep", str(tmp_path)], cwd=REPO, capture_output=True, text=True, check=True).stdout
    rows = re.findall(r"^(typical\d*\.log|iterations\d*\.log|  HEAD)\s+(\d+)\s+(\d+)\s+([\d.]+)", out, re.M)
    assert [r[0] for r in rows] == ["typical2.log", "  HEAD", "iterations2.log", "  HEAD"], out
    typical, iterations = int(rows[0][2]), int(rows[2][2])
    assert typical > 1000 and iterations > typical and rows[1][2] == rows[0][2], out  # both trees: same iterations
    assert len(re.findall(r"speed-up over HEAD: [\d.]+x", out)) == 2, out
    assert f"grep -c iteration {2 * typical}" in out  # lines: each iteration line and one memory line per iteration
    assert {p.name for p in tmp_path.iterdir()} == {"typical2.log", "iterations2.log"}
