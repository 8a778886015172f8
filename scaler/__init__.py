"""tiercast scaler: turns demand forecasts into capacity changes made ahead of time.

Catalog and config, demand translation, the tier planner, plans, actuators and the
``tiercast`` command line. It builds on :mod:`forecaster`; the reverse import is
forbidden (checked by import-linter in the test suite).
"""

from forecaster import __version__

__all__ = ["__version__"]
