"""Footprints read off the replicas' memory and utilization signals (scaler.planning.footprints)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from scaler import wording
from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, parse_config
from scaler.planning.footprints import (
    implausible_footprints,
    observed_footprint,
    observed_footprints,
)
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
    (note,) = notes
    assert "footprint from its signals" in str(note) and "chat" in str(note)
    assert "memory 14.0 GB over 3.0 d -> 16 GB" in str(note)
    # A Russian review says it in Russian, numbers with the decimal comma.
    assert "память 14,0 ГБ за 3,0 дн. -> 16 ГБ" in note.text("ru")


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
    assert any("footprint from its signals" in str(n) for n in result.plan.notes)
    assert result.plan.sharing["workloads"]["chat"]["mode"] == "mps"


# Implausible footprints are suspect data (#50 finding 6): never packed, never a scale-down.


@pytest.mark.parametrize(
    ("workload", "hist", "signal", "floor"),
    [
        ({}, history(mem=0.05, util=0.0), "mem", 0.5),  # the case
        ({}, history(mem=0.2, util=18.0), "mem", 0.5),  # under a CUDA context
        ({"model_params_b": 70}, history(mem=12.0, util=18.0), "mem", 35.0),  # under INT4 weights
        ({}, history(mem=14.0, util=0.4), "util", 1.0),  # never busy
        ({"memory_gb": 16}, history(mem=0.05, util=0.0), "util", 1.0),  # the share still read
    ],
    ids=["issue", "under-a-context", "under-the-weights", "never-busy", "declared-memory"],
)
def test_a_footprint_far_below_what_a_replica_uses_is_held_not_packed(
    workload: dict[str, Any], hist: dict[str, pd.Series], signal: str, floor: float
) -> None:
    cfg = config(**workload)
    w, note = observed_footprint(cfg.workloads[0], hist)
    assert note is None and w == cfg.workloads[0]
    assert workload_replicas_per_gpu(w) == 1
    held = implausible_footprints(cfg.workloads, hist)
    [why] = held["rps"]
    assert why.code == wording.SUSPECT_FOOTPRINT
    assert why.params["footprint_signal"] == signal and why.params["floor"] == floor
    for lang in wording.LANGS:
        text = why.text(lang)
        assert "chat" in text and signal in text and "\n" not in text


def test_a_plausible_or_declared_footprint_is_not_suspect() -> None:
    assert implausible_footprints(config().workloads, history()) == {}
    declared = config(memory_gb=1, compute_share=0.05)
    assert implausible_footprints(declared.workloads, history(mem=0.05, util=0.0)) == {}
    # Too little history judges nothing (and reads nothing).
    assert implausible_footprints(config().workloads, history(0.05, 0.0, days=0.5)) == {}


def test_an_implausible_footprint_holds_the_pool_instead_of_releasing_it(tmp_path) -> None:
    """The issue's fleet in small: 0.05 GB and 0% packed 20 replicas a GPU and released
    nodes, exit 0. Now the pool holds, with the reason in the plan."""
    cfg = config().model_copy(
        update={"model_store": config().model_store.model_copy(update={"path": tmp_path})}
    )
    hist = history(mem=0.05, util=0.0)
    hist["rps"] = series(300.0, 3.0, "rps")  # 30 replicas: 30 whole GPUs, 4 nodes
    result = run_cycle(cfg, hist, RecordingProvider({"h100": 4}), NOW, dry_run=True)
    [action] = [a for a in result.plan.actions if a.pool == "h100"]
    assert action.decision != "scale-down" and action.target_nodes >= 4
    assert result.fleet is not None and result.fleet.workloads[0].compute_share is None
    assert "suspect.footprint" in json.dumps(result.plan.to_dict(), default=str)
