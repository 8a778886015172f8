"""Hand-made forecasts for planner and report tests: flat or given levels, a known spread."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast


def flat_forecast(
    name: str,
    level: np.ndarray | float,
    now: pd.Timestamp,
    step: pd.Timedelta,
    steps: int,
    spread: float = 0.0,
    last: float | None = None,
) -> SeriesForecast:
    """A forecast of ``level`` (a constant or one value a step) from ``now``, its q0.1 and
    q0.9 ``spread`` below and above the median, seen last at ``last`` (default: its first
    value) one step before ``now``."""
    values = np.broadcast_to(np.asarray(level, dtype=float), (steps,)).copy()
    idx = pd.date_range(now, periods=steps, freq=step, name="timestamp")
    frame = pd.DataFrame(
        {"q0.1": values * (1 - spread), "q0.5": values, "q0.9": values * (1 + spread)},
        index=idx,
    )
    newest = float(values[0]) if last is None else last
    return SeriesForecast(
        name=name,
        frame=frame,
        estimator="fake",
        reason="hand-made",
        step=step,
        last_timestamp=now - step,
        last_value=newest,
        recent_max=newest,
        n_observed=1000,
    )
