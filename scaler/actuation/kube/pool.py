"""What every per-pool mechanism gives :class:`scaler.actuation.kube.providers.KubeProvider`.

Each pool's ``provider.kind`` names one mechanism (Cluster API, Karpenter, placeholder pods,
CapacityBuffer), a class with the two methods of :class:`PoolProvider`; what one call did
comes back as a :class:`Scaled`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from scaler.actuation.kube.inventory import NodeInfo
from scaler.actuation.kube.transport import MemoryTransport, Session
from scaler.plans import Action


@dataclass(frozen=True)
class Scaled:
    """What one pool provider did: a one-line message, and whether the cluster acts on it."""

    message: str
    outcome: str = "applied"
    """``applied``; ``accepted`` (the API took the change but the cluster will not act on it
    as asked, or tiercast cannot know it will); ``failed`` (refused before writing)."""


class PoolProvider(Protocol):
    """Required: ``scale`` (one pool to ``action.target_nodes``) and ``seed`` (dry-run state)."""

    def scale(
        self, session: Session, action: Action, nodes: Callable[[], list[NodeInfo]]
    ) -> Scaled:
        """Make at most the calls needed; say what changed and whether it takes effect.

        ``nodes`` reads the inventory when called (only providers that need it pay the call).
        """
        ...

    def seed(self, store: MemoryTransport, nodes: int) -> None:
        """Create the objects this provider reads, as they would be with ``nodes`` nodes."""
        ...
