"""benchmarks/parse.py on small generated logs: it prints whole-process figures for this tree and, with --against,
for another git revision's tree, with the ratio (a smoke test of the script, not a speed assertion)."""

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
    heads = re.findall(r"^(typical2\.log|iterations2\.log): \d+ MB, (\d+) iterations, damaged 0", out, re.M)
    assert [h[0] for h in heads] == ["typical2.log", "iterations2.log"], out
    typical, iterations = (int(h[1]) for h in heads)
    assert typical > 1000 and iterations > typical, out
    rows = re.findall(r"^  (this tree|HEAD)\s+([\d.]+) MB/s wall\s+([\d.]+) MB/s CPU .* in-process parse (\d+) MB/s",
                      out, re.M)
    assert [r[0] for r in rows] == ["this tree", "HEAD", "this tree", "HEAD"], out
    assert len(re.findall(r"time this/baseline: wall [\d.]+x, CPU [\d.]+x \(same run\)", out)) == 2, out
    assert len(re.findall(r"reference: grep -c iteration \d+ MB/s; plain regex script", out)) == 2, out
    assert {p.name for p in tmp_path.iterdir()} == {"typical2.log", "iterations2.log"}
