"""The tail's marker scan leaves out accepted iteration lines with finite values and keys without needles
(analysis.logs.markers.marker_rows ``quiet``): the markers kept and counted are those of the full scan, also when an
iteration line's prefix, a NaN loss or a key holds a needle."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.logs import markers, parse, scanner
from tests.analysis.synth import iteration_line


def _log(path: Path, n: int, *, prefix_every: int = 0, nan_every: int = 0, key: str | None = None) -> Path:
    with open(path, "w") as fh:
        for i in range(1, n + 1):
            prefix = " RuntimeError: CUDA error: an illegal memory access " if prefix_every and i % prefix_every == 0 \
                else " "
            line = iteration_line(i, n, step_ms=500.0 + i % 7, loss=7.0 - i / n, prefix=prefix,
                                  extra={key or "load_balancing_loss": 1.1})
            if nan_every and i % nan_every == 0:
                line = line.replace(f"lm loss: {7.0 - i / n:.6E}", "lm loss: nan")
            fh.write(line + "\n[rank1]: NCCL WARN Call to ibv_reg_mr failed\n" * (i % 50 == 0) + "\n"
                     * (i % 50 != 0))
    return path


def _markers(log: parse.ParsedLog) -> tuple:
    return log.marker_counts, [(m.kind, m.text, m.offset) for m in log.markers]


@pytest.mark.parametrize("case", [{}, {"prefix_every": 97}, {"nan_every": 89}, {"key": "ecc errors"},
                                  {"prefix_every": 300, "nan_every": 450}])
def test_quiet_lines_give_the_full_scan(case: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = _log(tmp_path / "a.log", 12000, **case)
    seen = []
    rows = markers.marker_rows

    def spy(buf, pos, end, quiet=None):
        seen.append(quiet is not None and quiet[0].size > 0)
        return rows(buf, pos, end, quiet)

    monkeypatch.setattr(markers, "marker_rows", spy)
    got = parse.parse_files([path])
    with monkeypatch.context() as m:
        m.setattr(scanner, "_quiet", lambda layout: False)
        full = parse.parse_files([path])
    assert _markers(got) == _markers(full)
    assert got.marker_counts.get("nccl_error", 0) + sum(got.marker_counts.values()) > 0
    assert any(seen) is ("key" not in case)  # the quiet lines were left out (not for a key with a needle)
    if "prefix_every" in case or "nan_every" in case:
        assert sum(got.marker_counts.values()) > 12000 // 50
