"""Fixtures of the launcher tests: cluster profiles, a sweep folder with a variant file, a git checkout, Slurm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.cluster import ClusterConfig

REPO = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() == "true"
SECRET_NAMES = ("WANDB_API_KEY", "HF_TOKEN")


def profile(name: str, **changes: Any) -> ClusterConfig:
    """The typed cluster profile of conf/cluster/<name>.yaml with ``changes`` to its fields (a ``tunnel`` mapping
    changes those fields of the profile's tunnel), checked as the planner checks it."""
    data = yaml.safe_load((REPO / "conf" / "cluster" / f"{name}.yaml").read_text())
    tunnel = changes.pop("tunnel", None)
    data.update(changes)
    if tunnel is not None:
        data["tunnel"] = {**data["tunnel"], **tunnel} if isinstance(tunnel, dict) else tunnel
    return ClusterConfig.from_mapping(data)


@pytest.fixture
def no_host_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendered text must not depend on secrets the test machine happens to have set."""
    for name in SECRET_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A sweep folder with ``variants/a2a.ovl1.dw0/variant.json`` (enough for the launcher: it ships the file)."""
    root = tmp_path / "sweep"
    vdir = root / "variants" / "a2a.ovl1.dw0"
    vdir.mkdir(parents=True)
    (vdir / "variant.json").write_text(json.dumps({"schema_version": 1, "variant": "a2a.ovl1.dw0"}))
    return root


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def make_repo(root: Path) -> Path:
    """A clean git checkout at ``root`` with one committed file, ``tool.py`` (the code a job gets)."""
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "tool.py").write_text("print('committed')\n")
    _git(root, "add", "tool.py")
    _git(root, "commit", "-qm", "init")
    return root


@pytest.fixture
def code_repo(tmp_path: Path) -> Path:
    """A clean git checkout with one committed file, ``tool.py``."""
    return make_repo(tmp_path / "code")


def slurm_up() -> bool:
    return shutil.which("sinfo") is not None and subprocess.run(
        ["sinfo", "-h"], capture_output=True, timeout=20, check=False).returncode == 0


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The local Slurm cluster, started by scripts/slurm_local/start.sh when it is not up.

    Missing in CI (CI=true) is a failure; elsewhere the test is skipped with the command that starts it.
    """
    if not slurm_up() and os.geteuid() == 0:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm_local" / "start.sh")], check=False, timeout=600)
    if not slurm_up():
        why = "the local Slurm cluster is not running: bash scripts/slurm_local/start.sh (as root)"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
