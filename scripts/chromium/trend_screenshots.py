"""Screenshots of the nightly trend page of a team database that holds two series (README "Nightly runs").

    python scripts/chromium/trend_screenshots.py [--out FOLDER] [--chromium PATH]

Records 14 synthetic nights (analysis/history/synthetic.py: the step-time noise measured on the H200, seeded) of
two series into one SQLite history: ``nightly/qwen3_30b_a3b/h100_slurm/nemo_26_04``, whose last night slows the
deepep overlap arm by 12% (a regression), and ``nightly/qwen3_235b_a22b/b200_slurm/nemo_26_04``, pure noise.
Writes the trend page of every series (the first series' section first, as its nightly writes it) and takes one
headless-Chromium screenshot of the whole page, both sections (scripts/chromium/install.sh),
``trend_two_series.png``, in ``results/img/`` by default: ``results/`` is git-ignored, so the checkout stays clean
(a changed tracked file would make every later Slurm run refuse the dirty tree). A maintainer refreshes the README's
image with ``--out docs/img`` and commits it. Needs no GPU, cluster or network.

Exit codes: 0 written; 2 ``--out`` names a file or a path under one (checked first); 5 the screenshot cannot be
written into ``--out`` (a read-only file system: "... was not written (<reason>)").
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from analysis.history import record_summary, write_trend_page  # noqa: E402
from analysis.history.records import Series  # noqa: E402
from analysis.history.synthetic import SyntheticSeries, simulate_series  # noqa: E402
from contracts.atomic import BadTarget, check_target, not_written, write_bytes  # noqa: E402

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars")
HEIGHT = 2600  # px: the summary and both series' sections at a width of WIDTH px
WIDTH = 1600
OUT = REPO / "results" / "img"  # git-ignored: running the script never dirties the checkout
SERIES = (Series(preset="nightly", model="qwen3_30b_a3b", cluster="h100_slurm", container="nemo_26_04"),
          Series(preset="nightly", model="qwen3_235b_a22b", cluster="b200_slurm", container="nemo_26_04"))


def _chromium(explicit: str | None) -> str:
    for cand in (explicit, os.environ.get("MOE_SWEEP_CHROMIUM"), shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise SystemExit("no chromium binary: bash scripts/chromium/install.sh (or --chromium PATH)")


def _shot(binary: str, page: str, out: Path, height: int, work: Path) -> None:
    profile = work / f"profile-{out.stem}"
    subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}",
                    "--virtual-time-budget=5000", f"--screenshot={out}", page], check=True, capture_output=True,
                   timeout=180)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=OUT,
                   help="folder of trend_two_series.png (default: results/img, git-ignored; the README's image: "
                        "docs/img)")
    p.add_argument("--chromium")
    args = p.parse_args(argv)
    try:
        check_target(args.out, "--out", folder=True)
    except BadTarget as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    binary = _chromium(args.chromium)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = f"sqlite:///{work / 'team.db'}"
        for k, series in enumerate(SERIES):
            tonight = {"deepep.ovl1.dw0": 1.12} if k == 0 else None
            for night in simulate_series(replace(SyntheticSeries(), series=series), 14, seed=31 + k,
                                         tonight=tonight):  # a sweep id is unique across the database
                record_summary(url, replace(night, sweep=replace(night.sweep, sweep_id=f"{night.sweep.sweep_id}-{k}")))
        page = write_trend_page(url, work / "history.html", first=SERIES[0])
        shot = args.out / "trend_two_series.png"
        taken = work / shot.name  # taken aside, then written atomically: a failed write leaves the old one whole
        _shot(binary, page.as_uri(), taken, HEIGHT, work)
        try:
            write_bytes(shot, taken.read_bytes())
        except OSError as exc:
            print(f"error: {not_written('the screenshot', shot, exc)}", file=sys.stderr)
            return 5
    print(f"wrote {shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
