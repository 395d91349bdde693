"""A validate process whose libraries are already imported: a fork server for the local validate batch (issue 17).

The local validate job (:mod:`experiments.payload.validate_runs`) spends most of its life importing torch and
Megatron-Core (4-6 s on a CPU login node) after the conductor has spent 2-3 s composing, planning and importing
NeMo-Run. The conductor therefore starts this server as soon as the plan says the sweep will be validated locally
(``launchers.preload.Preloader``); it imports what the checks use while the conductor works, then waits for the
job.

Usage (by the conductor only)::

    python -m experiments.payload.preload --fd N --parent PID [--accept-s S]

``--fd``: a listening ``AF_UNIX`` stream socket the conductor bound (so the path exists before the job can ask);
``--parent``: the conductor's PID (the server ends when it does).

Protocol, one connection, one run of ``validate_runs``:

1. the job (``validate_runs.main``, which finds ``"preload": <socket path>`` in its RUNS_JSON) connects and sends an
   8-byte length with its stdin, stdout and stderr (``SCM_RIGHTS``), then that many bytes of JSON: ``argv``,
   ``cwd``, ``env``, ``sys_path`` (its interpreter's ``sys.path``) and ``executable``;
2. the server answers one JSON line: ``{"refused": why}`` when the job's interpreter would import other files
   (another ``sys.path`` or interpreter: then the job validates in its own process, as without a server), else
   ``{"pid": N}`` after forking a worker that takes the job's descriptors, folder, environment and arguments and
   runs ``validate_runs.main`` (the one process that validates every run of the sweep);
3. when the worker ends: ``{"exit": code}``. The job exits with that code. A signal the job gets (TERM, INT, HUP)
   is passed on to the worker; when the job's connection closes early (it was killed), the worker is ended
   (TERM, then KILL after ``KILL_AFTER_S``).

The server serves one connection and exits; it also exits after ``--accept-s`` seconds (s) without one, or when
the conductor's process ends. A job that cannot reach it (no server, refused, the server gone before the fork)
runs as before, in its own process, so the server only ever saves time.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import Any

from contracts.procexit import exit_without_teardown
from experiments.payload.preload_client import HEADER, pidfd

ACCEPT_S = 300.0  # s the server waits for the job before it exits
KILL_AFTER_S = 5.0  # s between TERM and KILL of a worker whose job has gone
_START_PATH = list(sys.path)  # before the imports: some libraries add to sys.path as they load


def warm() -> None:
    """Import what :func:`experiments.payload.validate_runs.run_one` imports (torch, Megatron-Core's config
    classes, the validation modules). A missing library is left for the worker to report, as the job would. What
    the libraries print while they load (warnings on stderr, from Python and from C++) is captured and written
    by the worker where the job's own import would have printed it: into the first run's log
    (:func:`experiments.payload.mcore_check.load_core`)."""
    import tempfile

    from experiments.payload import mcore_check, validate  # noqa: F401
    from experiments.payload.errors import PayloadError

    with tempfile.TemporaryFile() as out:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            mcore_check.load_core()
        except PayloadError:
            pass
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, target in zip(saved, (1, 2), strict=True):
                os.dup2(fd, target)
                os.close(fd)
        out.seek(0)
        mcore_check.replay_import_output(out.read().decode("utf-8", "replace"))


def serve(listener: socket.socket, parent: int, accept_s: float = ACCEPT_S) -> int:
    """Serve one job on ``listener`` (module docstring); returns this process's exit code (0)."""
    warm()
    sys.stdout.flush()
    sys.stderr.flush()
    watched = [listener]
    parent_fd = pidfd(parent)
    if parent_fd is not None:
        watched.append(parent_fd)
    ready, _, _ = select.select(watched, [], [], accept_s)
    if listener not in ready:
        return 0  # no job came, or the conductor ended
    conn, _ = listener.accept()
    listener.close()
    with conn:
        request, fds = _receive(conn)
        if request is None:
            return 0
        why = _mismatch(request)
        if why:
            _send(conn, {"refused": why})
            _close(fds)
            return 0
        pid = os.fork()
        if pid == 0:
            _worker(request, fds, [conn.fileno(), *([parent_fd] if parent_fd is not None else [])])  # never returns
        _close(fds)
        _send(conn, {"pid": pid})
        _send(conn, {"exit": _wait(pid, conn)})
    return 0


def _receive(conn: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The request and the job's three descriptors; (None, []) when the job closed before sending them."""
    try:
        head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
        if len(head) != HEADER.size or len(fds) != 3:
            _close(fds)
            return None, []
        (size,) = HEADER.unpack(head)
        body = b""
        while len(body) < size:
            part = conn.recv(size - len(body))
            if not part:
                _close(fds)
                return None, []
            body += part
        return json.loads(body), fds
    except (OSError, ValueError):
        return None, []


def _mismatch(request: dict[str, Any]) -> str:
    """Why this process's imports are not the ones the job's interpreter would make ("" when they are)."""
    if os.path.realpath(request.get("executable", "")) != os.path.realpath(sys.executable):
        return f"the job runs {request.get('executable')}, the server {sys.executable}"
    if [os.path.realpath(p) for p in request.get("sys_path", [])] != [os.path.realpath(p) for p in _START_PATH]:
        return "the job's sys.path differs from the server's"
    return ""


def _send(conn: socket.socket, doc: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(doc).encode() + b"\n")
    except OSError:
        pass  # the job has gone: _wait has ended the worker


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _worker(request: dict[str, Any], fds: list[int], inherited: list[int]) -> None:
    """In the forked child: become the job (descriptors, folder, environment, arguments), validate, exit.
    ``inherited``: the server's descriptors, closed here."""
    code = 1
    try:
        _close(inherited)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        _close(fds)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        from experiments.payload import validate_runs

        code = validate_runs.main(sys.argv[1:], delegate=False)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker must exit with a code, whatever happened
        traceback.print_exc()
        code = 1
    finally:
        exit_without_teardown(code)


def _wait(pid: int, conn: socket.socket) -> int:
    """The worker's exit code (128 + N for signal N); ends it when the job's connection closes first."""
    fd = pidfd(pid)
    if fd is not None:
        while True:
            ready, _, _ = select.select([fd, conn], [], [])
            if fd in ready:
                break
            if not conn.recv(1, socket.MSG_PEEK):  # EOF: the job was killed
                _end(pid)
                break
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
        fd = os.pidfd_open(pid)
        ready, _, _ = select.select([fd], [], [], KILL_AFTER_S)
        os.close(fd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.payload.preload", description=__doc__.split("\n")[0])
    ap.add_argument("--fd", type=int, required=True, help="the listening socket's descriptor")
    ap.add_argument("--parent", type=int, required=True, help="the conductor's PID")
    ap.add_argument("--accept-s", type=float, default=ACCEPT_S, help=f"s to wait for the job (default {ACCEPT_S})")
    a = ap.parse_args(argv)
    return serve(socket.socket(fileno=a.fd), a.parent, a.accept_s)


if __name__ == "__main__":
    exit_without_teardown(main())  # no teardown of torch and Megatron-Core's thousands of modules (seconds here)
