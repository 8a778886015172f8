"""From forecasts to target capacity: a pure function of values, never of the world.

- ``demand``: forecast quantiles of signals into GPUs (or MIG slices) needed per GPU model;
- ``margins``: how far above the newest observation to provision, learned per series;
- ``tiers``: the tier planner, nodes per pool (reserved, on-demand, spot) -> ``CapacityPlan``,
  as named steps in ``need`` (the need per GPU model), ``bounds`` (earlier cycles, reserved
  pools, the budget), ``solver`` (the MILP and its greedy fallback), ``binding`` (which bound
  binds, the shortfall), ``reasons`` (every note and reason string) and ``cost_and_risk``;
- ``coverage``: what a pool's nodes count for (spot reclaim spares, effective GPUs);
- ``mig``: target MIG layouts per GPU and when to change them (a subpackage: slice
  demand, the layout solvers, timing, the actions and ``plan_mig``).

May import ``scaler.config``, ``scaler.catalog``, ``scaler.plans`` and ``forecaster``;
nothing here talks to Kubernetes or a GPU (import-linter's layers contract).
"""
