"""The default sweep in validate mode (no GPU here) keeps its books straight: the gate table says what the
gated arm came out as (``validated``, not ``planned``), the plan and the report agree on the blocks (the gated arm's
block is named as one), and the history, which has nothing timed to judge, says so instead of "no successful
run (validated, ...)" and "its 0 variant(s)"; the last line says the sweep's true end. The real CLI and
Megatron-Core's validate mode."""

from __future__ import annotations

import json

import pytest

from tests.e2e.cli import run_sweep, tail


@pytest.mark.megatron
@pytest.mark.slow
def test_validate_mode_bookkeeping(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([f"output_dir={out}", "poll_s=0.5", "history.enabled=true",
                     f"history.url=sqlite:///{tmp_path / 'h.db'}"])
    assert res.returncode == 0, tail(res)
    assert "1 block(s)" in res.stdout and "the 1 gated arm(s) get blocks of their own when their gate opens" in \
        res.stdout, tail(res)
    md = (out / "report" / "report.md").read_text()
    gate_row = next(line for line in md.splitlines() if line.startswith("| a2a.ovl1.dw1 | 3 |"))
    assert "| validated |" in gate_row and "planned" not in gate_row, gate_row
    assert "2 block(s): 1 for the stages open at plan time, 1 for the arms of a gate that opened" in md
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert {g["variant"]: g["status"] for g in summary["sweep"]["gates"]}["a2a.ovl1.dw1"] == "validated"
    assert "every run validated (mode=validate), so no step time or speedup is timed or judged" in res.stderr
    assert "no successful run (validated" not in res.stderr and "its 0 variant(s)" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == "exit code 0: every kept run is good"
