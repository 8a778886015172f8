"""Real and stub Prometheus servers for the tests.

* :func:`prometheus` (session fixture): the real server from Debian's
  ``prometheus`` package on a free loopback port, over a temporary TSDB that
  ``tiercast backfill`` filled with public traces (when present) and with the
  synthetic dirty series below. Retention is 100 years because the traces are
  dated 2000 and 2014-2022 and Prometheus deletes older blocks at start-up.
  It starts once per test session and stops at teardown.
* :class:`StubServer`: a tiny local HTTP(S) server whose answer a test chooses
  (a status code, a delay, a body), for the fault and auth tests.

Import the fixture into a test module with
``from tests.prometheus_server import prometheus  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import requests

from scaler.inputs.backfilling import series_from_files, write_blocks
from tests.conftest import TRACES

STEP_S = 60
DIRTY_START = pd.Timestamp("2010-01-01T00:00:00")
DIRTY_GAUGE = "tiercast_dirty_gauge"
DIRTY_COUNTER = "tiercast_dirty_requests_total"
RPS_METRIC = "servegen_requests_per_second"
GPU_UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"

# Public traces backfilled when present: (file, metric, labels).
TRACE_SERIES: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("servegen/m_small_rps_10min.csv", RPS_METRIC, {"model": "m-small"}),
    ("servegen/deepseek_r1_rps_10min.csv", RPS_METRIC, {"model": "deepseek-r1"}),
    ("servegen/mm_image_rps_10min.csv", RPS_METRIC, {"model": "mm-image"}),
    (
        "alibaba_genai2026/infra_gpu_duty_cycle_mean_pct_1min.csv",
        GPU_UTIL_METRIC,
        {"service": "genai"},
    ),
)


def gauge_value(i: int) -> float:
    """The true level of the dirty gauge at minute ``i``."""
    return 10.0 + 0.5 * i


def dirty_gauge_rows() -> list[tuple[str, str]]:
    """Minute samples 0..199 of a linear gauge, made dirty on purpose.

    NaN at 10, +Inf at 20, -Inf at 21 (short gaps once dropped); NaN for 100..139
    (a 40-minute gap); rows 150..179 absent (a scrape gap); minute 40 written
    twice, first with a wrong value (the last row wins); minutes 49 and 50
    written out of order.
    """
    rows: list[tuple[str, str]] = []
    for i in range(200):
        if 150 <= i < 180:
            continue
        t = (DIRTY_START + pd.Timedelta(minutes=i)).isoformat()
        value = repr(gauge_value(i))
        if i == 10 or 100 <= i < 140:
            value = "NaN"
        elif i == 20:
            value = "+Inf"
        elif i == 21:
            value = "-Inf"
        if i == 40:
            rows.append((t, "999.0"))
        rows.append((t, value))
    i49 = next(k for k, r in enumerate(rows) if r[0].endswith("00:49:00"))
    rows[i49], rows[i49 + 1] = rows[i49 + 1], rows[i49]
    return rows


def dirty_counter_rows() -> list[tuple[str, str]]:
    """A request counter growing 60 per minute (1/s) that resets at minute 50.

    After the reset it reads 60 at minute 50: the process restarted and counted
    one minute of requests, so ``rate()`` stays exactly 1/s across the reset.
    """
    rows = []
    for i in range(120):
        t = (DIRTY_START + pd.Timedelta(minutes=i)).isoformat()
        value = 60.0 * i if i < 50 else 60.0 * (i - 49)
        rows.append((t, repr(value)))
    return rows


def _write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in rows))
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PrometheusServer:
    """A running ``prometheus`` process over ``tsdb``."""

    url: str
    tsdb: Path
    process: subprocess.Popen
    traces: dict[str, Path] = field(default_factory=dict)
    """Backfilled public traces: relative trace path -> file."""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_prometheus(tsdb: Path, workdir: Path, timeout_s: float = 30.0) -> PrometheusServer:
    """Start prometheus on a free loopback port over ``tsdb``; wait until it is ready."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus binary is not installed (bash .ci/test.sh installs it)")
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\n")  # no scrape jobs: history only
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = PrometheusServer(url=f"http://127.0.0.1:{port}", tsdb=tsdb, process=process)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"prometheus exited with {process.returncode}: "
                + (workdir / "prometheus.log").read_text()[-500:]
            )
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{server.url}/-/ready", timeout=1).status_code == 200:
                return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"prometheus did not become ready within {timeout_s} s")


def backfill_test_data(tsdb: Path, workdir: Path) -> dict[str, Path]:
    """Backfill the dirty series and the public traces that exist; return the traces used."""
    gauge = _write_csv(workdir / "dirty_gauge.csv", dirty_gauge_rows())
    counter = _write_csv(workdir / "dirty_counter.csv", dirty_counter_rows())
    write_blocks(DIRTY_GAUGE, series_from_files([gauge], {"kind": "gauge"}, "series"), tsdb)
    write_blocks(DIRTY_COUNTER, series_from_files([counter], {"kind": "counter"}, "series"), tsdb)
    used: dict[str, Path] = {}
    by_metric: dict[str, list] = {}
    for rel, metric, labels in TRACE_SERIES:
        path = TRACES / rel
        if path.is_file():
            by_metric.setdefault(metric, []).extend(series_from_files([path], labels, "series"))
            used[rel] = path
    for metric, series in by_metric.items():
        write_blocks(metric, series, tsdb)
    return used


_SHARED: dict[str, PrometheusServer] = {}


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """One real Prometheus for the session, over backfilled history."""
    # Modules import this fixture separately; the cache keeps it to one process.
    if "server" not in _SHARED or _SHARED["server"].process.poll() is not None:
        if shutil.which("promtool") is None:
            pytest.skip("promtool is not installed (bash .ci/test.sh installs it)")
        workdir = tmp_path_factory.mktemp("prometheus")
        tsdb = workdir / "tsdb"
        used = backfill_test_data(tsdb, workdir)
        server = start_prometheus(tsdb, workdir)
        server.traces = used
        _SHARED["server"] = server
    yield _SHARED["server"]
    _SHARED["server"].stop()


def needs_trace(server: PrometheusServer, rel: str) -> Path:
    """The backfilled trace ``rel``, or skip when the public traces are absent."""
    if rel not in server.traces:
        pytest.skip(
            f"public trace {rel} not found under {TRACES} (the shared data folder is absent)"
        )
    return server.traces[rel]


def csv_series(path: Path) -> pd.Series:
    """A trace's non-empty rows as a float series (the round-trip reference)."""
    frame = pd.read_csv(path)
    frame = frame.dropna(subset=["value"])
    index = pd.DatetimeIndex(pd.to_datetime(frame["timestamp"]), name="timestamp")
    return pd.Series(frame["value"].to_numpy(dtype=float), index=index)


# -- stub servers ------------------------------------------------------------------


@dataclass
class StubReply:
    status: int = 200
    body: bytes = b""
    delay_s: float = 0.0
    drip_s: float = 0.0
    """When set, the body is sent one byte at a time with this pause between bytes."""
    header_drip_s: float = 0.0
    """When set, the status line and headers are sent one byte at a time with this pause."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (a redirect's ``Location``, say)."""


def matrix_body(series: list[tuple[dict[str, str], list[tuple[float, str]]]]) -> bytes:
    result = [
        {"metric": labels, "values": [[t, v] for t, v in values]} for labels, values in series
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ).encode()


def error_body(error_type: str, error: str) -> bytes:
    return json.dumps({"status": "error", "errorType": error_type, "error": error}).encode()


def _drip_headers(handler: BaseHTTPRequestHandler, pause_s: float) -> None:
    """Send the buffered status line and headers one byte at a time, ``pause_s`` apart.

    ``end_headers`` then adds only the blank line that ends them.
    """
    buffered = b"".join(getattr(handler, "_headers_buffer", []))
    handler._headers_buffer = []  # type: ignore[attr-defined]
    for i in range(len(buffered)):
        handler.wfile.write(buffered[i : i + 1])
        handler.wfile.flush()
        time.sleep(pause_s)


class StubServer:
    """A loopback HTTP server answering every request with ``reply(handler)``.

    ``requests`` records each request's path and headers, so auth tests can check
    what was sent. Use as a context manager; pass ``tls=(cert, key)`` for HTTPS.
    """

    def __init__(
        self,
        reply: Callable[[BaseHTTPRequestHandler], StubReply],
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.requests.append({"path": self.path, "headers": dict(self.headers)})
                answer = stub.reply(self)
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer.body)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    if answer.header_drip_s:
                        _drip_headers(self, answer.header_drip_s)
                    self.end_headers()
                    if answer.drip_s:
                        for i in range(len(answer.body)):
                            self.wfile.write(answer.body[i : i + 1])
                            self.wfile.flush()
                            time.sleep(answer.drip_s)
                    else:
                        self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def self_signed_cert(workdir: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def grid(start: pd.Timestamp, minutes: int) -> pd.DatetimeIndex:
    return pd.date_range(start, periods=minutes, freq="1min", name="timestamp")


def values_at(series: pd.Series, stamps: pd.DatetimeIndex) -> np.ndarray:
    return series.reindex(stamps).to_numpy(dtype=float)
