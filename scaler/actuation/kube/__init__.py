"""Acting through Kubernetes: inventory of GPU nodes per pool and the capacity providers.

The package is the only part of tiercast that imports the ``kubernetes`` client
(an import-linter contract in ``pyproject.toml`` enforces it). Its parts:

* :mod:`scaler.actuation.kube.transport`: one ``request(verb, path, body)`` over the official
  client with bounded retries, plus an in-memory cluster used by the offline dry-run;
* :mod:`scaler.actuation.kube.inventory`: nodes per pool from labels;
* :mod:`scaler.actuation.kube.providers`: Cluster API, Karpenter and placeholder-headroom
  pool providers, the MIG relabel with drain, and :class:`KubeProvider`, the
  :class:`scaler.actuation.protocol.CapacityProvider` that dispatches per pool.
"""

from __future__ import annotations

from scaler.actuation.kube.providers import KubeProvider, build_provider
from scaler.actuation.kube.transport import ClientTransport, KubeApiError, MemoryTransport, connect

__all__ = [
    "ClientTransport",
    "KubeApiError",
    "KubeProvider",
    "MemoryTransport",
    "build_provider",
    "connect",
]
