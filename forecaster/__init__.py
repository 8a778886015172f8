"""tiercast forecaster: metric sources, series preparation, estimators, backtesting.

This package learns demand from history and forecasts it with quantiles. It never
imports :mod:`scaler`; the capacity side builds on it, not the reverse.
"""

__version__ = "0.1.0"
