"""Right-sizing per workload (scaler.reports.rightsizing) on hand-made histories."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaler.config import ConfigError, parse_config
from scaler.reports.rightsizing import rightsizing_rows, rightsizing_section, smallest_fit


def _config(**workload: object) -> dict:
    return {
        "signals": [{"name": "rps"}, {"name": "mem"}, {"name": "util"}],
        "workloads": [
            {
                "name": "embed",
                "signal": "rps",
                "gpu_model": "A100-80GB",
                "units_per_replica": 10,
                "memory_signal": "mem",
                "utilization_signal": "util",
                **workload,
            }
        ],
        "pools": [
            {
                "name": "a100",
                "tier": "on-demand",
                "gpu_model": "A100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 3.0,
            }
        ],
    }


def _series(value: float, spike: float | None = None) -> pd.Series:
    idx = pd.date_range("2026-03-01", periods=2000, freq="5min")
    y = pd.Series(np.full(len(idx), value), index=idx)
    if spike is not None:
        y.iloc[100] = spike  # one sample in 2,000: above the q0.99
    return y


def test_a_small_model_on_a_whole_gpu_is_shown_its_mig_profile() -> None:
    config = parse_config(_config(model_params_b=7))
    # A 7B model: 14 GB of FP16 weights and 4 GB more, busy a tenth of the time.
    history = {"mem": _series(18.0, spike=70.0), "util": _series(10.0)}
    (row,) = rightsizing_rows(config.served_workloads, history)
    assert row["memory_q99"] == pytest.approx(18.0)  # the one spike is not the q0.99
    assert row["memory_given"] == 80 and row["memory_share"] == pytest.approx(18 / 80)
    # 18 GB x 1.1 = 19.8 GB: 1g.20gb on an A100-80GB (20 GB and 1 of 7 compute slices,
    # enough for a replica busy 10% of a GPU).
    assert row["fit"] == "1g.20gb"
    # FP8 weights: 7 + 4 = 11 GB, 12.1 with headroom: 1g.20gb; INT4: 3.5 + 4 = 7.5 GB,
    # 8.25 with headroom: 1g.10gb.
    assert (row["fit_fp8"], row["fit_int4"]) == ("1g.20gb", "1g.10gb")
    sec = rightsizing_section([row], "ru")
    assert sec is not None and sec.title == "Подбор размера"


def test_compute_and_memory_both_decide_and_no_signal_no_row() -> None:
    # Busy 50% of a GPU: 1g and 2g (1/7 and 2/7 of its compute) are too small for it.
    assert smallest_fit("A100-80GB", 5.0, 0.5) == "4g.40gb"
    # Past the largest GPU of the catalog nothing fits.
    assert smallest_fit("A100-80GB", 5000.0, None) == "–"
    # L4 has no MIG: the smallest GPU model holding the memory.
    assert smallest_fit("L4", 30.0, None) not in ("–", "L4")
    config = parse_config(_config())
    assert rightsizing_rows(config.served_workloads, {}) == []
    assert rightsizing_section([], "en") is None


def test_the_signals_must_be_declared() -> None:
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.memory_signal: 'nope' is not"):
        parse_config(_config(memory_signal="nope"))
