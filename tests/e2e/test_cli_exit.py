"""Both CLIs end through ``sys.exit(main())``, so what Python runs at a normal exit runs: cProfile writes its
profile (``python -m cProfile -o x.prof -m ...``), atexit handlers run, and the exit code is main()'s. Also a quoted
``"action='run'"`` runs the default sweep, as ``action=run`` does. The real CLIs, as subprocesses."""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.templates import CACHE_ENV

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "tests" / "analysis" / "fixtures" / "h200_mbridge_tiny_moe_baseline.log"
UNKNOWN = "20990101-000000Z-abcdef"
ATEXIT = """
import atexit, runpy, sys
atexit.register(lambda: open({mark!r}, "w").write("atexit ran"))
sys.argv = [{module!r}, *sys.argv[1:]]
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The subprocesses' environment: this tree, one job-template cache for the module's plans."""
    return {**os.environ, "PYTHONPATH": str(REPO), CACHE_ENV: str(tmp_path_factory.mktemp("shared-template-cache"))}


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _functions(prof: Path) -> set[str]:
    return {f"{Path(file).parent.name}/{Path(file).name}:{name}" for file, _, name in pstats.Stats(str(prof)).stats}


@pytest.mark.slow
def test_cprofile_writes_a_profile_of_the_report(tmp_path: Path, env: dict[str, str]) -> None:
    plain = _run(["-m", "analysis.report", str(LOG), "--out", str(tmp_path / "plain"), "--quiet"], env, tmp_path)
    prof = tmp_path / "x.prof"
    res = _run(["-m", "cProfile", "-o", str(prof), "-m", "analysis.report", str(LOG), "--out", str(tmp_path / "r"),
                "--quiet"], env, tmp_path)
    assert res.returncode == plain.returncode, res.stderr[-3000:]
    assert (tmp_path / "r" / "summary.json").exists()
    # from the argument parser to the last file written (CPython 3.12.1's profiler can leave out the frames that
    # were on the stack when a caught exception unwound below them, main() among them: the test names leaves)
    assert {"analysis/report.py:_parser", "analysis/render.py:to_html", "contracts/atomic.py:write_bytes"} <= \
        _functions(prof)


@pytest.mark.slow
def test_cprofile_writes_a_profile_of_the_sweep(tmp_path: Path, env: dict[str, str]) -> None:
    prof = tmp_path / "x.prof"
    res = _run(["-m", "cProfile", "-o", str(prof), "-m", "experiments.sweep", "action=plan",
                f"results_root={tmp_path / 'results'}"], env, REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert list((tmp_path / "results").glob("*/*/manifest.json"))
    # the planner, the last manifest write and the table printed after it (leaves: see the report's test)
    assert {"experiments/plan.py:make_plan", "contracts/manifest.py:mark_plan_complete",
            "experiments/report_plan.py:print_plan"} <= _functions(prof)


@pytest.mark.parametrize(("module", "args", "code"), [
    ("experiments.sweep", ["action=plan"], 0),
    ("experiments.sweep", ["action=status", f"sweep_id={UNKNOWN}"], 2),
    ("analysis.report", [str(LOG), "--quiet"], None),
    ("analysis.report", ["/no/such/log"], 2),
])
def test_atexit_handlers_run_and_the_code_is_mains(module: str, args: list[str], code: int | None, tmp_path: Path,
                                                    env: dict[str, str]) -> None:
    mark = tmp_path / "atexit.txt"
    extra = [f"results_root={tmp_path / 'results'}"] if module == "experiments.sweep" else []
    if module == "analysis.report" and code is None:
        extra = ["--out", str(tmp_path / "r")]
    res = _run(["-c", ATEXIT.format(mark=str(mark), module=module), *args, *extra], env, REPO)
    if code is None:  # the report's code is whatever main() returns for this log (its runs' verdicts)
        code = _run(["-m", module, *args, "--out", str(tmp_path / "again")], env, REPO).returncode
    assert res.returncode == code, res.stderr[-3000:]
    assert mark.read_text() == "atexit ran"


@pytest.mark.megatron  # the default sweep validates with Megatron-Core
@pytest.mark.slow
def test_a_quoted_run_action_runs_the_default_sweep(tmp_path: Path, env: dict[str, str]) -> None:
    root = tmp_path / "results"
    res = _run(["-m", "experiments.sweep", "action='run'", f"results_root={root}", "poll_s=0.5"], env, REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    (manifest,) = root.glob("isolation/*/manifest.json")
    m = json.loads(manifest.read_text())
    ran = [a["status"] for v in m["variants"] for a in v["attempts"]]
    assert ran and set(ran) == {"succeeded"}
    assert (manifest.parent / "report" / "summary.json").exists()
