"""Alerts reach a real HTTP receiver on the loopback; a receiver that is down or slow never fails the night."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from analysis.history import record_summary
from analysis.history.nightly import nightly_step
from analysis.history.notify import NightMessage, body_for, send
from analysis.history.synthetic import SyntheticSeries, simulate_series
from contracts.secrets import mask_config, mask_override, mask_url
from tests.analysis.history.helpers import write_sweep_dir

SECRET_PATH = "/services/T000/B000/s3cr3tT0ken"


class Receiver:
    """A loopback HTTP server that records each POST body; ``fail_first`` answers 503 that many times, ``delay_s``
    sleeps before answering."""

    def __init__(self, fail_first: int = 0, delay_s: float = 0.0):
        self.bodies, self.paths, self.fail_first, self.delay_s = [], [], fail_first, delay_s
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                data = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(outer.delay_s)
                outer.paths.append(self.path)
                if outer.fail_first > 0:
                    outer.fail_first -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                outer.bodies.append(json.loads(data))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{SECRET_PATH}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def regressed(tmp_path, sqlite_url):
    """Seven recorded nights and an eighth, unrecorded, that slows deepep by 10%."""
    inputs = simulate_series(SyntheticSeries(), 8, seed=11, tonight={"deepep.ovl1.dw0": 1.10})
    folders = [write_sweep_dir(tmp_path / "results", n) for n in inputs]
    for d in folders[:-1]:
        record_summary(sqlite_url, d)
    return sqlite_url, folders[-1]


def test_regression_posts_one_plain_json_message_from_the_environment(regressed, monkeypatch, capsys):
    url, sweep = regressed
    with Receiver() as rx:
        monkeypatch.setenv("MOE_SWEEP_NOTIFY_URL", rx.url)
        out = nightly_step(url, sweep, {"url": url, "notify": "env:MOE_SWEEP_NOTIFY_URL",
                                        "page_url": "https://ci.example/history.html"})
    assert out.exit_code == 4 and out.notified is True
    assert len(rx.bodies) == 1 and rx.paths == [SECRET_PATH]
    body = rx.bodies[0]
    assert body["kind"] == "moe-sweep-night" and body["series"] == "nightly/tiny_moe/synthetic"
    assert body["page"] == "https://ci.example/history.html" and body["exit_code"] == 4
    flagged = {(r["variant"], r["metric"]) for r in body["regressions"]}
    assert flagged == {("deepep.ovl1.dw0", "step_time_ms"), ("deepep.ovl1.dw0", "speedup")}
    step = next(r for r in body["regressions"] if r["metric"] == "step_time_ms")
    assert 0.07 < step["change"] < 0.14 and step["interval"][0] < step["tonight"] < step["interval"][1] * 1.0001
    assert all("s3cr3t" not in line for line in out.lines)
    sent = next(line for line in out.lines if line.startswith("alert sent to "))
    assert sent.startswith("alert sent to http://127.0.0.1:") and "/*** (from $MOE_SWEEP_NOTIFY_URL)" in sent


def test_slack_body_and_a_quiet_night_sends_nothing(tmp_path, sqlite_url):
    inputs = simulate_series(SyntheticSeries(), 6, seed=3)
    folders = [write_sweep_dir(tmp_path / "results", n) for n in inputs]
    with Receiver() as rx:
        for d in folders:
            out = nightly_step(sqlite_url, d, {"url": sqlite_url, "notify": rx.url, "notify_format": "slack"})
            assert out.exit_code == 0 and out.notified is None
    assert rx.bodies == []
    msg = NightMessage(series="nightly/m/c", night="2026-11-29", sweep_ids=("s",), exit_code=3,
                       failed=("a2a.ovl1.dw0 repeat 0: failed (nccl_error)",), page="https://x/h.html")
    slack = body_for(msg, "https://hooks.slack.com/services/T/B/X", "auto")
    assert set(slack) == {"text", "blocks"} and "1 failed run(s)" in slack["text"]
    assert slack["blocks"][0]["type"] == "section" and "nccl_error" in slack["blocks"][1]["text"]["text"]
    assert set(body_for(msg, "https://alerts.example/x", "auto")) >= {"kind", "failed", "page"}


def test_receiver_down_or_slow_is_a_warning_after_retries(regressed):
    url, sweep = regressed
    with Receiver(fail_first=2) as rx:  # two 503s, then delivered on the third attempt
        res = send(NightMessage(series="s", night="n", sweep_ids=(), exit_code=4), rx.url, mask_url(rx.url),
                   sleep=lambda s: None)
    assert res.sent and res.attempts == 3 and len(rx.bodies) == 1
    with Receiver(delay_s=1.5) as rx:
        t0 = time.monotonic()
        res = send(NightMessage(series="s", night="n", sweep_ids=(), exit_code=4), rx.url, mask_url(rx.url),
                   timeout_s=0.3, sleep=lambda s: None)
        # the read timeout or the deadline over the whole answer, whichever comes first: both are timeout_s
        assert not res.sent and res.attempts == 3 and ("ReadTimeout" in res.warning or "TimeoutError" in res.warning)
        assert time.monotonic() - t0 < 3 and "s3cr3t" not in res.warning
    with Receiver() as rx:
        dead = rx.url
    out = nightly_step(url, sweep, {"url": url, "notify": dead, "notify_timeout_s": 0.5})
    assert out.exit_code == 4 and out.notified is False  # the verdict stands
    warning = next(line for line in out.lines if "not delivered" in line)
    assert "http://127.0.0.1:" in warning and "/***" in warning and "s3cr3t" not in warning


def test_the_webhook_url_is_masked_in_config_and_overrides():
    url = "https://hooks.slack.com/services/T000/B000/s3cr3tT0ken"
    assert mask_url(url) == "https://hooks.slack.com/***"
    cfg = mask_config({"history": {"notify": url, "url": "sqlite:///x.db"}})
    assert cfg["history"] == {"notify": "https://hooks.slack.com/***", "url": "sqlite:///x.db"}
    assert mask_config({"history": {"notify": "env:MOE_SWEEP_NOTIFY_URL"}})["history"]["notify"] == \
        "env:MOE_SWEEP_NOTIFY_URL"
    assert mask_override(f"history.notify={url}") == "history.notify=https://hooks.slack.com/***"
    assert mask_override("history.notify=env:HOOK") == "history.notify=env:HOOK"


def test_masked_or_unset_notify_is_a_warning_not_a_failure(regressed, monkeypatch):
    url, sweep = regressed
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    out = nightly_step(url, sweep, {"url": url, "notify": "env:NOPE_NOT_SET"})
    assert out.exit_code == 4 and out.notified is False
    assert any("NOPE_NOT_SET is not set" in line for line in out.lines)
    out = nightly_step(url, sweep, {"url": url, "notify": "https://hooks.slack.com/***"})
    assert out.notified is False and any("stored masked" in line for line in out.lines)
