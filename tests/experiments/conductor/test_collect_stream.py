"""Collect streams a log through the masking instead of reading it whole: a 256 MB log costs a few MB of memory,
and the copy is masked exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SECRET = "hf_plantedSecret42"


@pytest.mark.slow  # writes and copies 256 MB
def test_a_big_log_is_copied_masked_in_bounded_memory(tmp_path: Path) -> None:
    src, dst = tmp_path / "big.log", tmp_path / "copy" / "big.log"
    line = b"iteration 1/ 30 | elapsed time per iteration (ms): 128.0 | " + SECRET.encode() + b"\n"
    with open(src, "wb") as f:
        block = line * (1 << 14)
        for _ in range((256 << 20) // len(block)):
            f.write(block)
    code = ("import resource, sys; from pathlib import Path; from experiments.conductor.collect import copy_masked; "
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            "copy_masked(Path(sys.argv[1]), Path(sys.argv[2]), [sys.argv[3]]); "
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)")
    res = subprocess.run([sys.executable, "-c", code, str(src), str(dst), SECRET], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300, check=True)
    grown_mb = int(res.stdout.strip())
    assert grown_mb < 32, f"peak memory grew by {grown_mb} MB while copying a 256 MB log"
    masked = line.replace(SECRET.encode(), b"***")
    with open(dst, "rb") as f:
        head = f.read(len(masked) * 3)
    assert head == masked * 3
    assert dst.stat().st_size == src.stat().st_size - (len(SECRET) - 3) * (src.stat().st_size // len(line))
    assert not list(dst.parent.glob(".*tmp"))


def test_the_advice_after_a_full_disk_resumes_while_a_run_was_never_submitted(tmp_path, capsys) -> None:
    from contracts.sweepdir import SweepDir
    from experiments.conductor.drive import _disk_error
    from experiments.plan import make_plan, write_plan

    root = write_plan(make_plan(["action=plan", f"output_dir={tmp_path / 's'}"]), [], render=False)
    _disk_error(SweepDir(root), "20261129-160000Z-a1b2c3", OSError(28, "No space left on device"))
    err = capsys.readouterr().err
    assert "action=run sweep_id=" in err and "action=collect" not in err
