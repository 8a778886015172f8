"""deploy/: every manifest lints and validates offline; RBAC is exactly the documented list.

The RBAC check has three sides: the rules in ``deploy/base/rbac.yaml``, the
table in README.md ("Kubernetes actuation"), and the calls the code really makes
against the fake API server. Rules must equal the table, and every call must be
allowed by a rule; a rule no call needs (other than the Lease one, used by
``tiercast serve``'s leader election) fails the test too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE
from scaler.actuation.kube.mig_parted import SEEDED_CONFIG
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import RetryPolicy, Session, connect
from scaler.config import parse_config
from tests.conftest import REPO
from tests.fake_kube import FakeKube, gpu_node, kubeconfig_for, pod, start_fake
from tests.gpu_operator import seed_operator_cluster
from tests.test_kube_buffers import BUFFER_POOL
from tests.test_kube_buffers import TEMPLATE as BUFFER_TEMPLATE
from tests.test_kube_mig import MigManager
from tests.test_kube_providers import HOLD, Clock, action, make_config, seed

BASE = REPO / "deploy" / "base"
NODE_AGENT = "node-agent-daemonset.yaml"
K8S_VERSION = "1.37.0"
LINT = YamlLintConfig(
    "extends: default\n"
    "rules:\n"
    "  line-length: {max: 120}\n"
    "  document-start: disable\n"
    "  truthy: {check-keys: false}\n"
)
Grant = tuple[str, str, str, str, str]
"""(account, scope, API group, resource, verb); scope is ``cluster`` or a namespace."""


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((BASE / "kustomization.yaml").read_text())


def manifests() -> list[Path]:
    out = []
    for name in kustomization()["resources"]:
        path = BASE / name
        if name == NODE_AGENT and not path.exists():
            continue  # written with the node agent; checked here as soon as it lands
        out.append(path)
    return out


def documents() -> list[dict[str, Any]]:
    return [d for p in manifests() for d in yaml.safe_load_all(p.read_text()) if d]


def test_kustomization_lists_every_manifest_and_nothing_else() -> None:
    listed = set(kustomization()["resources"])
    present = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert present - listed == set()
    assert listed - present <= {NODE_AGENT}
    assert "namespace" not in kustomization()  # each manifest names its trust zone


@pytest.mark.parametrize("path", sorted(BASE.glob("*.yaml")), ids=lambda p: p.name)
def test_yamllint_is_clean(path: Path) -> None:
    problems = list(linter.run(path.read_text(), LINT, str(path)))
    assert problems == [], "\n".join(f"{path.name}:{p.line}: {p.message}" for p in problems)


def test_every_manifest_validates_against_the_kubernetes_schemas() -> None:
    docs = documents()
    assert {d["kind"] for d in docs} >= {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "CronJob",
    }
    for doc in docs:
        # Raises ValidationError with the failing path on a schema violation.
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_an_invalid_manifest_is_caught() -> None:
    cronjob = next(d for d in documents() if d["kind"] == "CronJob")
    cronjob["spec"]["concurrencyPolicy"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cronjob, K8S_VERSION, strict=True)


def test_cronjob_runs_the_configured_cycle() -> None:
    docs = documents()
    cronjob = next(d for d in docs if d["kind"] == "CronJob")
    pod_spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    assert container["args"] == ["run", "--config", "/etc/tiercast/config.yaml"]
    assert pod_spec["serviceAccountName"] == "tiercast"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/tiercast")
    volume = next(v for v in pod_spec["volumes"] if v["name"] == mount["name"])
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]), "configmap.yaml")
    assert {p.provider.kind for p in config.pools} == {"cluster-api", "karpenter", "placeholder"}


# ---- RBAC --------------------------------------------------------------------------------


def manifest_grants() -> set[Grant]:
    """Every (account, scope, group, resource, verb) the bindings give a ServiceAccount."""
    docs = documents()
    roles = {
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")): d
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
    }
    grants: set[Grant] = set()
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], ref["name"], namespace)]
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else namespace
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            home = (
                "tiercast-node-agent"
                if subject["name"] == "tiercast-node-agent"
                else "tiercast-system"
            )
            assert subject["namespace"] == home
            for rule in role["rules"]:
                assert "resourceNames" not in rule or rule["resourceNames"]
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            grants.add((subject["name"], scope, group, resource, verb))
    # A role nothing binds would be a grant waiting to be misused.
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in docs if "roleRef" in b}
    assert {(k, n) for k, n, _ in roles} == bound
    return grants


def documented_grants() -> set[Grant]:
    """Rows of the README's RBAC table: | account | scope | API group | resources | verbs | why |."""
    text = (REPO / "docs" / "kubernetes.md").read_text()
    section = text[text.index("## Kubernetes actuation") :]
    table = section[section.index("| account | scope |") :].split("\n\n")[0].splitlines()[2:]
    grants: set[Grant] = set()
    for row in table:
        cells = [c.strip().strip("`") for c in row.strip("|").split("|")]
        account, scope, group, resources, verbs = cells[:5]
        assert cells[5], f"RBAC row without a reason: {row}"
        for resource in resources.split(", "):
            for verb in verbs.split(", "):
                grants.add((account, scope, "" if group == "core" else group, resource, verb))
    return grants


def test_rbac_grants_exactly_the_documented_list() -> None:
    grants = manifest_grants()
    assert all("*" not in "".join(g) for g in grants)
    assert not {g for g in grants if g[3] == "secrets"}
    # ConfigMaps and the ClusterPolicy: only the named objects, never a list or a write
    # to any other.
    rules = [r for d in documents() if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    for rule in rules:
        if set(rule["resources"]) & {"configmaps", "clusterpolicies"}:
            assert rule.get("resourceNames") in ([SEEDED_CONFIG], ["cluster-policy"]), rule
            assert "list" not in rule["verbs"] and "create" not in rule["verbs"]
    assert grants == documented_grants()
    accounts = {d["metadata"]["name"] for d in documents() if d["kind"] == "ServiceAccount"}
    assert {g[0] for g in grants} <= accounts
    # Every workload runs as an account defined here.
    for doc in documents():
        spec = doc.get("spec", {})
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        if template is not None:
            assert template["spec"]["serviceAccountName"] in accounts


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
DISCOVERY = re.compile(r"^/(api/v1|apis/[^/]+/[^/]+)$")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def required_grant(method: str, path: str) -> tuple[str | None, str, str, str]:
    m = _PATH.match(path)
    assert m, path
    resource = m["resource"] + (f"/{m['sub']}" if m["sub"] else "")
    verb = ("get" if m["name"] else "list") if method == "GET" else _VERBS[method]
    return m["ns"], m["group"] or "", resource, verb


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    yield f
    f.stop()


@pytest.mark.slow
def test_every_call_the_code_makes_is_granted_and_every_grant_is_used(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.mutate(
        "/api/v1/nodes/md-a",
        lambda o: o["metadata"]["labels"].update(
            {MIG_CONFIG: "all-disabled", MIG_STATE: "success"}
        ),
    )
    fake.create("/api/v1/namespaces/default/pods", pod("embed-0", "default", "md-a", gpus=1))
    seed_operator_cluster(fake, config_map=SEEDED_CONFIG)
    fake.hooks.append(MigManager("success"))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    clock = Clock()
    transport = connect(str(kubeconfig), None, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    fake.create("/api/v1/nodes", gpu_node("buf-a", {"tiercast.io/pool": "buf"}))
    provider = KubeProvider(
        make_config([BUFFER_POOL]), Session(transport), clock=clock.now, sleep=clock.sleep
    )
    provider.inventory()
    plan = [
        action("capi", 2, 3),
        action("static", 1, 2),
        action("spot", 1, 2),
        action("hold", 2, 3),
        action("capi", 3, 3, decision="relayout", kind="mig-layout",
               details={"node": "md-a", "layout": "tiercast-all-7g.80gb",
                        "mig_parted_entry": [{"devices": "all", "mig-enabled": True,
                                              "mig-devices": {"7g.80gb": 1}}]}),
    ]  # fmt: skip
    results = [provider.apply(a) for a in plan]
    outcomes = [r.outcome for r in results]
    assert outcomes == ["applied", "accepted", "accepted", "applied", "applied"], results
    # Template drift (an older tiercast's placeholders): the Deployment is patched.
    fake.mutate(
        HOLD, lambda o: o["metadata"]["annotations"].update({"tiercast.io/template-hash": "old"})
    )
    assert provider.apply(action("hold", 3, 4)).outcome == "applied"
    # A capacity-buffer pool: created, resized, its chunk's template kept current.
    assert provider.apply(action("buf", 1, 2)).outcome == "accepted"
    assert provider.apply(action("buf", 2, 3)).outcome == "accepted"
    fake.mutate(
        BUFFER_TEMPLATE,
        lambda o: o["metadata"]["annotations"].update({"tiercast.io/template-hash": "old"}),
    )
    assert "PodTemplate updated" in provider.apply(action("buf", 3, 3)).message

    # Node starts of `lead_time_s: auto` pools (lists NodeClaims, Machines and Nodes).
    assert provider.lead_time_observations(["capi", "static", "spot", "hold"]) == []
    grants = {g for g in manifest_grants() if g[0] == "tiercast"}
    used: set[Grant] = set()
    for r in fake.requests:
        if r.method == "GET" and DISCOVERY.match(r.path):
            continue  # API discovery: every authenticated user may (system:discovery)
        ns, group, resource, verb = required_grant(r.method, r.path)
        if resource in ("configmaps", "clusterpolicies"):
            assert r.path.rsplit("/", 1)[-1] in (SEEDED_CONFIG, "cluster-policy"), r.path
        cluster = ("tiercast", "cluster", group, resource, verb)
        namespaced = ("tiercast", ns or "", group, resource, verb)
        if cluster in grants:
            used.add(cluster)
        elif namespaced in grants:
            used.add(namespaced)
        else:
            pytest.fail(
                f"{r.method} {r.path} needs {verb} on {group or 'core'}/{resource}: not granted"
            )
    unused = grants - used
    assert {g[3] for g in unused} == {"leases"}, unused


def test_the_privileged_agent_is_alone_in_its_namespace_and_tiercast_is_restricted() -> None:
    docs = documents()
    namespaces = {
        d["metadata"]["name"]: d["metadata"]["labels"] for d in docs if d["kind"] == "Namespace"
    }
    assert namespaces["tiercast-system"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespaces["tiercast-node-agent"]["pod-security.kubernetes.io/enforce"] == "privileged"
    placed = {
        (d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace")
        for d in docs
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")
    }
    for (kind, name), namespace in placed.items():
        expected = "tiercast-node-agent" if "node-agent" in name else "tiercast-system"
        if name == "tiercast-mig-parted":
            expected = "gpu-operator"  # the one ConfigMap, where the GPU Operator keeps it
        assert namespace == expected, (kind, name, namespace)
    agent = next(d for d in docs if d["kind"] == "DaemonSet")
    assert agent["spec"]["template"]["spec"]["hostPID"] is True  # only here
    # tiercast's namespaced rights (Deployments for placeholders) are in the restricted zone;
    # in the GPU Operator's namespace it may read and patch one named ConfigMap, nothing else.
    grants = manifest_grants()
    assert {scope for _, scope, *_ in grants} <= {"cluster", "tiercast-system", "gpu-operator"}
    assert {g[2:] for g in grants if g[1] == "gpu-operator"} == {
        ("", "configmaps", "get"),
        ("", "configmaps", "patch"),
    }
    assert not {g for g in grants if g[3] == "configmaps" and g[1] == "cluster"}
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert policy["metadata"]["namespace"] == "tiercast-node-agent"
    assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == [9402]
