"""Settings of the places a night is told: the alert webhook (``history.notify``) and MLflow (``history.mlflow``).

``history.notify`` is a secret: a Slack incoming-webhook URL carries its credential in its path. It is given either
as ``env:NAME`` (read from the environment variable ``NAME`` when the alert is sent, the recommended form: nothing
secret is written anywhere) or as the URL itself; a URL is only ever shown as ``scheme://host/***``
(:func:`contracts.secrets.mask_url`), and the manifest stores it that way, so a detached sweep's collect needs the
``env:`` form (or the URL again on its command line).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from analysis.history.errors import HistoryInputError
from contracts.secrets import MASK, mask_url

NOTIFY_FORMATS = ("auto", "slack", "json")
ENV_PREFIX = "env:"


@dataclass(frozen=True, kw_only=True)
class Outlets:
    """Where the night is told. ``notify``: ``env:NAME``, a URL, or None; ``notify_format``: auto (Slack's body for
    hooks.slack.com, else plain JSON), slack or json; ``notify_timeout_s``: per attempt (s); ``page_url``: the link
    to the trend page in the message (default: the page's file path); ``mlflow``: a tracking URI (http(s)://) or
    None; ``mlflow_experiment``: the MLflow experiment (default ``moe-sweep/<preset>``); ``mlflow_timeout_s``: the
    whole export, every request included (s). Both timeouts bound the whole of an answer (:func:`within`), not one
    read of it."""

    notify: str | None = None
    notify_format: str = "auto"
    notify_timeout_s: float = 5.0
    page_url: str | None = None
    mlflow: str | None = None
    mlflow_experiment: str | None = None
    mlflow_timeout_s: float = 120.0

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> Outlets:
        """Check and build from the ``history`` group. Raises :class:`HistoryInputError` naming the bad value."""
        v = dict(values or {})
        notify, fmt = v.get("notify"), v.get("notify_format", "auto")
        if notify is not None:
            if not isinstance(notify, str) or not notify:
                raise HistoryInputError(f"history.notify={notify!r} must be env:VARIABLE or an http(s) URL")
            if not notify.startswith(ENV_PREFIX):
                _check_http(notify, "history.notify", shown=mask_url(notify))
            elif not notify[len(ENV_PREFIX):].isidentifier():
                raise HistoryInputError(f"history.notify={notify!r}: after env: comes the name of an environment "
                                        f"variable, e.g. env:MOE_SWEEP_NOTIFY_URL")
        if fmt not in NOTIFY_FORMATS:
            raise HistoryInputError(f"history.notify_format={fmt!r} is not valid; valid: {', '.join(NOTIFY_FORMATS)}")
        timeout = _seconds(v, "notify_timeout_s", 5.0, 120)
        export_timeout = _seconds(v, "mlflow_timeout_s", 120.0, 3600)
        mlflow = v.get("mlflow")
        if mlflow is not None:
            if not isinstance(mlflow, str):
                raise HistoryInputError(f"history.mlflow={mlflow!r} must be an MLflow tracking URI, e.g. "
                                        f"http://127.0.0.1:5000")
            _check_http(mlflow, "history.mlflow", shown=mask_url(mlflow))
        for key in ("page_url", "mlflow_experiment"):
            if v.get(key) is not None and not isinstance(v[key], str):
                raise HistoryInputError(f"history.{key}={v[key]!r} must be a string")
        return cls(notify=notify, notify_format=fmt, notify_timeout_s=timeout, page_url=v.get("page_url"),
                   mlflow=mlflow, mlflow_experiment=v.get("mlflow_experiment"), mlflow_timeout_s=export_timeout)

    def notify_url(self) -> tuple[str | None, str]:
        """The webhook URL to post to and how to show it; (None, why) when it cannot be had (variable unset, or
        the URL was stored masked)."""
        if self.notify is None:
            return None, "history.notify is not set"
        if self.notify.startswith(ENV_PREFIX):
            name = self.notify[len(ENV_PREFIX):]
            url = os.environ.get(name)
            if not url:
                return None, f"history.notify={self.notify}: the environment variable {name} is not set here"
            try:
                _check_http(url, f"{name}", shown=mask_url(url))
            except HistoryInputError as e:
                return None, str(e)
            return url, f"{mask_url(url)} (from ${name})"
        if self.notify.endswith(MASK):
            return None, (f"history.notify={self.notify} was stored masked (a webhook URL is a secret); give it as "
                          f"history.notify=env:VARIABLE, or pass the URL again on this command line")
        return self.notify, mask_url(self.notify)


def _seconds(values: dict[str, Any], key: str, default: float, most: float) -> float:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= most:
        raise HistoryInputError(f"history.{key}={value!r} must be a number of seconds in (0, {most:g}]")
    return float(value)


def _check_http(url: str, key: str, shown: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HistoryInputError(f"{key}={shown!r} must be an http:// or https:// URL with a host")


def within[T](call: Callable[[], T], seconds: float) -> T:
    """``call()`` with a deadline over the whole of it, in seconds.

    An HTTP client's timeout covers one socket read, so a server that trickles its answer (one byte a second)
    never trips it; the call runs in a daemon thread instead, and the caller stops waiting after ``seconds``
    (the abandoned thread ends with the process). Returns what ``call`` returned; re-raises what it raised.

    Raises:
        TimeoutError: ``call`` had not returned after ``seconds``.
    """
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box.append((False, e))

    worker = threading.Thread(target=run, name="history-outlet", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if not box:
        raise TimeoutError(f"no complete answer within {seconds:g} s")
    ok, value = box[0]
    if not ok:
        raise value
    return value
