"""Command-line conventions an operator knows from kubectl: ``-o`` is the output format,
``--out-dir`` a folder and ``--out-file`` a file, ``--dry-run=client|server``, and
``--prometheus-url``; the old spellings still work for one release with a one-line notice."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from scaler.cli import build_parser, main
from scaler.inputs import loading

NOTICE = "is deprecated; use {new} (it is removed in the next release)"


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser({argv[0]}).parse_args(argv)


def one_notice(err: str, old: str, new: str) -> None:
    """``err`` is exactly one line: the notice that ``old`` is deprecated for ``new``."""
    assert err.splitlines() == [f"tiercast: {old} " + NOTICE.format(new=new)]


def daily_csv(path: Path, days: int = 3) -> Path:
    stamps = pd.date_range("2026-01-01", periods=days * 144, freq="10min")
    rows = [
        f"{t.isoformat()},{100 + 50 * math.sin(i / 144 * 2 * math.pi):.3f}"
        for i, t in enumerate(stamps)
    ]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


# -- --dry-run=client|server ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "serve"])
@pytest.mark.parametrize(
    ("flags", "dry_run", "server"),
    [
        ([], False, False),
        (["--dry-run"], True, False),
        (["--dry-run=client"], True, False),
        (["--dry-run", "client"], True, False),
        (["--dry-run=server"], True, True),
    ],
)
def test_dry_run_takes_client_or_server_and_bare_means_client(
    command: str, flags: list[str], dry_run: bool, server: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse([command, *flags])
    assert (args.dry_run, args.server_dry_run) == (dry_run, server)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["run", "serve"])
def test_the_old_server_dry_run_flag_still_works_with_a_notice(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parse([command, "--server-dry-run"])
    # The old flag implied --dry-run in run; it does in serve too now, never a live cycle.
    assert (args.dry_run, args.server_dry_run) == (True, True)
    one_notice(capsys.readouterr().err, "--server-dry-run", "--dry-run=server")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "--dry-run=bogus"], "expected client or server"),
        (["serve", "--dry-run="], "expected client or server"),
        (["plan", "--dry-run=server"], "plan never contacts a cluster"),
    ],
)
def test_an_unknown_dry_run_mode_is_a_one_line_exit_2_error(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tiercast: error: argument --dry-run: ") and expected in line


def test_plan_accepts_dry_run_client_for_symmetry() -> None:
    assert parse(["plan", "--dry-run=client"]).dry_run is True
    assert parse(["plan", "--dry-run"]).dry_run is True


class _Built(Exception):
    """Stops ``serve`` once its provider factory has been asked for."""


def test_serve_dry_run_server_reaches_the_provider_as_a_server_dry_run(
    monkeypatch: pytest.MonkeyPatch, workdir: Path
) -> None:
    from scaler.service import wiring

    asked: list[tuple[bool, bool]] = []

    def factory(dry_run: bool, server_dry_run: bool = False, *_: Any) -> Any:
        asked.append((dry_run, server_dry_run))
        raise _Built

    monkeypatch.setattr(wiring, "provider_factory", factory)
    for flag in ("--dry-run=server", "--server-dry-run"):
        with pytest.raises(_Built):
            main(["serve", flag, "--once", "--metrics-port", "0"])
    assert asked == [(True, True), (True, True)]


# -- report: -o is the format, --out-dir the folder ----------------------------------------


def test_report_o_is_the_format_and_out_dir_the_folder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parse(["report", "-o", "md,json", "--out-dir", "rev"])
    assert (args.output, args.out_dir) == ("md,json", "rev")
    assert parse(["report", "--output", "json"]).output == "json"
    # Unset: every format, into tiercast-report/ (resolved when the command runs).
    args = parse(["report"])
    assert (args.output, args.out_dir) == ("html,md,csv,json", None)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("argv", "field", "value", "old", "new"),
    [
        (["--format", "md"], "output", "md", "--format", "-o/--output"),
        (["--out", "rev"], "out_dir", "rev", "--out", "--out-dir"),
        (
            ["-o", "old/rev"],
            "out_dir",
            "old/rev",
            "'report -o DIR'",
            "--out-dir old/rev (-o now picks the formats: html,md,csv,json)",
        ),
    ],
)
def test_report_old_spellings_still_work_with_a_notice(
    argv: list[str],
    field: str,
    value: str,
    old: str,
    new: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert getattr(parse(["report", *argv]), field) == value
    one_notice(capsys.readouterr().err, old, new)


def test_report_o_that_is_neither_a_format_nor_a_folder_is_refused_naming_out_dir(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["report", "-o", "tiercast-report"])
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "'tiercast-report' is not a format" in line and "--out-dir DIR" in line
    assert list(workdir.iterdir()) == []


@pytest.mark.slow
def test_report_writes_the_formats_of_o_into_out_dir(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = daily_csv(workdir / "h.csv")
    base = ["report", "--history", str(history), "--backtest-origins", "0", "--no-progress"]
    assert main([*base, "-o", "json", "--out-dir", "rev"]) == 0
    assert capsys.readouterr().err == ""
    assert {p.name for p in (workdir / "rev").iterdir()} == {"report.json", "plan.json"}
    # The old spellings write the same files, and say what to use instead.
    assert main([*base, "--format", "json", "--out", "old"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" is deprecated")[0] for line in err] == [
        "tiercast: --format",
        "tiercast: --out",
    ]
    assert {p.name for p in (workdir / "old").iterdir()} == {"report.json", "plan.json"}


# -- plan --out-dir, forecast and bench-scale --out-file -------------------------------------


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["plan", "--out-dir", "fin"], "out_dir", "fin"),
        (["forecast", "--out-file", "f.csv"], "output_file", "f.csv"),
        (["forecast", "--output-file", "f.csv"], "output_file", "f.csv"),
        (["bench-scale", "--out-file", "t.md"], "out_file", Path("t.md")),
    ],
)
def test_a_folder_is_out_dir_and_a_file_out_file(
    argv: list[str], field: str, value: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert getattr(parse(argv), field) == value
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("argv", "field", "value", "new"),
    [
        (["plan", "--out", "fin"], "out_dir", "fin", "--out-dir"),
        (["forecast", "--out", "f.csv"], "output_file", "f.csv", "--out-file"),
        (["bench-scale", "--out", "t.md"], "out_file", Path("t.md"), "--out-file"),
    ],
)
def test_the_old_out_still_works_for_one_release_with_a_notice(
    argv: list[str], field: str, value: object, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert getattr(parse(argv), field) == value
    one_notice(capsys.readouterr().err, "--out", new)


def test_forecast_out_file_writes_the_file(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = daily_csv(workdir / "h.csv")
    base = ["forecast", "--history", str(history), "--method", "seasonal_naive_1d"]
    base += ["--horizon", "1h", "--no-progress"]
    assert main([*base, "--out-file", "new.csv"]) == 0
    assert "forecast written to new.csv" in capsys.readouterr().err
    assert main([*base, "--out", "old.csv"]) == 0
    assert "tiercast: --out is deprecated; use --out-file" in capsys.readouterr().err
    assert (workdir / "new.csv").read_text() == (workdir / "old.csv").read_text()


def test_every_command_with_a_format_calls_it_o() -> None:
    """-o/--output is the format wherever a command has one; no -o names a path."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        for action in command._actions:
            if "-o" in action.option_strings:
                assert "--output" in action.option_strings, name
                assert action.dest == "output", name
            if "--out" in action.option_strings:
                assert action.help == argparse.SUPPRESS, name  # only as an old spelling


# -- --prometheus-url --------------------------------------------------------------------


def _prometheus_config(path: Path, prometheus: dict[str, Any] | None = None) -> Path:
    config: dict[str, Any] = {
        "signals": [{"name": "rps", "query": "sum(rate(requests_total[5m]))", "step_s": 600}],
        "workloads": [
            {"name": "serve", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 10}
        ],
        "pools": [
            {
                "name": "gpu",
                "tier": "on-demand",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
            }
        ],
    }
    if prometheus is not None:
        config["prometheus"] = prometheus
    path.write_text(yaml.safe_dump(config))
    return path


def _args(**flags: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"history": None, "state_dir": None, **flags})


def test_prometheus_url_overrides_the_configs_url_and_keeps_the_rest(tmp_path: Path) -> None:
    path = _prometheus_config(
        tmp_path / "c.yaml", {"url": "https://old.example:9090", "timeout_s": 7}
    )
    config = loading.load_cycle_config(str(path), _args(prometheus_url="http://localhost:9090"))
    assert config.prometheus is not None
    assert config.prometheus.url == "http://localhost:9090"
    assert config.prometheus.timeout_s == 7
    # No section in the file: the flag adds one with the defaults.
    bare = _prometheus_config(tmp_path / "bare.yaml")
    added = loading.load_cycle_config(str(bare), _args(prometheus_url="http://prom:9090"))
    assert added.prometheus is not None and added.prometheus.url == "http://prom:9090"
    assert added.prometheus.lookback_s == 14 * 86400


def test_run_reads_the_signals_from_the_prometheus_url(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _prometheus_config(workdir / "c.yaml", {"url": "https://old.example:9090"})
    asked: list[str] = []

    def collect(config: Any, signal: str, now: pd.Timestamp | None = None) -> dict:
        asked.append(config.prometheus.url)
        stamps = pd.date_range(end="2026-01-03T23:50", periods=3 * 144, freq="10min")
        return {signal: pd.Series(100.0, index=stamps, name=signal)}

    monkeypatch.setattr(loading, "_collect_prometheus", collect)
    # Nothing listens there: the cycle's instant queries (pending GPU pods, DCGM) are off too.
    monkeypatch.setattr("scaler.inputs.pending.wanted", lambda *sections: False)
    monkeypatch.setattr("scaler.inputs.power.wanted", lambda *sections: False)
    argv = ["run", "--dry-run", "-c", "c.yaml", "--prometheus-url", "http://localhost:9090"]
    argv += ["--now", "2026-01-04T00:00:00"]
    assert main(argv) == 0, capsys.readouterr()
    assert asked and set(asked) == {"http://localhost:9090"}


@pytest.mark.parametrize("command", ["run", "plan", "report"])
def test_prometheus_url_without_a_config_says_to_pass_config(
    command: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--prometheus-url", "http://localhost:9090"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tiercast: error: --prometheus-url needs --config")
    assert list(workdir.iterdir()) == []


def test_prometheus_url_without_a_config_in_serve_says_to_pass_config(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--once", "--prometheus-url", "http://localhost:9090"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--prometheus-url needs --config" in line


def test_prometheus_url_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    from forecaster.errors import BadInputError

    queried = _prometheus_config(tmp_path / "c.yaml")
    with pytest.raises(BadInputError, match="--prometheus-url: 'ftp://prom'"):
        loading.load_cycle_config(str(queried), _args(prometheus_url="ftp://prom"))
    with pytest.raises(BadInputError, match="--history replaces"):
        loading.load_cycle_config(
            str(queried), _args(prometheus_url="http://prom:9090", history="h.csv")
        )
    files = tmp_path / "files.yaml"
    files.write_text(
        yaml.safe_dump(
            {
                "signals": [{"name": "rps", "file": "h.csv"}],
                "workloads": [
                    {"name": "w", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 1}
                ],
                "pools": [
                    {
                        "name": "gpu",
                        "tier": "on-demand",
                        "gpu_model": "H100-80GB",
                        "gpus_per_node": 8,
                        "price_per_gpu_hour": 4.0,
                    }
                ],
            }
        )
    )
    with pytest.raises(BadInputError, match="has a 'query'"):
        loading.load_cycle_config(str(files), _args(prometheus_url="http://prom:9090"))
