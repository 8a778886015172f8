"""A stateful fake Kubernetes API server over HTTP, for tests through the official client.

No real API server can run on the test machines, so this one keeps the parts of
the API contract tiercast depends on, and enforces them the way the real server
does:

* bearer-token authentication (401 without it);
* resource versions: every write bumps a cluster-wide counter; a PUT or PATCH whose
  ``metadata.resourceVersion`` is stale gets 409 Conflict; a POST of an existing
  name gets 409 AlreadyExists; ``metadata.generation`` moves with ``spec``;
* 404 for unknown objects, namespaces and resources; 405 for a subresource a
  resource lacks; 400 for a bad ``dryRun`` or field selector, a name or kind that
  does not match the URL; 422 for invalid names, label keys or values, negative or
  non-integer replicas, a non-boolean ``spec.unschedulable``, a PriorityClass
  value above 1e9;
* label selectors (``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!key``) and
  field selectors (``metadata.name``, ``metadata.namespace``, ``spec.nodeName``,
  ``status.phase``) on lists, including cluster-wide pod lists;
* PATCH as JSON merge patch (RFC 7386), strategic merge patch (built-in types only:
  415 for custom resources, as the real server; lists of containers merge by
  name, ``$patch: delete``/``replace`` honoured) and JSON patch (RFC 6902);
* the ``scale`` subresource (``autoscaling/v1`` Scale) of Deployments and Cluster
  API MachineDeployments, sharing the parent's resource version;
* evictions (``pods/eviction``, ``policy/v1``) that honour PodDisruptionBudgets
  (``minAvailable``/``maxUnavailable``, integers or percentages, over healthy
  pods, the expected count from the owning controller's scale, not from the pods
  that exist; pods without a controller only under an integer ``minAvailable``):
  429 TooManyRequests when a budget would be broken, as the real server;
* Karpenter ``karpenter.sh/v1`` NodePools checked against the rules of the CRD as of
  Karpenter v1.8 (required template and ``nodeClassRef``, its immutable group and
  kind, requirement operators and values, quantities in ``limits``, unknown fields
  pruned, and the three static-capacity CEL rules: no move between static and
  dynamic, only ``limits.nodes`` and no ``weight`` with ``replicas``) with the scale
  subresource (``.spec.replicas`` / ``.status.nodes``, a missing ``spec.replicas``
  read as 0 as the API server does) and the status subresource (an update of the
  NodePool keeps its status); Karpenter NodeClaims (cluster-scoped, with a status
  subresource); Cluster API Machines; ConfigMaps; GPU Operator ClusterPolicies;
* Kueue's ``kueue.x-k8s.io/v1beta1`` ClusterQueues checked against its CRD's CEL rules
  and its validating webhook (:mod:`tests.fake_kueue`);
* the cluster autoscaler's ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffers checked
  against that CRD's schema and CEL rules, with a status subresource, and PodTemplates;
  API discovery (``GET /apis/GROUP/VERSION``), and group/versions a cluster does not
  serve (``unserved``: 404 for discovery and objects alike);
* ``dryRun=All`` on writes: validated, answered, not persisted;
* coordination.k8s.io Leases (leader election), scheduling PriorityClasses,
  policy PDBs, Karpenter NodePools, Namespaces, Nodes and Pods;
* injected faults: the next N matching requests answer 429 (with Retry-After),
  500, or time out (the answer comes after the client gave up).

``requests`` logs every request (method, path, query, content type, body) so
tests can assert exactly what was sent; ``hooks`` run before each request and may
change the state (a simulated MIG manager, a concurrent writer). :func:`connect_to`
gives the official client's transport to a running fake, and :class:`Clock` the time
providers under test sleep on.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from scaler.actuation.kube.transport import ClientTransport, RetryPolicy, connect
from tests.fake_admission import Denied, Policies
from tests.fake_admission import Request as AdmissionRequest
from tests.fake_kueue import Invalid, validate_cluster_queue

TOKEN = "fake-kube-token"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_LABEL_PREFIX = _DNS_SUBDOMAIN


@dataclass(frozen=True)
class Resource:
    api: str
    """``v1`` for the core group, else ``group/version``."""
    plural: str
    kind: str
    namespaced: bool
    scale: bool = False
    builtin: bool = True
    """Built-in types take strategic merge patches; custom resources do not."""
    status_replicas: str = "replicas"
    """The ``status`` field the scale subresource reports (``nodes`` for a NodePool)."""
    status_subresource: bool = False
    """A custom resource with a ``status`` subresource: updates of the object keep its
    status, and ``/status`` updates change nothing else (creates are not filtered, so
    tests can seed a status)."""


RESOURCES = [
    Resource("v1", "namespaces", "Namespace", False),
    Resource("v1", "nodes", "Node", False),
    Resource("v1", "pods", "Pod", True),
    Resource("apps/v1", "deployments", "Deployment", True, scale=True),
    Resource("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False),
    Resource("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    Resource("coordination.k8s.io/v1", "leases", "Lease", True),
    Resource(
        "cluster.x-k8s.io/v1beta1", "machinedeployments", "MachineDeployment", True, True, False
    ),
    Resource("v1", "configmaps", "ConfigMap", True),
    Resource("apps/v1", "replicasets", "ReplicaSet", True, scale=True),
    Resource("apps/v1", "statefulsets", "StatefulSet", True, scale=True),
    Resource("cluster.x-k8s.io/v1beta1", "machines", "Machine", True, builtin=False),
    Resource("cluster.x-k8s.io/v1beta1", "clusters", "Cluster", True, builtin=False),
    # Cluster API v1.11+ serves v1beta2 beside the deprecated v1beta1; the fake keeps each
    # version's objects apart (no conversion) and serves v1beta2 only once a test removes
    # it from ``FakeKube.unserved``, so a fixture seeds the version the cluster shows.
    Resource(
        "cluster.x-k8s.io/v1beta2", "machinedeployments", "MachineDeployment", True, True, False
    ),
    Resource("cluster.x-k8s.io/v1beta2", "machines", "Machine", True, builtin=False),
    Resource("cluster.x-k8s.io/v1beta2", "clusters", "Cluster", True, builtin=False),
    # Karpenter v1.8+: static NodePools scale through .spec.replicas / .status.nodes.
    Resource(
        "karpenter.sh/v1",
        "nodepools",
        "NodePool",
        False,
        True,
        False,
        status_replicas="nodes",
        status_subresource=True,
    ),
    # Karpenter's NodeClaims: one per node it launches, its lifecycle in status.conditions.
    Resource(
        "karpenter.sh/v1",
        "nodeclaims",
        "NodeClaim",
        False,
        builtin=False,
        status_subresource=True,
    ),
    Resource("nvidia.com/v1", "clusterpolicies", "ClusterPolicy", False, builtin=False),
    Resource("v1", "podtemplates", "PodTemplate", True),
    # The cluster autoscaler's CapacityBuffer CRD, served version v1beta1.
    Resource(
        "autoscaling.x-k8s.io/v1beta1",
        "capacitybuffers",
        "CapacityBuffer",
        True,
        builtin=False,
        status_subresource=True,
    ),
    Resource("events.k8s.io/v1", "events", "Event", True),
    # Kueue's ClusterQueue (cluster-scoped, status subresource), v1beta1: tests/fake_kueue.py.
    Resource(
        "kueue.x-k8s.io/v1beta1",
        "clusterqueues",
        "ClusterQueue",
        False,
        builtin=False,
        status_subresource=True,
    ),
]
_BY_PATH = {(r.api, r.plural): r for r in RESOURCES}

# Lists merged by a key in strategic merge patches (the few tiercast and tests touch).
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "conditions": "type",
}
# NodeSpec.taints is ``+listType=atomic`` (k8s.io/api core/v1 types.go): a strategic merge
# patch replaces the whole list; taints are unique by (key, effect), see _validate_taints.


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.retry_after = code, reason, message, retry_after

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass
class Fault:
    kind: str
    """``429``, ``500`` or ``timeout``."""
    method: str | None
    path: str | None
    """A substring of the request path; None matches every path."""
    times: int
    delay_s: float = 1.0


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any


@dataclass
class FakeState:
    objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = field(default_factory=dict)
    rv: int = 100


# ---- patches ---------------------------------------------------------------------------


def _validate_taints(node: str, taints: Any) -> None:
    """A Node's taints as the API server validates them (kubernetes
    ``pkg/apis/core/validation/validation.go`` ``validateNodeTaints``): a key, an effect
    of ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``, unique by key and effect."""
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints or []):
        key, effect = (taint or {}).get("key"), (taint or {}).get("effect")
        where = f'Node "{node}" is invalid: spec.taints[{i}]'
        if not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ApiError(422, "Invalid", f"{where}: Invalid value: {taint!r}")
        if (key, effect) in seen:
            raise ApiError(
                422,
                "Invalid",
                f"{where}: Duplicate value: taints must be unique by key and effect pair",
            )
        seen.add((key, effect))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge(target: Any, patch: Any, key: str | None = None) -> Any:
    """Strategic merge for maps and the keyed lists in ``_MERGE_KEYS``; other lists replace."""
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        if directive == "delete":
            return None
        if directive == "replace":
            return {k: v for k, v in patch.items() if k != "$patch"}
        out = copy.deepcopy(target) if isinstance(target, dict) else {}
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
                continue
            merged = strategic_merge(out.get(k), v, k)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        return out
    if isinstance(patch, list) and key in _MERGE_KEYS and isinstance(target, list):
        mk = _MERGE_KEYS[key]
        out_list = copy.deepcopy(target)
        for item in patch:
            if not isinstance(item, dict) or mk not in item:
                raise ApiError(422, "Invalid", f"{key}: every item needs the merge key {mk!r}")
            idx = next((i for i, t in enumerate(out_list) if t.get(mk) == item[mk]), None)
            if item.get("$patch") == "delete":
                if idx is not None:
                    out_list.pop(idx)
            elif idx is None:
                out_list.append({k: v for k, v in item.items() if k != "$patch"})
            else:
                out_list[idx] = strategic_merge(out_list[idx], item)
        return out_list
    return copy.deepcopy(patch)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"JSON patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, test (copy and move are not needed here)."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "JSON patch body must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op.get("path", ""))
        if not parts:
            raise ApiError(422, "Invalid", "JSON patch on the whole document is not supported")
        parent: Any = doc
        for p in parts[:-1]:
            try:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            except (KeyError, IndexError, ValueError):
                raise ApiError(
                    422, "Invalid", f"JSON patch {op.get('op')}: path {op['path']!r} does not exist"
                ) from None
        last = parts[-1]
        name = op.get("op")
        if name == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op.get("value"):
                raise ApiError(422, "Invalid", f"JSON patch test failed at {op['path']!r}")
        elif name in ("add", "replace"):
            if isinstance(parent, list):
                i = len(parent) if last == "-" else int(last)
                if name == "add":
                    parent.insert(i, op.get("value"))
                else:
                    parent[i] = op.get("value")
            else:
                if name == "replace" and last not in parent:
                    raise ApiError(
                        422, "Invalid", f"JSON patch replace: {op['path']!r} does not exist"
                    )
                parent[last] = op.get("value")
        elif name == "remove":
            try:
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    del parent[last]
            except (KeyError, IndexError, ValueError):
                raise ApiError(
                    422, "Invalid", f"JSON patch remove: {op['path']!r} does not exist"
                ) from None
        else:
            raise ApiError(422, "Invalid", f"JSON patch op {name!r} is not supported")
    return doc


# ---- selectors -------------------------------------------------------------------------

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    terms, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    for raw in terms:
        t = raw.strip()
        if not t:
            continue
        m = _SET.match(t)
        if m:
            values = {v.strip() for v in m.group(3).split(",")}
            has = m.group(1) in labels and labels[m.group(1)] in values
            if (m.group(2) == "in") != has:
                return False
        elif "!=" in t:
            k, v = t.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "==" in t or "=" in t:
            k, v = t.split("==", 1) if "==" in t else t.split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif t.startswith("!"):
            if t[1:].strip() in labels:
                return False
        elif t not in labels:
            return False
    return True


_FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}


def field_selector_matches(selector: str, obj: dict[str, Any]) -> bool:
    for raw in selector.split(","):
        t = raw.strip()
        if not t:
            continue
        neg = "!=" in t
        k, v = t.split("!=", 1) if neg else (t.split("==", 1) if "==" in t else t.split("=", 1))
        k = k.strip()
        if k not in _FIELDS:
            raise ApiError(400, "BadRequest", f'field label not supported: "{k}"')
        cur: Any = obj
        for part in k.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        value = "" if cur is None else str(cur)
        if (value == v.strip()) == neg:
            return False
    return True


# ---- validation ------------------------------------------------------------------------


def _validate_labels(labels: Any) -> None:
    if labels is None:
        return
    if not isinstance(labels, dict):
        raise ApiError(422, "Invalid", "metadata.labels: must be a map of strings")
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (
            not name
            or len(name) > 63
            or not _LABEL_NAME.match(name)
            or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)))
        ):
            raise ApiError(
                422,
                "Invalid",
                f'metadata.labels: Invalid value: "{key}": name part must consist of alphanumeric characters',
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_NAME.match(value):
            raise ApiError(
                422,
                "Invalid",
                f"metadata.labels: Invalid value: \"{value}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'",
            )


_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_NODE_POOL_SPEC = {"template", "disruption", "limits", "weight", "replicas"}
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}


def _invalid(name: str, field: str, why: str) -> ApiError:
    return ApiError(422, "Invalid", f'NodePool.karpenter.sh "{name}" is invalid: {field}: {why}')


def _validate_node_pool(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """The rules of Karpenter's ``karpenter.sh/v1`` NodePool CRD that tiercast's writes can meet.

    Written from the CRD's Go source, ``pkg/apis/v1/nodepool.go`` and
    ``nodepool_status.go`` in kubernetes-sigs/karpenter, as read after v1.8.0 (the
    release that added static capacity), not copied from it. Schema: required
    ``spec.template.spec.nodeClassRef`` (``group``, ``kind``, ``name``; ``group`` and
    ``kind`` immutable) and ``requirements`` (at most 100; known operators; ``In`` with
    at least one value; ``Gt``/``Lt`` with one non-negative integer); ``limits`` values
    are integers or quantity strings; ``weight`` 1..100; ``replicas`` an integer >= 0;
    unknown ``spec`` fields are pruned, as a structural schema does. The three CEL rules
    on ``NodePoolSpec`` since v1.8: ``has(self.replicas) == has(oldSelf.replicas)`` (no
    move between static and dynamic, either way), only ``limits.nodes`` on a static
    NodePool, and no ``weight`` on one.
    """
    name = obj["metadata"].get("name", "")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _invalid(name, "spec", "Required value")
    for k in [k for k in spec if k not in _NODE_POOL_SPEC]:
        del spec[k]
    tmpl = (spec.get("template") or {}).get("spec")
    if not isinstance(tmpl, dict):
        raise _invalid(name, "spec.template.spec", "Required value")
    ref = tmpl.get("nodeClassRef")
    if not isinstance(ref, dict):
        raise _invalid(name, "spec.template.spec.nodeClassRef", "Required value")
    for k in ("group", "kind", "name"):
        if not isinstance(ref.get(k), str) or not ref[k]:
            raise _invalid(name, f"spec.template.spec.nodeClassRef.{k}", "Required value")
    old_ref = (((old or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    old_ref = old_ref.get("nodeClassRef") or {}
    for k in ("group", "kind"):
        if old is not None and old_ref.get(k) not in (None, ref[k]):
            raise _invalid(
                name,
                "spec.template.spec.nodeClassRef",
                f"Invalid value: nodeClassRef.{k} is immutable",
            )
    reqs = tmpl.get("requirements")
    if not isinstance(reqs, list):
        raise _invalid(name, "spec.template.spec.requirements", "Required value")
    if len(reqs) > 100:
        raise _invalid(
            name, "spec.template.spec.requirements", "Too many: must have at most 100 items"
        )
    for i, r in enumerate(reqs):
        if not isinstance(r, dict) or not isinstance(r.get("key"), str):
            raise _invalid(name, f"spec.template.spec.requirements[{i}].key", "Required value")
        op = r.get("operator")
        if op not in _OPERATORS:
            raise _invalid(
                name,
                f"spec.template.spec.requirements[{i}].operator",
                f'Unsupported value: "{op}"',
            )
        values = r.get("values") or []
        if op == "In" and not values:
            raise _invalid(
                name,
                "spec.template.spec.requirements",
                "Invalid value: requirements with operator 'In' must have a value defined",
            )
        if op in ("Gt", "Lt") and not (len(values) == 1 and str(values[0]).isdigit()):
            raise _invalid(
                name,
                "spec.template.spec.requirements",
                "Invalid value: requirements operator 'Gt' or 'Lt' must have a single positive integer value",
            )
    limits = spec.get("limits")
    if limits is not None:
        if not isinstance(limits, dict):
            raise _invalid(name, "spec.limits", "must be of type object")
        for k, v in limits.items():
            ok = (isinstance(v, int) and not isinstance(v, bool)) or (
                isinstance(v, str) and _QUANTITY.match(v)
            )
            if not ok:
                raise _invalid(name, f"spec.limits.{k}", f"Invalid value: {v!r}: a quantity")
    weight = spec.get("weight")
    if weight is not None and (not isinstance(weight, int) or not 1 <= weight <= 100):
        raise _invalid(name, "spec.weight", "should be between 1 and 100")
    static = "replicas" in spec
    if old is not None and static != ("replicas" in (old.get("spec") or {})):
        raise _invalid(
            name,
            "spec",
            'Invalid value: "object": Cannot transition NodePool between static '
            "(replicas set) and dynamic (replicas unset) provisioning modes",
        )
    if static and limits and set(limits) != {"nodes"}:
        raise _invalid(
            name,
            "spec",
            "Invalid value: \"object\": only 'limits.nodes' is supported on static NodePools",
        )
    if static and weight is not None:
        raise _invalid(
            name, "spec", "Invalid value: \"object\": 'weight' is not supported on static NodePools"
        )


_BUFFER_SPEC = {
    "provisioningStrategy",
    "podTemplateRef",
    "scalableRef",
    "replicas",
    "percentage",
    "limits",
}
_INT32_MAX = 2**31 - 1


def _validate_capacity_buffer(obj: dict[str, Any]) -> None:
    """The ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer schema, as the CRD has it.

    Written from the CRD in kubernetes/autoscaler,
    ``cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml``
    (controller-gen v0.19.0; v1beta1 served and stored, v1alpha1 deprecated), not
    copied: ``spec`` required; ``provisioningStrategy`` a string defaulted to
    ``buffer.x-k8s.io/active-capacity``; ``podTemplateRef.name`` and ``scalableRef.kind``
    / ``.name`` required non-empty strings; ``replicas`` and ``percentage`` int32 >= 0;
    ``limits`` integers or quantity strings; unknown ``spec`` fields pruned; and its two
    CEL rules: ``!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)``
    and ``!(has(self.podTemplateRef) && has(self.scalableRef))``.
    """
    name = obj["metadata"].get("name", "")

    def bad(field: str, why: str) -> ApiError:
        return ApiError(
            422,
            "Invalid",
            f'CapacityBuffer.autoscaling.x-k8s.io "{name}" is invalid: {field}: {why}',
        )

    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise bad("spec", "Required value")
    for k in [k for k in spec if k not in _BUFFER_SPEC]:
        del spec[k]
    strategy = spec.setdefault("provisioningStrategy", "buffer.x-k8s.io/active-capacity")
    if not isinstance(strategy, str):
        raise bad("spec.provisioningStrategy", "must be of type string")
    for ref, required in (("podTemplateRef", ("name",)), ("scalableRef", ("kind", "name"))):
        if ref not in spec:
            continue
        value = spec[ref]
        if not isinstance(value, dict):
            raise bad(f"spec.{ref}", "must be of type object")
        for k in required:
            if not isinstance(value.get(k), str) or not value[k]:
                raise bad(f"spec.{ref}.{k}", "Required value")
    for k in ("replicas", "percentage"):
        v = spec.get(k)
        if v is not None and (
            not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= _INT32_MAX
        ):
            raise bad(f"spec.{k}", f"Invalid value: {v!r}: must be an int32 >= 0")
    limits = spec.get("limits")
    if limits is not None:
        if not isinstance(limits, dict):
            raise bad("spec.limits", "must be of type object")
        for k, v in limits.items():
            if not (
                (isinstance(v, int) and not isinstance(v, bool))
                or (isinstance(v, str) and _QUANTITY.match(v))
            ):
                raise bad(f"spec.limits.{k}", f"Invalid value: {v!r}: a quantity")
    if "podTemplateRef" in spec and "replicas" not in spec and "limits" not in spec:
        raise bad(
            "spec", 'Invalid value: "object": If X is set, replicas or limits must also be set'
        )
    if "podTemplateRef" in spec and "scalableRef" in spec:
        raise bad(
            "spec", 'Invalid value: "object": You must define both PodTemplateRef and ScalableRef'
        )


_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _validate_event(obj: dict[str, Any]) -> None:
    """events.k8s.io/v1 validation of a new Event, as the API server applies it."""
    name = obj["metadata"].get("name", "")

    def bad(field: str, why: str) -> ApiError:
        return ApiError(422, "Invalid", f'Event.events.k8s.io "{name}" is invalid: {field}: {why}')

    if not isinstance(obj.get("eventTime"), str) or not _MICRO_TIME.match(obj["eventTime"]):
        raise bad("eventTime", "Required value (a MicroTime)")
    for k, limit in (
        ("reportingController", 253),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ):
        v = obj.get(k)
        if not isinstance(v, str) or not v or len(v) > limit:
            raise bad(k, f"Required value, at most {limit} characters")
    if obj.get("type") not in ("Normal", "Warning"):
        raise bad("type", 'Unsupported value: must be "Normal" or "Warning"')
    if len(obj.get("note") or "") > 1024:
        raise bad("note", "Too long: may not be more than 1024 bytes")
    regarding = obj.get("regarding") or {}
    if not regarding.get("kind") or not regarding.get("name"):
        raise bad("regarding", "Required value")


def _validate(res: Resource, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise ApiError(
            422, "Invalid", f'{res.kind} "{name}" is invalid: metadata.name: Invalid value'
        )
    _validate_labels(meta.get("labels"))
    spec = obj.get("spec") or {}
    if "replicas" in spec and (
        not isinstance(spec["replicas"], int)
        or isinstance(spec["replicas"], bool)
        or spec["replicas"] < 0
    ):
        raise ApiError(
            422,
            "Invalid",
            f'{res.kind} "{name}" is invalid: spec.replicas: Invalid value: {spec["replicas"]!r}: must be greater than or equal to 0',
        )
    if res.kind == "Node":
        _validate_taints(name, spec.get("taints"))
    if (
        res.kind == "Node"
        and "unschedulable" in spec
        and not isinstance(spec["unschedulable"], bool)
    ):
        raise ApiError(
            422, "Invalid", f'Node "{name}" is invalid: spec.unschedulable: must be a boolean'
        )
    if res.kind == "PriorityClass":
        value = obj.get("value")
        if not isinstance(value, int) or value > 1_000_000_000:
            raise ApiError(
                422,
                "Invalid",
                f'PriorityClass "{name}" is invalid: value: must be an integer no greater than 1000000000',
            )
    if res.kind == "NodePool":
        _validate_node_pool(obj, old)
    if res.kind == "Event":
        _validate_event(obj)
    if res.kind == "CapacityBuffer":
        _validate_capacity_buffer(obj)
    if res.kind == "ClusterQueue":
        try:
            validate_cluster_queue(obj)
        except Invalid as exc:
            raise ApiError(
                422, "Invalid", f'ClusterQueue.kueue.x-k8s.io "{name}" is invalid: {exc}'
            ) from None
    if res.kind == "PodTemplate":
        containers = ((obj.get("template") or {}).get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            raise ApiError(
                422,
                "Invalid",
                f'PodTemplate "{name}" is invalid: template.spec.containers: Required value',
            )
    if res.kind == "ConfigMap":
        data = obj.get("data") or {}
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ApiError(
                422, "Invalid", f'ConfigMap "{name}" is invalid: data: values must be strings'
            )
    if res.kind == "Deployment":
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            raise ApiError(
                422,
                "Invalid",
                f'Deployment "{name}" is invalid: spec.template.metadata.labels: does not match the selector',
            )


# ---- the server ------------------------------------------------------------------------


class FakeKube:
    """The state and semantics; :meth:`start` serves them over HTTP on a loopback port."""

    def __init__(self) -> None:
        self.state = FakeState()
        self.lock = threading.RLock()
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.hooks: list[Callable[[FakeKube, Request], None]] = [cluster_api_node_annotations]
        """Controllers acting before each request; by default Cluster API's Machine
        controller's node annotations (:func:`cluster_api_node_annotations`)."""
        self.without_scale: set[str] = set()
        """Plurals served without a scale subresource (a NodePool CRD before Karpenter v1.8)."""
        self.unserved: set[str] = {"cluster.x-k8s.io/v1beta2"}
        self.admission: Policies | None = Policies.from_file()
        """The shipped ValidatingAdmissionPolicies (deploy/base/admission-policy.yaml), judged
        on every write sent over HTTP as tiercast's ServiceAccount (tests/fake_admission.py);
        None: no admission (a cluster older than 1.30, or the file left out)."""
        self.forbidden: set[str] = set()
        """Object paths RBAC does not grant (403 Forbidden on every verb), as a Role's
        ``resourceNames`` leaves out an object."""
        """Group/versions this cluster does not serve (a CRD not installed): 404 for
        discovery and for every path under them. Cluster API ``v1beta2`` is here until a
        test serves it (a cluster before Cluster API v1.11)."""
        self._server: ThreadingHTTPServer | None = None
        for ns in ("default", "kube-system", "tiercast-system"):
            self.create(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )

    # -- direct access for tests (no HTTP, no log, no faults)

    def create(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self._post(collection, _parse(collection), copy.deepcopy(obj), {})

    def get(self, path: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self._get(path, _parse(path), {}))

    def get_discovery(self, group_version: str) -> dict[str, Any]:
        """The discovery document of ``group_version``, as ``GET /apis/...`` answers it."""
        with self.lock:
            path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            listing = self._discovery(path)
            assert listing is not None
            return listing

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
            return True
        except ApiError:
            return False

    def mutate(self, path: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Change an object in place as a controller would (bumps its resource version)."""
        with self.lock:
            key = self._key(_parse(path))
            obj = self.state.objects[key]
            change(obj)
            self._bump(obj)
            return copy.deepcopy(obj)

    def delete_object(self, path: str) -> None:
        with self.lock:
            self.state.objects.pop(self._key(_parse(path)), None)

    def inject(
        self,
        kind: str,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        delay_s: float = 1.0,
    ) -> None:
        """The next ``times`` requests matching ``method``/``path`` fail with ``kind``."""
        with self.lock:
            self.faults.append(Fault(kind, method, path, times, delay_s))

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET"]

    # -- HTTP

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                code, body, headers = fake.handle(
                    self.command,
                    self.path,
                    self.headers.get("Content-Type"),
                    raw,
                    self.headers.get("Authorization"),
                )
                if code == 0:  # timeout fault: the client has given up; drop the connection
                    self.close_connection = True
                    return
                data = json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def handle(
        self, method: str, raw_path: str, content_type: str | None, raw: bytes, auth: str | None
    ) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(raw_path)
        query = dict(parse_qsl(parts.query))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return 400, ApiError(400, "BadRequest", "body is not JSON").status(), {}
        request = Request(
            method, parts.path, query, (content_type or "").split(";")[0] or None, body
        )
        with self.lock:
            self.requests.append(request)
            for hook in list(self.hooks):
                hook(self, request)
            fault = self._take_fault(request)
        if fault is not None:
            if fault.kind == "timeout":
                time.sleep(fault.delay_s)
                return 0, None, {}
            code = int(fault.kind)
            reason = "TooManyRequests" if code == 429 else "InternalError"
            err = ApiError(code, reason, f"injected {code}", retry_after=0 if code == 429 else None)
            return code, err.status(), ({"Retry-After": "0"} if code == 429 else {})
        if auth != f"Bearer {TOKEN}":
            return 401, ApiError(401, "Unauthorized", "Unauthorized").status(), {}
        try:
            with self.lock:
                code, out = self._dispatch(request)
            return code, out, {}
        except ApiError as exc:
            return (
                exc.code,
                exc.status(),
                ({"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}),
            )

    def _take_fault(self, r: Request) -> Fault | None:
        for f in self.faults:
            if (
                f.times > 0
                and f.method in (None, r.method)
                and (f.path is None or f.path in r.path)
            ):
                f.times -= 1
                return f
        return None

    # -- semantics

    def _key(self, p: _Path) -> tuple[str, str, str | None, str]:
        assert p.name is not None
        return (p.res.api, p.res.plural, p.namespace, p.name)

    def _bump(self, obj: dict[str, Any]) -> None:
        self.state.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.state.rv)

    def _discovery(self, path: str) -> dict[str, Any] | None:
        """``GET /apis/GROUP/VERSION`` (or ``/api/v1``): the APIResourceList, as discovery has it."""
        parts = [x for x in path.split("/") if x]
        if parts[:1] == ["apis"] and len(parts) == 3:
            group_version = f"{parts[1]}/{parts[2]}"
        elif parts == ["api", "v1"]:
            group_version = "v1"
        else:
            return None
        served = [r for r in RESOURCES if r.api == group_version]
        if not served or group_version in self.unserved:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resources: list[dict[str, Any]] = []
        for r in served:
            resources.append({"name": r.plural, "namespaced": r.namespaced, "kind": r.kind})
            if r.scale:
                resources.append(
                    {"name": f"{r.plural}/scale", "namespaced": r.namespaced, "kind": "Scale"}
                )
            if r.status_subresource:
                resources.append(
                    {"name": f"{r.plural}/status", "namespaced": r.namespaced, "kind": r.kind}
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }

    def _dispatch(self, r: Request) -> tuple[int, Any]:
        if r.method == "GET":
            listing = self._discovery(r.path)
            if listing is not None:
                return 200, listing
        p = _parse(r.path)
        if p.res.api in self.unserved:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({r.path})"
            )
        if r.path in self.forbidden:
            raise ApiError(
                403,
                "Forbidden",
                f'{p.res.plural} "{p.name}" is forbidden: User cannot {r.method.lower()} '
                f"resource {p.res.plural!r}",
            )
        dry = r.query.get("dryRun")
        if dry not in (None, "All"):
            raise ApiError(
                400, "BadRequest", f"Invalid dry run value: {dry!r}: allowed values are All"
            )
        if r.method == "GET":
            return 200, (
                self._list(p, r.query)
                if p.name is None
                else copy.deepcopy(self._get(r.path, p, r.query))
            )
        if r.method == "POST" and p.name is None:
            return 201, self._post(r.path, p, r.body, r.query)
        if r.method == "POST" and p.sub == "eviction":
            return 201, self._evict(p, r.body, r.query)
        if r.method == "PUT" and p.name is not None:
            return 200, self._put(p, r.body, r.query)
        if r.method == "PATCH" and p.name is not None:
            return 200, self._patch(p, r.body, r.content_type, r.query)
        if r.method == "DELETE" and p.name is not None and p.sub is None:
            obj = self._object(p)
            if not dry:
                del self.state.objects[self._key(p)]
            return 200, obj
        raise ApiError(405, "MethodNotAllowed", f"{r.method} is not supported on {r.path}")

    def _object(self, p: _Path) -> dict[str, Any]:
        if p.namespace is not None and (
            ("v1", "namespaces", None, p.namespace) not in self.state.objects
        ):
            raise ApiError(404, "NotFound", f'namespaces "{p.namespace}" not found')
        obj = self.state.objects.get(self._key(p))
        if obj is None:
            raise ApiError(
                404, "NotFound", f'{p.res.plural}.{p.res.api.split("/")[0]} "{p.name}" not found'
            )
        return obj

    def _get(self, path: str, p: _Path, query: dict[str, str]) -> dict[str, Any]:
        obj = self._object(p)
        if p.sub is None:
            return obj
        if p.sub == "scale" and p.res.scale and p.res.plural not in self.without_scale:
            return _scale(obj, p.res)
        if p.sub == "status":
            return obj
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({path})"
        )

    def _list(self, p: _Path, query: dict[str, str]) -> dict[str, Any]:
        if p.res.namespaced is False and p.namespace is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        items = []
        for (api, plural, ns, _), obj in sorted(
            self.state.objects.items(), key=lambda kv: (kv[0][2] or "", kv[0][3])
        ):
            if (api, plural) != (p.res.api, p.res.plural) or (
                p.namespace is not None and ns != p.namespace
            ):
                continue
            if "labelSelector" in query and not label_selector_matches(
                query["labelSelector"], obj["metadata"].get("labels") or {}
            ):
                continue
            if "fieldSelector" in query and not field_selector_matches(query["fieldSelector"], obj):
                continue
            items.append(copy.deepcopy(obj))
        return {
            "kind": f"{p.res.kind}List",
            "apiVersion": p.res.api,
            "metadata": {"resourceVersion": str(self.state.rv)},
            "items": items,
        }

    def _check_kind(self, p: _Path, body: Any) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "body must be a JSON object")
        if body.get("kind") not in (None, p.res.kind) or body.get("apiVersion") not in (
            None,
            p.res.api,
        ):
            raise ApiError(
                400,
                "BadRequest",
                f"body is {body.get('apiVersion')}/{body.get('kind')}, the URL is {p.res.api}/{p.res.kind}",
            )

    def _post(self, path: str, p: _Path, body: Any, query: dict[str, str]) -> dict[str, Any]:
        self._check_kind(p, body)
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = p.res.api, p.res.kind
        meta = obj.setdefault("metadata", {})
        if p.res.namespaced:
            if p.namespace is None:
                raise ApiError(405, "MethodNotAllowed", "create needs a namespace")
            if meta.get("namespace") not in (None, p.namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the object does not match the namespace on the request",
                )
            meta["namespace"] = p.namespace
            if ("v1", "namespaces", None, p.namespace) not in self.state.objects:
                raise ApiError(404, "NotFound", f'namespaces "{p.namespace}" not found')
        _validate(p.res, obj)
        self._admit("CREATE", p, obj, None, query)
        key = (p.res.api, p.res.plural, p.namespace, meta["name"])
        if key in self.state.objects:
            raise ApiError(409, "AlreadyExists", f'{p.res.plural} "{meta["name"]}" already exists')
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = "2026-11-30T00:00:00Z"
        meta["generation"] = 1
        for k in ("resourceVersion", "deletionTimestamp"):
            meta.pop(k, None)
        if p.res.kind == "Pod":
            obj.setdefault("status", {}).setdefault("phase", "Running")
        self._bump(obj)
        if query.get("dryRun") != "All":
            self.state.objects[key] = obj
        return copy.deepcopy(obj)

    def _store_update(
        self, p: _Path, old: dict[str, Any], new: dict[str, Any], query: dict[str, str]
    ) -> dict[str, Any]:
        new_meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        if new_meta.get("name") not in (None, old_meta["name"]):
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({new_meta.get('name')}) does not match the name on the URL ({old_meta['name']})",
            )
        want_rv = new_meta.get("resourceVersion")
        if want_rv is not None and want_rv != old_meta["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {p.res.plural} "{old_meta["name"]}": the object has been modified; please apply your changes to the latest version and try again',
            )
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if k in old_meta:
                new_meta[k] = old_meta[k]
        new["apiVersion"], new["kind"] = p.res.api, p.res.kind
        if p.res.status_subresource:
            # The object and its status are written through different endpoints.
            if p.sub == "status":
                status = new.get("status")
                new = {**copy.deepcopy(old), "metadata": new_meta}
                new_meta.update({k: v for k, v in old_meta.items() if k != "resourceVersion"})
                if status is None:
                    new.pop("status", None)
                else:
                    new["status"] = status
            elif "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        _validate(p.res, new, old)
        self._admit("UPDATE", p, new, old, query)
        if new == old:
            return copy.deepcopy(
                old
            )  # a no-op write keeps the resource version, as the real server
        new_meta["generation"] = old_meta.get("generation", 1) + (
            new.get("spec") != old.get("spec")
        )
        self._bump(new)
        if query.get("dryRun") != "All":
            self.state.objects[self._key(p)] = new
        return copy.deepcopy(new)

    def _admit(
        self,
        operation: str,
        p: _Path,
        obj: dict[str, Any] | None,
        old: dict[str, Any] | None,
        query: dict[str, str],
    ) -> None:
        """The validating admission policies' verdict on a write (dry-runs are judged too)."""
        if self.admission is None:
            return
        group, _, version = p.res.api.rpartition("/")
        request = AdmissionRequest(
            operation,
            group,
            version,
            p.res.plural,
            p.sub or "",
            str(((obj or old or {}).get("metadata") or {}).get("name", "")),
            p.namespace,
            obj,
            old,
            dry_run=query.get("dryRun") == "All",
        )
        try:
            self.admission.admit(request)
        except Denied as exc:
            raise ApiError(exc.code, exc.reason, exc.message) from None

    def _put(self, p: _Path, body: Any, query: dict[str, str]) -> dict[str, Any]:
        old = self._object(p)
        if p.sub == "scale":
            if not p.res.scale or p.res.plural in self.without_scale:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._put_scale(p, old, body, query)
        if p.sub is not None and not (p.sub == "status" and p.res.status_subresource):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self._check_kind(p, body)
        return self._store_update(p, old, copy.deepcopy(body), query)

    def _put_scale(
        self, p: _Path, old: dict[str, Any], body: Any, query: dict[str, str]
    ) -> dict[str, Any]:
        if not isinstance(body, dict) or body.get("kind") not in (None, "Scale"):
            raise ApiError(400, "BadRequest", "body must be an autoscaling/v1 Scale")
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(
                422,
                "Invalid",
                f'Scale "{p.name}" is invalid: spec.replicas: Invalid value: {replicas!r}: must be greater than or equal to 0',
            )
        new = copy.deepcopy(old)
        new.setdefault("spec", {})["replicas"] = replicas
        new["metadata"]["resourceVersion"] = (body.get("metadata") or {}).get("resourceVersion")
        return _scale(self._store_update(p, old, new, query), p.res)

    def _patch(
        self, p: _Path, body: Any, content_type: str | None, query: dict[str, str]
    ) -> dict[str, Any]:
        old = self._object(p)
        if p.sub is not None and not (p.sub == "scale" and p.res.scale) and p.sub != "status":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        base = _scale(old, p.res) if p.sub == "scale" else old
        if content_type == "application/merge-patch+json":
            new = merge_patch(base, body)
        elif content_type == "application/strategic-merge-patch+json":
            if not p.res.builtin:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                )
            new = strategic_merge(base, body)
        elif content_type == "application/json-patch+json":
            new = json_patch(base, body)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "a patch must leave an object")
        if p.sub == "scale":
            return self._put_scale(p, old, new, query)
        # A patch without a resourceVersion is unconditional; with one, it is a precondition.
        if (body if isinstance(body, dict) else {}).get("metadata", {}).get(
            "resourceVersion"
        ) is None:
            new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._store_update(p, old, new, query)

    def _evict(self, p: _Path, body: Any, query: dict[str, str]) -> dict[str, Any]:
        if p.res.kind != "Pod":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        pod = self._object(p)
        if (
            not isinstance(body, dict)
            or body.get("kind") != "Eviction"
            or body.get("apiVersion") not in ("policy/v1", "policy/v1beta1")
        ):
            raise ApiError(400, "BadRequest", "body must be a policy/v1 Eviction")
        if (body.get("metadata") or {}).get("name") != p.name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        labels = pod["metadata"].get("labels") or {}
        budgets = [
            o
            for (api, plural, ns, _), o in self.state.objects.items()
            if (api, plural, ns) == ("policy/v1", "poddisruptionbudgets", p.namespace)
            and (o.get("spec") or {}).get("selector") is not None
            and _selector_obj_matches(o["spec"]["selector"], labels)
        ]
        if len(budgets) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        terminal = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if budgets and not terminal:
            pdb = budgets[0]
            selector = pdb["spec"].get("selector") or {}
            matching = [
                o
                for (api, plural, ns, _), o in self.state.objects.items()
                if (api, plural, ns) == ("v1", "pods", p.namespace)
                and _selector_obj_matches(selector, o["metadata"].get("labels") or {})
            ]
            healthy = sum(1 for o in matching if _healthy(o))
            spec = pdb["spec"]
            expected = self._expected_pods(p.namespace, matching, spec)
            if expected is None:
                # The disruption controller cannot size the budget: it allows no disruption.
                raise ApiError(
                    429,
                    "TooManyRequests",
                    f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {pdb['metadata']['name']} does not allow disruptions: its expected pod count is unknown (a pod without a scalable controller)",
                    retry_after=10,
                )
            if "minAvailable" in spec:
                need = _int_or_percent(spec["minAvailable"], expected, round_up=True)
            else:
                need = expected - _int_or_percent(
                    spec.get("maxUnavailable", 0), expected, round_up=True
                )
            if healthy - 1 < need:
                raise ApiError(
                    429,
                    "TooManyRequests",
                    f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {pdb['metadata']['name']} needs {need} healthy pods and has {healthy} currently",
                    retry_after=10,
                )
        if query.get("dryRun") != "All":
            del self.state.objects[self._key(p)]
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def _expected_pods(
        self, namespace: str | None, matching: list[dict[str, Any]], spec: dict[str, Any]
    ) -> int | None:
        """The budget's expected pod count, as the disruption controller computes it.

        Pods with a controller count as that controller's scale (``spec.replicas``),
        whatever pods exist now; pods without one count themselves, and only for an
        integer ``minAvailable`` (None, no disruption allowed, otherwise).
        """
        owners: set[tuple[str, str]] = set()
        bare = 0
        for o in matching:
            refs = o["metadata"].get("ownerReferences") or []
            ref = next((r for r in refs if r.get("controller")), None)
            if ref is None:
                bare += 1
            else:
                owners.add((ref["kind"], ref["name"]))
        integer_min = "minAvailable" in spec and not str(spec["minAvailable"]).endswith("%")
        if bare and not integer_min:
            return None
        total = bare
        for kind, name in sorted(owners):
            res = next((r for r in RESOURCES if r.kind == kind and r.scale), None)
            obj = (
                None
                if res is None
                else self.state.objects.get((res.api, res.plural, namespace, name))
            )
            if obj is None:
                return None
            total += int((obj.get("spec") or {}).get("replicas", 1))
        return total


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        frac = int(value[:-1]) * total / 100
        return int(-(-frac // 1)) if round_up else int(frac)
    return int(value)


def _healthy(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    # The disruption controller counts a pod healthy only when it is Ready
    # (kubernetes pkg/controller/disruption/disruption.go countHealthyPods ->
    # podutil.IsPodReady): a pod with no Ready condition (none reported yet) is not.
    conditions = status.get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _selector_obj_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    # policy/v1: an empty selector ({}) selects every pod in the namespace.
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _scale(obj: dict[str, Any], res: Resource) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "resourceVersion": meta["resourceVersion"],
            "uid": meta.get("uid"),
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": {"replicas": (obj.get("status") or {}).get(res.status_replicas, 0)},
    }


@dataclass(frozen=True)
class _Path:
    res: Resource
    namespace: str | None
    name: str | None
    sub: str | None


def _parse(path: str) -> _Path:
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        api, rest = parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        api, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({path})"
        )
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    res = _BY_PATH.get((api, rest[0]))
    if res is None or len(rest) > 3:
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({path})"
        )
    if res.namespaced != (namespace is not None) and not (res.namespaced and len(rest) == 1):
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({path})"
        )
    return _Path(
        res, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    )


def kubeconfig_for(url: str, token: str = TOKEN) -> dict[str, Any]:
    """A kubeconfig that points the official client at the fake."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "tiercast", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tiercast"}}],
        "current-context": "fake",
    }


def connect_to(
    fake: FakeKube, folder: Path, policy: RetryPolicy, timeout_s: float = 10.0
) -> ClientTransport:
    """The official client's transport to ``fake``, through a kubeconfig written in ``folder``.

    ``timeout_s`` defaults to :func:`scaler.actuation.kube.transport.connect`'s; tests of
    timeouts pass a short one.
    """
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    return connect(str(path), "fake", policy, timeout_s=timeout_s)


class Clock:
    """Time that moves only when someone sleeps: drains and waits run instantly."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


CAPI_MACHINE = "cluster.x-k8s.io/machine"


def cluster_api_node_annotations(fake: FakeKube, request: Request) -> None:
    """Cluster API's Machine controller: a Node a Machine's ``status.nodeRef`` names gets the
    annotations ``cluster.x-k8s.io/cluster-name``, ``cluster-namespace`` and ``machine``
    (kubernetes-sigs/cluster-api ``internal/controllers/machine/machine_controller_noderef.go``:
    CAPI sets them and never removes them; it copies no ``tiercast.io/*`` label)."""
    for (api, plural, ns, name), machine in list(fake.state.objects.items()):
        if plural != "machines" or not api.startswith("cluster.x-k8s.io/"):
            continue
        node = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        path = f"/api/v1/nodes/{node}"
        if not node or not fake.exists(path):
            continue
        annotations = fake.get(path)["metadata"].get("annotations") or {}
        if annotations.get(CAPI_MACHINE) == name:
            continue
        cluster = (machine.get("spec") or {}).get("clusterName", "")
        fake.mutate(
            path,
            lambda o, m=name, c=cluster, n=ns: (
                o["metadata"]
                .setdefault("annotations", {})
                .update(
                    {
                        "cluster.x-k8s.io/cluster-name": c,
                        "cluster.x-k8s.io/cluster-namespace": n or "",
                        CAPI_MACHINE: m,
                    }
                )
            ),
        )


def start_fake() -> FakeKube:
    """A running fake API server; the kubernetes client's API classes are loaded first, so a
    test's call phase does not pay their import (the client imports each class on first use,
    about 2 s for the core API: tests/duration_rule.py counts only the call phase)."""
    from kubernetes import client

    for name in ("CoreV1Api", "AppsV1Api", "CoordinationV1Api", "PolicyV1Api"):
        getattr(client, name)
    fake = FakeKube()
    fake.start()
    return fake


def gpu_node(
    name: str, labels: dict[str, str], gpus: int = 8, unschedulable: bool = False
) -> dict[str, Any]:
    """A Ready GPU node with ``labels``, as the device plugin and GPU feature discovery leave it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "96"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    namespace: str,
    node: str,
    labels: dict[str, str] | None = None,
    gpus: int = 0,
    owner_kind: str | None = None,
    owner_name: str = "owner",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner_kind:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner_kind,
                "name": owner_name,
                "uid": "1",
                "controller": True,
            }
        ]
    container: dict[str, Any] = {"name": "main", "image": "serve:1"}
    if gpus:
        container["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def node_pool(name: str, **spec: Any) -> dict[str, Any]:
    """A Karpenter v1 NodePool that the CRD admits, with ``spec`` fields added (``replicas=2``)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "gpu",
                    },
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["p5.48xlarge"],
                        }
                    ],
                }
            },
            **spec,
        },
    }
