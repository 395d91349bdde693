"""The conductor's side of the validate fork server (``experiments.payload.preload``; issue 17).

A local validate sweep validates every run in one job (:mod:`launchers.validate_batch`), which used to import torch
and Megatron-Core (4-6 s on a CPU) only once NeMo-Run had started it, 2-3 s into the command. :func:`start` starts
the server as soon as the plan is known, so those imports run on another core while the conductor writes the plan
and imports NeMo-Run; the validate job then hands its runs to a worker forked from the server (the job itself
still is the NeMo-Run job: its log, exit code and cancellation are unchanged). One server per sweep, used by the
first validate batch only; any failure on the way leaves the job to validate in its own process.

The socket lives in a private temporary folder (``moe-preload-*``, mode 0700), bound here before the server
starts, so the job never finds the path missing; :func:`stop` removes it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

SERVER = "experiments.payload.preload"


class Preloader:
    """One running server: ``path`` is its socket; ``proc`` its process (started with this interpreter in
    ``cwd``, default this process's folder, so that its ``sys.path`` is the job's); ``accept_s``: how long (s) it
    waits for the job (default the server's ``ACCEPT_S``).

    Raises:
        OSError: the socket or the process cannot be made (nothing is left behind).
    """

    def __init__(self, cwd: str | os.PathLike[str] | None = None, accept_s: float | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="moe-preload-"))
        self.path = str(self.folder / "sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            listener.listen(1)
            fd = listener.fileno()
            with open(self.folder / "server.log", "wb") as log:
                wait = ["--accept-s", str(accept_s)] if accept_s is not None else []
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", SERVER, "--fd", str(fd), "--parent", str(os.getpid()), *wait], pass_fds=[fd],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd or os.getcwd())
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            listener.close()  # the server holds its own copy
        self.taken = False

    def take(self) -> str | None:
        """The socket path for the first validate batch; None after that or when the server has ended."""
        if self.taken or self.proc.poll() is not None:
            return None
        self.taken = True
        return self.path

    def stop(self) -> None:
        """End a server that no job has asked (one that serves a job ends with it) and remove the folder."""
        if not self.taken and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_live: Preloader | None = None


def start(cwd: str | os.PathLike[str] | None = None) -> Preloader | None:
    """Start this process's server (once); None when it cannot be started (then nothing is lost: the job imports
    its libraries itself)."""
    global _live
    if _live is None and sys.platform == "linux":
        try:
            _live = Preloader(cwd)
        except OSError:
            _live = None
    return _live


def take() -> str | None:
    """The live server's socket path for one validate batch (:meth:`Preloader.take`), or None."""
    return _live.take() if _live is not None else None


def stop() -> None:
    """Stop and forget this process's server (:meth:`Preloader.stop`); harmless without one."""
    global _live
    if _live is not None:
        _live.stop()
        _live = None
