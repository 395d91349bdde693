"""benchmarks/harness.py, behind every benchmark's ``--against``: each side runs the code of its own tree (a revision
checked out into a temporary worktree, a folder as it is), whole processes are timed with the processes they leave
behind, and a benchmark run ``--against`` a folder times that folder's code."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import harness

REPO = harness.REPO


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_revision_is_checked_out_into_a_worktree_that_is_removed_afterwards():
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    committed = subprocess.run(["git", "show", "HEAD:analysis/api.py"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout
    with harness.trees(head.stdout.strip()) as sides:
        ours, base = sides
        assert ours.root == REPO and base.label == head.stdout.strip()
        assert (base.root / "analysis" / "api.py").read_text() == committed
    assert not base.root.exists()
    listed = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert str(base.root) not in listed


def test_a_folder_is_used_as_it_is(tmp_path):
    with harness.trees(str(tmp_path)) as sides:
        assert [s.root for s in sides] == [REPO, tmp_path.resolve()]
    assert tmp_path.exists()


def test_an_unknown_revision_names_the_value_and_what_to_give(tmp_path):
    with pytest.raises(SystemExit) as err, harness.trees("results/no_such_tree"):
        pass
    text = str(err.value)
    assert "--against results/no_such_tree" in text and "invalid reference" in text and "git log" in text


def test_each_tree_runs_its_own_code_not_the_installed_one(tmp_path):
    folder = _tree(tmp_path / "tree", {
        "experiments/__init__.py": "",
        "experiments/sweep.py": """
            import time
            time.sleep(0.4)
            print("the folder's sweep")
        """,
    })
    got = harness.run(folder, ["-m", "experiments.sweep", "action=plan"])
    assert got.out == "the folder's sweep\n" and got.wall_s >= 0.4 and got.rc == 0
    ours = harness.run(REPO, ["-c", "import experiments; print(experiments.__file__)"])
    assert Path(ours.out.strip()).is_relative_to(REPO)


def test_the_cpu_of_processes_left_behind_is_counted():
    burn = textwrap.dedent("""
        import os, time
        if os.fork() == 0:
            start = time.process_time()
            while time.process_time() - start < 0.4:
                pass
            os._exit(0)
        print("parent done")
    """)
    got = harness.run(REPO, ["-c", burn])
    assert got.out == "parent done\n" and got.cpu_s >= 0.4 > got.wall_s and got.left == 0


def test_without_removes_an_option_and_its_value():
    argv = ["--trials", "9", "--against", "abc", "--plot=x.png", "--seed", "3"]
    assert harness.without(argv, "--against") == ["--trials", "9", "--plot=x.png", "--seed", "3"]
    assert harness.without(argv, "--plot") == ["--trials", "9", "--against", "abc", "--seed", "3"]


def test_in_trees_runs_the_script_with_each_trees_code(tmp_path, capsys):
    folder = _tree(tmp_path / "tree", {"experiments/__init__.py": "MARK = 'the folder'\n"})
    script = _tree(tmp_path / "bench", {"probe.py": f"""
        import sys
        sys.path.insert(0, {str(REPO / "benchmarks")!r})
        import harness
        harness.use_tree()
        import experiments
        print("code of", getattr(experiments, "MARK", "this tree"), sys.argv[1:])
    """}) / "probe.py"
    assert harness.in_trees(str(script), lambda side: ["--n", "1"], str(folder)) == 0
    out = capsys.readouterr().out
    assert "== this tree:\ncode of this tree ['--n', '1', '--in-tree']" in out
    assert f"== {folder}:\ncode of the folder ['--n', '1', '--in-tree']" in out
    assert re.search(r"time this/baseline: wall \d+\.\d\dx, CPU \d+\.\d\dx", out)


@pytest.mark.slow
def test_the_report_benchmark_against_a_folder_times_that_folders_code(tmp_path):
    """A folder whose analysis.report sleeps 5 s: the baseline's figure is that folder's process, not this tree's."""
    folder = _tree(tmp_path / "tree", {
        "analysis/__init__.py": "",
        "analysis/report.py": """
            import json, sys, time
            from pathlib import Path
            time.sleep(5.0)
            out = Path(sys.argv[sys.argv.index("--out") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / "summary.json").write_text(json.dumps({"runs": []}))
        """,
    })
    res = subprocess.run([sys.executable, "benchmarks/report.py", "--mb", "1", "--repeats", "1", "--against",
                          str(folder)], cwd=REPO, capture_output=True, text=True, env=harness.env_for(REPO), check=True)
    ours = re.search(r"^  this tree: (\d+\.\d+) s wall", res.stdout, re.M)
    base = re.search(rf"^  {re.escape(str(folder))}: (\d+\.\d+) s wall", res.stdout, re.M)
    assert ours and base, res.stdout
    assert float(base.group(1)) >= 5.0, res.stdout
    assert re.search(r"time this/baseline: wall \d+\.\d\dx, CPU \d+\.\d\dx \(same run\)", res.stdout), res.stdout
