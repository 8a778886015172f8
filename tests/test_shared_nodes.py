"""Nodes already shared by time-slicing or MPS are read as their physical GPUs.

Under sharing, NVIDIA's device plugin advertises each device ``replicas`` times as
``nvidia.com/gpu`` and GPU feature discovery writes ``nvidia.com/gpu.replicas``,
``nvidia.com/gpu.sharing-strategy`` and the product with ``-SHARED``, while
``nvidia.com/gpu.count`` stays the devices (NVIDIA/k8s-device-plugin, commit 1b826ac:
``internal/lm/resource.go`` ``productLabel``/``isShared``, ``internal/lm/mig-strategy_test.go``).
"""

from __future__ import annotations

from typing import Any

import pytest

from scaler.actuation.kube.inventory import mig_node_state, node_info, node_views, physical_gpus
from scaler.catalog.mig import Layout
from scaler.config import Config, parse_config
from tests.fake_device_plugin import shared_labels
from tests.gpu_operator import default_mig_parted_config, operator_node

POOL = {"tiercast.io/pool": "h100"}


def _config(mig: bool = True) -> Config:
    pool: dict[str, Any] = {
        "name": "h100",
        "tier": "on-demand",
        "gpu_model": "H100-80GB",
        "gpus_per_node": 8,
        "price_per_gpu_hour": 2.5,
    }
    if mig:
        pool["mig_layouts"] = []
    return parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "api", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10}
            ],
            "pools": [pool],
        }
    )


def _shared(node: dict[str, Any], strategy: str, replicas: int, count: bool = True) -> None:
    """Apply the device plugin's sharing to a node: replicas advertised, -SHARED product."""
    labels = node["metadata"]["labels"]
    labels["nvidia.com/gpu.replicas"] = str(replicas)
    labels["nvidia.com/gpu.sharing-strategy"] = strategy
    labels["nvidia.com/gpu.product"] += "-SHARED"
    if not count:
        del labels["nvidia.com/gpu.count"]
    alloc = node["status"]["allocatable"]
    alloc["nvidia.com/gpu"] = str(int(alloc["nvidia.com/gpu"]) * replicas)


@pytest.mark.parametrize("strategy", ["time-slicing", "mps"])
@pytest.mark.parametrize("count", [True, False])
def test_a_shared_node_is_its_physical_gpus(strategy: str, count: bool) -> None:
    config = _config(mig=False)
    node = operator_node("shared-1", POOL, strategy="none")
    _shared(node, strategy, 4, count=count)
    info = node_info(node, config.pools, config.kubernetes)
    assert (info.gpus, info.replicas, info.devices) == (32, 4, 8)
    # With or without GFD's gpu.count, 8 GPUs, never the 32 replicas or the pool default.
    pool = config.pools[0].model_copy(update={"gpus_per_node": 2})
    assert physical_gpus(info, pool, None, None) == (8, None)
    (view,) = node_views([info], config.pools, {}, None)
    assert (view.gpus, view.model, view.held) == (8, "H100-80GB", False)
    assert view.sharing == f"{strategy} x4"


def test_a_shared_node_under_the_single_strategy_is_not_held() -> None:
    # mig.strategy=single and time-slicing: GFD's count is the 56 MIG devices, the device
    # plugin advertises each twice, the product is <model>-MIG-1g.10gb-SHARED.
    config = _config()
    node = operator_node(
        "single-1", POOL, mig_config="all-1g.10gb", strategy="single", mig_devices={"1g.10gb": 56}
    )
    _shared(node, "time-slicing", 2)
    info = node_info(node, config.pools, config.kubernetes)
    assert info.gpu_product == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"
    assert (info.gpus, info.devices) == (112, 56)
    state = mig_node_state(info, config.pools[0], default_mig_parted_config()["mig-configs"], None)
    assert state.held is None, state.held
    assert state.current == (Layout.of({"1g.10gb": 7}),) * 8


def test_unshared_node_reads_as_before() -> None:
    config = _config(mig=False)
    info = node_info(
        operator_node("plain-1", POOL, strategy="none"), config.pools, config.kubernetes
    )
    assert (info.gpus, info.replicas, info.devices) == (8, 1, 8)
    assert physical_gpus(info, config.pools[0], None, None) == (8, None)


def test_a_node_gfd_finds_invalid_is_not_read_as_shared() -> None:
    # newInvalidMigStrategyLabeler writes replicas 0 and sharing-strategy "".
    config = _config()
    node = operator_node("bad-1", POOL, strategy="none")
    node["metadata"]["labels"] |= {
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "",
    }
    assert node_info(node, config.pools, config.kubernetes).replicas == 1


@pytest.mark.parametrize("strategy", ["time-slicing", "mps"])
def test_a_node_the_device_plugin_shared_is_its_physical_gpus(strategy: str) -> None:
    # As tests/fake_device_plugin.py relabels a node after a device-plugin-config action.
    config = _config(mig=False)
    node = operator_node("shared-2", POOL, strategy="none")
    shared_labels(strategy, 5)(node)
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"].endswith("-SHARED")
    (view,) = node_views([node_info(node, config.pools, config.kubernetes)], config.pools, {}, None)
    assert (view.gpus, view.held, view.sharing) == (8, False, f"{strategy} x5")
