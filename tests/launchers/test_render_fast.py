"""The plan's fast job scripts (launchers.render.JobScripts: one NeMo-Run dry run per shape, then the variant name
substituted) equal the full NeMo-Run dry run of each variant, byte for byte, quoting cases included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchers.envvars import JobEnv
from launchers.errors import LaunchConfigError
from launchers.render import _SENTINEL, JobScripts, render_job_script
from launchers.spec import JobCommand, RunSpec
from tests.launchers.conftest import profile

# names that look alike, names holding each other, every allowed symbol, the longest allowed name
VARIANTS = ("a2a.ovl1.dw0", "a2a.ovl1.dw0.gbs128", "deepep.ovl0.dw1_mbs-2", "x", "A" * 80, "hybridep.ovl1.dw1.lr1e-4")


def _variant_file(sweep: Path, name: str) -> Path:
    path = sweep / "variants" / name / "variant.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "variant": name}))
    return path


@pytest.mark.parametrize("name", ["h100_slurm", "local_slurm", "local"])
@pytest.mark.parametrize("folder", ["sweep", "sweep with 'quotes' & $pace"])
def test_fast_scripts_equal_the_dry_run(name: str, folder: str, tmp_path: Path, no_host_secrets: None) -> None:
    sweep = tmp_path / folder
    state_dir = sweep / "nemo_run"
    env = JobEnv(plain={"QUOTED": "it's \"x\" $HOME", "CUDA_DEVICE_MAX_CONNECTIONS": "32"},
                 secrets={"HF_TOKEN": "hf_secret_a2a"})
    kwargs = {"title": "sweep", "label": "s2", "env": env}
    if name == "local":
        kwargs["gpus"] = 0
    else:
        kwargs["python"] = "python"
    scripts = JobScripts()
    try:
        for attempt, mode, hold in ((1, "validate", None), (2, "train", 30.0)):
            for variant in VARIANTS:
                spec = RunSpec(variant=variant, variant_json=_variant_file(sweep, variant), attempt=attempt,
                               mode=mode, hold_s=hold)
                try:
                    full = render_job_script(profile(name), spec, state_dir=state_dir, **kwargs)
                except LaunchConfigError as exc:  # the same error, naming the real variant's file
                    with pytest.raises(LaunchConfigError) as fast_exc:
                        scripts.render(profile(name), spec, state_dir=state_dir, **kwargs)
                    assert str(fast_exc.value) == str(exc) and variant in str(exc)
                    continue
                fast = scripts.render(profile(name), spec, state_dir=state_dir, **kwargs)
                assert fast == full, (name, variant, attempt)
                assert variant in fast and _SENTINEL not in fast and "hf_secret_a2a" not in fast
    finally:
        scripts.close()
    assert sorted(p.name for p in (sweep / "variants").iterdir()) == sorted(VARIANTS)  # no placeholder left


def test_one_dry_run_per_shape(monkeypatch: pytest.MonkeyPatch, sweep: Path, no_host_secrets: None) -> None:
    import launchers.render as render

    calls = []
    real = render.render_job_script
    monkeypatch.setattr(render, "render_job_script", lambda *a, **k: calls.append(getattr(a[1], "variant", None)) or real(*a, **k))
    scripts = JobScripts()
    try:
        for variant in VARIANTS:
            spec = RunSpec(variant=variant, variant_json=_variant_file(sweep, variant), attempt=1, mode="validate")
            scripts.render(profile("local_slurm"), spec, state_dir=sweep / "nemo_run", python="python")
        assert calls == [_SENTINEL]
        # another shape (another label) is rendered once more; a command is rendered in full
        spec = RunSpec(variant="x", variant_json=_variant_file(sweep, "x"), attempt=1, mode="validate")
        scripts.render(profile("local_slurm"), spec, state_dir=sweep / "nemo_run", python="python", label="s2")
        assert calls == [_SENTINEL, _SENTINEL]
    finally:
        scripts.close()
    cmd = JobCommand(name="smoke", argv=("echo", "a b"))
    assert JobScripts().render(profile("local_slurm"), cmd, state_dir=sweep / "nemo_run") == render_job_script(
        profile("local_slurm"), cmd, state_dir=sweep / "nemo_run")
