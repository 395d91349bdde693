"""Failure markers kept by the scanner (:mod:`analysis.scanner`): a bounded bag per kind, and the regions of a file's
last ``tail_bytes`` that get the marker scan (issue 17: flat memory).

Which regions form a file's tail (unchanged by issue 17): the regions of the file in order, and of them the shortest
suffix that holds at least ``tail_bytes`` bytes (all of them in a smaller file). A region is the scanner's unit
of complete lines, so the tail starts at a region start. What issue 17 changed is how the tail is held:

- when the file's size is known, a region whose end lies within the file's last ``tail_bytes`` is in the tail
  whatever follows (the regions after it hold at most the bytes after it), unless the file grows while it is read:
  it is scanned at once, while its bytes are in the cache, into a bag of its own, merged in order at the file's
  end (and dropped, if it is pushed out of the tail after all);
- a region before that is kept as its stream offset and length only, when the file can be read again; at the file's
  end a region still in the tail (possible only after lines longer than 1 MiB, which are in no region) is read
  again and scanned;
- without a file (``analysis.parse.parse_lines``), the regions' bytes are kept, as before.

So the scanner holds no more than one chunk of the log's bytes, however long the tail, and the markers found are
those of one pass over the tail.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from analysis.grammar import MARKERS_KEPT
from analysis.markers import TEXT_LIMIT, Marker, marker_rows


class MarkerBag:
    """The failure markers kept of a stream: per kind the first and the last ``MARKERS_KEPT`` (8) markers, in the
    order added, and the count of every marker added (``counts``)."""

    __slots__ = ("counts", "kept")

    def __init__(self) -> None:
        self.kept: dict[str, tuple[list[Marker], deque[Marker]]] = {}
        self.counts: dict[str, int] = {}

    def add(self, marker: Marker) -> None:
        """Count ``marker`` and keep it while it is among the first or the last 8 of its kind."""
        self.counts[marker.kind] = self.counts.get(marker.kind, 0) + 1
        first, last = self.kept.setdefault(marker.kind, ([], deque(maxlen=MARKERS_KEPT)))
        if len(first) < MARKERS_KEPT:
            first.append(marker)
        else:
            last.append(marker)

    def merge(self, later: MarkerBag) -> None:
        """Add the markers of ``later`` (a bag of the stream after this one's): the same as adding each of them
        here, since the first and the last 8 of a kind over both are among those the two bags kept."""
        for kind, (first, last) in later.kept.items():
            for marker in (*first, *last):
                self.add(marker)
            self.counts[kind] += later.counts[kind] - len(first) - len(last)

    def scan(self, buf: bytes, pos: int, end: int, base: int, file: str,
             quiet: tuple[np.ndarray, ...] | None = None) -> None:
        """Add the markers of the lines in ``buf[pos:end]`` (``buf[0]`` at stream offset ``base``), as :meth:`add`
        would one by one: per kind, the count, the first to fill the first 8 and the last 8 of the others (a
        Marker is made only for those). ``quiet``: lines that hold no marker (:func:`analysis.markers.marker_rows`)."""
        offsets, which, table = marker_rows(buf, pos, end, quiet)
        if not offsets.size:
            return
        kinds: dict[str, int] = {}
        kind_of = np.array([kinds.setdefault(kind, len(kinds)) for _, kind in table], np.int64)[which]
        for kind, code in kinds.items():
            rows = np.flatnonzero(kind_of == code)
            self.counts[kind] = self.counts.get(kind, 0) + rows.size
            first, last = self.kept.setdefault(kind, ([], deque(maxlen=MARKERS_KEPT)))
            room = MARKERS_KEPT - len(first)
            for into, picked in ((first, rows[:room]), (last, rows[room:][-MARKERS_KEPT:])):
                into.extend(Marker(kind, table[i][0][:TEXT_LIMIT], file, base + lo)
                            for lo, i in zip(offsets[picked].tolist(), which[picked].tolist(), strict=True))

    def markers(self) -> Iterator[Marker]:
        """The kept markers, kind after kind."""
        for first, last in self.kept.values():
            yield from first
            yield from last


@dataclass(slots=True)
class Region:
    """One tail region: stream offset ``start``, ``length`` bytes; its bytes (``buf[pos:pos + length]``) when they
    are kept, or the bag of its markers when it was scanned already; neither when it must be read again."""

    start: int
    length: int
    buf: bytes | None = None
    pos: int = 0
    bag: MarkerBag | None = None


class Tail:
    """The candidate tail regions of one file (see the module docstring). ``end``: the stream offset of the file's
    last byte + 1 when known; ``reread(start, length)``: the bytes at a stream offset, when the file can be read
    again."""

    def __init__(self, tail_bytes: int, file: str, end: int | None = None,
                 reread: Callable[[int, int], bytes] | None = None) -> None:
        self.tail_bytes = tail_bytes
        self.file = file
        self.end = end
        self.reread = reread
        self.regions: deque[Region] = deque()
        self.size = 0  # bytes of the regions held

    def add(self, buf: bytes, pos: int, end: int, base: int,
            quiet: tuple[np.ndarray, ...] | None = None) -> None:
        """Region ``buf[pos:end]`` (``buf[0]`` at stream offset ``base``), after every region added before;
        ``quiet``: lines of it that hold no marker, when it is scanned now (:func:`analysis.markers.marker_rows`)."""
        start, length = base + pos, end - pos
        if self.end is not None and self.end - (start + length) < self.tail_bytes:
            bag = MarkerBag()
            bag.scan(buf, pos, end, base, self.file, quiet)
            self.extend([Region(start, length, bag=bag)])
        elif self.reread is not None:
            self.extend([Region(start, length)])
        else:
            self.extend([Region(start, length, buf, pos)])

    def extend(self, regions: list[Region]) -> None:
        """Append regions (later in the stream than every region held); forget those pushed out of the tail."""
        for region in regions:
            self.regions.append(region)
            self.size += region.length
        while self.regions and self.size - self.regions[0].length >= self.tail_bytes:
            self.size -= self.regions.popleft().length

    def detached(self) -> list[Region]:
        """The regions held, with no bytes: those not yet scanned are read again where they are needed."""
        return [Region(r.start, r.length, bag=r.bag) for r in self.regions]

    def finish(self, into: MarkerBag) -> None:
        """Scan what is left of the tail into ``into``, in stream order, and forget it."""
        for r in self.regions:
            if r.bag is not None:
                into.merge(r.bag)
            elif r.buf is not None:
                into.scan(r.buf, r.pos, r.pos + r.length, r.start - r.pos, self.file)
            elif self.reread is not None:
                try:
                    data = self.reread(r.start, r.length)
                except (OSError, ValueError):  # the file went away: its read error is noted already
                    continue
                into.scan(data, 0, len(data), r.start, self.file)
        self.regions.clear()
        self.size = 0
