"""Deterministic synthetic demand: the built-in demo history and benchmark shapes.

The shapes follow what public LLM-serving traces show: a strong daily cycle with a
morning ramp and an evening peak, a weaker weekly cycle (weekends lower), a slow
trend, multiplicative noise, and occasional short bursts. Everything is seeded, so
the same arguments always give the same series.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

DEMO_END = pd.Timestamp("2026-11-02T00:00:00")
"""End of the demo history (exclusive): a Monday, so the first forecast day is a weekday."""


def seasonal_series(
    name: str,
    *,
    end: pd.Timestamp = DEMO_END,
    days: int = 21,
    step: str = "5min",
    base: float = 100.0,
    daily_amplitude: float = 0.6,
    weekend_factor: float = 0.75,
    trend_per_week: float = 0.03,
    noise: float = 0.06,
    peak_hour: float = 14.0,
    burst_rate_per_day: float = 0.5,
    seed: int = 0,
) -> pd.Series:
    """One demand series with daily and weekly cycles, trend, noise and bursts."""
    rng = np.random.default_rng(seed)
    index = pd.date_range(
        end=end - pd.Timedelta(step),
        periods=int(days * 86400 / pd.Timedelta(step).total_seconds()),
        freq=step,
        name="timestamp",
    )
    hours = (index.hour + index.minute / 60.0).to_numpy()
    # Smooth daily shape: a broad peak around peak_hour and a trough ~12 h away.
    daily = 1.0 + daily_amplitude * np.cos(2 * np.pi * (hours - peak_hour) / 24.0)
    daily += 0.15 * daily_amplitude * np.cos(4 * np.pi * (hours - peak_hour + 3) / 24.0)
    weekend = np.where(index.day_of_week.to_numpy() >= 5, weekend_factor, 1.0)
    t_weeks = (index - index[0]).total_seconds().to_numpy() / (7 * 86400)
    trend = 1.0 + trend_per_week * t_weeks
    level = base * daily * weekend * trend
    # AR(1) multiplicative noise: demand wanders, it does not jitter independently.
    eps = rng.normal(0.0, noise, len(index))
    ar = np.empty_like(eps)
    acc = 0.0
    for i, e in enumerate(eps):
        acc = 0.8 * acc + e
        ar[i] = acc
    values = level * np.exp(ar * 0.6)
    # Bursts: a few tens of minutes of 30-80% extra load.
    steps_per_day = int(86400 / pd.Timedelta(step).total_seconds())
    n_bursts = rng.poisson(burst_rate_per_day * days)
    for _ in range(n_bursts):
        start = int(rng.integers(0, len(index)))
        width = int(rng.integers(2, max(3, steps_per_day // 48)))
        values[start : start + width] *= 1.0 + rng.uniform(0.3, 0.8)
    return pd.Series(np.round(values, 3), index=index, name=name, dtype=float)


def demo_history(end: pd.Timestamp = DEMO_END, days: int = 21) -> dict[str, pd.Series]:
    """The demo fleet's signals: three inference services at a 5-minute step."""
    return {
        "chat_rps": seasonal_series(
            "chat_rps",
            end=end,
            days=days,
            base=420.0,
            daily_amplitude=0.55,
            peak_hour=15.0,
            seed=11,
        ),
        "code_rps": seasonal_series(
            "code_rps",
            end=end,
            days=days,
            base=160.0,
            daily_amplitude=0.7,
            weekend_factor=0.45,
            peak_hour=11.0,
            seed=23,
        ),
        "image_rps": seasonal_series(
            "image_rps",
            end=end,
            days=days,
            base=18.0,
            daily_amplitude=0.45,
            weekend_factor=1.1,
            noise=0.1,
            peak_hour=20.0,
            seed=37,
        ),
    }
