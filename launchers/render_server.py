"""NeMo-Run's dry run in a forked process that imports NeMo-Run while the planner plans (issue 17).

A 1,000-variant ``action=plan`` whose job-template cache is cold (``launchers.templates``: no plan of this shape
ran on this machine yet) spends 1.0-1.5 s importing NeMo-Run for one dry run per shape, after 0.6-1 s of Hydra
composition and planning that needs no NeMo-Run. :class:`RenderServer` forks at the start of the command; the
child imports NeMo-Run on the other core and then renders what :class:`launchers.render.JobScripts` asks of it
(``render_job_script``'s arguments in, its text or its error out, pickled over two pipes), so the import no longer
follows the planning.

Only what the planner's template needs goes there: the same function with the same arguments, so the text is the
dry run's, byte for byte (``tests/launchers/test_render_server.py``). Nothing is lost when the child cannot be
used (no ``fork``, another Python thread running, an argument that does not pickle, the child gone): the call
renders in this process, as without the server.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from contracts import frames


class RenderServer:
    """A forked child with NeMo-Run imported that renders job scripts (module docstring).

    Raises nothing: :attr:`alive` is False when the child could not be started, and :meth:`render_job_script`
    then renders in this process."""

    def __init__(self) -> None:
        self.pid: int | None = None
        if not hasattr(os, "fork") or threading.active_count() != 1:
            return  # a fork copies only the calling thread: a lock another one holds would stay held
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(request_w)
            os.close(reply_r)
            _serve(request_r, reply_w)  # never returns
        os.close(request_r)
        os.close(reply_w)
        self.pid, self._out, self._in = pid, request_w, reply_r

    @property
    def alive(self) -> bool:
        return self.pid is not None

    def render_job_script(self, cluster: Any, item: Any, *, state_dir: Any, **kwargs: Any) -> str:
        """:func:`launchers.render.render_job_script` (same arguments, text and errors), in the child when it can."""
        from launchers.render import render_job_script

        if self.pid is not None:
            try:
                frames.send(self._out, (cluster, item, state_dir, kwargs))
                ok, value = frames.receive(self._in)
            except Exception:  # noqa: BLE001 - anything on the way: this process renders, the child is let go
                self.close()
            else:
                if ok:
                    return value
                raise value
        return render_job_script(cluster, item, state_dir=state_dir, **kwargs)

    def close(self) -> None:
        """End the child and reap it. It is killed rather than waited for: unneeded (every template was in the
        cache), it may still be importing NeMo-Run, and it holds nothing of the plan's."""
        if self.pid is None:
            return
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ChildProcessError, ProcessLookupError):
            pass
        self.pid = None


def _serve(requests: int, replies: int) -> None:
    """The child: import NeMo-Run, then answer each request until the parent closes the pipe; exits without the
    interpreter's teardown (the parent owns every file and folder)."""
    code = 0
    try:
        from launchers.home import nemo_run

        nemo_run(None)
        from launchers.render import render_job_script

        while True:
            try:
                cluster, item, state_dir, kwargs = frames.receive(requests)
            except EOFError:  # the parent closed the pipe: done
                break
            try:
                reply = (True, render_job_script(cluster, item, state_dir=state_dir, **kwargs))
            except Exception as e:  # noqa: BLE001 - the parent raises it
                reply = (False, e)
            try:
                frames.send(replies, reply)  # pickles before it writes: a failure here wrote nothing
            except OSError:
                raise
            except Exception as e:  # noqa: BLE001 - an error that does not pickle
                frames.send(replies, (False, RuntimeError(f"{type(e).__name__}: {e}")))
    except BaseException:  # noqa: BLE001 - the parent sees the pipe close and renders itself
        code = 1
    finally:
        os._exit(code)


_live: RenderServer | None = None


def start() -> RenderServer | None:
    """Fork this process's render server (once; module docstring). None when it could not be started."""
    global _live
    if _live is None:
        server = RenderServer()
        _live = server if server.alive else None
    return _live


def current() -> RenderServer | None:
    """The live render server, or None."""
    return _live


def stop() -> None:
    """End and forget this process's render server; harmless without one."""
    global _live
    if _live is not None:
        _live.close()
        _live = None
