"""Layouts per GPU: the exact integer programme and the greedy heuristic.

Every GPU gets one layout (a maximal valid one, its current one, or ``whole``) or is
left as it is and unused. The cost of a choice is GPU-hours: a used GPU costs the
horizon, a changed GPU costs its drain and re-partition time; uncovered demand costs
more than any number of GPUs. GPUs that are interchangeable (same current layout, same
newness) form one class, so the exact programme (scipy's ``milp``, HiGHS) has classes x
layouts variables, not GPUs x layouts. The heuristic covers what the solver does not
finish within its time limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from forecaster.errors import BadInputError
from scaler.catalog.mig import Layout, gpu_fraction, layouts

EXACT_TIME_LIMIT_S = 1.0
"""Seconds the exact solver may take in ``auto`` before the heuristic's answer is used."""


@dataclass(frozen=True)
class GpuState:
    """One GPU as the planner sees it."""

    current: Layout
    new: bool = False
    """Not yet running (a node being added): labelled on arrival, no drain."""
    fixed: bool = False
    """Its layout must not change this cycle (a MIG change in progress, a pool scaling down)."""
    single: bool = False
    """On a node with ``mig.strategy=single``: only one-profile layouts are allowed."""


def _allowed(g: GpuState, lay: Layout, allow_changes: bool) -> bool:
    """Whether ``g`` may take ``lay``: keeping its layout always is; a change needs leave."""
    if lay == g.current:
        return True
    if g.new:
        return not (g.single and not lay.whole and len(lay.counts) > 1)
    if not allow_changes or g.fixed:
        return False
    return not (g.single and not lay.whole and len(lay.counts) > 1)


@dataclass(frozen=True)
class Costs:
    """GPU-hours a choice costs; the planner minimises their sum."""

    used_gpu_h: float = 24.0
    """A GPU carrying instances over the horizon."""
    change_gpu_h: float = 0.25
    """A GPU drained and re-partitioned (out of service for this long)."""


@dataclass
class LayoutSolution:
    """Target layouts per GPU and what they cost and leave uncovered."""

    assignment: list[Layout | None]
    """Target per GPU; None: left as it is and not used."""
    used: int
    changed: int
    shortfall: dict[str, int]
    """Instances per profile (and ``whole``) the fleet cannot provide."""
    solver: str
    seconds: float
    cost: float = 0.0
    blocked: list[str] = field(default_factory=list)
    """Nodes kept as they are since their target needs ``mig.strategy=mixed``."""

    def capacity(self) -> dict[str, int]:
        """Instances per profile (and ``whole`` GPUs) the used GPUs provide."""
        out: dict[str, int] = {}
        for lay in self.assignment:
            if lay is None:
                continue
            if lay.whole:
                out["whole"] = out.get("whole", 0) + 1
            for p, n in lay.counts:
                out[p] = out.get(p, 0) + n
        return out


def _weights(model: str, demand: Mapping[str, int]) -> dict[str, float]:
    w = {p: gpu_fraction(model, p) for p in demand if p != "whole"}
    w["whole"] = 1.0
    return w


def evaluate(
    model: str,
    gpus: Sequence[GpuState],
    assignment: list[Layout | None],
    demand: Mapping[str, int],
    costs: Costs,
    solver: str,
    seconds: float,
) -> LayoutSolution:
    used = sum(a is not None for a in assignment)
    changed = sum(
        1
        for g, a in zip(gpus, assignment, strict=True)
        if a is not None and a != g.current and not g.new
    )
    sol = LayoutSolution(assignment, used, changed, {}, solver, seconds)
    cap = sol.capacity()
    sol.shortfall = {p: n - cap.get(p, 0) for p, n in demand.items() if n > cap.get(p, 0)}
    w = _weights(model, demand)
    sol.cost = (
        used * costs.used_gpu_h
        + changed * costs.change_gpu_h
        + _penalty(len(gpus), costs) * sum(w[p] * n for p, n in sol.shortfall.items())
    )
    return sol


def _penalty(n_gpus: int, costs: Costs) -> float:
    # Uncovering one GPU's worth of demand must cost more than any choice of GPUs.
    return (costs.used_gpu_h + costs.change_gpu_h) * (n_gpus + 1) * 8


def _options(model: str, gpus: Sequence[GpuState]) -> list[Layout]:
    opts = set(layouts(model)) | {Layout(whole=True)}
    opts |= {g.current for g in gpus}
    return sorted(opts, key=lambda lay: (lay.whole, lay.name))


def solve_exact(
    model: str,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    costs: Costs = Costs(),
    allow_changes: bool = True,
    time_limit_s: float = EXACT_TIME_LIMIT_S,
) -> LayoutSolution | None:
    """Optimal layouts by integer programming; None if the solver does not finish in time."""
    t0 = time.perf_counter()
    demand = {p: int(n) for p, n in demand.items() if n > 0}
    opts = _options(model, gpus)
    classes: dict[GpuState, list[int]] = {}
    for i, g in enumerate(gpus):
        classes.setdefault(g, []).append(i)
    keys = list(classes)
    n_opt = len(opts) + 1  # the last option of each class: left as it is, unused
    profiles = list(demand)
    n_x = len(keys) * n_opt
    n_var = n_x + len(profiles)
    c = np.zeros(n_var)
    ub = np.zeros(n_var)
    a_eq = np.zeros((len(keys), n_var))
    a_cov = np.zeros((len(profiles), n_var))
    w = _weights(model, demand)
    big = _penalty(len(gpus), costs)
    for k, g in enumerate(keys):
        n = len(classes[g])
        for j, lay in enumerate(opts):
            v = k * n_opt + j
            change = lay != g.current and not g.new
            c[v] = costs.used_gpu_h + (costs.change_gpu_h if change else 0.0)
            ub[v] = n if _allowed(g, lay, allow_changes) else 0
            for r, p in enumerate(profiles):
                a_cov[r, v] = 1.0 if (p == "whole" and lay.whole) else lay.count(p)
        ub[k * n_opt + len(opts)] = n
        a_eq[k, k * n_opt : (k + 1) * n_opt] = 1.0
    for r, p in enumerate(profiles):
        v = n_x + r
        c[v] = big * w[p]
        ub[v] = demand[p]
        a_cov[r, v] = 1.0
    constraints = [
        LinearConstraint(a_eq, [len(classes[g]) for g in keys], [len(classes[g]) for g in keys])
    ]
    if profiles:
        constraints.append(LinearConstraint(a_cov, [demand[p] for p in profiles], np.inf))
    res = milp(
        c,
        integrality=np.ones(n_var),
        bounds=Bounds(np.zeros(n_var), ub),
        constraints=constraints,
        options={"time_limit": time_limit_s, "presolve": True},
    )
    if res.status != 0 or res.x is None:
        return None
    x = np.rint(res.x).astype(int)
    assignment: list[Layout | None] = [None] * len(gpus)
    for k, g in enumerate(keys):
        members = classes[g]
        pos = 0
        # Same-layout GPUs first, so changed GPUs are the later ones of the class (which
        # callers order by node): changes gather on few nodes, each drained once.
        order = sorted(range(len(opts)), key=lambda j: opts[j] != g.current)
        for j in order:
            for _ in range(x[k * n_opt + j]):
                assignment[members[pos]] = opts[j]
                pos += 1
    return evaluate(model, gpus, assignment, demand, costs, "exact", time.perf_counter() - t0)


def solve_heuristic(
    model: str,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    costs: Costs = Costs(),
    allow_changes: bool = True,
) -> LayoutSolution:
    """Greedy: repeatedly take the GPU choice covering the most demand per GPU-hour."""
    t0 = time.perf_counter()
    demand = {p: int(n) for p, n in demand.items() if n > 0}
    w = _weights(model, demand)
    targets = list(layouts(model)) if allow_changes or any(g.new for g in gpus) else []

    def value(lay: Layout, rem: Mapping[str, int]) -> float:
        if lay.whole:
            return w["whole"] if rem.get("whole", 0) > 0 else 0.0
        return sum(w[p] * min(n, rem[p]) for p, n in lay.counts if rem.get(p, 0) > 0)

    def run(keep_bias: float) -> LayoutSolution:
        rem = dict(demand)
        assignment: list[Layout | None] = [None] * len(gpus)
        free = set(range(len(gpus)))
        order: list[int] = []
        while any(n > 0 for n in rem.values()) and free:
            best: tuple[float, int, Layout] | None = None
            # Keep a GPU's current layout (no drain) ...
            for i in free:
                v = value(gpus[i].current, rem)
                if v > 0:
                    score = v / costs.used_gpu_h
                    if best is None or score > best[0] + 1e-12:
                        best = (score, i, gpus[i].current)
            # ... or re-partition the free GPU whose current layout is worth least now.
            movable = [i for i in free if gpus[i].new or (allow_changes and not gpus[i].fixed)]
            if movable and (targets or "whole" in rem):
                spare = min(
                    movable, key=lambda i: (not gpus[i].new, value(gpus[i].current, rem), i)
                )
                change = 0.0 if gpus[spare].new else costs.change_gpu_h
                cands = list(layouts(model)) + (
                    [Layout(whole=True)] if rem.get("whole", 0) > 0 else []
                )
                for lay in cands:
                    if not _allowed(gpus[spare], lay, allow_changes):
                        continue
                    v = value(lay, rem)
                    score = v / (costs.used_gpu_h + change) * keep_bias
                    if v > 0 and (best is None or score > best[0] + 1e-12):
                        best = (score, spare, lay)
            if best is None:
                break
            _, i, lay = best
            assignment[i] = lay
            free.discard(i)
            order.append(i)
            for p, n in [("whole", 1)] if lay.whole else lay.counts:
                if p in rem:
                    rem[p] = max(0, rem[p] - n)
        # Drop GPUs whose instances turned out not to be needed.
        for i in reversed(order):
            trial = list(assignment)
            trial[i] = None
            if _covers(trial, demand):
                assignment = trial
        return evaluate(model, gpus, _reassign(gpus, assignment), demand, costs, "heuristic", 0.0)

    # A re-partition must cover this much more than keeping a layout would: several
    # biases are tried and the cheapest answer kept, since the right one depends on
    # how far the current layouts are from the demand.
    sol = min(
        (run(b) for b in (1.0, 0.999, 0.95, 0.85, 0.7, 0.5)), key=lambda s: (s.cost, s.changed)
    )
    sol.seconds = time.perf_counter() - t0
    return sol


def _reassign(gpus: Sequence[GpuState], assignment: list[Layout | None]) -> list[Layout | None]:
    """The same target layouts, moved to the GPUs that already have them (fewest changes).

    Each target goes first to a GPU whose current layout it is, then to a new GPU, then
    to the remaining GPUs in order, so changes gather on the first nodes.
    """
    targets = sorted((a for a in assignment if a is not None), key=lambda lay: lay.name)
    out: list[Layout | None] = [None] * len(gpus)
    # GPUs that may not change take their own layout first.
    free = sorted(range(len(gpus)), key=lambda i: (not gpus[i].fixed, i))
    rest: list[Layout] = []
    for lay in targets:
        same = next((i for i in free if gpus[i].current == lay), None)
        if same is None:
            rest.append(lay)
            continue
        out[same] = lay
        free.remove(same)
    free.sort()
    for lay in rest:
        fits = [i for i in free if _allowed(gpus[i], lay, True)]
        if not fits:
            continue  # no GPU may take it: left uncovered, the shortfall says so
        i = next((i for i in fits if gpus[i].new), fits[0])
        out[i] = lay
        free.remove(i)
    return out


def capacity_of(assigned: Iterable[Layout | None]) -> dict[str, int]:
    cap: dict[str, int] = {}
    for lay in assigned:
        if lay is None:
            continue
        for p, n in [("whole", 1)] if lay.whole else lay.counts:
            cap[p] = cap.get(p, 0) + n
    return cap


def weighted_gpus(model: str, counts: Mapping[str, int]) -> float:
    return sum((1.0 if p == "whole" else gpu_fraction(model, p)) * n for p, n in counts.items())


def _covers(assignment: Sequence[Layout | None], demand: Mapping[str, int]) -> bool:
    cap: dict[str, int] = {}
    for lay in assignment:
        if lay is None:
            continue
        for p, n in [("whole", 1)] if lay.whole else lay.counts:
            cap[p] = cap.get(p, 0) + n
    return all(cap.get(p, 0) >= n for p, n in demand.items())


def solve_layouts(
    model: str,
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    costs: Costs = Costs(),
    method: str = "auto",
    allow_changes: bool = True,
    time_limit_s: float = EXACT_TIME_LIMIT_S,
) -> LayoutSolution:
    """Layouts covering ``demand`` at least cost: ``exact``, ``heuristic`` or ``auto``.

    ``auto`` runs the exact solver within ``time_limit_s`` and falls back to the heuristic.
    """
    if method not in ("auto", "exact", "heuristic"):
        raise BadInputError(
            f"The 'method' parameter of solve_layouts must be auto, exact or heuristic. Got {method!r} instead."
        )
    if method != "heuristic":
        sol = solve_exact(model, gpus, demand, costs, allow_changes, time_limit_s)
        if sol is not None:
            return sol
    sol = solve_heuristic(model, gpus, demand, costs, allow_changes)
    if method == "exact":
        sol.solver = "heuristic (exact solver did not finish)"
    return sol
