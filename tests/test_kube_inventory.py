"""The inventory of MIG nodes as GPU feature discovery and the device plugin label them.

The nodes come from ``tests/gpu_operator.py``'s :func:`gfd_view`, which writes the
labels and resources each MIG strategy gives (NVIDIA/k8s-device-plugin
``internal/lm/mig-strategy.go``, ``internal/lm/list.go``, ``internal/rm/rm.go``): under
``single`` the count is the MIG devices and the product names the profile; ``.me``
profiles are advertised with ``+`` replaced by ``.``; and the MIG manager's per-node
``<node>-mig-config`` (mig-parted v0.14) is the config a node is read through when the
ClusterPolicy names no custom one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from scaler.actuation.kube.inventory import read_nodes
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import MemoryTransport, RetryPolicy, Session
from scaler.catalog.mig import Layout
from scaler.config import Config, parse_config
from scaler.planning.mig.state import MigNodeState
from tests.fake_kube import Clock, FakeKube, connect_to, start_fake
from tests.gpu_operator import (
    CLUSTER_POLICY,
    OPERATOR_NS,
    gfd_view,
    operator_node,
    seed_node_mig_config,
    seed_operator_cluster,
)

POOL = {"tiercast.io/pool": "h100"}


def config(model: str = "H100-80GB") -> Config:
    return parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": model, "units_per_replica": 1.0}
            ],
            "pools": [
                {
                    "name": "h100",
                    "tier": "reserved",
                    "gpu_model": model,
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 2.5,
                    "min_nodes": 1,
                    "max_nodes": 4,
                    "mig_layouts": [],
                    "provider": {"kind": "placeholder"},
                }
            ],
        }
    )


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    yield f
    f.stop()


def states(fake: FakeKube, tmp_path: Path, cfg: Config | None = None) -> dict[str, MigNodeState]:
    clock = Clock()
    transport = connect_to(fake, tmp_path, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    provider = KubeProvider(cfg or config(), Session(transport), clock=clock.now, sleep=clock.sleep)
    found, _ = provider.mig_inventory()
    assert found is not None
    return {s.name: s for s in found["h100"]}


# ---- the fixture labels as GPU feature discovery does ---------------------------------


def test_gfd_counts_mig_devices_under_single_and_gpus_under_mixed_and_none() -> None:
    product = "NVIDIA-H100-80GB-HBM3"
    single, single_alloc = gfd_view(product, 8, "single", {"1g.10gb": 56})
    assert single["nvidia.com/gpu.count"] == "56"
    assert single["nvidia.com/gpu.product"] == f"{product}-MIG-1g.10gb"
    assert single_alloc == {"nvidia.com/gpu": "56"}
    mixed, mixed_alloc = gfd_view(product, 8, "mixed", {"1g.10gb": 56})
    assert mixed["nvidia.com/gpu.count"] == "8" and mixed["nvidia.com/gpu.product"] == product
    assert mixed["nvidia.com/mig-1g.10gb.count"] == "56"
    assert mixed_alloc == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}
    none, none_alloc = gfd_view(product, 8, "none")
    assert "nvidia.com/mig.strategy" not in none and none_alloc == {"nvidia.com/gpu": "8"}
    # single with no GPU in MIG mode: the full-GPU labels stand.
    off, off_alloc = gfd_view(product, 8, "single")
    assert off["nvidia.com/gpu.count"] == "8" and off_alloc == {"nvidia.com/gpu": "8"}
    # single with two profiles: the invalid labels, count 0.
    bad, _ = gfd_view(product, 8, "single", {"3g.40gb": 8, "2g.20gb": 8})
    assert bad["nvidia.com/gpu.product"] == f"{product}-MIG-INVALID"
    assert bad["nvidia.com/gpu.count"] == "0"


def test_gfd_and_the_device_plugin_name_me_profiles_with_a_dot() -> None:
    labels, alloc = gfd_view("NVIDIA-H100-80GB-HBM3", 8, "mixed", {"1g.10gb+me": 8})
    assert alloc["nvidia.com/mig-1g.10gb.me"] == "8" and "nvidia.com/mig-1g.10gb+me" not in alloc
    assert labels["nvidia.com/mig-1g.10gb.me.count"] == "8"
    single, _ = gfd_view("NVIDIA-H100-80GB-HBM3", 8, "single", {"1g.10gb+me": 8})
    assert single["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"


def test_resource_names_round_trip_through_the_catalog() -> None:
    from scaler.catalog.mig import mig_resource, profile_of_resource

    assert mig_resource("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert mig_resource("3g.40gb") == "nvidia.com/mig-3g.40gb"
    assert profile_of_resource("nvidia.com/mig-1g.10gb.me") == "1g.10gb+me"
    assert profile_of_resource("nvidia.com/mig-2g.12gb.me") == "2g.12gb+me"
    assert profile_of_resource("nvidia.com/mig-3g.40gb") == "3g.40gb"
    assert profile_of_resource("nvidia.com/gpu") is None


# ---- mig.strategy=single ----------------------------------------------------------------


def test_single_strategy_node_is_eight_gpus_of_seven_instances(
    fake: FakeKube, tmp_path: Path
) -> None:
    seed_operator_cluster(fake, strategy="single")
    fake.create(
        "/api/v1/nodes",
        operator_node(
            "n-1", POOL, mig_config="all-1g.10gb", strategy="single", mig_devices={"1g.10gb": 56}
        ),
    )
    state = states(fake, tmp_path)["n-1"]
    assert state.held is None, state.held
    assert list(state.current) == [Layout.of({"1g.10gb": 7})] * 8
    assert state.strategy == "single"


def test_single_strategy_with_mig_off_counts_the_gpus(fake: FakeKube, tmp_path: Path) -> None:
    seed_operator_cluster(fake, strategy="single")
    node = operator_node("n-1", POOL, gpus=4, strategy="single")
    fake.create("/api/v1/nodes", node)
    state = states(fake, tmp_path)["n-1"]
    assert state.held is None and list(state.current) == [Layout(whole=True)] * 4


def test_single_strategy_invalid_or_stale_devices_are_held(fake: FakeKube, tmp_path: Path) -> None:
    seed_operator_cluster(fake, strategy="single")
    fake.create(
        "/api/v1/nodes",
        operator_node(
            "bad",
            POOL,
            mig_config="all-balanced",
            strategy="single",
            mig_devices={"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8},
        ),
    )
    # Labelled all-3g.40gb but still advertising the old 1g.10gb devices.
    fake.create(
        "/api/v1/nodes",
        operator_node(
            "stale", POOL, mig_config="all-3g.40gb", strategy="single", mig_devices={"1g.10gb": 56}
        ),
    )
    found = states(fake, tmp_path)
    assert found["bad"].held and "MIG-INVALID" in found["bad"].held
    assert len(found["bad"].current) == 8
    assert found["stale"].held is not None


def test_physical_gpus_from_an_entry_with_gpu_indexes() -> None:
    from scaler.actuation.kube.inventory import physical_gpus

    cfg = config()
    pool = cfg.pools[0]
    entry = [
        {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [4, 5], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
    ]
    store = MemoryTransport()
    labels, alloc = gfd_view("NVIDIA-H100-80GB-HBM3", 6, "single", {"3g.40gb": 12})
    store.add(
        "/api/v1/nodes/n-1",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"labels": {**POOL, **labels, "nvidia.com/mig.config": "six"}},
            "status": {"allocatable": alloc},
        },
    )
    (node,) = read_nodes(Session(store), cfg.pools, cfg.kubernetes)
    assert physical_gpus(node, pool, "single", entry) == (6, None)


# ---- .me profiles ------------------------------------------------------------------------


def test_a_node_on_a_me_layout_is_read_not_held(fake: FakeKube, tmp_path: Path) -> None:
    seed_operator_cluster(fake, strategy="mixed")
    fake.create(
        "/api/v1/nodes",
        operator_node("n-1", POOL, mig_config="all-1g.10gb.me", mig_devices={"1g.10gb+me": 8}),
    )
    assert "nvidia.com/mig-1g.10gb.me" in fake.get("/api/v1/nodes/n-1")["status"]["allocatable"]
    state = states(fake, tmp_path)["n-1"]
    assert state.held is None, state.held
    assert list(state.current) == [Layout.of({"1g.10gb+me": 1})] * 8


def test_the_offline_seed_advertises_me_devices_as_the_device_plugin_does() -> None:
    from scaler.actuation.kube.providers import build_provider

    data = config().model_dump(mode="json", exclude_none=True)
    data["pools"][0] |= {"mig_layouts": ["1g.10gb+me:1,3g.40gb:1"], "current_nodes": 1}
    data["pools"][0]["provider"] = {"kind": "placeholder"}
    cfg = parse_config(data)
    provider = build_provider(cfg, dry_run=True)
    node = provider.session.get("/api/v1/nodes/h100-0")
    alloc = node["status"]["allocatable"]
    assert alloc.get("nvidia.com/mig-1g.10gb.me") == "8" and not any("+" in k for k in alloc)
    found, _ = provider.mig_inventory()
    assert found is not None and found["h100"][0].held is None


# ---- the MIG manager's per-node config (GPU Operator v26.3+, no custom config) --------------


def test_the_per_node_config_is_read_when_no_custom_config_is_named(
    fake: FakeKube, tmp_path: Path
) -> None:
    seed_operator_cluster(fake, config_map="default-mig-parted-config", strategy="mixed")
    fake.mutate(CLUSTER_POLICY, lambda o: o["spec"]["migManager"].pop("config"))
    h200 = "NVIDIA-H200"
    # all-2g.35gb is generated on the node; the operator's static subset here lacks it.
    fake.create(
        "/api/v1/nodes",
        operator_node(
            "gen", POOL, product=h200, mig_config="all-2g.35gb", mig_devices={"2g.35gb": 24}
        ),
    )
    fake.create(
        "/api/v1/nodes",
        operator_node(
            "static", POOL, product=h200, mig_config="all-2g.35gb", mig_devices={"2g.35gb": 24}
        ),
    )
    generated = seed_node_mig_config(fake, "gen", "H200-141GB")
    assert generated["all-1g.18gb.me"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb+me": 1}}
    ]
    cm = fake.get(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/gen-mig-config")
    assert yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"] == generated
    found = states(fake, tmp_path, config("H200-141GB"))
    assert found["gen"].held is None, found["gen"].held
    assert list(found["gen"].current) == [Layout.of({"2g.35gb": 3})] * 8
    # A node without its own copy is read through the static config, as the manager falls back.
    assert found["static"].held and "not in the mig-parted config" in found["static"].held
