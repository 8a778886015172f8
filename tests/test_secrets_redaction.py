"""Basic-auth values and URL userinfo are masked wherever ``redact`` is applied.

``redact`` masks ``Basic <base64>`` as ``Basic ***`` and ``https://user:pass@host/x`` as
``https://***@host/x`` (scheme and host kept), and leaves near-misses alone: an e-mail
address in free text, a URL without userinfo, the word Basic in a sentence. End to end, a
Prometheus that echoes such credentials in its error leaves none of them in stderr, the
run records or ``tiercast history``.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from forecaster.prometheus import PrometheusSettings, PrometheusSource
from forecaster.secrets import redact
from scaler.cli import main
from scaler.records import RunStore
from tests.prometheus_server import StubReply, StubServer, error_body
from tests.test_prometheus_faults import config_dict

ECHOED_BASIC = "dXNlcjpzZWNyZXQ="  # base64("user:secret")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Authorization: Basic dXNlcjpzZWNyZXQ=", "Authorization: Basic ***"),
        ("refused Basic dXNlcjpzZWNyZXQ= for /api", "refused Basic *** for /api"),
        ('{"authorization": "Basic dXNlcjpzZWNyZXQ="}', '{"authorization": "Basic ***"}'),
        ("basic Zm9vOmJhcg==", "basic ***"),
        ("https://user:secret@x", "https://***@x"),
        (
            "GET https://user:secret@prom:9090/api/v1 failed",
            "GET https://***@prom:9090/api/v1 failed",
        ),
        ("http://token@host/x", "http://***@host/x"),
        ("https://user:p@ss@host/x", "https://***@host/x"),
        ("https://u:p%40ss@host?q=1", "https://***@host?q=1"),
    ],
)
def test_basic_credentials_and_url_userinfo_are_masked(text: str, masked: str) -> None:
    assert redact(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "mail ops@example.com when the cycle fails",
        "see https://prom.example:9090/api/v1/query_range?query=up",
        "http://example.com/users/@alice and bob@example.com",
        "https://prom:9090/api?match=a@b",
        "Basic",
        "Basic auth failed",
        "Basic authentication required",
        "the Basic Settings page",
        "user=bob",
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_the_basic_header_of_the_configured_password_is_remembered(tmp_path: Path) -> None:
    password = "pw-remembered-7Qx"
    (tmp_path / "pw").write_text(password + "\n")
    settings = PrometheusSettings(
        url="https://prom:9090",
        username="planner",
        password_file=str(tmp_path / "pw"),
    )
    PrometheusSource(settings)
    header = base64.b64encode(f"planner:{password}".encode()).decode()
    # Bare, with no "Basic" before it, only the remembered value can mask it.
    assert redact(f"raw={header} pw={password}") == "raw=*** pw=***"


def test_a_password_in_the_configured_url_is_remembered() -> None:
    PrometheusSource(PrometheusSettings(url="https://planner:url-pw-3Zk@prom:9090"))
    assert redact("echoed url-pw-3Zk") == "echoed ***"


def _echo_credentials(handler: BaseHTTPRequestHandler) -> StubReply:
    """A server whose error quotes a basic-auth header, the bare value and a URL."""
    detail = (
        f"proxy said Authorization: Basic {ECHOED_BASIC} for https://user:secret@x "
        f"(rejected Basic {ECHOED_BASIC})"
    )
    return StubReply(500, error_body("internal", detail))


def test_echoed_basic_credentials_leave_no_trace_in_stderr_records_or_history(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = workdir / "runs.sqlite"
    with StubServer(_echo_credentials) as stub:
        data = config_dict(stub.url)
        data["service"] = {"records_path": str(records)}
        (workdir / "cfg.yaml").write_text(yaml.safe_dump(data))
        code = main(["run", "--config", str(workdir / "cfg.yaml"), "--dry-run"])
    assert code == 1 and stub.requests
    err = capsys.readouterr().err
    assert "Prometheus at" in err and "Basic ***" in err and "https://***@x" in err

    [record] = RunStore(records).recent()
    stored = json.dumps(record.to_dict())
    rows = [row[0] for row in sqlite3.connect(records).execute("SELECT body FROM runs")]
    assert main(["history", "--records", str(records), "--json"]) == 0
    history_json = capsys.readouterr().out
    assert main(["history", "--records", str(records)]) == 0
    history_text = capsys.readouterr().out
    assert "failed" in history_json and "failed" in history_text
    for where, text in [
        ("stderr", err),
        ("record", stored),
        ("rows", "\n".join(rows)),
        ("history --json", history_json),
        ("history", history_text),
    ]:
        assert "secret" not in text, where
        assert ECHOED_BASIC not in text, where
