"""Every output written one bounded way (issue #50, finding 9).

One writer (:func:`forecaster.files.write_output`) for every file a flag or the config
names: a FIFO with no reader, a full device, a folder or a stalled reader is one line
naming the flag (exit 2), never a hang or a traceback; a link or special file planted at a
name tiercast owns is refused, never followed; and nothing claims a file it did not write.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import forecaster.files as files
from forecaster.files import OutputError, check_output, check_output_folder, write_output
from scaler.cli import main

DEV_FULL = Path("/dev/full")


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail (not hang) when the block takes longer than ``seconds``."""

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"no answer in {seconds} s: the write blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _history(path: Path, days: int = 3) -> Path:
    index = pd.date_range("2026-11-01", periods=days * 288, freq="5min")
    values = 50 + 20 * np.sin(np.arange(len(index)) * 2 * np.pi / 288)
    pd.DataFrame({"timestamp": index.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values}).to_csv(
        path, index=False
    )
    return path


def _one_error_line(err: str, *words: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("tiercast: ")]
    assert "Traceback" not in err
    assert len(errors) == 1, err
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


# -- the writer ----------------------------------------------------------------------


def test_a_fifo_with_no_reader_is_one_line_naming_the_flag_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with _deadline(5), pytest.raises(OutputError, match=r"--plan-out .*FIFO with no reader"):
        write_output(fifo, "{}", "--plan-out")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_reader_that_stops_reading_ends_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "WRITE_STALL_S", 0.2)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with _deadline(5), pytest.raises(OutputError, match=r"--out-file .*took no data"):
            write_output(fifo, b"x" * (4 << 20), "--out-file")
    finally:
        os.close(reader)


@pytest.mark.skipif(not DEV_FULL.is_char_device(), reason="no /dev/full on this system")
def test_a_full_device_is_one_line_naming_the_flag() -> None:
    with pytest.raises(OutputError, match="--timeline-out '/dev/full': no space left"):
        write_output(DEV_FULL, "a,b\n" * 1000, "--timeline-out")


def test_a_folder_at_the_output_is_one_line_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "plan.json"
    folder.mkdir()
    (folder / "inside").write_text("kept")
    with pytest.raises(OutputError, match=r"--plan-out .*is a directory"):
        write_output(folder, "{}", "--plan-out")
    with pytest.raises(OutputError, match=r"--plan-out .*is a directory"):
        check_output(folder, "--plan-out")
    assert (folder / "inside").read_text() == "kept"
    assert sorted(p.name for p in folder.iterdir()) == ["inside"]


def test_character_devices_and_links_the_user_gave_are_written_through(tmp_path: Path) -> None:
    write_output("/dev/null", "discarded", "--out-file")
    real = tmp_path / "real.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(real)  # dangling: the user's link names where the file goes
    write_output(link, "a\n", "--out-file")
    assert link.is_symlink() and real.read_text() == "a\n"


def test_a_link_planted_at_a_file_tiercast_owns_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    planted = tmp_path / "state" / "tiercast-plan.json"
    planted.parent.mkdir()
    planted.symlink_to(elsewhere)
    with pytest.raises(OutputError, match="refusing to write through a link"):
        write_output(planted, "{}", "the default plan file", owned=True)
    assert not elsewhere.exists() and planted.is_symlink()


def test_a_linked_folder_under_an_owned_file_is_refused(tmp_path: Path) -> None:
    from forecaster.history_store import HistoryStore, signal_key

    store = HistoryStore(tmp_path / "history", step=pd.Timedelta("5min"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / signal_key("rps")).symlink_to(elsewhere)
    series = pd.Series([1.0, 2.0], index=pd.date_range("2026-11-01", periods=2, freq="5min"))
    assert store.append({"rps": series}) == 0
    assert list(elsewhere.iterdir()) == []


def test_a_dangling_records_link_is_refused_not_created_through(tmp_path: Path) -> None:
    from scaler.records import RecordsError, RunRecord, RunStore

    target = tmp_path / "elsewhere.sqlite"
    link = tmp_path / "runs.sqlite"
    link.symlink_to(target)
    record = RunRecord("r1", "cycle", "2026-12-05T00:00:00Z", "2026-12-05T00:00:01Z", 1.0, "ok", 0)
    with pytest.raises(RecordsError, match="link to nothing"):
        RunStore(link).add(record)
    assert not target.exists()


def test_a_non_folder_where_a_folder_goes_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "cache"
    afile.write_text("")
    with pytest.raises(OutputError, match=r"--forecast-cache .*is a file; expected a folder"):
        check_output_folder(afile, "--forecast-cache")
    with pytest.raises(OutputError, match=r"--forecast-cache .*is a file; expected a folder"):
        check_output_folder(afile / "below", "--forecast-cache")
    check_output_folder(tmp_path / "new" / "folder", "--forecast-cache")
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_the_chart_is_written_at_the_name_given_without_adding_png(tmp_path: Path) -> None:
    from scaler.replay.timeline import write_chart

    index = pd.date_range("2026-11-01", periods=12, freq="5min")
    demand = pd.Series(np.arange(12.0), index=index)
    run = SimpleNamespace(usable_total=pd.Series(np.ones(12), index=index))
    trace = SimpleNamespace(test_index=index, demand=demand, test_start=index[0], name="t")
    replay = SimpleNamespace(
        trace=trace, runs={"predictive": run}, setup=SimpleNamespace(gpus_per_node=8)
    )
    write_chart(replay, str(tmp_path / "chart"))  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["chart"]
    assert (tmp_path / "chart").read_bytes().startswith(b"\x89PNG")


# -- the commands ----------------------------------------------------------------------


def test_a_non_folder_forecast_cache_is_refused_before_the_replay(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import scaler.cli.simulate as simulate

    def no_replay(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the replay ran before the output was checked")

    monkeypatch.setattr(simulate, "prepare_trace", no_replay)
    history = _history(workdir / "h.csv")
    argv = ["simulate", "--history", str(history)]
    assert main([*argv, "--forecast-cache", str(history)]) == 2
    _one_error_line(capsys.readouterr().err, "--forecast-cache", "expected a folder")
    (workdir / "folder").mkdir()
    assert main([*argv, "--timeline-out", "folder"]) == 2
    _one_error_line(capsys.readouterr().err, "--timeline-out", "is a directory")


@pytest.mark.slow
def test_forecast_to_a_full_device_or_a_fifo_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _history(workdir / "h.csv")
    os.mkfifo(workdir / "pipe")
    outputs = ["pipe", "/dev/full"] if DEV_FULL.is_char_device() else ["pipe"]
    for out in outputs:
        with _deadline(60):
            code = main(["forecast", "--history", str(history), "--out-file", out])
        assert code == 2
        _one_error_line(capsys.readouterr().err, "--out-file", out)


@pytest.mark.slow
def test_plan_refuses_a_link_planted_at_the_default_plan_file(
    workdir: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _history(workdir / "h.csv")
    state_dir.mkdir(parents=True)
    elsewhere = workdir / "elsewhere.json"
    (state_dir / "tiercast-plan.json").symlink_to(elsewhere)
    assert main(["plan", "--history", str(history)]) == 2
    captured = capsys.readouterr()
    _one_error_line(captured.err, "default plan file", "link")
    assert "plan written to" not in captured.out
    assert not elsewhere.exists()


@pytest.mark.slow
def test_run_says_only_what_it_wrote(
    workdir: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _history(workdir / "h.csv")
    (workdir / "plan.json").mkdir()
    argv = ["run", "--dry-run", "--history", str(history)]
    with _deadline(120):
        code = main([*argv, "--plan-out", "plan.json"])
    captured = capsys.readouterr()
    assert code == 2
    _one_error_line(captured.err, "--plan-out", "is a directory")
    assert "plan written to" not in captured.out
    # Records that cannot be written: the plan is, the record is not, and it says so.
    (state_dir / "tiercast-records.sqlite").unlink(missing_ok=True)
    (state_dir / "tiercast-records.sqlite").symlink_to(workdir / "gone" / "x.sqlite")
    main([*argv, "--plan-out", "out.json"])
    out = capsys.readouterr().out
    assert "plan written to out.json" in out
    assert "run record in" not in out


@pytest.mark.slow
def test_a_fifo_at_the_finance_report_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _history(workdir / "h.csv")
    (workdir / "finance").mkdir()
    os.mkfifo(workdir / "finance" / "finance.html")
    with _deadline(120):
        code = main(["plan", "--history", str(history), "--out-dir", "finance"])
    assert code == 2
    _one_error_line(capsys.readouterr().err, "--out-dir", "finance.html", "FIFO")


def test_the_writer_names_each_reason() -> None:
    for number, words in (
        (errno.ENXIO, "no reader"),
        (errno.ENOSPC, "no space"),
        (errno.EISDIR, "directory"),
        (errno.ETIMEDOUT, "took no data"),
    ):
        assert words in files.write_error_text(OSError(number, os.strerror(number)))


# -- least exposure ---------------------------------------------------------------------


def test_report_csv_cells_that_would_run_as_formulas_are_neutralised() -> None:
    import csv
    import io

    from scaler.reports.csvjson import table_csv
    from scaler.reports.document import Column, Table

    names = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "llm-api"]
    table = Table(
        "workloads",
        "Workloads",
        [Column("workload", "Workload"), Column("gpus", "GPUs", digits=1)],
        [{"workload": n, "gpus": -1.5} for n in names],
    )
    rows = list(csv.reader(io.StringIO(table_csv(table), newline="")))
    cells = [r[0] for r in rows[1:]]
    assert cells[:5] == ["'" + n for n in names[:5]]
    assert cells[5] == "'\nx"  # a bare carriage return would split the row
    assert cells[6] == "llm-api"
    assert {r[1] for r in rows[1:]} == {"-1.5"}  # numbers are written as they are


def test_a_world_writable_state_folder_draws_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from scaler.config import parse_config
    from scaler.inputs.loading import with_state_paths

    state = tmp_path / "state"
    (state / "models").mkdir(parents=True)
    os.chmod(state, 0o777)
    os.chmod(state / "models", 0o777)
    config = parse_config(
        {
            "signals": [{"name": "s", "step_s": 300}],
            "workloads": [
                {"name": "w", "signal": "s", "gpu_model": "H100", "units_per_replica": 1}
            ],
            "pools": [
                {
                    "name": "p",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 1.0,
                }
            ],
            "service": {"state_dir": str(state)},
        }
    )
    for _ in range(2):
        with_state_paths(config)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warned if "state folder" in w and "world-writable" in w]) == 1
    assert len([w for w in warned if "models folder" in w and "world-writable" in w]) == 1
    os.chmod(state, 0o755)
    assert not files.world_writable(state)


def test_a_user_named_folder_that_is_a_link_is_written_into(tmp_path: Path) -> None:
    # The model store's folder (model_store.path) may be a link the user made to a volume.
    volume = tmp_path / "volume"
    volume.mkdir()
    (tmp_path / "models").symlink_to(volume)
    files.write_atomic(tmp_path / "models" / "m.json", "{}", owned=True)
    assert (volume / "m.json").read_text() == "{}"
