"""Real local runs through NeMo-Run's LocalExecutor: one process without GPUs, torchrun with N processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchers.envvars import job_env
from launchers.errors import LaunchConfigError
from launchers.local import run_local
from launchers.spec import JobCommand
from tests.launchers.conftest import profile

SECRET = "local-planted-secret-9"


def test_one_process_without_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = JobCommand(name="one", argv=("bash", "-c", 'echo "rank=${RANK:-none} tag=[$TAG] tok=$MY_TOKEN"'))
    env = job_env({"TAG": "a b", "MY_TOKEN": SECRET}, [])
    res = run_local(profile("local"), cmd, state_dir=tmp_path / "sweep" / "nemo_run", gpus=0, env=env, cwd=tmp_path)
    assert res.status == "succeeded"
    text = "".join(p.read_text() for p in res.logs)
    assert f"rank=none tag=[a b] tok={SECRET}" in text  # the secret reached the process ...
    written = [f for f in (tmp_path / "sweep").rglob("*") if f.is_file() and f.suffix != ".log"]
    assert written and not [f for f in written if SECRET.encode() in f.read_bytes()]  # ... but no file of ours


def test_torchrun_starts_one_process_per_gpu_and_reports_failure(tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text("import os, sys\nprint('rank', os.environ['RANK'], os.environ['WORLD_SIZE'], sys.argv[1:])\n"
                      "sys.exit(int(os.environ['RANK']) == 1)\n")
    res = run_local(profile("local"), JobCommand(name="tr", argv=("python", str(worker), "x")),
                    state_dir=tmp_path / "sweep" / "nemo_run", gpus=2, cwd=tmp_path)
    text = "".join(p.read_text() for p in res.logs)
    assert res.status == "failed", text  # rank 1 exited 1
    assert "rank 0 2 ['x']" in text and "rank 1 2 ['x']" in text


def test_torchrun_refuses_words_nemo_run_would_quote(tmp_path: Path) -> None:
    with pytest.raises(LaunchConfigError, match="'print\\(1\\)'.*literal quotes"):
        run_local(profile("local"), JobCommand(name="tr", argv=("python", "-c", "print(1)")),
                  state_dir=tmp_path / "sweep" / "nemo_run", gpus=2, cwd=tmp_path)
