"""GPU-hours in the report: each run's plan estimate beside what sacct accounted, written into the attempts by the
conductor after the jobs ended and shown by the analysis (summary.json ``runs[].gpu_hours``, report.md). sacct is
scripted here (its parser and the real local cluster: tests/launchers/test_accounting.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import launchers.accounting as accounting
from analysis.api import Options, report_sweep
from contracts.manifest import Manifest, ManifestWriter
from contracts.sweepdir import SweepDir
from experiments.conductor.accounting import record_attempt_gpu_hours
from experiments.plan import make_plan, write_plan
from launchers.accounting import JobUsage


def _sweep(tmp_path, cluster: str):
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "sweep=full", "dispatcher=alltoall",
                      "overlap=off,on", "delay_wgrad=off", f"cluster={cluster}", "allow_dirty=true"])
    sd = SweepDir(write_plan(plan, [], render=False))
    writer = ManifestWriter(sd)
    refs = writer.change(lambda m: [v.new_attempt(0).ref(v.name) for v in m.variants if v.status == "planned"])
    for i, ref in enumerate(refs):
        writer.set(ref, status="failed" if i else "succeeded", job_id=str(500 + i))
    writer.commit()
    return sd, writer, refs


def test_accounted_gpu_hours_reach_the_report_beside_the_estimate(tmp_path, monkeypatch):
    sd, writer, refs = _sweep(tmp_path, "local_slurm")
    asked = []

    def usage(ids, shell=None, timeout_s=60):
        asked.append(list(ids))
        return {"500": JobUsage(job_id="500", elapsed_s=180, gpus=2, alloc_tres="gres/gpu=2")}  # job 501 is not in the accounting database (yet)

    monkeypatch.setattr(accounting, "job_usage", usage)
    record_attempt_gpu_hours(SimpleNamespace(m=writer.m, writer=writer))
    assert asked == [["500", "501"]]
    m = Manifest.load(sd)
    first = m.attempt(refs[0])
    assert first.get("gpu_hours_accounted") == 0.1 and "180 s x 2 GPU" in first.get("gpu_hours_note")
    assert m.attempt(refs[1]).get("gpu_hours_accounted") is None
    record_attempt_gpu_hours(SimpleNamespace(m=m, writer=ManifestWriter(sd, m)))
    assert asked[-1] == ["501"]  # an accounted attempt is not asked again

    estimate = float(m.design["run_gpu_hours"][refs[0].variant])
    summary = report_sweep(sd.root, Options())
    runs = {r["variant"]: r for r in json.loads(sd.summary_json.read_text())["runs"]}
    assert runs[refs[0].variant]["gpu_hours"] == {"estimate": estimate, "accounted": 0.1,
                                                  "note": first.get("gpu_hours_note")}
    assert runs[refs[1].variant]["gpu_hours"]["accounted"] is None
    assert {r.variant: r.gpu_hours for r in summary.runs}[refs[0].variant]["accounted"] == 0.1
    md = (sd.report / "report.md").read_text()
    assert "## GPU-hours (plan estimate, Slurm accounting)" in md
    row = next(line for line in md.splitlines() if line.startswith(f"| {runs[refs[0].variant]['name']} ")
               and "sacct" in line)
    assert "0.1000" in row and f"{estimate:.3f}" in row
    assert "0.1000" in (sd.report / "report.html").read_text()


def test_a_local_sweep_asks_no_sacct_and_shows_the_estimate(tmp_path, monkeypatch):
    sd, writer, refs = _sweep(tmp_path, "local")
    monkeypatch.setattr(accounting, "job_usage", lambda *a, **k: (_ for _ in ()).throw(AssertionError("asked")))
    record_attempt_gpu_hours(SimpleNamespace(m=writer.m, writer=writer))
    report_sweep(sd.root, Options())
    runs = json.loads(sd.summary_json.read_text())["runs"]
    assert all(r["gpu_hours"]["accounted"] is None for r in runs if r["gpu_hours"])


def test_the_history_sums_what_the_attempts_recorded_and_asks_sacct_nothing(tmp_path, monkeypatch):
    """One sacct pass (record_attempt_gpu_hours); the history's per-run figure is the sum over the run's attempts."""
    from experiments.conductor.accounting import accounted_gpu_hours

    sd, writer, refs = _sweep(tmp_path, "local_slurm")
    retry = writer.change(lambda m: m.variant(refs[1].variant).new_attempt(0).ref(refs[1].variant))
    writer.set(retry, status="succeeded", job_id="502")
    writer.commit()
    monkeypatch.setattr(accounting, "job_usage", lambda ids, shell=None, timeout_s=60: {
        "500": JobUsage(job_id="500", elapsed_s=180, gpus=2, alloc_tres="gres/gpu=2"),
        "501": JobUsage(job_id="501", elapsed_s=360, gpus=2, alloc_tres="gres/gpu=2"),
        "502": JobUsage(job_id="502", elapsed_s=720, gpus=1, alloc_tres="gres/gpu=1")})
    record_attempt_gpu_hours(SimpleNamespace(m=writer.m, writer=writer))
    monkeypatch.setattr(accounting, "job_usage", lambda *a, **k: (_ for _ in ()).throw(AssertionError("asked")))
    got = accounted_gpu_hours(Manifest.load(sd))
    assert got[(refs[0].variant, 0)][0] == 0.1
    hours, note = got[(refs[1].variant, 0)]
    assert hours == 0.4 and "sacct job 501" in note and "sacct job 502" in note  # both attempts of the retried run
