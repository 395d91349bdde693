"""scripts/chromium/trend_screenshots.py: the README's screenshot of a team database's trend page, two series, made
by headless Chromium from synthetic nights; the image has both sections' content (ink down to its lower part)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from tests.analysis.history.conftest import chromium_bin  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.chromium
@pytest.mark.slow
def test_the_screenshot_shows_two_series(chromium_bin, tmp_path):  # noqa: F811
    spec = importlib.util.spec_from_file_location("trend_screenshots", REPO / "scripts/chromium/trend_screenshots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--out", str(tmp_path), "--chromium", chromium_bin]) == 0
    pixels = mpimg.imread(tmp_path / "trend_two_series.png")[..., :3]
    assert pixels.shape[:2] == (mod.HEIGHT, mod.WIDTH)
    ink = (pixels < 0.9).any(axis=2)
    rows = np.flatnonzero(ink.any(axis=1))
    # the second series' plots reach into the last fifth of the page; the first's alone end near its middle
    assert rows.max() > 0.8 * mod.HEIGHT and ink.mean() > 0.03, (rows.max(), ink.mean())
    assert (REPO / "docs" / "img" / "trend_two_series.png").is_file()
    assert "docs/img/trend_two_series.png" in (REPO / "README.md").read_text()
