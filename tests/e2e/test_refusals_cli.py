"""Inputs that used to act silently on the wrong thing, refused through the real CLI (exit 2, the bad value and the
fix named, nothing written): a ``sweep_id`` and an ``output_dir`` that name different sweeps. Each command runs
the real CLI in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.e2e.cli import run_sweep, tail


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _plan(out: Path) -> str:
    res = run_sweep(["action=plan", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    return json.loads((out / "manifest.json").read_text())["sweep_id"]


@pytest.mark.slow
def test_a_sweep_id_and_the_output_dir_of_another_sweep_are_refused_for_every_action(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_id, b_id = _plan(a_dir), _plan(b_dir)
    assert a_id != b_id
    before = _digest(b_dir)
    for action in ("status", "collect", "cancel", "run"):
        res = run_sweep([f"action={action}", f"sweep_id={a_id}", f"output_dir={b_dir}"])
        assert res.returncode == 2, (action, tail(res))
        assert a_id in res.stderr and str(b_dir) in res.stderr and b_id in res.stderr, (action, tail(res))
        assert "name different sweeps" in res.stderr, (action, tail(res))
    assert _digest(b_dir) == before
    res = run_sweep(["action=status", f"sweep_id={b_id}", f"output_dir={b_dir}"])  # the same sweep twice is fine
    assert res.returncode == 0, tail(res)


def test_a_sqlite_history_url_with_two_slashes_is_refused_at_plan_time(tmp_path):
    out = tmp_path / "s"
    res = run_sweep(["action=plan", f"output_dir={out}", "history.enabled=true",
                     "history.url=sqlite://results/history.db"])
    assert res.returncode == 2, tail(res)
    assert "sqlite://results/history.db" in res.stderr and "sqlite:///results/history.db" in res.stderr, tail(res)
    assert not out.exists()
