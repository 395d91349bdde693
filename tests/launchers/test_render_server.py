"""launchers.render_server: NeMo-Run's dry run in a forked child gives the text and the errors the dry run gives in
this process; whatever fails on the way (an argument that does not pickle, the child gone) renders here instead."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from launchers import render_server
from launchers.envvars import JobEnv
from launchers.errors import LaunchConfigError
from launchers.render import JobScripts, render_job_script
from launchers.spec import RunSpec
from tests.launchers.conftest import profile


def _spec(sweep: Path, name: str, attempt: int = 1) -> RunSpec:
    path = sweep / "variants" / name / "variant.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "variant": name}))
    return RunSpec(variant=name, variant_json=path, attempt=attempt, mode="train")


KWARGS = {"title": "sweep", "label": "s1", "python": "python",
          "env": JobEnv(plain={"QUOTED": "it's $HOME"}, secrets={"HF_TOKEN": "hf_secret_x"})}


@pytest.fixture
def server():
    s = render_server.RenderServer()
    assert s.alive, f"no fork from a process of {threading.active_count()} threads: {threading.enumerate()}"
    yield s
    s.close()


@pytest.mark.parametrize("name", ["h100_slurm", "local_slurm", "local"])
def test_the_childs_text_is_the_dry_runs(name: str, tmp_path: Path, server, no_host_secrets: None) -> None:
    kwargs = {**KWARGS, "gpus": 0} if name == "local" else KWARGS
    if name == "local":
        kwargs = {k: v for k, v in kwargs.items() if k != "python"}
    for attempt in (1, 2):
        spec = _spec(tmp_path / "sweep", "a2a.ovl1.dw0", attempt)
        here = render_job_script(profile(name), spec, state_dir=tmp_path / "sweep" / "nemo_run", **kwargs)
        there = server.render_job_script(profile(name), spec, state_dir=tmp_path / "sweep" / "nemo_run", **kwargs)
        assert there == here and "a2a.ovl1.dw0" in there and "hf_secret_x" not in there
    assert server.alive


def test_an_error_in_the_child_is_raised_here(tmp_path: Path, server, no_host_secrets: None) -> None:
    spec = _spec(tmp_path / "sweep", "bad")
    broken = profile("h100_slurm", account=None)  # refused by the executor: cluster.account is required
    with pytest.raises(LaunchConfigError) as here:
        render_job_script(broken, spec, state_dir=tmp_path / "nemo_run", **KWARGS)
    with pytest.raises(LaunchConfigError) as there:
        server.render_job_script(broken, spec, state_dir=tmp_path / "nemo_run", **KWARGS)
    assert str(there.value) == str(here.value) and server.alive


def test_what_does_not_pickle_or_a_dead_child_renders_here(tmp_path: Path, server, no_host_secrets: None) -> None:
    spec = _spec(tmp_path / "sweep", "x")
    want = render_job_script(profile("h100_slurm"), spec, state_dir=tmp_path / "nemo_run", **KWARGS)
    os.kill(server.pid, signal.SIGKILL)
    assert server.render_job_script(profile("h100_slurm"), spec, state_dir=tmp_path / "nemo_run", **KWARGS) == want
    assert not server.alive  # let go: later calls render here at once


def test_the_plans_templates_come_from_the_child(tmp_path: Path, server, no_host_secrets: None,
                                                 monkeypatch) -> None:
    monkeypatch.setenv("MOE_SWEEP_CACHE", "off")  # every shape's template is a dry run
    asked = []
    real = server.render_job_script
    monkeypatch.setattr(server, "render_job_script", lambda *a, **k: asked.append(a[1].variant) or real(*a, **k))
    sweep = tmp_path / "sweep"
    scripts = JobScripts(server)
    names = ["a2a.ovl0.dw0", "a2a.ovl1.dw1", "deepep.ovl1.dw0"]
    fast = [scripts.render(profile("h100_slurm"), _spec(sweep, n), state_dir=sweep / "nemo_run", **KWARGS)
            for n in names]
    full = [render_job_script(profile("h100_slurm"), _spec(sweep, n), state_dir=sweep / "nemo_run", **KWARGS)
            for n in names]
    assert fast == full and len(asked) == 1  # one shape, one dry run, in the child


def test_start_and_stop_keep_one_server() -> None:
    first = render_server.start()
    try:
        assert first is not None and render_server.start() is first and render_server.current() is first
    finally:
        render_server.stop()
    assert render_server.current() is None and first.pid is None
