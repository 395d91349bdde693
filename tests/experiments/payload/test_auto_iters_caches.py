"""payload.train_iters=auto (experiments/payload/auto_iters.py) and the sweep's compile caches (caches.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from experiments.checks import ConfigError, check_payload
from experiments.payload import caches
from experiments.payload.auto_iters import AutoIters, StopRule
from experiments.payload.spec import load_variant


def _feed(rule: StopRule, steps: list[float]) -> int | None:
    for i, ms in enumerate(steps, 1):
        if rule.add(ms):
            return i
    return None


def test_a_steady_run_stops_once_its_median_is_known_and_a_noisy_one_runs_to_the_cap():
    rng = np.random.default_rng(1)
    warm = [8000.0, 1500.0, 1100.0]
    calm = warm + list(1000 * (1 + rng.normal(0, 0.002, 57)))
    noisy = warm + list(1000 * (1 + rng.normal(0, 0.05, 57)))
    at = _feed(StopRule(0.0025, 60), calm)
    assert at is not None and at < 25  # 8 steady steps after a warm-up of 3 are enough at 0.2% noise
    assert _feed(StopRule(0.0025, 60), noisy) is None


def test_the_warm_up_is_the_analysis_rule_and_never_counts():
    rule = StopRule(0.01, 60)
    for ms in [9000.0, 9000.0, 9000.0] + [1000.0] * 7:
        rule.add(ms)
    assert rule.interval() is None  # 10 steps: warm-up 3, 7 steady < MIN_STEADY
    rule.add(1000.0)
    med, lo, hi, k = rule.interval()
    assert (med, lo, hi, k) == (1000.0, 1000.0, 1000.0, 8) and rule.done()


def test_the_hook_lowers_train_iters_to_the_iteration_that_stopped(monkeypatch):
    said = []
    auto = AutoIters(StopRule(0.0025, 60), said.append)
    cfg = SimpleNamespace(train=SimpleNamespace(train_iters=60))
    clock = iter(np.cumsum([0.0] + [8.0, 1.5, 1.1] + [1.0] * 20))
    monkeypatch.setattr("experiments.payload.auto_iters.time.perf_counter", lambda: next(clock))
    for step in range(23):
        auto.step_start()
        auto.step_end(cfg, step)
        if auto.stopped_at:
            break
    assert auto.stopped_at == 11 and cfg.train.train_iters == 11
    assert "stop after iteration 11 of at most 60" in said[0]


def test_check_payload_takes_auto_and_names_bad_caps():
    check_payload({"payload": {"train_iters": "auto", "max_iters": 40, "stop_precision": 0.005}})
    with pytest.raises(ConfigError, match="payload.max_iters=5"):
        check_payload({"payload": {"train_iters": "auto", "max_iters": 5}})
    with pytest.raises(ConfigError, match="payload.stop_precision=2"):
        check_payload({"payload": {"train_iters": "auto", "stop_precision": 2}})
    with pytest.raises(ConfigError, match="train_iters='many'"):
        check_payload({"payload": {"train_iters": "many"}})


def test_caches_live_in_the_sweep_folder_unless_the_job_names_them(tmp_path, monkeypatch):
    for var in (*caches.FOLDERS, "TORCHINDUCTOR_FX_GRAPH_CACHE", "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE",
                caches.ENV_ROOT, "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/elsewhere")
    vj = tmp_path / "sweep" / "variants" / "a2a" / "variant.json"
    vj.parent.mkdir(parents=True)
    done = caches.use_caches(vj, tmp_path / "out")
    root = tmp_path / "sweep" / "cache"
    assert "TRITON_CACHE_DIR" not in done and done["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
    assert done["CUDA_CACHE_PATH"] == str(root / "cuda") and "NCCL_TOPO_DUMP_FILE" in done
    topo = Path(done["NCCL_TOPO_DUMP_FILE"])
    topo.write_text("<system/>")
    monkeypatch.delenv("NCCL_TOPO_DUMP_FILE")
    assert caches.use_caches(vj, tmp_path / "out")["NCCL_TOPO_FILE"] == str(topo)  # later runs load it


def test_a_variant_with_auto_iters_runs_to_the_cap_at_most(tmp_path):
    src = next(Path("tests").rglob("variant.json"))
    doc = json.loads(src.read_text())
    doc["payload"] = {**(doc.get("payload") or {}), "train_iters": "auto", "max_iters": 48, "stop_precision": 0.004}
    p = tmp_path / "variant.json"
    p.write_text(json.dumps(doc))
    spec = load_variant(p)
    assert spec.auto_iters and spec.train_iters == 48 and spec.stop_precision == 0.004
