"""The nodes of MIG-managed pools and their ``nvidia.com/mig.config`` names.

Values the planner and the actuators share: :class:`MigNodeState` (a node as the
cluster shows it, read by ``scaler.actuation.kube.inventory``), :class:`MigNode` (a node
as the planner works on it, nodes still to come included), the nodes the config's
``mig_layouts`` describe (the dry-run without a cluster) and the name of a node's
layouts in the mig-parted config the MIG manager reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forecaster.errors import BadInputError
from scaler.catalog.mig import Layout, config_name, parse_layout, parse_mig_parted_entry
from scaler.config import PoolConfig


@dataclass(frozen=True)
class MigNodeState:
    """One node of a MIG-managed pool as the cluster shows it (see ``scaler.actuation.kube.inventory``)."""

    name: str
    current: tuple[Layout, ...]
    """The layout of each GPU now."""
    mig_config: str | None = None
    """Its ``nvidia.com/mig.config`` label."""
    strategy: str | None = None
    """The GPU Operator's MIG strategy on the node (``single``, ``mixed``); None: unknown."""
    held: str | None = None
    """Why its layout must not change now (a change in progress, a layout not understood)."""


@dataclass
class MigNode:
    """One node of a MIG-managed pool as the planner works on it: read, configured or to come."""

    pool: PoolConfig
    name: str
    current: list[Layout]
    new: bool
    """Still to come (the tier plan adds it): labelled on arrival, no drain."""
    label: str | None = None
    """Its ``nvidia.com/mig.config`` label, where the cluster showed one."""
    strategy: str | None = None
    held: str | None = None
    """Why its layout must not change this cycle."""


def configured_nodes(pool: PoolConfig, count: int) -> list[MigNodeState]:
    """The pool's nodes as the config's ``mig_layouts`` describe them (dry-run without a cluster).

    Named ``<pool>-<i>`` like the in-memory cluster the offline dry-run seeds.
    """
    specs = list(pool.mig_layouts or ())
    out = []
    for i in range(count):
        spec = specs[i] if i < len(specs) else "whole"
        lay = parse_layout(pool.gpu_model, spec, f"pools[{pool.name}].mig_layouts[{i}]")
        out.append(MigNodeState(f"{pool.name}-{i}", (lay,) * pool.gpus_per_node))
    return out


def resolve_config_name(
    model: str, per_device: list[Layout], known: Mapping[str, Any] | None
) -> tuple[str, bool]:
    """The ``nvidia.com/mig.config`` name for ``per_device``, and whether ``known`` has it.

    An entry of ``known`` (the mig-parted config the MIG manager reads, operator entries
    included, ``device-filter`` read for ``model``) that gives exactly these layouts is
    reused by name. Otherwise the name is ``tiercast-`` and a stable name of the layouts,
    so tiercast's entries never shadow one of the operator's; MIG off everywhere is
    ``all-disabled``, which every config the operator ships has.
    """
    for name in sorted(known or {}):
        try:
            got = parse_mig_parted_entry(model, known[name], len(per_device), name)  # type: ignore[index]
        except BadInputError:
            continue
        if [got.get(i) for i in range(len(per_device))] == list(per_device):
            return name, True
    base = config_name(per_device)
    if base == "all-disabled":
        return base, False  # in every mig-parted config the operator ships
    name = base if base.startswith("tiercast-") else f"tiercast-{base}"
    if len(name) > 63:
        name = config_name([*per_device, Layout()])  # the hashed form
    return name, False
