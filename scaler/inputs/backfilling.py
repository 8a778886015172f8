"""``tiercast backfill``: load CSV traces into a Prometheus TSDB as a named metric.

So that a user can try tiercast on exported data, and the tests can build real
history, this module writes the samples as OpenMetrics text and hands the file to
``promtool tsdb create-blocks-from openmetrics``, which writes TSDB blocks a
Prometheus server loads from its ``--storage.tsdb.path``.

promtool's rules, and how they are kept here:

* timestamps are in **seconds** since the epoch (CSV timestamps are UTC);
* the samples of one series must be in time order, and one timestamp holds one
  value: rows are sorted per series, and of duplicate timestamps the last row
  in the file wins (the same rule as :func:`forecaster.series.clean_series`);
* the file ends with the ``# EOF`` line;
* promtool cuts blocks of 2 h; newer promtool versions accept
  ``--max-block-duration``, which is passed when given and supported, so a long
  trace makes fewer, larger blocks;
* Prometheus deletes blocks older than its retention at start-up: run it with a
  ``--storage.tsdb.retention.time`` longer than the age of the data.

An empty CSV value is a gap and writes no sample; ``NaN``, ``+Inf`` and ``-Inf``
are written as such, because real Prometheus data holds them and the collection
side must cope (see :mod:`forecaster.hygiene`).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, DataError, TemporaryError

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class TraceSeries:
    """One series to backfill: its labels (beyond the metric name) and its samples."""

    labels: Mapping[str, str]
    timestamps_s: np.ndarray
    """Seconds since the epoch, sorted, unique."""
    values: np.ndarray


@dataclass
class BackfillResult:
    metric: str
    series: list[TraceSeries] = field(default_factory=list)
    tsdb: Path = Path(".")
    blocks: int = 0
    warnings: list[str] = field(default_factory=list)
    """What was asked for and not done (a flag this promtool lacks), one line each."""

    @property
    def samples(self) -> int:
        return sum(len(s.values) for s in self.series)


def check_metric_name(name: str) -> str:
    if not METRIC_NAME.match(name):
        raise BadInputError(
            f"--metric: {name!r} is not a Prometheus metric name; expected [a-zA-Z_:][a-zA-Z0-9_:]*"
        )
    return name


def check_label_name(name: str, where: str = "--label") -> str:
    if not LABEL_NAME.match(name) or name.startswith("__"):
        raise BadInputError(
            f"{where}: {name!r} is not a Prometheus label name; expected [a-zA-Z_][a-zA-Z0-9_]* "
            "not starting with '__'"
        )
    return name


def parse_labels(items: Iterable[str]) -> dict[str, str]:
    """``["model=chat", "pool=a"]`` -> ``{"model": "chat", "pool": "a"}``."""
    labels: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise BadInputError(f"--label: {item!r} is not NAME=VALUE")
        labels[check_label_name(name.strip())] = value
    return labels


def read_trace_csv(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read ``timestamp,value`` or ``timestamp,series,value`` keeping NaN and Inf apart from gaps.

    Returns ``{series name: (seconds, values)}``, sorted by time with duplicate
    timestamps resolved to the last row. :func:`forecaster.series.read_history_csv`
    is not used because it turns ``Inf`` into a gap, and a backfill must keep what
    the file says.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"trace file {str(p)!r} does not exist")
    try:
        frame = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"trace file {str(p)!r} is not a readable CSV: {exc}") from exc
    cols = {c.strip().lower(): c for c in frame.columns}
    tcol = cols.get("timestamp") or cols.get("ds") or cols.get("time")
    vcol = cols.get("value") or cols.get("y")
    scol = cols.get("series") or cols.get("unique_id") or cols.get("name")
    if tcol is None or vcol is None:
        raise DataError(
            f"trace file {str(p)!r}: expected columns 'timestamp,value' (or 'timestamp,series,value'), "
            f"got {','.join(frame.columns)!r}"
        )
    stamps = pd.to_datetime(frame[tcol], errors="coerce", utc=True, format="mixed")
    if stamps.isna().any():
        i = int(np.flatnonzero(stamps.isna().to_numpy())[0])
        raise DataError(
            f"trace file {str(p)!r} line {i + 2}: column {tcol!r} has {frame[tcol].iloc[i]!r}, "
            "expected an ISO-8601 timestamp"
        )
    raw = frame[vcol].str.strip()
    values = np.full(len(raw), np.nan)
    keep = np.ones(len(raw), dtype=bool)
    for i, text in enumerate(raw):
        if text == "":
            keep[i] = False  # an empty value is a gap: no sample at all
            continue
        try:
            values[i] = float(text)
        except ValueError:
            raise DataError(
                f"trace file {str(p)!r} line {i + 2}: column {vcol!r} has {text!r}, "
                "expected a number, NaN, +Inf, -Inf or empty"
            ) from None
    # Seconds with millisecond precision: Prometheus stores milliseconds.
    seconds = pd.DatetimeIndex(stamps).as_unit("ms").asi8 / 1000.0
    names = frame[scol].to_numpy(dtype=str) if scol is not None else np.full(len(raw), p.stem)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in sorted(set(names[keep])):
        sel = keep & (names == name)
        t, v = seconds[sel], values[sel]
        order = np.argsort(t, kind="stable")
        t, v = t[order], v[order]
        # After a stable sort the last of equal timestamps is the last row in the file.
        last = np.append(t[1:] != t[:-1], True)
        out[str(name)] = (t[last], v[last])
    return out


def _format_value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def openmetrics_lines(metric: str, series: Sequence[TraceSeries]) -> Iterable[str]:
    """The OpenMetrics exposition of ``series`` under ``metric``, ending with ``# EOF``."""
    check_metric_name(metric)
    # 'gauge' for every metric: promtool stores the samples the same way whatever
    # the type, and OpenMetrics requires counter sample names to end in _total.
    yield f"# TYPE {metric} gauge\n"
    for s in series:
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(s.labels.items()))
        head = f"{metric}{{{labels}}}" if labels else metric
        for t, v in zip(s.timestamps_s.tolist(), s.values.tolist(), strict=True):
            yield f"{head} {_format_value(v)} {t:.3f}\n"
    yield "# EOF\n"


def _promtool(promtool: str | None) -> str:
    found = shutil.which(promtool or "promtool")
    if found is None:
        raise BadInputError(
            f"promtool {promtool or 'promtool'!r} was not found on PATH; install Debian's "
            "'prometheus' package or pass --promtool"
        )
    return found


def _supports_max_block_duration(promtool: str) -> bool:
    out = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "--max-block-duration" in out.stdout + out.stderr


def write_blocks(
    metric: str,
    series: Sequence[TraceSeries],
    tsdb: str | Path,
    promtool: str | None = None,
    max_block_duration: str | None = None,
) -> BackfillResult:
    """Write ``series`` as ``metric`` into the TSDB directory ``tsdb`` through promtool."""
    check_metric_name(metric)
    if not series or all(len(s.values) == 0 for s in series):
        raise DataError(f"nothing to backfill for {metric!r}: the input has no samples")
    seen: set[tuple[tuple[str, str], ...]] = set()
    for s in series:
        for name in s.labels:
            check_label_name(name)
        key = tuple(sorted(s.labels.items()))
        if key in seen:
            raise BadInputError(
                f"two inputs give {metric} the same labels {dict(key)}; add a label that tells them apart"
            )
        seen.add(key)
    tool = _promtool(promtool)
    out_dir = Path(tsdb)
    out_dir.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in out_dir.iterdir() if p.is_dir()}
    with tempfile.TemporaryDirectory(prefix="tiercast-backfill-") as tmp:
        text_path = Path(tmp) / f"{metric.replace(':', '_')}.om"
        with text_path.open("w", encoding="utf-8") as fh:
            fh.writelines(openmetrics_lines(metric, series))
        cmd = [tool, "tsdb", "create-blocks-from", "openmetrics", str(text_path), str(out_dir)]
        warnings: list[str] = []
        if max_block_duration:
            if _supports_max_block_duration(tool):
                cmd.insert(4, f"--max-block-duration={max_block_duration}")
            else:
                # Saying nothing would let the user believe the blocks are that size.
                warnings.append(
                    f"--block-duration {max_block_duration} ignored: {tool} has no "
                    "--max-block-duration (promtool 2.24 or newer has it); blocks are "
                    "promtool's default 2h"
                )
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
        except subprocess.TimeoutExpired as exc:
            raise TemporaryError(
                f"promtool did not finish backfilling {metric!r} in 600 s"
            ) from exc
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).strip().splitlines() if ln.strip()]
        raise DataError(
            f"promtool refused the samples of {metric!r}: {lines[-1] if lines else 'exit ' + str(done.returncode)}"
        )
    after = {p.name for p in out_dir.iterdir() if p.is_dir()}
    return BackfillResult(
        metric=metric,
        series=list(series),
        tsdb=out_dir,
        blocks=len(after - before),
        warnings=warnings,
    )


def series_from_files(
    paths: Sequence[str | Path], labels: Mapping[str, str], series_label: str
) -> list[TraceSeries]:
    """One :class:`TraceSeries` per series in the files.

    With a single series in all the files, it gets ``labels`` only; with several,
    each also gets ``series_label`` set to its name (the file stem, or the
    ``series`` column of a long-format file) so that they stay apart.
    """
    found: list[tuple[str, np.ndarray, np.ndarray]] = []
    for path in paths:
        for name, (t, v) in read_trace_csv(path).items():
            found.append((name, t, v))
    if not found:
        raise DataError("nothing to backfill: the trace files have no samples")
    several = len(found) > 1
    if several:
        check_label_name(series_label, "--series-label")
        if series_label in labels:
            raise BadInputError(
                f"--series-label {series_label!r} is also given with --label; "
                "several series need it to tell them apart"
            )
    names = [n for n, _, _ in found]
    if several and len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise BadInputError(f"two inputs are both named {dup!r}; rename one file")
    return [
        TraceSeries(
            labels={**labels, **({series_label: name} if several else {})},
            timestamps_s=t,
            values=v,
        )
        for name, t, v in found
    ]
