"""Reading history from a Prometheus server (on prometheus-api-client).

:class:`PrometheusSource` implements :class:`forecaster.sources.MetricSource`:

* **Grid.** ``start`` and ``end`` are floored to a multiple of ``step`` since the
  epoch, so every cycle (and every chunk) evaluates the query on the same
  timestamps and series from different cycles line up.
* **Chunks.** Prometheus refuses a range query with more than 11,000 points per
  series. A long window is split into chunks of at most ``max_points`` grid
  points; chunk ``i`` covers points ``i*max_points .. (i+1)*max_points - 1``, so
  consecutive chunks neither overlap nor leave a hole, and the stitched series is
  checked for duplicate timestamps anyway (the later chunk wins).
* **Identity.** One :class:`~forecaster.sources.LabelledSeries` per label set;
  the labels (``__name__`` included when the query keeps it) are the identity.
* **Failures.** Each request has a timeout. Connection failures, timeouts, HTTP
  429 and 5xx are retried up to ``retries`` times with exponential backoff
  (``retry_backoff_s * 2**attempt``, capped at 30 s; :mod:`forecaster.retrying`), then raise
  :class:`PrometheusUnavailable` (a :class:`~forecaster.errors.TemporaryError`:
  exit 1, the next cycle may succeed). Other 4xx answers are not retried; an
  invalid query (HTTP 400 ``bad_data``) raises :class:`PrometheusQueryError`
  (a :class:`~forecaster.errors.BadInputError`: fix the config, exit 2). A redirect
  loop is one :class:`PrometheusUnavailable`, not retried.
* **Auth and transport.** A bearer token read from a file at each source
  construction (so a rotated Kubernetes secret mount is picked up), or basic auth
  with the password read from a file; a custom CA bundle; TLS verification is on
  unless turned off. A token or password is refused over plain ``http://``
  (anyone on the path reads it) unless ``allow_insecure`` says so. No credential
  is ever put in a log line or an error: errors name the URL with any
  ``user:password@`` removed, never echo headers, and every secret value read (the
  token, the password, a password in the URL, and the ``Basic`` header's base64 made
  of them) is remembered (:mod:`forecaster.secrets`) so redaction masks it wherever
  it shows up, a server's echo included.
* **Bounds.** Each attempt has one deadline for the whole exchange
  (``timeout_s``), not per socket read: it starts before the first byte is sent and
  covers connecting, every redirect hop (its body included), the headers and the
  body, so a server that drips a byte at a time, in its headers or in a redirect,
  cannot hold a cycle. A watchdog shuts the attempt's sockets when the deadline
  passes (a blocked header read cannot be given a deadline otherwise). One chunk's
  query therefore takes at most ``(retries + 1) * timeout_s`` plus the backoff waits
  (``sum(min(30, retry_backoff_s * 2**n) for n < retries)``), and a range of several
  chunks that many times its chunks. An answer over ``max_response_bytes`` or with more
  than ``max_series`` series is refused with one line; a sample that is not a
  ``[number, "number"]`` pair is a one-line error, not a traceback.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import logging
import math
import re
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np
import pandas as pd
import requests
import urllib3
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import InsecureRequestWarning
from urllib3.util import retry as urllib3_retry

from forecaster.errors import BadInputError, TemporaryError
from forecaster.retrying import Attempts, Retry, RetryPolicy
from forecaster.secrets import remember
from forecaster.sources import LabelledSeries

log = logging.getLogger(__name__)

MAX_POINTS_PER_QUERY = 11_000
"""Prometheus's hard cap on points per series in one range query."""
MAX_BACKOFF_S = 30.0
_RETRY_STATUS = {429, 500, 502, 503, 504}


class PrometheusUnavailable(TemporaryError):
    """Prometheus could not be reached or did not answer usefully; retry next cycle."""


class PrometheusQueryError(BadInputError):
    """Prometheus refused the query itself (bad PromQL, bad parameters); fix the config."""


class PrometheusAnswerTooLarge(BadInputError):
    """The answer is over the size or series cap; narrow the query or raise the cap."""


class _Unanswered(Exception):
    """No useful answer this time (unreachable, too slow, 429 or 5xx): the one error retried.

    Its text is what went wrong, worded to follow "Prometheus at URL".
    """


class _TooLarge(requests.exceptions.RequestException):
    """Raised inside the session when the body passes ``max_response_bytes``."""


class _Deadline:
    """One attempt's deadline: the sockets it used, shut when the deadline passes.

    A :class:`threading.Timer` fires at the deadline and shuts down (``SHUT_RDWR``)
    every socket the attempt connected or sent on, so a read blocked on dripping
    headers or a dripping redirect body returns at once; the session then reports a
    timeout. Sockets rather than connections are kept because a connection hands its
    socket over to the response when the server closes after answering. :meth:`finish`
    stops the watchdog; a lock keeps it from shutting a socket after the attempt has
    ended (a pooled connection is then left alone).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.passed = False
        self._sockets: list[object] = []
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def remaining_s(self) -> float:
        """Seconds left, never below zero."""
        return max(self.at - time.monotonic(), 0.0)

    def expired(self) -> bool:
        """Whether the deadline has passed (watchdog fired or clock past it)."""
        return self.passed or time.monotonic() >= self.at

    def watch(self, sock: object) -> None:
        """Shut ``sock`` (a connection's socket, if it has one yet) when the deadline passes."""
        if sock is None:
            return
        with self._lock:
            if not any(sock is known for known in self._sockets):
                self._sockets.append(sock)

    def clamped(self, timeout: object) -> float:
        """``timeout`` (a socket timeout, maybe unset) cut to the time left.

        Raises :class:`TimeoutError` when none is left, so no new hop starts.
        """
        left = self.remaining_s()
        if left <= 0 or self.passed:
            raise TimeoutError("whole-request deadline passed")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            return min(float(timeout), left)
        return left

    def finish(self) -> None:
        """Stop the watchdog; nothing is shut after this returns."""
        with self._lock:
            self._done = True
            self._sockets.clear()
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.passed = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: object) -> None:
    """Shut a socket down for reading and writing, waking any thread blocked on it.

    ``socket.socket.shutdown`` is called unbound so that a TLS socket's state is not
    touched from the watchdog's thread; a TLS-in-TLS transport is shut through the
    socket under it.
    """
    if not isinstance(sock, socket.socket):
        sock = getattr(sock, "socket", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


_CURRENT_DEADLINE: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar(
    "prometheus_deadline", default=None
)
"""The deadline of the attempt running in this thread, read by the connections below."""


class _DeadlineConnectionMixin:
    """A urllib3 connection that joins the current attempt's deadline.

    Connecting and sending (a new or a pooled connection, the first hop or a redirect's)
    cut the connection's socket timeout to the time left, so even the TCP and TLS
    handshakes end by the deadline, and register its socket with the watchdog.
    """

    timeout: Any
    sock: Any

    def _join_deadline(self) -> None:
        deadline = _CURRENT_DEADLINE.get()
        if deadline is not None:
            self.timeout = deadline.clamped(self.timeout)
            deadline.watch(self.sock)

    def connect(self) -> None:
        self._join_deadline()
        super().connect()  # type: ignore[misc]
        self._join_deadline()  # the new socket

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._join_deadline()
        super().request(*args, **kwargs)  # type: ignore[misc]


class _DeadlineHTTPConnection(_DeadlineConnectionMixin, HTTPConnection):
    """Plain HTTP under the attempt's deadline."""


class _DeadlineHTTPSConnection(_DeadlineConnectionMixin, HTTPSConnection):
    """HTTPS under the attempt's deadline."""


class _DeadlineHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _DeadlineHTTPConnection


class _DeadlineHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _DeadlineHTTPSConnection


_DEADLINE_POOLS = {"http": _DeadlineHTTPConnectionPool, "https": _DeadlineHTTPSConnectionPool}


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter over connections that keep the attempt's deadline.

    Direct connections and those through an HTTP(S) proxy use the deadline's
    connection classes; a SOCKS proxy keeps its own (only the body read is bounded then).
    """

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        # A new dict: urllib3 shares its module-level one between managers.
        self.poolmanager.pool_classes_by_scheme = dict(_DEADLINE_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = dict(_DEADLINE_POOLS)
        return manager


class _BoundedSession(requests.Session):
    """A session whose every request has one deadline for the whole exchange and a size cap.

    requests' ``timeout`` bounds each socket read, so a server sending a byte
    every few seconds holds a request for ever. Here the deadline starts before
    anything is sent and covers connecting, redirects, headers and body: the
    connections cut their timeouts to the time left and a watchdog (:class:`_Deadline`)
    shuts their sockets when it passes; the body is read with ``read1`` (returns as
    soon as any bytes arrive), the socket's timeout set to the time left before every
    read. Whatever the transport then raises, a request past its deadline fails
    with :class:`requests.exceptions.ReadTimeout`. The cap applies to the decoded body,
    so a compressed bomb is cut off too.
    """

    def __init__(self, deadline_s: float, max_bytes: int) -> None:
        super().__init__()
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes

    def mount(self, prefix: str, adapter: Any) -> None:
        """Mount ``adapter``, a plain :class:`HTTPAdapter` swapped for the deadline's.

        The Prometheus client mounts its own plain adapter (with its urllib3 retry
        setting) over the server's URL; the swap keeps that setting.
        """
        if type(adapter) is HTTPAdapter:
            adapter = _DeadlineAdapter(max_retries=adapter.max_retries)
        super().mount(prefix, adapter)

    def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        # Every hop (redirects included) passes here: none starts after the deadline.
        deadline = _CURRENT_DEADLINE.get()
        if deadline is not None and deadline.expired():
            raise requests.exceptions.ReadTimeout("whole-request deadline passed")
        return super().send(request, **kwargs)

    def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        deadline = _Deadline(self.deadline_s)
        token = _CURRENT_DEADLINE.set(deadline)
        try:
            kwargs["stream"] = True
            response = super().request(method, url, *args, **kwargs)
            self._read_body(response, deadline)
            return response
        except _TooLarge:
            raise
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            if deadline.expired():
                raise requests.exceptions.ReadTimeout("whole-request deadline passed") from exc
            raise
        finally:
            deadline.finish()
            _CURRENT_DEADLINE.reset(token)

    def _read_body(self, response: Any, deadline: _Deadline) -> None:
        """Read the whole body into ``response`` by ``deadline``, under the size cap."""
        try:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise _TooLarge(f"declares {int(declared)} bytes")
            chunks: list[bytes] = []
            size = 0
            raw = response.raw
            while True:
                remaining = deadline.remaining_s()
                if remaining <= 0:
                    raise requests.exceptions.ReadTimeout("whole-request deadline passed")
                _set_socket_timeout(raw, remaining)
                try:
                    chunk = raw.read1(65536, decode_content=True)
                except (TimeoutError, urllib3.exceptions.ReadTimeoutError) as exc:
                    raise requests.exceptions.ReadTimeout("whole-request deadline passed") from exc
                except (urllib3.exceptions.ProtocolError, OSError) as exc:
                    raise requests.exceptions.ConnectionError(str(type(exc).__name__)) from exc
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_bytes:
                    raise _TooLarge(f"passed {self.max_bytes} bytes")
                chunks.append(chunk)
            response._content = b"".join(chunks)
        finally:
            response.close()


def _set_socket_timeout(raw: Any, seconds: float) -> None:
    """Give the response's socket ``seconds`` for its next read (best effort)."""
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is None:
        fp = getattr(getattr(raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.settimeout(max(seconds, 0.001))


def redact_url(url: str) -> str:
    """``url`` without any ``user:password@`` part, for messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _read_secret(path: str, field: str) -> str:
    text = _read_secret_file(path, field)
    remember(text)
    return text


def _remember_basic(username: str, password: str) -> None:
    """Remember the ``Basic`` header value made of ``username`` and ``password``.

    A server that echoes the header shows the base64 form, not the password; requests
    encodes the pair as Latin-1 when it can, so both that and UTF-8 are remembered.
    """
    for encoding in ("latin-1", "utf-8"):
        with contextlib.suppress(UnicodeEncodeError):
            pair = f"{username}:{password}".encode(encoding)
            remember(base64.b64encode(pair).decode("ascii"))


def _remember_url_credentials(url: str) -> None:
    """Remember a password in ``url``'s userinfo, as written and decoded, and its header."""
    parts = urlsplit(url)
    if parts.password:
        remember(parts.password)
        remember(unquote(parts.password))
        _remember_basic(unquote(parts.username or ""), unquote(parts.password))


def _read_secret_file(path: str, field: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        # The path is configuration, not a secret; the content is never shown.
        raise BadInputError(
            f"prometheus.{field}: cannot read {path!r} ({exc.strerror or type(exc).__name__})"
        ) from None
    if not text:
        raise BadInputError(f"prometheus.{field}: {path!r} is empty")
    return text


@dataclass(frozen=True)
class PrometheusSettings:
    """How to reach one Prometheus; mirrors the ``prometheus`` config section."""

    url: str
    bearer_token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    verify_tls: bool = True
    timeout_s: float = 30.0
    retries: int = 3
    retry_backoff_s: float = 1.0
    max_points: int = MAX_POINTS_PER_QUERY
    allow_insecure: bool = False
    max_response_bytes: int = 256 * 1024 * 1024
    max_series: int = 10_000


def _error_detail(exc: PrometheusApiClientException) -> tuple[int | None, str, str]:
    """(HTTP status, Prometheus errorType, error text) from the client's exception message."""
    text = str(exc)
    m = re.search(r"HTTP Status Code (\d+)", text)
    status = int(m.group(1)) if m else None
    etype = re.search(r'"errorType"\s*:\s*"([^"]*)"', text)
    err = re.search(r'"error"\s*:\s*"((?:[^"\\]|\\.)*)"', text)
    detail = err.group(1) if err else ""
    return status, etype.group(1) if etype else "", detail[:200]


class PrometheusSource:
    """A :class:`~forecaster.sources.MetricSource` backed by a Prometheus HTTP API."""

    def __init__(
        self,
        settings: PrometheusSettings,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not settings.url.startswith(("http://", "https://")):
            raise BadInputError(
                f"prometheus.url: {redact_url(settings.url)!r} is not an http:// or https:// URL"
            )
        credentials = settings.bearer_token_file or settings.username is not None
        if credentials and settings.url.startswith("http://") and not settings.allow_insecure:
            raise BadInputError(
                f"prometheus.url: {redact_url(settings.url)!r} is plain http:// and the "
                f"credential in {'bearer_token_file' if settings.bearer_token_file else 'password_file'}"
                " would be sent in clear; use https:// or set prometheus.allow_insecure: true"
            )
        if settings.max_points < 2:
            raise BadInputError(f"max_points must be at least 2, got {settings.max_points}")
        self.settings = settings
        self.url = redact_url(settings.url.rstrip("/"))
        self._retry_policy = RetryPolicy(
            settings.retries,
            settings.retry_backoff_s,
            MAX_BACKOFF_S,
            sleep=sleep,
            retryable=lambda error: isinstance(error, _Unanswered),
            before_sleep=self._log_retry,
        )
        headers: dict[str, str] = {}
        auth: tuple[str, str] | None = None
        if settings.bearer_token_file:
            headers["Authorization"] = "Bearer " + _read_secret(
                settings.bearer_token_file, "bearer_token_file"
            )
        if settings.username is not None:
            password = (
                _read_secret(settings.password_file, "password_file")
                if settings.password_file
                else ""
            )
            auth = (settings.username, password)
            _remember_basic(settings.username, password)
        _remember_url_credentials(settings.url)
        session = _BoundedSession(settings.timeout_s, settings.max_response_bytes)
        # A CA bundle path makes requests verify against it; verify_tls false turns checks off.
        session.verify = (settings.ca_file or True) if settings.verify_tls else False
        if settings.ca_file and not Path(settings.ca_file).is_file():
            raise BadInputError(f"prometheus.ca_file: {settings.ca_file!r} does not exist")
        if not settings.verify_tls and settings.url.startswith("https://"):
            # Said once here rather than by urllib3 on every request.
            log.warning("TLS verification of Prometheus at %s is off (verify_tls: false)", self.url)
        # Retries are ours (with backoff and clear errors, _retry_policy), not urllib3's.
        self._client = PrometheusConnect(
            url=settings.url.rstrip("/"),
            headers=headers or None,
            auth=auth,
            session=session,
            # No urllib3 retries; read=False keeps a read timeout a timeout for requests.
            retry=urllib3_retry.Retry(total=0, read=False, raise_on_status=False),
            timeout=settings.timeout_s,  # type: ignore[arg-type]
        )

    def __repr__(self) -> str:  # never show the headers or auth
        return f"PrometheusSource({self.url!r})"

    # -- the MetricSource method -------------------------------------------------
    def range(
        self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta
    ) -> list[LabelledSeries]:
        step_s = step.total_seconds()
        if not (step_s >= 1 and float(step_s).is_integer()):
            raise BadInputError(f"step: {step} must be a whole number of seconds, at least 1")
        first, last = _aligned_seconds(start, step_s), _aligned_seconds(end, step_s)
        if last < first:
            raise BadInputError(f"range: end {end} is before start {start}")
        step_i = int(step_s)
        per_chunk = self.settings.max_points
        pieces: dict[tuple[tuple[tuple[str, str], ...], int], list[pd.Series]] = {}
        chunk_start = first
        while chunk_start <= last:
            chunk_end = min(chunk_start + (per_chunk - 1) * step_i, last)
            copies: dict[tuple[tuple[str, str], ...], int] = {}
            for item in self._query_range(query, chunk_start, chunk_end, step_i):
                labels = tuple(sorted((str(k), str(v)) for k, v in item["metric"].items()))
                # A label set answered twice in one chunk stays two series, never
                # last-one-wins: scaler.inputs.collecting judges the copies.
                copy = copies[labels] = copies.get(labels, -1) + 1
                pieces.setdefault((labels, copy), []).append(_to_series(item.get("values", [])))
            chunk_start = chunk_end + step_i
            if len(pieces) > self.settings.max_series:
                raise PrometheusAnswerTooLarge(
                    f"Prometheus at {self.url} answered {len(pieces)} series to query "
                    f"{query[:200]!r}; at most prometheus.max_series ({self.settings.max_series}) "
                    "are read: aggregate the query"
                )
        out = []
        for (labels, _copy), parts in sorted(pieces.items()):
            s = pd.concat(parts) if len(parts) > 1 else parts[0]
            s = s[~s.index.duplicated(keep="last")].sort_index()
            out.append(LabelledSeries(labels=dict(labels), values=s))
        return out

    # -- one chunk, with retries -------------------------------------------------
    def _query_range(self, query: str, start_s: int, end_s: int, step_s: int) -> list[dict]:
        tries = Attempts(self._retry_policy)
        for attempt in tries:
            with attempt:
                return self._query_once(query, start_s, end_s, step_s)
        raise PrometheusUnavailable(
            f"Prometheus at {self.url} {tries.last_error} after "
            f"{self._retry_policy.attempts} attempt(s)"
        )

    def _log_retry(self, retry: Retry) -> None:
        log.warning(
            "Prometheus at %s %s; retry %d of %d in %.1f s",
            self.url,
            retry.error,
            retry.number,
            retry.retries,
            retry.delay_s,
        )

    def _query_once(self, query: str, start_s: int, end_s: int, step_s: int) -> list[dict]:
        """One range query, checked; :class:`_Unanswered` when a retry may get an answer."""
        try:
            with warnings.catch_warnings():
                if not self.settings.verify_tls:
                    warnings.simplefilter("ignore", InsecureRequestWarning)
                result = self._client.custom_query_range(
                    query,
                    start_time=pd.Timestamp(start_s, unit="s", tz="UTC").to_pydatetime(),
                    end_time=pd.Timestamp(end_s, unit="s", tz="UTC").to_pydatetime(),
                    step=str(step_s),
                )
            return _check_result(result, self.url, self.settings.max_series, query)
        except PrometheusApiClientException as exc:
            raise self._refusal(exc, query) from None
        except PrometheusAnswerTooLarge:
            raise
        except _TooLarge as exc:
            raise PrometheusAnswerTooLarge(
                f"Prometheus at {self.url} answered query {query!r} with a body that {exc}; "
                f"narrow the query or raise prometheus.max_response_bytes "
                f"({self.settings.max_response_bytes})"
            ) from None
        except requests.exceptions.SSLError as exc:
            raise PrometheusUnavailable(
                f"TLS verification of Prometheus at {self.url} failed ({_reason(exc)}); "
                "set prometheus.ca_file to the CA bundle that signed its certificate"
            ) from None
        except requests.exceptions.TooManyRedirects:
            # A redirect loop answers the same next time: not retried.
            raise PrometheusUnavailable(
                f"Prometheus at {self.url} redirected more than "
                f"{requests.models.DEFAULT_REDIRECT_LIMIT} times; check prometheus.url"
            ) from None
        except requests.exceptions.Timeout:
            raise _Unanswered(f"did not answer within {self.settings.timeout_s:g} s") from None
        except (requests.exceptions.ConnectionError, urllib3.exceptions.HTTPError) as exc:
            raise _Unanswered(f"cannot be reached ({_reason(exc)})") from None
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            # A 200 that is not Prometheus JSON: a proxy's login page, a wrong URL path.
            raise PrometheusUnavailable(
                f"{self.url} did not answer like a Prometheus API ({type(exc).__name__}); "
                "check prometheus.url"
            ) from None

    def _refusal(self, exc: PrometheusApiClientException, query: str) -> Exception:
        """The error an HTTP error answer stands for: the query's, the server's, or a retry's."""
        status, etype, detail = _error_detail(exc)
        if status == 400 or etype == "bad_data":
            return PrometheusQueryError(
                f"Prometheus at {self.url} refused query {query!r}: "
                f"{detail or 'HTTP ' + str(status)}"
            )
        problem = f"HTTP {status}" + (f" ({detail})" if detail else "")
        if status not in _RETRY_STATUS:
            return PrometheusUnavailable(
                f"Prometheus at {self.url} answered {problem} to query {query!r}" + _hint(status)
            )
        return _Unanswered(f"answered {problem}")


def _hint(status: int | None) -> str:
    if status == 401:
        return "; check prometheus.bearer_token_file or username/password_file"
    if status == 403:
        return "; the credentials are not allowed to query"
    if status == 404:
        return "; check the path in prometheus.url"
    return ""


def _reason(exc: BaseException) -> str:
    """The innermost cause's class and errno text, without URLs or headers."""
    inner: BaseException = exc
    while inner.__context__ is not None and inner.__context__ is not inner:
        inner = inner.__context__
    text = str(inner)
    for marker in ("Connection refused", "Name or service not known", "certificate verify failed"):
        if marker in str(exc) or marker in text:
            return marker
    return type(inner).__name__


def _aligned_seconds(ts: pd.Timestamp, step_s: float) -> int:
    t = pd.Timestamp(ts)
    if t.tzinfo is not None:
        t = t.tz_convert("UTC").tz_localize(None)
    seconds = t.as_unit("ns").value / 1e9
    return int(math.floor(seconds / step_s) * step_s)


def _check_result(result: Any, url: str, max_series: int, query: str) -> list[dict]:
    if not isinstance(result, list) or not all(
        isinstance(r, dict) and isinstance(r.get("metric"), dict) for r in result
    ):
        raise PrometheusUnavailable(f"Prometheus at {url} answered a result that is not a matrix")
    if len(result) > max_series:
        raise PrometheusAnswerTooLarge(
            f"Prometheus at {url} answered {len(result)} series to query {query[:200]!r}; "
            f"at most prometheus.max_series ({max_series}) are read: aggregate the query"
        )
    for r in result:
        r["values"] = _checked_samples(r.get("values", []), url)
    return result


def _checked_samples(values: Any, url: str) -> list[tuple[float, float]]:
    """``[[ts, "value"], ...]`` as float pairs; one line naming the first bad sample otherwise."""
    if not isinstance(values, list):
        raise PrometheusUnavailable(f"Prometheus at {url} answered 'values' that are not a list")
    out = []
    for i, pair in enumerate(values):
        try:
            ok = isinstance(pair, list | tuple) and len(pair) == 2
            ts: Any = pair[0] if ok else None
            ok = ok and isinstance(ts, int | float) and not isinstance(ts, bool)
            ok = ok and 0 <= float(ts) < 32503680000  # years 1970-2999
            ok = ok and isinstance(pair[1], str | int | float) and not isinstance(pair[1], bool)
            value = float(pair[1]) if ok else math.nan
        except (ValueError, OverflowError):
            ok = False
        if not ok:
            shown = repr(pair)[:80]
            raise PrometheusUnavailable(
                f"Prometheus at {url} answered a malformed sample #{i} {shown}; "
                'expected [unix seconds, "number"]'
            )
        out.append((float(ts), value))
    return out


def _to_series(values: list[tuple[float, float]]) -> pd.Series:
    """Checked ``(seconds, value)`` pairs to a float series (``NaN``, ``+Inf`` kept)."""
    if not values:
        return pd.Series([], index=pd.DatetimeIndex([], name="timestamp"), dtype=float)
    arr = np.asarray(values, dtype=float)
    seconds = arr[:, 0]
    numbers = arr[:, 1]
    index = pd.DatetimeIndex(pd.to_datetime(np.round(seconds * 1000).astype("int64"), unit="ms"))
    index.name = "timestamp"
    return pd.Series(numbers, index=index, dtype=float)
