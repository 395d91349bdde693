"""The code packager (clean-tree guard, what the archive holds) and NEMORUN_HOME handling."""

from __future__ import annotations

import importlib
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from launchers.errors import LaunchConfigError
from launchers.home import ALIAS_NAME, nemo_run, nemorun_home, nemorun_home_path, no_stdin, use_nemorun_home
from launchers.packaging import code_packager, git_state
from launchers.render import render_job_script
from launchers.spec import RunSpec
from tests.launchers.conftest import profile


def _archive_members(packager, repo: Path, tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "pkg"
    out.mkdir()
    with no_stdin():  # invoke forwards stdin to git/tar; pytest's stdin cannot be read
        tarball = packager.package(repo, str(out), "job")
    with tarfile.open(tarball) as tar:
        return {m.name.lstrip("./"): tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_clean_tree_ships_head_and_the_variant_file(code_repo: Path, sweep: Path, tmp_path: Path) -> None:
    vj = sweep / "variants" / "a2a.ovl1.dw0" / "variant.json"
    state = git_state(code_repo)
    packager = code_packager(state, extra_files=[(vj, sweep)])
    assert not state.dirty and packager.check_uncommitted_changes and packager.ref == state.sha
    files = _archive_members(packager, code_repo, tmp_path)
    assert files["tool.py"] == "print('committed')\n"
    assert "a2a.ovl1.dw0" in files["variants/a2a.ovl1.dw0/variant.json"]


def test_dirty_tree_is_refused_with_the_file_and_the_fix(code_repo: Path) -> None:
    (code_repo / "tool.py").write_text("print('changed')\n")
    with pytest.raises(LaunchConfigError, match=r"uncommitted changes \(tool.py\).*allow_dirty=true"):
        code_packager(git_state(code_repo))


def test_allow_dirty_ships_the_working_tree(code_repo: Path, tmp_path: Path) -> None:
    (code_repo / "tool.py").write_text("print('changed')\n")
    state = git_state(code_repo)
    packager = code_packager(state, allow_dirty=True)
    assert state.dirty and state.changed == ("tool.py",) and packager.ref != state.sha
    assert _archive_members(packager, code_repo, tmp_path)["tool.py"] == "print('changed')\n"
    assert git_state(code_repo).dirty  # nothing was stashed away: the tree is untouched


def test_a_tree_dirtied_after_the_check_is_refused_at_packaging(code_repo: Path, tmp_path: Path) -> None:
    packager = code_packager(git_state(code_repo))
    (code_repo / "tool.py").write_text("print('changed later')\n")
    with pytest.raises(LaunchConfigError, match="uncommitted changes"):
        _archive_members(packager, code_repo, tmp_path)


def test_not_a_git_checkout_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LaunchConfigError, match="not a git checkout.*cluster=local"):
        git_state(tmp_path)


def test_local_render_works_in_a_copy_without_git(sweep: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    spec = RunSpec(variant="a2a.ovl1.dw0", variant_json=sweep / "variants" / "a2a.ovl1.dw0" / "variant.json")
    text = render_job_script(profile("local"), spec, state_dir=sweep / "nemo_run", gpus=0, cwd=copy)
    assert f"cd {copy}" in text and "-m experiments.train" in text


def test_home_alias_avoids_the_nemo_run_rewrite(tmp_path: Path) -> None:
    state = tmp_path / "sweep" / "nemo_run"
    assert nemorun_home_path(state) == tmp_path / "sweep" / ALIAS_NAME
    assert nemorun_home_path(tmp_path / "elsewhere") == tmp_path / "elsewhere"
    with pytest.raises(LaunchConfigError, match="nemo_run"):
        nemorun_home_path(tmp_path / "nemo_run_tests" / "x" / "nemo_run")


def test_home_follows_the_sweep_even_after_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEMORUN_HOME", raising=False)
    run = nemo_run()
    slurm_sched = importlib.import_module("nemo_run.run.torchx_backend.schedulers.slurm")
    with nemorun_home(tmp_path / "s1" / "nemo_run") as home:
        assert os.environ["NEMORUN_HOME"] == str(home)
        assert run.config.get_nemorun_home() == str(home)
        assert slurm_sched.SLURM_JOB_DIRS == str(home / ".slurm_jobs")
        assert (tmp_path / "s1" / ALIAS_NAME).resolve() == (tmp_path / "s1" / "nemo_run").resolve()
    assert "NEMORUN_HOME" not in os.environ
    other = use_nemorun_home(tmp_path / "s2")
    assert slurm_sched.SLURM_JOB_DIRS == str(other / ".slurm_jobs")
    shutil.rmtree(tmp_path / "s2")
