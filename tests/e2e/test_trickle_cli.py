"""A webhook and an MLflow server that trickle their answers (one byte every 0.2 s, each read well within the
timeout) cannot hold the collect: the real CLI ends within the configured totals, with the alert and the export as
warnings and the night's exit code standing. The servers are real loopback sockets; the sweep runs the real CLI
in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.e2e.cli import run_sweep, tail
from tests.e2e.loopback import Trickle


@pytest.mark.megatron
@pytest.mark.slow
def test_a_trickling_webhook_and_mlflow_server_cannot_hang_the_collect(tmp_path, trickle):
    out = tmp_path / "s"
    # a failing night (Megatron-Core rejects overlap without expert parallelism), so the alert is sent
    args = [f"output_dir={out}", "poll_s=0.5", "preflight=off", "sweep=full", "dispatcher=alltoall",
            "overlap=on,off", "delay_wgrad=off", "model.expert_model_parallel_size=1", "history.enabled=true",
            f"history.url=sqlite:///{tmp_path / 'h.db'}", f"history.notify={trickle.url}/hook",
            "+history.notify_timeout_s=1", f"history.mlflow={trickle.url}", "+history.mlflow_timeout_s=3"]
    start = time.monotonic()
    res = run_sweep(args, timeout=300)
    took = time.monotonic() - start
    assert res.returncode == 3, tail(res)
    assert "the alert was not delivered" in res.stderr and "TimeoutError" in res.stderr, tail(res)
    assert "not exported to MLflow" in res.stderr, tail(res)
    assert took < 120, took  # 3 alert attempts of 1 s + their back-off, a 3 s export, and the sweep itself


def test_the_trickling_server_trickles():  # the fixture is what the test above claims: each read comes in time
    server = Trickle(gap_s=0.05)
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=1) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b"".join(s.recv(1) for _ in range(10))
        assert got == b"HTTP/1.1 2"
    finally:
        server.close()
