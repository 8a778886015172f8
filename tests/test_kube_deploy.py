"""deploy/: every manifest lints and validates offline; RBAC is exactly the documented list.

The install starts in dry-run (the base and the service overlay) and acts only through
the ``acting`` component; the node agent runs unprivileged and pauses when the MIG
manager pauses GPU clients; ``tiercast-system`` has a NetworkPolicy; two admission
policies narrow the cluster-wide writes RBAC cannot narrow.

The RBAC check has three sides: the rules in ``deploy/base/rbac.yaml``, the
table in README.md ("Kubernetes actuation"), and the calls the code really makes
against the fake API server. Rules must equal the table, and every call must be
allowed by a rule; a rule no call needs (other than the Lease one, used by
``tiercast serve``'s leader election) fails the test too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from forecaster.errors import BadInputError
from scaler.actuation.kube.device_plugin import (
    CONFIG_LABEL,
    DEVICE_PLUGIN_CONFIG,
    SEEDED_DEVICE_PLUGIN_CONFIG,
)
from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE
from scaler.actuation.kube.mig_parted import SEEDED_CONFIG
from scaler.actuation.kube.mig_relabel import CORDONED_BY
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import RetryPolicy, Session, connect
from scaler.cli import build_parser
from scaler.config import KubernetesConfig, PlaceholderProviderConfig, ServiceConfig, parse_config
from tests.conftest import REPO
from tests.fake_device_plugin import DevicePlugin
from tests.fake_kube import FakeKube, gpu_node, kubeconfig_for, pod, start_fake
from tests.fake_kueue import cluster_queue
from tests.gpu_operator import seed_operator_cluster
from tests.test_kube_buffers import BUFFER_POOL
from tests.test_kube_buffers import TEMPLATE as BUFFER_TEMPLATE
from tests.test_kube_mig import MigManager
from tests.test_kube_providers import HOLD, Clock, action, make_config, seed
from tests.test_kueue import section as kueue_section

DEPLOY = REPO / "deploy"
BASE = DEPLOY / "base"
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


ACTING = DEPLOY / "components" / "acting"


def acting_documents() -> list[dict[str, Any]]:
    """What the acting component adds (its ``resources``): RBAC an acting install alone has."""
    names = yaml.safe_load((ACTING / "kustomization.yaml").read_text()).get("resources", [])
    return [d for n in names for d in yaml.safe_load_all((ACTING / n).read_text()) if d]


def test_kustomization_lists_every_manifest_and_nothing_else() -> None:
    listed = set(kustomization()["resources"])
    present = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert present - listed == set()
    assert listed - present <= {NODE_AGENT}
    assert "namespace" not in kustomization()  # each manifest names its trust zone


@pytest.mark.parametrize(
    "path", sorted(DEPLOY.rglob("*.yaml")), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_yamllint_is_clean(path: Path) -> None:
    problems = list(linter.run(path.read_text(), LINT, str(path)))
    assert problems == [], "\n".join(f"{path.name}:{p.line}: {p.message}" for p in problems)


@pytest.mark.slow
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
    # The base plans without acting: deploy/overlays/acting drops the last flag.
    base_args = ["run", "--config", "/etc/tiercast/config.yaml", "--log-level", "INFO"]
    assert container["args"] == [*base_args, "--dry-run"]
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
    """Every (account, scope, group, resource, verb) the bindings give a ServiceAccount;
    the acting component's with scope ``cluster (acting)``."""
    acting = acting_documents()
    docs = documents() + acting
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
        if any(binding is d for d in acting):
            scope = f"{scope} (acting)"
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
            assert rule.get("resourceNames") in (
                [SEEDED_CONFIG, SEEDED_DEVICE_PLUGIN_CONFIG],
                ["cluster-policy"],
            ), rule
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
        make_config([BUFFER_POOL], kueue={"flavors": {"H100": "h100"}}),
        Session(transport),
        clock=clock.now,
        sleep=clock.sleep,
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
    # The training ClusterQueue's GPU quota (kubernetes.kueue): read, then patched.
    fake.create("/apis/kueue.x-k8s.io/v1beta1/clusterqueues", cluster_queue())
    quota = provider.kueue_action(kueue_section(20), "2026-11-30T00:00:00Z")
    assert quota is not None and provider.apply(quota).outcome == "applied"

    # Time-slicing through the device plugin's config (scaler.actuation.kube.device_plugin).
    fake.mutate(
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        lambda o: o["spec"].update(
            {"devicePlugin": {"config": {"name": SEEDED_DEVICE_PLUGIN_CONFIG}}}
        ),
    )
    fake.create(
        "/api/v1/namespaces/gpu-operator/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": SEEDED_DEVICE_PLUGIN_CONFIG},
            "data": {},
        },
    )
    fake.hooks.append(DevicePlugin())
    shared = action(
        "capi", 2, 2, decision="relayout", kind=DEVICE_PLUGIN_CONFIG,
        details={"node": "md-b", "mode": "time-slicing", "replicas": 2},
    )  # fmt: skip
    provider.changes = 0  # the next cycle's change cap
    shared_result = provider.apply(shared)
    assert shared_result.outcome == "applied", shared_result.message
    # Node starts of `lead_time_s: auto` pools (lists NodeClaims, Machines and Nodes).
    assert provider.lead_time_observations(["capi", "static", "spot", "hold"]) == []
    # What the admission policies let tiercast's account write is what the code writes.
    assert_writes_pass_the_admission_policies(fake.requests)
    grants = {g for g in manifest_grants() if g[0] == "tiercast"}
    used: set[Grant] = set()
    for r in fake.requests:
        if r.method == "GET" and DISCOVERY.match(r.path):
            continue  # API discovery: every authenticated user may (system:discovery)
        ns, group, resource, verb = required_grant(r.method, r.path)
        if resource in ("configmaps", "clusterpolicies"):
            assert r.path.rsplit("/", 1)[-1] in (
                SEEDED_CONFIG,
                SEEDED_DEVICE_PLUGIN_CONFIG,
                "cluster-policy",
            ), r.path
        cluster = ("tiercast", "cluster", group, resource, verb)
        acting = ("tiercast", "cluster (acting)", group, resource, verb)
        namespaced = ("tiercast", ns or "", group, resource, verb)
        if cluster in grants:
            used.add(cluster)
        elif acting in grants:
            used.add(acting)  # this run acts: the acting install's grants
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
    cluster_scoped = (
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    placed = {
        (d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace")
        for d in docs
        if d["kind"] not in cluster_scoped
    }
    for (kind, name), namespace in placed.items():
        expected = "tiercast-node-agent" if "node-agent" in name else "tiercast-system"
        if name == "tiercast-mig-parted":
            expected = "gpu-operator"  # the one ConfigMap, where the GPU Operator keeps it
        assert namespace == expected, (kind, name, namespace)
    # No pod anywhere shares the host's process table.
    for doc in docs:
        spec = doc.get("spec", {})
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        if template is not None:
            assert not template["spec"].get("hostPID"), doc["metadata"]["name"]
    # tiercast's namespaced rights (Deployments for placeholders) are in the restricted zone;
    # in the GPU Operator's namespace it may read and patch one named ConfigMap, nothing else.
    grants = manifest_grants()
    scopes = {"cluster", "cluster (acting)", "tiercast-system", "gpu-operator"}
    assert {scope for _, scope, *_ in grants} <= scopes
    assert {g[2:] for g in grants if g[1] == "gpu-operator"} == {
        ("", "configmaps", "get"),
        ("", "configmaps", "patch"),
    }
    assert not {g for g in grants if g[3] == "configmaps" and g[1] == "cluster"}
    policy = next(
        d
        for d in docs
        if d["kind"] == "NetworkPolicy" and d["metadata"]["namespace"] == "tiercast-node-agent"
    )
    assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == [9402]


# ---- admission policies: what RBAC cannot narrow ---------------------------------------


def admission_policy(name: str) -> dict[str, Any]:
    return next(
        d
        for d in documents()
        if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == name
    )


def cel_list(policy: dict[str, Any], variable: str) -> set[str]:
    """A policy variable that is a CEL list of string literals, as a set."""
    expression = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == variable)
    assert re.fullmatch(r"\[\s*'[^']+'(?:\s*,\s*'[^']+')*\s*\]", expression), expression
    return set(re.findall(r"'([^']+)'", expression))


def cel_string(policy: dict[str, Any], variable: str) -> str:
    """A policy variable that is a CEL string literal."""
    expression = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == variable)
    literal = re.fullmatch(r"'([^']+)'", expression)
    assert literal is not None, expression
    return literal.group(1)


def assert_writes_pass_the_admission_policies(requests: list[Any]) -> None:
    """Node patches touch only the fields the node policy allows; PriorityClasses are tiercast's."""
    nodes = admission_policy("tiercast-node-patches")
    labels, annotations = cel_list(nodes, "ownLabels"), cel_list(nodes, "ownAnnotations")
    prefix = cel_string(nodes, "ownAnnotationPrefix")
    patched = created = 0
    for r in requests:
        if r.method == "PATCH" and re.fullmatch(r"/api/v1/nodes/[^/]+", r.path):
            patched += 1
            body = r.body
            assert set(body) <= {"metadata", "spec"}, body
            assert set(body.get("spec", {})) <= {"unschedulable"}, body
            meta = body.get("metadata", {})
            assert set(meta) <= {"labels", "annotations"}, body
            assert set(meta.get("labels", {})) <= labels, body
            assert all(
                k in annotations or k.startswith(prefix) for k in meta.get("annotations", {})
            ), body
        if r.method == "POST" and r.path == "/apis/scheduling.k8s.io/v1/priorityclasses":
            created += 1
            assert r.body["metadata"]["name"].startswith("tiercast-"), r.body
            assert r.body["value"] < 0 and not r.body.get("globalDefault"), r.body
    assert patched and created, "the run patched no node or created no PriorityClass"


def test_admission_policies_narrow_node_patches_and_priority_classes() -> None:
    account = "system:serviceaccount:tiercast-system:tiercast"
    docs = documents()
    bindings = {
        d["spec"]["policyName"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    policies = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    assert (
        {p["metadata"]["name"] for p in policies}
        == set(bindings)
        == {
            "tiercast-node-patches",
            "tiercast-priority-classes",
        }
    )
    for policy in policies:
        assert bindings[policy["metadata"]["name"]]["spec"]["validationActions"] == ["Deny"]
        assert policy["spec"]["failurePolicy"] == "Fail"
        # Only tiercast's own requests are judged; nobody else's writes are affected.
        (condition,) = policy["spec"]["matchConditions"]
        assert condition["expression"] == f"request.userInfo.username == '{account}'"
    nodes = admission_policy("tiercast-node-patches")
    (rule,) = nodes["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["nodes"] and rule["operations"] == ["UPDATE"]
    # Nodes of tiercast's pools only (the default pool label), and only what tiercast writes.
    assert cel_list(nodes, "poolLabels") == {KubernetesConfig().pool_label}
    assert cel_list(nodes, "ownLabels") == {MIG_CONFIG, MIG_STATE, CONFIG_LABEL}
    assert CORDONED_BY.startswith(cel_string(nodes, "ownAnnotationPrefix"))
    assert cel_string(nodes, "ownAnnotationPrefix") == "tiercast.io/"
    expressions = " ".join(v["expression"] for v in nodes["spec"]["validations"])
    assert "variables.poolLabels.exists" in expressions and "taints" in expressions
    classes = admission_policy("tiercast-priority-classes")
    (rule,) = classes["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["priorityclasses"] and "CREATE" in rule["operations"]
    default = PlaceholderProviderConfig.model_fields
    assert str(default["priority_class"].default).startswith("tiercast-")
    assert default["priority"].default < 0
    # The one PriorityClass tiercast reads, by name; RBAC cannot name what a create makes.
    rules = [r for d in docs if d["kind"] == "ClusterRole" for r in d["rules"]]
    reads = [r for r in rules if "priorityclasses" in r["resources"] and "get" in r["verbs"]]
    assert reads == [
        {
            "apiGroups": ["scheduling.k8s.io"],
            "resources": ["priorityclasses"],
            "resourceNames": [default["priority_class"].default],
            "verbs": ["get"],
        }
    ]


# ---- dry-run first, acting by overlay ------------------------------------------------------


def render(path: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize PATH``, or skip when kubectl is absent."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize overlays cannot be rendered here")
    done = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def pod_specs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod spec of every workload (CronJob, StatefulSet, DaemonSet, ...)."""
    out = []
    for doc in docs:
        spec = doc.get("spec", {})
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        if template is not None:
            out.append(template["spec"])
    return out


def cycle_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The container that runs cycles: the CronJob's, or the service StatefulSet's."""
    (workload,) = [d for d in docs if d["kind"] in ("CronJob", "StatefulSet")]
    spec = workload["spec"]
    pod = spec.get("jobTemplate", {}).get("spec", spec)["template"]["spec"]
    container: dict[str, Any] = pod["containers"][0]
    return container


def acts(container: dict[str, Any]) -> bool:
    args = build_parser().parse_args(container["args"])
    return not (args.dry_run or getattr(args, "server_dry_run", False))


@pytest.mark.parametrize(
    ("dry", "acting", "command"),
    [("base", "overlays/acting", "run"), ("overlays/service", "overlays/service-acting", "serve")],
)
@pytest.mark.slow
def test_the_install_plans_first_and_acts_only_through_the_acting_overlay(
    dry: str, acting: str, command: str
) -> None:
    planned, acted = render(DEPLOY / dry), render(DEPLOY / acting)
    for doc in acted:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    container = cycle_container(planned)
    assert container["args"][0] == command and not acts(container)
    assert container["args"][-1] == "--dry-run"
    assert acts(cycle_container(acted))
    # Listing every pod and evicting: only the acting form's account may.
    assert not pod_rights(planned) and pod_rights(acted) == {
        ("pods", "list"),
        ("pods/eviction", "create"),
    }
    # The acting form differs from the dry-run form by that one flag and that RBAC, nothing else.
    container["args"] = container["args"][:-1]
    extra = [d for d in acted if d["metadata"]["name"] == "tiercast-acting"]
    assert sorted(d["kind"] for d in extra) == ["ClusterRole", "ClusterRoleBinding"]
    assert planned == [d for d in acted if d["metadata"]["name"] != "tiercast-acting"]


def pod_rights(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(resource, verb) on pods that the rendered bindings give tiercast's account, cluster-wide."""
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    out: set[tuple[str, str]] = set()
    for b in docs:
        if b["kind"] != "ClusterRoleBinding":
            continue
        if not any(s["name"] == "tiercast" for s in b["subjects"]):
            continue
        for rule in roles[b["roleRef"]["name"]]["rules"]:
            for resource in rule["resources"]:
                if resource.startswith("pods"):
                    out |= {(resource, verb) for verb in rule["verbs"]}
    return out


@pytest.mark.slow
@pytest.mark.parametrize("form", ["base", "overlays/service"])
def test_metrics_listen_on_loopback_unless_the_config_says_otherwise(form: str) -> None:
    """The default binds 127.0.0.1; the shipped ConfigMap asks for every address, for the
    probes and Prometheus behind its NetworkPolicy."""
    assert ServiceConfig().metrics_host == "127.0.0.1"
    docs = render(DEPLOY / form)
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]), "configmap.yaml")
    assert config.service.metrics_host == "0.0.0.0"
    policy = next(
        d
        for d in docs
        if d["kind"] == "NetworkPolicy" and d["metadata"]["namespace"] == "tiercast-system"
    )
    assert policy["spec"]["ingress"][0]["from"]  # the port is reachable from one namespace only


@pytest.mark.slow
def test_a_dry_run_without_pod_rights_shows_its_actions_and_does_not_halt(
    fake: FakeKube, tmp_path: Path
) -> None:
    """The dry-run install lists no pods: a drain, a sharing change and placeholder headroom
    are shown without them, and no action stops the cycle."""
    fake.mutate(
        "/api/v1/nodes/md-a",
        lambda o: o["metadata"]["labels"].update(
            {MIG_CONFIG: "all-disabled", MIG_STATE: "success"}
        ),
    )
    seed_operator_cluster(fake, config_map=SEEDED_CONFIG)
    fake.forbidden.add("/api/v1/pods")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    clock = Clock()
    transport = connect(str(kubeconfig), None, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    from scaler.actuation.kube.transport import MemoryTransport

    provider = KubeProvider(
        make_config(),
        Session(MemoryTransport(upstream=transport)),
        dry_run=True,
        clock=clock.now,
        sleep=clock.sleep,
    )
    plan = [
        action("capi", 3, 3, decision="relayout", kind="mig-layout",
               details={"node": "md-a", "layout": "tiercast-all-7g.80gb",
                        "mig_parted_entry": [{"devices": "all", "mig-enabled": True,
                                              "mig-devices": {"7g.80gb": 1}}]}),
        action("hold", 2, 3),
    ]  # fmt: skip
    results = [provider.apply(a) for a in plan]
    assert [r.outcome for r in results] == ["recorded", "recorded"], results
    assert provider.halted is None


def test_the_acting_component_refuses_a_base_it_does_not_know(tmp_path: Path) -> None:
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    cronjob = copy / "base" / "cronjob.yaml"
    text = cronjob.read_text()
    moved = text.replace(
        '["run", "--config", "/etc/tiercast/config.yaml", "--log-level", "INFO", "--dry-run"]',
        '["run", "--dry-run", "--config", "/etc/tiercast/config.yaml", "--log-level", "INFO"]',
    )
    assert moved != text
    cronjob.write_text(moved)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize overlays cannot be rendered here")
    done = subprocess.run(
        [kubectl, "kustomize", str(copy / "overlays" / "acting")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Not rendered at all, rather than rendered with some other flag dropped.
    assert done.returncode != 0 and "test failed" in done.stderr, done.stderr


# ---- the node agent: paused by the MIG manager, unprivileged ------------------------------

GPU_CLIENT = "nvidia.com/gpu.deploy.client"
PAUSED = "paused-for-mig-change"
# Labels the GPU Operator puts on a GPU node of the container workload type
# (NVIDIA/gpu-operator controllers/state_manager.go, gpuStateLabels), with GFD's.
OPERATOR_NODE_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.deploy.device-plugin": "true",
    "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
    "nvidia.com/gpu.deploy.dcgm-exporter": "true",
    GPU_CLIENT: "true",
}


def mig_manager_pauses(labels: dict[str, str]) -> dict[str, str]:
    """The node labels while the MIG manager reconfigures (mig-parted reconfigure.go).

    ``shutdownKubernetesGPUClients`` sets each ``nvidia.com/gpu.deploy.*`` label it knows to
    ``paused-for-mig-change`` (``maybeSetPaused`` keeps ``false``), the client label only
    when the node carries it; ``restartKubernetesGPUClients`` sets them back to ``true``.
    """
    out = dict(labels)
    for key in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"):
        key = f"nvidia.com/gpu.deploy.{key}"
        out[key] = "false" if labels.get(key) == "false" else PAUSED
    if labels.get(GPU_CLIENT):
        out[GPU_CLIENT] = "false" if labels[GPU_CLIENT] == "false" else PAUSED
    return out


def mig_manager_waits_for(pod: dict[str, Any]) -> bool:
    """``waitForPodsWithNodeSelector``: DaemonSet pods whose nodeSelector has the client key."""
    return GPU_CLIENT in (pod.get("nodeSelector") or {})


def scheduled_on(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (pod.get("nodeSelector") or {}).items())


def agent_pod() -> dict[str, Any]:
    agent = next(d for d in documents() if d["kind"] == "DaemonSet")
    pod: dict[str, Any] = agent["spec"]["template"]["spec"]
    return pod


def test_the_mig_manager_pauses_the_node_agent_during_a_reconfiguration() -> None:
    pod = agent_pod()
    assert pod["nodeSelector"] == {GPU_CLIENT: "true"}
    assert scheduled_on(pod, OPERATOR_NODE_LABELS)
    paused = mig_manager_pauses(OPERATOR_NODE_LABELS)
    # Off the node while the MIG manager changes MIG modes, and waited for until it is gone.
    assert not scheduled_on(pod, paused) and mig_manager_waits_for(pod)
    restored = {**paused, GPU_CLIENT: "true"}
    assert scheduled_on(pod, restored)
    # A node without the GPU Operator's label runs no agent (nothing could pause it).
    assert not scheduled_on(pod, {"nvidia.com/gpu.present": "true"})


def test_the_node_agent_is_not_privileged_not_root_and_shares_no_host_namespace() -> None:
    pod = agent_pod()
    assert not pod.get("hostPID") and not pod.get("hostNetwork") and not pod.get("hostIPC")
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert all("hostPath" not in v for v in pod["volumes"])
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert not context.get("privileged") and context.get("runAsUser", 1) != 0
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]
    # SYS_ADMIN in the bounding set only, for the toolkit's MIG monitor capability.
    assert context["capabilities"]["add"] == ["SYS_ADMIN"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    assert "NVIDIA_MIG_CONFIG_DEVICES" not in env  # it never re-partitions in the cluster
    args = build_parser().parse_args(container["args"])
    assert args.command == "agent" and not args.desired_file
    token = next(v for v in pod["volumes"] if v["name"] == "agent-token")
    assert token["secret"]["defaultMode"] == 0o400


# ---- the NetworkPolicy of tiercast-system --------------------------------------------------


def test_tiercast_system_reaches_only_dns_prometheus_and_the_api_server() -> None:
    docs = documents()
    policy = next(
        d
        for d in docs
        if d["kind"] == "NetworkPolicy" and d["metadata"]["namespace"] == "tiercast-system"
    )
    spec = policy["spec"]
    assert spec["podSelector"] == {}  # every pod here: cycles, the service, placeholders
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    # Ingress: the metrics port, from Prometheus's namespace only.
    (ingress,) = spec["ingress"]
    assert [p["port"] for p in ingress["ports"]] == [ServiceConfig().metrics_port]
    assert ingress["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    # Egress: every rule names its ports; DNS to kube-dns, Prometheus, the API server.
    egress = {
        frozenset((p["protocol"], p["port"]) for p in rule["ports"]): rule["to"]
        for rule in spec["egress"]
    }
    assert set(egress) == {
        frozenset({("UDP", 53), ("TCP", 53)}),
        frozenset({("TCP", 9090), ("TCP", 9091)}),
        frozenset({("TCP", 443), ("TCP", 6443)}),
    }
    dns = egress[frozenset({("UDP", 53), ("TCP", 53)})]
    assert dns[0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    # The shipped config's Prometheus is in the namespace and on a port the policy allows.
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    url = yaml.safe_load(configmap["data"]["config.yaml"])["prometheus"]["url"]
    host_port = re.fullmatch(r"https?://[^.]+\.(?P<ns>[^.:/]+)[^:/]*:(?P<port>\d+)", url)
    assert host_port is not None, url
    prometheus = egress[frozenset({("TCP", 9090), ("TCP", 9091)})]
    assert prometheus[0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": host_port["ns"]
    }
    assert int(host_port["port"]) in (9090, 9091)


# ---- the model signing key ---------------------------------------------------------------


@pytest.mark.parametrize("form", ["base", "overlays/service"])
def test_the_signing_key_secret_is_mounted_optional_and_owner_only(form: str) -> None:
    docs = render(DEPLOY / form)
    container = cycle_container(docs)
    (workload,) = [d for d in docs if d["kind"] in ("CronJob", "StatefulSet")]
    spec = workload["spec"]
    pod = spec.get("jobTemplate", {}).get("spec", spec)["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "model-signing-key")
    secret = volume["secret"]
    assert secret["secretName"] == "tiercast-model-signing-key"
    # The first cycles run without it; a Secret volume's default 0644 would be refused.
    assert secret["optional"] is True and secret["defaultMode"] == 0o400
    mount = next(m for m in container["volumeMounts"] if m["name"] == "model-signing-key")
    assert mount["readOnly"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    key_file = Path(env["TIERCAST_MODEL_SIGNING_KEY_FILE"])
    assert key_file.parent == Path(mount["mountPath"])
    assert [i["path"] for i in secret["items"]] == [key_file.name]


def test_a_signing_key_others_can_read_is_refused_in_one_line(tmp_path: Path) -> None:
    from forecaster.artifacts import load_signing_key

    key = tmp_path / "key"
    key.write_bytes(b"0123456789abcdef0123\n")
    for mode in (0o644, 0o640, 0o604, 0o660):
        key.chmod(mode)
        with pytest.raises(BadInputError) as err:
            load_signing_key(key)
        message = str(err.value)
        assert "\n" not in message and f"{mode:04o}" in message and "chmod 600" in message
    key.chmod(0o600)
    assert load_signing_key(key) == b"0123456789abcdef0123"
    key.chmod(0o400)
    assert load_signing_key(key) == b"0123456789abcdef0123"


def test_a_secret_owned_by_root_and_readable_by_its_group_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Secret volume with defaultMode 0400 and fsGroup: root's file, mode 0440, our group."""
    from forecaster import artifacts

    key = tmp_path / "key"
    key.write_bytes(b"0123456789abcdef0123")
    key.chmod(0o440)
    # The file is this user's here; seen from a process of another uid it is someone else's.
    monkeypatch.setattr(artifacts.os, "geteuid", lambda: key.stat().st_uid + 1)
    assert artifacts.load_signing_key(key) == b"0123456789abcdef0123"
    key.chmod(0o444)  # world-readable is refused whoever owns it
    with pytest.raises(BadInputError, match="0444"):
        artifacts.load_signing_key(key)


def test_a_missing_secret_warns_once_and_runs_without_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from forecaster import artifacts

    monkeypatch.setattr(artifacts, "_WARNED_MISSING", set())
    missing = tmp_path / "tiercast-model-signing" / "key"
    monkeypatch.setenv(artifacts.SIGNING_KEY_ENV, str(missing))
    with caplog.at_level("WARNING", logger="forecaster.artifacts"):
        assert artifacts.load_signing_key(None) is None
        assert artifacts.load_signing_key(None) is None
    warnings = [r.getMessage() for r in caplog.records if r.name == "forecaster.artifacts"]
    assert len(warnings) == 1 and str(missing) in warnings[0] and "refitted" in warnings[0]
    # A key file the config names must exist: a typo there is an error, not a warning.
    with pytest.raises(BadInputError, match="does not exist"):
        artifacts.load_signing_key(missing)


# ---- the image: a build script and a Dockerfile that builds from the repository root -----


def test_the_build_script_builds_from_the_root_with_the_manifests_image(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    engine = bin_dir / "docker"
    engine.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    engine.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("CONTAINER_ENGINE", None)
    env.pop("PLATFORM", None)
    script = DEPLOY / "build-image.sh"
    done = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    image = cycle_container(documents())["image"]
    dockerfile = DEPLOY / "Dockerfile"
    assert calls.read_text().splitlines() == [f"build -f {dockerfile} -t {image} {REPO}"]
    # Every workload names that image.
    images = {c["image"] for pod in pod_specs(documents()) for c in pod["containers"]}
    assert images == {image}
    calls.unlink()
    mine = "registry.example.com:5000/team/tiercast:1.2"
    done = subprocess.run(
        ["bash", str(script), "--push", mine], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == [
        f"build -f {dockerfile} -t {mine} {REPO}",
        f"push {mine}",
    ]
    # It says how to point the manifests at the pushed image.
    assert "newName: registry.example.com:5000/team/tiercast" in done.stdout
    assert 'newTag: "1.2"' in done.stdout


def test_the_dockerfile_copies_only_what_its_build_context_keeps() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in ignore if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*"  # everything is left out but what is named after it
    kept = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    sources = []
    for line in dockerfile.splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += words[1:-1]
    assert sources, "no COPY from the build context"
    for source in sources:
        assert source in kept, f"COPY {source}: left out of the build context"
        assert (REPO / source).exists(), f"COPY {source}: not in the repository root"
    # What the package needs to build: its metadata and both packages.
    assert {"pyproject.toml", "README.md", "forecaster", "scaler"} <= set(sources)


def test_the_node_agents_critical_priority_has_the_quota_gke_standard_asks_for() -> None:
    """GKE Standard admits system-node-critical pods outside kube-system only in a namespace
    with a ResourceQuota scoped to that class; the agent's namespace has one."""
    docs = documents()
    (agent,) = [d for d in docs if d["kind"] == "DaemonSet"]
    namespace = agent["metadata"]["namespace"]
    priority = agent["spec"]["template"]["spec"]["priorityClassName"]
    assert priority == "system-node-critical"
    quotas = [
        d for d in docs if d["kind"] == "ResourceQuota" and d["metadata"]["namespace"] == namespace
    ]
    (quota,) = quotas
    (selector,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert selector == {"scopeName": "PriorityClass", "operator": "In", "values": [priority]}
    assert set(quota["spec"]["hard"]) == {"pods"} and int(quota["spec"]["hard"]["pods"]) >= 1000
    assert "ResourceQuota" in (REPO / "docs" / "kubernetes.md").read_text()
