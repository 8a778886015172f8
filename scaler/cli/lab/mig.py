"""``tiercast bench-mig``: the MIG layout planner's exact solver against its heuristic.

Random slice-demand instances on mixed A100-80GB/H100-80GB fleets (half each): every
GPU starts whole (30%) or in a random maximal layout, and the demand is the instance
counts of random layouts on about 60% of the GPUs, so a cover always exists. Both
solvers get the same instances and the same costs (a used GPU costs the 24 h horizon,
a changed one its 15 min drain). The table gives GPUs used and changed by each, the
heuristic's gap in GPUs to the exact answer, and solve times; the exact solver is the
baseline the heuristic's figures are measured against in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

from forecaster.errors import BadInputError
from forecaster.tables import aligned
from scaler.catalog.mig import Layout, layouts
from scaler.planning.mig.layouts import Costs, GpuState, solve_exact, solve_heuristic

MODELS = ("A100-80GB", "H100-80GB")


@dataclass
class Instance:
    model: str
    gpus: list[GpuState]
    demand: dict[str, int]


def random_instances(n_gpus: int, seed: int) -> list[Instance]:
    """One instance per GPU model, ``n_gpus`` split between them."""
    rng = random.Random(seed)
    out = []
    for k, model in enumerate(MODELS):
        n = n_gpus // len(MODELS) + (1 if k < n_gpus % len(MODELS) else 0)
        options = list(layouts(model))
        gpus = [
            GpuState(Layout(whole=True) if rng.random() < 0.3 else rng.choice(options))
            for _ in range(n)
        ]
        demand: dict[str, int] = {}
        for _ in range(max(1, round(0.6 * n))):
            for p, c in rng.choice(options).counts:
                demand[p] = demand.get(p, 0) + c
        # Thin the demand a little so that covers are not all exact fits.
        demand = {p: max(1, int(c * rng.uniform(0.7, 1.0))) for p, c in demand.items()}
        out.append(Instance(model, gpus, demand))
    return out


def run_benchmark(
    sizes: tuple[int, ...], seeds: int, time_limit_s: float, costs: Costs | None = None
) -> list[dict[str, Any]]:
    costs = costs or Costs()
    rows = []
    for n in sizes:
        ex_used, he_used, ex_chg, he_chg, gaps = [], [], [], [], []
        ex_t, he_t = [], []
        unfinished = 0
        for seed in range(seeds):
            ex_total = he_total = ex_c = he_c = 0
            finished = True
            for inst in random_instances(n, seed):
                t0 = time.perf_counter()
                ex = solve_exact(
                    inst.model, inst.gpus, inst.demand, costs, time_limit_s=time_limit_s
                )
                ex_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                he = solve_heuristic(inst.model, inst.gpus, inst.demand, costs)
                he_t.append(time.perf_counter() - t0)
                he_total += he.used
                he_c += he.changed
                if ex is None:
                    finished = False
                    continue
                ex_total += ex.used
                ex_c += ex.changed
            he_used.append(he_total)
            he_chg.append(he_c)
            if finished:
                ex_used.append(ex_total)
                ex_chg.append(ex_c)
                gaps.append(100.0 * (he_total - ex_total) / max(1, ex_total))
            else:
                unfinished += 1
        rows.append(
            {
                "gpus": n,
                "instances": seeds,
                "exact_finished": seeds - unfinished,
                "exact_used": statistics.mean(ex_used) if ex_used else float("nan"),
                "heuristic_used": statistics.mean(he_used),
                "gap_mean_pct": statistics.mean(gaps) if gaps else float("nan"),
                "gap_max_pct": max(gaps) if gaps else float("nan"),
                "exact_changed": statistics.mean(ex_chg) if ex_chg else float("nan"),
                "heuristic_changed": statistics.mean(he_chg),
                "exact_s_max": max(ex_t),
                "heuristic_s_max": max(he_t),
                "time_ratio": statistics.mean(he_t) / max(1e-9, statistics.mean(ex_t)),
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The benchmark's table: one row per fleet size, every column right-aligned."""
    head = (
        "GPUS",
        "RUNS",
        "EXACT OK",
        "USED exact",
        "USED heur",
        "GAP mean",
        "GAP max",
        "CHANGED exact",
        "CHANGED heur",
        "TIME exact max",
        "TIME heur max",
        "heur/exact time",
    )
    body = [
        (
            str(r["gpus"]),
            str(r["instances"]),
            str(r["exact_finished"]),
            f"{r['exact_used']:.1f}",
            f"{r['heuristic_used']:.1f}",
            f"{r['gap_mean_pct']:+.1f}%",
            f"{r['gap_max_pct']:+.1f}%",
            f"{r['exact_changed']:.1f}",
            f"{r['heuristic_changed']:.1f}",
            f"{r['exact_s_max']:.3f} s",
            f"{r['heuristic_s_max']:.3f} s",
            f"{r['time_ratio']:.2f}x",
        )
        for r in rows
    ]
    return "\n".join(aligned([head, *body], right=range(len(head))))


def cmd_bench_mig(args: argparse.Namespace) -> int:
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
    except ValueError:
        raise BadInputError(
            f"--sizes: {args.sizes!r} is not a list of GPU counts like 8,64,512"
        ) from None
    if not sizes or min(sizes) < 1 or args.seeds < 1:
        raise BadInputError("--sizes and --seeds must be positive")
    rows = run_benchmark(sizes, args.seeds, args.time_limit)
    print(
        f"MIG layout planner: exact (scipy milp, limit {args.time_limit:g} s) vs heuristic; "
        f"{args.seeds} random instance(s) per fleet size, A100-80GB/H100-80GB half each; "
        "GAP = heuristic GPUs used over exact, per instance"
    )
    print(format_table(rows))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench-mig",
        help="benchmark the MIG layout planner: exact solver vs heuristic (prints a table)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sizes", default="8,64,512", help="fleet sizes in GPUs (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=5, help="random instances per size (default: 5)")
    p.add_argument(
        "--time-limit", type=float, default=10.0, help="exact solver limit in seconds (default: 10)"
    )
    p.set_defaults(func=cmd_bench_mig)
