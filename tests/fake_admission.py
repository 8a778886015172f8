"""ValidatingAdmissionPolicies evaluated as the API server does, for the fake API server.

Follows the Kubernetes ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy
semantics (kubernetes/kubernetes ``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/
validating/``, and the reference page "Validating Admission Policy"): a policy applies to a
request its ``matchConstraints.resourceRules`` select (API group, version, operation,
resource, ``resource/subresource``; ``*`` for any) and a binding names; then every
``matchConditions`` expression must be true (a false one: the policy does not apply);
``variables`` are evaluated in order, each seeing the ones before as ``variables.<name>``;
each ``validations`` expression must be true, else the request is denied with its
``message`` (or ``messageExpression``) and ``reason`` (``Forbidden``: HTTP 403; unset:
``Invalid``, 422). An expression that errors is a failure under ``failurePolicy: Fail``.
The CEL variables are ``object`` (null on DELETE), ``oldObject`` (null on CREATE),
``request`` (``operation``, ``userInfo.username``, ``name``, ``namespace``, ``resource``,
``subResource``, ``dryRun``) and ``params`` (null: these policies have no ``paramKind``).

CEL is cel-python (``celpy``, standard CEL). The Kubernetes CEL libraries (lists, strings,
regex, URLs, quantities) are not loaded: the shipped policies use standard CEL only,
which :func:`test_kube_admission.test_the_shipped_policies_use_standard_cel_only` checks
by compiling every expression here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import celpy
import yaml

POLICY_FILE = Path(__file__).resolve().parent.parent / "deploy" / "base" / "admission-policy.yaml"
TIERCAST_USER = "system:serviceaccount:tiercast-system:tiercast"
"""The user the fake's bearer token authenticates (tiercast's ServiceAccount)."""

_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


class Denied(Exception):
    """A policy denied the request: ``code`` 403 (reason Forbidden) or 422."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def program(expression: str) -> Any:
    """The compiled CEL program of ``expression`` (compiled once)."""
    if expression not in _PROGRAMS:
        _PROGRAMS[expression] = _ENV.program(_ENV.compile(expression))
    return _PROGRAMS[expression]


def _cel(value: Any) -> Any:
    return celpy.json_to_cel(value)


def _plain(value: Any) -> Any:
    """A CEL result as a Python value (``bool`` of a CEL ``BoolType`` and so on)."""
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    return value


@dataclass
class Request:
    """What the admission chain sees of one write."""

    operation: str
    """``CREATE``, ``UPDATE`` or ``DELETE``."""
    group: str
    version: str
    resource: str
    sub_resource: str
    name: str
    namespace: str | None
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    username: str = TIERCAST_USER
    dry_run: bool = False

    def as_cel(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "userInfo": {"username": self.username},
            "name": self.name,
            "namespace": self.namespace or "",
            "resource": {"group": self.group, "version": self.version, "resource": self.resource},
            "subResource": self.sub_resource,
            "dryRun": self.dry_run,
        }


def _rule_matches(rule: dict[str, Any], r: Request) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values

    resource = f"{r.resource}/{r.sub_resource}" if r.sub_resource else r.resource
    resources = rule.get("resources") or []
    return (
        has("apiGroups", r.group)
        and has("apiVersions", r.version)
        and has("operations", r.operation)
        and ("*" in resources or resource in resources or f"{r.resource}/*" in resources)
    )


@dataclass
class Policies:
    """The ValidatingAdmissionPolicies and their bindings of some manifests."""

    policies: list[dict[str, Any]] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    """Names of policies a binding with ``validationActions: [Deny]`` names."""
    judged: list[tuple[str, Request]] = field(default_factory=list)
    """(policy, request) of every request a policy applied to, in order."""

    @classmethod
    def from_file(cls, path: Path = POLICY_FILE) -> Policies:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        out = cls()
        for d in docs:
            if d["kind"] == "ValidatingAdmissionPolicy":
                out.policies.append(d)
            elif d["kind"] == "ValidatingAdmissionPolicyBinding" and "Deny" in (
                d["spec"].get("validationActions") or []
            ):
                out.bound.add(d["spec"]["policyName"])
        return out

    def expressions(self) -> list[str]:
        """Every CEL expression of every policy."""
        out: list[str] = []
        for p in self.policies:
            spec = p["spec"]
            for key in ("matchConditions", "variables", "validations"):
                out += [item["expression"] for item in spec.get(key) or []]
            out += [
                v["messageExpression"]
                for v in spec.get("validations") or []
                if "messageExpression" in v
            ]
        return out

    def admit(self, r: Request) -> None:
        """Raise :class:`Denied` where a bound policy denies ``r``."""
        for policy in self.policies:
            name = policy["metadata"]["name"]
            if name not in self.bound:
                continue
            spec = policy["spec"]
            rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
            if not any(_rule_matches(rule, r) for rule in rules):
                continue
            try:
                self._judge(name, spec, r)
            except Denied:
                raise
            except Exception as exc:  # an expression that errors: failurePolicy decides
                if spec.get("failurePolicy", "Fail") == "Fail":
                    raise Denied(500, "InternalError", f"policy '{name}' failed: {exc}") from exc

    def _judge(self, name: str, spec: dict[str, Any], r: Request) -> None:
        activation: dict[str, Any] = {
            "object": _cel(r.obj),
            "oldObject": _cel(r.old),
            "request": _cel(r.as_cel()),
            "params": _cel(None),
        }
        for cond in spec.get("matchConditions") or []:
            if not _plain(program(cond["expression"]).evaluate(activation)):
                return
        self.judged.append((name, r))
        variables: dict[str, Any] = {}
        for var in spec.get("variables") or []:
            activation["variables"] = _cel(variables)
            variables[var["name"]] = _to_json(program(var["expression"]).evaluate(activation))
        activation["variables"] = _cel(variables)
        for v in spec.get("validations") or []:
            ok = program(v["expression"]).evaluate(activation)
            if isinstance(ok, Exception) or not _plain(ok):
                message = v.get("message") or f"failed expression: {v['expression']}"
                if "messageExpression" in v:
                    message = str(program(v["messageExpression"]).evaluate(activation))
                reason = v.get("reason") or "Invalid"
                code = 403 if reason == "Forbidden" else 422
                raise Denied(
                    code,
                    reason,
                    f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: "
                    f"{message}",
                )


def _to_json(value: Any) -> Any:
    """A CEL value back to plain JSON-like Python (variables are re-wrapped for the next)."""
    if isinstance(value, Exception):
        raise value
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celpy.celtypes.IntType, celpy.celtypes.UintType)):
        return int(value)
    if isinstance(value, celpy.celtypes.DoubleType):
        return float(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    if isinstance(value, celpy.celtypes.MapType):
        return {_to_json(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, celpy.celtypes.ListType):
        return [_to_json(v) for v in value]
    if value is None:
        return None
    return value
