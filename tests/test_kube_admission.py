"""The shipped ValidatingAdmissionPolicies, evaluated with a real CEL runtime (cel-python).

The fake API server judges every write the test suite sends with them
(tests/fake_admission.py), so a policy that would deny one of tiercast's writes fails the
test making it. These tests check the other side: the policies admit writes on every node
the inventory places in a pool (one notion of "a node of a tiercast pool"), and deny what
docs/kubernetes.md says they forbid.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.actuation.kube.inventory import machine_owners, node_info
from scaler.actuation.kube.transport import KubeApiError, RetryPolicy, Session
from tests.fake_admission import Denied, Policies, Request, program
from tests.fake_kube import FakeKube, connect_to, start_fake
from tests.test_kube_providers import make_config, seed

NODE_RULES = "tiercast-node-patches"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    f.handle("GET", "/api/v1/nodes", None, b"", None)  # the controllers (Cluster API's) act
    yield f
    f.stop()


def node_update(old: dict[str, Any], change: Any) -> Request:
    new = copy.deepcopy(old)
    change(new)
    return Request("UPDATE", "", "v1", "nodes", "", old["metadata"]["name"], None, new, old)


def denied(policies: Policies, request: Request) -> str | None:
    try:
        policies.admit(request)
    except Denied as exc:
        return exc.message
    return None


def test_the_shipped_policies_use_standard_cel_only() -> None:
    """Every expression compiles in cel-python, which has no Kubernetes CEL library: the
    policies read the same in any CEL runtime."""
    policies = Policies.from_file()
    assert {p["metadata"]["name"] for p in policies.policies} == policies.bound
    expressions = policies.expressions()
    assert len(expressions) >= 10
    for e in expressions:
        program(e)


def cordon(o: dict[str, Any]) -> None:
    o["spec"]["unschedulable"] = True
    o["metadata"].setdefault("annotations", {})["tiercast.io/cordoned"] = "true"


@pytest.mark.slow
def test_every_node_the_inventory_places_in_a_pool_is_one_the_policy_admits(
    fake: FakeKube, tmp_path: Path
) -> None:
    """Cluster API nodes (found through their Machines), Karpenter nodes and labelled ones:
    tiercast's cordon is admitted on each; on a node of no pool it is denied."""
    config = make_config()
    session = Session(connect_to(fake, tmp_path, RetryPolicy(1, 0.01, 0.01)))
    owners = machine_owners(session, config.pools)
    policies = Policies.from_file()
    placed = 0
    for node in session.get("/api/v1/nodes")["items"]:
        info = node_info(node, config.pools, config.kubernetes, owners)
        why = denied(policies, node_update(node, cordon))
        if info.pool is not None:
            placed += 1
            assert why is None, (node["metadata"]["name"], why)
        else:
            assert why is not None and "only nodes of its pools" in why, node["metadata"]["name"]
    assert placed == 6


ALLOWED = {
    "cordon": cordon,
    "mig relabel": lambda o: o["metadata"]["labels"].update(
        {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": None}
    ),
    "sharing label": lambda o: o["metadata"]["labels"].update(
        {"nvidia.com/device-plugin.config": "tiercast-mps-4"}
    ),
    "do-not-disrupt": lambda o: (
        o["metadata"]
        .setdefault("annotations", {})
        .update({"karpenter.sh/do-not-disrupt": "true", "tiercast.io/sharing-change": "{}"})
    ),
}
FORBIDDEN = {
    "providerID": lambda o: o["spec"].update(providerID="aws:///us-east-1a/i-0"),
    "podCIDRs": lambda o: o["spec"].update(podCIDR="10.0.0.0/24", podCIDRs=["10.0.0.0/24"]),
    "a taint": lambda o: o["spec"].update(taints=[{"key": "k", "effect": "NoSchedule"}]),
    "another label": lambda o: o["metadata"]["labels"].update({"tier": "gold"}),
    "a pool label": lambda o: o["metadata"]["labels"].update({"tiercast.io/pool": "other"}),
    "another annotation": lambda o: (
        o["metadata"].setdefault("annotations", {}).update({"example.com/x": "1"})
    ),
    "an owner": lambda o: o["metadata"].update(
        ownerReferences=[{"apiVersion": "v1", "kind": "Node", "name": "x", "uid": "1"}]
    ),
    "a finalizer": lambda o: o["metadata"].update(finalizers=["example.com/keep"]),
}


def _clean(change: Any) -> Any:
    def apply(o: dict[str, Any]) -> None:
        change(o)
        labels = o["metadata"]["labels"]
        for k in [k for k, v in labels.items() if v is None]:
            del labels[k]

    return apply


@pytest.mark.parametrize("what", sorted(ALLOWED))
def test_the_node_policy_admits_what_tiercast_writes(fake: FakeKube, what: str) -> None:
    for name in ("md-a", "static-a", "hold-a"):
        old = fake.get(f"/api/v1/nodes/{name}")
        assert denied(Policies.from_file(), node_update(old, _clean(ALLOWED[what]))) is None


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_the_node_policy_denies_what_the_docs_say_it_forbids(fake: FakeKube, what: str) -> None:
    old = fake.get("/api/v1/nodes/hold-a")
    why = denied(Policies.from_file(), node_update(old, FORBIDDEN[what]))
    assert why is not None and NODE_RULES in why, what


def test_the_fake_api_server_denies_a_forbidden_write_over_http(
    fake: FakeKube, tmp_path: Path
) -> None:
    """The policies judge what the fake serves: setting spec.providerID is refused (403)."""
    session = Session(connect_to(fake, tmp_path, RetryPolicy(1, 0.01, 0.01)))
    with pytest.raises(KubeApiError) as exc:
        session.request(
            "PATCH",
            "/api/v1/nodes/md-a",
            {"spec": {"providerID": "aws:///x"}},
            "application/merge-patch+json",
        )
    assert exc.value.status == 403 and "spec.unschedulable" in str(exc.value)
    assert not fake.get("/api/v1/nodes/md-a")["spec"].get("providerID")
    # tiercast's own cordon on the same node passes.
    session.request(
        "PATCH",
        "/api/v1/nodes/md-a",
        {"spec": {"unschedulable": True}},
        "application/merge-patch+json",
    )
    assert fake.get("/api/v1/nodes/md-a")["spec"]["unschedulable"] is True
    assert any(name == NODE_RULES for name, _ in fake.admission.judged)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "allowed"),
    [
        ({"metadata": {"name": "tiercast-placeholder"}, "value": -10}, True),
        ({"metadata": {"name": "tiercast-placeholder"}, "value": 10}, False),
        ({"metadata": {"name": "high"}, "value": -10}, False),
        ({"metadata": {"name": "tiercast-x"}, "value": -1, "globalDefault": True}, False),
    ],
)
def test_the_priority_class_policy(body: dict[str, Any], allowed: bool) -> None:
    obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **body}
    request = Request(
        "CREATE",
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "",
        body["metadata"]["name"],
        None,
        obj,
        None,
    )
    assert (denied(Policies.from_file(), request) is None) == allowed
    # Nobody else's writes are judged.
    other = copy.copy(request)
    other.username = "system:serviceaccount:kube-system:someone"
    assert denied(Policies.from_file(), other) is None
