"""A fake engine ``/metrics`` endpoint on 127.0.0.1 for the counters source's tests.

:class:`MetricsPage` serves ``page`` (Prometheus text the test sets and changes as
it likes) over real HTTP from a thread; ``page = None`` answers HTTP 501 like a
``llama-server`` started without ``--metrics``; :meth:`MetricsPage.close` (or
leaving the ``with`` block) shuts the port, like a server that went away.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from typing import Any

from tests.support.net import free_port

__all__ = ["MetricsPage"]


class MetricsPage:
    """Serves ``self.page`` at ``self.url``; each GET takes ``queue[0]`` first when the queue is not empty.

    Args:
        page: The text served (None: HTTP 501).
    """

    def __init__(self, page: str | None = "") -> None:
        self.page: str | None = page
        self.queue: list[str | None] = []
        self.hits = 0
        self.on_get: Callable[[], None] | None = None
        self.port = free_port()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.hits += 1
                if owner.on_get is not None:
                    owner.on_get()
                text = owner.queue.pop(0) if owner.queue else owner.page
                if text is None:
                    body = b'{"error":{"code":501,"message":"This server does not support metrics endpoint."}}'
                    self.send_response(501)
                else:
                    body = text.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-page", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> MetricsPage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
