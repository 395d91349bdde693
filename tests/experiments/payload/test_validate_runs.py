"""One process validating many runs (experiments.payload.validate_runs) gives each run what its own
``experiments.train --mode validate`` gives: the effective_config.json, the payload lines, the exit code."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from contracts.jobs import JobState
from contracts.records import RunRef
from experiments.payload.cli import main as train_main
from experiments.payload.validate_runs import main as runs_main
from launchers.validate_batch import ValidateBatch

from .helpers import make_variant, read_effective, write_variant

pytestmark = pytest.mark.megatron


@pytest.fixture(autouse=True)
def keep_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)


def _comparable(doc: dict) -> dict:
    """The document without what differs between two processes (written paths, host timings)."""
    drop = {"hardware", "written_at", "runtime", "out_dir"}
    return {k: v for k, v in doc.items() if k not in drop}


def test_each_run_gets_what_its_own_process_gives(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    good = write_variant(sweep / "variants", make_variant("alltoall", True, False))
    bad = write_variant(sweep / "variants", make_variant("alltoall", False, True))  # delay_wgrad needs overlap
    runs = []
    for k, path in enumerate((good, bad, tmp_path / "missing" / "variant.json")):
        folder = tmp_path / "batch" / f"r{k}"
        runs.append({"variant_json": str(path), "out_dir": str(folder / "out"), "attempt": 2, "log": str(folder / "log"),
                     "exit": str(folder / "exit.json")})
    spec = tmp_path / "runs.json"
    spec.write_text(json.dumps({"runs": runs}))
    code = runs_main([str(spec)])
    capsys.readouterr()
    codes = [json.loads(Path(r["exit"]).read_text())["exit_code"] for r in runs]
    assert codes[0] == 0 and codes[1] != 0 and codes[2] == 10 and code == codes[1]
    for path, run, want in zip((good, bad), runs, codes, strict=False):
        own = tmp_path / "own" / path.parent.name
        assert train_main([str(path), str(own), "--mode", "validate", "--attempt", "2"]) == want
        capsys.readouterr()
        assert _comparable(read_effective(Path(run["out_dir"]))) == _comparable(read_effective(own))
        log = Path(run["log"]).read_text()
        name = read_effective(own)["variant"]
        assert f"[payload] validate {name} attempt=2" in log and log.rstrip().endswith(f"[payload] exit {want}")
        assert f"[payload] validate {name}: {'pass' if want == 0 else 'fail'}" in log
    assert "[payload] error 10" in Path(runs[2]["log"]).read_text()


def test_run_state_follows_its_exit_file_then_the_shared_job(tmp_path):
    refs = [RunRef("a", 0, 1), RunRef("b", 0, 1), RunRef("c", 0, 1)]
    batch = ValidateBatch(tmp_path / "batch", tmp_path, refs)
    running = JobState("running", job_id="x", state="RUNNING")
    assert batch.state(refs[0], running).status == "running" and not batch.all_done()
    for ref, code in zip(refs[:2], (0, 3), strict=True):
        batch.folder(ref).mkdir(parents=True)
        (batch.folder(ref) / "exit.json").write_text(json.dumps({"exit_code": code}))
    ok, failed = batch.state(refs[0], running), batch.state(refs[1], running)
    assert (ok.status, ok.state, ok.exit_code) == ("succeeded", "SUCCEEDED", 0)
    assert (failed.status, failed.state, failed.exit_code) == ("failed", "FAILED", None)
    ended = batch.state(refs[2], JobState("failed", job_id="x", state="FAILED"))
    assert ended.status == "failed" and "ended before" in ended.reason
    assert batch.state(refs[2], JobState("cancelled", job_id="x", state="CANCELLED")).status == "cancelled"


def _batch_of(tmp_path: Path, docs: list[dict]) -> tuple[ValidateBatch, list[RunRef]]:
    sweep = tmp_path / "sweep"
    refs = []
    for doc in docs:
        write_variant(sweep / "variants", doc)
        refs.append(RunRef(doc["variant"], 0, 1))
    return ValidateBatch(tmp_path / "batch", sweep, refs[:1]), refs


def _follow(batch: ValidateBatch, idle_s: float) -> tuple[threading.Thread, list[int]]:
    """The batch's process, run in a thread of this one (the real main, reading the batch's own runs.json)."""
    argv = list(batch.command().argv[3:])
    argv[argv.index("--follow") + 1] = str(idle_s)
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(runs_main(argv)))
    t.start()
    return t, codes


def _exit_code(batch: ValidateBatch, ref: RunRef, timeout_s: float = 60) -> int:
    path = batch.folder(ref) / "exit.json"
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{ref.task} was never validated"
        time.sleep(0.05)
    return json.loads(path.read_text())["exit_code"]


def test_one_process_takes_a_later_launch_then_ends_on_done(tmp_path, capsys):
    batch, refs = _batch_of(tmp_path, [make_variant("alltoall", True, False), make_variant("alltoall", False, True)])
    t, codes = _follow(batch, idle_s=60)
    assert _exit_code(batch, refs[0]) == 0
    assert batch.hand_over(refs[1:])  # the gated stage, launched after the first was analysed
    assert _exit_code(batch, refs[1]) != 0 and batch.all_done()
    assert t.is_alive()  # still waiting for more
    batch.finish()
    t.join(10)
    capsys.readouterr()
    assert not t.is_alive() and codes and codes[0] != 0  # the first nonzero run exit code
    assert not batch.hand_over(refs[:1])  # ended: a later launch starts a new process


def test_an_idle_process_closes_and_refuses_what_comes_after(tmp_path, capsys):
    batch, refs = _batch_of(tmp_path, [make_variant("alltoall", True, False), make_variant("alltoall", True, True)])
    t, codes = _follow(batch, idle_s=0.3)
    t.join(60)
    capsys.readouterr()
    assert not t.is_alive() and codes == [0] and (batch.root / "closed").exists()
    assert not batch.hand_over(refs[1:]) and not (batch.root / "more-1.json").exists()
    assert batch.refs == refs[:1]


def test_runs_handed_over_before_the_idle_deadline_are_validated(tmp_path, capsys):
    # more-1.json already waits when the first runs are done: even with no idle time left it is taken, not closed
    batch, refs = _batch_of(tmp_path, [make_variant("alltoall", True, False), make_variant("alltoall", True, True)])
    batch.root.mkdir(parents=True)
    argv = list(batch.command().argv[3:])
    assert batch.hand_over(refs[1:])
    argv[argv.index("--follow") + 1] = "0"
    assert runs_main(argv) == 0
    capsys.readouterr()
    assert _exit_code(batch, refs[1], 1) == 0 and (batch.root / "closed").exists()


def test_runs_handed_over_after_a_failed_run_are_still_validated(tmp_path, capsys):
    # stage 1's run fails its check (delay_wgrad without overlap); the gated run handed over later must still run
    batch, refs = _batch_of(tmp_path, [make_variant("alltoall", False, True), make_variant("alltoall", True, False)])
    t, codes = _follow(batch, idle_s=60)
    assert _exit_code(batch, refs[0]) != 0
    assert batch.hand_over(refs[1:])
    assert _exit_code(batch, refs[1]) == 0
    batch.finish()
    t.join(10)
    capsys.readouterr()
    assert not t.is_alive() and codes and codes[0] != 0
