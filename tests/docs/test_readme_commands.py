"""Every command the README shows runs, as a user would type it, in a copy of the project with the user's own
profile made by the README's first step (``conf/cluster/my_site.yaml``): the sweep commands that would submit to
a cluster run as ``action=plan`` (they must plan, with the profiles shipped), the cron lines too; the commands on an
existing sweep (``<id>``) run against a planned local sweep; ``analysis.report`` runs on the shipped H200 fixture.
Also: the README stays at most 350 lines."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PY = re.compile(r"(?:\.venv/bin/)?python -m (?:experiments\.sweep|analysis\.report)\b.*")
FENCE = re.compile(r"(?ms)^```[a-z]*\n(.*?)^```")
SKIP = ("my_old_logs", "[Hydra overrides]")  # loose logs of the user's own; the synopsis


def readme_commands() -> list[str]:
    """The ``python -m experiments.sweep|analysis.report`` commands of the README: in code blocks (continuation
    lines joined, comments and redirections dropped) and in inline code spans (which may wrap)."""
    text = README.read_text()
    found = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            m = PY.search(line.split(" #")[0].split(" >>")[0])
            if m:
                found.append(m.group(0))
    prose = FENCE.sub("", text)
    found += [m.group(0) for span in re.findall(r"`([^`]+)`", prose) if (m := PY.match(" ".join(span.split())))]
    cmds = [" ".join(c.split()).removeprefix(".venv/bin/") for c in found]
    return [c for c in dict.fromkeys(cmds) if not any(s in c for s in SKIP)]


def test_the_readme_stays_short_and_shows_its_commands():
    assert len(README.read_text().splitlines()) <= 350
    cmds = readme_commands()
    assert any("cluster=my_site" in c for c in cmds) and any("sweep=nightly" in c and "cluster=b200_slurm" in c
                                                              for c in cmds)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the code, conf/ and the fixtures, with conf/cluster/my_site.yaml as step 1 makes it."""
    dest = tmp_path_factory.mktemp("clone")
    for part in ("experiments", "contracts", "launchers", "analysis", "conf", "tests/e2e/fixtures/h200_blocks"):
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    site = (ROOT / "conf" / "cluster" / "example_site.yaml").read_text()
    (dest / "conf" / "cluster" / "my_site.yaml").write_text(re.sub(r"(?m)^name: \S+", "name: my_site", site))
    return dest


def _run(project: Path, cmd: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(cmd)
    assert argv[0] == "python", cmd
    return subprocess.run([sys.executable, *argv[1:], *extra], cwd=project, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(project)})


@pytest.mark.slow
@pytest.mark.megatron
@pytest.mark.parametrize("cmd", readme_commands())
def test_a_readme_command_runs(project: Path, tmp_path: Path, cmd: str) -> None:
    results = tmp_path / "results"
    if "<id>" in cmd or "sweep_id=latest" in cmd:  # a command on an existing sweep: a planned local one
        planned = _run(project, "python -m experiments.sweep action=plan", f"results_root={results}")
        assert planned.returncode == 0, planned.stderr[-2000:]
        (folder,) = results.glob("isolation/*")
        cmd = cmd.replace("results/isolation/<id>", str(folder)).replace("<id>", folder.name)
        cmd = cmd.replace("output_dir=DIR", f"output_dir={folder}")
        res = _run(project, cmd, f"results_root={results}") if "experiments.sweep" in cmd else _run(project, cmd)
        if "sweep_id=latest" in cmd:  # nothing of that preset was ever submitted here: said so, exit 2
            assert res.returncode == 2 and "no submitted sweep of preset nightly" in res.stderr, res.stderr[-2000:]
        else:
            assert res.returncode in (0, 3), res.stderr[-2000:]  # 3: a resumed validate sweep's analysis of a plan
            assert "Traceback" not in res.stderr, res.stderr[-2000:]
        return
    if "analysis.report" in cmd:
        res = _run(project, cmd.replace("/tmp/ab_bench_report", str(tmp_path / "report")))
        assert res.returncode == 0 and "1.006 [1.003, 1.009]" in res.stdout + res.stderr, res.stderr[-2000:]
        return
    # a sweep that would submit to a cluster: it must plan, with the profile the README names
    extra = [f"output_dir={tmp_path / 'plan'}", "allow_dirty=true"]
    res = _run(project, cmd if "action=plan" in cmd else f"{cmd} action=plan", *extra)
    assert res.returncode == 0, res.stderr[-2000:]
