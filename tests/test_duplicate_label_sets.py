"""A label set Prometheus returns twice with different values is suspect data (#50 finding 8).

Before, the second copy silently replaced the first in ``scaler.inputs.collecting``: a
pool of 5 nodes went to 0, exit 0. Now copies that disagree mark the signal suspect from
the first timestamp they disagree at (held, one line); copies that agree are one series.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.prometheus import PrometheusSettings, PrometheusSource
from forecaster.sources import LabelledSeries, StaticSource
from forecaster.suspect import marked
from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, parse_config
from scaler.inputs.collecting import DUPLICATE_LABEL_SETS, collect
from scaler.service.cycle import run_cycle
from scaler.wording import CODES, Reason
from tests.prometheus_server import StubReply, StubServer, matrix_body

NOW = pd.Timestamp("2026-11-30T12:00:00")
STEP = pd.Timedelta(minutes=5)
QUERY = "sum by (pod) (gpu_demand)"


def _config(tmp: Path) -> Config:
    return parse_config(
        {
            "signals": [{"name": "demand", "step_s": 300, "query": QUERY}],
            "prometheus": {"url": "https://prometheus.example"},
            "workloads": [
                {"name": "w", "signal": "demand", "gpu_model": "H100", "units_per_replica": 1.0}
            ],
            "pools": [
                {
                    "name": "h100",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 2.0,
                    "lead_time_s": 600,
                    "current_nodes": 5,
                    "max_nodes": 20,
                }
            ],
            "forecast": {"method": "seasonal_naive_1d"},
            "policy": {"scale_down_stabilization_s": 0, "staleness_limit_s": 900},
            "model_store": {"path": str(tmp / "models")},
            "service": {"records_path": str(tmp / "runs.sqlite")},
        }
    )


def _gauge(level: float) -> pd.Series:
    index = pd.date_range(NOW - pd.Timedelta(days=3), NOW - STEP, freq=STEP, name="timestamp")
    hours = (index.hour + index.minute / 60).to_numpy()
    return pd.Series(level + 2 * np.sin(2 * math.pi * hours / 24), index=index)


def _collect(tmp: Path, *copies: pd.Series) -> Any:
    source = StaticSource({QUERY: [LabelledSeries({"pod": "a"}, c) for c in copies]})
    return collect(_config(tmp), "demand", now=NOW, source=source)


def test_copies_that_disagree_mark_the_signal_suspect(tmp_path: Path) -> None:
    late = _gauge(36.0)
    late[late.index >= NOW - pd.Timedelta(hours=1)] = 0.0
    found = marked(_collect(tmp_path, _gauge(36.0), late).series)
    assert found is not None and found.hold and found.code == DUPLICATE_LABEL_SETS
    assert found.since == NOW - pd.Timedelta(hours=1)
    assert found.params == {"copies": 2, "labels": '{pod="a"}', "at": "2026-11-30 11:00Z"}
    assert DUPLICATE_LABEL_SETS in CODES
    text = Reason(DUPLICATE_LABEL_SETS, {**found.params, "signal": "demand"}).text("ru")
    assert "demand" in text and '{pod="a"}' in text


def test_copies_that_agree_are_one_series(tmp_path: Path) -> None:
    y = _gauge(36.0)
    collection = _collect(tmp_path, y, y.iloc[-100:], y.iloc[:50])
    assert marked(collection.series) is None
    assert len(collection.by_labels) == 1
    got = collection.series
    assert len(got) == len(y) and np.allclose(got.to_numpy(), y.to_numpy())


def test_a_duplicate_label_set_holds_the_pool_where_it_released_all(tmp_path: Path) -> None:
    """The issue's case: the second copy reads 0, and the pool went 5 -> 0, exit 0."""
    history = _collect(tmp_path, _gauge(36.0), _gauge(0.0)).history()
    config = _config(tmp_path)
    result = run_cycle(config, history, RecordingProvider({"h100": 5}), NOW, dry_run=True)
    [action] = [a for a in result.plan.actions if a.pool == "h100"]
    assert (action.decision, action.target_nodes) == ("no-op", 5)
    why = result.plan.risk["held_models"]["H100-80GB"]
    assert why.startswith("signal 'demand': Prometheus returned 2 series with the labels")


def test_prometheus_answering_a_label_set_twice_gives_both_copies() -> None:
    """The source merged the copies per label set, the last one winning."""
    stamps = [
        float(t.timestamp()) for t in pd.date_range(NOW - pd.Timedelta(hours=1), NOW, freq=STEP)
    ]
    body = matrix_body(
        [
            ({"pod": "a"}, [(t, "5") for t in stamps]),
            ({"pod": "b"}, [(t, "1") for t in stamps]),
            ({"pod": "a"}, [(t, "0") for t in stamps]),
        ]
    )
    with StubServer(lambda _h: StubReply(200, body)) as stub:
        source = PrometheusSource(PrometheusSettings(url=stub.url, retries=0))
        got = source.range("q", NOW - pd.Timedelta(hours=1), NOW, STEP)
    by_pod = sorted((s.labels["pod"], float(s.values.iloc[-1])) for s in got)
    assert by_pod == [("a", 0.0), ("a", 5.0), ("b", 1.0)]
