"""A cluster shaped like one running NVIDIA's GPU Operator, for tests on the fake API server.

Written from the GPU Operator's documented behaviour and the structure of its static
default mig-parted config (``assets/state-mig-manager/0400_configmap.yaml``, read on
the main branch at commit 0b0b6b1 on 2026-12-01), not copied: a subset of its entries,
with the same shape where it matters to tiercast:

* ``all-disabled``, ``all-enabled``, one ``all-<profile>`` per profile;
* ``all-1g.10gb`` with two ``device-filter`` groups (7 x 1g.10gb on 80 GB parts,
  4 x 1g.10gb on A100-40GB): one name, different layouts per GPU model;
* ``all-balanced``: one group per GPU model, each behind a ``device-filter``.

:func:`seed_operator_cluster` adds the ClusterPolicy (``cluster-policy``, naming the
mig-parted ConfigMap in ``migManager.config.name`` and ``mig.strategy``), the
ConfigMap itself in ``gpu-operator``, and GPU nodes labelled as GPU feature discovery
and the MIG manager leave them (``nvidia.com/gpu.product``, ``nvidia.com/mig.config``,
``nvidia.com/mig.config.state``, ``nvidia.com/mig.strategy``), with the device
plugin's allocatable MIG resources.

:class:`MigManager` is a hook for :class:`tests.fake_kube.FakeKube` that behaves as
the MIG manager: on a new ``nvidia.com/mig.config`` value it sets ``pending``, looks
the name up in the ConfigMap the ClusterPolicy names (``failed`` when absent), then
``success`` with the node's allocatable rewritten to the new MIG devices.
"""

from __future__ import annotations

from typing import Any

import yaml

from scaler.catalog.mig import Layout, parse_mig_parted_entry
from tests.fake_kube import FakeKube, Request

OPERATOR_NS = "gpu-operator"
CLUSTER_POLICY = "/apis/nvidia.com/v1/clusterpolicies/cluster-policy"
H100_SXM_ID = "0x233010DE"
A100_40_ID = "0x20B010DE"

_EIGHTY_GB = ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE"]


def _all(profile: str, n: int) -> list[dict[str, Any]]:
    return [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: n}}]


def default_mig_parted_config() -> dict[str, Any]:
    """The structure of the GPU Operator's default mig-parted config (a subset of entries)."""
    configs: dict[str, Any] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        "all-1g.5gb": _all("1g.5gb", 7),
        "all-2g.10gb": _all("2g.10gb", 3),
        "all-3g.20gb": _all("3g.20gb", 2),
        "all-7g.40gb": _all("7g.40gb", 1),
        "all-1g.10gb": [
            {
                "device-filter": list(_EIGHTY_GB),
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.10gb": 7},
            },
            {
                "device-filter": [A100_40_ID, "0x20B110DE"],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.10gb": 4},
            },
        ],
        "all-1g.20gb": _all("1g.20gb", 4),
        "all-2g.20gb": _all("2g.20gb", 3),
        "all-3g.40gb": _all("3g.40gb", 2),
        "all-4g.40gb": _all("4g.40gb", 1),
        "all-7g.80gb": _all("7g.80gb", 1),
        "all-1g.6gb": _all("1g.6gb", 4),
        "all-2g.12gb": _all("2g.12gb", 2),
        "all-1g.18gb": _all("1g.18gb", 7),
        "all-3g.71gb": _all("3g.71gb", 2),
        "all-balanced": [
            {
                "device-filter": ["0x233510DE", "0x233B10DE"],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
            },
            {
                "device-filter": list(_EIGHTY_GB),
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
            },
            {
                "device-filter": [A100_40_ID, "0x20B110DE"],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
            },
            {
                "device-filter": "0x20B710DE",
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.6gb": 2, "2g.12gb": 1},
            },
        ],
    }
    return {"version": "v1", "mig-configs": configs}


def seed_operator_cluster(
    fake: FakeKube,
    config_map: str = "custom-mig-parted-config",
    strategy: str = "mixed",
) -> None:
    """The ClusterPolicy and the mig-parted ConfigMap it names, as an operator install leaves them."""
    if not fake.exists(f"/api/v1/namespaces/{OPERATOR_NS}"):
        fake.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}},
        )
    fake.create(
        "/apis/nvidia.com/v1/clusterpolicies",
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {
                "mig": {"strategy": strategy},
                "migManager": {
                    "enabled": True,
                    "config": {"name": config_map, "default": "all-disabled"},
                },
            },
        },
    )
    fake.create(
        f"/api/v1/namespaces/{OPERATOR_NS}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": config_map},
            "data": {"config.yaml": yaml.safe_dump(default_mig_parted_config(), sort_keys=False)},
        },
    )


def operator_node(
    name: str,
    labels: dict[str, str],
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpus: int = 8,
    mig_config: str = "all-disabled",
    strategy: str = "mixed",
    mig_devices: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A Ready GPU node as GPU feature discovery, the MIG manager and the device plugin leave it."""
    allocatable: dict[str, str] = {"cpu": "96", "memory": "2Ti"}
    if mig_devices:
        allocatable |= {f"nvidia.com/mig-{p}": str(n) for p, n in mig_devices.items()}
        allocatable["nvidia.com/gpu"] = "0"
    else:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                **labels,
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.strategy": strategy,
                "nvidia.com/mig.config": mig_config,
                "nvidia.com/mig.config.state": "success",
            },
        },
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def mig_config_map(fake: FakeKube, name: str = "custom-mig-parted-config") -> dict[str, Any]:
    """The parsed mig-parted config the ConfigMap ``name`` holds now."""
    cm = fake.get(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{name}")
    return yaml.safe_load(cm["data"]["config.yaml"])


class MigManager:
    """The MIG manager's label protocol: ``pending``, then ``success`` or ``failed``.

    ``model`` and ``gpus`` say what the nodes hold (the real manager reads the GPUs);
    ``after`` is how many requests a change takes; ``fail`` makes every change fail.
    """

    def __init__(self, model: str = "H100-80GB", gpus: int = 8, after: int = 1) -> None:
        self.model, self.gpus, self.after = model, gpus, after
        self.fail = False
        self.applied: list[tuple[str, str]] = []
        self._waiting: dict[str, int] = {}

    def __call__(self, fake: FakeKube, request: Request) -> None:
        for (api, plural, _, name), node in list(fake.state.objects.items()):
            if (api, plural) != ("v1", "nodes"):
                continue
            labels = node["metadata"].get("labels") or {}
            want = labels.get("nvidia.com/mig.config")
            if want is None or labels.get("nvidia.com/mig.config.state") not in (None, "pending"):
                continue
            if name not in self._waiting:
                self._waiting[name] = 0
                fake.mutate(f"/api/v1/nodes/{name}", _state("pending"))
                continue
            self._waiting[name] += 1
            if self._waiting[name] < self.after:
                continue
            del self._waiting[name]
            entry = self._entry(fake, want)
            if entry is None or self.fail:
                fake.mutate(f"/api/v1/nodes/{name}", _state("failed"))
                continue
            layouts = parse_mig_parted_entry(self.model, entry, self.gpus, want)
            fake.mutate(f"/api/v1/nodes/{name}", _applied(layouts, self.gpus))
            self.applied.append((name, want))

    @staticmethod
    def _entry(fake: FakeKube, name: str) -> Any:
        policy = fake.get(CLUSTER_POLICY)
        cm_name = policy["spec"]["migManager"]["config"]["name"]
        configs = mig_config_map(fake, cm_name).get("mig-configs") or {}
        return configs.get(name)


def _state(value: str) -> Any:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"]["nvidia.com/mig.config.state"] = value

    return change


def _applied(layouts: dict[int, Layout], gpus: int) -> Any:
    def change(obj: dict[str, Any]) -> None:
        alloc = obj["status"]["allocatable"]
        for k in [k for k in alloc if k.startswith("nvidia.com/mig-")]:
            del alloc[k]
        whole = 0
        for i in range(gpus):
            lay = layouts.get(i, Layout(whole=True))
            if lay.whole:
                whole += 1
            for p, n in lay.counts:
                key = f"nvidia.com/mig-{p}"
                alloc[key] = str(int(alloc.get(key, "0")) + n)
        alloc["nvidia.com/gpu"] = str(whole)
        obj["metadata"]["labels"]["nvidia.com/mig.config.state"] = "success"

    return change
