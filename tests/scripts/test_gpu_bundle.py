"""scripts/gpu/pack_bundle.sh + device_stage.sh recv/assemble: the carry round trip, one part per call."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[2] / "scripts" / "gpu"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def packed(tmp_path):
    """A workstation folder with fake downloads, packed into parts of 40 kB; returns (workstation, files)."""
    ws = tmp_path / "ws"
    files = {}
    for rel, n in [("dl/whl/a-1.0-py3-none-any.whl", 50_000), ("dl/whl/b-2.0-py3-none-any.whl", 30_000),
                   ("dl/te/core-2.12.0-py3-none-any.whl", 70_000), ("dl/te/ext-2.12.0.tar.gz", 5_000)]:
        p = ws / ".gpu" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(n))
        files[rel] = _sha(p)
    r = subprocess.run(["bash", str(GPU / "pack_bundle.sh"), ".gpu"], cwd=ws, capture_output=True, text=True,
                       env={**os.environ, "PART_BYTES": "40000"})
    assert r.returncode == 0, r.stdout + r.stderr
    return ws, files, r.stdout


def _device_call(tmp_path, ws, k, stages, **env):
    """One device `run`: a fresh copy of the tree that carries only .gpu/cK, a stage dir that survives calls."""
    dev = tmp_path / f"dev{k}"
    shutil.rmtree(dev, ignore_errors=True)
    if k:
        shutil.copytree(ws / ".gpu" / f"c{k}", dev / ".gpu" / f"c{k}")
    dev.mkdir(exist_ok=True)
    e = {**os.environ, "OUT": str(tmp_path / "out"), "GPU_STAGE": str(tmp_path / "stage"),
         "GPU_SITE": str(tmp_path / "site"), **env}
    return subprocess.run(["bash", str(GPU / "device_stage.sh"), *stages], cwd=dev, capture_output=True,
                          text=True, env=e)


def test_parts_fit_and_round_trip(tmp_path, packed):
    ws, files, report = packed
    parts = sorted((ws / ".gpu").glob("c*/bundle.part.*"))
    assert len(parts) >= 4 and all(p.stat().st_size <= 40_000 for p in parts)
    assert "OVER" not in report and "call 1 carries .gpu/c1" in report
    n = len(parts)
    for k in range(1, n + 1):
        r = _device_call(tmp_path, ws, k, ["recv"])
        assert r.returncode == 0 and f"have {k} of {n}" in r.stdout, r.stdout + r.stderr
    r = _device_call(tmp_path, ws, 0, ["assemble"])
    assert r.returncode == 0, r.stdout + r.stderr
    b = tmp_path / "stage" / "bundle"
    got = {f"dl/whl/{p.name}": _sha(p) for p in (b / "wheels").iterdir()}
    got |= {f"dl/te/{p.name}": _sha(p) for p in (b / "te").iterdir()}
    assert got == files


def test_missing_part_is_named(tmp_path, packed):
    ws, _, _ = packed
    n = len(list((ws / ".gpu").glob("c*/bundle.part.*")))
    for k in range(1, n + 1):
        if k != 2:
            assert _device_call(tmp_path, ws, k, ["recv"]).returncode == 0
    r = _device_call(tmp_path, ws, 0, ["assemble", "install"])
    assert r.returncode != 0 and "part .gpu/c2 is missing" in r.stdout
    assert "STOP: stage assemble failed" in r.stdout and "=== stage install" not in r.stdout


def test_corrupt_part_fails_checksum(tmp_path, packed):
    ws, _, _ = packed
    p = next((ws / ".gpu" / "c1").glob("bundle.part.*"))
    data = bytearray(p.read_bytes())
    data[100] ^= 0xFF
    p.write_bytes(bytes(data))
    n = len(list((ws / ".gpu").glob("c*/bundle.part.*")))
    for k in range(1, n + 1):
        assert _device_call(tmp_path, ws, k, ["recv"]).returncode == 0
    r = _device_call(tmp_path, ws, 0, ["assemble"])
    assert r.returncode != 0 and "FAILED" in r.stdout + r.stderr


def test_recv_without_carry_and_unknown_stage(tmp_path, packed):
    ws, _, _ = packed
    r = _device_call(tmp_path, ws, 0, ["recv"])
    assert r.returncode == 1 and "name a .gpu/cK folder in carry" in r.stdout
    r = _device_call(tmp_path, ws, 0, ["info", "bogus"])
    assert r.returncode == 2 and "unknown stage 'bogus'" in r.stdout and "build_ext" in r.stdout
    assert "=== stage info" not in r.stdout  # stages are checked before any runs
