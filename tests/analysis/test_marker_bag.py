"""analysis.logs.markers.MarkerBag.scan keeps and counts what adding the region's markers one by one keeps and counts
(it makes a Marker only for the first and the last 8 of a kind)."""

from __future__ import annotations

import pytest

from analysis.logs.markers import TEXT_LIMIT, Marker, MarkerBag, scan_markers

LINES = ["RuntimeError: NCCL error: unhandled system error", "[rank3]: ValueError: an error occurred, retrying",
         "Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory.", "plain line",
         "x" * 3000 + " RuntimeError: boom " + "y" * 10, "half\rTraceback (most recent call last):\r"]


def _one_by_one(buf: bytes, bag: MarkerBag) -> MarkerBag:
    for lo, text, kind in scan_markers(buf, 0, len(buf)):
        bag.add(Marker(kind, text[:TEXT_LIMIT], "f", 100 + lo))
    return bag


@pytest.mark.parametrize("count,pattern", [(1, [0]), (40, [0, 1, 4]), (300, [1, 2, 3, 4, 0]), (50, [5, 1]),
                                           (30, [6, 0])])
@pytest.mark.parametrize("before", [0, 5, 20])
def test_scan_keeps_what_adding_one_by_one_keeps(count: int, pattern: list[int], before: int):
    earlier = "".join(f"RuntimeError: earlier {i}\n[rank1]: ValueError: an error occurred {i}\n" for i in range(before))
    buf = "".join(LINES[pattern[i % len(pattern)]] + f" {i % 7}\n" for i in range(count)).encode()
    expected, got = MarkerBag(), MarkerBag()
    for bag in (expected, got):
        _one_by_one(earlier.encode(), bag)
    _one_by_one(buf, expected)
    got.scan(buf, 0, len(buf), 100, "f")
    assert got.counts == expected.counts
    assert {k: (f, list(d)) for k, (f, d) in got.kept.items()} == {
        k: (f, list(d)) for k, (f, d) in expected.kept.items()}
    markers = sum(1 for i in range(count) if pattern[i % len(pattern)] != 4)
    assert sum(got.counts.values()) - 2 * before >= markers > 0
