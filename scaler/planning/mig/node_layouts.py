"""Layouts per GPU where a node's MIG strategy binds: ``mig.strategy=single`` nodes uniform.

With ``single`` the device plugin advertises MIG devices as ``nvidia.com/gpu`` and needs
every GPU of the node alike, so the per-GPU solution of ``layouts`` is solved again
around such nodes, and a node still left mixed keeps its layouts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scaler.catalog.mig import Layout, needs_mixed_strategy
from scaler.planning.mig.layouts import (
    Costs,
    GpuState,
    LayoutSolution,
    capacity_of,
    evaluate,
    solve_layouts,
)
from scaler.planning.mig.state import MigNode


def solve_node_layouts(
    model: str,
    nodes: Sequence[MigNode],
    gpus: Sequence[GpuState],
    demand: Mapping[str, int],
    costs: Costs = Costs(),  # noqa: B008  # frozen, so one shared default is safe
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
    held = capacity_of(forced.values())
    remaining = {p: max(0, int(n) - held.get(p, 0)) for p, n in demand.items()}
    sub = solve_layouts(model, [gpus[i] for i in rest], remaining, costs, method, allow_changes)
    assignment: list[Layout | None] = [None] * len(gpus)
    for i, lay in forced.items():
        assignment[i] = lay
    for j, i in enumerate(rest):
        assignment[i] = sub.assignment[j]
    return evaluate(model, gpus, assignment, demand, costs, sub.solver, sub.seconds)


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
        return evaluate(model, gpus, trial, demand, costs, sol.solver, 0.0).cost

    return min(set(wanted), key=lambda lay: (cost(lay), -wanted.count(lay), lay.name))


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
    out = evaluate(model, gpus, assignment, demand, costs, sol.solver, sol.seconds)
    out.blocked = blocked
    return out
