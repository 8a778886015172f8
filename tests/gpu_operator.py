"""A cluster shaped like one running NVIDIA's GPU Operator, for tests on the fake API server.

Written from the GPU Operator's documented behaviour and the structure of its static
default mig-parted config (``assets/state-mig-manager/0400_configmap.yaml``, read on
the main branch at commit 0b0b6b1 on 2026-12-01), not copied: a subset of its entries,
with the same shape where it matters to tiercast:

* ``all-disabled``, ``all-enabled``, one ``all-<profile>`` per profile (``all-1g.10gb.me``
  for ``1g.10gb+me``);
* ``all-1g.10gb`` with two ``device-filter`` groups (7 x 1g.10gb on 80 GB parts,
  4 x 1g.10gb on A100-40GB): one name, different layouts per GPU model;
* ``all-balanced``: one group per GPU model, each behind a ``device-filter``.

:func:`seed_operator_cluster` adds the ClusterPolicy (``cluster-policy``, naming the
mig-parted ConfigMap in ``migManager.config.name`` and ``mig.strategy``), the
ConfigMap itself in ``gpu-operator``, and GPU nodes labelled as GPU feature discovery
and the MIG manager leave them (``nvidia.com/gpu.product``, ``nvidia.com/mig.config``,
``nvidia.com/mig.config.state``, ``nvidia.com/mig.strategy``), with the device
plugin's allocatable MIG resources. :func:`gfd_view` says what GPU feature discovery
and the device plugin write for each MIG strategy (the count and product under
``single``, the ``.me`` resource names), for :func:`operator_node` and after each change
of the MIG manager below; :func:`seed_node_mig_config` is the per-node config the MIG
manager publishes when the ClusterPolicy names no custom one.

:class:`MigManager` is a hook for :class:`tests.fake_kube.FakeKube` that behaves as
the MIG manager: only on a change of the ``nvidia.com/mig.config`` value, it looks the
name up in its mounted copy of the ConfigMap the ClusterPolicy names, which lags the API
object (``failed`` when absent), sets ``pending``, then ``success`` with the node's
allocatable rewritten to the new MIG devices.
"""

from __future__ import annotations

from typing import Any

import yaml

from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import Layout
from tests.fake_kube import Clock, FakeKube, Request

OPERATOR_NS = "gpu-operator"
CLUSTER_POLICY = "/apis/nvidia.com/v1/clusterpolicies/cluster-policy"
H100_SXM_ID = "0x233010DE"
A100_40_ID = "0x20B010DE"

# The device-filter lists of the operator's default config
# (assets/state-mig-manager/0400_configmap.yaml at commit a22dbf6, as NVIDIA/mig-parted's
# deployments/systemd/config-default.yaml at bd7160f): H100/H800 80 GB and A100/A800 80 GB
# share one geometry; A100/A800 40 GB another; H200 and H200 NVL one (all-balanced), but
# all-1g.35gb names the H200 SXM board (0x2335) only.
_EIGHTY_GB = [
    "0x233010DE",
    "0x233110DE",
    "0x232210DE",
    "0x20B210DE",
    "0x20B510DE",
    "0x20F310DE",
    "0x20F510DE",
    "0x232410DE",
]
_FORTY_GB = [A100_40_ID, "0x20B110DE", "0x20F110DE", "0x20F610DE"]
H200_SXM_ID = "0x233510DE"
H200_NVL_ID = "0x233B10DE"


def _all(profile: str, n: int) -> list[dict[str, Any]]:
    return [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: n}}]


def default_mig_parted_config() -> dict[str, Any]:
    """The structure of the GPU Operator's default mig-parted config (a subset of entries)."""
    configs: dict[str, Any] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.35gb": [
            {
                "device-filter": [H200_SXM_ID],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.35gb": 4},
            }
        ],
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
                "device-filter": list(_FORTY_GB),
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.10gb": 4},
            },
        ],
        "all-1g.10gb.me": _all("1g.10gb+me", 1),
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
                "device-filter": [H200_SXM_ID, H200_NVL_ID],
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
                "device-filter": list(_FORTY_GB),
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


def gfd_view(
    product: str,
    gpus: int,
    strategy: str,
    devices: dict[str, int] | None = None,
    whole: int | None = None,
    empty: int = 0,
) -> tuple[dict[str, str], dict[str, str]]:
    """The GPU labels GPU feature discovery writes and the GPU resources the device plugin
    advertises, for ``gpus`` GPUs of ``product``: ``whole`` with MIG off (default all when
    no ``devices``), ``empty`` with MIG on and no instance, the rest holding ``devices``
    (MIG devices by profile, node totals).

    Follows NVIDIA/k8s-device-plugin (commit 1b826ac, 2026-08-19):

    * ``internal/lm/mig-strategy.go``: the full-GPU labeler writes ``nvidia.com/gpu.count``
      as the physical GPUs and ``nvidia.com/gpu.product`` as the model; under ``mixed``
      each profile gets ``nvidia.com/mig-<profile>.count`` / ``.product``; under
      ``single`` the MIG labeler, merged after it, writes ``nvidia.com/gpu.count`` as the
      number of MIG devices and the product ``<model>-MIG-<profile>``, or
      ``<model>-MIG-INVALID`` with count 0 when GPUs mix MIG on and off, profiles differ
      or a MIG GPU is empty; with no GPU in MIG mode the full-GPU labels stand; under
      ``none`` no ``nvidia.com/mig.strategy`` label is written;
    * ``internal/lm/list.go``: labelers later in the list overwrite earlier ones;
    * ``internal/rm/rm.go`` ``AddDefaultResourcesToConfig``: ``single`` advertises MIG
      devices as ``nvidia.com/gpu``, ``mixed`` as ``nvidia.com/mig-<profile>`` with
      ``+`` replaced by ``.`` (``1g.10gb+me`` is ``nvidia.com/mig-1g.10gb.me``), beside
      the MIG-off GPUs as ``nvidia.com/gpu``;
    * ``internal/resource/nvml-mig-device.go`` ``GetName``: a MIG device's name (in the
      product label too) has ``+`` replaced by ``.``.
    """
    devices = {p: n for p, n in (devices or {}).items() if n > 0}
    whole = (0 if devices or empty else gpus) if whole is None else whole
    labels = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
    }
    allocatable = {"nvidia.com/gpu": str(whole)}
    if strategy != "none":
        labels["nvidia.com/mig.strategy"] = strategy
    if strategy == "mixed":
        for p, n in devices.items():
            name = p.replace("+", ".")
            labels[f"nvidia.com/mig-{name}.count"] = str(n)
            if product:
                labels[f"nvidia.com/mig-{name}.product"] = f"{product}-MIG-{name}"
            allocatable[f"nvidia.com/mig-{name}"] = str(n)
    elif strategy == "single" and whole < gpus:
        if whole or empty or len(devices) != 1:
            labels |= {"nvidia.com/gpu.product": f"{product}-MIG-INVALID"}
            labels |= {"nvidia.com/gpu.count": "0", "nvidia.com/gpu.replicas": "0"}
            allocatable["nvidia.com/gpu"] = "0"
        else:
            ((p, n),) = devices.items()
            labels["nvidia.com/gpu.product"] = f"{product}-MIG-{p.replace('+', '.')}"
            labels["nvidia.com/gpu.count"] = str(n)
            allocatable["nvidia.com/gpu"] = str(n)
    return labels, allocatable


def operator_node(
    name: str,
    labels: dict[str, str],
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpus: int = 8,
    mig_config: str = "all-disabled",
    strategy: str = "mixed",
    mig_devices: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A Ready GPU node as GPU feature discovery, the MIG manager and the device plugin leave it.

    ``mig_devices`` are the node's MIG devices by profile (every GPU in MIG mode), labelled
    and advertised as :func:`gfd_view` says the ``strategy`` has them.
    """
    gfd, devices = gfd_view(product, gpus, strategy, mig_devices)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                **labels,
                **gfd,
                "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.config": mig_config,
                "nvidia.com/mig.config.state": "success",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "2Ti", **devices},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def seed_node_mig_config(fake: FakeKube, node: str, model: str = "H100-80GB") -> dict[str, Any]:
    """The ConfigMap ``<node>-mig-config`` the MIG manager publishes with no custom config.

    Follows NVIDIA/mig-parted (commit bd7160f, 2026-08-21; v0.14.0 and later, shipped with
    GPU Operator v26.3.0): with no ``CONFIG_FILE`` the MIG manager generates its config
    from the GPUs it finds and writes it, key ``config.yaml``, to ``<node>-mig-config`` in
    its namespace, labelled ``nvidia.com/node-name`` (``cmd/nvidia-mig-manager/main.go``
    ``setupMigConfig``, ``createNodeConfigMap``). The generated entries
    (``pkg/mig/builder/builder.go`` ``buildMigConfigSpec``): ``all-disabled``,
    ``all-enabled`` and one ``all-<profile>`` per profile at its most instances, the
    name with ``+`` replaced by ``.`` (``all-1g.10gb.me``) and the ``mig-devices`` key
    as NVML names it (``1g.10gb+me``); no ``device-filter`` on a node of one GPU model.
    (``all-balanced`` is left out here.) Returns the mig-configs written.
    """
    from scaler.catalog.mig import geometry

    configs: dict[str, Any] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    for p in sorted(geometry(model).profiles, key=lambda p: p.name):
        configs[f"all-{p.name.replace('+', '.')}"] = _all(p.name, p.max_count)
    text = "# DO NOT EDIT: Auto-generated MIG configuration from GPU hardware.\n"
    text += yaml.safe_dump({"version": "v1", "mig-configs": configs}, sort_keys=False)
    fake.create(
        f"/api/v1/namespaces/{OPERATOR_NS}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{node}-mig-config",
                "labels": {
                    "app.kubernetes.io/component": "nvidia-mig-manager",
                    "nvidia.com/node-name": node,
                },
            },
            "data": {"config.yaml": text},
        },
    )
    return configs


def mig_config_map(fake: FakeKube, name: str = "custom-mig-parted-config") -> dict[str, Any]:
    """The parsed mig-parted config the ConfigMap ``name`` holds now."""
    cm = fake.get(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{name}")
    return yaml.safe_load(cm["data"]["config.yaml"])


class MigManager:
    """The MIG manager as NVIDIA/mig-parted (commit bd7160f, 2026-08-21) has it, on a node's labels.

    * It reconfigures only when the *value* of ``nvidia.com/mig.config`` changes
      (``cmd/nvidia-mig-manager/main.go``: the node informer's ``UpdateFunc`` compares the
      old and new label, and ``SyncableMigConfig`` hands its loop only a value it has not
      read): dropping ``nvidia.com/mig.config.state`` or writing the same value again does
      nothing, and a value set while a change runs is taken up after it (only the latest).
      The label a node has when first seen is taken as applied (the manager applies it
      at start, ``AddFunc``, and finds it already there).
    * It reads the mig-parted config from the copy of the ConfigMap the kubelet mounts in
      its pod, not from the API: a change of the ConfigMap reaches that copy ``lag_s``
      after it lands (default 95: the kubelet's pod sync comes ``wait.Jitter(1m, 0.5)``
      after the last one, up to 90 s, then the ConfigMap is read from its watch and
      written into the volume), timed on ``clock`` (without one the copy is current).
    * ``pkg/mig/reconfigure/reconfigure.go`` ``Run``: it asserts the name is in that copy
      first and sets ``failed`` when it is not (``validateMigConfig``); a config already
      applied goes straight to ``success`` (``isConfigAlreadyApplied``); otherwise
      ``pending``, and after ``after`` requests ``success`` with the node's devices and
      labels as the restarted device plugin and GPU feature discovery give them, or
      ``failed`` when ``fail`` is set.

    ``model`` and ``gpus`` say what the nodes hold (the real manager reads the GPUs).
    """

    def __init__(
        self,
        model: str = "H100-80GB",
        gpus: int = 8,
        after: int = 1,
        clock: Clock | None = None,
        lag_s: float = 95.0,
        device_id: str | None = None,
    ) -> None:
        self.model, self.gpus, self.after = model, gpus, after
        self.device_id = device_id or gpu_model(model).pci_device_ids[0]
        """The PCI device ID of every GPU of the nodes (default the model's first board's)."""
        self._layouts: dict[str, dict[int, Layout]] = {}
        """Per node, what its GPUs hold after the changes applied (MIG off at first)."""
        self.clock, self.lag_s = clock, lag_s
        self.fail = False
        self.applied: list[tuple[str, str]] = []
        """(node, config) of every change applied, in order."""
        self.started: list[tuple[str, str]] = []
        """(node, config) of every change the manager took up, applied or failed."""
        self._seen: dict[str, str | None] = {}
        """The label value each node's informer last handed over."""
        self._current: dict[str, str | None] = {}
        """The config each node's GPUs are in."""
        self._running: dict[str, list[Any]] = {}
        """Per node: [config, requests waited] of the change running."""
        self._queued: dict[str, str] = {}
        self._versions: list[tuple[float, str, dict[str, Any]]] = []
        """(time written, ConfigMap name, mig-configs) of each content of the API object."""
        self._written_at: float | None = None

    def _now(self) -> float:
        return self.clock.now() if self.clock is not None else 0.0

    def __call__(self, fake: FakeKube, request: Request) -> None:
        self._observe_config_map(fake)
        if request.method != "GET" and "/configmaps/" in request.path:
            # Hooks run before a request lands: its content is noted at the next
            # request, but timed from now, when it reached the API.
            self._written_at = self._now()
        for (api, plural, _, name), node in list(fake.state.objects.items()):
            if (api, plural) != ("v1", "nodes"):
                continue
            labels = node["metadata"].get("labels") or {}
            value = labels.get("nvidia.com/mig.config")
            if name not in self._seen:
                self._seen[name] = self._current[name] = value
                continue
            if value != self._seen[name]:
                self._seen[name] = value
                if value:  # SyncableMigConfig.Set wakes the loop only for a value
                    if name in self._running:
                        self._queued[name] = value
                    else:
                        self._begin(fake, name, value)
                continue
            if name in self._running:
                self._progress(fake, name, labels)

    def _begin(self, fake: FakeKube, name: str, want: str) -> None:
        """``reconfigure.go`` ``Run`` up to ``pending``: assert the name, skip if applied."""
        self.started.append((name, want))
        if self._mounted_entry(want) is None:
            fake.mutate(f"/api/v1/nodes/{name}", _state("failed"))
            return
        if self._current.get(name) == want:
            fake.mutate(f"/api/v1/nodes/{name}", _state("success"))
            return
        self._running[name] = [want, 0]
        fake.mutate(f"/api/v1/nodes/{name}", _state("pending"))

    def _progress(self, fake: FakeKube, name: str, labels: dict[str, str]) -> None:
        run = self._running[name]
        run[1] += 1
        if run[1] < self.after:
            return
        del self._running[name]
        want = run[0]
        entry = self._mounted_entry(want)
        if entry is None or self.fail:
            fake.mutate(f"/api/v1/nodes/{name}", _state("failed"))
        else:
            before = self._layouts.get(name, {i: Layout(whole=True) for i in range(self.gpus)})
            layouts = mig_parted_layouts(entry, [self.device_id] * self.gpus, before)
            self._layouts[name] = layouts
            # GFD and the device plugin run with the ClusterPolicy's mig.strategy
            # (gpu-operator controllers/object_controls.go applyMIGConfiguration).
            policy_strategy = fake.get(CLUSTER_POLICY)["spec"].get("mig", {}).get("strategy")
            strategy = labels.get("nvidia.com/mig.strategy") or policy_strategy or "single"
            fake.mutate(f"/api/v1/nodes/{name}", _applied(layouts, self.gpus, strategy))
            self._current[name] = want
            self.applied.append((name, want))
        queued = self._queued.pop(name, None)
        if queued is not None and queued != want:
            self._begin(fake, name, queued)

    def _observe_config_map(self, fake: FakeKube) -> None:
        """Note the content of the ConfigMap the ClusterPolicy names, when it changed."""
        try:
            policy = fake.get(CLUSTER_POLICY)
            cm_name = policy["spec"]["migManager"]["config"]["name"]
            configs = mig_config_map(fake, cm_name).get("mig-configs") or {}
        except Exception:  # no operator installed (yet): nothing mounted to track
            return
        if not self._versions or self._versions[-1][1:] != (cm_name, configs):
            at = self._written_at if self._written_at is not None else self._now()
            self._versions.append((at, cm_name, configs))
        self._written_at = None

    def _mounted_entry(self, name: str) -> Any:
        """The entry ``name`` in the mounted copy: the newest content ``lag_s`` old or older
        (the first content seen, when none is that old yet)."""
        if not self._versions:
            return None
        if self.clock is None:
            return self._versions[-1][2].get(name)
        visible = [v for v in self._versions if v[0] <= self._now() - self.lag_s]
        return (visible[-1] if visible else self._versions[0])[2].get(name)

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


def _filter_id(text: str) -> tuple[int, int, int | None] | None:
    """``pkg/types/device.go`` ``NewDeviceIDFromString``: ``strconv.ParseUint(s, 0, 32)``,
    device in the high half, vendor in the low, an optional ``:subsystem``; an error gives
    the zero ID (``MatchesDeviceFilter`` drops the error), which matches no GPU."""
    parts = text.split(":")
    try:
        raw = [int(x, 0) for x in parts] if len(parts) <= 2 else None
    except ValueError:
        raw = None
    if not raw:
        return None
    return raw[0] >> 16, raw[0] & 0xFFFF, raw[1] if len(raw) == 2 else None


def mig_parted_layouts(
    entry: list[dict[str, Any]], gpu_ids: list[str], before: dict[int, Layout]
) -> dict[int, Layout]:
    """What mig-parted leaves on each GPU after applying ``entry``, as NVIDIA/mig-parted
    (commit bd7160f) walks it: ``cmd/nvidia-mig-parted/assert/assert.go``
    ``WalkSelectedMigConfigForEachGPU`` takes each group in order and, for each GPU index
    ``i`` with its own PCI device ID, applies the group where
    ``api/spec/v1/helpers.go`` ``MatchesDeviceFilter`` (no filter, or one of its IDs
    ``Matches`` the GPU's: ``pkg/types/device.go``, device and vendor equal, the
    subsystem too where the filter has one) and ``MatchesDevices(i)`` (``all`` or a list
    holding ``i``) both hold. A GPU no group selects keeps what it had, and the apply
    still succeeds. The GPUs here report no subsystem."""
    out = dict(before)
    for group in entry:
        filters = group.get("device-filter")
        names = [filters] if isinstance(filters, str) and filters else filters or []
        parsed = [_filter_id(f) for f in names] if isinstance(names, list) else []
        devices = group.get("devices")
        for i, gpu in enumerate(gpu_ids):
            own = _filter_id(gpu)
            if names and not any(
                f is not None and own is not None and f[:2] == own[:2] and f[2] is None
                for f in parsed
            ):
                continue
            if not (devices == "all" or (isinstance(devices, list) and i in devices)):
                continue
            if group.get("mig-enabled"):
                out[i] = Layout.of(group.get("mig-devices") or {})
            else:
                out[i] = Layout(whole=True)
    return out


def _applied(layouts: dict[int, Layout], gpus: int, strategy: str) -> Any:
    def change(obj: dict[str, Any]) -> None:
        # The device plugin and GPU feature discovery restart after the change and
        # advertise and label the new devices as the node's strategy has them (gfd_view).
        labels = obj["metadata"]["labels"]
        alloc = obj["status"]["allocatable"]
        for k in [k for k in alloc if k.startswith("nvidia.com/mig-")]:
            del alloc[k]
        for k in [k for k in labels if k.startswith("nvidia.com/mig-")]:
            del labels[k]
        per = [layouts.get(i, Layout(whole=True)) for i in range(gpus)]
        devices: dict[str, int] = {}
        for lay in per:
            for p, n in lay.counts:
                devices[p] = devices.get(p, 0) + n
        product = labels.get("nvidia.com/gpu.product", "").split("-MIG-")[0]
        gfd, advertised = gfd_view(
            product,
            gpus,
            strategy,
            devices,
            whole=sum(lay.whole for lay in per),
            empty=sum(not lay.whole and not lay.counts for lay in per),
        )
        if not product:  # a node the test left without GFD's product label keeps none
            gfd = {k: v for k, v in gfd.items() if k != "nvidia.com/gpu.product"}
        labels |= gfd
        alloc |= advertised
        labels["nvidia.com/mig.config.state"] = "success"

    return change


def seed_device_plugin_config(fake: FakeKube, name: str, strategy: str) -> None:
    """:func:`seed_operator_cluster` with ``strategy``, its ClusterPolicy naming ``name`` in
    ``devicePlugin.config.name``, and that ConfigMap holding only a ``default`` config."""
    from scaler.actuation.kube.device_plugin import render

    seed_operator_cluster(fake, strategy=strategy)
    fake.mutate(
        CLUSTER_POLICY,
        lambda o: o["spec"].update({"devicePlugin": {"config": {"name": name}}}),
    )
    fake.create(
        f"/api/v1/namespaces/{OPERATOR_NS}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"default": render({"version": "v1"})},
        },
    )
