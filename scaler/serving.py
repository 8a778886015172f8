"""The bounded HTTP server behind both of tiercast's endpoints: the service's /metrics,
/healthz and /readyz (``scaler.service.telemetry``) and the node agent's /metrics and
/state (``scaler.agent.node``). A base module: it imports nothing from ``scaler``.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Any

MAX_CONNECTIONS = 32
"""Most connections served at once by the metrics and agent endpoints; more are closed."""


IDLE_TIMEOUT_S = 10.0
"""A connection that sends nothing for this long is closed (a scrape takes milliseconds)."""


class BoundedHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server with a cap on concurrent connections.

    ``ThreadingHTTPServer`` starts a thread per connection with no limit, so idle
    sockets pile up threads; here a connection past :data:`MAX_CONNECTIONS` is
    closed at once, and handlers built on :class:`QuietHandler` time out idle reads.
    """

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: Any, limit: int = MAX_CONNECTIONS
    ) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
