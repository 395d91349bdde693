"""Issue 13 item 10: console output reads well at any width: no variant name is cut, a wide table folds into a
list when narrow, and a pipe (cron, tee) gets COLUMNS or 200 columns, not 80."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARGS = ["action=plan", "model=qwen3_30b_a3b", "cluster=h100_slurm", "cluster.nodes=4", "sweep=full",
        "dispatcher=alltoall,deepep", "overlap=on,off", "delay_wgrad=off", "model.expert_model_parallel_size=8,16",
        "allow_dirty=true"]


def _plan(tmp_path: Path, columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = columns
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", *ARGS, f"output_dir={tmp_path / 's'}"],
                         cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["80", None])
def test_plan_through_a_pipe_keeps_every_variant_name_whole(tmp_path, columns):
    out = _plan(tmp_path, columns)
    names = {"a2a.ovl0.dw0.ep8", "a2a.ovl1.dw0.ep16", "deepep.ovl1.dw0.ep16", "deepep.ovl0.dw0.ep8"}
    words = set(out.replace("│", " ").replace("┃", " ").split())
    assert names <= words, out
    assert "…" not in out.split("warning")[0]
    width = int(columns or 200)
    assert max(len(line) for line in out.splitlines()) <= width
    if columns == "80":
        assert "  reason: " in out or "  status: " in out  # folded into a list


def test_the_run_table_folds_into_a_list_when_narrow():
    from rich.console import Console

    from analysis.console import table

    rows = [("a2a.ovl1.dw1.ep16.seq8192.mbs2", "0", "1", "12345", "running", "12/30", "812.4", "x" * 40)]
    headers = ("variant", "repeat", "attempt", "job id", "state", "iteration", "last step (ms)", "note")
    for width in (40, 80, 200):
        c = Console(width=width, record=True, file=open(os.devnull, "w"))
        c.print(table(headers, rows, width=width, title="t"))
        text = c.export_text()
        assert "a2a.ovl1.dw1.ep16.seq8192.mbs2" in text and max(map(len, text.splitlines())) <= width
        assert ("state: running" in text) == (width < 120)
