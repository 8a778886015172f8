"""Run records: round trip, atomic writes (a kill mid-write leaves no partial row), retention,
errors as one line, and ``tiercast history`` as a table and JSON."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forecaster.errors import BadInputError
from scaler.cli import main
from scaler.records import RecordsError, RunRecord, RunStore, history_table
from tests.conftest import REPO


def record(run_id: str, started: str = "2026-11-30T10:00:00Z", **kw: object) -> RunRecord:
    base: dict = dict(
        run_id=run_id,
        job="cycle",
        started_at=started,
        finished_at=started,
        duration_s=1.5,
        status="ok",
        exit_code=0,
        actions=[{"pool": "gpu-a", "decision": "scale-up", "outcome": "applied", "message": "ok"}],
        plan={"cost": {"per_hour_now": 12.5}},
    )
    base.update(kw)
    return RunRecord(**base)


def test_round_trip_newest_first_and_job_filter(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "sub" / "runs.sqlite")
    store.add(record("a"))
    store.add(record("b", status="held", notes=["gpu: signal 'x' is stale; holding"]))
    store.add(record("c", job="refit", actions=[]))
    got = store.recent()
    assert [r.run_id for r in got] == ["c", "b", "a"]
    assert got[1] == record("b", status="held", notes=["gpu: signal 'x' is stale; holding"])
    assert [r.run_id for r in store.recent(job="cycle", limit=1)] == ["b"]
    table = history_table(got)
    assert "1 scale-up applied" in table and "12.50" in table and "stale" in table


def test_order_is_write_order_even_when_the_clock_jumps_back(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    store.add(record("later-clock", started="2026-11-30T12:00:00Z"))
    store.add(record("earlier-clock", started="2026-11-30T11:00:00Z"))
    assert [r.run_id for r in store.recent()] == ["earlier-clock", "later-clock"]


def test_retention_prunes_old_records_in_the_same_write(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite", keep_days=7)
    store.add(record("old", started="2026-11-01T00:00:00Z"))
    store.add(record("new", started="2026-11-30T00:00:00Z"))
    assert [r.run_id for r in store.recent()] == ["new"]


@pytest.mark.slow
def test_a_kill_mid_write_leaves_no_partial_record(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    RunStore(path).add(record("before"))
    # The child process dies (no cleanup, as on SIGKILL or power loss) after the row is
    # inserted and before the transaction commits.
    script = textwrap.dedent(
        f"""
        import os, sqlite3
        import scaler.records as records
        from tests.test_records import record

        class Dies(sqlite3.Connection):
            def execute(self, sql, *args):
                if sql.startswith("DELETE"):
                    os._exit(9)
                return super().execute(sql, *args)

        real = sqlite3.connect
        records.sqlite3.connect = lambda *a, **k: real(*a, factory=Dies, **k)
        records.RunStore({str(path)!r}).add(record("torn"))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=60)
    assert done.returncode == 9
    store = RunStore(path)
    assert [r.run_id for r in store.recent()] == ["before"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store.add(record("after"))
    assert [r.run_id for r in store.recent()] == ["after", "before"]


def test_unserializable_record_writes_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    store.add(record("a"))
    with pytest.raises(RecordsError, match="cannot be serialized"):
        store.add(record("nan", duration_s=float("nan")))
    assert [r.run_id for r in store.recent()] == ["a"]


def test_unwritable_and_corrupt_files_are_one_line_records_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RecordsError, match="cannot open") as info:
        RunStore(blocker / "runs.sqlite").add(record("a"))
    assert "\n" not in str(info.value)
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RecordsError, match=r"corrupt\.sqlite"):
        RunStore(corrupt).add(record("a"))
    with pytest.raises(BadInputError, match="do not exist"):
        RunStore(tmp_path / "missing.sqlite").recent()


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_history_command_table_json_and_full_plan(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--dry-run"]) == 0
    capsys.readouterr()
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("STARTED") and " cycle " in out and " ok " in out
    assert main(["history", "--json", "-n", "5"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 1 and runs[0]["status"] == "ok" and runs[0]["exit_code"] == 0
    assert {"chat_rps", "code_rps"} <= set(runs[0]["inputs"])
    assert "q0.9" in runs[0]["forecast"]["chat_rps"]["peak"]
    assert main(["history", "--run", runs[0]["run_id"]]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["created_at"] == runs[0]["plan"]["created_at"] and plan["timeline"]
    assert main(["history", "--records", "nope.sqlite"]) == 2
    assert "do not exist" in capsys.readouterr().err


def test_history_skips_corrupt_rows_and_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    store.add(record("good1"))
    store.add(record("good2", error="TemporaryError: token=abc123 leaked"))
    conn = sqlite3.connect(path)
    for body in (
        "not json",
        "[1, 2]",
        '{"run_id": 5}',
        json.dumps({"run_id": "x", "job": "cycle"}),
        json.dumps({**record("typed").to_dict(), "duration_s": "slow"}),
        json.dumps({**record("plan").to_dict(), "plan": {"cost": 3}}),
    ):
        conn.execute(
            "INSERT INTO runs (run_id, job, started_at, finished_at, status, body, plan_z)"
            " VALUES (?, 'cycle', '2026-11-30T10:00:00Z', '2026-11-30T10:00:01Z', 'ok', ?, x'00')",
            (f"bad-{len(body)}", body),
        )
    conn.commit()
    conn.close()
    assert main(["history", "--records", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "good1" not in err and out.count("cycle") == 2 and "abc123" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "skipped 6 corrupt run record(s)" in lines[0]
    assert main(["history", "--records", str(path), "--json"]) == 0
    assert "abc123" not in capsys.readouterr().out
    bad = next(
        r
        for (r,) in sqlite3.connect(path).execute(
            "SELECT run_id FROM runs WHERE run_id LIKE 'bad-%'"
        )
    )
    assert main(["history", "--records", str(path), "--run", bad]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corrupt" in err[0]
