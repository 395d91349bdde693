"""contracts.frames: what is sent is received whole (also past a pipe's buffer), None is the empty message, and a
closed pipe is EOFError, between messages and inside one."""

from __future__ import annotations

import os
import threading

import pytest

from contracts import frames


def test_messages_arrive_whole_and_in_order_past_the_pipe_buffer():
    r, w = os.pipe()
    big = {"png": os.urandom(3 << 20)}  # larger than a pipe's buffer: the writer blocks until the reader reads
    writer = threading.Thread(target=lambda: [frames.send(w, m) for m in (big, None, ("ok", 1))])
    writer.start()
    try:
        assert frames.receive(r) == big
        assert frames.receive(r) is None
        assert frames.receive(r) == ("ok", 1)
    finally:
        writer.join(10)
        os.close(w)
    with pytest.raises(EOFError, match="after 0 of 8 bytes"):
        frames.receive(r)
    os.close(r)


def test_a_message_cut_short_is_eof_and_an_unpicklable_object_writes_nothing():
    r, w = os.pipe()
    with pytest.raises(Exception):  # noqa: B017 - pickle's own error for a lambda
        frames.send(w, lambda: None)
    os.write(w, (100).to_bytes(8, "little") + b"abc")
    os.close(w)
    with pytest.raises(EOFError, match="after 3 of 100 bytes"):
        frames.receive(r)
    os.close(r)
