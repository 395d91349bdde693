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


def _set(doc: dict, path: tuple, value: object) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


# shapes a fuzz of load (every key set to null, a number, a string, a list, an object) found past the top level
NESTED = [
    (("variants", 0, "reasons"), None, "variants[0].reasons=None must be of type tuple[str, ...]"),
    (("config",), None, "config=None must be an object"),
    (("config", "cluster"), 7, "config.cluster=7 must be an object"),
    (("config", "cluster", "env_vars"), 7, "config.cluster.env_vars=7 must be a mapping"),
    (("blocks", 0), 7, "blocks[0]=7 must be an object"),
    (("design", "max_blocks"), "x", "design.max_blocks='x' must be of type int"),
]


@pytest.mark.slow
@pytest.mark.parametrize("path,value,needle", NESTED, ids=[".".join(map(str, p)) for p, _, _ in NESTED])
@pytest.mark.parametrize("command", ["status", "cancel", "collect"])
def test_a_nested_value_of_the_wrong_shape_exits_2_naming_it(planned: Path, tmp_path: Path, path: tuple,
                                                             value: object, needle: str, command: str) -> None:
    sweep = tmp_path / "s"
    subprocess.run(["cp", "-a", str(planned), str(sweep)], check=True)
    doc = json.loads((sweep / "manifest.json").read_text())
    _set(doc, path, value)
    (sweep / "manifest.json").write_text(json.dumps(doc))
    before = _digest(sweep)
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", f"action={command}", f"output_dir={sweep}",
                          f"sweep_id={doc['sweep_id']}"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert needle in res.stderr and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert _digest(sweep) == before


@pytest.mark.slow
def test_a_variant_file_holding_a_list_is_read_as_damaged_not_a_traceback(planned: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    subprocess.run(["cp", "-a", str(planned), str(sweep)], check=True)
    doc = json.loads((sweep / "manifest.json").read_text())
    (sweep / "variants" / "a2a.ovl0.dw0" / "variant.json").write_text("[1, 2]")
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", "action=collect", f"output_dir={sweep}",
                          f"sweep_id={doc['sweep_id']}"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=300)
    assert res.returncode in (0, 2, 3, 5) and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert (sweep / "report" / "summary.json").is_file()
