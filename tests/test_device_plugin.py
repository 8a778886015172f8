"""Time-slicing and MPS through the GPU Operator's device plugin config, against the fake API
server, a fake device plugin and GPU feature discovery (tests/fake_device_plugin.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.actuation.kube.device_plugin import (
    CONFIG_LABEL,
    DEVICE_PLUGIN_CONFIG,
    DevicePluginRefused,
    config_name,
    render,
    sharing_config,
)
from scaler.actuation.kube.inventory import SHARING_ANNOTATION, node_info
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import Session
from scaler.plans import Action
from tests.fake_device_plugin import DevicePlugin, DevicePluginConfigError, validate
from tests.fake_kube import Clock, FakeKube, pod, start_fake
from tests.gpu_operator import (
    OPERATOR_NS,
    gfd_view,
    seed_device_plugin_config,
    seed_operator_cluster,
)
from tests.test_kube_mig import kube_provider
from tests.test_kube_providers import action, make_config, seed

NODE = "/api/v1/nodes/md-a"
DP_CONFIG = "tiercast-device-plugin-config"
DP_PATH = f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{DP_CONFIG}"


def _with_device_plugin(fake: FakeKube, strategy: str = "mixed") -> DevicePlugin:
    seed_device_plugin_config(fake, DP_CONFIG, strategy)
    labels, alloc = gfd_view("NVIDIA-H100-80GB-HBM3", 8, "none")

    def gfd(o: dict[str, Any]) -> None:
        o["metadata"]["labels"].update(labels)
        o["status"]["allocatable"].update(alloc)

    fake.mutate(NODE, gfd)
    fake.mutate("/api/v1/nodes/static-a", gfd)
    plugin = DevicePlugin()
    fake.hooks.append(plugin)
    return plugin


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    yield f
    f.stop()


def share(mode: str, replicas: int, node: str = "md-a") -> Action:
    return action(
        "capi",
        2,
        2,
        decision="relayout",
        kind=DEVICE_PLUGIN_CONFIG,
        details={"node": node, "mode": mode, "replicas": replicas},
    )


# --- the config, as the device plugin reads it ---------------------------------------


@pytest.mark.parametrize("mode", ["time-slicing", "mps"])
def test_the_rendered_config_is_one_the_device_plugin_accepts(mode: str) -> None:
    entry = sharing_config(mode, 4)
    assert validate(yaml.safe_load(render(entry))) == (mode, 4)
    key = "timeSlicing" if mode == "time-slicing" else "mps"
    assert entry == {
        "version": "v1",
        "sharing": {key: {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }
    assert config_name(mode, 4) == f"tiercast-{mode}-4"


@pytest.mark.parametrize(
    ("config", "strategy", "error"),
    [
        ({"version": "v2"}, None, "unknown version: v2"),
        ({"sharing": {"timeSlicing": {}}}, None, "no resources specified"),
        ({"sharing": {"mps": {"resources": [{"replicas": 2}]}}}, None, "no resource name"),
        (
            {
                "sharing": {
                    "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}
                }
            },
            None,
            "number of replicas must be >= 2",
        ),
        (
            {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
            "mixed",
            "using --mig-strategy=mixed is not supported with MPS",
        ),
        (
            {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 49}]}}},
            None,
            "maximum allowed replicas exceeded",
        ),
        (
            {"sharing": {"timeSlicing": {"renameByDefault": "yes", "resources": []}}},
            None,
            "renameByDefault must be a boolean",
        ),
        (
            {
                "sharing": {
                    "timeSlicing": {"resources": [{"name": "nvidia.com/GPU_", "replicas": 2}]}
                }
            },
            None,
            "incorrect format for resource name",
        ),
    ],
)
def test_the_fake_refuses_what_the_device_plugin_refuses(
    config: dict[str, Any], strategy: str | None, error: str
) -> None:
    with pytest.raises(DevicePluginConfigError, match=error):
        validate(config, strategy)


def test_configs_the_device_plugin_would_refuse_are_not_rendered() -> None:
    for mode, replicas in (("mps", 1), ("time-slicing", 1), ("mps", 49), ("vgpu", 2)):
        with pytest.raises(DevicePluginRefused):
            sharing_config(mode, replicas)


# --- one node shared through the operator --------------------------------------------


@pytest.mark.parametrize(("mode", "strategy"), [("time-slicing", "mixed"), ("mps", "single")])
def test_a_sharing_config_round_trips_through_the_device_plugin_and_gfd(
    fake: FakeKube, tmp_path: Path, clock: Clock, mode: str, strategy: str
) -> None:
    plugin = _with_device_plugin(fake, strategy)
    provider = kube_provider(fake, tmp_path, clock)
    result = provider.apply(share(mode, 4))
    assert result.outcome == "applied", result
    key = f"tiercast-{mode}-4"
    assert plugin.applied == [("md-a", key)] and not plugin.refused
    cm = fake.get(DP_PATH)["data"]
    assert yaml.safe_load(cm[key]) == sharing_config(mode, 4)
    assert "default" in cm  # every key already there is kept
    node = fake.get(NODE)
    labels = node["metadata"]["labels"]
    assert labels[CONFIG_LABEL] == key
    assert labels["nvidia.com/gpu.sharing-strategy"] == mode
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "32"
    # Read back as the physical GPUs (tests/test_shared_nodes.py).
    config = make_config()
    info = node_info(node, config.pools, config.kubernetes)
    assert (info.devices, info.replicas) == (8, 4)
    # Applying it again changes nothing.
    before = len(fake.writes())
    assert "already shares" in provider.apply(share(mode, 4)).message
    assert len(fake.writes()) == before


def test_mps_is_refused_under_the_mixed_mig_strategy_before_any_write(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    _with_device_plugin(fake, "mixed")
    before = len(fake.writes())
    result = kube_provider(fake, tmp_path, clock).apply(share("mps", 4))
    assert result.outcome == "failed" and "mig.strategy is mixed" in result.message
    assert len(fake.writes()) == before


def test_a_different_config_of_the_same_name_is_never_replaced(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    _with_device_plugin(fake)
    other = render(sharing_config("time-slicing", 2))
    fake.mutate(DP_PATH, lambda o: o["data"].update({"tiercast-time-slicing-4": other}))
    result = kube_provider(fake, tmp_path, clock).apply(share("time-slicing", 4))
    assert result.outcome == "failed" and "already has a different" in result.message
    assert CONFIG_LABEL not in fake.get(NODE)["metadata"]["labels"]


def test_no_device_plugin_config_map_named_is_refused(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    seed_operator_cluster(fake)
    result = kube_provider(fake, tmp_path, clock).apply(share("time-slicing", 4))
    assert result.outcome == "failed" and "devicePlugin.config.name" in result.message


@pytest.mark.parametrize("node_name", ["md-a", "static-a"])
def test_running_gpu_pods_are_drained_when_they_would_lose_their_devices(
    fake: FakeKube, tmp_path: Path, clock: Clock, node_name: str
) -> None:
    _with_device_plugin(fake, "single")
    provider = kube_provider(fake, tmp_path, clock)
    assert provider.apply(share("time-slicing", 4, node_name)).outcome == "applied"
    fake.create("/api/v1/namespaces/default/pods", pod("embed-0", "default", node_name, gpus=1))
    # Time-slicing onto plain GPUs adds devices: no drain. 4 -> 2 takes devices away.
    result = provider.apply(share("time-slicing", 2, node_name))
    assert result.outcome == "applied", result
    evictions = [r for r in fake.requests if r.path.endswith("/eviction")]
    assert [r.path.rsplit("/", 2)[-2] for r in evictions] == ["embed-0"]
    cordons = [
        r.body for r in fake.writes() if r.path == f"/api/v1/nodes/{node_name}" and "spec" in r.body
    ]
    guarded = "karpenter.sh/do-not-disrupt" in cordons[0]["metadata"]["annotations"]
    assert guarded == (node_name == "static-a")  # a Karpenter node is kept from disruption
    node = fake.get(f"/api/v1/nodes/{node_name}")
    assert not node["spec"].get("unschedulable")
    left = node["metadata"].get("annotations") or {}
    assert not [k for k in left if k.startswith("tiercast.io/") or k.startswith("karpenter.sh/")]
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "2"


@pytest.mark.slow
def test_gfd_that_never_shows_the_sharing_restores_the_label(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    plugin = _with_device_plugin(fake)
    fake.hooks.remove(plugin)  # no device plugin answers
    result = kube_provider(fake, tmp_path, clock).apply(share("time-slicing", 4))
    assert result.outcome == "failed" and "GPU feature discovery showed no" in result.message
    assert fake.get(NODE)["metadata"]["labels"].get(CONFIG_LABEL) is None


def test_dry_run_shows_the_config_map_data_and_label_and_writes_nothing(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    _with_device_plugin(fake, "single")
    from scaler.actuation.kube.transport import RetryPolicy
    from tests.fake_kube import connect_to

    transport = connect_to(fake, tmp_path, RetryPolicy(2, 0.01, 0.02, sleep=clock.sleep))
    session = Session(transport, server_dry_run=True)
    provider = KubeProvider(
        make_config(), session, dry_run=True, clock=clock.now, sleep=clock.sleep
    )
    result = provider.apply(share("mps", 4))
    assert result.outcome == "recorded", result
    assert "would share" in result.message and "replicas: 4" in result.message
    patches = [c for c in session.journal if c["verb"] == "PATCH"]
    assert {"tiercast-mps-4": render(sharing_config("mps", 4))} == patches[0]["body"]["data"]
    relabel = patches[-2]["body"]["metadata"]
    assert relabel["labels"] == {CONFIG_LABEL: "tiercast-mps-4"}
    assert "relabelled" in relabel["annotations"][SHARING_ANNOTATION]
    assert patches[-1]["body"] == {"metadata": {"annotations": {SHARING_ANNOTATION: None}}}
    assert all(c.get("query", {}).get("dryRun") == "All" for c in patches)
    assert CONFIG_LABEL not in fake.get(NODE)["metadata"]["labels"]
    assert "tiercast-mps-4" not in fake.get(DP_PATH)["data"]


@pytest.mark.slow
def test_a_node_labelled_already_is_waited_for_not_relabelled(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    _with_device_plugin(fake)
    key = "tiercast-time-slicing-4"
    fake.mutate(
        DP_PATH, lambda o: o["data"].update({key: render(sharing_config("time-slicing", 4))})
    )
    fake.mutate(NODE, lambda o: o["metadata"]["labels"].update({CONFIG_LABEL: key}))
    result = kube_provider(fake, tmp_path, clock).apply(share("time-slicing", 4))
    # The device plugin saw no change of the value, so nothing came: no relabel, no restore.
    assert result.outcome == "failed" and "GPU feature discovery showed no" in result.message
    node_patches = [r for r in fake.writes() if r.path == NODE]
    assert not node_patches
    assert fake.get(NODE)["metadata"]["labels"][CONFIG_LABEL] == key
