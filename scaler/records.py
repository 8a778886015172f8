"""Run records: what every job run saw, planned, did and how it ended, in SQLite.

One row per run (cycle, refit or report): an inputs summary per signal, a forecast
summary per signal and quantile, a compact plan, each action with its outcome, the
status and the error. The full plan JSON is kept zlib-compressed beside it.

Beside the runs, the node starts observed for ``lead_time_s: auto`` pools
(:class:`LeadTimeObservation`, one row per pool and object, so an object seen by
every cycle counts once), pruned with the same retention; :meth:`RunStore.recent_lead_times`
reads the newest of each pool.

A record is written in one SQLite transaction (journal in WAL mode, ``synchronous
= FULL``), so a crash or a kill mid-write leaves either the whole record or none,
never a partial one. Each write opens its own connection, so scheduler threads
never share one. ``tiercast history`` prints the records as a table or JSON.

Every cycle record (dry-run or not) carries a ``shadow`` section: per pool the capacity
the cluster actually had when the cycle planned (nodes, Ready nodes and the allocatable
GPUs of the Ready nodes, read from the provider's node listing before acting), the nodes
the plan asked for now, the pool's node size, price and lead time, and the demand in GPUs
per GPU model the newest observations imply (:mod:`scaler.reports.shadow` writes and
scores it; ``tiercast shadow`` prints it). A pool whose nodes the provider does not read
from a cluster (``recording`` pools, ``tiercast report``) has no capacity recorded: it is
left missing, never filled in from the config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, TemporaryError
from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from forecaster.secrets import redact
from forecaster.series import History
from scaler.plans import CapacityPlan, iso

STATUSES: tuple[str, ...] = ("ok", "held", "failed", "abandoned")
"""``ok``: done as planned. ``held``: done, but pools were held on stale or missing data.
``failed``: an error stopped the run or an action failed. ``abandoned``: stopped
safely by a shutdown before acting."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    job TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    plan_z BLOB
);
CREATE INDEX IF NOT EXISTS runs_job ON runs (job, seq);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at);
CREATE TABLE IF NOT EXISTS lead_times (
    pool TEXT NOT NULL,
    object TEXT NOT NULL,
    started TEXT NOT NULL,
    ready TEXT NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (pool, object)
);
CREATE INDEX IF NOT EXISTS lead_times_ready ON lead_times (pool, ready);
"""

LEAD_TIME_WINDOW = 30
"""Observations per pool :meth:`RunStore.recent_lead_times` reads by default: the newest 30
node starts (the q0.9 of ``lead_time_s: auto`` is taken over them)."""


class RecordsError(TemporaryError):
    """The run-record database cannot be opened, read or written."""


@dataclass(frozen=True)
class RunRecord:
    """One job run. Times are ISO-8601 UTC strings (``plans.iso``)."""

    run_id: str
    job: str
    """``cycle``, ``refit`` or ``report``."""
    started_at: str
    finished_at: str
    duration_s: float
    status: str
    """One of :data:`STATUSES`."""
    exit_code: int
    """What ``tiercast run`` exits with for this run: 0 ok, 1 held or failed, 2 bad input,
    143 abandoned on SIGTERM."""
    dry_run: bool = True
    leader: bool = True
    """Whether this replica held the Lease (and so was allowed to actuate)."""
    identity: str = ""
    """Replica identity (pod name or host name)."""
    source: str = ""
    """Where config and history came from."""
    error: str | None = None
    """One line: the error class and message, when the run failed."""
    inputs: dict[str, Any] = field(default_factory=dict)
    forecast: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shadow: dict[str, Any] = field(default_factory=dict)
    """Cycles: the capacity the cluster had beside the plan and the demand
    (:func:`scaler.reports.shadow.shadow_summary`); empty for other jobs and for records
    of older versions."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LeadTimeObservation:
    """One node start of a pool: asked for at ``started``, serving at ``ready``.

    Measured from the cluster by :mod:`scaler.actuation.kube.readiness`; times are
    ISO-8601 UTC strings (``plans.iso``).
    """

    pool: str
    object: str
    """``Kind/name`` of the object measured (``NodeClaim/gpu-spot-x7k2p``, ``Node/...``,
    ``Machine/...``): an object is counted once however many cycles see it."""
    started: str
    ready: str
    seconds: float
    """``ready`` - ``started``, in seconds."""


def _num(x: Any) -> float | None:
    v = float(x)
    return round(v, 6) if np.isfinite(v) else None


def inputs_summary(history: History) -> dict[str, Any]:
    """Per signal: points, gaps, first and newest observed sample, newest value."""
    out: dict[str, Any] = {}
    for name, y in history.items():
        seen = y.dropna()
        out[name] = {
            "points": len(y),
            "missing": int(y.isna().sum()),
            "first": iso(seen.index[0]) if len(seen) else None,
            "last": iso(seen.index[-1]) if len(seen) else None,
            "last_value": _num(seen.iloc[-1]) if len(seen) else None,
        }
    return out


def forecast_summary(
    forecasts: Mapping[str, SeriesForecast], quantiles: list[float], lead_s: int
) -> dict[str, Any]:
    """Per signal: estimator, and per quantile the value one lead time ahead and the peak."""
    out: dict[str, Any] = {}
    for name, fc in forecasts.items():
        at = fc.last_timestamp + pd.Timedelta(seconds=lead_s)
        ahead = fc.frame[fc.frame.index >= at]
        row = ahead.iloc[0] if len(ahead) else fc.frame.iloc[-1]
        out[name] = {
            "estimator": fc.estimator,
            "reason": fc.reason,
            "last_timestamp": iso(fc.last_timestamp),
            "at_lead": {
                quantile_column(q): _num(row[quantile_column(q)])
                for q in quantiles
                if quantile_column(q) in fc.frame
            },
            "peak": {
                quantile_column(q): _num(fc.frame[quantile_column(q)].max())
                for q in quantiles
                if quantile_column(q) in fc.frame
            },
        }
    return out


def plan_summary(plan: CapacityPlan) -> dict[str, Any]:
    """The plan without its timelines: pools now, cost, risk and notes."""
    return {
        "created_at": plan.created_at,
        "quantile": plan.quantile,
        "horizon_s": plan.horizon_s,
        "pools": {
            p.pool: {
                "tier": p.tier,
                "current_nodes": p.current_nodes,
                "target_nodes_now": p.target_nodes[0] if p.target_nodes else p.current_nodes,
                "target_nodes_max": max(p.target_nodes) if p.target_nodes else p.current_nodes,
                "binding": list(p.binding),
            }
            for p in plan.pools
        },
        "cost": plan.cost,
        "risk": plan.risk,
    }


class RunStore:
    """Run records in one SQLite file; safe to use from several threads and processes."""

    def __init__(self, path: str | Path, keep_days: int = 30) -> None:
        self.path = Path(path)
        self.keep_days = keep_days
        self.skipped: list[Any] = []
        """Row numbers (``seq``) the last :meth:`recent` skipped as corrupt."""

    def _connect(self, create: bool) -> sqlite3.Connection:
        if not create and not self.path.is_file():
            raise BadInputError(
                f"run records {str(self.path)!r} do not exist; "
                "a cycle writes them (service.records_path)"
            )
        if create and self.path.is_symlink() and not self.path.exists():
            # SQLite would create the file wherever the planted link points.
            raise RecordsError(
                f"run records {str(self.path)!r} is a link to nothing; refusing to create "
                "the records through it (remove the link or set service.records_path)"
            )
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(_SCHEMA)
            return conn
        except (sqlite3.Error, OSError) as exc:
            raise RecordsError(f"run records {str(self.path)!r}: cannot open: {exc}") from exc

    def add(self, record: RunRecord, plan: CapacityPlan | None = None) -> None:
        """Write one record (and its full plan) atomically; prune records past retention."""
        if record.status not in STATUSES:
            raise ValueError(f"status {record.status!r} is not one of {', '.join(STATUSES)}")
        # Whatever an error or note quotes (a server's echo of a header) is masked first.
        record = dataclasses.replace(
            record,
            error=redact(record.error) if record.error is not None else None,
            notes=[redact(str(n)) for n in record.notes],
        )
        # Serialize before opening the transaction: a value that cannot be written
        # must fail here, not leave a transaction half done.
        try:
            body = json.dumps(record.to_dict(), allow_nan=False, default=str)
        except ValueError as exc:
            raise RecordsError(f"run {record.run_id}: record cannot be serialized: {exc}") from exc
        plan_z = zlib.compress(plan.to_json(indent=None).encode()) if plan is not None else None
        cutoff = iso(pd.Timestamp(record.started_at) - pd.Timedelta(days=self.keep_days))
        with self._writing(f"run {record.run_id}") as conn:
            conn.execute(
                "INSERT INTO runs (run_id, job, started_at, finished_at, status, body, plan_z)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.run_id,
                    record.job,
                    record.started_at,
                    record.finished_at,
                    record.status,
                    body,
                    plan_z,
                ),
            )
            conn.execute("DELETE FROM runs WHERE started_at < ?", (cutoff,))
            conn.execute("DELETE FROM lead_times WHERE ready < ?", (cutoff,))

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back (and a
        :class:`RecordsError` naming ``what``) where SQLite fails, the connection closed."""
        conn = self._connect(create=True)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise RecordsError(
                f"run records {str(self.path)!r}: cannot write {what}: {exc}"
            ) from exc
        finally:
            conn.close()

    def recent(self, limit: int = 20, job: str | None = None) -> list[RunRecord]:
        """The newest records first (by write order, not by clock: clocks jump).

        A row that cannot be read back as a record (hand-edited, half-written by an old
        version, another tool's table) is skipped; :attr:`skipped` says how many.
        """
        conn = self._connect(create=False)
        try:
            sql = "SELECT seq, body FROM runs"
            params: tuple[Any, ...] = ()
            if job:
                sql += " WHERE job = ?"
                params = (job,)
            rows = conn.execute(sql + " ORDER BY seq DESC LIMIT ?", (*params, limit)).fetchall()
        except sqlite3.Error as exc:
            raise RecordsError(f"run records {str(self.path)!r}: cannot read: {exc}") from exc
        finally:
            conn.close()
        out = []
        self.skipped = []
        for seq, body in rows:
            record = _record_from_row(body)
            if record is None:
                self.skipped.append(seq)
            else:
                out.append(record)
        return out

    def add_lead_times(self, observations: Sequence[LeadTimeObservation], now: str) -> int:
        """Keep the node starts not kept yet (by pool and object); prune those past retention.

        ``now`` (ISO-8601) dates the retention: starts that became ready more than
        ``keep_days`` before it are neither added nor kept. Returns how many were new.
        """
        cutoff = iso(pd.Timestamp(now) - pd.Timedelta(days=self.keep_days))
        rows = [
            (o.pool, o.object, o.started, o.ready, float(o.seconds))
            for o in observations
            if o.ready >= cutoff and np.isfinite(o.seconds)
        ]
        with self._writing("lead-time observations") as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO lead_times (pool, object, started, ready, seconds)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            added = conn.total_changes - before
            conn.execute("DELETE FROM lead_times WHERE ready < ?", (cutoff,))
        return added

    def recent_lead_times(
        self, limit: int = LEAD_TIME_WINDOW, pools: Sequence[str] | None = None
    ) -> dict[str, list[LeadTimeObservation]]:
        """The newest ``limit`` node starts of each pool (by ``ready``, newest first).

        No records file yet means no observations (an empty dict), not an error.
        """
        if not self.path.is_file():
            return {}
        conn = self._connect(create=False)
        try:
            rows = conn.execute(
                "SELECT pool, object, started, ready, seconds FROM ("
                " SELECT *, ROW_NUMBER() OVER (PARTITION BY pool ORDER BY ready DESC, object)"
                " AS n FROM lead_times"
                ") WHERE n <= ? ORDER BY pool, ready DESC, object",
                (limit,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise RecordsError(f"run records {str(self.path)!r}: cannot read: {exc}") from exc
        finally:
            conn.close()
        out: dict[str, list[LeadTimeObservation]] = {}
        for pool, obj, started, ready, seconds in rows:
            if pools is not None and pool not in pools:
                continue
            out.setdefault(pool, []).append(
                LeadTimeObservation(pool, obj, started, ready, float(seconds))
            )
        return out

    def runs_between(self, job: str, start: str, end: str) -> list[tuple[str, str]]:
        """``(run_id, started_at)`` of the ``job`` runs that started between ``start`` and
        ``end`` (ISO-8601 UTC with a ``Z``, as records keep them), oldest first; read off
        the indexed columns without parsing any record."""
        conn = self._connect(create=False)
        try:
            rows = conn.execute(
                "SELECT run_id, started_at FROM runs WHERE job = ? AND started_at >= ? "
                "AND started_at <= ? ORDER BY started_at",
                (job, start, end),
            ).fetchall()
        except sqlite3.Error as exc:
            raise RecordsError(f"run records {str(self.path)!r}: cannot read: {exc}") from exc
        finally:
            conn.close()
        return [(str(r), str(t)) for r, t in rows]

    def full_plan(self, run_id: str) -> dict[str, Any] | None:
        """The complete plan JSON of one run, or None when the run made no plan."""
        conn = self._connect(create=False)
        try:
            row = conn.execute("SELECT plan_z FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        except sqlite3.Error as exc:
            raise RecordsError(f"run records {str(self.path)!r}: cannot read: {exc}") from exc
        finally:
            conn.close()
        if row is None:
            raise BadInputError(f"--run: no run {run_id[:100]!r} in {str(self.path)!r}")
        if row[0] is None:
            return None
        try:
            plan = json.loads(zlib.decompress(row[0]))
        except (zlib.error, TypeError, ValueError, RecursionError) as exc:
            raise RecordsError(
                f"run records {str(self.path)!r}: the plan of run {run_id[:100]!r} is corrupt "
                f"({type(exc).__name__})"
            ) from None
        return plan if isinstance(plan, dict) else None


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "run_id": str,
    "job": str,
    "started_at": str,
    "finished_at": str,
    "duration_s": (int, float),
    "status": str,
    "exit_code": int,
    "dry_run": bool,
    "leader": bool,
    "identity": str,
    "source": str,
    "error": (str, type(None)),
    "inputs": dict,
    "forecast": dict,
    "plan": (dict, type(None)),
    "actions": list,
    "notes": list,
    "shadow": dict,
}


def _record_from_row(body: Any) -> RunRecord | None:
    """The record stored in one row, or None when the row is not a well-formed record."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) - set(_FIELD_TYPES):
        return None
    for name, kind in _FIELD_TYPES.items():
        if name in data and not isinstance(data[name], kind):
            return None
    if not all(isinstance(a, dict) for a in data.get("actions", [])):
        return None
    plan = data.get("plan")
    if plan is not None and not isinstance(plan.get("cost", {}), dict):
        return None
    try:
        return RunRecord(**data)
    except TypeError:  # a required field is missing
        return None


def _actions_cell(record: RunRecord) -> str:
    if not record.actions:
        return "-"
    counts: dict[str, int] = {}
    for a in record.actions:
        key = f"{a.get('decision', '?')} {a.get('outcome', '?')}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def history_table(records: list[RunRecord]) -> str:
    """One line per run, newest first."""
    rows = [("STARTED", "JOB", "STATUS", "SECS", "MODE", "ACTIONS", "COST/H", "DETAIL")]
    for r in records:
        mode = "dry-run" if r.dry_run else ("leader" if r.leader else "follower")
        cost = r.plan.get("cost", {}).get("per_hour_now") if r.plan else None
        if not isinstance(cost, int | float) or isinstance(cost, bool):
            cost = None
        detail = " ".join(redact(str(r.error or next(iter(r.notes), ""))).split())
        rows.append(
            (
                r.started_at,
                r.job,
                r.status,
                f"{r.duration_s:.1f}",
                mode,
                _actions_cell(r),
                "-" if cost is None else f"{cost:.2f}",
                detail,
            )
        )
    # Aligned by hand, not with forecaster.tables.aligned: DETAIL follows unpadded, and a
    # blank one still ends its line with the separator, which aligned would strip.
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row[:7], widths, strict=True)) + "  " + row[7]
        for row in rows
    )
