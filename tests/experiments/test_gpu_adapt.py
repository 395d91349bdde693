"""Issue 16: the embedded default (cluster=local, model=tiny_moe) adapts to the GPUs it finds.

The GPU count is faked at the launcher's own probe (``launchers.local.detect_gpus``, which the planner calls) or
through CUDA_VISIBLE_DEVICES with a fake ``nvidia-smi``; everything else (Hydra composition, the rule table,
the plan) is the real code.
"""

from __future__ import annotations

import os
import stat

import pytest

from experiments import expand as expand_mod
from experiments.config import ConfigError
from experiments.plan import make_plan
from experiments.rules import fitting_ep


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, count: int, name: str = "NVIDIA H200") -> None:
    monkeypatch.setattr(expand_mod, "detect_local_gpus", lambda: (count, "h200" if count else None))


def _by_name(plan):
    return {v.name: v for v in plan.variants}


def test_one_gpu_default_trains_at_ep1_and_prunes_overlap_with_hint(monkeypatch):
    _fake_gpus(monkeypatch, 1)
    plan = make_plan([])
    v = _by_name(plan)
    assert plan.mode == "train"
    base = v["a2a.ovl0.dw0"]
    assert base.status == "planned" and base.settings["expert_model_parallel_size"] == 1
    ovl = v["a2a.ovl1.dw0"]
    assert ovl.status == "pruned"
    assert any("at least 2 GPUs" in r for r in ovl.reasons), ovl.reasons
    assert any("expert model parallelism" in r for r in ovl.reasons)  # the library's own reason stays
    assert plan.job("a2a.ovl0.dw0").world_size == 1
    assert any("-> 1" in w and "model.expert_model_parallel_size" in w for w in plan.expansion.warnings)
    # the GPU container profile, not ci_cpu, on a GPU box
    assert plan.expansion.container.name == "mbridge_0_6_h200"
    assert all(v.role != "baseline" or v.status != "pruned" for v in plan.variants)


@pytest.mark.parametrize("gpus,want_ep", [(2, 2), (4, 2), (8, 2)])
def test_n_gpus_ep_fits(monkeypatch, gpus, want_ep):
    _fake_gpus(monkeypatch, gpus)
    plan = make_plan([])
    base = _by_name(plan)["a2a.ovl0.dw0"]
    assert base.settings["expert_model_parallel_size"] == want_ep
    assert plan.job(base.name).world_size == gpus
    ovl = _by_name(plan)["a2a.ovl1.dw0"]
    assert (ovl.status == "planned") is (want_ep > 1)


def test_no_gpu_keeps_ep2_validate_and_ci_cpu(monkeypatch):
    _fake_gpus(monkeypatch, 0)
    plan = make_plan([])
    assert plan.mode == "validate"
    assert plan.expansion.container.name == "ci_cpu"
    assert _by_name(plan)["a2a.ovl1.dw0"].settings["expert_model_parallel_size"] == 2
    assert _by_name(plan)["a2a.ovl1.dw0"].status == "planned"


def test_explicit_ep_that_does_not_fit_names_the_fixing_override(monkeypatch):
    _fake_gpus(monkeypatch, 1)
    with pytest.raises(ConfigError) as e:
        make_plan(["model.expert_model_parallel_size=2"])
    msg = str(e.value)
    assert "does not divide the world size 1" in msg
    assert "model.expert_model_parallel_size=1" in msg


def test_explicit_container_still_wins(monkeypatch):
    _fake_gpus(monkeypatch, 1)
    plan = make_plan(["container=ci_cpu"])
    assert plan.expansion.container.name == "ci_cpu"


def test_fitting_ep_respects_experts_and_pp():
    s = dict(expert_model_parallel_size=8, expert_tensor_parallel_size=1, pipeline_model_parallel_size=1,
             num_moe_experts=8)
    assert fitting_ep(s, 8) == 8
    assert fitting_ep(s, 6) == 2          # 6 % 4 != 0, 6 % 2 == 0
    assert fitting_ep(s, 1) == 1
    assert fitting_ep({**s, "num_moe_experts": 6}, 8) == 2  # EP must divide the experts too
    assert fitting_ep({**s, "pipeline_model_parallel_size": 2}, 4) == 2


def test_cuda_visible_devices_caps_the_probe(monkeypatch, tmp_path):
    """The real probe path: a fake nvidia-smi lists 4 GPUs, CUDA_VISIBLE_DEVICES lets 1 through."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nif [ \"$1\" = -L ]; then for i in 0 1 2 3; do echo \"GPU $i: NVIDIA H200 (UUID: x)\";"
                   " done; else for i in 0 1 2 3; do echo 'NVIDIA H200'; done; fi\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert expand_mod.detect_local_gpus() == (1, "h200")
    plan = make_plan(["action=plan"])
    assert _by_name(plan)["a2a.ovl0.dw0"].settings["expert_model_parallel_size"] == 1
    assert plan.expansion.container.name == "mbridge_0_6_h200"
