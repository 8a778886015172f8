"""The whole-request deadline of the Prometheus source covers connect, redirects, headers, body.

Each attempt is bounded by ``timeout_s`` from its first byte sent to its last byte read,
however the server drips: headers a byte at a time, or a redirect whose body drips. A
range query of one chunk then takes at most ``attempts * timeout_s`` plus the backoff
waits (and a little slack for the watchdog to close the socket); these tests allow
``3 * timeout_s * attempts + 2 s``.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

import pandas as pd
import pytest

from forecaster.prometheus import PrometheusSettings, PrometheusSource, PrometheusUnavailable
from tests.prometheus_server import StubReply, StubServer, matrix_body

T0 = pd.Timestamp("2024-03-01T00:00:00")
STEP = pd.Timedelta(minutes=1)
GOOD = matrix_body([({"pool": "a"}, [(T0.timestamp(), "1.5"), (T0.timestamp() + 60, "2.5")])])
TIMEOUT_S = 1.0
RETRIES = 1
ATTEMPTS = RETRIES + 1
BOUND_S = 3 * TIMEOUT_S * ATTEMPTS + 2.0


def source(url: str) -> PrometheusSource:
    """A source with a 1 s deadline, one retry and no backoff wait."""
    settings = PrometheusSettings(
        url=url, timeout_s=TIMEOUT_S, retries=RETRIES, retry_backoff_s=0.0
    )
    return PrometheusSource(settings)


def fetch(src: PrometheusSource) -> list[float]:
    [s] = src.range("up", T0, T0 + STEP, STEP)
    return s.values.tolist()


def fails_within_the_bound(url: str) -> float:
    """Seconds a fetch from ``url`` took to fail with the usual unavailable error."""
    began = time.monotonic()
    with pytest.raises(PrometheusUnavailable, match=r"did not answer within 1 s after 2 attempt"):
        fetch(source(url))
    elapsed = time.monotonic() - began
    assert elapsed < BOUND_S
    return elapsed


@pytest.mark.slow
def test_headers_dripping_a_byte_every_0_2_s_are_cut_at_the_deadline() -> None:
    # About 100 header bytes at 0.2 s each: 20 s per attempt without the deadline.
    with StubServer(lambda _: StubReply(body=GOOD, header_drip_s=0.2)) as stub:
        fails_within_the_bound(stub.url)
    assert len(stub.requests) == ATTEMPTS


def _redirect_dripping(handler: BaseHTTPRequestHandler) -> StubReply:
    """A 302 whose 60-byte body drips (12 s) to a target that would answer at once."""
    if handler.path.startswith("/moved"):
        return StubReply(body=GOOD)
    return StubReply(302, body=b"x" * 60, drip_s=0.2, headers={"Location": "/moved" + handler.path})


@pytest.mark.slow
def test_a_redirect_whose_body_drips_is_cut_at_the_deadline() -> None:
    with StubServer(_redirect_dripping) as stub:
        fails_within_the_bound(stub.url)
    assert [r["path"][:6] for r in stub.requests] == ["/api/v"] * ATTEMPTS


def _redirect_to_dripping_headers(handler: BaseHTTPRequestHandler) -> StubReply:
    """A quick 302 to a target whose headers drip: the deadline spans both hops."""
    if handler.path.startswith("/moved"):
        return StubReply(body=GOOD, header_drip_s=0.2)
    return StubReply(302, headers={"Location": "/moved" + handler.path})


@pytest.mark.slow
def test_the_deadline_spans_the_redirect_and_the_target() -> None:
    with StubServer(_redirect_to_dripping_headers) as stub:
        fails_within_the_bound(stub.url)


@pytest.mark.slow
def test_a_normal_answer_and_a_quick_redirect_still_work() -> None:
    with StubServer(lambda _: StubReply(body=GOOD)) as stub:
        src = source(stub.url)
        assert fetch(src) == [1.5, 2.5]
        assert fetch(src) == [1.5, 2.5]  # a pooled connection is reused safely

    def quick_redirect(handler: BaseHTTPRequestHandler) -> StubReply:
        if handler.path.startswith("/moved"):
            return StubReply(body=GOOD)
        return StubReply(302, body=b"moved", headers={"Location": "/moved" + handler.path})

    with StubServer(quick_redirect) as stub:
        assert fetch(source(stub.url)) == [1.5, 2.5]


@pytest.mark.slow
def test_an_answer_slower_than_one_deadline_but_quick_per_byte_is_cut() -> None:
    # Every byte arrives well inside any per-read timeout; only the whole-request one cuts.
    with StubServer(lambda _: StubReply(body=GOOD, drip_s=0.02)) as stub:  # ~3 s per attempt
        fails_within_the_bound(stub.url)


def test_a_redirect_loop_is_one_clear_error_not_a_traceback() -> None:
    def loop(handler: BaseHTTPRequestHandler) -> StubReply:
        return StubReply(302, headers={"Location": handler.path})

    with StubServer(loop) as stub:
        began = time.monotonic()
        with pytest.raises(PrometheusUnavailable, match=r"redirected more than 30 times"):
            fetch(source(stub.url))
        assert time.monotonic() - began < BOUND_S
