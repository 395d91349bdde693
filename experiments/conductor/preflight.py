"""``preflight=container`` (CONTRACTS §1): one job runs the payload's validate mode for every kept variant, before
any training job. A variant that fails is marked pruned with the library's message and never trained."""

from __future__ import annotations

import json
import sys

from contracts.manifest import Manifest
from contracts.statuses import ManifestStatus
from experiments.conductor.prearm import run_prearm
from experiments.payload.validate_all import SUMMARY_FILE
from launchers.errors import SchedulerError
from launchers.spec import JobCommand


def container_preflight(sw) -> None:
    """Run the validate job of every planned or gated variant and prune those the real libraries reject.

    The job is ``python -m experiments.payload.validate_all VARIANT_JSON... OUT_DIR``; each variant's verdict is
    ``OUT_DIR/<variant>/effective_config.json``.

    Raises:
        SchedulerError: the job ended without its ``validate_all.json`` (it failed as a job, so no variant was
            judged): exit 5 before any run, instead of pruning every variant.
    """
    sd, m = sw.sd, sw.m
    names = [v.name for v in m.variants if v.status in (ManifestStatus.PLANNED, ManifestStatus.GATED)]
    if not names:
        return
    out = sd.preflight.resolve()
    argv = (sys.executable, "-m", "experiments.payload.validate_all",
            *[str(sd.variant_json(n).resolve()) for n in names], str(out))
    logs = out / "logs"
    h, st = run_prearm(sw, "preflight", JobCommand(name="preflight", argv=argv), "container preflight", logs)
    if not (out / SUMMARY_FILE).exists():  # the job itself failed (it could not start or check): not a verdict
        raise SchedulerError(f"the container preflight job {h.job_id} ended {st.status} without {out / SUMMARY_FILE}; "
                             f"nothing was pruned or run (its log: {logs})")
    verdicts = {}
    for n in names:
        eff = out / n / "effective_config.json"
        try:
            verdicts[n] = json.loads(eff.read_text())["checks"]
        except (OSError, ValueError, KeyError):
            verdicts[n] = {"verdict": "fail", "messages": [f"no effective_config.json from the preflight job ({eff})"]}
    pruned = [n for n, c in verdicts.items() if c.get("verdict") != "pass"]

    def change(mm: Manifest) -> None:
        for n in pruned:
            msg = "; ".join(verdicts[n].get("messages") or ["validate mode failed"])
            mm.variant(n).set_status(ManifestStatus.PRUNED, f"[container_preflight] {msg}")

    if pruned:
        sw.writer.change(change)
        print(f"container preflight pruned: {', '.join(pruned)}", file=sys.stderr)
