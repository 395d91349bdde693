"""Gates of a staged preset (CONTRACTS §2): open the next stage once the earlier one is analysed."""

from __future__ import annotations

from analysis.api import Summary
from contracts.manifest import Manifest, ManifestWriter, VariantEntry
from contracts.statuses import GOOD_OUTCOMES, ManifestStatus, StageStatus, Verdict


def gate_reason(peer: VariantEntry | None, summary: Summary) -> str | None:
    """Why gate ``overlap_passed`` stays closed for a delay_wgrad arm, or None when it opens.

    It opens when the same dispatcher's overlap variant (overlap on, delay_wgrad off, same group) has every latest
    run ok/ok_with_warning/validated, its verdict is not ``slower`` and its loss parity did not fail. In validate mode
    there are no timings, so ``validated`` suffices. With blocks the verdict is the paired one (faster, equivalent,
    slower, no_significant_difference); with ``repeats=auto`` it is the group-sequential decision, and the
    conductor opens gates only once the adaptive design has stopped adding blocks (experiments/conductor/drive.py
    ``next_step``), so the gate sees a decided arm or one that ran out of blocks. A slower verdict that the
    group's control marks doubtful still closes the gate, with the doubt in the reason.
    """
    if peer is None:
        return "the sweep has no overlap variant of this dispatcher"
    if peer.status == ManifestStatus.PRUNED:
        return f"{peer.name} was pruned"
    mine = [r for r in summary.runs if r.variant == peer.name]
    if not mine:
        return f"{peer.name} has no analysed run"
    bad = [r for r in mine if r.status not in GOOD_OUTCOMES]
    if bad:
        return f"{peer.name} run status {bad[0].status} ({bad[0].reason})"
    comp = next((c for c in summary.comparisons if c.variant == peer.name), None)
    if comp and comp.verdict == Verdict.SLOWER:
        doubt = f" (doubtful: {comp.doubtful_reason})" if comp.doubtful else ""
        return f"{peer.name} is slower than the baseline{doubt}"
    if comp and comp.loss_parity.ok is False:
        return f"{peer.name} loss diverged from the baseline"
    return None


GATE = "gate overlap_passed"
REFERENCE = "gate reference_passed"


def reference_reason(summary: Summary) -> str | None:
    """Why gate ``reference_passed`` stays closed, or None when it opens: the baseline's median TFLOP/s/GPU is not
    more than 5% below NVIDIA's published figure for this model, GPU and scale (analysis/measure/bound.py). A baseline
    without a timed good run keeps it closed (nothing shows that it reproduces the figure)."""
    ref = summary.bound.reference if summary.bound else ()
    if not ref:
        base = [r for r in summary.runs if r.role == "baseline"]
        states = ", ".join(sorted({f"{r.status}" + (f" ({r.reason})" if r.reason else "") for r in base})) or "none"
        return f"the baseline has no timed good run to compare with the published figure (runs: {states})"
    check = ref[0]
    if check.below:
        return check.text()
    return None


def ceiling_reason(g: VariantEntry, summary: Summary, threshold: float) -> str | None:
    """``prune_below_ceiling=true`` at the gate: why an overlap arm is not worth running, from its group's
    profiled baseline in this sweep (exposed comm / step below ``threshold``), or None."""
    from experiments.reference import is_overlap_arm

    if not is_overlap_arm(g.variant):
        return None
    for r in summary.runs:
        b = r.step_breakdown or {}
        parts = b.get("parts_ms") or {}
        if r.role == "baseline" and r.group == g.variant.group and b.get("step_ms") and "comm_exposed" in parts:
            share = float(parts["comm_exposed"]) / float(b["step_ms"])
            if share < threshold:
                return (f"overlap ceiling {100 * share:.1f}% < practical_threshold {100 * threshold:.1f}%: the "
                        f"baseline {r.name} exposes {parts['comm_exposed']:.1f} of {b['step_ms']:.1f} ms of "
                        "communication, all any overlap arm can hide (prune_below_ceiling=true)")
            return None
    return None


def gate_closed(v: VariantEntry) -> bool:
    """True for a variant its gate closed (skipped, never run): the gate is decided again from the runs as they
    stand at each analysis, so a resume that makes the overlap arm pass reopens it."""
    return (v.status == ManifestStatus.SKIPPED and not v.attempts
            and any(r.startswith((f"{GATE} closed", f"{REFERENCE} closed")) for r in v.variant.reasons))


def undecided(m: Manifest) -> list[VariantEntry]:
    """The variants a gate decides at the next analysis: gated ones, and those a gate closed (:func:`gate_closed`)."""
    return [v for v in m.variants if v.status == ManifestStatus.GATED or gate_closed(v)]


def _decide(v: VariantEntry, status: ManifestStatus, reason: str) -> None:
    """Set the gate's decision, replacing an earlier one (the report shows the decision that stands)."""
    from dataclasses import replace

    kept = tuple(r for r in v.variant.reasons if not r.startswith((GATE, REFERENCE)))
    v.variant = replace(v.variant, status=status, reasons=(*kept, reason))


def open_gates(writer: ManifestWriter, summary: Summary) -> bool:
    """Decide every gate from the runs as they stand (``summary``): a gated variant, or one a gate closed earlier,
    whose gate passes -> planned; a gated one whose gate fails -> skipped (a closed one stays closed, unchanged). One
    manifest write through the sweep's ``writer`` (none when nothing is undecided). Returns True if any opened."""

    def change(m: Manifest) -> bool:
        todo = undecided(m)
        if not todo:
            return False
        opened = False
        waiting = {v.name for v in todo if v.status == ManifestStatus.GATED}  # before this round decides any
        prune = bool(m.extra.get("prune_below_ceiling"))
        threshold = float((m.design or {}).get("practical_threshold") or 0.02)
        for g in sorted(todo, key=lambda v: v.variant.gate != "reference_passed"):  # the reference gate first
            if g.variant.gate == "reference_passed":
                reason = reference_reason(summary)
                if reason:
                    if g.status == ManifestStatus.GATED:
                        _decide(g, ManifestStatus.SKIPPED, f"{REFERENCE} closed: {reason}")
                else:
                    why = summary.bound.reference[0].text() if summary.bound and summary.bound.reference else ""
                    _decide(g, ManifestStatus.PLANNED, f"{REFERENCE} opened: {why}")
                    opened = True
                continue
            peer = next((v for v in m.variants if v.variant.dispatcher == g.variant.dispatcher and v.variant.overlap
                         and not v.variant.delay_wgrad and v.variant.group == g.variant.group), None)
            if peer is not None and peer.name in waiting:
                continue  # its peer waits on a gate of its own (the reference): decided once the peer ran
            reason = gate_reason(peer, summary) or (ceiling_reason(g, summary, threshold) if prune else None)
            if reason:
                if g.status == ManifestStatus.GATED:
                    _decide(g, ManifestStatus.SKIPPED, f"{GATE} closed: {reason}")
            else:
                ok = ", ".join(sorted({r.status for r in summary.runs if peer and r.variant == peer.name}))
                _decide(g, ManifestStatus.PLANNED, f"{GATE} opened: {peer.name if peer else '?'} "
                                                   f"ran {ok}, not slower, loss parity not failed")
                opened = True
        for s in m.stages:
            if s.gate and (opened or s.status != StageStatus.OPEN):
                s.status = StageStatus.OPEN if opened else StageStatus.CLOSED
        return opened

    if not undecided(writer.m):
        return False
    return writer.change(change)
