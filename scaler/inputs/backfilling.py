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
* promtool cuts blocks of 2 h unless ``--max-block-duration`` says more (a hidden
  flag of promtool 2.24 and newer, probed by running it); promtool rounds it down to
  one of the TSDB's ranges, 2 h times a power of 3 (``getCompatibleBlockDuration``
  in prometheus/prometheus ``cmd/promtool/backfill.go``), and reads the whole input
  once per block. Unless ``--block-duration`` is given, tiercast picks the smallest
  range that covers the data's span in at most :data:`TARGET_BLOCKS` blocks, no
  larger than :data:`LARGEST_AUTO_BLOCK_H` hours (under Prometheus' advice of 31 days
  or a tenth of the retention): 10^6 one-minute rows (1.9 years) write 35 blocks, not
  8,300;
* at most :data:`MAX_SERIES` series per run (``--max-series``), read and grouped in
  time linear in the rows; a promtool that does not finish in
  :data:`PROMTOOL_TIMEOUT_S` is stopped, and the blocks it had begun in the TSDB
  folder and its temporary files are removed, so nothing half-written is left;
* Prometheus deletes blocks older than its retention at start-up: run it with a
  ``--storage.tsdb.retention.time`` longer than the age of the data.

An empty CSV value is a gap and writes no sample; ``NaN``, ``+Inf`` and ``-Inf``
are written as such, because real Prometheus data holds them and the collection
side must cope (see :mod:`forecaster.hygiene`).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, DataError, TemporaryError

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

MAX_SERIES = 10_000
"""Series one backfill writes at most (``--max-series``): promtool holds every series of a
block in memory, and a file of millions of label sets is more likely a mistake."""
PROMTOOL_TIMEOUT_S = 600.0
"""How long promtool may run before it is stopped and its partial blocks removed."""
BLOCK_RANGES_H = tuple(2 * 3**k for k in range(10))
"""The TSDB's block ranges in hours (2 h times 3^k, k < 10): promtool rounds
``--max-block-duration`` down to one of them."""
TARGET_BLOCKS = 64
"""Blocks a backfill aims at, at most, when it picks the block duration itself."""
LARGEST_AUTO_BLOCK_H = 486
"""The largest block tiercast picks itself (20.25 days)."""


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
    keep = (raw != "").to_numpy()  # an empty value is a gap: no sample at all
    values = np.full(len(raw), np.nan)
    try:
        values[keep] = raw[keep].astype(float).to_numpy()
    except ValueError:
        i = next(i for i, text in enumerate(raw) if text and not _is_number(text))
        raise DataError(
            f"trace file {str(p)!r} line {i + 2}: column {vcol!r} has {raw.iloc[i]!r}, "
            "expected a number, NaN, +Inf, -Inf or empty"
        ) from None
    # Seconds with millisecond precision: Prometheus stores milliseconds.
    seconds = pd.DatetimeIndex(stamps).as_unit("ms").asi8 / 1000.0
    names = frame[scol].to_numpy(dtype=str) if scol is not None else np.full(len(raw), p.stem)
    return _grouped(names[keep], seconds[keep], values[keep])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _grouped(
    names: np.ndarray, seconds: np.ndarray, values: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{name: (seconds, values)}`` sorted by time, the last row of equal timestamps kept;
    one sort over all rows (not a pass over the rows per series)."""
    codes, uniques = pd.factorize(names, sort=True)
    # lexsort is stable: of equal (series, time), the rows stay in file order.
    order = np.lexsort((seconds, codes))
    codes, seconds, values = codes[order], seconds[order], values[order]
    last = np.append((codes[1:] != codes[:-1]) | (seconds[1:] != seconds[:-1]), True)
    codes, seconds, values = codes[last], seconds[last], values[last]
    bounds = np.searchsorted(codes, np.arange(len(uniques) + 1))
    return {
        str(name): (seconds[bounds[i] : bounds[i + 1]], values[bounds[i] : bounds[i + 1]])
        for i, name in enumerate(uniques)
    }


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
    """Whether ``promtool`` takes ``--max-block-duration``: listed in its help, or (a hidden
    flag in Debian's build) accepted where an unknown flag is refused."""
    help_cmd = [promtool, "tsdb", "create-blocks-from", "openmetrics", "--help"]
    out = subprocess.run(help_cmd, capture_output=True, text=True, check=False, timeout=60)
    if "--max-block-duration" in out.stdout + out.stderr:
        return True
    probe = [*help_cmd[:4], "--max-block-duration=2h", "--help"]
    return subprocess.run(probe, capture_output=True, check=False, timeout=60).returncode == 0


def block_hours(series: Sequence[TraceSeries]) -> int:
    """The block duration (hours) tiercast picks: the smallest TSDB range that covers the
    samples' span in at most :data:`TARGET_BLOCKS` blocks, at most
    :data:`LARGEST_AUTO_BLOCK_H`."""
    stamps = [s.timestamps_s for s in series if len(s.timestamps_s)]
    span_h = (max(float(t[-1]) for t in stamps) - min(float(t[0]) for t in stamps)) / 3600
    for hours in BLOCK_RANGES_H:
        if hours >= LARGEST_AUTO_BLOCK_H or span_h / hours + 1 <= TARGET_BLOCKS:
            return hours
    return LARGEST_AUTO_BLOCK_H  # pragma: no cover - the ranges reach past the largest


def check_series_count(count: int, max_series: int = MAX_SERIES) -> None:
    """Refuse more than ``max_series`` series in one line (``--max-series``)."""
    if count > max_series:
        raise BadInputError(
            f"--max-series: the input has {count} series; at most {max_series} are backfilled "
            "in one run (split the files, or raise --max-series)"
        )


def write_blocks(
    metric: str,
    series: Sequence[TraceSeries],
    tsdb: str | Path,
    promtool: str | None = None,
    max_block_duration: str | None = None,
    max_series: int = MAX_SERIES,
    timeout_s: float | None = None,
    stage: Callable[[str], None] | None = None,
) -> BackfillResult:
    """Write ``series`` as ``metric`` into the TSDB directory ``tsdb`` through promtool.

    ``max_block_duration``: promtool's ``--max-block-duration`` (default: picked by
    :func:`block_hours`); ``timeout_s``: promtool's limit (default
    :data:`PROMTOOL_TIMEOUT_S`), after which what it began is removed; ``stage`` is told
    each step as it starts (a progress bar's label).
    """
    check_metric_name(metric)
    check_series_count(len(series), max_series)
    if not series or all(len(s.values) == 0 for s in series):
        raise DataError(f"nothing to backfill for {metric!r}: the input has no samples")
    _check_labels(metric, series)
    tell = stage or (lambda _text: None)
    tool = _promtool(promtool)
    out_dir = _tsdb_folder(tsdb)
    before = set(os.listdir(out_dir))
    with tempfile.TemporaryDirectory(prefix="tiercast-backfill-") as tmp:
        text_path = Path(tmp) / f"{metric.replace(':', '_')}.om"
        tell(f"writing {sum(len(s.values) for s in series)} samples as OpenMetrics")
        with text_path.open("w", encoding="utf-8") as fh:
            fh.writelines(openmetrics_lines(metric, series))
        cmd = [tool, "tsdb", "create-blocks-from", "openmetrics", str(text_path), str(out_dir)]
        warnings: list[str] = []
        wanted = max_block_duration or f"{block_hours(series)}h"
        if _supports_max_block_duration(tool):
            cmd.insert(4, f"--max-block-duration={wanted}")
        elif max_block_duration:
            # Saying nothing would let the user believe the blocks are that size.
            warnings.append(
                f"--block-duration {max_block_duration} ignored: {tool} has no "
                "--max-block-duration (promtool 2.24 or newer has it); blocks are "
                "promtool's default 2h"
            )
        tell(f"promtool writing blocks of up to {wanted}")
        done = _run_promtool(cmd, metric, out_dir, before, Path(tmp), timeout_s)
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


def _check_labels(metric: str, series: Sequence[TraceSeries]) -> None:
    """Every label name valid, and no two series with the same labels."""
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


def _tsdb_folder(tsdb: str | Path) -> Path:
    """The TSDB folder, created; a file or device there is one line naming ``--tsdb``."""
    out_dir = Path(tsdb)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"--tsdb {str(out_dir)[:200]!r}: {exc.strerror or exc}") from exc
    if not out_dir.is_dir():
        raise BadInputError(f"--tsdb {str(out_dir)[:200]!r} is not a folder")
    return out_dir


def _run_promtool(
    cmd: list[str],
    metric: str,
    out_dir: Path,
    before: set[str],
    tmp: Path,
    timeout_s: float | None,
) -> subprocess.CompletedProcess[str]:
    """Run promtool (its temporary files under ``tmp``); on a timeout, stop it and remove
    what it added to ``out_dir`` (``before``: the names there before it ran)."""
    limit = PROMTOOL_TIMEOUT_S if timeout_s is None else timeout_s
    env = {**os.environ, "TMPDIR": str(tmp)}
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, check=False, timeout=limit, env=env
        )
    except subprocess.TimeoutExpired as exc:
        for name in set(os.listdir(out_dir)) - before:
            path = out_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise TemporaryError(
            f"promtool did not finish backfilling {metric!r} in {limit:g} s; the blocks it "
            "had begun were removed (a shorter trace, or a larger --block-duration, writes "
            "fewer blocks)"
        ) from exc


def series_from_files(
    paths: Sequence[str | Path],
    labels: Mapping[str, str],
    series_label: str,
    max_series: int = MAX_SERIES,
    tick: Callable[[], None] | None = None,
) -> list[TraceSeries]:
    """One :class:`TraceSeries` per series in the files.

    With a single series in all the files, it gets ``labels`` only; with several,
    each also gets ``series_label`` set to its name (the file stem, or the
    ``series`` column of a long-format file) so that they stay apart. More than
    ``max_series`` series are refused in one line; ``tick`` is called once per file read.
    """
    found: list[tuple[str, np.ndarray, np.ndarray]] = []
    for path in paths:
        for name, (t, v) in read_trace_csv(path).items():
            found.append((name, t, v))
        check_series_count(len(found), max_series)
        if tick is not None:
            tick()
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
    names = Counter(n for n, _, _ in found)
    if several and len(names) < len(found):
        dup = next(n for n, k in names.items() if k > 1)
        raise BadInputError(f"two inputs are both named {dup!r}; rename one file")
    return [
        TraceSeries(
            labels={**labels, **({series_label: name} if several else {})},
            timestamps_s=t,
            values=v,
        )
        for name, t, v in found
    ]
