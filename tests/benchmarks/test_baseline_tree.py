"""benchmarks/parse.py::baseline_tree, behind every benchmark's ``--against``: a revision of this repository is
extracted, a folder is taken as it is, and anything else stops with git's reason and what to give instead."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks.parse import REPO, baseline_tree


def test_a_revision_is_extracted_with_the_files_of_that_revision(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    tree = baseline_tree(head.stdout.strip(), tmp_path, "analysis")
    committed = subprocess.run(["git", "show", "HEAD:analysis/parse.py"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
    assert tree == tmp_path and (tree / "analysis" / "parse.py").read_text() == committed


def test_a_folder_is_used_as_it_is(tmp_path):
    (tmp_path / "analysis").mkdir()
    assert baseline_tree(str(tmp_path), tmp_path / "unused") == tmp_path.resolve()
    assert not (tmp_path / "unused").exists()


def test_an_unknown_revision_names_the_value_and_what_to_give(tmp_path):
    with pytest.raises(SystemExit) as err:
        baseline_tree("results/no_such_tree", tmp_path)
    text = str(err.value)
    assert "--against results/no_such_tree" in text and "not a valid object name" in text and "git log" in text
    assert list(tmp_path.iterdir()) == []  # nothing extracted
