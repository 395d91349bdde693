"""Every command the README shows runs, as a user would type it, in a copy of the project with the user's own
profile made by the README's first step (its ``cp`` line, then ``name: my_site``).

:func:`readme_commands` finds the commands: each line of a code block and each inline code span whose first word
(after ``VAR=value`` assignments) is a program of :data:`PROGRAMS` or a path into the project, with at least one
argument (a lone word such as `sbatch` names a program), and each cron line. Each one must match exactly one runner
of :data:`RUNNERS` or be one of the documented :data:`PLACEHOLDERS`: a command added to the README later is picked
up, and one that no runner knows fails :func:`test_every_readme_command_has_a_runner` (fast tier) and its own
parametrized case. The sweep commands that would submit to a cluster run as ``action=plan`` (with the profiles
shipped), the cron lines too; the commands on an existing sweep (``<id>``, ``<sweep>``) run against a planned local
sweep; ``bash scripts/sweep.sh`` runs its whole default sweep for real. The shell scripts run in the copy with
a ``.venv`` whose ``python`` is the project's interpreter and which refuses ``-m pip`` (it records the call and
exits 0), so the tests show what the scripts would install without touching the shared environment. Also: the
README's YAML example is a valid cluster profile, and the README stays at most 350 lines."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"(?ms)^```([a-z]*)\n(.*?)^```")
CRON = re.compile(r"^[\d*/,-]+ [\d*/,-]+ [\d*/,-]+ [\d*/,-]+ [\d*/,-]+ (\S.*)$")
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
# The programs a README command may start with; a command with another program is not seen until it is added here
# (a fixed list, not the PATH: `groups` in the pipeline diagram is also a coreutils program).
PROGRAMS = frozenset({
    "python", "python3", "bash", "sh", "source", ".", "cd", "export", "cp", "mv", "rm", "mkdir", "ln", "pip", "uv",
    "pyenv", "pytest", "ruff", "mypy", "crontab", "git", "sudo", "apt-get", "sbatch", "srun", "squeue", "sacct",
    "scancel", "scontrol", "scrontab", "chromium", "mlflow", "psql", "curl", "ssh", "scp", "docker", "enroot",
    "nvidia-smi", "torchrun", "make",
})
# Text the README shows as a command that no test can run as typed, and why (each must still be in the README).
PLACEHOLDERS = {
    "python -m experiments.sweep [Hydra overrides]": "the synopsis above the pipeline; its overrides are the other "
                                                     "commands",
    "crontab -e": "opens the user's editor on the user's crontab; the lines it takes are the cron lines, run below",
}
VENV = ROOT / ".venv"


def _is_command(text: str) -> bool:
    words = text.split()
    while words and ASSIGN.match(words[0]):
        words = words[1:]
    if len(words) < 2:
        return False
    first = words[0]
    return first in PROGRAMS or first.startswith((".venv/bin/", "scripts/", "./"))


def readme_commands(text: str | None = None) -> list[str]:
    """The commands of the README, each once: code-block lines (continuation lines joined, comments and
    redirections dropped; a cron line as ``cron: <line>``), inline code spans (which may wrap), and code spans
    inside a code block's line. YAML blocks hold no command."""
    text = README.read_text() if text is None else text
    found: list[str] = []
    for lang, block in FENCE.findall(text):
        if lang == "yaml":
            continue
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if CRON.match(line):
                found.append("cron: " + line.split(" >>")[0].strip())
                continue
            found += [s for s in re.findall(r"`([^`]+)`", line) if _is_command(s)]
            line = line.split(" #")[0].split(" >>")[0].strip()
            if not line.startswith("#") and _is_command(line):
                found.append(line)
    prose = FENCE.sub("", text)
    found += [s for s in re.findall(r"`([^`]+)`", prose) if _is_command(" ".join(s.split()))]
    return list(dict.fromkeys(" ".join(c.split()) for c in found))


def _python_part(cmd: str) -> str:
    """``python -m ...`` of a command that calls the project's interpreter by its path."""
    return cmd.replace(".venv/bin/python", "python", 1)


def test_the_readme_stays_short_and_shows_its_commands():
    assert len(README.read_text().splitlines()) <= 350
    cmds = [_python_part(c) for c in readme_commands()]
    assert any("cluster=my_site" in c for c in cmds)
    assert any(c.startswith("cron: ") and "sweep=nightly" in c and "cluster=b200_slurm" in c for c in cmds)
    for c in ("bash scripts/sweep.sh", "source .venv/bin/activate", "bash scripts/test.sh", "bash scripts/setup.sh gpu",
              "cp conf/cluster/example_site.yaml conf/cluster/my_site.yaml", "python scripts/chromium/trend_screenshots.py",
              "python -m launchers.retention <sweep>"):
        assert c in cmds, c


def test_the_readme_first_screen_holds_what_a_new_user_needs():
    """The first 50 lines: the answer (plot and table), that without a GPU the main job validates only and where a
    real report is, the prerequisites, ``.venv`` activation and the five steps of a first run on one's cluster."""
    first = "\n".join(README.read_text().splitlines()[:50])
    for needed in ("docs/img/h200_ab_bench_speedup.png", "| ag.ovl0.dw0 | a2a.ovl0.dw0 | 1.006 [1.003, 1.009] |",
                   "Without a GPU the main job validates only", "tests/e2e/fixtures/h200_blocks/ab_bench",
                   "Python 3.12", "GB of disk", "needs root", "source .venv/bin/activate", "bash scripts/sweep.sh",
                   "conf/cluster/my_site.yaml", "action=plan cluster=my_site", "report/report.md"):
        assert needed in first, needed
    assert re.findall(r"(?m)^(\d)\. ", first) == ["1", "2", "3", "4", "5"]


def test_the_extractor_picks_up_a_new_command_and_leaves_names_and_prose():
    text = ("Run `nvidia-smi -L` first; `sbatch` is a program, `cluster=my_site cluster.nodes=4` overrides and "
            "`exit code 0: done` a message.\n```bash\nMOE_X=1 bash scripts/new.sh --flag   # a comment\n```\n"
            "```\n  groups + gates\n```\n")
    assert readme_commands(text) == ["MOE_X=1 bash scripts/new.sh --flag", "nvidia-smi -L"]
    assert _runner_of("nvidia-smi -L") is None  # not known: fails test_every_readme_command_has_a_runner


# ---- the runners -------------------------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def _run(project: Path, cmd: str, *extra: str, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(_python_part(cmd))
    assert argv[0] == "python", cmd
    return subprocess.run([sys.executable, *argv[1:], *extra], cwd=cwd or project, capture_output=True, text=True,
                          timeout=900, env=env or _env(PYTHONPATH=str(project)))


def _sh(project: Path, cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], cwd=project, capture_output=True, text=True, timeout=900,
                          env=env or _env())


def _tail(res: subprocess.CompletedProcess[str]) -> str:
    return (res.stdout[-1500:] + "\n" + res.stderr[-2500:])


def _pip_calls(project: Path) -> list[str]:
    calls = project / ".venv" / "pip-calls"
    found = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return found


def _planned(project: Path, results: Path) -> Path:
    planned = _run(project, "python -m experiments.sweep action=plan", f"results_root={results}")
    assert planned.returncode == 0, _tail(planned)
    (folder,) = results.glob("isolation/*")
    return folder


def run_sweep_or_report(project: Path, tmp_path: Path, cmd: str) -> None:
    """``experiments.sweep``: a command on an existing sweep acts on a planned local one; one that would submit
    must plan. ``analysis.report``: on the shipped H200 fixture, or on loose logs made from its logs."""
    results = tmp_path / "results"
    if "<id>" in cmd or "sweep_id=latest" in cmd:
        folder = _planned(project, results)
        cmd = cmd.replace("results/isolation/<id>", str(folder)).replace("<id>", folder.name)
        cmd = cmd.replace("output_dir=DIR", f"output_dir={folder}")
        res = _run(project, cmd, f"results_root={results}") if "experiments.sweep" in cmd else _run(project, cmd)
        if "sweep_id=latest" in cmd:  # nothing of that preset was ever submitted here: said so, exit 2
            assert res.returncode == 2 and "no submitted sweep of preset nightly" in res.stderr, _tail(res)
        else:
            assert res.returncode in (0, 3), _tail(res)  # 3: a resumed validate sweep's analysis of a plan
            assert "Traceback" not in res.stderr, _tail(res)
        return
    if "my_old_logs" in cmd:  # the user's own loose logs: two H200 runs of the fixture, named as the command says
        logs = tmp_path / "my_old_logs"
        logs.mkdir()
        fixture = project / "tests/e2e/fixtures/h200_blocks/ab_bench/variants"
        for name, variant in (("a2a_baseline_101_0", "a2a.ovl0.dw0"), ("ag_trial_102_0", "ag.ovl0.dw0")):
            (log,) = (fixture / variant / "attempt-1" / "logs").glob("*.log")
            shutil.copy(log, logs / f"{name}.out")
        res = _sh(tmp_path, _python_part(cmd).replace("python", shlex.quote(sys.executable), 1),
                  env=_env(PYTHONPATH=str(project)))
        assert res.returncode == 0 and "ag_trial vs a2a_baseline" in res.stdout, _tail(res)
        assert (tmp_path / "report" / "report.md").is_file()
        return
    if "analysis.report" in cmd:
        res = _run(project, cmd.replace("/tmp/ab_bench_report", str(tmp_path / "report")))
        assert res.returncode == 0 and "1.006 [1.003, 1.009]" in res.stdout + res.stderr, _tail(res)
        return
    # a sweep that would submit to a cluster: it must plan, with the profile the README names
    extra = [f"output_dir={tmp_path / 'plan'}", "allow_dirty=true"]
    res = _run(project, cmd if "action=plan" in cmd else f"{cmd} action=plan", *extra)
    assert res.returncode == 0, _tail(res)


def run_cron_line(project: Path, tmp_path: Path, cmd: str) -> None:
    """A cron line: its command after ``cd ... &&``, with the environment it sets, planned (it would submit)."""
    line = CRON.match(cmd.removeprefix("cron: ")).group(1)
    words = shlex.split(line.split("&&")[-1].split(" >>")[0], posix=True)
    env = _env(PYTHONPATH=str(project), MOE_SWEEP_NOTIFY_URL="http://127.0.0.1:9/hook")
    words = words[next(i for i, w in enumerate(words) if w.endswith("bin/python")):]  # after VAR=$(cat FILE)
    res = _run(project, shlex.join(words), "action=plan", f"output_dir={tmp_path / 'plan'}", "allow_dirty=true",
               env=env)
    assert res.returncode == 0, _tail(res)


def run_history_trend(project: Path, tmp_path: Path, cmd: str) -> None:
    """``analysis.history trend`` against a real SQLite history of two series (14 synthetic nights each)."""
    from dataclasses import replace

    from analysis.history import record_summary
    from analysis.history.records import Series
    from analysis.history.synthetic import SyntheticSeries, simulate_series

    url = f"sqlite:///{tmp_path / 'team.db'}"
    series = (Series(preset="nightly", model="qwen3_30b_a3b", cluster="h100_slurm", container="nemo_26_04"),
              Series(preset="nightly", model="qwen3_235b_a22b", cluster="b200_slurm", container="nemo_26_04"))
    for k, s in enumerate(series):
        for night in simulate_series(replace(SyntheticSeries(), series=s), 14, seed=31 + k,
                                     tonight={"deepep.ovl1.dw0": 1.12} if k == 0 else None):
            record_summary(url, replace(night, sweep=replace(night.sweep, sweep_id=f"{night.sweep.sweep_id}-{k}")))
    res = _run(project, cmd.replace("--url URL", f"--url {url}"), cwd=tmp_path)
    assert res.returncode == 0, _tail(res)
    page = (tmp_path / "page.html").read_text()
    assert "qwen3_30b_a3b" in page and "deepep.ovl1.dw0" in page and "qwen3_235b_a22b" not in page


def run_retention(project: Path, tmp_path: Path, cmd: str) -> None:
    folder = _planned(project, tmp_path / "results")
    res = _run(project, cmd.replace("<sweep>", str(folder)))
    assert res.returncode == 0 and "removed 0 code copies" in res.stdout, _tail(res)


def run_payload(project: Path, tmp_path: Path, cmd: str) -> None:
    """The payload, as a job starts it: a planned variant's ``variant.json`` and an output folder, validate mode."""
    folder = _planned(project, tmp_path / "results")
    variant = folder / "variants" / "a2a.ovl1.dw0" / "variant.json"
    res = _run(project, cmd, str(variant), str(tmp_path / "out"), "--mode", "validate")
    assert res.returncode == 0 and "validate a2a.ovl1.dw0: pass" in res.stdout + res.stderr, _tail(res)
    assert (tmp_path / "out" / "effective_config.json").is_file()


def run_screenshots(project: Path, tmp_path: Path, cmd: str) -> None:
    res = _run(project, cmd)
    assert res.returncode == 0, _tail(res)
    png = (project / "docs" / "img" / "trend_two_series.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1600, 2600)


def run_sweep_sh(project: Path, tmp_path: Path, cmd: str) -> None:
    """The main job for real: set-up (its second run installs nothing), then the embedded default sweep; and it
    passes its arguments on (``action=plan``)."""
    res = _sh(project, cmd)
    assert res.returncode == 0, _tail(res)
    assert _pip_calls(project) == [] and "exit code 0: every kept run is good" in res.stdout + res.stderr
    (report,) = (project / "results" / "isolation").glob("*/report/report.md")
    assert "| a2a.ovl1.dw0 | validated |" in report.read_text()
    res = _sh(project, f"{cmd} action=plan results_root={tmp_path}")
    assert res.returncode == 0 and "exit code 0: plan written" in res.stdout + res.stderr, _tail(res)


def _readme_pins(cmd: str) -> list[Requirement]:
    """The versions the README states beside a set-up command, e.g. ``(... megatron-core 0.19.2, ...)``."""
    text = " ".join(README.read_text().split())
    after = text.split(f"`{cmd}`", 1)[1]
    said = after[after.index("(") + 1:after.index(")", after.index("(") + 1) + 1]
    pins = re.findall(r"([a-z][\w-]*)(\[[\w,]+\])? (\d+\.\d+(?:\.\d+)?)\b", said)
    return [Requirement(f"{name}{extras}=={version}") for name, extras, version in pins]


def run_setup_sh(project: Path, tmp_path: Path, cmd: str) -> None:
    """The pyproject extra exists with the versions the README states; the script accepts the argument: a second
    run installs nothing; a first run (or a changed pyproject.toml) installs that extra."""
    extra = cmd.split()[-1]
    declared = [Requirement(r) for r in
                tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]]
    pins = _readme_pins(cmd)
    assert pins, f"the README states no version beside `{cmd}`"
    for pin in pins:
        match = [r for r in declared if r.name == pin.name and r.specifier == pin.specifier]
        assert match and pin.extras <= match[0].extras, (pin, declared)
    stamp = project / ".venv" / f".installed-{extra}"
    fresh = stamp.exists()
    res = _sh(project, cmd)
    assert res.returncode == 0, _tail(res)
    calls = _pip_calls(project)
    if fresh:
        assert calls == [], calls
    else:  # what it installs
        assert any(c.endswith(f"-e .[{extra}]") for c in calls), calls
        if extra == "gpu":
            assert any("NVTE_FRAMEWORK=pytorch" in c and "--no-build-isolation" in c for c in calls), calls
        stamp.unlink()


def run_test_sh(project: Path, tmp_path: Path, cmd: str) -> None:
    """The test command is what CI runs (``.ci/run`` execs it, the suite this test is part of): here it is only
    checked to be that command, valid bash, running ruff and every tier spread over the cores."""
    assert re.search(r"(?m)^exec " + re.escape(cmd) + r"\s*$", (ROOT / ".ci" / "run").read_text())
    assert subprocess.run(["bash", "-n", str(ROOT / cmd.split()[-1])]).returncode == 0
    script = (ROOT / cmd.split()[-1]).read_text()
    assert "ruff check" in script and '-m ""' in script and "-n auto" in script


def run_activate(project: Path, tmp_path: Path, cmd: str) -> None:
    """In the project itself: afterwards ``python`` is the project's interpreter, with megatron-core."""
    res = _sh(ROOT, f"{cmd} && python -c 'import sys, megatron.core; print(sys.prefix)'")
    assert res.returncode == 0, _tail(res)
    assert Path(res.stdout.split()[-1]).resolve() == VENV.resolve()


def run_copy_profile(project: Path, tmp_path: Path, cmd: str) -> None:
    """The fixture ran it; a copy that keeps ``name: example_site`` is refused (exit 2, both names)."""
    site = (project / "conf" / "cluster" / "example_site.yaml").read_text()
    assert (project / "conf" / "cluster" / "my_site.yaml").read_text() == site.replace(
        "name: example_site", "name: my_site", 1)
    kept = project / "conf" / "cluster" / "kept_site.yaml"
    kept.write_text(site)
    try:
        res = _run(project, "python -m experiments.sweep action=plan cluster=kept_site", "allow_dirty=true",
                   f"output_dir={tmp_path / 'plan'}")
    finally:
        kept.unlink()
    assert res.returncode == 2 and "name: example_site" in res.stderr and "kept_site" in res.stderr, _tail(res)
    # the README's YAML example as the profile: it plans (the loader, the name check, its container profile)
    (block,) = [b for lang, b in FENCE.findall(README.read_text()) if lang == "yaml"]
    mine = project / "conf" / "cluster" / "my_site.yaml"
    made = mine.read_text()
    mine.write_text(block)
    try:
        res = _run(project, "python -m experiments.sweep action=plan cluster=my_site model=qwen3_30b_a3b",
                   "allow_dirty=true", f"output_dir={tmp_path / 'yaml'}")
    finally:
        mine.write_text(made)
    assert res.returncode == 0, _tail(res)


def run_pip_list(project: Path, tmp_path: Path, cmd: str) -> None:
    """Here it lists the project's environment, whose versions the ``ci_cpu`` container profile holds."""
    res = subprocess.run([sys.executable, "-m", *cmd.split()], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and re.search(r"(?m)^megatron-core\s+0\.19\.2\s*$", res.stdout), _tail(res)


def _collected(args: list[str]) -> str:
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=900, env=_env(PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, _tail(res)
    return res.stdout.strip().splitlines()[-1]


def run_pytest_tier(project: Path, tmp_path: Path, cmd: str) -> None:
    """Collected, not run (this test is part of the run): ``-m ""`` selects every tier, one marker a part of it."""
    args = shlex.split(cmd)[1:]
    summary = _collected(args)
    if args == ["-m", ""]:
        assert "deselected" not in summary, summary
    else:
        assert re.search(r"^\d+/\d+ tests collected \(\d+ deselected\)", summary), summary


Runner = Callable[[Path, Path, str], None]
SLOW, MEGATRON, CHROMIUM = pytest.mark.slow, pytest.mark.megatron, pytest.mark.chromium
RUNNERS: tuple[tuple[str, Runner, tuple[pytest.MarkDecorator, ...]], ...] = (
    (r"python -m (experiments\.sweep|analysis\.report)( .*)?", run_sweep_or_report, (SLOW, MEGATRON)),
    (r"cron: .*", run_cron_line, (SLOW, MEGATRON)),
    (r"python -m analysis\.history trend .*", run_history_trend, (SLOW,)),
    (r"python -m launchers\.retention <sweep>", run_retention, (SLOW, MEGATRON)),
    (r"python -m experiments\.train", run_payload, (SLOW, MEGATRON)),
    (r"python scripts/chromium/trend_screenshots\.py", run_screenshots, (SLOW, CHROMIUM)),
    (r"bash scripts/sweep\.sh", run_sweep_sh, (SLOW, MEGATRON)),
    (r"bash scripts/setup\.sh (megatron|gpu|test)", run_setup_sh, ()),
    (r"bash scripts/test\.sh", run_test_sh, ()),
    (r"source \.venv/bin/activate", run_activate, (MEGATRON,)),
    (r"cp conf/cluster/example_site\.yaml conf/cluster/my_site\.yaml", run_copy_profile, (SLOW,)),
    (r"pip list", run_pip_list, (SLOW,)),
    (r"pytest -m \S+", run_pytest_tier, (SLOW,)),
)


def _runner_of(cmd: str) -> tuple[str, Runner, tuple[pytest.MarkDecorator, ...]] | None:
    found = [r for r in RUNNERS if re.fullmatch(r[0], _python_part(cmd))]
    return found[0] if len(found) == 1 else None


def test_every_readme_command_has_a_runner():
    cmds = readme_commands()
    unknown = [c for c in cmds if c not in PLACEHOLDERS and _runner_of(c) is None]
    assert unknown == [], f"the README shows commands that no runner of this file runs: {unknown}"
    assert set(PLACEHOLDERS) <= set(cmds), set(PLACEHOLDERS) - set(cmds)  # no placeholder outlives its command


def test_the_readme_yaml_example_is_a_valid_cluster_profile():
    from contracts.cluster import ClusterConfig

    (block,) = [b for lang, b in FENCE.findall(README.read_text()) if lang == "yaml"]
    profile = ClusterConfig.from_mapping(yaml.safe_load(block))
    assert profile.name == "my_site" and profile.executor == "slurm" and profile.secret_env


def _cases() -> list:
    cases = []
    for cmd in readme_commands():
        if cmd in PLACEHOLDERS:
            continue
        runner = _runner_of(cmd)
        cases.append(pytest.param(cmd, marks=runner[2] if runner else (), id=cmd[:70]))
    return cases


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project as a user's clone holds it, after the README's first step: its ``cp`` line run as
    written, then ``name: my_site`` (the YAML example's fields are the example file's). Its ``.venv`` runs the
    project's interpreter and records any ``-m pip`` call instead of running it; it was set up once already
    (``.venv/.installed-megatron`` not older than pyproject.toml), as after a first ``scripts/sweep.sh``."""
    dest = tmp_path_factory.mktemp("clone")
    for part in ("experiments", "contracts", "launchers", "analysis", "conf", "scripts",
                 "tests/e2e/fixtures/h200_blocks"):
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(ROOT / "pyproject.toml", dest / "pyproject.toml")
    (cp,) = [c for c in readme_commands() if c.startswith("cp conf/cluster/")]
    subprocess.run(shlex.split(cp), cwd=dest, check=True)
    mine = dest / "conf" / "cluster" / "my_site.yaml"
    mine.write_text(re.sub(r"(?m)^name: \S+", "name: my_site", mine.read_text(), count=1))
    bin_dir = dest / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    calls = dest / ".venv" / "pip-calls"
    (bin_dir / "python").write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -m pip "*) echo "NVTE_FRAMEWORK=${{NVTE_FRAMEWORK:-}} $*" >> {shlex.quote(str(calls))};'
        " exit 0;; esac\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    (dest / ".venv" / ".installed-megatron").touch()
    return dest


@pytest.mark.parametrize("cmd", _cases())
def test_a_readme_command_runs(project: Path, tmp_path: Path, cmd: str) -> None:
    runner = _runner_of(cmd)
    assert runner is not None, f"no runner for the README command {cmd!r}: add one to RUNNERS"
    runner[1](project, tmp_path, cmd)
