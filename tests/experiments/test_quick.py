"""The fast settings of action=status / action=cancel (experiments/quick.py) equal the full Hydra compose's: the same
settings, the same preset, the same error for a typo'd key or option, and Hydra's reading of every value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from experiments.compose import compose_overrides
from experiments.quick import _UNSET, _value, composed_keys, quick_settings
from experiments.settings import SweepSettings

REPO = Path(__file__).resolve().parents[2]

PLAIN = [
    ["action=status", "sweep_id=20261129-160000Z-a1b2c3"],
    ["action=status", "sweep_id=latest", "sweep=nightly", "results_root=/tmp/x/results"],
    ["action=cancel", "output_dir=results/isolation/20261129-160000Z-a1b2c3"],
    ["action=status", "output_dir=./a.b/c-d_e", "poll_s=1", "hang_min_s=30.5", "repeats=3", "detach=true"],
    ["action=status", "sweep=full", "mode=null", "dry_run=False", "max_gpu_hours=12"],
    ["action=status", "block_seed=7", "control=TRUE", "repeats=auto", "pack=false", "sweep_id=latest"],
    ["action=status", "poll_s=1", "poll_s=3", "sweep=full", "sweep=nightly"],  # the last word wins, as in Hydra
]


def _full(argv: list[str]) -> tuple[SweepSettings, str]:
    cfg = compose_overrides(argv).base
    return SweepSettings.from_cfg(cfg), str(cfg["sweep"]["name"])


@pytest.mark.parametrize("argv", PLAIN, ids=lambda a: " ".join(a))
def test_the_same_settings_as_the_full_compose(argv: list[str]) -> None:
    quick = quick_settings(argv)
    assert quick is not None
    assert quick == _full(argv)


TYPOS = [
    ["action=status", "sweep_idd=20261129-160000Z-a1b2c3"],
    ["action=cancel", "output_dirr=/tmp/x"],
    ["action=status", "sweep=nighty", "sweep_id=latest"],
    ["action=status", "sweep=nighty", "modle=x"],  # the option is checked before the key, as Hydra's path does
    ["action=status", "Sweep_id=latest"],
    ["action=status", "repeats=0"],
    ["action=status", "sweep_id=yesterday"],
    ["action=status", "hang_action=kill"],
]


@pytest.mark.parametrize("argv", TYPOS, ids=lambda a: " ".join(a))
def test_a_typo_fails_with_the_full_compose_error(argv: list[str]) -> None:
    with pytest.raises(ConfigError) as full:
        _full(argv)
    with pytest.raises(ConfigError) as quick:
        quick_settings(argv)
    assert str(quick.value) == str(full.value)
    assert any(word in str(quick.value) for a in argv[1:] for word in a.split("=")[:1] + a.split("=")[1:])


@pytest.mark.parametrize("argv", [
    ["action=status", "+history.alpha=0.1"], ["action=status", "history.url=sqlite:///x.db"],
    ["action=status", "sweep=full,nightly"], ["action=status", "model=qwen3_30b_a3b"],
    ["action=status", "output_dir='a b'"], ["action=status", "poll_s=1e3"], ["action=status", "poll_s=inf"],
    ["action=status", "payload=x"], ["action=status", "~poll_s"], ["action=status", "output_dir=${oc.env:HOME}"],
])
def test_anything_else_is_left_to_hydra(argv: list[str]) -> None:
    assert quick_settings(argv) is None


VALUES = ["0", "7", "-3", "+4", "10.25", "-0.5", "true", "False", "TRUE", "null", "NULL", "results", "a.b/c-d_e",
          "20261129-160000Z-a1b2c3", "latest", "1e3", "1_000", "007", "1.", ".5", "inf", "nan", "1.2.3", "x1e5",
          "-", "a-1", "0x10", "/abs/path"]


@pytest.mark.parametrize("text", VALUES)
def test_values_read_as_hydra_reads_them(text: str) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra = OverridesParser.create().parse_override(f"poll_s={text}").value()
    mine = _value(text)
    if mine is not _UNSET:
        assert type(mine) is type(hydra) and mine == hydra, (text, mine, hydra)


def test_composed_keys_are_the_top_level_of_the_composed_config() -> None:
    assert composed_keys() == sorted(compose_overrides([]).base)


def _sweep(tmp_path: Path) -> Path:
    """A planned local sweep (no scheduler to ask)."""
    out = tmp_path / "s"
    subprocess.run([sys.executable, "-m", "experiments.sweep", "action=plan", f"output_dir={out}"], cwd=REPO,
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return out


def test_status_runs_without_hydra_and_cancel_too(tmp_path: Path) -> None:
    out = _sweep(tmp_path)
    code = ("import sys, json; from experiments.sweep import main; rc = main(sys.argv[1:]); "
            "print(json.dumps([rc, sorted(m for m in ('hydra', 'omegaconf', 'nemo_run', 'scipy', 'sqlalchemy', "
            "'matplotlib', 'torch', 'experiments.plan') if m in sys.modules)]))")
    for action in ("status", "cancel"):
        res = subprocess.run([sys.executable, "-c", code, f"action={action}", f"output_dir={out}"], cwd=REPO,
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
        rc, imported = json.loads(res.stdout.strip().splitlines()[-1])
        assert rc == 0 and imported == [], (action, imported, res.stderr)
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", "action=status", f"output_dirr={out}"],
                         cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 2
    assert "unknown key 'output_dirr'" in res.stderr and "Did you mean 'output_dir'?" in res.stderr
