"""Faults, retries, auth and TLS of the Prometheus source, against local stub servers.

A stopped server, a slow one and HTTP 4xx/5xx answers each give one clear error;
``tiercast run`` then exits non-zero before planning (no action, the previous
plan file untouched). No credential appears in any message.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from forecaster.errors import BadInputError
from forecaster.prometheus import (
    PrometheusQueryError,
    PrometheusSettings,
    PrometheusSource,
    PrometheusUnavailable,
    redact_url,
)
from scaler.cli import main
from scaler.config import ConfigError, PrometheusConfig, parse_config
from tests.prometheus_server import (
    StubReply,
    StubServer,
    error_body,
    free_port,
    matrix_body,
    self_signed_cert,
)

T0 = pd.Timestamp("2024-03-01T00:00:00")
STEP = pd.Timedelta(minutes=1)
TOKEN = "s3cr3t-t0ken-value"
GOOD = matrix_body([({"pool": "a"}, [(T0.timestamp(), "1.5"), (T0.timestamp() + 60, "2.5")])])


class Sleeps:
    """A fake sleep that records the backoff delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def make(url: str, sleeps: Sleeps | None = None, **kw: object) -> PrometheusSource:
    settings = PrometheusSettings(url=url, **{"timeout_s": 2.0, "retries": 2, **kw})  # type: ignore[arg-type]
    return PrometheusSource(settings, sleep=sleeps or Sleeps())


def fetch(src: PrometheusSource) -> pd.Series:
    [s] = src.range("up", T0, T0 + STEP, STEP)
    return s.values


def test_stopped_server_is_retried_with_backoff_then_one_clear_error() -> None:
    sleeps = Sleeps()
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PrometheusUnavailable) as info:
        fetch(make(url, sleeps, retry_backoff_s=0.5))
    msg = str(info.value)
    assert msg == f"Prometheus at {url} cannot be reached (Connection refused) after 3 attempt(s)"
    assert sleeps.delays == [0.5, 1.0]
    assert info.value.exit_code == 1


def test_slow_server_times_out() -> None:
    with StubServer(lambda _: StubReply(body=GOOD, delay_s=1.0)) as stub:
        with pytest.raises(PrometheusUnavailable, match=r"did not answer within 0\.2 s after 2"):
            fetch(make(stub.url, timeout_s=0.2, retries=1))
        assert len(stub.requests) == 2


def test_5xx_is_retried_and_a_later_success_is_used() -> None:
    answers = iter([StubReply(503, error_body("unavailable", "busy")), StubReply(body=GOOD)])
    sleeps = Sleeps()
    with StubServer(lambda _: next(answers)) as stub:
        values = fetch(make(stub.url, sleeps))
    assert values.tolist() == [1.5, 2.5] and len(sleeps.delays) == 1


def test_persistent_5xx_gives_up_after_the_retries() -> None:
    with StubServer(lambda _: StubReply(500, error_body("internal", "boom"))) as stub:
        with pytest.raises(PrometheusUnavailable, match=r"answered HTTP 500 \(boom\) after 3"):
            fetch(make(stub.url))
        assert len(stub.requests) == 3


@pytest.mark.parametrize(
    ("status", "hint"), [(401, "bearer_token_file"), (403, "not allowed"), (404, "path")]
)
def test_4xx_is_not_retried_and_names_what_to_check(status: int, hint: str) -> None:
    with StubServer(lambda _: StubReply(status, b"no")) as stub:
        with pytest.raises(PrometheusUnavailable, match=f"answered HTTP {status}.*{hint}"):
            fetch(make(stub.url))
        assert len(stub.requests) == 1


def test_invalid_query_is_bad_input() -> None:
    body = error_body("bad_data", "1:4: parse error: unexpected end of input")
    with (
        StubServer(lambda _: StubReply(400, body)) as stub,
        pytest.raises(PrometheusQueryError, match="refused query 'up': 1:4: parse error"),
    ):
        fetch(make(stub.url))
    assert issubclass(PrometheusQueryError, BadInputError)


def test_an_answer_that_is_not_prometheus_json_is_a_clear_error() -> None:
    with (
        StubServer(lambda _: StubReply(200, b"<html>login</html>")) as stub,
        pytest.raises(PrometheusUnavailable, match="did not answer like a Prometheus API"),
    ):
        fetch(make(stub.url))


def test_bearer_token_is_read_from_a_file_and_never_shown(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")

    def reply(handler: object) -> StubReply:
        ok = getattr(handler, "headers")["Authorization"] == f"Bearer {TOKEN}"  # noqa: B009
        return StubReply(body=GOOD) if ok else StubReply(401, b"")

    with StubServer(reply) as stub:
        assert fetch(
            make(stub.url, bearer_token_file=str(token), allow_insecure=True)
        ).tolist() == [1.5, 2.5]
        with pytest.raises(PrometheusUnavailable, match="401") as info:
            fetch(make(stub.url))
    assert TOKEN not in str(info.value) and TOKEN not in repr(make(stub.url))
    with StubServer(lambda _: StubReply(500, error_body("internal", "x"))) as stub:
        with pytest.raises(PrometheusUnavailable) as info:
            fetch(make(stub.url, bearer_token_file=str(token), retries=0, allow_insecure=True))
        assert TOKEN not in str(info.value)
    with pytest.raises(BadInputError, match=r"bearer_token_file: cannot read '/nope/token'"):
        make(stub.url, bearer_token_file="/nope/token", allow_insecure=True)


def test_basic_auth_password_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2\n")
    with StubServer(lambda _: StubReply(body=GOOD)) as stub:
        fetch(
            make(
                stub.url,
                username="tiercast",
                password_file=str(tmp_path / "pw"),
                allow_insecure=True,
            )
        )
        # base64("tiercast:hunter2")
        assert stub.requests[0]["headers"]["Authorization"] == "Basic dGllcmNhc3Q6aHVudGVyMg=="


def test_credentials_in_the_url_are_redacted() -> None:
    assert redact_url("https://u:p@prom.example:9090/x") == "https://prom.example:9090/x"
    url = f"http://u:hunter2@127.0.0.1:{free_port()}"
    with pytest.raises(PrometheusUnavailable) as info:
        fetch(make(url, retries=0))
    assert "hunter2" not in str(info.value)


def test_tls_is_verified_by_default_and_a_ca_bundle_makes_it_pass(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    with StubServer(lambda _: StubReply(body=GOOD), tls=(cert, key)) as stub:
        with pytest.raises(PrometheusUnavailable, match=r"TLS verification .* failed.*ca_file"):
            fetch(make(stub.url))
        assert fetch(make(stub.url, ca_file=str(cert))).tolist() == [1.5, 2.5]
        assert fetch(make(stub.url, verify_tls=False)).tolist() == [1.5, 2.5]


# -- the whole command: `tiercast run` against a failing Prometheus -----------------


def config_dict(url: str, **prometheus: object) -> dict:
    return {
        "signals": [{"name": "rps", "query": "sum(rate(http_requests_total[5m]))", "step_s": 60}],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
                "current_nodes": 10,
            }
        ],
        "prometheus": {
            "url": url,
            "timeout_s": 0.3,
            "retries": 1,
            "retry_backoff_s": 0,
            **prometheus,
        },
    }


def write_config(path: Path, url: str, **prometheus: object) -> Path:
    path.write_text(yaml.safe_dump(config_dict(url, **prometheus)))
    return path


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("stopped", "cannot be reached (Connection refused) after 2 attempt(s)"),
        ("slow", "did not answer within 0.3 s after 2 attempt(s)"),
        ("503", "answered HTTP 503 (overloaded) after 2 attempt(s)"),
        ("401", "answered HTTP 401 to query"),
    ],
)
def test_run_exits_1_with_one_line_and_no_new_plan(
    fault: str, expected: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = {
        "slow": StubReply(body=GOOD, delay_s=1.0),
        "503": StubReply(503, error_body("unavailable", "overloaded")),
        "401": StubReply(401, b"unauthorized"),
    }
    previous = workdir / "plan.json"
    previous.write_text('{"last": "good plan"}')
    with StubServer(lambda _: replies.get(fault, StubReply())) as stub:
        url = f"http://127.0.0.1:{free_port()}" if fault == "stopped" else stub.url
        cfg = write_config(workdir / "cfg.yaml", url)
        code = main(["run", "--config", str(cfg), "--plan-out", str(previous)])
    out, err = capsys.readouterr()
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tiercast: error: Prometheus at ")
    assert expected in lines[0]
    assert "DECISION" not in out and "scale-down" not in out
    assert previous.read_text() == '{"last": "good plan"}'


def test_prometheus_config_defaults_are_pinned_and_auth_is_one_kind() -> None:
    p = PrometheusConfig(url="http://prometheus:9090")
    assert (p.verify_tls, p.timeout_s, p.retries, p.retry_backoff_s) == (True, 30.0, 3, 1.0)
    assert (p.lookback_s, p.max_fill_gap_s) == (14 * 86400, 900)
    data = config_dict("http://x")
    data["prometheus"] = {"url": "http://x", "bearer_token_file": "/t", "username": "u"}
    with pytest.raises(ConfigError, match="either bearer_token_file or username, not both"):
        parse_config(data, "cfg.yaml")
    data["prometheus"] = {"url": "prometheus:9090"}
    with pytest.raises(ConfigError, match=r"cfg.yaml: prometheus.url: .*'prometheus:9090'"):
        parse_config(data, "cfg.yaml")


# -- credentials never in clear ----------------------------------------------------------


def test_a_token_or_password_over_plain_http_is_refused_unless_allowed(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    with pytest.raises(BadInputError, match=r"plain http:// .*allow_insecure: true"):
        make("http://prom:9090", bearer_token_file=str(token))
    with pytest.raises(BadInputError, match="credential in password_file would be sent in clear"):
        make("http://prom:9090", username="u")
    make("http://prom:9090", bearer_token_file=str(token), allow_insecure=True)
    make("https://prom:9090", bearer_token_file=str(token))
    make("http://prom:9090")  # no credential: nothing to leak
    data = config_dict("http://prom:9090", bearer_token_file=str(token))
    with pytest.raises(ConfigError, match=r"prometheus.url: 'http://prom:9090' is plain http://"):
        parse_config(data, "cfg.yaml")
    data["prometheus"]["allow_insecure"] = True
    assert parse_config(data, "cfg.yaml").prometheus.allow_insecure  # type: ignore[union-attr]
    assert PrometheusConfig(url="http://p").allow_insecure is False


def test_the_shipped_configmap_does_not_send_the_token_in_clear() -> None:
    root = Path(__file__).resolve().parents[1]
    manifest = yaml.safe_load((root / "deploy/base/configmap.yaml").read_text())
    config = parse_config(yaml.safe_load(manifest["data"]["config.yaml"]), "configmap")
    assert config.prometheus is not None
    if config.prometheus.bearer_token_file or config.prometheus.username:
        assert config.prometheus.url.startswith("https://") or config.prometheus.allow_insecure


def _echo(handler: object) -> StubReply:
    """A server that quotes the request's Authorization header in its error."""
    header = getattr(handler, "headers").get("Authorization", "")  # noqa: B009
    return StubReply(500, error_body("internal", f"bad header {header} / raw={header.split()[-1]}"))


def test_an_echoed_token_is_masked_in_the_error_the_log_the_records_and_history(
    workdir: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    token = workdir / "token"
    token.write_text(TOKEN + "\n")
    with StubServer(_echo) as stub:
        data = config_dict(stub.url, bearer_token_file=str(token), allow_insecure=True, retries=1)
        data["service"] = {"records_path": str(workdir / "runs.sqlite")}
        (workdir / "cfg.yaml").write_text(yaml.safe_dump(data))
        code = main(["run", "--config", str(workdir / "cfg.yaml"), "--dry-run"])
    assert code == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 300 and "Prometheus at" in lines[0]
    assert TOKEN not in err
    assert TOKEN not in caplog.text
    assert stub.requests and stub.requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    import sqlite3

    rows = sqlite3.connect(workdir / "runs.sqlite").execute("SELECT body FROM runs").fetchall()
    assert len(rows) == 1 and '"failed"' in rows[0][0]  # the failed collection left its record
    assert TOKEN not in rows[0][0] and "***" in rows[0][0]
    for extra in ([], ["--json"]):
        assert main(["history", "--records", str(workdir / "runs.sqlite"), *extra]) == 0
        out = capsys.readouterr().out
        assert "failed" in out and TOKEN not in out


# -- bounded answers ---------------------------------------------------------------------


def test_a_slow_drip_answer_is_cut_at_the_whole_request_deadline() -> None:
    import time

    with StubServer(lambda _: StubReply(body=GOOD, drip_s=0.05)) as stub:  # ~6 s in all
        began = time.monotonic()
        with pytest.raises(PrometheusUnavailable, match=r"did not answer within 0.5 s"):
            fetch(make(stub.url, timeout_s=0.5, retries=0))
        assert time.monotonic() - began < 2.0


def test_an_answer_over_the_size_cap_is_refused_in_one_line() -> None:
    from forecaster.prometheus import PrometheusAnswerTooLarge

    with (
        StubServer(lambda _: StubReply(body=GOOD)) as stub,
        pytest.raises(PrometheusAnswerTooLarge, match="max_response_bytes") as info,
    ):
        fetch(make(stub.url, max_response_bytes=50))
    assert "\n" not in str(info.value)


def test_too_many_series_are_refused_in_one_line() -> None:
    from forecaster.prometheus import PrometheusAnswerTooLarge

    many = matrix_body([({"pod": str(i)}, [(T0.timestamp(), "1")]) for i in range(5)])
    with StubServer(lambda _: StubReply(body=many)) as stub:
        with pytest.raises(PrometheusAnswerTooLarge, match=r"5 series .*max_series \(4\)"):
            make(stub.url, max_series=4).range("up", T0, T0 + STEP, STEP)
        assert len(make(stub.url, max_series=5).range("up", T0, T0 + STEP, STEP)) == 5


@pytest.mark.parametrize(
    "values",
    [
        [[1709251200, "abc"]],
        [[1709251200]],
        [["1709251200", "1"]],
        [[1709251200, None]],
        [[True, "1"]],
        [[1e300, "1"]],
        "not a list",
        [[1709251200, "1", "extra"]],
    ],
    ids=[
        "non-numeric",
        "ragged",
        "string-ts",
        "null",
        "bool-ts",
        "far-future",
        "not-list",
        "triple",
    ],
)
def test_a_malformed_sample_is_one_line_not_a_traceback(
    values: object, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    body = json.dumps(
        {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]},
        }
    ).encode()
    with StubServer(lambda _: StubReply(body=body)) as stub:
        with pytest.raises(PrometheusUnavailable, match=r"malformed|not a list"):
            fetch(make(stub.url))
        cfg = write_config(workdir / "cfg.yaml", stub.url)
        assert main(["run", "--config", str(cfg), "--dry-run"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 300 and "Traceback" not in lines[0]
