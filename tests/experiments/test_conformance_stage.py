"""The conformance stage (``conformance=true``): the stack's own unit tests run in the run's container before the
arms, each test's outcome in the manifest and the report, and a failed suite prunes the arms it covers. On the local
Slurm against a test folder this test writes (two suites named as Megatron-Bridge names its own; nothing upstream
is copied)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from experiments.conformance import SUITES, covered, junit_outcomes, plan_doc, suite_failed
from experiments.sweep import main
from tests.launchers.conftest import slurm_cluster  # noqa: F401  (the local Slurm fixture)


def _suite_folder(root: Path, overlap_ok: bool) -> Path:
    folder = root / "tests" / "unit_tests"
    (folder / "training").mkdir(parents=True)
    (folder / "training" / "test_comm_overlap.py").write_text(
        "def test_overlap_config():\n    assert True\n\n\n"
        f"def test_overlap_rejects_full_recompute():\n    assert {overlap_ok}\n")
    (folder / "training" / "test_deepep.py").write_text("def test_flex_backend():\n    assert True\n")
    return folder


def test_plan_doc_needs_a_folder_and_names_the_suites():
    assert plan_doc({}, None) is None
    with pytest.raises(ConfigError, match="conformance_dir="):
        plan_doc({"conformance": True}, None)
    with pytest.raises(ConfigError, match="true or false"):
        plan_doc({"conformance": "yes"}, "/x")
    doc = plan_doc({"conformance": True}, "/opt/Megatron-Bridge/tests/unit_tests")
    assert [s["file"] for s in doc["suites"]] == [f for f, _ in SUITES.values()]
    assert plan_doc({"conformance": True, "conformance_dir": "/mine"}, "/opt/x")["dir"] == "/mine"


def test_coverage_and_failure():
    assert covered("overlap", "alltoall", True, False) and covered("overlap", "deepep", False, True)
    assert not covered("overlap", "deepep", False, False)
    assert covered("flex", "hybridep", False, False) and not covered("flex", "ncclep", True, False)
    assert suite_failed(None) and suite_failed({"exit": 0, "tests": {"a": "error"}})
    assert not suite_failed({"exit": 0, "tests": {"a": "passed", "b": "skipped"}})


def test_junit_outcomes_reads_each_test(tmp_path):
    xml = tmp_path / "r.xml"
    xml.write_text('<testsuites><testsuite><testcase classname="m" name="a"/><testcase classname="m" name="b">'
                   '<failure message="x"/></testcase><testcase classname="m" name="c"><skipped/></testcase>'
                   "</testsuite></testsuites>")
    assert junit_outcomes(xml) == {"m::a": "passed", "m::b": "failed", "m::c": "skipped"}
    assert junit_outcomes(tmp_path / "missing.xml") == {}


def test_only_the_first_task_runs_the_tests(tmp_path, monkeypatch):
    from experiments.conformance import main as job

    folder = _suite_folder(tmp_path / "stack", overlap_ok=True)
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert job([str(folder), str(tmp_path / "o1"), "deepep=training/test_deepep.py"]) == 0
    assert not (tmp_path / "o1").exists()
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert job([str(folder), str(tmp_path / "o0"), "deepep=training/test_deepep.py"]) == 0
    result = json.loads((tmp_path / "o0" / "conformance.json").read_text())
    assert result["deepep"]["exit"] == 0 and set(result["deepep"]["tests"].values()) == {"passed"}
    assert job([str(folder)]) == 2


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_failed_suite_prunes_the_arms_it_covers_on_the_local_slurm(tmp_path, capsys):
    folder = _suite_folder(tmp_path / "stack", overlap_ok=False)
    out = tmp_path / "s"
    rc = main(["action=run", "cluster=local_slurm", "allow_dirty=true", "conformance=true",
               f"conformance_dir={folder}", f"output_dir={out}"])
    assert rc == 0, capsys.readouterr()
    m = json.loads((out / "manifest.json").read_text())
    suites = {s["name"]: s for s in m["conformance"]["suites"]}
    assert m["conformance"]["status"] == "ran"
    assert suites["comm_overlap"]["status"] == "failed" and suites["deepep"]["status"] == "passed"
    assert suites["comm_overlap"]["tests"] == {
        "tests.unit_tests.training.test_comm_overlap::test_overlap_config": "passed",
        "tests.unit_tests.training.test_comm_overlap::test_overlap_rejects_full_recompute": "failed"}
    by = {v["name"]: v for v in m["variants"]}
    assert by["a2a.ovl1.dw0"]["status"] == "pruned"
    assert any(r.startswith("[conformance]") and "test_overlap_rejects_full_recompute" in r
               for r in by["a2a.ovl1.dw0"]["reasons"])
    assert by["a2a.ovl0.dw0"]["status"] != "pruned"  # the baseline is never covered
    report = (out / "report" / "report.md").read_text()
    assert "Conformance (the stack's own tests)" in report and "test_overlap_rejects_full_recompute | failed" in report
    logs = "".join(p.read_text() for p in (out / "conformance" / "logs").glob("log-*"))
    assert logs.count("[conformance] comm_overlap: exit 1") == 1  # one task ran the tests
