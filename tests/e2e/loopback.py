"""Loopback HTTP servers for the end-to-end tests: a webhook receiver that keeps what it is sent, and a server that
trickles its answer one byte at a time. Their fixtures are in tests/e2e/conftest.py."""

from __future__ import annotations

import json
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """A loopback HTTP server that keeps each POSTed JSON body."""

    def __init__(self) -> None:
        bodies: list[dict] = []
        self.bodies = bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Trickle(socketserver.ThreadingTCPServer):
    """Answers every request with a 200 whose headers and body come one byte every ``gap_s`` seconds, forever."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, gap_s: float = 0.2):
        self.gap_s, self.stop = gap_s, threading.Event()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.recv(65536)
                answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                answer += b" " * 100000
                for i in range(len(answer)):
                    if outer.stop.is_set():
                        return
                    try:
                        self.request.sendall(answer[i:i + 1])
                    except OSError:
                        return
                    time.sleep(outer.gap_s)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()
