"""Benchmarks of the forecaster, apart from the code they measure: accuracy by group on
the public traces (``accuracy``, ``tiercast bench-forecast``) and batch forecasting of many
series in 1 process, 2 and Dask (``scaleout``, ``tiercast bench-scale``).
"""
