"""A statsforecast model server for the forecasting benchmark, run by another Python.

statsforecast 2.1.1 requires pandas < 3 and this project pins pandas 3.1.1, so its
models cannot be imported here: the benchmark starts this file with an interpreter
that has statsforecast (``--statsforecast-python``) and talks to it over stdin and
stdout, one JSON object a line. This file imports nothing of the project.

Request: ``{"model": "mstl" | "autoets" | "autotheta", "season": [96, 672], "h": 96,
"y": [...]}`` (no NaN). Answer: ``{"mean": [...], "lo": [...], "hi": [...], "cpu": s}``,
the mean and the 80% interval of the model's ``forecast`` and the process CPU seconds
of that one call (fit and forecast together, first-call costs included), or
``{"error": "one line"}``. An empty line or end of input stops the server.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _model(name: str, season: list[int]) -> Any:
    from statsforecast.models import MSTL, AutoETS, AutoTheta

    if name == "mstl":
        return MSTL(season_length=season if len(season) > 1 else season[0])
    if name == "autoets":
        return AutoETS(season_length=season[0])
    if name == "autotheta":
        return AutoTheta(season_length=season[0])
    raise ValueError(f"unknown model {name!r}")


def answer(request: dict) -> dict:
    """One forecast, timed in process CPU seconds."""
    import numpy as np

    y = np.asarray(request["y"], dtype=float)
    start = time.process_time()
    out = _model(request["model"], list(request["season"])).forecast(
        y=y, h=int(request["h"]), level=[80]
    )
    cpu = time.process_time() - start
    return {
        "mean": np.asarray(out["mean"], dtype=float).tolist(),
        "lo": np.asarray(out["lo-80"], dtype=float).tolist(),
        "hi": np.asarray(out["hi-80"], dtype=float).tolist(),
        "cpu": cpu,
    }


def main() -> int:
    import statsforecast

    print(json.dumps({"version": statsforecast.__version__}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        try:
            reply = answer(json.loads(line))
        except Exception as exc:  # any model failure is reported, the server goes on
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
