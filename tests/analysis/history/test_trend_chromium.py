"""The trend page in headless Chromium (Debian's chromium, scripts/chromium/install.sh): it renders, the plots
decode and are visible, and a screenshot is taken and checked for content."""

from __future__ import annotations

import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from matplotlib import image as mpimg

from analysis.history import record_summary, write_trend_page
from analysis.history.synthetic import SyntheticSeries, simulate_series

pytestmark = pytest.mark.chromium

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def _chromium(binary: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"  # a fresh profile per call
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=180, check=False)


class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body, self.imgs, self.rows, self._table = {}, [], 0, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "table" and "tonight" in (a.get("class") or "").split():
            self._table = True
        elif tag == "tr" and self._table:
            self.rows += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = False


@pytest.fixture
def page(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for n in simulate_series(SyntheticSeries(), 12, seed=21, tonight={"deepep.ovl1.dw0": 1.12}):
        record_summary(url, n)
    return write_trend_page(url, tmp_path / "trend.html")


def test_page_renders_with_visible_plots(chromium_bin, page, tmp_path):
    res = _chromium(chromium_bin, tmp_path, "--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    dom = _Dom()
    dom.feed(res.stdout)
    assert dom.rows == 1 + 7  # header + 4 step-time rows + 3 speedup rows
    assert len(dom.imgs) == 1 and dom.imgs[0]["src"].startswith("data:image/png;base64,")
    assert len(dom.imgs[0]["src"]) > 20_000
    # set by the page's script once the browser decoded every image with a non-zero size
    assert dom.body.get("data-images-loaded") == "1/1"
    assert "regression" in res.stdout


@pytest.mark.slow
def test_screenshot_shows_table_and_plot(chromium_bin, page, tmp_path):
    shot = tmp_path / "trend.png"
    res = _chromium(chromium_bin, tmp_path, "--window-size=1400,1500", f"--screenshot={shot}", page.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    assert shot.stat().st_size > 50_000
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (1500, 1400)
    ink = (pixels < 0.9).any(axis=2).mean()  # share of non-white pixels: text, table borders, plot lines
    colours = len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert ink > 0.03 and colours > 200, (ink, colours)
    # the red regression markers of the plot are on screen (pure-ish red pixels)
    red = (pixels[..., 0] > 0.85) & (pixels[..., 1] < 0.2) & (pixels[..., 2] < 0.2)
    assert red.sum() > 50
