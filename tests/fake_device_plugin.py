"""NVIDIA's device plugin and GPU feature discovery, on a node's sharing config, as a fake.

Follows NVIDIA/k8s-device-plugin (commit 1b826ac, 2026-08-19):

* ``cmd/config-manager/main.go``: the config manager acts when the value of the node's
  ``nvidia.com/device-plugin.config`` label changes, and picks that key of the ConfigMap
  mounted in its pod ("specified config %v does not exist" otherwise: the plugin keeps
  its old config); the ConfigMap is the ClusterPolicy's ``devicePlugin.config.name``.
* ``api/config/v1/config.go`` ``parseConfigFrom``: ``version`` empty or ``v1`` ("unknown
  version"); ``sharing.go``: ``mps`` wins over ``timeSlicing``, and the strategy is
  ``none`` unless some resource has ``replicas > 1``;
* ``api/config/v1/replicas.go``: ``resources`` present and not empty ("no resources
  specified"), each with a ``name`` and ``replicas`` ("number of replicas must be >= 2"),
  ``devices`` ``all``, a count > 0 or a list; ``renameByDefault`` renames to
  ``<name>.shared``; ``config.go`` ``DisableResourceNamingInConfig`` then drops
  ``rename`` and ``devices`` (every GPU shared, the name kept, so the product keeps
  ``-SHARED``); ``failRequestsGreaterThanOne`` a boolean, true by default under MPS;
* ``api/config/v1/resources.go`` ``NewResourceName``: ``nvidia.com/`` prefix, at most 63
  characters, a DNS subdomain after it;
* ``cmd/nvidia-device-plugin/main.go``: "using --mig-strategy=mixed is not supported with MPS";
* ``cmd/mps-control-daemon/mps/device.go``: at most 48 MPS clients (Volta and later);
* ``internal/lm/resource.go``: GPU feature discovery labels ``nvidia.com/gpu.replicas``,
  ``nvidia.com/gpu.sharing-strategy`` and ``-SHARED`` on the product when shared (not
  renamed), ``nvidia.com/gpu.count`` stays the devices; the device plugin advertises
  ``replicas`` devices per GPU.

A config the device plugin would refuse leaves the node as it was (the plugin exits and
restarts on the old config) and is recorded in ``refused``.

Under MPS the GPU Operator runs an MPS control daemon pod on the node (NVIDIA/gpu-operator
commit a22dbf6, ``assets/state-mps-control-daemon/0400_daemonset.yaml``: DaemonSet
``nvidia-device-plugin-mps-control-daemon``, pods labelled ``app`` so); the daemon creates
``/mps/.ready`` once its per-device daemons run (k8s-device-plugin
``cmd/mps-control-daemon/main.go``). The fake starts that pod not Ready and makes it Ready
``mps_ready_after`` requests later, so a test sees whether tiercast waits for it.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.fake_kube import FakeKube, Request, pod
from tests.gpu_operator import CLUSTER_POLICY, OPERATOR_NS

CONFIG_LABEL = "nvidia.com/device-plugin.config"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class DevicePluginConfigError(ValueError):
    """What the device plugin says of a config it refuses."""


def validate(config: Any, mig_strategy: str | None = None) -> tuple[str, int]:
    """The strategy and replicas of a ``version: v1`` device plugin config, validated as
    the device plugin does; :class:`DevicePluginConfigError` otherwise."""
    if not isinstance(config, dict):
        raise DevicePluginConfigError("unmarshal error: not a mapping")
    version = config.get("version") or "v1"
    if version != "v1":
        raise DevicePluginConfigError(f"unknown version: {version}")
    sharing = config.get("sharing") or {}
    found: dict[str, int] = {}
    for key, strategy in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        if key not in sharing:
            continue
        rrs = sharing[key] or {}
        for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
            if flag in rrs and not isinstance(rrs[flag], bool):
                raise DevicePluginConfigError(f"{flag} must be a boolean")
        resources = rrs.get("resources")
        if not resources:
            raise DevicePluginConfigError("no resources specified")
        for r in resources:
            if "name" not in r:
                raise DevicePluginConfigError("no resource name specified")
            name = str(r["name"])
            full = name if name.startswith("nvidia.com/") else f"nvidia.com/{name}"
            if len(full) > 63 or not _DNS_SUBDOMAIN.match(full.split("/", 1)[1]):
                raise DevicePluginConfigError(f"incorrect format for resource name '{full}'")
            if "replicas" not in r:
                raise DevicePluginConfigError("no replicas specified")
            if not isinstance(r["replicas"], int) or r["replicas"] < 2:
                raise DevicePluginConfigError("number of replicas must be >= 2")
            devices = r.get("devices", "all")
            if isinstance(devices, str) and devices != "all":
                raise DevicePluginConfigError(
                    f"devices set as '{devices}' but the only valid string input is 'all'"
                )
            if isinstance(devices, int) and devices <= 0:
                raise DevicePluginConfigError(
                    f"devices set as '{devices}' but a count of devices must be > 0"
                )
            if full == "nvidia.com/gpu":
                found[strategy] = int(r["replicas"])
    # Sharing.SharingStrategy: MPS first, then time-slicing.
    if "mps" in found:
        if mig_strategy == "mixed":
            raise DevicePluginConfigError("using --mig-strategy=mixed is not supported with MPS")
        if found["mps"] > 48:
            raise DevicePluginConfigError(f"maximum allowed replicas exceeded: {found['mps']} > 48")
        return "mps", found["mps"]
    if "time-slicing" in found:
        return "time-slicing", found["time-slicing"]
    return "none", 1


class DevicePlugin:
    """On a change of a node's ``nvidia.com/device-plugin.config``: read the named key,
    validate it, and relabel and re-advertise the node as GPU feature discovery does."""

    def __init__(self, mps_ready_after: int = 2) -> None:
        self.mps_ready_after = mps_ready_after
        self._starting: dict[str, int] = {}
        """Node -> requests left until its MPS daemon pod is Ready."""
        self.applied: list[tuple[str, str]] = []
        """(node, config) of every config applied."""
        self.refused: list[tuple[str, str, str]] = []
        """(node, config, the device plugin's error) of every config refused."""
        self._seen: dict[str, str | None] = {}

    def __call__(self, fake: FakeKube, request: Request) -> None:
        for node_name in list(self._starting):
            self._starting[node_name] -= 1
            if self._starting[node_name] <= 0:
                del self._starting[node_name]
                fake.mutate(mps_daemon_path(node_name), _ready)
        for (api, plural, _, name), node in list(fake.state.objects.items()):
            if (api, plural) != ("v1", "nodes"):
                continue
            value = (node["metadata"].get("labels") or {}).get(CONFIG_LABEL)
            if name not in self._seen:
                self._seen[name] = value
                continue
            if value == self._seen[name]:
                continue
            self._seen[name] = value
            if value:
                self._apply(fake, name, value)

    def _apply(self, fake: FakeKube, node: str, key: str) -> None:
        policy = fake.get(CLUSTER_POLICY)["spec"]
        cm_name = ((policy.get("devicePlugin") or {}).get("config") or {}).get("name")
        path = f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{cm_name}"
        data = (fake.get(path).get("data") or {}) if cm_name and fake.exists(path) else {}
        if key not in data:
            self.refused.append((node, key, f"specified config {key} does not exist"))
            return
        try:
            strategy, replicas = validate(
                yaml.safe_load(data[key]), (policy.get("mig") or {}).get("strategy")
            )
        except DevicePluginConfigError as exc:
            self.refused.append((node, key, str(exc)))
            return
        fake.mutate(f"/api/v1/nodes/{node}", shared_labels(strategy, replicas))
        self.applied.append((node, key))
        path = mps_daemon_path(node)
        if strategy == "mps" and not fake.exists(path):
            daemon = pod(path.rsplit("/", 1)[-1], OPERATOR_NS, node, {"app": MPS_DAEMON_APP})
            daemon["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            fake.create(f"/api/v1/namespaces/{OPERATOR_NS}/pods", daemon)
            self._starting[node] = self.mps_ready_after
        elif strategy != "mps" and fake.exists(path):
            fake.delete_object(path)


MPS_DAEMON_APP = "nvidia-device-plugin-mps-control-daemon"


def mps_daemon_path(node: str) -> str:
    """The MPS control daemon pod on ``node`` (one per node, as a DaemonSet's)."""
    return f"/api/v1/namespaces/{OPERATOR_NS}/pods/{MPS_DAEMON_APP}-{node}"


def mps_daemon_ready(fake: FakeKube, node: str) -> bool:
    path = mps_daemon_path(node)
    if not fake.exists(path):
        return False
    conditions = fake.get(path)["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _ready(obj: dict[str, Any]) -> None:
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]


def shared_labels(strategy: str, replicas: int) -> Any:
    """A node change: GPU feature discovery's labels and the device plugin's devices under
    ``strategy`` x ``replicas`` (``internal/lm/resource.go``)."""

    def change(obj: dict[str, Any]) -> None:
        labels = obj["metadata"]["labels"]
        alloc = obj["status"]["allocatable"]
        count = int(labels.get("nvidia.com/gpu.count", "0"))
        product = labels.get("nvidia.com/gpu.product", "").removesuffix("-SHARED")
        shared = replicas > 1
        if product:  # GPU feature discovery labels the product only where NVML names one
            labels["nvidia.com/gpu.product"] = f"{product}-SHARED" if shared else product
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = strategy if shared else "none"
        alloc["nvidia.com/gpu"] = str(count * replicas)

    return change
