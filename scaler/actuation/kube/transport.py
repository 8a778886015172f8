"""One way to talk to the API server: ``request(verb, path, body)``, logged and retried.

Providers speak plain REST paths and JSON bodies, so the calls they make are
exactly what a dry-run lists (verb, path, body) and what the tests see on the
wire. Three transports implement it:

* :class:`ClientTransport`: the official ``kubernetes`` client (auth, TLS,
  kubeconfig or in-cluster service account), with bounded exponential backoff on
  429, 5xx and timeouts (:class:`RetryPolicy`, through :mod:`forecaster.retrying`);
* :class:`MemoryTransport`: an in-memory cluster for the offline dry-run, seeded
  from the config, optionally reading through to a real cluster while keeping
  every write local (``tiercast run --dry-run --kubeconfig ...``).

:class:`Session` sits in front of a transport: it logs every call with its
status, and adds ``dryRun=All`` to writes when the server is asked to validate
without persisting.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from forecaster import retrying
from forecaster.errors import TemporaryError
from forecaster.retrying import Attempts, Retry
from scaler.kube_access import load_credentials

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class KubeApiError(TemporaryError):
    """The API server refused a request, or could not be reached after the retries."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        reason: str = "",
        delay_s: float | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message, delay_s=delay_s)
        self.status = status
        """HTTP status; None when no answer came (timeout, connection refused)."""
        self.reason = reason
        """The ``reason`` of the Status body (``Conflict``, ``NotFound``, ``TooManyRequests``)."""
        self.retry_after = retry_after
        """The answer's Retry-After header, as sent; the retries read it."""

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


class Transport(Protocol):
    """Required: ``request``. Raises :class:`KubeApiError` for any non-2xx answer."""

    def request(
        self,
        verb: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str | None = None,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
    ) -> dict[str, Any]: ...


def _status_error(
    verb: str, path: str, status: int, data: Any, retry_after: str | None = None
) -> KubeApiError:
    reason = data.get("reason", "") if isinstance(data, dict) else ""
    message = data.get("message", "") if isinstance(data, dict) else str(data)[:200]
    return KubeApiError(
        f"{verb} {path}: HTTP {status} {reason or 'error'}: {message}".rstrip(": "),
        status=status,
        reason=reason,
        retry_after=retry_after,
    )


def _retry_after_s(error: BaseException) -> float | None:
    """The wait a Retry-After header asks for (never negative); None when absent or unreadable."""
    header = getattr(error, "retry_after", None)
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return None


def _log_retry(retry: Retry) -> None:
    log.info("%s; retrying in %.2f s", retry.error, retry.delay_s)


@dataclass(frozen=True)
class RetryPolicy(retrying.RetryPolicy):
    """The API server's retries: bounded exponential backoff with jitter, capped; a
    Retry-After header names the wait instead (capped too). Which answers are retried is
    the call's: ``retry_statuses``, and every call that got no answer."""

    retries: int = 4
    base_s: float = 0.5
    max_s: float = 8.0
    sleep: Callable[[float], object] = time.sleep
    jitter: bool = True
    delay_hint: Callable[[BaseException], float | None] = _retry_after_s
    before_sleep: Callable[[Retry], None] | None = _log_retry


def _retried(statuses: frozenset[int], error: BaseException) -> bool:
    """Whether a call's error is worth a retry: no answer, or an answer in ``statuses``."""
    return isinstance(error, KubeApiError) and (error.status is None or error.status in statuses)


class ClientTransport:
    """Requests through the official client's ``ApiClient`` (auth, TLS, proxies)."""

    def __init__(
        self, api_client: Any, policy: RetryPolicy | None = None, timeout_s: float = 10.0
    ) -> None:
        self.api_client = api_client
        self.policy = policy or RetryPolicy()
        self.timeout_s = timeout_s

    def request(
        self,
        verb: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str | None = None,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        policy = replace(self.policy, retryable=partial(_retried, retry_statuses))
        tries = Attempts(policy)
        for attempt in tries:
            with attempt:
                return self._once(verb, path, body, query, headers)
        last = tries.last_error
        assert isinstance(last, KubeApiError)
        raise KubeApiError(
            f"{last} (gave up after {policy.attempts} attempts)",
            status=last.status,
            reason=last.reason,
        ) from last

    def _once(
        self,
        verb: str,
        path: str,
        body: Any,
        query: dict[str, str] | None,
        headers: dict[str, str],
    ) -> dict[str, Any]:
        """One call: the answer's JSON, or a :class:`KubeApiError` (status None: no answer)."""
        import urllib3

        try:
            request = self.api_client.param_serialize(
                verb,
                path,
                query_params=list((query or {}).items()) or None,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(
                *request, _request_timeout=(self.timeout_s, self.timeout_s)
            )
            raw = response.read()
            status = int(response.status)
            retry_after = response.getheader("Retry-After")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeApiError(f"{verb} {path}: no answer ({type(exc).__name__}: {exc})") from exc
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {"message": raw[:200].decode("utf-8", "replace")}
        if 200 <= status < 300:
            return data if isinstance(data, dict) else {"items": data}
        raise _status_error(verb, path, status, data, retry_after)


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    policy: RetryPolicy | None = None,
    timeout_s: float = 10.0,
) -> ClientTransport:
    """A transport from the pod's service account (in a cluster) or a kubeconfig/context
    (:func:`scaler.kube_access.load_credentials`, as the elector and the agent load them).

    With neither ``kubeconfig`` nor ``context``, the in-cluster service account is
    used when ``KUBERNETES_SERVICE_HOST`` is set, else ``$KUBECONFIG`` or
    ``~/.kube/config``.
    """
    from kubernetes import client

    configuration = load_credentials(kubeconfig, context)
    # Retries are ours (bounded, logged, status-aware); urllib3's own would hide them.
    configuration.retries = False
    return ClientTransport(client.ApiClient(configuration), policy, timeout_s)


@dataclass
class Session:
    """Logs every call (verb, path, query, body, status) and applies server-side dry-run.

    ``calls`` is the log of the current action; ``journal`` keeps every call of the
    cycle in order, so a cycle that fails half way still says what landed.
    """

    transport: Transport
    server_dry_run: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)

    def request(
        self,
        verb: str,
        path: str,
        body: Any = None,
        content_type: str | None = None,
        query: dict[str, str] | None = None,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
    ) -> dict[str, Any]:
        query = dict(query or {})
        if self.server_dry_run and verb in WRITE_VERBS:
            query["dryRun"] = "All"
        call: dict[str, Any] = {"verb": verb, "path": path}
        if query:
            call["query"] = dict(query)
        if body is not None:
            call["body"] = copy.deepcopy(body)
        if content_type is not None and verb == "PATCH":
            call["content_type"] = content_type
        self.calls.append(call)
        self.journal.append(call)
        try:
            result = self.transport.request(
                verb, path, body, query or None, content_type, retry_statuses
            )
        except KubeApiError as exc:
            call["status"] = exc.status if exc.status is not None else "no answer"
            raise
        call["status"] = "ok"
        return result

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        return self.request("GET", path, query=query)

    def note(self, verb: str, path: str, **fields: Any) -> None:
        """A step that is not an HTTP call (a wait skipped in dry-run), listed with the calls."""
        call = {"verb": verb, "path": path, **fields, "status": "skipped"}
        self.calls.append(call)
        self.journal.append(call)

    def writes(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["verb"] != "GET"]


# ---- label selectors ---------------------------------------------------------------

_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> Iterable[str]:
    depth, start = 0, 0
    for i, ch in enumerate(selector):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            yield selector[start:i]
            start = i + 1
    yield selector[start:]


def selector_matches(selector: str | None, labels: dict[str, str] | None) -> bool:
    """Kubernetes label-selector semantics: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``,
    ``a in (x,y)``, ``a notin (x)``; terms are ANDed."""
    labels = labels or {}
    for raw in _split_terms(selector or ""):
        term = raw.strip()
        if not term:
            continue
        m = _SET_TERM.match(term)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            ok = labels.get(key) in values if op == "in" else labels.get(key) not in values
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            ok = labels.get(key) != value
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            ok = labels.get(key) == value
        elif term.startswith("!"):
            ok = term[1:].strip() not in labels
        else:
            ok = term in labels
        if not ok:
            return False
    return True


def equality_terms(selector: str) -> dict[str, str]:
    """``a=b,c=d`` as a dict (for node affinity); raises ValueError on any other term."""
    out = {}
    for raw in _split_terms(selector):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term or "=" not in term or " in " in term:
            raise ValueError(f"selector term {term!r}: expected key=value")
        key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
        out[key] = value
    return out


# ---- in-memory cluster -----------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass(frozen=True)
class _Key:
    api: str
    plural: str
    namespace: str | None
    name: str | None
    sub: str | None


def _parse(path: str) -> _Key:
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        api, rest = parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        api, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise KubeApiError(f"GET {path}: not an API path", status=404, reason="NotFound")
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return _Key(
        api,
        rest[0],
        namespace,
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else None,
    )


class MemoryTransport:
    """An in-memory cluster: objects by path, resource versions, 404/409, scale subresources.

    It stands in for the API server in the offline dry-run (seeded from the
    config's ``current_nodes``) and, with ``upstream``, overlays a real cluster:
    reads go through, writes stay here. It is no test fake: it does not enforce
    PodDisruptionBudgets or validation; ``--server-dry-run`` asks a real server.
    """

    def __init__(self, upstream: Transport | None = None) -> None:
        self.upstream = upstream
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self.deleted: set[tuple[str, str, str | None, str]] = set()
        self.discovery: dict[str, dict[str, Any]] = {}
        """API discovery documents (``APIResourceList``) by group/version, for the offline
        dry-run; with ``upstream`` discovery is read from the cluster."""
        self._rv = 1000

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def add(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` at its object path (seeding)."""
        k = _parse(path)
        assert k.name is not None, path
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("name", k.name)
        if k.namespace:
            meta.setdefault("namespace", k.namespace)
        meta["resourceVersion"] = self._next_rv()
        self.objects[(k.api, k.plural, k.namespace, k.name)] = obj
        return obj

    def _load(self, k: _Key, verb: str, path: str) -> dict[str, Any]:
        assert k.name is not None
        key = (k.api, k.plural, k.namespace, k.name)
        if key not in self.objects and key not in self.deleted and self.upstream is not None:
            obj_path = path.split("?")[0]
            if k.sub:
                obj_path = obj_path.rsplit("/", 1)[0]
            self.objects[key] = self.upstream.request("GET", obj_path)
        if key not in self.objects:
            raise KubeApiError(
                f"{verb} {path}: HTTP 404 NotFound: {k.plural} {k.name!r} not found",
                status=404,
                reason="NotFound",
            )
        return self.objects[key]

    def _list(self, k: _Key, path: str, query: dict[str, str]) -> dict[str, Any]:
        items: dict[tuple[str | None, str], dict[str, Any]] = {}
        if self.upstream is not None:
            for obj in self.upstream.request("GET", path, query=query or None).get("items", []):
                meta = obj.get("metadata", {})
                items[(meta.get("namespace"), meta.get("name", ""))] = obj
        for (api, plural, ns, name), obj in self.objects.items():
            if (api, plural) == (k.api, k.plural) and (k.namespace in (None, ns)):
                items[(ns, name)] = obj
        for api, plural, ns, name in self.deleted:
            if (api, plural) == (k.api, k.plural):
                items.pop((ns, name), None)
        selected = [
            copy.deepcopy(o)
            for o in items.values()
            if selector_matches(query.get("labelSelector"), o.get("metadata", {}).get("labels"))
            and _fields_match(query.get("fieldSelector"), o)
        ]
        return {"kind": "List", "metadata": {"resourceVersion": str(self._rv)}, "items": selected}

    def request(
        self,
        verb: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str | None = None,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
    ) -> dict[str, Any]:
        query = query or {}
        parts = [p for p in path.split("?")[0].split("/") if p]
        if verb == "GET" and parts[:1] == ["apis"] and len(parts) == 3:
            return self._discover(path, f"{parts[1]}/{parts[2]}")
        k = _parse(path)
        if verb == "GET" and k.name is None:
            return self._list(k, path, query)
        if verb == "POST" and k.name is None:
            return self._create(k, path, body)
        obj = self._load(k, verb, path)
        if verb == "GET":
            return copy.deepcopy(self._scale_of(obj) if k.sub == "scale" else obj)
        if (verb == "POST" and k.sub == "eviction") or verb == "DELETE":
            key = (k.api, k.plural, k.namespace, k.name or "")
            self.objects.pop(key, None)
            self.deleted.add(key)
            return {"kind": "Status", "status": "Success"}
        return self._update(k, verb, path, body, obj)

    def _discover(self, path: str, group_version: str) -> dict[str, Any]:
        """Discovery of one group/version: which resources the cluster serves."""
        if self.upstream is not None:
            return self.upstream.request("GET", path)
        if group_version not in self.discovery:
            raise KubeApiError(
                f"GET {path}: HTTP 404 NotFound: {group_version} is not served",
                status=404,
                reason="NotFound",
            )
        return copy.deepcopy(self.discovery[group_version])

    def _create(self, k: _Key, path: str, body: Any) -> dict[str, Any]:
        """POST to a collection: the new object, or 409 AlreadyExists (here or upstream)."""
        name = body.get("metadata", {}).get("name")
        key = (k.api, k.plural, k.namespace, name)
        exists = key in self.objects
        if not exists and key not in self.deleted and self.upstream is not None:
            try:
                self._load(_Key(k.api, k.plural, k.namespace, name, None), "GET", f"{path}/{name}")
                exists = True
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
        if exists:
            raise KubeApiError(
                f"POST {path}: HTTP 409 AlreadyExists: {name!r} already exists",
                status=409,
                reason="AlreadyExists",
            )
        self.deleted.discard(key)
        return copy.deepcopy(self.add(f"{path}/{name}", body))

    def _update(
        self, k: _Key, verb: str, path: str, body: Any, obj: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT or PATCH ``obj`` (or its scale): 409 when the body's resourceVersion is stale."""
        current = self._scale_of(obj) if k.sub == "scale" else obj
        want_rv = (body or {}).get("metadata", {}).get("resourceVersion")
        if want_rv and want_rv != obj["metadata"].get("resourceVersion"):
            raise KubeApiError(
                f"{verb} {path}: HTTP 409 Conflict: the object has been modified",
                status=409,
                reason="Conflict",
            )
        if verb == "PUT":
            updated = copy.deepcopy(body)
        elif verb == "PATCH":
            updated = merge_patch(current, body)
        else:
            raise KubeApiError(f"{verb} {path}: HTTP 405", status=405, reason="MethodNotAllowed")
        if k.sub == "scale":
            obj.setdefault("spec", {})["replicas"] = updated.get("spec", {}).get("replicas")
        else:
            obj.clear()
            obj.update(updated)
        obj.setdefault("metadata", {})["resourceVersion"] = self._next_rv()
        return copy.deepcopy(self._scale_of(obj) if k.sub == "scale" else obj)

    @staticmethod
    def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata", {})
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": {"replicas": obj.get("spec", {}).get("replicas", 0)},
            # A Karpenter NodePool's scale subresource reports .status.nodes.
            "status": {
                "replicas": obj.get("status", {}).get(
                    "nodes" if obj.get("kind") == "NodePool" else "replicas", 0
                )
            },
        }


def _field_value(obj: dict[str, Any], dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _fields_match(selector: str | None, obj: dict[str, Any]) -> bool:
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field_value(obj, key) == value:
                return False
        else:
            key, value = term.replace("==", "=").split("=", 1)
            if _field_value(obj, key) != value:
                return False
    return True
