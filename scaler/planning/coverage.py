"""What a pool's nodes count for: spot's expected loss and its spare nodes, the GPUs
nodes cover towards a need, the cheapest allocation covering one, and lead steps.

Shared by the tier planner (:mod:`scaler.planning.tiers`), its solvers
(:mod:`scaler.planning.solver`) and the reports that project cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scipy.stats import binom

from scaler.config import PoolConfig


def spot_loss_fraction(pool: PoolConfig, cycle_s: int) -> float:
    """Share of a pool's GPUs expected to be missing at any time through reclamation."""
    if pool.tier != "spot" or pool.spot_interruption_rate_per_hour <= 0:
        return 0.0
    exposure_h = (pool.lead_time_s + cycle_s) / 3600.0
    return min(0.5, pool.spot_interruption_rate_per_hour * exposure_h)


def effective_gpus(pool: PoolConfig, nodes: int | float, cycle_s: int) -> float:
    """Expected GPUs of ``nodes`` of ``pool`` (spot discounted by its expected loss)."""
    return float(nodes) * pool.gpus_per_node * (1.0 - spot_loss_fraction(pool, cycle_s))


def spare_nodes(pool: PoolConfig, nodes: int, quantile: float, cycle_s: int) -> int:
    """Spare nodes a spot pool of ``nodes`` holds against reclaims (N+1 at least).

    Each node is lost with probability ``spot_loss_fraction`` over one replacement
    window (lead time plus a cycle), so the count lost at once is binomial. The pool
    holds its policy ``quantile``, and at least one: a single reclaim, the common
    case, then never uncovers the need while the replacement boots (at small pools
    the quantile alone is 0, which is what left reclaims unserved). 0 for other tiers.
    """
    return reclaim_spares(nodes, spot_loss_fraction(pool, cycle_s), quantile)


def reclaim_spares(nodes: int, loss: float, quantile: float) -> int:
    """Spares for ``nodes`` each lost with probability ``loss``: the binomial's
    ``quantile``, at least 1 (N+1); 0 when nothing can be lost."""
    if loss <= 0 or nodes <= 0:
        return 0
    return max(1, min(nodes, int(binom.ppf(quantile, nodes, loss))))


def covered_gpus(pool: PoolConfig, nodes: int | float, spare: int) -> float:
    """GPUs ``nodes`` of ``pool`` count for towards the need: spares held back on spot."""
    if nodes <= 0:
        return 0.0
    return max(0.0, float(nodes) - spare) * pool.gpus_per_node


def allocate(
    pools: list[PoolConfig],
    gpus: float,
    cycle_s: int,
    spares: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Cheapest node counts per pool covering ``gpus`` GPUs (within each pool's min/max).

    ``spares``: nodes a spot pool holds beyond what it counts for, once it holds any
    (the planner's rule). Without it, spot counts for its expected GPUs
    (:func:`effective_gpus`), which is what a cost projection wants.
    """
    alloc = {p.name: p.min_nodes for p in pools}

    def counted(p: PoolConfig, n: int) -> float:
        if spares is None:
            return effective_gpus(p, n, cycle_s)
        return covered_gpus(p, n, spares.get(p.name, 0))

    remaining = max(0.0, gpus) - sum(counted(p, p.min_nodes) for p in pools)

    def eff_price(p: PoolConfig) -> float:
        return p.price_per_gpu_hour / max(1e-9, 1.0 - spot_loss_fraction(p, cycle_s))

    for p in sorted(pools, key=lambda p: (eff_price(p), p.name)):
        if remaining <= 1e-9:
            break
        have = counted(p, alloc[p.name])
        if spares is None:
            want = alloc[p.name] + math.ceil(remaining / effective_gpus(p, 1, cycle_s) - 1e-9)
        else:
            # Nodes counting towards the need, plus the spares once the pool holds any.
            want = math.ceil((remaining + have) / p.gpus_per_node - 1e-9) + spares.get(p.name, 0)
        n = min(p.max_nodes, max(alloc[p.name], want))
        if n > alloc[p.name]:
            remaining -= counted(p, n) - have
            alloc[p.name] = n
    return alloc


def lead_steps(pool: PoolConfig, cycle_s: int) -> int:
    """Grid steps between requesting a node of ``pool`` and it serving."""
    return math.ceil(pool.lead_time_s / cycle_s - 1e-9)
