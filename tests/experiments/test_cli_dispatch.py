"""``python -m experiments.sweep`` reads its action from the command line as Hydra composes it, in every spelling
Hydra accepts (``action=status``, ``"action='status'"``, ``'action="status"'``), and dispatches on it: a status,
cancel or collect of an unknown sweep id exits 2 and writes nothing; one of a planned sweep acts on that sweep and
plans no new one. The real CLI, as subprocesses; they share one job-template cache, so only the first plan imports
NeMo-Run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.templates import CACHE_ENV

REPO = Path(__file__).resolve().parents[2]
UNKNOWN = "20990101-000000Z-abcdef"

# the unquoted form in the fast tier; the two quoted forms (Hydra unquotes them to the same value) in the slow one
FORMS = [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]


def _forms(action: str) -> list[str]:
    return [f"action={action}", f"action='{action}'", f'action="{action}"']


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    # a wide console: the plan's last line names a long folder that a narrower one would fold
    env = {**os.environ, "PYTHONPATH": str(REPO), CACHE_ENV: str(cache), "COLUMNS": "1000"}
    return subprocess.run([sys.executable, "-m", "experiments.sweep", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared-template-cache")


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Path:
    """A planned (never submitted) default sweep: ``<root>/isolation/<id>/``."""
    root = tmp_path_factory.mktemp("planned")
    res = _cli("action=plan", f"results_root={root}", cache=cache)
    assert res.returncode == 0, res.stderr[-3000:]
    (sweep,) = root.glob("*/*/manifest.json")
    return sweep.parent


def _copy(planned: Path, tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "results"
    shutil.copytree(planned.parent.parent, root, symlinks=True)
    return root, planned.name


@pytest.mark.parametrize("action", ["status", "cancel", "collect"])
@pytest.mark.parametrize("form", FORMS)
def test_an_unknown_sweep_id_exits_2_and_writes_nothing(action: str, form: int, tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "results"
    res = _cli(_forms(action)[form], f"sweep_id={UNKNOWN}", f"results_root={root}", cache=cache)
    assert res.returncode == 2, res.stderr[-3000:]
    assert f"sweep_id={UNKNOWN} not found" in res.stderr
    assert not root.exists() and _files(tmp_path) == []


@pytest.mark.parametrize("form", FORMS)
def test_a_resume_of_an_unknown_sweep_id_exits_2_and_writes_nothing(form: int, tmp_path: Path, cache: Path) -> None:
    root = tmp_path / "results"
    res = _cli(_forms("run")[form], f"sweep_id={UNKNOWN}", f"results_root={root}", cache=cache)
    assert res.returncode == 2 and f"sweep_id={UNKNOWN} not found" in res.stderr, res.stderr[-3000:]
    assert _files(tmp_path) == []


@pytest.mark.parametrize("form", FORMS)
def test_status_shows_the_sweep_and_writes_nothing(form: int, planned: Path, tmp_path: Path, cache: Path) -> None:
    root, sweep_id = _copy(planned, tmp_path)
    before = {p: (root / p).read_bytes() for p in _files(root) if (root / p).is_file()}
    res = _cli(_forms("status")[form], f"sweep_id={sweep_id}", f"results_root={root}", cache=cache)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"sweep {sweep_id} (isolation, local, mode=validate)" in res.stdout
    assert "plan written" not in res.stdout
    assert {p: (root / p).read_bytes() for p in _files(root) if (root / p).is_file()} == before


@pytest.mark.parametrize("form", FORMS)
def test_cancel_cancels_that_sweep(form: int, planned: Path, tmp_path: Path, cache: Path) -> None:
    root, sweep_id = _copy(planned, tmp_path)
    res = _cli(_forms("cancel")[form], f"sweep_id={sweep_id}", f"results_root={root}", cache=cache)
    assert res.returncode == 0, res.stderr[-3000:]
    # a planned sweep has no job yet, so nothing to cancel; a new sweep would have planned and run instead
    assert res.stdout == f"cancelled 0 unfinished run(s) of sweep {sweep_id}\n"
    assert [p.parent.name for p in root.glob("*/*/manifest.json")] == [sweep_id]


@pytest.mark.parametrize("form", FORMS)
def test_collect_analyses_that_sweep(form: int, planned: Path, tmp_path: Path, cache: Path) -> None:
    root, sweep_id = _copy(planned, tmp_path)
    res = _cli(_forms("collect")[form], f"sweep_id={sweep_id}", f"results_root={root}", cache=cache)
    assert res.returncode == 3, res.stderr[-3000:]  # nothing was submitted: every kept run is incomplete
    assert "no run launched" in res.stdout + res.stderr and "plan written" not in res.stdout
    assert [p.parent.name for p in root.glob("*/*/manifest.json")] == [sweep_id]
    assert (root / "isolation" / sweep_id / "report" / "summary.json").exists()


@pytest.mark.parametrize("args", [[form] for form in _forms("plan")] + [["dry_run=true"], ["dry_run=True"]])
def test_plan_and_dry_run_write_a_plan_and_submit_nothing(args: list[str], tmp_path: Path, cache: Path,
                                                          planned: Path) -> None:
    res = _cli(*args, f"results_root={tmp_path}", cache=cache)
    assert res.returncode == 0, res.stderr[-3000:]
    (manifest,) = tmp_path.glob("isolation/*/manifest.json")
    assert f"plan written to {manifest.parent}" in res.stdout
    m = json.loads(manifest.read_text())
    assert m["plan_state"] == "complete" and all(v["attempts"] == [] for v in m["variants"])
    assert not (manifest.parent / "nemo_run").exists()  # no job was started


def test_a_quoted_dry_run_is_a_string_and_exits_2(tmp_path: Path, cache: Path) -> None:
    res = _cli("dry_run='true'", f"results_root={tmp_path / 'r'}", cache=cache)
    assert res.returncode == 2 and "dry_run='true' must be true or false" in res.stderr
    assert _files(tmp_path) == []


def test_the_keys_given_under_a_group_are_hydras_parsed_keys() -> None:
    from experiments.compose import compose_overrides

    composed = compose_overrides(["analysis.bootstrap=500", "history.window=3", "+history.note='a=b'",
                                  "history.threshold=0.1", "model.seq_length=2048", "action='status'"])
    assert composed.given("analysis") == {"bootstrap"}
    assert composed.given("history") == {"window", "note", "threshold"}
    assert composed.given("payload") == set()
    assert composed.base["action"] == "status" and composed.base["history"]["note"] == "a=b"
