"""Command line of the history stage (the sweep's ``action=collect`` calls the same functions).

    python -m analysis.history record SWEEP_DIR_OR_SUMMARY [--manifest M] [--url URL]
    python -m analysis.history judge [--night YYYY-MM-DD | --sweep-id ID] [--series P/M/C[/K] | --preset P ...]
                                     [--window 7 --threshold 0.05] [--json OUT] [--url URL]
    python -m analysis.history trend --out history.html [--series P/M/C[/K]] [--night ...] [--nights 60] [--url URL]
                                     (every series, a section each, unless --series or --preset... pick some)

Exit codes (CONTRACTS §5): 0 fine, 4 a regression flagged (judge), 2 bad input (``--out`` or ``--json`` naming a
folder or a path under a file included: checked before the database is read), 5 database unusable or an output
file that cannot be written (a read-only file system, a full disk: "... was not written (<reason>)"), 1 a bug.
"""

from __future__ import annotations

import argparse
import json
import sys

from analysis.history.api import judge_night, judge_sweep, record_summary, write_trend_page
from analysis.history.errors import HistoryError, exit_code_for
from analysis.history.records import HistoryConfig, NightReport
from analysis.history.settings import DEFAULT_URL


def format_report(report: NightReport) -> str:
    """Plain-text table of a night's verdicts (one line per variant and metric), then warnings."""
    lines = [f"night {report.night} of {report.series} (sweeps {', '.join(report.sweep_ids) or '-'}): "
             f"{len(report.regressions)} regression(s), {len(report.improvements)} improvement(s)"]
    for v in report.variants:
        for j in v.judgements:
            change = "" if j.change is None else f"{j.change:+7.1%}"
            lines.append(f"  {v.variant:<28} {j.metric:<13} {j.verdict:<16} {change:>8}  {j.note}")
    lines += [f"  retired: {name}" for name in report.retired]
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m analysis.history", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=DEFAULT_URL, help=f"SQLAlchemy URL of the history (default {DEFAULT_URL})")
    common.add_argument("--timeout-s", type=float, default=30.0, help="how long to wait for another writer (s)")
    rec = sub.add_parser("record", parents=[common], help="record one collected sweep")
    rec.add_argument("summary", help="sweep folder, or its report/summary.json")
    rec.add_argument("--manifest", help="manifest.json (default: the sweep folder's)")
    pick = argparse.ArgumentParser(add_help=False)
    pick.add_argument("--night", help="YYYY-MM-DD (default: the latest recorded)")
    pick.add_argument("--series", help="preset/model/cluster[/container]: one series (trend: one page of it)")
    for k in ("preset", "model", "cluster", "container"):
        pick.add_argument(f"--{k}", help=f"series {k} (judge: needed only when several series match)")
    for k, default in (("window", 7), ("min-nights", 3)):
        pick.add_argument(f"--{k}", type=int, default=default)
    for k, default in (("threshold", 0.05), ("alpha", 0.05), ("noise-k", 3.0)):
        pick.add_argument(f"--{k}", type=float, default=default)
    jd = sub.add_parser("judge", parents=[common, pick], help="judge a night against its rolling baseline")
    jd.add_argument("--sweep-id", help="judge the night of this recorded sweep")
    jd.add_argument("--json", help="also write the report as JSON here")
    tr = sub.add_parser("trend", parents=[common, pick], help="write the trend page")
    tr.add_argument("--out", required=True, help="HTML file to write")
    tr.add_argument("--nights", type=int, default=60, help="how many nights to show")
    return p


def main(argv: list[str] | None = None) -> int:
    from contracts.atomic import check_target, not_written
    from contracts.exits import in_print_order

    in_print_order()
    args = _parser().parse_args(argv)
    target = None
    try:
        if args.command == "trend":
            target = check_target(args.out, "--out", example="history.html")
        elif args.command == "judge" and args.json is not None:
            target = check_target(args.json, "--json", example="judge.json")
        if args.command == "record":
            res = record_summary(args.url, args.summary, args.manifest, timeout_s=args.timeout_s)
            print(f"recorded sweep {res.sweep_id} (night {res.night}, {res.series}): {res.runs} runs, {res.steps} "
                  f"step times, {res.speedups} speedups{' (replaced)' if res.replaced else ''} in {res.url}")
            for w in res.warnings:
                print(f"warning: {w}", file=sys.stderr)
            return 0
        config = HistoryConfig(window=args.window, threshold=args.threshold, alpha=args.alpha,
                               noise_k=args.noise_k, min_nights=args.min_nights)
        sel = dict(series=args.series, preset=args.preset, model=args.model, cluster=args.cluster,
                   container=args.container)
        if args.command == "trend":
            out = write_trend_page(args.url, args.out, night=args.night, nights=args.nights, config=config,
                                   timeout_s=args.timeout_s, **sel)
            print(f"wrote {out}")
            return 0
        if args.sweep_id:
            report = judge_sweep(args.url, args.sweep_id, config=config, timeout_s=args.timeout_s)
        else:
            report = judge_night(args.url, args.night, config=config, timeout_s=args.timeout_s, **sel)
        print(format_report(report))
        if target is not None:
            from contracts.atomic import write_text

            write_text(target, json.dumps(report.to_json(), indent=2, default=str))
        return report.exit_code
    except (HistoryError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code_for(exc) if isinstance(exc, HistoryError) else 2
    except OSError as exc:  # the output file: the history database's own errors are HistoryStoreError (exit 5)
        if target is None:
            raise
        print(f"error: {not_written('the trend page' if args.command == 'trend' else '--json', target, exc)}",
              file=sys.stderr)
        return 5


if __name__ == "__main__":
    sys.exit(main())
