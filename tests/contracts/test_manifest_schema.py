"""The manifest is checked once at load: wrong shapes, variant names that climb out of the sweep folder and attempt
paths outside the variant's folder fail with ManifestError (exit 2) naming the value; each new attempt records the
git revision that submits it, and a resume at another commit warns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import ManifestError
from contracts.manifest import Manifest
from contracts.manifest_entries import code_revision
from experiments.conductor.revision import revision_note

VARIANT = {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "axes": {},
           "group": {}, "role": "baseline", "stage": 1, "settings": {}, "status": "planned", "reasons": [],
           "allow_adjust": [], "attempts": []}


def _write(tmp_path: Path, **change) -> Path:
    doc = {"schema_version": 1, "sweep_id": "20261129-160000Z-a1b2c3", "name": "isolation", "git_sha": "abc1234",
           "variants": [json.loads(json.dumps(VARIANT))], "runs": [{"variant": "a2a.ovl0.dw0", "repeat": 0}]}
    doc.update(change)
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    return tmp_path


def _attempt(**change):
    a = {"attempt": 1, "repeat": 0, "status": "succeeded", "log_dir": "variants/a2a.ovl0.dw0/attempt-1/logs"}
    a.update(change)
    return {**VARIANT, "attempts": [a]}


@pytest.mark.parametrize("change,needle", [
    ({"variants": "oops"}, r"variants='oops' must be a list"),
    ({"runs": [{"variant": "a2a.ovl0.dw0", "repeat": "zero"}]}, r"runs\[0\].repeat='zero' must be an integer"),
    ({"config": []}, r"config=\[\] must be an object"),
    ({"variants": [{**VARIANT, "name": "../../../escape"}]}, r"variants\[0\].name='../../../escape' must be a plain"),
    ({"runs": [{"variant": "../x", "repeat": 0}]}, r"runs\[0\].variant='../x'"),
    ({"variants": [_attempt(log_dir="/etc")]}, r"attempts\[0\].log_dir='/etc' must be a relative path under "
                                                r"variants/a2a.ovl0.dw0/"),
    ({"variants": [_attempt(log_dir="variants/a2a.ovl0.dw0/../../../x")]}, r"log_dir=.*must be a relative"),
    ({"variants": [_attempt(log_dir="variants/other/attempt-1/logs")]}, r"log_dir=.*must be a relative"),
    ({"variants": [_attempt(status="done")]}, r"status='done' must be one of planned"),
    ({"variants": [_attempt(attempt="1")]}, r"attempts\[0\].attempt='1' must be an integer"),
    ({"variants": None}, r"manifest.json: has no variants \(every manifest the planner writes has sweep_id, name, "
                         r"variants\)"),
    ({"sweep_id": None, "name": None}, r"has no sweep_id, name"),
])
def test_a_bad_manifest_fails_at_load_naming_the_value(tmp_path: Path, change: dict, needle: str) -> None:
    with pytest.raises(ManifestError, match=needle) as e:
        Manifest.load(_write(tmp_path, **change))
    assert e.value.exit_code == 2


def test_a_good_manifest_loads_and_new_attempts_record_their_revision(tmp_path: Path) -> None:
    m = Manifest.load(_write(tmp_path, variants=[_attempt()]))
    assert revision_note(m, current="abc1234") is None  # planned and run at the commit checked out
    a = m.variants[0].new_attempt(0)
    assert a.attempt == 2 and a.get("git_sha") == code_revision() and code_revision()
    m.variants[0].attempts[-1].extra["git_sha"] = "def5678"
    note = revision_note(m, current="def5678")
    assert note and "abc1234" in note and "def5678" in note
