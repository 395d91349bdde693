"""Tell people about a night that regressed or failed: one HTTP POST per such night to ``history.notify``.

Bodies:

* Slack incoming webhook (``notify_format=slack``, or ``auto`` with a host under ``hooks.slack.com``):
  ``{"text": <one-line fallback>, "blocks": [section mrkdwn ...]}``, the layout Slack documents for incoming
  webhooks (https://api.slack.com/messaging/webhooks; Block Kit "section" blocks with ``mrkdwn`` text, at most
  3000 characters each).
* Any other receiver (``json``, or ``auto`` elsewhere): :meth:`NightMessage.to_json`, a plain JSON object
  (``kind: "moe-sweep-night"``, series, night, exit code, failed runs, regressions with change and interval,
  page link).

A receiver that is down, refuses, or is slow never fails the night: each attempt has ``timeout_s``; connection
errors, timeouts, 429 and 5xx are retried (3 attempts, 0.5 s then 1 s apart, Retry-After honoured up to 5 s);
then :func:`send` returns a :class:`NotifyResult` with ``sent=False`` and a warning that names the receiver as
``scheme://host/***`` only (the URL is a secret). The HTTP client is ``requests``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from analysis.history.outlets import within
from analysis.history.records import STEP_TIME, NightReport

ATTEMPTS = 3
BACKOFF_S = (0.5, 1.0)
MAX_RETRY_AFTER_S = 5.0
_SLACK_BLOCK_CHARS = 3000


@dataclass(frozen=True, kw_only=True)
class Change:
    """One flagged (variant, metric): tonight's value, the baseline, the relative change and tonight's interval."""

    variant: str
    metric: str
    tonight: float | None
    baseline: float | None
    change: float | None
    interval: tuple[float, float] | None = None
    parts: str = ""

    def describe(self) -> str:
        unit = " ms" if self.metric == STEP_TIME else "x"
        iv = "" if self.interval is None else f", interval [{self.interval[0]:.4g}, {self.interval[1]:.4g}]{unit}"
        change = "" if self.change is None else f" {self.change:+.1%}"
        what = "step time" if self.metric == STEP_TIME else "speedup"
        line = (f"{self.variant} {what}{change}: {_g(self.tonight)}{unit} vs baseline {_g(self.baseline)}{unit}{iv}")
        return line + (f"; parts moved: {self.parts}" if self.parts else "")


def _g(v: float | None) -> str:
    return "?" if v is None else f"{v:.4g}"


@dataclass(frozen=True, kw_only=True)
class NightMessage:
    """What one alert says. ``failed``: "variant repeat r: status (reason)" of each run that did not succeed."""

    series: str
    night: str
    sweep_ids: tuple[str, ...]
    exit_code: int
    regressions: tuple[Change, ...] = ()
    failed: tuple[str, ...] = ()
    page: str | None = None
    not_recorded: str | None = None
    """why the night could not be recorded (the history database refused it, or was not reached); None when it was"""

    @property
    def headline(self) -> str:
        if self.not_recorded:
            return f"Nightly {self.series} {self.night}: not recorded in the history: {self.not_recorded} " \
                   f"(exit {self.exit_code})"
        what = []
        if self.regressions:
            what.append(f"{len(self.regressions)} regression(s)")
        if self.failed:
            what.append(f"{len(self.failed)} failed run(s)")
        return f"Nightly {self.series} {self.night}: {' and '.join(what) or 'nothing flagged'} (exit {self.exit_code})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "moe-sweep-night", "schema_version": 1, "series": self.series, "night": self.night,
                "sweep_ids": list(self.sweep_ids), "exit_code": self.exit_code, "headline": self.headline,
                "regressions": [{"variant": c.variant, "metric": c.metric, "tonight": c.tonight,
                                 "baseline": c.baseline, "change": c.change,
                                 "interval": list(c.interval) if c.interval else None, "parts_moved": c.parts}
                                for c in self.regressions],
                "failed": list(self.failed), "page": self.page, "not_recorded": self.not_recorded}

    def to_slack(self) -> dict[str, Any]:
        lines = [f"• {c.describe()}" for c in self.regressions] + [f"• failed: {f}" for f in self.failed]
        blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{self.headline}*"}}]
        chunk = ""
        for line in lines:
            if len(chunk) + len(line) + 1 > _SLACK_BLOCK_CHARS:
                blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": chunk}})
                chunk = ""
            chunk = f"{chunk}\n{line}" if chunk else line[:_SLACK_BLOCK_CHARS]
        if chunk:
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": chunk}})
        if self.page:
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"Trend page: {self.page}"}]})
        return {"text": self.headline + (f" {self.page}" if self.page else ""), "blocks": blocks}


def message_for(report: NightReport | None, *, series: str, night: str, exit_code: int,
                failed: tuple[str, ...] = (), page: str | None = None) -> NightMessage:
    """The alert of a night from its judgement (None when the night could not be judged) and its failed runs."""
    changes = []
    for v in report.variants if report else ():
        for j in v.judgements:
            if j.verdict != "regression":
                continue
            parts = "; ".join(p.describe() for p in v.parts_moved) if j.metric == STEP_TIME else ""
            changes.append(Change(variant=v.variant, metric=j.metric, tonight=j.tonight, baseline=j.baseline,
                                  change=j.change, interval=j.interval, parts=parts))
    return NightMessage(series=series, night=night, sweep_ids=report.sweep_ids if report else (),
                        exit_code=exit_code, regressions=tuple(changes), failed=failed, page=page)


@dataclass(frozen=True, kw_only=True)
class NotifyResult:
    """``sent``: the receiver answered 2xx. ``attempts`` made, the last ``status`` (None: no answer), ``warning``
    (empty when sent), ``receiver`` shown as ``scheme://host/***``."""

    sent: bool
    attempts: int
    receiver: str
    status: int | None = None
    warning: str = ""
    log: tuple[str, ...] = field(default=())


def body_for(message: NightMessage, url: str, fmt: str) -> dict[str, Any]:
    """The JSON body for ``url``: Slack's for ``slack`` or ``auto`` with a hooks.slack.com host, else plain."""
    host = (urlsplit(url).hostname or "").lower()
    slack = fmt == "slack" or (fmt == "auto" and (host == "hooks.slack.com" or host.endswith(".slack.com")))
    return message.to_slack() if slack else message.to_json()


def send(message: NightMessage, url: str, shown: str, *, fmt: str = "auto", timeout_s: float = 5.0,
         sleep: Callable[[float], None] = time.sleep) -> NotifyResult:
    """POST the message; never raises for the receiver's sake (see the module docstring for the retry rule)."""
    import requests

    body = body_for(message, url, fmt)
    log: list[str] = []
    status = None
    for attempt in range(1, ATTEMPTS + 1):
        wait = BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)]
        try:
            resp = within(lambda: requests.post(url, json=body, timeout=timeout_s, allow_redirects=False), timeout_s)
            status = resp.status_code
            if 200 <= status < 300:
                return NotifyResult(sent=True, attempts=attempt, receiver=shown, status=status, log=tuple(log))
            log.append(f"attempt {attempt}: HTTP {status}")
            if status != 429 and status < 500:
                break  # the receiver refused this body or URL: asking again changes nothing
            after = resp.headers.get("Retry-After")
            if after and after.strip().isdigit():
                wait = min(float(after), MAX_RETRY_AFTER_S)
        except (requests.RequestException, TimeoutError) as e:
            status = None
            log.append(f"attempt {attempt}: {type(e).__name__}")
        if attempt < ATTEMPTS:
            sleep(wait)
    why = "; ".join(log)
    return NotifyResult(sent=False, attempts=len(log), receiver=shown, status=status, log=tuple(log),
                        warning=f"the alert was not delivered to {shown} ({why}); the night is recorded and its exit "
                                f"code stands")
