"""Kueue's ClusterQueue as the fake API server validates it (``kueue.x-k8s.io/v1beta1``).

Written from kubernetes-sigs/kueue ``apis/kueue/v1beta1/clusterqueue_types.go`` (its
kubebuilder markers and CEL rules) and ``pkg/webhooks/clusterqueue_webhook.go`` (the
validating webhook), as of the v0.19 line, not copied:

* ``spec.resourceGroups``: at most 16; each with ``coveredResources`` (1 to 64 names) and
  ``flavors`` (1 to 64), every flavor listing exactly as many ``resources`` as the group
  covers (CEL: "flavors must have the same number of resources as the coveredResources"),
  each named as the covered resource at its index (webhook: "must match the name in
  coveredResources");
* a resource in one group only, a flavor in one group only (webhook: Duplicate);
* ``nominalQuota`` required, a quantity, not negative; ``borrowingLimit`` and
  ``lendingLimit`` quantities, not negative;
* ``borrowingLimit`` only with a cohort (CEL: "borrowingLimit must be nil when cohort is
  empty"); ``lendingLimit`` only with a cohort and at most the ``nominalQuota`` (webhook:
  "must be nil when cohort is empty", "must be less than or equal to the nominalQuota");
* names of flavors and the cohort: DNS subdomains of at most 253 characters;
* ``queueingStrategy`` ``StrictFIFO`` or ``BestEffortFIFO`` (default ``BestEffortFIFO``).
"""

from __future__ import annotations

import re
from typing import Any

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_SPEC = {
    "resourceGroups",
    "cohort",
    "queueingStrategy",
    "namespaceSelector",
    "flavorFungibility",
    "preemption",
    "admissionChecks",
    "admissionChecksStrategy",
    "stopPolicy",
    "fairSharing",
    "admissionScope",
}


class Invalid(Exception):
    """What the API server (CEL) or Kueue's webhook refuses: ``field: why``."""


def _quantity(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Invalid(f"{field}: Invalid value: {value!r}: must be a quantity")
    text = str(value)
    if not _QUANTITY.match(text):
        raise Invalid(f"{field}: Invalid value: {value!r}: quantities must match the regex")
    number = float(re.sub(r"([KMGTPE]i|[numkMGTPE])$", "", text) or 0)
    if number < 0:
        raise Invalid(f"{field}: Invalid value: {text!r}: must be greater than or equal to 0")
    return number


def validate_cluster_queue(obj: dict[str, Any]) -> None:
    """Raise :class:`Invalid` where Kueue would refuse ``obj``; prune unknown spec fields
    and default ``queueingStrategy`` as the CRD does."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise Invalid("spec: must be of type object")
    for k in [k for k in spec if k not in _SPEC]:
        del spec[k]
    strategy = spec.setdefault("queueingStrategy", "BestEffortFIFO")
    if strategy not in ("StrictFIFO", "BestEffortFIFO"):
        raise Invalid(f'spec.queueingStrategy: Unsupported value: "{strategy}"')
    cohort = spec.get("cohort")
    if cohort is not None and (
        not isinstance(cohort, str) or len(cohort) > 253 or not _DNS_SUBDOMAIN.match(cohort)
    ):
        raise Invalid(f"spec.cohort: Invalid value: {cohort!r}: a DNS-1123 subdomain")
    groups = spec.get("resourceGroups") or []
    if not isinstance(groups, list) or len(groups) > 16:
        raise Invalid("spec.resourceGroups: Too many: must have at most 16 items")
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, group in enumerate(groups):
        at = f"spec.resourceGroups[{i}]"
        covered = group.get("coveredResources")
        flavors = group.get("flavors")
        if not isinstance(covered, list) or not 1 <= len(covered) <= 64:
            raise Invalid(f"{at}.coveredResources: Required value: 1 to 64 resources")
        if not isinstance(flavors, list) or not 1 <= len(flavors) <= 64:
            raise Invalid(f"{at}.flavors: Required value: 1 to 64 flavors")
        for j, name in enumerate(covered):
            if name in seen_resources:
                raise Invalid(f'{at}.coveredResources[{j}]: Duplicate value: "{name}"')
            seen_resources.add(name)
        if not all(len(f.get("resources") or []) == len(covered) for f in flavors):
            raise Invalid(
                f"{at}: Invalid value: flavors must have the same number of resources as "
                "the coveredResources"
            )
        for j, flavor in enumerate(flavors):
            fat = f"{at}.flavors[{j}]"
            name = flavor.get("name")
            if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
                raise Invalid(f"{fat}.name: Invalid value: {name!r}: a DNS-1123 subdomain")
            if name in seen_flavors:
                raise Invalid(f'{fat}.name: Duplicate value: "{name}"')
            seen_flavors.add(name)
            for k, quota in enumerate(flavor["resources"]):
                rat = f"{fat}.resources[{k}]"
                if quota.get("name") != covered[k]:
                    raise Invalid(
                        f"{rat}.name: Invalid value: {quota.get('name')!r}: must match the "
                        "name in coveredResources"
                    )
                if "nominalQuota" not in quota:
                    raise Invalid(f"{rat}.nominalQuota: Required value")
                nominal = _quantity(f"{rat}.nominalQuota", quota["nominalQuota"])
                if quota.get("borrowingLimit") is not None:
                    _quantity(f"{rat}.borrowingLimit", quota["borrowingLimit"])
                    if not cohort:
                        raise Invalid(
                            'spec: Invalid value: "object": borrowingLimit must be nil when '
                            "cohort is empty"
                        )
                if quota.get("lendingLimit") is not None:
                    lend = _quantity(f"{rat}.lendingLimit", quota["lendingLimit"])
                    if not cohort:
                        raise Invalid(f"{rat}.lendingLimit: must be nil when cohort is empty")
                    if lend > nominal:
                        raise Invalid(
                            f"{rat}.lendingLimit: Invalid value: {quota['lendingLimit']!r}: "
                            "must be less than or equal to the nominalQuota"
                        )


def cluster_queue(
    name: str = "training",
    flavors: dict[str, Any] | None = None,
    cohort: str | None = None,
    resources: tuple[str, ...] = ("cpu", "nvidia.com/gpu"),
) -> dict[str, Any]:
    """A ClusterQueue with one resource group; ``flavors``: flavor -> GPU nominalQuota (or
    a dict of the GPU entry's fields)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(resources),
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": r, "nominalQuota": "96"}
                            if r != "nvidia.com/gpu"
                            else {
                                "name": r,
                                **(
                                    quota
                                    if isinstance(quota, dict)
                                    else {"nominalQuota": str(quota)}
                                ),
                            }
                            for r in resources
                        ],
                    }
                    for flavor, quota in (flavors or {"h100": 8}).items()
                ],
            }
        ],
    }
    if cohort is not None:
        spec["cohort"] = cohort
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }
