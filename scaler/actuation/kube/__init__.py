"""Acting through Kubernetes: inventory of GPU nodes per pool and the capacity providers.

The package is the only part of tiercast that imports the ``kubernetes`` client
(an import-linter contract in ``pyproject.toml`` enforces it). Its modules, each importing
only modules listed before it:

* :mod:`scaler.actuation.kube.transport`: one ``request(verb, path, body)`` over the official
  client with bounded retries, plus an in-memory cluster used by the offline dry-run;
* :mod:`scaler.actuation.kube.inventory`: nodes per pool from labels;
* :mod:`scaler.actuation.kube.readiness`: how long each pool's nodes took to start, from
  Karpenter NodeClaims, Cluster API Machines or Nodes (for ``lead_time_s: auto``);
* :mod:`scaler.actuation.kube.pool`: what each pool mechanism gives the provider
  (``PoolProvider``, ``Scaled``);
* :mod:`scaler.actuation.kube.writes`: writes after a fresh read, recomputed on 409;
* one module per pool mechanism: :mod:`~scaler.actuation.kube.cluster_api`
  (MachineDeployment scale), :mod:`~scaler.actuation.kube.karpenter` (NodePool static
  replicas and limits), :mod:`~scaler.actuation.kube.placeholders` (headroom pods and their
  PriorityClass), :mod:`~scaler.actuation.kube.capacity_buffers` (CapacityBuffer);
* :mod:`scaler.actuation.kube.mig_parted`: the GPU Operator's ClusterPolicy and the
  mig-parted ConfigMap entries;
* :mod:`scaler.actuation.kube.mig_relabel`: cordon, evict, relabel, wait, uncordon;
* :mod:`scaler.actuation.kube.events`: an Event on each object an action changed;
* :mod:`scaler.actuation.kube.seeding`: the offline dry-run's in-memory cluster;
* :mod:`scaler.actuation.kube.providers`: :class:`KubeProvider`, the
  :class:`scaler.actuation.protocol.CapacityProvider` that dispatches per pool, and
  ``build_provider``.
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
