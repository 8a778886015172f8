"""Leader election on a ``coordination.k8s.io/v1`` Lease: only the leader actuates.

The algorithm is client-go's: a candidate reads the Lease; it takes it when nobody
holds it, or when the holder has not renewed it for ``lease_duration_s`` *as seen
by this candidate's monotonic clock* (it remembers when it last saw the record
change, so a wall-clock jump or skew between nodes can neither steal a live Lease
nor keep a dead one). Every write carries the ``resourceVersion`` it read, so two
candidates racing for one Lease cannot both win: the loser gets 409 and stays a
follower. The leader renews every ``lease_renew_s``; if it cannot renew for
``lease_duration_s - lease_renew_s`` it stops acting *before* anyone else may take
over. On shutdown the leader releases the Lease so a peer takes over at once.

:class:`AlwaysLeader` is the single-replica case (``service.leader_election: false``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from forecaster.errors import BadInputError, TemporaryError
from scaler.kube_access import load_credentials

log = logging.getLogger(__name__)

_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class Leadership(Protocol):
    """Required: ``is_leader``. ``start`` and ``stop`` run and end the election."""

    def is_leader(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class AlwaysLeader:
    """One replica: it is always the leader."""

    def is_leader(self) -> bool:
        return True

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaseElector:
    """Campaigns for one Lease in a background thread; ``is_leader`` is safe from any thread."""

    def __init__(
        self,
        api: k8s.CoordinationV1Api,
        name: str,
        namespace: str,
        identity: str,
        lease_duration_s: int = 15,
        renew_s: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = _now,
    ) -> None:
        if renew_s >= lease_duration_s:
            raise ValueError(f"renew_s ({renew_s}) must be below lease_duration_s")
        self.api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_s = renew_s
        self.renew_deadline_s = lease_duration_s - renew_s
        self._on_change = on_change
        self._on_error = on_error
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._leader = False
        self._renewed_at = float("-inf")
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_leader(self) -> bool:
        """True while this replica holds the Lease and renewed it within the deadline."""
        with self._lock:
            return self._leader and self._monotonic() - self._renewed_at < self.renew_deadline_s

    def _set_leader(self, leader: bool) -> None:
        with self._lock:
            changed = leader != self._leader
            self._leader = leader
            if leader:
                self._renewed_at = self._monotonic()
        if changed:
            log.info(
                "%s Lease %s/%s",
                "acquired" if leader else "lost",
                self.namespace,
                self.name,
                extra={"identity": self.identity},
            )
            if self._on_change:
                self._on_change(leader)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        timeout = max(1.0, self.renew_s)
        try:
            return fn(*args, _request_timeout=timeout)
        except ApiException:
            raise
        except (HTTPError, OSError) as exc:
            raise TemporaryError(
                f"Lease {self.namespace}/{self.name}: {what} failed: {exc}"
            ) from exc

    def try_acquire_or_renew(self) -> bool:
        """One election round; returns whether this replica leads afterwards."""
        now = self._wall()
        try:
            lease = self._call("read", self.api.read_namespaced_lease, self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise TemporaryError(
                    f"Lease {self.namespace}/{self.name}: read returned HTTP {exc.status}"
                ) from exc
            return self._create(now)
        spec = lease.spec or k8s.V1LeaseSpec()
        holder = spec.holder_identity or ""
        seen = (holder, spec.renew_time, lease.metadata.resource_version)
        if seen != self._observed:
            self._observed, self._observed_at = seen, self._monotonic()
        duration = spec.lease_duration_seconds or self.lease_duration_s
        if holder and holder != self.identity:
            if self._monotonic() - self._observed_at < duration:
                self._set_leader(False)
                return False
            log.info("Lease %s/%s: holder %s expired", self.namespace, self.name, holder)
        ours = holder == self.identity
        lease.spec = k8s.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=self.lease_duration_s,
            acquire_time=spec.acquire_time if ours and spec.acquire_time else now,
            renew_time=now,
            lease_transitions=(spec.lease_transitions or 0) + (0 if ours else 1),
        )
        try:
            self._call(
                "update", self.api.replace_namespaced_lease, self.name, self.namespace, lease
            )
        except ApiException as exc:
            if exc.status == 409:
                # Someone wrote the Lease since we read it: they won this round.
                self._set_leader(False)
                return False
            raise TemporaryError(
                f"Lease {self.namespace}/{self.name}: update returned HTTP {exc.status}"
            ) from exc
        self._set_leader(True)
        return True

    def _create(self, now: dt.datetime) -> bool:
        body = k8s.V1Lease(
            metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=k8s.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=self.lease_duration_s,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._call("create", self.api.create_namespaced_lease, self.namespace, body)
        except ApiException as exc:
            if exc.status == 409:
                self._set_leader(False)
                return False
            raise TemporaryError(
                f"Lease {self.namespace}/{self.name}: create returned HTTP {exc.status}"
            ) from exc
        self._set_leader(True)
        return True

    def release(self) -> None:
        """Give the Lease up (holder cleared) so a peer need not wait for it to expire."""
        if not self.is_leader():
            return
        self._set_leader(False)
        try:
            lease = self._call("read", self.api.read_namespaced_lease, self.name, self.namespace)
            if (lease.spec.holder_identity or "") != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = self._wall()
            self._call(
                "release", self.api.replace_namespaced_lease, self.name, self.namespace, lease
            )
        except (ApiException, TemporaryError) as exc:
            log.warning(
                "Lease %s/%s: release failed (%s); it will expire", self.namespace, self.name, exc
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_acquire_or_renew()
            except TemporaryError as exc:
                log.warning("%s", exc)
                if self._on_error:
                    self._on_error(exc)
                if not self.is_leader():
                    self._set_leader(False)
            self._stop.wait(self.renew_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tiercast-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the campaign and release the Lease if held."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_s + 5)
        self.release()


def default_namespace() -> str:
    """The pod's namespace from its service-account mount, else ``default``."""
    try:
        return _NAMESPACE_FILE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def default_identity() -> str:
    """The pod name (``POD_NAME`` from the downward API), else host name and process id."""
    return os.environ.get("POD_NAME") or f"{os.uname().nodename}-{os.getpid()}"


def coordination_api(
    kubeconfig: str | None = None, context: str | None = None
) -> k8s.CoordinationV1Api:
    """A Lease client for the cluster actuation reaches: the in-cluster service account,
    else the kubeconfig at ``context`` (``serve --kubeconfig/--context``), loaded as
    :func:`scaler.kube_access.load_credentials` loads them for every client."""
    try:
        configuration = load_credentials(kubeconfig, context)
    except BadInputError as exc:
        raise TemporaryError(
            "service.leader_election: no in-cluster service account and no kubeconfig "
            f"to reach the API server ({exc})"
        ) from exc
    return k8s.CoordinationV1Api(k8s.ApiClient(configuration))
