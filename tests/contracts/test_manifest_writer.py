"""contracts.manifest.ManifestWriter: one manifest per round, read once, changed in memory and written once per
round through Manifest.update, keeping what another process wrote in between; the file's format is unchanged."""

from __future__ import annotations

import json

import pytest

from contracts.manifest import Manifest, ManifestWriter
from contracts.records import Variant
from contracts.sweepdir import SweepDir

NAMES = ("a2a.ovl0.dw0", "a2a.ovl1.dw0")


def _sweep(tmp_path) -> SweepDir:
    sd = SweepDir(tmp_path / "s")
    variants = [{**Variant(name=n, dispatcher="alltoall", overlap=n == NAMES[1], delay_wgrad=False).to_json(),
                 "attempts": []} for n in NAMES]
    Manifest.from_json({"schema_version": 1, "sweep_id": "20261201-000000Z-abcdef", "name": "full",
                        "runs": [{"variant": n, "repeat": 0} for n in NAMES], "variants": variants,
                        "custom_key": {"kept": True}}).create(sd)
    return sd


def _attempts(sd: SweepDir) -> dict[str, dict]:
    doc = json.loads(sd.manifest.read_text())
    return {v["name"]: v["attempts"][-1] for v in doc["variants"] if v["attempts"]}


def test_a_round_is_read_once_changed_in_memory_and_written_once(tmp_path, monkeypatch):
    sd = _sweep(tmp_path)
    w = ManifestWriter(sd)
    refs = w.change(lambda m: [m.variant(n).new_attempt(0).ref(n) for n in NAMES])  # written at once
    assert set(_attempts(sd)) == set(NAMES)
    writes: list[int] = []
    real = Manifest.save
    monkeypatch.setattr(Manifest, "save", lambda self, sweep: writes.append(1) or real(self, sweep))
    before = sd.manifest.read_bytes()
    for r in refs:
        w.set(r, status="submitted", job_id="7", job_dir="/j")
    w.adjust(NAMES[0], [{"key": "x", "from": 1, "to": 2}])
    w.adjust(NAMES[1], [])  # nothing to add: no change
    assert w.m.attempt(refs[0]).status == "submitted"  # the round reads its own changes before they are written
    assert sd.manifest.read_bytes() == before and writes == []
    m = w.commit()
    assert writes == [1] and m is w.m  # one write for the whole round
    on_disk = _attempts(sd)
    assert on_disk[NAMES[0]]["status"] == "submitted" and on_disk[NAMES[0]]["job_dir"] == "/j"
    assert json.loads(sd.manifest.read_text())["custom_key"] == {"kept": True}  # untyped keys survive
    assert Manifest.load(sd).variant(NAMES[0]).variant.adjustments == ({"key": "x", "from": 1, "to": 2},)
    w.commit()  # nothing pending: nothing written
    assert writes == [1]


def test_another_process_write_between_rounds_is_kept(tmp_path):
    sd = _sweep(tmp_path)
    w = ManifestWriter(sd)
    ref = w.change(lambda m: m.variant(NAMES[0]).new_attempt(0).ref(NAMES[0]))
    w.set(ref, status="running")
    # action=cancel from another shell while this round is open
    Manifest.update(sd, lambda m: m.attempt(ref).set(status="cancelled", add_flags=["cancelled_by_user"]))
    w.set(ref, status="running", add_flags=["suspected_hang"])
    w.commit()
    a = Manifest.load(sd).attempt(ref)
    assert a.status == "cancelled" and set(a.flags) == {"cancelled_by_user", "suspected_hang"}
    assert w.m.attempt(ref).status == "cancelled"  # the writer now holds what it wrote


def test_change_writes_the_pending_round_with_it(tmp_path):
    sd = _sweep(tmp_path)
    w = ManifestWriter(sd)
    ref = w.change(lambda m: m.variant(NAMES[0]).new_attempt(0).ref(NAMES[0]))
    w.set(ref, status="failed")
    assert w.change(lambda m: m.add_block([NAMES[1]])) == 0  # the first recorded block
    m = Manifest.load(sd)
    assert m.attempt(ref).status == "failed" and m.runs[-1] == (NAMES[1], 0) and len(m.runs) == 3
    before = sd.manifest.read_bytes()
    with pytest.raises(KeyError, match="variant 'nope' is not in sweep"):
        ManifestWriter(sd).change(lambda m: m.variant("nope"))
    assert sd.manifest.read_bytes() == before  # a failed change writes nothing
