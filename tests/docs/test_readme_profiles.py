"""The README's lists of profiles name exactly the option files of ``conf/``: the Configuration table's row of each
profile group (``model/``, ``cluster/``, ``container/``, ``sweep/``) and the first-run step that lists the container
profiles (``Match the container profile``); and so does the CLI's ``--help``. A profile file added to ``conf/`` and
not to the README (or a README name with no file) fails here, in the fast tier."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.compose import group_options

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GROUPS = ("model", "cluster", "container", "sweep")


def _names(text: str) -> set[str]:
    """The profile names of a README list: each code span that is one bare word (``tiny_moe``, not ``EP=2``)."""
    return {s for s in re.findall(r"`([^`]+)`", text) if re.fullmatch(r"[a-z][a-z0-9_]*", s)}


def table_row(group: str, text: str | None = None) -> set[str]:
    """The names in the Configuration table's row of ``group`` (its second cell)."""
    text = README.read_text() if text is None else text
    (row,) = re.findall(rf"(?m)^\| `{group}/` \| (.*) \|$", text)
    return _names(row)


def container_step(text: str | None = None) -> set[str]:
    """The names that the first-run step "Match the container profile" lists after ``conf/container/*.yaml``."""
    text = " ".join((README.read_text() if text is None else text).split())
    (listed,) = re.findall(r"\*\*Match the container profile to the image\.\*\* `conf/container/\*\.yaml` \(([^)]*)\)",
                           text)
    return _names(listed)


@pytest.mark.parametrize("group", GROUPS)
def test_the_configuration_table_lists_every_profile_of_conf(group):
    assert table_row(group) == set(group_options(group)), group


def test_the_first_run_step_lists_every_container_profile():
    assert container_step() == set(group_options("container"))


def test_the_cli_help_lists_every_profile_of_conf():
    out = subprocess.run([sys.executable, "-m", "experiments.sweep", "--help"], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    for group in (*GROUPS, "precision"):
        (listed,) = re.findall(rf"(?m)^  {group}=(\S+)$", out)
        assert set(listed.split("|")) == set(group_options(group)), (group, listed)


def test_a_missing_or_unknown_profile_fails_the_comparison():
    row = "| `container/` | `nemo_26_04`, `ci_cpu`, `nemo_99_99`: versions (`EP=2` is no name) |\n"
    step = "2. **Match the container profile to the image.** `conf/container/*.yaml` (`nemo_26_04`,\n   `ci_cpu`) hold\n"
    assert table_row("container", row) == {"nemo_26_04", "ci_cpu", "nemo_99_99"}
    assert container_step(step) == {"nemo_26_04", "ci_cpu"}
    assert container_step(step) != set(group_options("container"))
