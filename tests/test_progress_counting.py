"""A command's progress bar moves per signal forecast, without being handed down the calls."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.forecasting import forecast_history
from forecaster.progress import Progress, active, counting


def test_each_forecast_signal_moves_the_counting_bar_and_only_while_it_counts() -> None:
    idx = pd.date_range("2026-03-01", periods=3 * 288, freq="5min")
    history = {f"s{i}": pd.Series(np.full(len(idx), 10.0 + i), index=idx) for i in range(3)}
    bar = Progress(False)
    assert active() is None
    with counting(bar):
        assert active() is bar
        forecast_history(history, pd.Timedelta(hours=1), method="seasonal_naive_1d")
    assert bar.n == 3 and active() is None
    forecast_history(history, pd.Timedelta(hours=1), method="seasonal_naive_1d")
    assert bar.n == 3  # no bar counts outside the block


@pytest.mark.slow
def test_plan_counts_a_unit_per_signal_before_the_plan() -> None:
    import argparse

    from scaler.cli.plan import plan_without_acting

    args = argparse.Namespace(config=None, history=None, now=None, horizon="6h", current_nodes=[])
    bar = Progress(False, total=1)
    with counting(bar):
        config, *_ = plan_without_acting(args)
    assert len(config.signals) == 4
    assert bar.n == 4 and bar.total == 5  # the plan's own unit is counted by cmd_plan
