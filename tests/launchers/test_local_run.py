"""Real local runs through the LocalBackend (NeMo-Run's LocalExecutor): one process without GPUs, torchrun with N
processes, and secrets that reach the process through the environment but no file (CONTRACTS §10)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from contracts.cluster import ClusterConfig
from contracts.records import RunRef
from launchers.backend import LocalBackend
from launchers.errors import LaunchConfigError
from launchers.spec import JobCommand
from tests.launchers.conftest import profile

SECRET = "local-planted-secret-9"


def _cluster(**env: str) -> ClusterConfig:
    return profile("local", env_vars={**profile("local").env_vars, **env})


def _run(tmp_path: Path, cluster: ClusterConfig, item: JobCommand, gpus: int) -> tuple[str, str]:
    backend = LocalBackend(tmp_path / "sweep", cluster, gpus, "t")
    ref = RunRef(item.name, 0, 1)
    try:
        backend.submit_item(ref.task, item, "s1", gpus)
        deadline = time.monotonic() + 120
        while True:
            st = backend.poll([ref])[ref.task]
            if st.final or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        text = "".join(p.read_text() for p in backend.log_files(ref) if p.exists())
    finally:
        backend.close()
    return str(st.status), text


def test_one_process_without_gpus_gets_env_and_secrets(tmp_path: Path) -> None:
    cmd = JobCommand(name="one", argv=("bash", "-c", 'echo "rank=${RANK:-none} tag=[$TAG] tok=$MY_TOKEN"'))
    status, text = _run(tmp_path, _cluster(TAG="a b", MY_TOKEN=SECRET), cmd, gpus=0)
    assert status == "succeeded", text
    assert f"rank=none tag=[a b] tok={SECRET}" in text  # the secret reached the process ...
    written = [f for f in (tmp_path / "sweep").rglob("*") if f.is_file() and f.suffix != ".log"]
    assert written and not [f for f in written if SECRET.encode() in f.read_bytes()]  # ... but no file of ours


@pytest.mark.slow
@pytest.mark.megatron  # torchrun is torch's launcher
def test_torchrun_starts_one_process_per_gpu_and_reports_failure(tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text("import os, sys\nprint('rank', os.environ['RANK'], os.environ['WORLD_SIZE'], sys.argv[1:])\n"
                      "sys.exit(int(os.environ['RANK']) == 1)\n")
    status, text = _run(tmp_path, _cluster(), JobCommand(name="tr", argv=("python", str(worker), "x")), gpus=2)
    assert status == "failed", text  # rank 1 exited 1
    assert "rank 0 2 ['x']" in text and "rank 1 2 ['x']" in text


def test_torchrun_refuses_words_nemo_run_would_quote(tmp_path: Path) -> None:
    with pytest.raises(LaunchConfigError, match="'print\\(1\\)'.*literal quotes"):
        _run(tmp_path, _cluster(), JobCommand(name="tr", argv=("python", "-c", "print(1)")), gpus=2)
