"""A command's progress bar moves per signal forecast, without being handed down the calls."""

from __future__ import annotations

import numpy as np
import pandas as pd

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
