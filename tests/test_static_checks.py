"""The static checks CI runs, in the fast tier: ruff over every package of the repository (a new one included
without editing a list) and mypy over ``contracts/`` and ``launchers/`` (``[tool.mypy]`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOT_CODE = {".venv", ".git", "results", "docs", "conf", "__pycache__"}


def _packages() -> list[str]:
    """Every top-level folder of the repository that holds Python files."""
    return sorted(d.name for d in REPO.iterdir() if d.is_dir() and d.name not in NOT_CODE
                  and not d.name.startswith(".") and any(d.rglob("*.py")))


def test_every_package_is_linted_by_ruff():
    pkgs = _packages()
    assert {"contracts", "experiments", "launchers", "analysis", "tests", "benchmarks", "scripts"} <= set(pkgs)
    res = subprocess.run([str(Path(sys.executable).parent / "ruff"), "check", *pkgs], cwd=REPO, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    ci = next(line.split() for line in (REPO / "scripts" / "test.sh").read_text().splitlines()
              if line.startswith("ruff check"))
    assert set(pkgs) <= set(ci[2:]), f"scripts/test.sh lints {ci[2:]}, not every package of {pkgs}"


def test_contracts_and_launchers_type_check_clean():
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout
