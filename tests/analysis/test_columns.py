"""The parser's compact per-row storage (analysis.logs.grammar): a layout's rows as runs, a column's constant blocks."""

from __future__ import annotations

import numpy as np

from analysis.logs.grammar import Column, Rows


def test_rows_as_runs_give_the_row_numbers() -> None:
    rows = Rows()
    for start, count in [(0, 3), (3, 2), (7, 1), (9, 4), (13, 1), (20, 2), (25, 1)]:
        rows.add(start, count)
    assert rows.numbers().tolist() == [0, 1, 2, 3, 4, 7, 9, 10, 11, 12, 13, 20, 21, 25]
    assert len(rows) == 14 and len(rows.runs) == 2 * 5  # [0,5) [7,8) [9,14) [20,22) [25,26)


def test_column_keeps_every_value_bit_for_bit_and_constant_blocks_cost_no_rows() -> None:
    """Values appended one at a time and in blocks come back in order, bit for bit (-0.0 is not 0.0, NaN payloads
    kept); a column of one value comes back as a read-only zero-stride view."""
    nan2 = np.array([0x7FF8000000000001], np.int64).view(np.float64)[0]
    pieces = [[1.0], np.full(5, 1.0), [1.0, 1.0], np.array([0.0, -0.0]), [-0.0], np.full(3, nan2), [np.nan],
              np.arange(4.0), [7.0], np.full(2, 7.0)]
    column, want = Column(), []
    for piece in pieces:
        if isinstance(piece, np.ndarray):
            column.extend(piece)
        else:
            for value in piece:
                column.append(value)
        want += list(piece)
    got = column.take()
    assert len(got) == len(want) and got.view(np.int64).tolist() == np.array(want).view(np.int64).tolist()
    constant = Column("q")
    constant.append(512)
    constant.extend(np.full(1000, 512, np.int64))
    constant.append(512)
    values = constant.take()
    assert values.strides == (0,) and not values.flags.writeable and values.tolist() == [512] * 1002
