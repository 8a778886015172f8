"""The Prometheus source against a real server: round trip, chunk seams, label sets, dirty data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError
from forecaster.hygiene import HygienePolicy, clean
from forecaster.prometheus import PrometheusSettings, PrometheusSource
from scaler.config import parse_config
from scaler.inputs.collecting import collect, collect_signal
from tests.prometheus_server import (
    DIRTY_COUNTER,
    DIRTY_GAUGE,
    DIRTY_START,
    RPS_METRIC,
    PrometheusServer,
    csv_series,
    gauge_value,
    grid,
    needs_trace,
    prometheus,  # noqa: F401  (the session fixture)
    values_at,
)

M_SMALL = "servegen/m_small_rps_10min.csv"


class CountingSource(PrometheusSource):
    """The real source, counting the HTTP range queries it sends."""

    queries = 0

    def _query_range(self, query: str, start_s: int, end_s: int, step_s: int) -> list[dict]:
        self.queries += 1
        assert (end_s - start_s) // step_s + 1 <= self.settings.max_points
        return super()._query_range(query, start_s, end_s, step_s)


def source(server: PrometheusServer, max_points: int = 11_000) -> CountingSource:
    return CountingSource(PrometheusSettings(url=server.url, max_points=max_points, retries=0))


def test_trace_round_trips_through_prometheus_across_chunk_seams(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    expected = csv_series(needs_trace(prometheus, M_SMALL))
    src = source(prometheus, max_points=500)
    [got] = src.range(
        f'{RPS_METRIC}{{model="m-small"}}',
        expected.index[0],
        expected.index[-1],
        pd.Timedelta(minutes=10),
    )
    assert src.queries == 5  # 2016 grid points in chunks of 500
    assert got.labels == {"__name__": RPS_METRIC, "model": "m-small"}
    # The CSV's empty rows are 10-minute holes, longer than Prometheus's 5-minute lookback.
    pd.testing.assert_index_equal(got.values.index, expected.index, check_names=False)
    np.testing.assert_allclose(got.values.to_numpy(), expected.to_numpy(), rtol=1e-12)


@pytest.mark.slow
def test_fourteen_days_at_one_minute_step_is_chunked_without_holes_or_duplicates(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    expected = csv_series(needs_trace(prometheus, M_SMALL))
    start, end = expected.index[0], expected.index[0] + pd.Timedelta(days=14)
    one_min = pd.Timedelta(minutes=1)
    query = f'{RPS_METRIC}{{model="m-small"}}'
    src = source(prometheus)
    [got] = src.range(query, start, end, one_min)
    assert (end - start) / one_min + 1 > 11_000
    assert src.queries == 2
    idx = got.values.index
    assert idx.is_unique and idx.is_monotonic_increasing
    # Prometheus answers each minute with the newest sample of the last 5 minutes:
    # minutes 0-4 after every 10-minute sample read that sample, minutes 6-9 nothing.
    for k in range(5):
        np.testing.assert_allclose(
            values_at(got.values, expected.index + k * one_min), expected.to_numpy(), rtol=1e-12
        )
    for k in range(6, 10):
        assert not idx.isin(expected.index + k * one_min).any()
    # Many more seams (997 is prime, so they fall everywhere in the 10-minute cycle).
    [fine] = source(prometheus, max_points=997).range(query, start, end, one_min)
    pd.testing.assert_series_equal(fine.values, got.values)


def test_several_label_sets_come_back_as_separate_labelled_series(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    models = {
        "m-small": M_SMALL,
        "deepseek-r1": "servegen/deepseek_r1_rps_10min.csv",
        "mm-image": "servegen/mm_image_rps_10min.csv",
    }
    refs = {m: csv_series(needs_trace(prometheus, rel)) for m, rel in models.items()}
    start = pd.Timestamp("2000-01-01T00:00:00")
    end = pd.Timestamp("2000-01-01T23:50:00")
    got = source(prometheus).range(RPS_METRIC, start, end, pd.Timedelta(minutes=10))
    assert [s.labels["model"] for s in got] == sorted(models)
    for s in got:
        ref = refs[s.labels["model"]]
        ref = ref[(ref.index >= start) & (ref.index <= end)]
        pd.testing.assert_index_equal(s.values.index, ref.index, check_names=False)
        np.testing.assert_allclose(s.values.to_numpy(), ref.to_numpy(), rtol=1e-12)
        assert s.key == f'{{__name__="{RPS_METRIC}",model="{s.labels["model"]}"}}'


def _config(server: PrometheusServer, query: str, step_s: int = 600) -> dict:
    return {
        "signals": [{"name": "rps", "unit": "requests/s", "query": query, "step_s": step_s}],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 50}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
            }
        ],
        "prometheus": {"url": server.url, "retries": 0, "lookback_s": 86400},
    }


def test_collect_signal_sums_label_sets_and_keeps_each_for_reports(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    refs = {
        m: csv_series(needs_trace(prometheus, rel))
        for m, rel in {
            "deepseek-r1": "servegen/deepseek_r1_rps_10min.csv",
            "m-small": M_SMALL,
            "mm-image": "servegen/mm_image_rps_10min.csv",
        }.items()
    }
    config = parse_config(_config(prometheus, RPS_METRIC))
    now = pd.Timestamp("2000-01-02T00:00:00")
    history = collect_signal(config, "rps", now=now)
    keys = [f'rps{{__name__="{RPS_METRIC}",model="{m}"}}' for m in sorted(refs)]
    assert sorted(history) == ["rps", *keys]
    day = pd.date_range(now - pd.Timedelta(days=1), now, freq="10min", inclusive="left")
    expected = sum(r.reindex(day).interpolate(limit_area="inside") for r in refs.values())
    np.testing.assert_allclose(values_at(history["rps"], day), expected.to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(
        values_at(history[keys[0]], day), refs["deepseek-r1"].reindex(day).to_numpy(), rtol=1e-12
    )


def test_dirty_gauge_is_cleaned_as_the_policy_says(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    start, minutes = DIRTY_START, 200
    [raw] = source(prometheus).range(
        DIRTY_GAUGE, start, start + pd.Timedelta(minutes=minutes - 1), pd.Timedelta(minutes=1)
    )
    report = clean(
        raw.values,
        pd.Timedelta(minutes=1),
        now=start + pd.Timedelta(minutes=minutes),
        policy=HygienePolicy(max_fill_gap=pd.Timedelta(minutes=15)),
    )
    got = report.series
    truth = np.array([gauge_value(i) for i in range(minutes)])
    at = values_at(got, grid(start, minutes))
    clean_minutes = [i for i in range(150) if not 100 <= i < 140] + list(range(180, 200))
    # NaN at 10, +Inf at 20, -Inf at 21: dropped, then interpolated back onto the line;
    # minute 40's duplicate: the last row wins; 49/50 out of order: sorted by the backfill.
    np.testing.assert_allclose(at[clean_minutes], truth[clean_minutes], rtol=1e-12)
    # 40 minutes of NaN: a long gap, left missing and reported.
    assert np.isnan(at[100:140]).all()
    # Rows 150-179 absent: Prometheus holds minute 149 for its 5-minute lookback,
    # then answers nothing; the rest is a long gap too.
    np.testing.assert_allclose(at[150:154], gauge_value(149))
    assert np.isnan(at[156:180]).all()
    assert report.filled_points == 3
    assert report.nonfinite_dropped == 43
    gaps = [(g.start, g.end, g.points) for g in report.long_gaps]
    assert gaps[0] == (start + pd.Timedelta(minutes=100), start + pd.Timedelta(minutes=139), 40)
    assert len(gaps) == 2 and gaps[1][2] >= 24
    assert not report.stale
    assert "long gap" in report.summary() and "43 NaN/Inf dropped" in report.summary()


def test_counter_with_reset_is_read_through_rate(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    config = parse_config(_config(prometheus, f"rate({DIRTY_COUNTER}[5m])", step_s=60))
    now = DIRTY_START + pd.Timedelta(minutes=120)
    got = collect(config, "rps", now=now)
    # 60 per minute is 1/s, also across the reset at minute 50 (rate() corrects it).
    window = grid(DIRTY_START + pd.Timedelta(minutes=5), 114)
    np.testing.assert_allclose(values_at(got.series, window), 1.0, rtol=1e-9)
    raw_counter = parse_config(_config(prometheus, f"sum({DIRTY_COUNTER})", step_s=60))
    with pytest.raises(BadInputError, match=r"counter 'tiercast_dirty_requests_total'.*rate\("):
        collect(raw_counter, "rps", now=now)


def test_empty_answer_binds_an_empty_signal_and_stale_one_is_flagged(
    prometheus: PrometheusServer,  # noqa: F811
) -> None:
    config = parse_config(_config(prometheus, 'absent_metric{job="nothing"}', step_s=60))
    got = collect(config, "rps", now=DIRTY_START)
    assert got.series.empty and got.stale and got.history() == {"rps": got.series}
    late = parse_config(_config(prometheus, DIRTY_GAUGE, step_s=60))
    stale = collect(late, "rps", now=DIRTY_START + pd.Timedelta(hours=5))
    # The last sample is at minute 199; Prometheus answers it for 5 more minutes (its
    # lookback), as it does for any series that ends without a stale marker.
    assert stale.stale and stale.reports[0].newest == DIRTY_START + pd.Timedelta(minutes=204)
    fresh = collect(late, "rps", now=DIRTY_START + pd.Timedelta(minutes=205))
    assert not fresh.stale
