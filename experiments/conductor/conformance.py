"""``conformance=true``: one job runs the stack's own unit tests (experiments/conformance.py) in the run's container
before any arm; each test's outcome goes into the manifest's ``conformance`` record, and the arms a failed suite
covers are pruned with the failed tests named (they never take a GPU hour)."""

from __future__ import annotations

import json
import sys

from contracts.manifest import Manifest
from contracts.statuses import ManifestStatus
from experiments.conductor.prearm import run_prearm
from experiments.conformance import RESULT_FILE, covered, suite_failed
from launchers.spec import JobCommand

FOLDER = "conformance"


def run_conformance(sw) -> None:
    """Run the conformance job, record every test's outcome and prune the arms of failed suites."""
    sd, m = sw.sd, sw.m
    doc = m.extra.get("conformance")
    if not doc or doc.get("status") != "planned":
        return
    out = (sd.root / FOLDER).resolve()
    argv = (sys.executable, "-m", "experiments.conformance", doc["dir"], str(out),
            *[f"{s['name']}={s['file']}" for s in doc["suites"]])
    run_prearm(sw, FOLDER, JobCommand(name=FOLDER, argv=argv), "conformance tests", out / "logs")
    try:
        results = json.loads((out / RESULT_FILE).read_text())
    except (OSError, ValueError):
        results = {}
    suites = []
    for s in doc["suites"]:
        r = results.get(s["name"])
        failed = suite_failed(r)
        bad = sorted(t for t, o in ((r or {}).get("tests") or {}).items() if o in ("failed", "error"))
        why = (r or {}).get("error") or (f"{len(bad)} test(s) failed: {', '.join(bad[:5])}" if bad else
                                         f"exit {(r or {}).get('exit')}" if r else
                                         f"no result from the conformance job ({out / RESULT_FILE})")
        suites.append({**s, "status": "failed" if failed else "passed", "tests": (r or {}).get("tests") or {},
                       "exit": (r or {}).get("exit"), **({"why": why} if failed else {})})
    gated = {}
    for v in m.variants:
        if v.status not in (ManifestStatus.PLANNED, ManifestStatus.GATED) or v.variant.role != "variant":
            continue
        for s in suites:
            if s["status"] == "failed" and covered(s["covers"], v.variant.dispatcher, v.variant.overlap,
                                                  v.variant.delay_wgrad):
                gated.setdefault(v.name, []).append(f"{s['name']} ({s['file']}): {s['why']}")

    def change(mm: Manifest) -> None:
        mm.extra["conformance"] = {**doc, "status": "ran", "suites": suites}
        for name, whys in gated.items():
            mm.variant(name).set_status(ManifestStatus.PRUNED, "[conformance] the stack's own test failed: "
                                        + "; ".join(whys))

    sw.writer.change(change)
    print("conformance: " + ", ".join(f"{s['name']} {s['status']}" for s in suites)
          + (f"; pruned {', '.join(sorted(gated))}" if gated else ""), file=sys.stderr)
