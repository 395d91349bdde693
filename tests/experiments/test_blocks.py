"""Interleaved blocks, the control arm and the adaptive design in the planner and the conductor.

The end-to-end test drives a whole ``repeats=auto control=true`` sweep through the real conductor
(``experiments.conductor.drive.drive``), the real analysis and report, with a scripted backend (a unit-test double:
jobs "finish" at once with a synthetic Megatron log whose step times drift from block to block)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from analysis.options import Options
from contracts.errors import ConfigError
from contracts.jobs import JobHandle, JobState
from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from experiments.blocks import block_order, control_name, next_block, schedule_new_arms
from experiments.conductor import drive as drive_mod
from experiments.conductor.drive import runs_to_submit
from experiments.plan import make_plan, write_plan
from tests.analysis.synth import iteration_line
from tests.experiments.helpers import UnscriptedBackend, train_without_gpu

ARMS = ["action=plan", "sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off"]


@pytest.fixture(autouse=True)
def _train_here(monkeypatch: pytest.MonkeyPatch) -> None:
    train_without_gpu(monkeypatch)  # the scripted backends run no payload



def plan(tmp_path: Path, *extra: str):
    return make_plan([*ARMS, f"output_dir={tmp_path / 's'}", *extra])


def test_blocks_hold_every_arm_once_in_a_seeded_recorded_order(tmp_path):
    p = plan(tmp_path, "repeats=4", "block_seed=7", "control=true")
    arms = {"a2a.ovl0.dw0", "a2a.ovl0.dw0.ctl", "a2a.ovl1.dw0"}
    assert [b["index"] for b in p.blocks] == [0, 1, 2, 3]
    assert all(set(b["order"]) == arms and len(b["order"]) == 3 for b in p.blocks)
    assert len({tuple(b["order"]) for b in p.blocks}) > 1  # randomised, not one fixed order
    assert [b["order"] for b in p.blocks] == [block_order(sorted(arms, key=[*arms].index), 7, i) for i in range(4)] \
        or p.blocks == plan(tmp_path, "repeats=4", "block_seed=7", "control=true").blocks
    assert p.runs == tuple((n, b["index"]) for b in p.blocks for n in b["order"])
    assert p.design["seed"] == 7 and p.design["seed_source"] == "block_seed" and p.design["control"] is True
    other = plan(tmp_path, "repeats=4", "block_seed=8", "control=true")
    assert [b["order"] for b in other.blocks] != [b["order"] for b in p.blocks]
    root = write_plan(p, [], render=False)
    m = Manifest.load(SweepDir(root))
    assert m.blocks == [dict(b) for b in p.blocks] and m.design["repeats"] == 4
    assert m.variant("a2a.ovl0.dw0.ctl").variant.role == "control"
    assert json.loads((root / "variants" / "a2a.ovl0.dw0.ctl" / "variant.json").read_text())["settings"] == \
        json.loads((root / "variants" / "a2a.ovl0.dw0" / "variant.json").read_text())["settings"]


def test_block_order_is_deterministic_and_the_seed_defaults_to_the_sweep_id(tmp_path):
    assert block_order(["a", "b", "c", "d"], 1, 0) == block_order(["a", "b", "c", "d"], 1, 0)
    assert control_name("a2a.ovl0.dw0.ep16") == "a2a.ovl0.dw0.ep16.ctl"
    p = plan(tmp_path, "repeats=2")
    assert p.design["seed_source"] == "sweep_id" and isinstance(p.design["seed"], int)


@pytest.mark.parametrize("bad,word", [("control=true", "at least 2 blocks"), ("repeats=0", "repeats"),
                                      ("max_blocks=2", "max_blocks"), ("practical_threshold=2", "fraction"),
                                      ("block_seed=-1", "block_seed"), ("repeats=many", "auto")])
def test_bad_block_keys_fail_with_exit_2_naming_the_value(tmp_path, bad, word):
    with pytest.raises(ConfigError, match=word):
        plan(tmp_path, bad)


def test_resume_keeps_the_recorded_order(tmp_path):
    root = write_plan(plan(tmp_path, "repeats=3", "control=true"), [], render=False)
    sd = SweepDir(root)
    m = Manifest.load(sd)

    def done(m: Manifest) -> None:  # the first block ran; block 1's second run failed
        for n, r in m.runs[:3] + m.runs[3:5]:
            m.variant(n).new_attempt(r).set(status="succeeded")
        m.variant(m.runs[4][0]).attempts[-1].set(status="failed", force=True)

    ran = Manifest.update(sd, done)[0]
    todo = runs_to_submit(sd, ran)
    assert todo == [m.runs[4], *m.runs[5:]]
    assert runs_to_submit(sd, ran, new_only=True) == list(m.runs[5:])


def _comparison(variant, wants_more, control=False):
    return SimpleNamespace(variant=variant, control=control,
                           sequential={"wants_more": wants_more, "state": "undecided" if wants_more else "faster"})


def test_adaptive_next_block_runs_only_undecided_arms_with_baseline_and_control(tmp_path):
    root = write_plan(plan(tmp_path, "repeats=auto", "control=true", "max_blocks=4", "overlap=on,off",
                           "dispatcher=alltoall"), [], render=False)
    sd = SweepDir(root)
    m = Manifest.load(sd)
    assert len(m.blocks) == 2 and m.design["repeats"] == "auto" and m.design["max_blocks"] == 4  # first look: 2
    arms, why = next_block(m, [_comparison("a2a.ovl1.dw0", True), _comparison("a2a.ovl0.dw0.ctl", False, True)],
                           1000)
    assert set(arms) == {"a2a.ovl0.dw0", "a2a.ovl0.dw0.ctl", "a2a.ovl1.dw0"} and "a2a.ovl1.dw0" in why
    assert next_block(m, [_comparison("a2a.ovl1.dw0", False), _comparison("a2a.ovl0.dw0.ctl", False, True)],
                      1000)[0] is None
    spent = sum(m.design["run_gpu_hours"][n] for n, _ in m.runs)
    arms, why = next_block(m, [_comparison("a2a.ovl1.dw0", True)], spent + 0.1)
    assert arms is None and "max_gpu_hours" in why


def test_a_gate_that_opens_gets_blocks_with_its_baseline_and_control(tmp_path):
    p = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "repeats=2", "control=true"])
    sd = SweepDir(write_plan(p, [], render=False))
    gated = [v.name for v in p.variants if v.status == "gated"]
    assert gated and not any(n in gated for n, _ in p.runs)

    def open_(m: Manifest) -> list[str]:
        for n in gated:
            m.variant(n).set_status("planned")
        return schedule_new_arms(m)

    m, new = Manifest.update(sd, open_)
    assert new == sorted(gated) and [b["index"] for b in m.blocks] == [0, 1, 2, 3]
    assert all({"a2a.ovl0.dw0", "a2a.ovl0.dw0.ctl", *gated} <= set(b["order"]) for b in m.blocks[2:])


# -- the whole adaptive sweep through the conductor, with a scripted backend -------------------------------------
@dataclass
class DriftingBackend(UnscriptedBackend):
    """Every job succeeds at once; its log's step times follow a drifting machine (the position in time) and the
    arm's true speedup. The control and the baseline are the same job."""

    out: Path
    speedup: dict[str, float]
    max_concurrent: int | None = 1
    enforce_time_limit: bool = False
    launched: list[str] = field(default_factory=list)

    def launch(self, refs, mode, stage):
        rng = np.random.default_rng(len(self.launched))
        for r in refs:
            machine = 500.0 * (1 + 0.15 * np.sin(len(self.launched) / 30))  # drifts by up to +-15% over the sweep
            steps = machine / self.speedup.get(r.variant, 1.0) * rng.lognormal(0, 0.01, 30)
            p = self.out / f"{r.task}.log"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("".join(iteration_line(i + 1, 30, step_ms=float(s)) + "\n" for i, s in enumerate(steps)))
            self.launched.append(r.task)
        return {r.task: JobHandle(r.task, str(len(self.launched))) for r in refs}

    def poll(self, refs):
        return {r.task: JobState("succeeded", job_id="1", exit_code=0) for r in refs}

    def cancel(self, ref):
        pass

    def log_files(self, ref):
        return [self.out / f"{ref.task}.log"]

    def payload_out(self, ref):
        return self.out / ref.task

    def script(self, ref):
        return "#!/bin/bash\necho scripted\n"


@pytest.mark.slow  # a whole adaptive sweep
def test_adaptive_control_sweep_end_to_end_blocks_control_and_drift_in_manifest_and_report(tmp_path, monkeypatch):
    p = plan(tmp_path, "mode=train", "repeats=auto", "control=true", "max_blocks=5", "block_seed=3", "poll_s=0.01")
    root = write_plan(p, [], render=False)
    backend = DriftingBackend(tmp_path / "jobs", {"a2a.ovl1.dw0": 1.25})
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    rc = drive_mod.drive(SweepDir(root), p.settings, Options(), resume=False)
    m = Manifest.load(SweepDir(root))
    summary = json.loads((root / "report" / "summary.json").read_text())
    comps = {c["variant"]: c for c in summary["comparisons"]}
    # the arm with a 25% speedup is decided at the first or second look (under +-15% drift, with balanced block
    # orders); the control (an A/A) needs more blocks
    look = comps["a2a.ovl1.dw0"]["sequential"]["look"]
    assert comps["a2a.ovl1.dw0"]["verdict"] == "faster" and look in (2, 3)
    assert comps["a2a.ovl0.dw0.ctl"]["control"] is True and comps["a2a.ovl0.dw0.ctl"]["verdict"] == "equivalent"
    assert not any(c["doubtful"] for c in summary["comparisons"]) and rc == 0
    assert len(m.blocks) > look and all("a2a.ovl1.dw0" not in b["order"] for b in m.blocks[look:])
    assert all({"a2a.ovl0.dw0", "a2a.ovl0.dw0.ctl"} <= set(b["order"]) for b in m.blocks)
    # execution order = recorded order (attempts are numbered per variant: a1, a2, ...)
    assert [t.rsplit(".a", 1)[0] for t in backend.launched] == [f"{n}.r{r}" for n, r in m.runs]
    # the block variance is pooled over the three arms (analysis/measure/pooled.py), so the control is decided in
    # fewer blocks than with its own variance alone: the baseline's drift is seen over those blocks only
    assert summary["drift"][0]["spread"] > 0.02 and len(summary["drift"][0]["blocks"]) == len(m.blocks)
    assert summary["noise_floor"][0]["control"] == "a2a.ovl0.dw0.ctl"
    report = (root / "report" / "report.md").read_text()
    assert "Noise floor" in report and "Drift of the baseline" in report and (root / "report" / "drift.png").is_file()


def test_nightly_runs_in_blocks(tmp_path):
    p = make_plan(["action=plan", "sweep=nightly", f"output_dir={tmp_path / 'n'}"])
    kept = {v.name for v in p.variants if v.status == "planned"}
    assert len(p.blocks) == 3 and all(set(b["order"]) == kept for b in p.blocks)


def test_each_block_is_one_launch_so_pack_puts_a_block_in_one_allocation(tmp_path, monkeypatch):
    """On a backend without a concurrency limit (Slurm) every planned block is submitted at once, in block order,
    one ``launch`` call per block: with pack=true that call is one allocation (launchers/pack.py)."""
    from analysis.options import Options
    from experiments.conductor.progress import Display
    from experiments.conductor.tracking import Sweep, track

    p = plan(tmp_path, "mode=train", "repeats=3", "control=true")
    sd = SweepDir(write_plan(p, [], render=False))
    backend = DriftingBackend(tmp_path / "jobs", {}, max_concurrent=None)
    calls = []
    real = backend.launch
    monkeypatch.setattr(backend, "launch", lambda refs, mode, stage: calls.append([r.run_key for r in refs])
                        or real(refs, mode, stage))
    track(Sweep(sd, backend, SimpleNamespace(poll_s=0.01, hang_min_s=600, hang_action="cancel"), Options(),
                Display("t"), "train", []), runs_to_submit(sd, Manifest.load(sd)))
    assert calls == [[(n, b["index"]) for n in b["order"]] for b in p.blocks]


def test_manifest_add_block_extends_runs_and_rejects_unknown_names(tmp_path):
    sd = SweepDir(write_plan(plan(tmp_path, "repeats=2"), [], render=False))
    m = Manifest.load(sd)
    before = list(m.runs)
    assert m.add_block(["a2a.ovl1.dw0", "a2a.ovl0.dw0"]) == 2
    assert m.runs == [*before, ("a2a.ovl1.dw0", 2), ("a2a.ovl0.dw0", 2)]
    with pytest.raises(ValueError, match="unknown variant"):
        m.add_block(["nope"])
    assert Manifest.from_json(m.to_json()).blocks == m.blocks
