"""``tiercast inventory``: every node as the planner reads it, from the cluster or a file.

Per node: its pool and tier, the GPU model and physical GPU count, the MIG strategy,
layout and state, how the GPUs are shared, and whether the planner holds the node and
why. It reads what a cycle reads (nodes, the ClusterPolicy, the mig-parted ConfigMap it
names and the MIG manager's per-node copies) and writes nothing, so an operator can
check it before letting tiercast act.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from forecaster.documents import parse_document, read_document, shape_problem, shown
from forecaster.errors import BadInputError

log = logging.getLogger(__name__)


MAX_NODES_BYTES = 64 * 1024 * 1024
"""Most bytes of a ``--nodes`` file (5,000 nodes of ``kubectl get nodes -o json`` are ~50 MB)."""
MAX_MIG_PARTED_BYTES = 4 * 1024 * 1024
"""Most bytes of a ``--mig-parted`` file (the operator's own config is ~20 KB)."""
MAX_NODES = 50_000


class _Lenient(BaseModel):
    """The parts of an object tiercast reads, typed; the rest passes through unread."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class NodeMeta(_Lenient):
    name: StrictStr = Field(min_length=1, max_length=253)
    labels: dict[StrictStr, StrictStr] | None = None
    annotations: dict[StrictStr, StrictStr] | None = None


class NodeSpec(_Lenient):
    unschedulable: StrictBool | None = None


class NodeCondition(_Lenient):
    type: StrictStr | None = None
    status: StrictStr | None = None


Quantity = StrictStr | StrictInt
"""A resource quantity as the API serves it (``"8"``); an integer as YAML may give it."""


class NodeStatus(_Lenient):
    allocatable: dict[StrictStr, Quantity] | None = None
    capacity: dict[StrictStr, Quantity] | None = None
    conditions: list[NodeCondition] | None = None


class NodeDoc(_Lenient):
    """What the inventory reads of a Node (``kubernetes/api/core/v1/types.go``: ``Node``,
    ``ObjectMeta``, ``NodeSpec``, ``NodeStatus``, ``NodeCondition``)."""

    kind: StrictStr = "Node"
    metadata: NodeMeta
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class MigDeviceSpec(_Lenient):
    """One entry of a mig-parted config (NVIDIA/mig-parted ``api/spec/v1/spec.go``:
    ``MigConfigSpec``: ``device-filter``, ``devices``, ``mig-enabled``, ``mig-devices``)."""

    devices: Literal["all"] | list[StrictInt]
    mig_enabled: StrictBool = Field(alias="mig-enabled")
    mig_devices: dict[StrictStr, StrictInt] | None = Field(default=None, alias="mig-devices")
    device_filter: StrictStr | list[StrictStr] | None = Field(default=None, alias="device-filter")


class MigPartedDoc(_Lenient):
    """A mig-parted config (``Spec``: ``version``, ``mig-configs``)."""

    version: StrictStr | None = None
    mig_configs: dict[StrictStr, list[MigDeviceSpec]] = Field(alias="mig-configs")


def _read_file(path: str, what: str, max_bytes: int) -> Any:
    """The JSON or YAML document at ``path``, read the one bounded way (one line otherwise)."""
    return read_document(path, max_bytes, what)


def nodes_from_file(path: str) -> list[dict[str, Any]]:
    """The Nodes of ``kubectl get nodes -o json`` (a List), or of one ``kubectl get node``;
    each checked against :class:`NodeDoc`, so a bad file is one line naming the field."""
    doc = _read_file(path, "--nodes", MAX_NODES_BYTES)
    listed = isinstance(doc, dict) and "items" in doc
    items = doc.get("items") if listed else [doc]
    usage = (
        f"--nodes {shown(path)}: expected the output of 'kubectl get nodes -o json' "
        "(a List of Nodes, each with metadata.name)"
    )
    if items is None:
        items = []
    if not isinstance(items, list):
        raise BadInputError(f"{usage}; items is {type(items).__name__}")
    if len(items) > MAX_NODES:
        raise BadInputError(f"--nodes {shown(path)}: items: more than {MAX_NODES} nodes")
    nodes: list[dict[str, Any]] = []
    for i, obj in enumerate(items):
        where = f"items[{i}]" if listed else "the document"
        if not isinstance(obj, dict):
            raise BadInputError(f"--nodes {shown(path)}: {where}: expected a Node object")
        if obj.get("kind", "Node") != "Node":
            continue
        try:
            node = NodeDoc.model_validate(obj)
        except ValidationError as exc:
            prefix = f"items[{i}]" if listed else ""
            raise BadInputError(f"--nodes {shown(path)}: {shape_problem(exc, prefix)}") from None
        nodes.append(node.model_dump(by_alias=True, exclude_none=True))
    if not nodes:
        raise BadInputError(usage)
    return nodes


def mig_configs_from_file(path: str) -> dict[str, Any]:
    """The ``mig-configs`` of a mig-parted ``config.yaml``, or of a ConfigMap holding one,
    checked against :class:`MigPartedDoc`."""
    doc = _read_file(path, "--mig-parted", MAX_MIG_PARTED_BYTES)
    where = ""
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
        inner = doc["data"].get("config.yaml")
        if not isinstance(inner, str):
            raise BadInputError(
                f"--mig-parted {shown(path)}: data.config.yaml: expected the config as text"
            )
        doc = parse_document(inner, path, "--mig-parted") or {}
        where = "data.config.yaml"
    if not isinstance(doc, dict) or "mig-configs" not in doc:
        raise BadInputError(
            f"--mig-parted {shown(path)}: expected a mig-parted config (version, mig-configs) "
            "or the ConfigMap holding it in config.yaml"
        )
    try:
        MigPartedDoc.model_validate(doc)
    except ValidationError as exc:
        raise BadInputError(f"--mig-parted {shown(path)}: {shape_problem(exc, where)}") from None
    configs: dict[str, Any] = doc["mig-configs"]
    return configs


def cmd_inventory(args: argparse.Namespace) -> int:
    from scaler.actuation.kube.inventory import node_mig_configs, node_views, read_nodes
    from scaler.actuation.kube.mig_parted import (
        OPERATOR_CONFIG,
        MigConfigRefused,
        MigPartedConfig,
    )
    from scaler.actuation.kube.transport import (
        KubeApiError,
        MemoryTransport,
        RetryPolicy,
        Session,
        Transport,
        connect,
    )
    from scaler.config import Config, load_config
    from scaler.inputs.demo import demo_config
    from scaler.inputs.loading import resolve_config_path

    config_path = resolve_config_path(args)
    config: Config = load_config(config_path) if config_path else demo_config()
    kube = config.kubernetes
    transport: Transport
    if args.nodes:
        store = MemoryTransport()
        for obj in nodes_from_file(args.nodes):
            store.add(f"/api/v1/nodes/{obj['metadata']['name']}", obj)
        transport = store
    else:
        policy = RetryPolicy(kube.retries, kube.backoff_base_s, kube.backoff_max_s)
        transport = connect(args.kubeconfig, args.context, policy, kube.request_timeout_s)
    session = Session(transport)
    nodes = read_nodes(session, config.pools, kube)
    strategy: str | None = None
    configs: dict[str, Any] = {}
    own: dict[str, dict[str, Any]] = {}
    if args.mig_parted:
        configs = mig_configs_from_file(args.mig_parted)
    elif args.nodes:
        print(
            "tiercast: note: no mig-parted config read (--mig-parted FILE): MIG-managed "
            "nodes' layouts are unknown and they show as held",
            file=sys.stderr,
        )
    if not args.nodes:
        mig_parted = MigPartedConfig(session, kube)
        found = mig_parted.policy()
        if found is not None:
            strategy = ((found.get("spec") or {}).get("mig") or {}).get("strategy")
            path = mig_parted.config_map_path(found)
            if not args.mig_parted:
                try:
                    configs = mig_parted.read(path)[1]["mig-configs"]
                except (KubeApiError, MigConfigRefused) as exc:
                    log.warning("mig-parted config unreadable: %s", exc)
            if path.rsplit("/", 1)[-1] == OPERATOR_CONFIG:
                names = [n.name for n in nodes]
                own = node_mig_configs(session, kube.gpu_operator_namespace, names)
    views = node_views(nodes, config.pools, configs, strategy, own)
    if args.output == "table":
        print_views(views)
    else:
        from scaler.cli.common import print_document

        print_document([v.as_dict() for v in views], args.output)
    return 0


def print_views(views: list[Any]) -> None:
    from scaler.cli.common import text_table

    rows = [
        [
            "NODE",
            "POOL",
            "MODEL",
            "GPUS",
            "MIG STRATEGY",
            "MIG CONFIG",
            "LAYOUT",
            "STATE",
            "SHARING",
            "HELD",
            "WHY",
        ]
    ]
    for v in views:
        name = f"{v.name} (cordoned)" if v.cordoned else v.name
        rows.append(
            [
                name,
                v.pool or "-",
                v.model or v.product or "-",
                "-" if v.gpus is None else str(v.gpus),
                v.mig_strategy or "-",
                v.mig_config or "-",
                v.layout or "-",
                v.mig_state or "-",
                v.sharing,
                "yes" if v.held else "no",
                v.why,
            ]
        )
    if len(rows) == 1:
        print("no nodes")
        return
    print("\n".join(line.rstrip() for line in text_table(rows, {3})))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inventory",
        help="each node as the planner reads it: pool, GPUs, MIG, sharing, held and why",
        description="Print each node's pool, GPU model and physical GPU count, MIG strategy, "
        "layout and state, GPU sharing, and whether the planner holds it and why. Reads the "
        "cluster (or a 'kubectl get nodes -o json' file) and writes nothing.",
    )
    p.add_argument("--config", "-c", help="YAML config (its pools place the nodes)")
    p.add_argument(
        "--nodes",
        metavar="FILE",
        help="read the nodes from FILE, the output of 'kubectl get nodes -o json', "
        "instead of the cluster",
    )
    p.add_argument(
        "--mig-parted",
        metavar="FILE",
        help="the mig-parted config (or its ConfigMap as JSON/YAML) to read the nodes' "
        "nvidia.com/mig.config through; default: the one the ClusterPolicy names",
    )
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file; default: in-cluster service account, else ~/.kube/config",
    )
    p.add_argument("--context", help="kubeconfig context; default: the current context")
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json", "yaml"),
        default="table",
        help="table (default), or one object per node as json or yaml",
    )
    p.set_defaults(func=cmd_inventory)
