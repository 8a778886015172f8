"""Footprints read off the replicas' memory and utilization signals (scaler.planning.footprints)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, parse_config
from scaler.planning.footprints import observed_footprint, observed_footprints
from scaler.planning.sharing import resolved_mode, workload_replicas_per_gpu
from scaler.service.cycle import run_cycle

NOW = pd.Timestamp("2026-11-30T12:00:00")


def series(values: np.ndarray | float, days: float = 3.0, name: str = "s") -> pd.Series:
    idx = pd.date_range(NOW - pd.Timedelta(days=days), NOW, freq="5min", inclusive="left")
    data = np.broadcast_to(np.asarray(values, dtype=float), (len(idx),)).copy()
    return pd.Series(data, idx, name=name)


def config(**workload: Any) -> Config:
    w = {
        "name": "chat",
        "signal": "rps",
        "gpu_model": "H100-80GB",
        "units_per_replica": 10,
        "memory_signal": "mem",
        "utilization_signal": "util",
        **workload,
    }
    return parse_config(
        {
            "signals": [{"name": "rps"}, {"name": "mem"}, {"name": "util"}],
            "workloads": [w],
            "pools": [
                {
                    "name": "h100",
                    "gpu_model": "H100-80GB",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 2.5,
                    "min_nodes": 0,
                    "max_nodes": 10,
                    "tier": "on-demand",
                    "lead_time_s": 600,
                }
            ],
            "forecast": {"method": "seasonal_naive_1d"},
        },
        "test config",
    )


def history(mem: float | np.ndarray = 14.0, util: float | np.ndarray = 18.0, days: float = 3.0):
    return {
        "rps": series(100.0, days, "rps"),
        "mem": series(mem, days, "mem"),
        "util": series(util, days, "util"),
    }


def test_a_workload_that_declares_no_footprint_is_packed_on_what_its_replicas_use() -> None:
    rng = np.random.default_rng(0)
    n = len(series(0.0))
    filled, notes = observed_footprints(
        config().workloads, history(mem=12 + 2 * rng.random(n), util=10 + 8 * rng.random(n))
    )
    w = filled["chat"]
    # q0.99 memory just under 14 GB, +10%: 16 GB; q0.99 utilization just under 18%, +10%:
    # 0.198, up to the next 0.05: 0.20. An H100 holds 5 such replicas under MPS.
    assert w.memory_gb == 16.0 and w.compute_share == pytest.approx(0.20)
    assert resolved_mode(w) == "mps" and workload_replicas_per_gpu(w) == 5
    assert len(notes) == 1 and "footprint from its signals" in notes[0] and "chat" in notes[0]


def test_what_is_declared_wins() -> None:
    declared = config(memory_gb=30, compute_share=0.5)
    assert observed_footprints(declared.workloads, history()) == ({}, [])
    # A declared memory with an observed share: the share is filled in, the memory kept.
    filled, _ = observed_footprints(config(memory_gb=30).workloads, history())
    w = filled["chat"]
    assert w.memory_gb == 30 and w.compute_share == pytest.approx(0.20)
    assert workload_replicas_per_gpu(w) == 2


@pytest.mark.parametrize(
    "workload, hist",
    [
        ({"isolation": "required"}, history()),
        ({"sharing": "whole"}, history()),
        ({"gpus_per_replica": 2, "sharing": "whole"}, history()),
        ({}, history(days=0.5)),  # under a day of history
        ({}, history(mem=np.nan)),  # no finite value
        ({}, history(mem=-5.0)),  # only negative values
        ({}, history(mem=120.0)),  # more than the GPU holds
        ({"memory_signal": None}, history()),  # half a footprint packs nothing
        ({"utilization_signal": None}, history()),
    ],
)
def test_missing_or_bad_data_and_workloads_that_may_not_share_keep_a_whole_gpu(
    workload: dict[str, Any], hist: dict[str, pd.Series]
) -> None:
    cfg = config(**workload)
    filled, notes = observed_footprints(cfg.workloads, hist)
    assert filled == {} and notes == []
    assert workload_replicas_per_gpu(cfg.workloads[0]) == 1


def test_a_busy_replica_is_not_packed() -> None:
    # 60% busy: a share of 0.70 leaves no room for a second replica.
    w, note = observed_footprint(config().workloads[0], history(util=60.0))
    assert w.compute_share == pytest.approx(0.70) and note is not None
    assert workload_replicas_per_gpu(w) == 1


def test_the_replicas_per_gpu_do_not_move_with_small_noise() -> None:
    # Rounding up to whole GB and to steps of 0.05 keeps the packing through small changes.
    counts = {
        workload_replicas_per_gpu(observed_footprint(config().workloads[0], history(m, u))[0])
        for m in (13.2, 13.5, 13.9)
        for u in (16.0, 17.0, 18.0)
    }
    assert counts == {5}


def test_the_cycle_plans_with_the_observed_footprint_and_says_so(tmp_path) -> None:
    cfg = config().model_copy(
        update={"model_store": config().model_store.model_copy(update={"path": tmp_path})}
    )
    result = run_cycle(cfg, history(), RecordingProvider({"h100": 0}), NOW, dry_run=True)
    # The plan's fleet carries the observed footprint; the loaded config is left as it was.
    assert result.fleet is not None and result.fleet.workloads[0].compute_share == 0.2
    assert cfg.workloads[0].compute_share is None
    assert any("footprint from its signals" in n for n in result.plan.notes)
    assert result.plan.sharing["workloads"]["chat"]["mode"] == "mps"
