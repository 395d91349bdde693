"""Issue 13 item 10: a repeat is a repeat, an attempt is a retry. Nightly repeats r0-r2 are each attempt 1, a
retry of r1 is r1's attempt 2, and every attempt has its own folder and task name."""

from __future__ import annotations

from contracts.manifest import Manifest
from contracts.records import RunRef, Variant
from contracts.sweepdir import SweepDir
from launchers.spec import RunSpec


def _entry():
    v = Variant(name="a2a.ovl1.dw0", dispatcher="alltoall", overlap=True, delay_wgrad=False)
    return Manifest.from_json({"schema_version": 1, "sweep_id": "20261201-000000Z-abcdef", "name": "nightly",
                               "variants": [{**v.to_json(), "attempts": []}]})


def test_attempts_are_numbered_per_repeat_with_their_own_folders(tmp_path):
    m = _entry()
    e = m.variants[0]
    refs = [e.new_attempt(r).ref(e.name) for r in (0, 1, 2)]
    retry = e.new_attempt(1).ref(e.name)
    assert [(r.repeat, r.attempt) for r in refs] == [(0, 1), (1, 1), (2, 1)]
    assert (retry.repeat, retry.attempt) == (1, 2)
    assert m.attempt(RunRef(e.name, 1, 2)).repeat == 1 and m.attempt(RunRef(e.name, 2, 1)).repeat == 2
    sd = SweepDir(tmp_path)
    dirs = {sd.attempt_dir(r).name for r in [*refs, retry]}
    assert dirs == {"attempt-1", "r1-attempt-1", "r2-attempt-1", "r1-attempt-2"}
    assert [a.log_dir for a in e.attempts] == [f"variants/{e.name}/{d}/logs" for d in
                                              ("attempt-1", "r1-attempt-1", "r2-attempt-1", "r1-attempt-2")]
    tasks = {r.task for r in [*refs, retry]}
    assert tasks == {f"{e.name}.r0.a1", f"{e.name}.r1.a1", f"{e.name}.r2.a1", f"{e.name}.r1.a2"}
    names = {RunSpec(variant=e.name, variant_json=tmp_path / "v.json", attempt=r.attempt, repeat=r.repeat).name
             for r in [*refs, retry]}
    assert len(names) == 4  # NeMo-Run task / Slurm job names never collide within one stage's batch
