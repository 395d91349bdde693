"""A hand-edited manifest of the wrong shape (valid JSON) is refused by every command that reads it: status,
cancel, a resume, collect and ``analysis.report`` exit 2 naming the bad value, without a traceback, and write
nothing (the folder's files are byte-for-byte as they were). The real CLIs, as subprocesses."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.sweep import main

REPO = Path(__file__).resolve().parents[2]


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("planned") / "s"
    assert main(["action=plan", f"output_dir={out}", "sweep=nightly", "repeats=1"]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("edit,needle", [
    ({"variants": "oops"}, "variants='oops' must be a list"),
    ({"variants": None}, "has no variants"),
], ids=["variants-oops", "no-variants"])
@pytest.mark.parametrize("command", ["status", "cancel", "resume", "collect", "report"])
def test_a_manifest_of_the_wrong_shape_exits_2_naming_it(planned: Path, tmp_path: Path, edit: dict, needle: str,
                                                         command: str) -> None:
    sweep = tmp_path / "s"
    subprocess.run(["cp", "-a", str(planned), str(sweep)], check=True)
    doc = json.loads((sweep / "manifest.json").read_text())
    for k, v in edit.items():
        if v is None:
            doc.pop(k)
        else:
            doc[k] = v
    (sweep / "manifest.json").write_text(json.dumps(doc))
    before = _digest(sweep)
    sweep_id = doc["sweep_id"]
    args = {"status": ["-m", "experiments.sweep", "action=status", f"output_dir={sweep}"],
            "cancel": ["-m", "experiments.sweep", "action=cancel", f"output_dir={sweep}"],
            "resume": ["-m", "experiments.sweep", "action=run", f"sweep_id={sweep_id}", f"output_dir={sweep}"],
            "collect": ["-m", "experiments.sweep", "action=collect", f"sweep_id={sweep_id}", f"output_dir={sweep}"],
            "report": ["-m", "analysis.report", str(sweep)]}[command]
    res = subprocess.run([sys.executable, *args], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert needle in res.stderr and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert _digest(sweep) == before  # nothing written: no report, no lease, no cancel request
