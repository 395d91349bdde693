"""The conformance stage (``conformance=true``): the stack's own unit tests for the knobs, run in the run's container
before the arms. NVIDIA's procedure for these knobs ends with them: Megatron-Bridge's
``tests/unit_tests/training/test_comm_overlap.py`` (CommOverlapConfig: overlap and delay_wgrad checks) and
``tests/unit_tests/training/test_deepep.py`` (apply/validate_flex_dispatcher_backend for DeepEP and HybridEP), both
in Megatron-Bridge's r0.6.0 branch. Nothing of them is copied here: the test folder is the one the container
profile names (``tests_dir``: where the image carries Megatron-Bridge's ``tests/unit_tests``) or ``conformance_dir``.

Planner side: :func:`plan_doc` (the manifest's ``conformance`` record) and :func:`covered` (which arms a suite
gates). Job side (``python -m experiments.conformance DIR OUT SUITE=FILE ...``): runs each suite with pytest
(``--junitxml``), writes ``OUT/conformance.json`` {suite: {"exit": int, "tests": {name: passed|failed|error|
skipped}}}; exit 0 when it wrote the file (a failed test is an outcome, not an error of the job), 2 bad arguments.
Only the job's first task runs the tests (``SLURM_PROCID``/``RANK`` 0); other tasks exit 0 at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from contracts.errors import ConfigError

# suite name -> (file under the test folder, what it covers: "overlap" = arms with overlap or delay_wgrad on,
# "flex" = DeepEP and HybridEP arms)
SUITES: dict[str, tuple[str, str]] = {
    "comm_overlap": ("training/test_comm_overlap.py", "overlap"),
    "deepep": ("training/test_deepep.py", "flex"),
}
RESULT_FILE = "conformance.json"
SUITE_TIMEOUT_S = 1800


def covered(suite_covers: str, dispatcher: str, overlap: bool, delay_wgrad: bool) -> bool:
    """Whether a suite covering ``suite_covers`` gates this arm (baselines are never covered)."""
    if suite_covers == "overlap":
        return bool(overlap or delay_wgrad)
    if suite_covers == "flex":
        return dispatcher in ("deepep", "hybridep")
    return False


def plan_doc(cfg: dict[str, Any], tests_dir: str | None) -> dict[str, Any] | None:
    """The manifest's ``conformance`` record, or None when ``conformance`` is off.

    Raises:
        ConfigError: ``conformance`` is not a boolean, or it is on and no test folder is named (neither
            ``conformance_dir`` nor the container profile's ``tests_dir``).
    """
    on = cfg.get("conformance", False)
    if not isinstance(on, bool):
        raise ConfigError(f"conformance={on!r} must be true or false")
    if not on:
        return None
    folder = cfg.get("conformance_dir") or tests_dir
    if not folder:
        raise ConfigError("conformance=true needs the folder of the stack's unit tests (Megatron-Bridge's "
                          "tests/unit_tests in the run's container): the container profile names none (tests_dir: "
                          "null). Give conformance_dir=/path/to/tests/unit_tests")
    return {"dir": str(folder), "status": "planned",
            "suites": [{"name": n, "file": f, "covers": c, "status": "planned", "tests": {}}
                       for n, (f, c) in SUITES.items()]}


def junit_outcomes(path: Path) -> dict[str, str]:
    """``{classname::name: passed|failed|error|skipped}`` of a pytest ``--junitxml`` file (empty when unreadable)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    out = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        kinds = {child.tag for child in case}
        out[name] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                     else "skipped" if "skipped" in kinds else "passed")
    return out


def run_suites(folder: Path, out: Path, suites: dict[str, str]) -> dict[str, Any]:
    """Run each suite file under ``folder`` with pytest; the repository root two levels above ``folder`` (a
    ``tests/unit_tests`` folder) goes on PYTHONPATH, as Megatron-Bridge's tests import its ``scripts`` package."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    root = folder.resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    results: dict[str, Any] = {}
    for name, rel in suites.items():
        path = folder / rel
        xml = out / f"{name}.xml"
        if not path.is_file():
            results[name] = {"exit": None, "tests": {}, "error": f"no test file {path}"}
            continue
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path), f"--junitxml={xml}"]
        try:
            p = subprocess.run(cmd, cwd=root, env=env, timeout=SUITE_TIMEOUT_S)
            code: int | None = p.returncode
        except subprocess.TimeoutExpired:
            code = None
        results[name] = {"exit": code, "tests": junit_outcomes(xml)}
        if code is None:
            results[name]["error"] = f"timed out after {SUITE_TIMEOUT_S} s"
        print(f"[conformance] {name}: exit {code}, " + ", ".join(
            f"{k} {sum(v == k for v in results[name]['tests'].values())}" for k in ("passed", "failed", "error")),
              flush=True)
    (out / RESULT_FILE).write_text(json.dumps(results, indent=1, sort_keys=True))
    return results


def suite_failed(result: dict[str, Any] | None) -> bool:
    """A suite failed when it did not run, timed out, exited non-zero or has a failed/error test."""
    if not result or result.get("exit") is None or result.get("error"):
        return True
    return result["exit"] != 0 or any(v in ("failed", "error") for v in result.get("tests", {}).values())


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.conformance DIR OUT NAME=FILE ...``: see the module doc."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or any("=" not in a for a in args[2:]):
        print("usage: python -m experiments.conformance TEST_DIR OUT_DIR NAME=FILE [NAME=FILE ...]", file=sys.stderr)
        return 2
    folder, out = Path(args[0]), Path(args[1])
    rank = os.environ.get("SLURM_PROCID") or os.environ.get("RANK") or "0"
    if rank != "0":  # a job of several tasks: the first runs the tests, the others would race on the same files
        print(f"[conformance] task {rank}: the tests run on task 0 only", flush=True)
        return 0
    if not folder.is_dir():
        print(f"[conformance] test folder {folder} does not exist in this container", file=sys.stderr)
    run_suites(folder, out, dict(a.split("=", 1) for a in args[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
