"""The MIG replay's pool: GPUs with layouts, nodes draining, and what each step costs and leaves unserved.

Every GPU has a layout. At each decision a policy may start relayouts (a node drained and
re-partitioned: all its GPUs out of service for the drain time, as tiercast cordons and
evicts the whole node) and says which GPUs it holds until the next decision. Per 5-minute
step the replay counts:

- *GPU-hours*: GPUs held plus every GPU of a draining node (those are paid and serve nothing);
- *GPU-hours lost to drains*: the GPUs of draining nodes alone;
- *unserved slice-hours*: per profile, the instances demanded beyond what the held GPUs
  outside draining nodes provide, times the profile's compute slices (1g = 1 ... 7g = 7),
  so a missing 3g instance weighs three missing 1g ones.

A GPU a policy does not hold keeps its layout and costs nothing: its node is taken to be
lent to other work and back at the next decision with its layout (no lead time), alike for
every policy (``docs/replay.md``, "MIG replay", says what this leaves out).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scaler.catalog.mig import Layout, geometry
from scaler.planning.mig.layouts import (
    Costs,
    GpuState,
    capacity_of,
    solve_layouts,
    weighted_gpus,
)
from scaler.replay.protocol import STEP, STEP_H


def compute_slices(model: str, profile: str) -> int:
    """Compute slices of one instance of ``profile`` (``whole``: the GPU's)."""
    geo = geometry(model)
    return geo.compute_slices if profile == "whole" else geo.profile(profile).compute_slices


@dataclass
class MigPool:
    """The GPUs of one MIG-managed pool as a policy leaves them."""

    model: str
    gpus_per_node: int
    layouts: list[Layout]
    """Per GPU; a draining node's GPUs already carry their target."""
    drain_steps: int
    """5-minute steps a node is out of service for a relayout."""
    draining: list[int] = field(default_factory=list)
    """Per node, steps of its drain left (0: in service)."""
    held: list[bool] = field(default_factory=list)
    """Per GPU, whether the policy holds it until its next decision."""
    relayouts: int = 0
    """Node relayouts started."""
    needs: list[float] = field(default_factory=list)
    """The need each decision held for, in GPUs' worth of instances (``weighted_gpus``)."""

    def __post_init__(self) -> None:
        if not self.draining:
            self.draining = [0] * self.nodes
        if not self.held:
            self.held = [True] * len(self.layouts)

    @classmethod
    def of(cls, model: str, gpus_per_node: int, layouts: Sequence[Layout], drain_s: int) -> MigPool:
        return cls(model, gpus_per_node, list(layouts), math.ceil(drain_s / STEP.total_seconds()))

    @property
    def nodes(self) -> int:
        return math.ceil(len(self.layouts) / self.gpus_per_node)

    def node_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_node

    def node_gpus(self, node: int) -> range:
        return range(
            node * self.gpus_per_node, min(len(self.layouts), (node + 1) * self.gpus_per_node)
        )

    def in_service(self, gpu: int) -> bool:
        return self.draining[self.node_of(gpu)] == 0

    def relayout(self, node: int, layouts: Sequence[Layout]) -> None:
        """Start draining ``node`` to re-partition its GPUs to ``layouts``."""
        gpus = self.node_gpus(node)
        if len(layouts) != len(gpus):
            raise ValueError(f"node {node} has {len(gpus)} GPUs; got {len(layouts)} layouts")
        if [self.layouts[i] for i in gpus] == list(layouts):
            return
        for i, lay in zip(gpus, layouts, strict=True):
            self.layouts[i] = lay
        self.draining[node] = self.drain_steps
        self.relayouts += 1

    def hold_for(self, need: Mapping[str, int]) -> None:
        """Hold the fewest GPUs in service whose layouts cover ``need`` (as many as help
        where they cannot): the planner's own layout solver, with changes not allowed."""
        need = {p: int(n) for p, n in need.items() if n > 0}
        self.needs.append(weighted_gpus(self.model, need))
        self.held = [False] * len(self.layouts)
        # GPUs in service first; what they leave short, from GPUs still draining (paid
        # during the drain anyway), which serve once it ends.
        for draining in (False, True):
            gpus = [i for i in range(len(self.layouts)) if self.in_service(i) != draining]
            if not need or not gpus:
                continue
            used, short = _keep(self.model, tuple(self.layouts[i] for i in gpus), _key(need))
            for i, u in zip(gpus, used, strict=True):
                self.held[i] = u
            need = dict(short)

    def capacity(self) -> dict[str, int]:
        """Instances per profile the held GPUs in service provide."""
        return capacity_of(
            lay for i, lay in enumerate(self.layouts) if self.held[i] and self.in_service(i)
        )

    def all_capacity(self) -> dict[str, int]:
        """Instances per profile every GPU provides, held or not, draining GPUs at their target."""
        return capacity_of(self.layouts)


def _key(need: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(need.items()))


@functools.lru_cache(maxsize=8192)
def _keep(
    model: str, layouts: tuple[Layout, ...], need: tuple[tuple[str, int], ...]
) -> tuple[tuple[bool, ...], tuple[tuple[str, int], ...]]:
    """Which of ``layouts`` the fewest GPUs covering ``need`` are, and what they leave short
    (the planner's solver with changes not allowed; the same question recurs every cycle)."""
    states = [GpuState(lay) for lay in layouts]
    sol = solve_layouts(model, states, dict(need), Costs(), "auto", allow_changes=False)
    return tuple(a is not None for a in sol.assignment), _key(sol.shortfall)


@dataclass
class MigTally:
    """What one policy's pool cost and left unserved, step by step over the test period."""

    policy: str
    gpus: np.ndarray
    drain_gpus: np.ndarray
    unserved_slices: np.ndarray
    relayouts: int = 0
    seconds: float = 0.0
    mean_need: float = 0.0
    """Mean need the policy held for, in GPUs' worth of instances."""

    @classmethod
    def empty(cls, policy: str, steps: int) -> MigTally:
        return cls(policy, np.zeros(steps), np.zeros(steps), np.zeros(steps))

    @property
    def gpu_hours(self) -> float:
        return float(self.gpus.sum() * STEP_H)

    @property
    def drain_gpu_hours(self) -> float:
        return float(self.drain_gpus.sum() * STEP_H)

    @property
    def unserved_slice_hours(self) -> float:
        return float(self.unserved_slices.sum() * STEP_H)

    @property
    def unserved_during_drains(self) -> float:
        """The unserved slice-hours of the steps with a node draining: what drains cost in
        service, as against what the layouts themselves leave short."""
        return float(self.unserved_slices[self.drain_gpus > 0].sum() * STEP_H)

    def cost(self, price_per_gpu_hour: float) -> float:
        return self.gpu_hours * price_per_gpu_hour


def account_step(pool: MigPool, demand: Mapping[str, float], tally: MigTally, i: int) -> None:
    """Count test step ``i``: GPUs paid, GPUs draining, slices demanded and not served; then
    the drains move on by one step."""
    drain = sum(len(pool.node_gpus(n)) for n in range(pool.nodes) if pool.draining[n] > 0)
    held = sum(1 for g in range(len(pool.layouts)) if pool.held[g] and pool.in_service(g))
    cap = pool.capacity()
    short = sum(
        max(0.0, float(n) - cap.get(p, 0)) * compute_slices(pool.model, p)
        for p, n in demand.items()
    )
    tally.gpus[i] = held + drain
    tally.drain_gpus[i] = drain
    tally.unserved_slices[i] = short
    pool.draining = [max(0, d - 1) for d in pool.draining]
