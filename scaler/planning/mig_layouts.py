"""MIG layout planning: slice demand from forecasts, target layouts per GPU, and when to change.

Pure: forecasts, config and inventory in; ``mig-layout`` actions and the plan's ``mig``
section out. For each GPU model with MIG-managed pools (``mig_layouts`` set):

1. *Slice demand.* A workload with a ``mig_profile`` needs one instance of that
   profile per replica, ``max(min_replicas, ceil(signal / units_per_replica))``, at
   the policy quantile on the planning grid (``auto`` picks the smallest profile with
   ``memory_gb``). Layouts must hold for hours, so the target covers the peak over
   the horizon.
2. *Layouts.* Every GPU gets one layout (a maximal valid one, its current one, or
   ``whole``) or is left as it is and unused. The cost of a choice is GPU-hours: a
   used GPU costs the horizon, a changed GPU costs its drain and re-partition time;
   uncovered demand costs more than any number of GPUs. GPUs that are interchangeable
   (same current layout, same newness) form one class, so the exact integer programme
   (scipy's ``milp``, HiGHS) has classes x layouts variables, not GPUs x layouts. A
   greedy heuristic covers what the solver does not finish within its time limit.
3. *Timing.* A change needed for coverage happens in the lowest-demand window before
   the current layouts fall short; a change that only saves GPUs happens in the
   lowest-demand window of the horizon, and only when the GPU-hours it saves exceed
   the GPU-hours its drains cost. A window that starts within this cycle gives a
   ``relayout`` action; a later one gives a ``no-op`` naming the window.
4. *Outputs.* Per node the ``nvidia.com/mig.config`` value, and a mig-parted config
   (``version: v1``) with one named entry per distinct node layout.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import Bounds, LinearConstraint, milp

from forecaster.errors import BadInputError
from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.catalog.mig import (
    Layout,
    config_name,
    geometry,
    gpu_fraction,
    layouts,
    mig_parted_entry,
    needs_mixed_strategy,
    parse_layout,
    parse_mig_parted_entry,
    resolve_profile,
)
from scaler.config import Config, PoolConfig, WorkloadConfig
from scaler.planning.demand import on_grid, planning_grid
from scaler.plans import Action, iso

EXACT_TIME_LIMIT_S = 1.0
"""Seconds the exact solver may take in ``auto`` before the heuristic's answer is used."""


# --- slice demand -----------------------------------------------------------------


def workload_profile(workload: WorkloadConfig) -> str | None:
    """The MIG profile one replica of ``workload`` runs on, or None for whole-GPU workloads."""
    if workload.mig_profile is None:
        return None
    return resolve_profile(workload.gpu_model, workload.mig_profile, workload.memory_gb)


def replicas_for(workload: WorkloadConfig, value: np.ndarray) -> np.ndarray:
    """Replicas ``workload`` needs when its signal is ``value``: one MIG instance each."""
    x = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0)
    replicas = np.ceil(np.maximum(x, 0.0) / workload.units_per_replica - 1e-9)
    return np.maximum(replicas, workload.min_replicas)


def slice_demand(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    quantile: float,
) -> dict[str, dict[str, np.ndarray]]:
    """Instances needed per GPU model and MIG profile at ``quantile`` on ``grid``."""
    col = quantile_column(quantile)
    out: dict[str, dict[str, np.ndarray]] = {}
    for w in config.workloads:
        profile = workload_profile(w)
        fc = forecasts.get(w.signal)
        if profile is None or fc is None:
            continue
        series = fc.frame[col] if col in fc.frame.columns else fc.quantile(quantile)
        replicas = replicas_for(w, on_grid(series, grid))
        model = gpu_model(w.gpu_model).name
        per = out.setdefault(model, {})
        per[profile] = per.get(profile, np.zeros(len(grid))) + replicas
    return out


# --- the layout problem -----------------------------------------------------------


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


def _evaluate(
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
    return _evaluate(model, gpus, assignment, demand, costs, "exact", time.perf_counter() - t0)


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
        return _evaluate(model, gpus, _reassign(gpus, assignment), demand, costs, "heuristic", 0.0)

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


def _capacity(assigned: Iterable[Layout | None]) -> dict[str, int]:
    cap: dict[str, int] = {}
    for lay in assigned:
        if lay is None:
            continue
        for p, n in [("whole", 1)] if lay.whole else lay.counts:
            cap[p] = cap.get(p, 0) + n
    return cap


def _weighted(model: str, counts: Mapping[str, int]) -> float:
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


def _solve_forced(
    model: str,
    gpus: Sequence[GpuState],
    forced: Mapping[int, Layout],
    demand: Mapping[str, int],
    costs: Costs,
    method: str,
    allow_changes: bool,
) -> LayoutSolution:
    """``solve_layouts`` with the GPUs in ``forced`` given their layout (and used)."""
    if not forced:
        return solve_layouts(model, gpus, demand, costs, method, allow_changes)
    rest = [i for i in range(len(gpus)) if i not in forced]
    held = _capacity(forced.values())
    remaining = {p: max(0, int(n) - held.get(p, 0)) for p, n in demand.items()}
    sub = solve_layouts(model, [gpus[i] for i in rest], remaining, costs, method, allow_changes)
    assignment: list[Layout | None] = [None] * len(gpus)
    for i, lay in forced.items():
        assignment[i] = lay
    for j, i in enumerate(rest):
        assignment[i] = sub.assignment[j]
    return _evaluate(model, gpus, assignment, demand, costs, sub.solver, sub.seconds)


def _uniform_choice(
    model: str,
    gpus: Sequence[GpuState],
    sol: LayoutSolution,
    span: range,
    demand: Mapping[str, int],
    costs: Costs,
) -> Layout:
    """The one layout a ``single``-strategy node takes on every GPU in ``span`` of ``sol``.

    Of the layouts the solver wanted to move its GPUs to, the one that leaves ``sol``
    cheapest (least uncovered demand, then fewest GPU-hours), then the one it wanted on
    most GPUs.
    """
    wanted = [a for i in span if (a := sol.assignment[i]) is not None and a != gpus[i].current]

    def cost(lay: Layout) -> float:
        trial = list(sol.assignment)
        for i in span:
            trial[i] = lay
        return _evaluate(model, gpus, trial, demand, costs, sol.solver, 0.0).cost

    return min(set(wanted), key=lambda lay: (cost(lay), -wanted.count(lay), lay.name))


def solve_node_layouts(
    model: str,
    nodes: Sequence[MigNode],
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    costs: Costs = Costs(),
    method: str = "auto",
    allow_changes: bool = True,
) -> LayoutSolution:
    """Layouts per GPU (as :func:`solve_layouts`) where a ``mig.strategy=single`` node is uniform.

    With ``single`` the device plugin advertises MIG devices as ``nvidia.com/gpu`` and needs
    every GPU of the node alike. The solver keeps each such GPU to one profile; a node it
    would still leave with GPUs that differ is given one layout on all its GPUs (the one it
    wanted on most of them) and the rest of the fleet is solved again around it, until no
    such node is left (at most once per node).
    """
    forced: dict[int, Layout] = {}
    sol = _solve_forced(model, gpus, forced, demand, costs, method, allow_changes)
    for _ in range(len(nodes)):
        k = 0
        added = False
        for n in nodes:
            span = range(k, k + len(n.current))
            k += len(n.current)
            if n.strategy != "single" or span.start in forced:
                continue
            tgt = [sol.assignment[i] or n.current[i - span.start] for i in span]
            if tgt == n.current or not needs_mixed_strategy(tgt):
                continue
            lay = _uniform_choice(model, gpus, sol, span, demand, costs)
            forced.update(dict.fromkeys(span, lay))
            added = True
        if not added:
            break
        sol = _solve_forced(model, gpus, forced, demand, costs, method, allow_changes)
    return _single_strategy(model, nodes, gpus, sol, demand, costs)


def _single_strategy(
    model: str,
    nodes: Sequence[MigNode],
    gpus: Sequence[GpuState],
    sol: LayoutSolution,
    demand: Mapping[str, int],
    costs: Costs,
) -> LayoutSolution:
    """``sol`` with nodes on ``mig.strategy=single`` kept as they are where it mixes profiles.

    The last guard behind :func:`solve_node_layouts`: a node whose GPUs would still
    differ from each other, which ``single`` cannot advertise, is left as it is.
    """
    assignment = list(sol.assignment)
    blocked: list[str] = []
    k = 0
    for n in nodes:
        span = range(k, k + len(n.current))
        k += len(n.current)
        if n.strategy != "single":
            continue
        tgt = [assignment[i] or n.current[i - span.start] for i in span]
        if tgt != n.current and needs_mixed_strategy(tgt):
            blocked.append(n.name)
            for i in span:
                assignment[i] = n.current[i - span.start]
    if not blocked:
        return sol
    out = _evaluate(model, gpus, assignment, demand, costs, sol.solver, sol.seconds)
    out.blocked = blocked
    return out


# --- timing -------------------------------------------------------------------------


def quiet_window(load: np.ndarray, width: int, last_start: int) -> int:
    """Start index of the ``width``-step window with the least total load, starting by ``last_start``."""
    width = max(1, width)
    last_start = max(0, min(last_start, len(load) - width))
    sums = np.convolve(load, np.ones(width), mode="valid")[: last_start + 1]
    return int(np.argmin(sums)) if len(sums) else 0


# --- the plan's MIG section ---------------------------------------------------------


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
    pool: PoolConfig
    name: str
    current: list[Layout]
    new: bool
    label: str | None = None
    strategy: str | None = None
    held: str | None = None


@dataclass
class MigPlan:
    actions: list[Action] = field(default_factory=list)
    section: dict[str, Any] = field(default_factory=dict)


def mig_pools(config: Config) -> list[PoolConfig]:
    return [p for p in config.pools if p.mig_layouts is not None]


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


def _nodes(
    pool: PoolConfig, known: Sequence[MigNodeState], current_nodes: int, target_nodes: int
) -> list[MigNode]:
    shrinking = target_nodes < current_nodes
    out = [
        MigNode(
            pool,
            n.name,
            list(n.current),
            False,
            n.mig_config,
            n.strategy,
            n.held
            or (
                f"pool {pool.name} scales down {current_nodes} -> {target_nodes} this cycle; "
                "its layouts wait until it settles"
                if shrinking
                else None
            ),
        )
        for n in known
    ]
    # Nodes still to come are named when they join; their layout is set on arrival, under
    # the MIG strategy the pool's nodes share (the ClusterPolicy's, as a rule).
    strategies = {n.strategy for n in known}
    strategy = next(iter(strategies)) if len(strategies) == 1 else None
    for k in range(len(out), target_nodes):
        whole = [Layout(whole=True)] * pool.gpus_per_node
        out.append(MigNode(pool, f"{pool.name}-new-{k}", whole, True, strategy=strategy))
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


def plan_mig(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    targets: Mapping[str, int] | None = None,
    method: str = "auto",
    stale: set[str] | None = None,
    node_states: Mapping[str, Sequence[MigNodeState]] | None = None,
    known_configs: Mapping[str, Any] | None = None,
) -> MigPlan:
    """MIG layout actions and the plan's ``mig`` section for every MIG-managed pool.

    ``stale`` names signals whose data is stale or missing: the layouts of a GPU model
    fed by one are held (never re-partitioned on bad data). ``node_states`` are the
    pools' real nodes read from the cluster (names, current layouts, MIG strategy, a
    change in progress); a pool without an entry is read from its ``mig_layouts``
    (the dry-run without a cluster). ``known_configs`` are the entries of the
    mig-parted config the MIG manager reads: target layouts already there are named
    as there, the others get ``tiercast-`` names and their entries in the actions.
    A pool the tier plan shrinks this cycle keeps its layouts, since which node goes
    is the provider's choice; a node with ``mig.strategy=single`` only gets layouts of
    one profile on every GPU.
    """
    pools = mig_pools(config)
    if not pools:
        return MigPlan()
    policy = config.policy
    now = pd.Timestamp(now)
    grid = planning_grid(now, policy.horizon_s, policy.cycle_s)
    demand = slice_demand(config, forecasts, grid, policy.quantile)
    held_by_model = _held_signals(config.workloads, forecasts, stale or set())
    plan = MigPlan()
    configs: dict[str, list[dict]] = {}
    labels: dict[str, str] = {}
    section_pools: dict[str, Any] = {}
    for model in sorted({gpu_model(p.gpu_model).name for p in pools}):
        geometry(model)
        group = [p for p in pools if gpu_model(p.gpu_model).name == model]
        nodes = _group_nodes(group, inventory, targets or {}, node_states)
        ctx = _MigContext(
            model=model,
            now=now,
            grid=grid,
            qname=quantile_column(policy.quantile),
            horizon_h=policy.horizon_s / 3600,
            step_s=policy.cycle_s,
            change_s=max(p.mig_change_s for p in group),
            lead_s=max(p.lead_time_s for p in group),
            inventory=inventory,
            known_configs=known_configs,
        )
        out = _plan_model(ctx, group, nodes, demand.get(model, {}), method, held_by_model[model])
        plan.actions += out.actions
        configs.update(out.configs)
        labels.update(out.labels)
        section_pools[model] = out.section
    plan.section = {
        "quantile": policy.quantile,
        "models": section_pools,
        "node_labels": dict(sorted(labels.items())),
        "mig_parted_config": {"version": "v1", "mig-configs": dict(sorted(configs.items()))},
    }
    return plan


def _held_signals(
    workloads: Iterable[WorkloadConfig], forecasts: Mapping[str, SeriesForecast], stale: set[str]
) -> defaultdict[str, list[str]]:
    """Per GPU model, its MIG workloads' signals that are stale or missing, sorted."""
    held: defaultdict[str, list[str]] = defaultdict(list)
    for w in workloads:
        if w.mig_profile is not None and (w.signal in stale or w.signal not in forecasts):
            held[gpu_model(w.gpu_model).name].append(w.signal)
    for signals in held.values():
        signals.sort()
    return held


def _group_nodes(
    group: Sequence[PoolConfig],
    inventory: Mapping[str, int],
    targets: Mapping[str, int],
    node_states: Mapping[str, Sequence[MigNodeState]] | None,
) -> list[MigNode]:
    """The nodes of a GPU model's MIG pools: read from the cluster where ``node_states``
    has the pool, else from its ``mig_layouts``; nodes still to come as new ones."""
    nodes: list[MigNode] = []
    for p in group:
        current = int(inventory.get(p.name, p.min_nodes))
        if node_states is not None and p.name in node_states:
            known = list(node_states[p.name])
        else:
            known = configured_nodes(p, current)
        nodes += _nodes(p, known, current, int(targets.get(p.name, current)))
    return nodes


@dataclass(frozen=True)
class _MigContext:
    """What one GPU model's MIG plan shares across its steps."""

    model: str
    now: pd.Timestamp
    grid: pd.DatetimeIndex
    qname: str
    horizon_h: float
    step_s: int
    change_s: int
    """The longest drain and re-partition time of the model's pools."""
    lead_s: int
    """The longest lead time of the model's pools."""
    inventory: Mapping[str, int]
    known_configs: Mapping[str, Any] | None


@dataclass
class _ModelMig:
    """One GPU model's share of the MIG plan."""

    actions: list[Action] = field(default_factory=list)
    configs: dict[str, list[dict]] = field(default_factory=dict)
    """mig-parted entries to add, by name."""
    labels: dict[str, str] = field(default_factory=dict)
    """``nvidia.com/mig.config`` per node."""
    section: dict[str, Any] = field(default_factory=dict)


def _plan_model(
    ctx: _MigContext,
    group: Sequence[PoolConfig],
    nodes: list[MigNode],
    series: dict[str, np.ndarray],
    method: str,
    held: list[str],
) -> _ModelMig:
    """One GPU model: its slice demand, target layouts per GPU, when to change, and the
    actions with their reasons."""
    model = ctx.model
    gpus = [
        GpuState(lay, n.new, fixed=n.held is not None, single=n.strategy == "single")
        for n in nodes
        for lay in n.current
    ]
    need = _peak_need(series, sum(p.mig_whole_gpus for p in group))
    costs = Costs(used_gpu_h=ctx.horizon_h, change_gpu_h=ctx.change_s / 3600)
    best = solve_node_layouts(model, nodes, gpus, need, costs, method)
    keep = solve_node_layouts(model, nodes, gpus, need, costs, method, allow_changes=False)
    timing = _when_to_change(ctx, series, gpus, best, keep, held)
    chosen = best if timing.mode in ("cover", "save") else keep
    out = _ModelMig()
    unchanged: dict[str, list[str]] = {p.name: [] for p in group}
    pool_nodes: list[dict[str, Any]] = []
    for n, tgt in zip(nodes, _node_targets(nodes, chosen), strict=True):
        t = _name_target(ctx, n, tgt)
        if not t.in_config:
            out.configs[t.target] = t.entry
        out.labels[n.name] = t.target
        pool_nodes.append(_node_entry(t))
        if t.changed:
            out.actions.append(_relayout_action(ctx, t, need, timing))
        else:
            unchanged[n.pool.name].append(n.name)
    keep_why = _keep_reason(timing, chosen, best, nodes)
    cap = chosen.capacity()
    for p in group:
        if not unchanged[p.name] and any(n.pool is p for n in nodes):
            continue
        out.actions.append(_unchanged_action(ctx, p, unchanged[p.name], need, cap, keep_why))
    out.section = {
        "pools": [p.name for p in group],
        "demand_peak_instances": {p: int(n) for p, n in sorted(need.items())},
        "demand_instances": {p: [round(float(x), 3) for x in v] for p, v in sorted(series.items())},
        "capacity_instances": {p: int(n) for p, n in sorted(cap.items())},
        "shortfall_instances": dict(sorted(chosen.shortfall.items())),
        "gpus": len(gpus),
        "gpus_used": chosen.used,
        "gpus_changed": chosen.changed,
        "gpus_used_without_changes": keep.used,
        "decision": timing.mode,
        "solver": chosen.solver,
        "window": {"start": iso(timing.window_at), "end": iso(timing.window_end)},
        "saved_gpu_hours": round(timing.saved_h, 3),
        "drain_gpu_hours": round(timing.drain_h, 3),
        "nodes": pool_nodes,
    }
    return out


def _peak_need(series: Mapping[str, np.ndarray], keep_whole: int) -> dict[str, int]:
    """Instances per profile the layouts must hold: the peak over the horizon (layouts
    hold for hours), and the whole GPUs kept for whole-GPU work."""
    peak = {p: math.ceil(float(v.max()) - 1e-9) for p, v in series.items()}
    need = {p: n for p, n in peak.items() if n > 0}
    if keep_whole:
        need["whole"] = keep_whole
    return need


@dataclass(frozen=True)
class _Timing:
    """Whether and when a GPU model's layouts change."""

    mode: str
    """``held``, ``fits``, ``cover``, ``save`` or ``not-worth``."""
    start: int
    """The grid step the change window starts at."""
    window_at: pd.Timestamp
    window_end: pd.Timestamp
    saved_h: float
    """GPU-hours the change saves over the horizon."""
    drain_h: float
    """GPU-hours its drains cost."""
    held: list[str]
    """Signals stale or missing (the layouts hold)."""

    @property
    def act_now(self) -> bool:
        return self.mode in ("cover", "save") and self.start == 0


def _when_to_change(
    ctx: _MigContext,
    series: Mapping[str, np.ndarray],
    gpus: Sequence[GpuState],
    best: LayoutSolution,
    keep: LayoutSolution,
    held: list[str],
) -> _Timing:
    """A change needed for coverage goes in the lowest-demand window before the current
    layouts fall short; one that only saves GPUs in the lowest-demand window of the
    horizon, and only when it saves more GPU-hours than its drains cost."""
    model, grid, change_s = ctx.model, ctx.grid, ctx.change_s
    # Load per step (GPU-equivalents), for the quiet window and the coverage deadline.
    w = {p: gpu_fraction(model, p) for p in series}
    load = sum((w[p] * v for p, v in series.items()), np.zeros(len(grid)))
    # What the GPUs hold today, used or not: the layouts fall short when demand passes it.
    now_cap = _capacity(g.current for g in gpus if not g.new)
    short_at = [
        i for i in range(len(grid)) if any(series[p][i] > now_cap.get(p, 0) + 1e-9 for p in series)
    ]
    width = max(1, math.ceil(change_s / ctx.step_s))
    needed_for_cover = _weighted(model, keep.shortfall) > _weighted(model, best.shortfall) + 1e-9
    saved_h = (keep.used - best.used) * max(0.0, ctx.horizon_h - change_s / 3600)
    drain_h = best.changed * change_s / 3600
    start = 0
    if held:
        mode = "held"
    elif best.changed == 0:
        mode = "fits"
    elif needed_for_cover:
        mode = "cover"
        deadline = short_at[0] if short_at else len(grid) - 1
        start = quiet_window(load, width, deadline - width)
    elif saved_h > drain_h:
        mode = "save"
        start = quiet_window(load, width, len(grid) - width)
    else:
        mode = "not-worth"
    window_at = grid[min(start, len(grid) - 1)]
    window_end = window_at + pd.Timedelta(seconds=change_s)
    return _Timing(mode, start, window_at, window_end, saved_h, drain_h, held)


def _node_targets(nodes: Sequence[MigNode], chosen: LayoutSolution) -> list[list[Layout]]:
    """Per node, the layout of each GPU in ``chosen`` (a GPU it leaves unused keeps its own)."""
    out: list[list[Layout]] = []
    k = 0
    for n in nodes:
        out.append(
            [
                lay if (a := chosen.assignment[k + i]) is None else a
                for i, lay in enumerate(n.current)
            ]
        )
        k += len(n.current)
    return out


@dataclass(frozen=True)
class _NodeTarget:
    """One node's target layouts and the ``nvidia.com/mig.config`` names of both ends."""

    node: MigNode
    layouts: list[Layout]
    changed: int
    """GPUs whose layout changes."""
    current: str
    target: str
    in_config: bool
    """Whether the known mig-parted config has the target already."""
    entry: list[dict]
    """The target's mig-parted entry."""


def _name_target(ctx: _MigContext, n: MigNode, tgt: list[Layout]) -> _NodeTarget:
    """Node ``n`` going to ``tgt``, its current and target layouts named."""
    model, known_configs = ctx.model, ctx.known_configs
    changed = sum(1 for a, b in zip(n.current, tgt, strict=True) if a != b)
    if changed:
        tgt_name, in_config = resolve_config_name(model, tgt, known_configs)
        cur_name = n.label or resolve_config_name(model, n.current, known_configs)[0]
    else:
        cur_name = n.label or resolve_config_name(model, n.current, known_configs)[0]
        tgt_name, in_config = cur_name, n.label is not None
    return _NodeTarget(n, tgt, changed, cur_name, tgt_name, in_config, mig_parted_entry(tgt))


def _node_entry(t: _NodeTarget) -> dict[str, Any]:
    """The node's entry in the plan's MIG section."""
    n = t.node
    return {
        "node": n.name,
        "pool": n.pool.name,
        "new": n.new,
        "current": t.current,
        "target": t.target,
        "gpus_changed": t.changed,
        "layouts": [lay.spec() for lay in t.layouts],
        "strategy": n.strategy,
        "held": n.held,
    }


def _relayout_action(
    ctx: _MigContext, t: _NodeTarget, need: Mapping[str, int], timing: _Timing
) -> Action:
    """The ``mig-layout`` action of a node whose layouts change: now, in a later window,
    or on arrival for a node still to come."""
    n, model, change_s = t.node, ctx.model, ctx.change_s
    window_txt = f"{timing.window_at:%H:%M}-{timing.window_end:%H:%M}Z"
    current_nodes = int(ctx.inventory.get(n.pool.name, n.pool.min_nodes))
    if n.new:
        # A node still booting is labelled when it joins: nothing to drain.
        decision, at, when = "no-op", ctx.now, "label it when the node joins (no drain)"
    elif timing.act_now:
        decision, at, when = (
            "relayout",
            ctx.now,
            f"now, in the lowest-demand window {window_txt}",
        )
    else:
        decision, at, when = (
            "no-op",
            timing.window_at,
            f"scheduled for the lowest-demand window {window_txt}",
        )
    if n.strategy == "single":
        when += " (one layout on every GPU: the node's mig.strategy is single)"
    if timing.mode == "cover":
        why = "needed before the current layouts fall short"
    else:
        why = f"saves {timing.saved_h:.1f} GPU-h against {timing.drain_h:.1f} GPU-h of drain"
    return Action(
        pool=n.pool.name,
        decision=decision,  # type: ignore[arg-type]
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(at),
        needed_at=iso(at + pd.Timedelta(seconds=change_s)),
        cost_delta_per_hour=0.0,
        reason=(
            f"{ctx.qname} MIG demand for {model} peaks at {_demand_text(need)}; node {n.name} "
            f"{t.current} -> {t.target} ({t.changed} GPU(s); drain + re-partition "
            f"{change_s / 60:.0f} min, lead time {ctx.lead_s / 60:.0f} min) {when}; {why}; "
            "spend unchanged (+0.00/h)"
        ),
        kind="mig-layout",
        details={
            "node": n.name,
            "layout": t.target,
            "from": t.current,
            "label": {"nvidia.com/mig.config": t.target},
            "mig_parted_entry": t.entry,
            "in_mig_parted_config": t.in_config,
            "needs_mixed_strategy": needs_mixed_strategy(t.layouts),
            "gpus_changed": t.changed,
            "window_start": iso(timing.window_at),
            "window_end": iso(timing.window_end),
            "new_node": n.new,
        },
    )


def _demand_text(need: Mapping[str, int]) -> str:
    return ", ".join(f"{n} x {p}" for p, n in sorted(need.items())) or "no instances"


def _keep_reason(
    timing: _Timing, chosen: LayoutSolution, best: LayoutSolution, nodes: Sequence[MigNode]
) -> str:
    """Why the nodes that keep their layouts keep them."""
    if timing.mode == "held":
        keep_why = f"signal(s) {', '.join(timing.held)} stale or missing; holding the layouts"
    elif timing.mode == "not-worth":
        keep_why = (
            f"a relayout would save {timing.saved_h:.1f} GPU-h but cost {timing.drain_h:.1f} GPU-h "
            "of drain; keeping the current layouts"
        )
    elif chosen.shortfall:
        short = ", ".join(f"{n} x {p}" for p, n in sorted(chosen.shortfall.items()))
        keep_why = f"the pool's GPUs cannot hold it all: short {short}"
    else:
        keep_why = "the layouts cover it"
    holds = sorted({f"{n.name}: {n.held}" for n in nodes if n.held})
    if holds:
        keep_why += "; held: " + "; ".join(holds)
    if best.blocked:
        keep_why += (
            f"; {', '.join(best.blocked)} would need mig.strategy=mixed "
            "(the GPU Operator's ClusterPolicy has single): not re-partitioned"
        )
    return keep_why


def _unchanged_action(
    ctx: _MigContext,
    pool: PoolConfig,
    unchanged: list[str],
    need: Mapping[str, int],
    cap: Mapping[str, int],
    keep_why: str,
) -> Action:
    """The pool's ``no-op`` action for its nodes that keep their layouts."""
    p = pool
    cap_txt = ", ".join(f"{cap.get(x, 0)} x {x}" for x in sorted(need)) or "none"
    current_nodes = int(ctx.inventory.get(p.name, p.min_nodes))
    return Action(
        pool=p.name,
        decision="no-op",
        current_nodes=current_nodes,
        target_nodes=current_nodes,
        at=iso(ctx.now),
        needed_at=iso(ctx.now + pd.Timedelta(seconds=p.lead_time_s)),
        cost_delta_per_hour=0.0,
        reason=(
            f"{len(unchanged)} node(s) keep their MIG layouts: {ctx.qname} MIG "
            f"demand for {ctx.model} peaks at {_demand_text(need)}, capacity {cap_txt} "
            f"(lead time {p.lead_time_s / 60:.0f} min); {keep_why}"
        ),
        kind="mig-layout",
        details={"layout": "unchanged", "nodes": unchanged},
    )
