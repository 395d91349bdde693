"""The disk cache of job-script templates (launchers/templates.py): a template stored for one sweep serves another
sweep folder byte for byte as NeMo-Run's dry run renders it there, without a dry run; any other input is a miss."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import launchers.render as render
from contracts.cluster import ClusterConfig
from launchers.render import JobScripts, render_job_script
from launchers.spec import RunSpec
from launchers.templates import CACHE_ENV, ROOT_TOKEN, _sub, cache_dir
from tests.launchers.conftest import profile


def _spec(sweep: Path, name: str = "a2a.ovl1.dw0", **kw) -> RunSpec:
    path = sweep / "variants" / name / "variant.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "variant": name}))
    return RunSpec(variant=name, variant_json=path, **{"attempt": 1, "mode": "validate", **kw})


def _fast(cluster: ClusterConfig, spec: RunSpec, sweep: Path, counter: list, monkeypatch, **kwargs) -> str:
    real = render_job_script
    monkeypatch.setattr(render, "render_job_script", lambda *a, **k: counter.append(1) or real(*a, **k))
    try:
        return JobScripts().render(cluster, spec, state_dir=sweep / "nemo_run", **kwargs)
    finally:
        monkeypatch.setattr(render, "render_job_script", real)


@pytest.mark.parametrize("name", ["h100_slurm", "local_slurm", "local"])
def test_a_stored_template_serves_another_sweep_exactly(name, tmp_path, monkeypatch, no_host_secrets) -> None:
    kwargs = {"title": "full", "label": "s2"} | ({"gpus": 0} if name == "local" else {})
    first, other = tmp_path / "a" / "sweep", tmp_path / "elsewhere" / "results" / "full" / "20261201-000000Z-abcdef"
    calls: list = []
    _fast(profile(name), _spec(first), first, calls, monkeypatch, **kwargs)
    assert calls == [1] and len(list(cache_dir().glob("*.sh"))) == 1
    stored = next(cache_dir().glob("*.sh")).read_text()
    assert ROOT_TOKEN in stored and str(first) not in stored
    spec = _spec(other, "deepep.ovl1.dw0.gbs128")
    fast = _fast(profile(name), spec, other, calls, monkeypatch, **kwargs)
    assert calls == [1]  # no dry run for the second sweep
    assert fast == render_job_script(profile(name), spec, state_dir=other / "nemo_run", **kwargs)
    assert str(other) in fast and "deepep.ovl1.dw0.gbs128" in fast


def test_every_other_input_is_a_miss(tmp_path, monkeypatch, no_host_secrets) -> None:
    sweep = tmp_path / "sweep"
    calls: list = []
    cluster = profile("h100_slurm")
    _fast(cluster, _spec(sweep), sweep, calls, monkeypatch, label="s1")
    _fast(cluster, _spec(sweep), sweep, calls, monkeypatch, label="s1")
    assert len(calls) == 1
    _fast(cluster, _spec(sweep), sweep, calls, monkeypatch, label="s2")  # another batch label
    _fast(replace(cluster, partition="other"), _spec(sweep), sweep, calls, monkeypatch, label="s1")
    _fast(replace(cluster, env_vars={**cluster.env_vars, "X": "1"}), _spec(sweep), sweep, calls, monkeypatch,
          label="s1")
    _fast(cluster, _spec(sweep, attempt=2), sweep, calls, monkeypatch, label="s1")
    _fast(cluster, _spec(sweep, mode="train", hold_s=5.0), sweep, calls, monkeypatch, label="s1")
    monkeypatch.setenv("HF_TOKEN", "hf_x")  # a secret this shell passes through changes the job's environment
    _fast(replace(cluster, secret_env=("HF_TOKEN",)), _spec(sweep), sweep, calls, monkeypatch, label="s1")
    monkeypatch.delenv("HF_TOKEN")
    _fast(replace(cluster, secret_env=("HF_TOKEN",)), _spec(sweep), sweep, calls, monkeypatch, label="s1")
    assert len(calls) == 8
    assert not any("hf_x" in p.read_text() for p in cache_dir().glob("*.sh"))


def test_folders_with_other_characters_and_off_are_not_cached(tmp_path, monkeypatch, no_host_secrets) -> None:
    calls: list = []
    for odd in ("sweep+1", "a=b", "x,y"):  # what sbatch takes but a plain path has not
        sweep = tmp_path / odd / "s"
        spec = _spec(sweep)
        fast = _fast(profile("local_slurm"), spec, sweep, calls, monkeypatch)
        assert fast == render_job_script(profile("local_slurm"), spec, state_dir=sweep / "nemo_run")
    assert list(cache_dir().glob("*.sh")) == []
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_dir() is None
    plain = tmp_path / "plain"
    _fast(profile("local_slurm"), _spec(plain), plain, calls, monkeypatch)
    _fast(profile("local_slurm"), _spec(plain), plain, calls, monkeypatch)
    assert len(calls) == 5


def test_a_path_is_replaced_only_where_it_is_whole() -> None:
    text = "/tmp/s /tmp/s/x /tmp/sx /a/tmp/s '/tmp/s' --o=/tmp/s:/m /tmp/s.x"
    assert _sub(text, "/tmp/s", "@") == "@ @/x /tmp/sx /a/tmp/s '@' --o=@:/m /tmp/s.x"
