"""Bad input and the command line: each diagnosed failure has its own exit code and a one-line cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.payload import errors
from experiments.payload.cli import hold, main
from experiments.payload.errors import BadVariantFile
from experiments.payload.spec import load_variant

from .helpers import make_variant, read_effective, write_variant

pytestmark = pytest.mark.megatron
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def keep_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # train mode chdirs into OUT_DIR; restore the cwd afterwards


def run_main(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("content, needle", [
    (None, "does not exist"),
    ("{not json", "is not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({**make_variant(), "schema_version": 2}), "schema_version is 2; this payload reads schema_version 1"),
    (json.dumps({k: v for k, v in make_variant().items() if k != "settings"}), "missing key 'settings'"),
    (json.dumps(make_variant(dispatcher="telepathy")), "dispatcher 'telepathy' is not one of"),
    (json.dumps({**make_variant(), "overlap": "on"}), "'overlap' must be true or false"),
])
def test_bad_variant_files_exit_10(tmp_path, capsys, content, needle):
    path = tmp_path / "variant.json"
    if content is not None:
        path.write_text(content)
    code, out = run_main(capsys, path, tmp_path / "out")
    assert code == errors.BAD_VARIANT_FILE == 10
    lines = [ln for ln in out.splitlines() if ln.startswith("[payload] error")]
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("[payload] error 10 bad_variant_file:")
    assert not (tmp_path / "out" / "effective_config.json").exists()


def test_unreadable_variant_file(tmp_path):
    (tmp_path / "variant.json").mkdir()  # a directory is not readable as a file
    with pytest.raises(BadVariantFile, match="unreadable"):
        load_variant(tmp_path / "variant.json")


def test_label_must_match_settings(tmp_path):
    """A planner bug (label deepep, settings alltoall) must not run under the wrong label."""
    doc = make_variant("deepep", True)
    doc["settings"]["moe_token_dispatcher_type"] = "alltoall"
    with pytest.raises(BadVariantFile, match="dispatcher 'deepep' but settings say moe_token_dispatcher_type="):
        load_variant(write_variant(tmp_path, doc))
    doc = make_variant("alltoall", True)
    doc["settings"]["overlap_moe_expert_parallel_comm"] = False
    with pytest.raises(BadVariantFile, match="overlap=True but settings say"):
        load_variant(write_variant(tmp_path, doc))


def test_knobs_must_be_explicit(tmp_path):
    """C03: 'not set' never means 'off'."""
    doc = make_variant()
    del doc["settings"]["delay_wgrad_compute"]
    with pytest.raises(BadVariantFile, match="settings lack delay_wgrad_compute"):
        load_variant(write_variant(tmp_path, doc))


def test_cli_flags_override_the_file(tmp_path):
    spec = load_variant(write_variant(tmp_path, make_variant(payload={"hold_s": 5})))
    assert spec.mode == "validate" and spec.hold_s == 5 and spec.train_iters == 30
    over = spec.with_overrides(mode="train", attempt=3, hold_s=0)
    assert (over.mode, over.attempt, over.hold_s) == ("train", 3, 0.0)
    with pytest.raises(BadVariantFile, match="--mode is 'dry'"):
        spec.with_overrides(mode="dry")


def test_train_mode_without_gpu_exits_18_and_never_falls_back(tmp_path, capsys):
    path = write_variant(tmp_path, make_variant())
    code, out = run_main(capsys, path, tmp_path / "out", "--mode", "train")
    assert code == errors.NO_GPU == 18
    assert "[payload] error 18 no_gpu: train mode found no GPU" in out and "validate a2a" not in out
    doc = read_effective(tmp_path / "out")
    assert doc["mode"] == "train" and doc["checks"]["verdict"] == "fail" and doc["written_at"] == "error"


def test_train_mode_without_bridge_exits_12(tmp_path, capsys, monkeypatch):
    from experiments.payload import runtime_info

    monkeypatch.setattr(runtime_info, "gpu", lambda: ("NVIDIA H200", "9.0", 1))
    path = write_variant(tmp_path, make_variant())
    code, out = run_main(capsys, path, tmp_path / "out", "--mode", "train")
    assert code == errors.BRIDGE_MISSING == 12
    line = next(ln for ln in out.splitlines() if ln.startswith("[payload] error"))
    assert "megatron.bridge is not importable" in line and "container" in line and "nvcr.io/nvidia/nemo" in line


@pytest.mark.slow
def test_core_missing_exits_13(tmp_path):
    """A real import failure: megatron.core blocked in a fresh interpreter."""
    path = write_variant(tmp_path, make_variant())
    code = ("import sys; sys.modules['megatron.core'] = None\n"
            "from experiments.payload.cli import main\n"
            f"sys.exit(main([{str(path)!r}, {str(tmp_path / 'out')!r}]))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == errors.CORE_MISSING == 13, p.stdout + p.stderr
    assert "[payload] error 13 core_missing: megatron.core is not importable" in p.stdout


def test_hold_prints_heartbeats_and_lasts(capsys):
    start = time.monotonic()
    hold(1.2, step_s=0.1, beat_s=0.5)
    took = time.monotonic() - start
    out = capsys.readouterr().out
    assert 1.2 <= took < 3.0
    assert "[payload] hold: 0/1.2 s" in out and "[payload] hold: 0.5/1.2 s" in out and "[payload] hold: 1/1.2 s" in out
    assert out.strip().endswith("[payload] hold: done after 1.2 s")


def test_hold_from_the_variant_file_also_after_a_failure(tmp_path, capsys):
    path = write_variant(tmp_path, make_variant(payload={"hold_s": 0.6}))
    start = time.monotonic()
    code, out = run_main(capsys, path, tmp_path / "out", "--mode", "train")  # fails: no GPU
    assert code == 18 and time.monotonic() - start >= 0.6
    assert "[payload] hold: done after 0.6 s" in out and out.strip().endswith("[payload] exit 18")


@pytest.mark.slow
def test_subprocess_validate_with_hold_can_be_terminated(tmp_path):
    """The documented use: a job that lives long enough to be cancelled (SIGTERM ends it at once)."""
    path = write_variant(tmp_path, make_variant())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "experiments.train", str(path), str(tmp_path / "out"),
                          "--hold-s", "120"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("[payload] hold: 0/120 s"):
            break
    p.terminate()
    rc = p.wait(timeout=30)
    assert rc == -15, "".join(lines)
    assert any("[payload] validate a2a.ovl0.dw0: pass" in ln for ln in lines)
    assert read_effective(tmp_path / "out")["checks"]["verdict"] == "pass"


def test_exit_code_table_in_the_docstring_matches_the_codes():
    import re

    import experiments.train as entry

    rows = dict(re.findall(r"^(\d+) +([a-z_]+) ", entry.__doc__, flags=re.M))
    assert {int(k): v for k, v in rows.items()} == {c: d.split(":")[0] for c, d in errors.EXIT_CODES.items()}
    codes = [e.code for e in (errors.BadVariantFile("x"), errors.UnknownRecipe("x"), errors.BridgeMissing("x"),
                              errors.CoreMissing("x"), errors.UnknownField("x"), errors.HFUnreachable("x"),
                              errors.Mismatch("x"), errors.EnvMismatch("x"), errors.NoGPU("x"),
                              errors.TrainingFailed("x"), errors.CheckFailed("x"))]
    assert len(set(codes)) == len(codes) and all(c in errors.EXIT_CODES for c in codes)


def test_hold_at_start_holds_before_the_work_and_only_once(tmp_path, capsys):
    vj = write_variant(tmp_path, make_variant(payload={"hold_s": 0.2, "hold_at": "start"}))
    assert main([str(vj), str(tmp_path / "out"), "--mode", "validate"]) == 0
    out = capsys.readouterr().out
    assert out.index("[payload] hold: done") < out.index(": pass")
    assert out.count("[payload] hold: done") == 1
