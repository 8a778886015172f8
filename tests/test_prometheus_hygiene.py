"""The data-hygiene policy on hand-made series, and the OpenMetrics text the backfill writes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError
from forecaster.hygiene import HygienePolicy, clean, counter_problem
from forecaster.sources import LabelledSeries, MetricSource, StaticSource
from scaler.config import Config, parse_config
from scaler.inputs.backfilling import TraceSeries, openmetrics_lines, read_trace_csv
from scaler.inputs.collecting import collect

T0 = pd.Timestamp("2024-03-01T00:00:00")
MIN = pd.Timedelta(minutes=1)


def series(pairs: list[tuple[int, float]]) -> pd.Series:
    """Samples at the given minutes after T0, in the given (possibly unsorted) order."""
    return pd.Series(
        [v for _, v in pairs], index=pd.DatetimeIndex([T0 + m * MIN for m, _ in pairs]), dtype=float
    )


def test_duplicates_keep_the_last_received_and_out_of_order_is_sorted() -> None:
    raw = series([(0, 1.0), (2, 3.0), (1, 2.0), (2, 30.0), (3, 4.0)])
    report = clean(raw, MIN)
    assert report.out_of_order == 1 and report.duplicates_resolved == 1
    assert report.series.tolist() == [1.0, 2.0, 30.0, 4.0]
    assert report.series.index.is_monotonic_increasing


def test_nonfinite_values_are_dropped_then_short_gaps_interpolated() -> None:
    raw = series([(0, 0.0), (1, np.nan), (2, np.inf), (3, -np.inf), (4, 8.0)])
    report = clean(raw, MIN, policy=HygienePolicy(max_fill_gap=pd.Timedelta(minutes=3)))
    assert report.nonfinite_dropped == 3 and report.filled_points == 3
    np.testing.assert_allclose(report.series.to_numpy(), [0.0, 2.0, 4.0, 6.0, 8.0])
    assert report.long_gaps == []


def test_gap_longer_than_the_limit_stays_missing_and_is_reported() -> None:
    raw = series([(0, 1.0), (1, 1.0), (6, 5.0), (7, 5.0)])  # minutes 2..5 missing
    report = clean(raw, MIN, policy=HygienePolicy(max_fill_gap=pd.Timedelta(minutes=3)))
    assert report.filled_points == 0
    assert np.isnan(report.series.iloc[2:6]).all()
    [gap] = report.long_gaps
    assert (gap.start, gap.end, gap.points) == (T0 + 2 * MIN, T0 + 5 * MIN, 4)
    # The same gap is filled when the limit allows four missing minutes.
    filled = clean(raw, MIN, policy=HygienePolicy(max_fill_gap=pd.Timedelta(minutes=4)))
    np.testing.assert_allclose(filled.series.iloc[2:6], [1.8, 2.6, 3.4, 4.2])


def test_nothing_is_invented_before_the_first_or_after_the_newest_sample() -> None:
    raw = series([(0, np.nan), (1, 2.0), (2, 3.0), (3, np.nan)])
    report = clean(raw, MIN)
    assert report.series.index[0] == T0 + MIN and report.series.index[-1] == T0 + 2 * MIN


def test_staleness_is_measured_from_the_newest_finite_sample() -> None:
    raw = series([(0, 1.0), (1, 2.0), (2, np.nan)])
    policy = HygienePolicy(staleness_limit=pd.Timedelta(minutes=10))
    assert not clean(raw, MIN, now=T0 + 11 * MIN, policy=policy).stale
    assert clean(raw, MIN, now=T0 + 12 * MIN, policy=policy).stale
    empty = clean(series([(0, np.nan)]), MIN, now=T0)
    assert empty.empty and empty.stale and "no finite sample" in empty.summary()


def test_off_grid_samples_are_bucketed_onto_the_step_grid() -> None:
    raw = pd.Series(
        [1.0, 3.0, 10.0],
        index=pd.DatetimeIndex([T0 + pd.Timedelta(seconds=s) for s in (10, 50, 70)]),
    )
    report = clean(raw, MIN)
    assert report.series.to_dict() == {T0: 2.0, T0 + MIN: 10.0}


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("sum(http_requests_total)", True),
        ('vllm:request_success_total{model_name="chat"}', True),
        ("sum(vllm:generation_tokens_total) / 60", True),
        ("sum(rate(http_requests_total[5m]))", False),
        ("sum(increase(vllm:prompt_tokens_total[1m])) / 60", False),
        ("histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))", False),
        ("sum(vllm:num_requests_running)", False),
        ("sum(DCGM_FI_DEV_GPU_UTIL) / 100", False),
        ('sum(DCGM_FI_DEV_FB_USED{job="x_total"})', False),
    ],
)
def test_raw_counters_must_be_read_through_rate(query: str, refused: bool) -> None:
    assert (counter_problem(query) is not None) is refused


def test_static_source_is_a_metric_source_and_cuts_the_window() -> None:
    s = LabelledSeries({"pool": "a"}, series([(0, 1.0), (5, 2.0), (10, 3.0)]))
    src = StaticSource({"q": [s]})
    assert isinstance(src, MetricSource)
    [got] = src.range("q", T0 + MIN, T0 + 9 * MIN, MIN)
    assert got.values.tolist() == [2.0] and got.key == '{pool="a"}'
    assert src.range("other", T0, T0, MIN) == []


def test_openmetrics_text_follows_promtools_rules(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "timestamp,value\n"
        "2024-03-01T00:02:00,2\n"
        "2024-03-01T00:00:00,NaN\n"
        "2024-03-01T00:01:00,+Inf\n"
        "2024-03-01T00:02:00,5.5\n"
        "2024-03-01T00:03:00,\n"
    )
    [(t, v)] = read_trace_csv(path).values()
    lines = list(openmetrics_lines("m:x", [TraceSeries({"a": 'q"uote'}, timestamps_s=t, values=v)]))
    t0 = T0.timestamp()
    assert lines == [
        "# TYPE m:x gauge\n",
        f'm:x{{a="q\\"uote"}} NaN {t0:.3f}\n',
        f'm:x{{a="q\\"uote"}} +Inf {t0 + 60:.3f}\n',
        f'm:x{{a="q\\"uote"}} 5.5 {t0 + 120:.3f}\n',  # the duplicate: last row wins
        "# EOF\n",
    ]


def _config(prometheus: dict | None) -> Config:
    data: dict = {
        "signals": [{"name": "rps", "query": "sum by (pod) (rate(req_total[5m]))", "step_s": 60}],
        "workloads": [{"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}],
        "pools": [
            {
                "name": "p",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 1.0,
            }
        ],
    }
    if prometheus is not None:
        data["prometheus"] = prometheus
    return parse_config(data)


def test_label_sets_are_summed_where_any_has_a_value_and_kept_apart() -> None:
    query = "sum by (pod) (rate(req_total[5m]))"
    # pod a: minutes 0-1 and 20-21; pod b: minutes 0-1 only. Minutes 2-19 have no data
    # (a long gap in both), so the sum has a gap there too rather than zero demand.
    a = LabelledSeries({"pod": "a"}, series([(0, 1.0), (1, 2.0), (20, 5.0), (21, 6.0)]))
    b = LabelledSeries({"pod": "b"}, series([(0, 10.0), (1, 20.0)]))
    src = StaticSource({query: [a, b]})
    config = _config({"url": "http://unused:9090", "lookback_s": 3600})
    got = collect(config, "rps", now=T0 + 22 * MIN, source=src)
    assert got.series[T0] == 11.0 and got.series[T0 + MIN] == 22.0
    assert np.isnan(got.series[T0 + 10 * MIN]) and got.series[T0 + 20 * MIN] == 5.0
    assert sorted(got.history()) == ["rps", 'rps{pod="a"}', 'rps{pod="b"}']
    [(q, start, end, step)] = src.calls
    assert (q, end - start, step) == (query, pd.Timedelta(hours=1), MIN)


def test_a_query_signal_needs_a_prometheus_section() -> None:
    with pytest.raises(BadInputError, match="need a 'prometheus' section"):
        collect(_config(None), "rps", now=T0)


def test_negative_values_are_dropped_as_bad_samples_and_counted() -> None:
    raw = series([(0, 1.0), (1, -5.0), (2, 3.0), (3, -0.5), (4, 4.0)])
    report = clean(raw, MIN, policy=HygienePolicy(max_fill_gap=pd.Timedelta(0)))
    assert report.negative_dropped == 2 and report.nonfinite_dropped == 0
    assert (report.series.dropna() >= 0).all() and report.series.isna().sum() == 2
    assert "2 negative dropped" in report.summary()
    gone = clean(series([(0, -1.0), (1, -2.0)]), MIN, now=T0)
    assert gone.empty and gone.stale and "2 negative" in gone.summary()
