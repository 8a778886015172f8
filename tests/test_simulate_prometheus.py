"""``tiercast simulate --prometheus-url URL --config FILE --since``: the replay read straight
from a real Prometheus (Debian's ``prometheus``, over a TSDB ``promtool`` backfills here),
and the shadow scorecard of tiercast against the nodes the cluster ran.

The TSDB holds a request-rate signal and kube-state-metrics' node series
(``kube_node_labels``, ``kube_node_status_condition``, ``kube_node_status_allocatable``) of
an incumbent that keeps 3 nodes all night for 10 GPUs of demand, is caught short by the
08:00 ramp to 30 GPUs, asks for a 4th node at 08:30 that is Ready at 08:45 (billed,
serving nothing, until then), and goes back to 3 at 20:00; a node of another pool, and an
hour in which kube-state-metrics reported nothing. The scorecard's figures are checked against a hand
computation: the incumbent's from the series written, tiercast's from the replay's
timeline CSV.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from scaler.cli import main
from scaler.inputs.backfilling import TraceSeries, write_blocks
from scaler.replay.from_prometheus import label_matchers, node_queries
from tests.prometheus_server import PrometheusServer, start_prometheus

START = pd.Timestamp("2026-11-30T00:00:00")
DAYS = 5
END = START + pd.Timedelta(days=DAYS)
GRID = pd.date_range(START, END - pd.Timedelta(minutes=5), freq="5min")
OUTAGE = (pd.Timestamp("2026-12-03T02:00:00"), pd.Timestamp("2026-12-03T03:00:00"))
"""kube-state-metrics down: no node series at all (the signal goes on)."""
STEP_H = 5 / 60
PRICE = 4.0


def _up(t: pd.DatetimeIndex) -> np.ndarray:
    """Steps at which kube-state-metrics reported (all but the outage)."""
    return np.asarray((t < OUTAGE[0]) | (t >= OUTAGE[1]))


def _rps(t: pd.DatetimeIndex) -> np.ndarray:
    """100 rps at night (10 GPUs at 10 rps each), 300 from 08:00 to 20:00 (30 GPUs)."""
    day = (t.hour >= 8) & (t.hour < 20)
    return np.where(day, 300.0, 100.0)


def _incumbent(t: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of the pool and Ready ones: 3 all night; a 4th asked for at 08:30, Ready at
    08:45, kept until 20:00."""
    minutes = t.hour * 60 + t.minute
    fourth = (minutes >= 8 * 60 + 30) & (minutes < 20 * 60)
    ready4 = (minutes >= 8 * 60 + 45) & (minutes < 20 * 60)
    return 3 + fourth.astype(int), 3 + ready4.astype(int)


def _epoch(t: pd.DatetimeIndex) -> np.ndarray:
    # Each sample 150 s before its step: the query at step t (5-minute lookback) sees it
    # and no other, whether Prometheus's lookback window is open or closed at its start.
    return np.asarray((t - pd.Timestamp("1970-01-01")).total_seconds()) - 150.0


def _ts(labels: dict[str, str], t: pd.DatetimeIndex, v: np.ndarray) -> TraceSeries:
    keep = ~np.isnan(v)
    return TraceSeries(labels=labels, timestamps_s=_epoch(t)[keep], values=v[keep])


def _backfill(tsdb: Path) -> None:
    up = _up(GRID)
    nodes, ready = _incumbent(GRID)
    labels, conditions, allocatable = [], [], []
    # The pool's nodes h100-0..3 (h100-3 only while there are 4), one of another pool,
    members = [(f"h100-{i}", "gpu-h100") for i in range(4)] + [("a100-0", "gpu-a100")]
    for name, pool in members:
        i = int(name[-1]) if pool == "gpu-h100" else 0
        exists = (nodes > i) if pool == "gpu-h100" else np.ones(len(GRID), bool)
        is_ready = (ready > i) if pool == "gpu-h100" else np.ones(len(GRID), bool)
        on = exists & up
        labels.append(
            _ts(
                {"node": name, "label_karpenter_sh_nodepool": pool, "job": "kube-state-metrics"},
                GRID,
                np.where(on, 1.0, np.nan),
            )
        )
        conditions.append(
            _ts(
                {"node": name, "condition": "Ready", "status": "true"},
                GRID,
                np.where(on, is_ready.astype(float), np.nan),
            )
        )
        allocatable.append(
            _ts(
                {"node": name, "resource": "nvidia.com/gpu", "unit": "integer"},
                GRID,
                np.where(on, 8.0, np.nan),
            )
        )
    write_blocks("kube_node_labels", labels, tsdb)
    write_blocks("kube_node_status_condition", conditions, tsdb)
    write_blocks("kube_node_status_allocatable", allocatable, tsdb)
    write_blocks("shadow_requests_per_second", [_ts({"model": "chat"}, GRID, _rps(GRID))], tsdb)


@pytest.fixture(scope="module")
def cluster_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    workdir = tmp_path_factory.mktemp("shadow-prometheus")
    tsdb = workdir / "tsdb"
    _backfill(tsdb)
    server = start_prometheus(tsdb, workdir)
    yield server
    server.stop()


def _config_data(tmp_path: Path) -> dict[str, Any]:
    return {
        "signals": [
            {
                "name": "rps",
                "step_s": 300,
                "query": "sum(shadow_requests_per_second)",
            }
        ],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 10}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": PRICE,
                "lead_time_s": 600,
                "min_nodes": 1,
                "max_nodes": 8,
                "provider": {"kind": "karpenter", "node_pool": "gpu-h100"},
            }
        ],
        "policy": {"growth_backtest_s": 0, "horizon_s": 3600},
        "forecast": {"method": "seasonal_naive_1d"},
        "model_store": {"path": str(tmp_path / "models")},
    }


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config_data(tmp_path)))
    return path


def test_node_selectors_become_kube_state_metrics_matchers() -> None:
    assert label_matchers("karpenter.sh/nodepool=gpu-h100", "p") == (
        'label_karpenter_sh_nodepool="gpu-h100"'
    )
    assert label_matchers("a=b, c!=d", "p") == 'label_a="b",label_c!="d"'
    with pytest.raises(Exception, match=r"pool p: node selector 'a in \(b\)'") as info:
        label_matchers("a in (b)", "p")
    assert "\n" not in str(info.value)


def _row(text: str, pool: str, side: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.split()[:2] == [pool, side] and "shadow" not in x)
    return line.split()[2:]


@pytest.mark.slow
def test_simulate_from_prometheus_scores_the_incumbent_against_tiercast_by_hand(
    cluster_prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    timeline = tmp_path / "timeline.csv"
    argv = [
        "simulate",
        "--prometheus-url",
        cluster_prometheus.url,
        "--config",
        str(_config(tmp_path)),
        "--since",
        f"{DAYS}d",
        "--until",
        END.isoformat() + "Z",
        "--policies",
        "reactive,predictive",
        "--timeline-out",
        str(timeline),
        "--chart-out",
        "",
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    frame = pd.read_csv(timeline, parse_dates=["timestamp"])
    mine = frame[frame.policy == "predictive"].set_index("timestamp")
    test = pd.DatetimeIndex(mine.index)
    assert test[0] == END - pd.Timedelta(days=4) and len(test) == 4 * 288
    # The demand replayed is the signal written: ceil(rps / 10) GPUs.
    demand = np.ceil(_rps(test) / 10.0)
    assert (mine["demand_gpus"].to_numpy() == demand).all()
    # The hand computation, over the steps kube-state-metrics reported (both sides).
    up = _up(test)
    nodes, ready = _incumbent(test)
    ran_gpu_h = (nodes[up] * 8).sum() * STEP_H
    ran_short = np.maximum(0.0, demand - 8 * ready)[up]
    requested = mine["requested_nodes"].to_numpy()[up]
    usable = mine["usable_nodes"].to_numpy()[up]
    plan_gpu_h = (requested * 8).sum() * STEP_H
    plan_short = np.maximum(0.0, demand[up] - 8 * usable)
    shown = {
        "cluster": [
            f"{ran_gpu_h:.1f}",
            f"{ran_gpu_h * PRICE:,.2f}",
            str(int(np.count_nonzero(np.diff(nodes[up])))),
            f"{ran_short.sum() * STEP_H:.1f}",
            f"{100 * (ran_short > 0).mean():.1f}%",
        ],
        "tiercast": [
            f"{plan_gpu_h:.1f}",
            f"{plan_gpu_h * PRICE:,.2f}",
            str(int(np.count_nonzero(np.diff(requested)))),
            f"{plan_short.sum() * STEP_H:.1f}",
            f"{100 * (plan_short > 0).mean():.1f}%",
        ],
    }
    for side, want in shown.items():
        assert _row(text, "h100", side) == want, side
        assert _row(text, "TOTAL", side) == want, side
    # The incumbent: 3 nodes for 10 GPUs all night, 6 GPUs short from 08:00 until 08:45
    # (9 steps) each of the 4 days.
    assert ran_short.sum() * STEP_H == pytest.approx(4 * 9 * 6 * STEP_H)
    assert "missing: pool h100: capacity history missing at 12 of 1152 steps" in text
    saving = (ran_gpu_h - plan_gpu_h) * PRICE
    assert f"cost {abs(saving):,.2f} USD {'less' if saving >= 0 else 'more'}" in text
    # The usual rows stay beside it.
    assert "reactive" in text and "clairvoyant" in text


def test_node_queries_join_readiness_and_gpus_on_the_node(
    cluster_prometheus: PrometheusServer,
) -> None:
    from forecaster.prometheus import PrometheusSettings, PrometheusSource
    from scaler.config import parse_config

    config = parse_config(_config_data(Path("models")), "t")
    got = {}
    source = PrometheusSource(PrometheusSettings(url=cluster_prometheus.url))
    at = pd.Timestamp("2026-12-02T08:40:00")
    for name, query in node_queries(config.pools[0], config.kubernetes.pool_label).items():
        (series,) = source.range(query, at, at, pd.Timedelta(minutes=5))
        got[name] = float(series.values.iloc[0])
    # At 08:40: 4 nodes, the 4th not Ready yet.
    assert got == {"nodes": 4.0, "ready_nodes": 3.0, "ready_gpus": 24.0}


class _Answers:
    """A metric source that answers only the queries it was given (others: no series)."""

    def __init__(self, answers: dict[str, float]) -> None:
        self.answers = answers

    def range(
        self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta
    ) -> list[Any]:
        from forecaster.sources import LabelledSeries

        if query not in self.answers:
            return []
        index = pd.date_range(start, end, freq=step, name="timestamp")
        return [LabelledSeries({}, pd.Series(self.answers[query], index=index))]


def test_no_kube_state_metrics_is_missing_history_and_a_pool_without_nodes_is_zero() -> None:
    from scaler.config import parse_config
    from scaler.replay.from_prometheus import NODES_SEEN, read_nodes

    config = parse_config(_config_data(Path("models")), "t")
    start, end = pd.Timestamp("2026-12-01"), pd.Timestamp("2026-12-01T01:00")
    absent = read_nodes(_Answers({}), config, list(config.pools), start, end)["h100"]
    assert len(absent) == 12 and absent.isna().all().all()
    # kube-state-metrics reports nodes, none of them the pool's: the pool had none.
    other = read_nodes(_Answers({NODES_SEEN: 3.0}), config, list(config.pools), start, end)
    assert (other["h100"].to_numpy() == 0).all()
